import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One HTTP request to a hub, as ``HubHTTP`` carries it.
public struct HubHTTPRequest: Sendable {
    public var method: String
    public var url: URL
    /// Header names as written (`Authorization`, `Content-Type`).
    public var headers: [String: String]
    public var body: [UInt8]
    /// How long the exchange may take before it fails as unreachable.
    public var timeoutSeconds: Double
    /// How long the hub may hold the request before it answers (a long poll's
    /// `wait`); 0 for one it answers at once.
    public var heldSeconds: Double = 0

    public init(method: String, url: URL, headers: [String: String] = [:], body: [UInt8] = [], timeoutSeconds: Double) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutSeconds = timeoutSeconds
    }
}

/// What a hub answered: the status, its headers (names lower-cased) and body.
public struct HubAnswer: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let body: [UInt8]

    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as a JSON object (empty when it is not one).
    public var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }

    /// HUB-API's error code and message, when the answer is a refusal.
    public var refusal: (code: String, message: String)? {
        guard let error = json["error"] as? [String: Any], let code = error["code"] as? String else { return nil }
        return (code, error["message"] as? String ?? "")
    }

    /// `Retry-After` in seconds, when the hub set it (HUB-API: `429`, `503`).
    public var retryAfterSeconds: Double? { headers["retry-after"].flatMap(Double.init) }
}

/// Carries one request to a hub and its answer back: Foundation's `URLSession`
/// in an app (``URLSessionHubHTTP``); a test wraps it to count requests or to
/// fail them. `completion` runs once, on any thread.
public protocol HubHTTP: Sendable {
    func perform(_ request: HubHTTPRequest, completion: @escaping @Sendable (Result<HubAnswer, HubClientError>) -> Void)
}

/// ``HubHTTP`` over Foundation's `URLSession` (FoundationNetworking on Linux):
/// what Swift apps already use, with its connection reuse and TLS.
///
/// A request the hub holds (a long poll, ``HubHTTPRequest/heldSeconds``) goes on
/// a session of its own with one connection, opened by a quick `GET /v1/health`
/// first when it may be closed. FoundationNetworking (through 6.3) watches a
/// socket for writing while libcurl connects and never stops watching it when
/// libcurl then asks only to read: a request that opens its connection keeps a
/// core busy until it is answered, which for a long poll is its whole wait (a
/// `stele sync` at 94 % CPU for a minute at a time). A request on a connection
/// an earlier request opened is watched for reading alone.
public final class URLSessionHubHTTP: HubHTTP {
    private let session: URLSession
    /// Sessions for held requests, one connection each, with when their connection
    /// was last known open; at most ``maximumHeldSessions`` are kept.
    private let heldSessions = Mutex<[(session: URLSession, openedAt: Double)]>([])
    private let warmsHeldConnections: Bool
    static let maximumHeldSessions = 4
    /// How long a held session's connection is taken to stay open after an answer:
    /// well inside the hub's 90 s idle limit (HUB-API "Limits").
    static let openForSeconds = 30.0

    /// - Parameter maximumConnections: connections kept open to the hub for the
    ///   requests it answers at once (held ones have their own).
    public convenience init(maximumConnections: Int = 6) {
        self.init(maximumConnections: maximumConnections, warmsHeldConnections: true)
    }

    /// `warmsHeldConnections: false` sends a held request as any other: the
    /// test that shows the spin above uses it.
    init(maximumConnections: Int, warmsHeldConnections: Bool) {
        session = Self.makeSession(maximumConnections: maximumConnections)
        self.warmsHeldConnections = warmsHeldConnections
    }

    private static func makeSession(maximumConnections: Int) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpMaximumConnectionsPerHost = maximumConnections
        // Each request sets its own timeout (a long poll's is longer than its wait).
        configuration.timeoutIntervalForRequest = 120
        return URLSession(configuration: configuration)
    }

    deinit {
        session.finishTasksAndInvalidate()
        for held in heldSessions.withLock({ $0 }) { held.session.finishTasksAndInvalidate() }
    }

    public func perform(_ request: HubHTTPRequest, completion: @escaping @Sendable (Result<HubAnswer, HubClientError>) -> Void) {
        guard request.heldSeconds > 0, warmsHeldConnections else { return Self.send(request, on: session, completion: completion) }
        let now = Date().timeIntervalSince1970
        let taken = heldSessions.withLock { $0.popLast() } ?? (session: Self.makeSession(maximumConnections: 1), openedAt: -.infinity)
        let held = taken.session
        let hold: @Sendable () -> Void = { [self] in
            Self.send(request, on: held) { [self] result in
                // An answer leaves the connection open (an error may have closed it).
                let answered = if case .success(let answer) = result, answer.status < 500 { true } else { false }
                let back = (session: held, openedAt: answered ? Date().timeIntervalSince1970 : -.infinity)
                let kept = heldSessions.withLock { sessions in
                    guard sessions.count < Self.maximumHeldSessions else { return false }
                    sessions.append(back)
                    return true
                }
                if !kept { held.finishTasksAndInvalidate() }
                completion(result)
            }
        }
        guard now - taken.openedAt > Self.openForSeconds, let health = URL(string: "/v1/health", relativeTo: request.url)?.absoluteURL else {
            return hold()
        }
        // Whatever it answers, the held request follows: on its connection if it opened one.
        Self.send(HubHTTPRequest(method: "GET", url: health, timeoutSeconds: min(request.timeoutSeconds, 10)), on: held) { _ in hold() }
    }

    private static func send(_ request: HubHTTPRequest, on session: URLSession, completion: @escaping @Sendable (Result<HubAnswer, HubClientError>) -> Void) {
        var urlRequest = URLRequest(url: request.url, timeoutInterval: request.timeoutSeconds)
        urlRequest.httpMethod = request.method
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        if !request.body.isEmpty || request.method == "POST" || request.method == "PUT" { urlRequest.httpBody = Data(request.body) }
        let description = "\(request.method) \(request.url.path)"
        session.dataTask(with: urlRequest) { data, response, error in
            guard let http = response as? HTTPURLResponse else {
                var failure = HubClientError(
                    .unreachable,
                    "the hub at \(request.url.host ?? "?"):\(request.url.port.map(String.init) ?? "") did not answer \(description): "
                        + "\(error?.localizedDescription ?? "no response"); check it runs and the URL is right")
                // A timeout or a connection lost half way: the request may have reached the hub.
                let code = (error as? URLError)?.code
                failure.mayHaveArrived = code == .timedOut || code == .networkConnectionLost
                completion(.failure(failure))
                return
            }
            var headers: [String: String] = [:]
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
            }
            completion(.success(HubAnswer(status: http.statusCode, headers: headers, body: [UInt8](data ?? Data()))))
        }.resume()
    }
}
