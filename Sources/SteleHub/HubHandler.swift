/// What the HTTP front calls: ``HubService`` in the hub, a bare handler in the
/// bench's baseline.
public protocol HubHandler: AnyObject, Sendable {
    /// Answers a request, or parks it as a long poll.
    func handle(_ request: HubRequest) -> HubOutcome
    /// The route's template for the request log (`POST /v1/accounts/{a}/relay/{device}`):
    /// never an id, a token or a payload.
    func template(of request: HubRequest) -> String
    /// The wakeups parked polls subscribe to.
    var wakeups: HubWakeups { get }
}

extension HubResponse {
    /// The JSON error body HUB-API gives every refusal: `{"error": {"code", "message"}}`.
    public static func error(_ status: Int, _ code: String, _ message: String, headers: [String: String] = [:]) -> HubResponse {
        error(status, code, message, headers: headers, extra: [:])
    }

    /// An error whose body carries fields beside `error` (a `409 history_rewound`'s
    /// `epoch` and `historyId`, a `409 stale`'s winning `record`).
    static func error(_ status: Int, _ code: String, _ message: String, headers: [String: String] = [:], extra: [String: Any]) -> HubResponse {
        var headers = headers
        headers["Content-Type"] = "application/json"
        var body = extra
        body["error"] = ["code": code, "message": message]
        return HubResponse(status: status, headers: headers, body: Array(HubJSON.encode(body).utf8))
    }
}
