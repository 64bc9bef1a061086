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
public final class URLSessionHubHTTP: HubHTTP {
    private let session: URLSession

    /// - Parameter maximumConnections: connections kept open to the hub (a long
    ///   poll holds one while frames go out on the others).
    public init(maximumConnections: Int = 6) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpMaximumConnectionsPerHost = maximumConnections
        // Each request sets its own timeout (a long poll's is longer than its wait).
        configuration.timeoutIntervalForRequest = 120
        session = URLSession(configuration: configuration)
    }

    deinit { session.finishTasksAndInvalidate() }

    public func perform(_ request: HubHTTPRequest, completion: @escaping @Sendable (Result<HubAnswer, HubClientError>) -> Void) {
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
