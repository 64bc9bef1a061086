/// One HTTP request as the hub's handler sees it: no sockets, so tests, the
/// fuzzer and (later) the simulator call ``HubService/handle(_:)`` directly and
/// the libmicrohttpd front (`SteleHubServer`) only translates.
public struct HubRequest: Sendable {
    /// `GET`, `POST`, ... as sent.
    public var method: String
    /// The path without the query, still percent-encoded (`/v1/accounts/…`).
    public var path: String
    /// Query parameters, decoded; a repeated name keeps its last value.
    public var query: [String: String]
    /// Header names lowercased.
    public var headers: [String: String]
    public var body: [UInt8]
    /// The first query name or value whose percent-escapes do not decode (a `%`
    /// without two hex digits after it, or escapes that are not UTF-8), as sent:
    /// the hub refuses the request (`400`) rather than read it as written.
    public var malformedQuery: String?

    public init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// Splits `target` (`/v1/x?a=1&b=2`) into path and decoded query.
    public init(method: String, target: String, headers: [String: String] = [:], body: [UInt8] = []) {
        var query: [String: String] = [:]
        var malformed: String?
        func decoded(_ text: Substring) -> String {
            if let plain = String(text).removingPercentEncoding { return plain }
            if malformed == nil { malformed = String(text) }
            return String(text)
        }
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let sides = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = decoded(sides[0])
                query[name] = sides.count == 2 ? decoded(sides[1]) : ""
            }
        }
        self.init(method: method, path: String(parts[0]), query: query, headers: headers, body: body)
        malformedQuery = malformed
    }
}

/// One HTTP answer.
public struct HubResponse: Sendable, Equatable {
    public var status: Int
    /// Extra headers (`Content-Type` included); names as sent.
    public var headers: [String: String]
    public var body: [UInt8]
    /// What went wrong inside the hub, for the operator's log only (`stele-hub
    /// serve` writes it on the request's line); never sent: it may name the
    /// database's files and statements.
    public var detail: String?

    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// What the handler makes of a request: an answer now, or a long poll to park
/// until ``HubWakeups`` signals its key or its deadline passes. The front parks
/// the connection (libmicrohttpd's suspend and resume), never a thread.
public enum HubOutcome: Sendable {
    case respond(HubResponse)
    case wait(HubWait)

    /// The answer, when there is one now.
    public var response: HubResponse? {
        if case .respond(let response) = self { return response }
        return nil
    }
}

/// A parked long poll.
public struct HubWait: Sendable {
    /// The mailbox or feed it waits on (``HubWakeups`` keys).
    public let key: String
    /// When to give up and answer ``expire``'s response, in seconds from when it was parked.
    public let waitSeconds: Double
    /// Looks again: an answer when there is one (frames arrived, the session ended,
    /// the storage failed), `nil` to keep waiting.
    public let poll: @Sendable () -> HubResponse?
    /// The answer when the wait ends with nothing new.
    public let expire: @Sendable () -> HubResponse

    public init(key: String, waitSeconds: Double, poll: @escaping @Sendable () -> HubResponse?, expire: @escaping @Sendable () -> HubResponse) {
        self.key = key
        self.waitSeconds = waitSeconds
        self.poll = poll
        self.expire = expire
    }
}
