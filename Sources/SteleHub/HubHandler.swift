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
        var headers = headers
        headers["Content-Type"] = "application/json"
        return HubResponse(status: status, headers: headers, body: Array(HubJSON.encode(["error": ["code": code, "message": message]]).utf8))
    }
}
