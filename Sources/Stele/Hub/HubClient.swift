import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One device's connection to a hub's HTTP API (HUB-API.md), through
/// Foundation's `URLSession`: it opens sessions by signing the hub's session
/// statement with the device's roster key (``HubSessionProof``), keeps the
/// token, and opens a new one when the token expires or the hub forgot it.
/// ``HubDirectory`` and ``HubAnchorStore`` are built on it. Calls block the
/// calling thread until the answer arrives (the library's `Directory` and
/// `AnchorStore` are synchronous); do not call from the main thread of an app.
public final class HubClient: Sendable {
    /// The hub's base URL, e.g. `http://127.0.0.1:8420`.
    public let hub: URL
    public let account: AccountID
    public let identity: DeviceIdentity
    /// How long one request may take.
    public let timeoutSeconds: Double

    private let token = Mutex<String?>(nil)
    private let session: URLSession

    public init(hub: URL, account: AccountID, identity: DeviceIdentity, timeoutSeconds: Double = 30) {
        self.hub = hub
        self.account = account
        self.identity = identity
        self.timeoutSeconds = timeoutSeconds
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeoutSeconds
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    /// An answer from the hub.
    public struct Answer: Sendable {
        public let status: Int
        public let headers: [String: String]
        public let body: [UInt8]

        /// The body as a JSON object (empty when it is not one).
        public var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }

        /// HUB-API's error code and message, when the answer is a refusal.
        public var refusal: (code: String, message: String)? {
            guard let error = json["error"] as? [String: Any], let code = error["code"] as? String else { return nil }
            return (code, error["message"] as? String ?? "")
        }
    }

    /// Sends one request; with `authenticated`, carries a session token and,
    /// when the hub answers 401, opens a new session and sends it once more.
    /// - Throws: ``HubClientError`` `unreachable` when no answer came.
    public func send(_ method: String, _ path: String, json: [String: Any]? = nil, body: [UInt8] = [], authenticated: Bool = true) throws -> Answer {
        let bytes: [UInt8]
        if let json {
            bytes = Array(try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys]))
        } else {
            bytes = body
        }
        let contentType = json == nil ? "application/octet-stream" : "application/json"
        guard authenticated else { return try exchange(method, path, bytes, contentType, token: nil) }
        let first = try exchange(method, path, bytes, contentType, token: try currentToken())
        guard first.status == 401 else { return first }
        token.withLock { $0 = nil }
        return try exchange(method, path, bytes, contentType, token: try currentToken())
    }

    /// The account's path prefix.
    public var accountPath: String { "/v1/accounts/\(account.hex)" }

    /// A live session token, opening a session when there is none.
    private func currentToken() throws -> String {
        if let token = token.withLock({ $0 }) { return token }
        let time = Int64(Date().timeIntervalSince1970 * 1000)
        let signature = try HubSessionProof.sign(by: identity, account: account, timeMilliseconds: time)
        let answer = try exchange(
            "POST", "\(accountPath)/sessions",
            Array(try JSONSerialization.data(withJSONObject: ["device": identity.deviceID.hex, "time": time, "signature": Data(signature).base64EncodedString()])),
            "application/json", token: nil)
        guard answer.status == 200, let fresh = answer.json["token"] as? String else {
            throw HubClientError(answer, doing: "open a session for device \(identity.deviceID.hex.prefix(8))")
        }
        token.withLock { $0 = fresh }
        return fresh
    }

    private func exchange(_ method: String, _ path: String, _ body: [UInt8], _ contentType: String, token: String?) throws -> Answer {
        guard let url = URL(string: path, relativeTo: hub) else { throw HubClientError(.unreachable, "cannot form a URL from \(hub) and \(path)") }
        var request = URLRequest(url: url, timeoutInterval: timeoutSeconds)
        request.httpMethod = method
        if !body.isEmpty || method == "POST" || method == "PUT" {
            request.httpBody = Data(body)
            request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let result = Mutex<Result<Answer, HubClientError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let task = session.dataTask(with: request) { data, response, error in
            let outcome: Result<Answer, HubClientError>
            if let http = response as? HTTPURLResponse {
                var headers: [String: String] = [:]
                for (name, value) in http.allHeaderFields {
                    if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
                }
                outcome = .success(Answer(status: http.statusCode, headers: headers, body: [UInt8](data ?? Data())))
            } else {
                outcome = .failure(HubClientError(.unreachable, "the hub at \(self.hub) did not answer \(method) \(path): \(error?.localizedDescription ?? "no response"); check it runs and the URL is right"))
            }
            result.withLock { $0 = outcome }
            done.signal()
        }
        task.resume()
        done.wait()
        guard let outcome = result.withLock({ $0 }) else { throw HubClientError(.unreachable, "no answer from \(hub)") }
        return try outcome.get()
    }
}

/// A hub request that failed: no answer, or a refusal with HUB-API's code.
public struct HubClientError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// No answer arrived (the hub is down, the URL is wrong, the network is out).
        case unreachable
        /// The hub refused: ``status`` and ``hubCode`` say how.
        case refused
    }

    public let code: Code
    /// The HTTP status, 0 when no answer came.
    public let status: Int
    /// HUB-API's error code (`forbidden`, `stale_generation`, …), empty when none.
    public let hubCode: String
    public let message: String

    public init(_ code: Code, _ message: String, status: Int = 0, hubCode: String = "") {
        self.code = code
        self.status = status
        self.hubCode = hubCode
        self.message = message
    }

    /// The refusal in `answer`, for the step `doing`.
    public init(_ answer: HubClient.Answer, doing: String) {
        let refusal = answer.refusal
        self.init(.refused, "the hub refused to \(doing): \(answer.status) \(refusal?.code ?? "") \(refusal?.message ?? "")", status: answer.status, hubCode: refusal?.code ?? "")
    }

    public var description: String { message }
}
