import Foundation
import Synchronization

/// One device's connection to a hub's HTTP API (HUB-API.md), over a
/// ``HubHTTP`` (Foundation's `URLSession` unless told otherwise). It opens
/// sessions by signing the hub's session statement with the device's roster key
/// (``HubSessionProof``), keeps the token, renews it before it expires (at four
/// fifths of its life), and opens a new one at once when the hub forgot it
/// (`401`). Requests for a token while a session is being opened wait for that
/// one instead of opening their own.
///
/// Three ways to call: ``request(_:_:json:body:authenticated:timeoutSeconds:completion:)``
/// (a completion on any thread: what ``FleetRuntime`` uses), `async`
/// ``send(_:_:json:body:authenticated:timeoutSeconds:)``, and the blocking
/// ``send(_:_:json:body:authenticated:)`` that ``HubDirectory`` and
/// ``HubAnchorStore`` use (the library's `Directory` and `AnchorStore` are
/// synchronous; never call it from a thread that must stay responsive).
public final class HubClient: Sendable {
    public typealias Answer = HubAnswer

    /// The hub's base URL, e.g. `http://127.0.0.1:8420`.
    public let hub: URL
    public let account: AccountID
    public let identity: DeviceIdentity
    /// How long one request may take (a long poll adds its wait to this).
    public let timeoutSeconds: Double
    public let http: any HubHTTP

    private struct Session {
        var token: String?
        /// When to open the next session, and when the token expires, in `DispatchTime` nanoseconds.
        var renewAt: UInt64 = 0
        var expiresAt: UInt64 = 0
        /// Requests waiting for the session being opened (nil: none is).
        var waiting: [@Sendable (Result<String, HubClientError>) -> Void]?
    }

    private let session = Mutex(Session())

    public init(hub: URL, account: AccountID, identity: DeviceIdentity, timeoutSeconds: Double = 30, http: (any HubHTTP)? = nil) {
        self.hub = hub
        self.account = account
        self.identity = identity
        self.timeoutSeconds = timeoutSeconds
        self.http = http ?? URLSessionHubHTTP()
    }

    /// The account's path prefix.
    public var accountPath: String { "/v1/accounts/\(account.hex)" }

    // MARK: - Requests

    /// Sends one request and calls `completion` with the answer (on any thread).
    /// With `authenticated`, it carries a session token and, when the hub
    /// answers `401`, opens a new session and sends it once more.
    /// - Parameters:
    ///   - json: a JSON body (`Content-Type: application/json`); else `body` as `application/octet-stream`.
    ///   - timeoutSeconds: this request's timeout (``timeoutSeconds`` when nil).
    ///   - heldSeconds: how long the hub may hold the request before it answers (a
    ///     long poll's wait): the token it carries must outlive that, or the hub
    ///     would refuse it half way, so a token closer to its end is renewed first.
    ///   - headers: more request headers (the anchor's `Stele-Anchor-Rule`).
    public func request(
        _ method: String, _ path: String, json: [String: Any]? = nil, body: [UInt8] = [], headers: [String: String] = [:], authenticated: Bool = true,
        timeoutSeconds: Double? = nil, heldSeconds: Double = 0, completion: @escaping @Sendable (Result<Answer, HubClientError>) -> Void
    ) {
        do {
            let encoded = try Self.encode(json, body)
            exchange(
                method, path, encoded.bytes, isJSON: encoded.isJSON, headers: headers, authenticated: authenticated, timeoutSeconds: timeoutSeconds,
                heldSeconds: heldSeconds, completion: completion)
        } catch {
            completion(.failure(HubClientError(.refused, "the request body for \(method) \(path) is not JSON: \(error)")))
        }
    }

    /// Sends one request and waits for the answer without blocking a thread.
    /// - Throws: ``HubClientError`` `unreachable` when no answer came.
    public func send(
        _ method: String, _ path: String, json: [String: Any]? = nil, body: [UInt8] = [], authenticated: Bool = true, timeoutSeconds: Double? = nil
    ) async throws -> Answer {
        // Encoded here, so nothing non-Sendable crosses into the continuation.
        let encoded = try Self.encode(json, body)
        return try await withCheckedThrowingContinuation { continuation in
            exchange(method, path, encoded.bytes, isJSON: encoded.isJSON, authenticated: authenticated, timeoutSeconds: timeoutSeconds, heldSeconds: 0) {
                continuation.resume(with: $0)
            }
        }
    }

    /// Sends one request and blocks the calling thread until the answer arrives.
    /// - Throws: ``HubClientError`` `unreachable` when no answer came.
    public func send(
        _ method: String, _ path: String, json: [String: Any]? = nil, body: [UInt8] = [], headers: [String: String] = [:], authenticated: Bool = true
    ) throws -> Answer {
        let encoded = try Self.encode(json, body)
        let result = Mutex<Result<Answer, HubClientError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        exchange(method, path, encoded.bytes, isJSON: encoded.isJSON, headers: headers, authenticated: authenticated, timeoutSeconds: nil, heldSeconds: 0) { answer in
            result.withLock { $0 = answer }
            done.signal()
        }
        done.wait()
        guard let outcome = result.withLock({ $0 }) else { throw HubClientError(.unreachable, "no answer from \(hub)") }
        return try outcome.get()
    }

    /// Sends a body already encoded as JSON and blocks the calling thread until
    /// the answer arrives; `heldSeconds` is how long the hub may hold it (a long poll).
    /// - Throws: ``HubClientError`` `unreachable` when no answer came.
    public func send(_ method: String, _ path: String, jsonBytes: [UInt8], heldSeconds: Double = 0) throws -> Answer {
        let result = Mutex<Result<Answer, HubClientError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        exchange(
            method, path, jsonBytes, isJSON: !jsonBytes.isEmpty, authenticated: true, timeoutSeconds: heldSeconds > 0 ? timeoutSeconds + heldSeconds : nil,
            heldSeconds: heldSeconds
        ) { answer in
            result.withLock { $0 = answer }
            done.signal()
        }
        done.wait()
        guard let outcome = result.withLock({ $0 }) else { throw HubClientError(.unreachable, "no answer from \(hub)") }
        return try outcome.get()
    }

    /// The body's bytes: `json` encoded when given, else `body`.
    private static func encode(_ json: [String: Any]?, _ body: [UInt8]) throws -> (bytes: [UInt8], isJSON: Bool) {
        guard let json else { return (body, false) }
        return (Array(try JSONSerialization.data(withJSONObject: json)), true)
    }

    /// Every request goes through here: the token, the one retry after a `401`.
    private func exchange(
        _ method: String, _ path: String, _ bytes: [UInt8], isJSON: Bool, headers: [String: String] = [:], authenticated: Bool, timeoutSeconds: Double?,
        heldSeconds: Double, completion: @escaping @Sendable (Result<Answer, HubClientError>) -> Void
    ) {
        guard let url = URL(string: path, relativeTo: hub) else {
            return completion(.failure(HubClientError(.unreachable, "cannot form a URL from \(hub) and \(path)")))
        }
        var request = HubHTTPRequest(method: method, url: url, body: bytes, timeoutSeconds: timeoutSeconds ?? self.timeoutSeconds)
        request.heldSeconds = heldSeconds
        for (name, value) in headers { request.headers[name] = value }
        if !bytes.isEmpty || method == "POST" || method == "PUT" { request.headers["Content-Type"] = isJSON ? "application/json" : "application/octet-stream" }
        // The device's wall clock, so the hub can tell its operator (and the status endpoint) whose clock is off.
        request.headers["Stele-Client-Time"] = String(Int64(Date().timeIntervalSince1970 * 1000))
        guard authenticated else { return http.perform(request, completion: completion) }
        let unsigned = request
        @Sendable func signed(_ token: String) -> HubHTTPRequest {
            var signed = unsigned
            signed.headers["Authorization"] = "Bearer \(token)"
            return signed
        }
        let validFor = heldSeconds + 1
        withToken(validFor: validFor) { [self] token in
            switch token {
            case .failure(let error): completion(.failure(error))
            case .success(let first):
                http.perform(signed(first)) { [self] answer in
                    guard case .success(let answer) = answer, answer.status == 401 else { return completion(answer) }
                    // The hub forgot the token (it expired, or the hub's storage was reset): one new session, one more try.
                    forget(first)
                    withToken(validFor: validFor) { [self] token in
                        switch token {
                        case .failure(let error): completion(.failure(error))
                        case .success(let second): http.perform(signed(second), completion: completion)
                        }
                    }
                }
            }
        }
    }

    // MARK: - Sessions

    /// Opens a session now, whatever the current token (the runtime checks this
    /// way whether a `403` means its device was revoked).
    /// - Throws: ``HubClientError``: `refused` with `revoked` or `not_a_member` when the device is off the roster.
    public func openSession() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            openSession { result in continuation.resume(with: result.mapError { $0 as any Error }) }
        }
    }

    /// ``openSession()`` with a completion (on any thread), for callers that must
    /// not depend on Swift concurrency's thread pool being free.
    public func openSession(completion: @escaping @Sendable (Result<Void, HubClientError>) -> Void) {
        session.withLock { $0.token = nil }
        withToken(validFor: 0) { result in completion(result.map { _ in () }) }
    }

    /// Calls `body` with a token that lives `validFor` seconds more at least,
    /// opening (or renewing) a session when needed.
    private func withToken(validFor seconds: Double, _ body: @escaping @Sendable (Result<String, HubClientError>) -> Void) {
        let now = DispatchTime.now().uptimeNanoseconds
        let needed = now + UInt64(max(0, seconds) * 1e9)
        enum Next {
            case use(String)
            case wait
            case open
        }
        let next = session.withLock { state -> Next in
            if let token = state.token, now < state.renewAt, needed < state.expiresAt { return .use(token) }
            if state.waiting != nil {
                state.waiting?.append(body)
                return .wait
            }
            state.waiting = [body]
            return .open
        }
        switch next {
        case .use(let token): body(.success(token))
        case .wait: break
        case .open: openSessionNow()
        }
    }

    /// Drops `token` unless a newer one replaced it already.
    private func forget(_ token: String) {
        session.withLock { state in
            if state.token == token { state.token = nil }
        }
    }

    private func openSessionNow() {
        let time = Int64(Date().timeIntervalSince1970 * 1000)
        let finish: @Sendable (Result<(String, Int64), HubClientError>) -> Void = { [self] result in
            let waiting = session.withLock { state -> [@Sendable (Result<String, HubClientError>) -> Void] in
                if case .success(let (token, lifetimeMilliseconds)) = result {
                    state.token = token
                    // Renew at four fifths of the token's life, so a request never carries one about to expire.
                    let issued = DispatchTime.now().uptimeNanoseconds
                    state.renewAt = issued + UInt64(max(1, lifetimeMilliseconds)) * 800_000
                    state.expiresAt = issued + UInt64(max(1, lifetimeMilliseconds)) * 1_000_000
                }
                defer { state.waiting = nil }
                return state.waiting ?? []
            }
            for waiter in waiting { waiter(result.map(\.0)) }
        }
        let signature: [UInt8]
        do {
            signature = try HubSessionProof.sign(by: identity, account: account, timeMilliseconds: time)
        } catch {
            return finish(.failure(HubClientError(.refused, "cannot sign the session proof: \(error)")))
        }
        let doing = "open a session for device \(identity.deviceID.hex.prefix(8))"
        request(
            "POST", "\(accountPath)/sessions", json: ["device": identity.deviceID.hex, "time": time, "signature": Data(signature).base64EncodedString()],
            authenticated: false
        ) { answer in
            switch answer {
            case .failure(let error): finish(.failure(error))
            case .success(let answer):
                guard answer.status == 200 else { return finish(.failure(HubClientError(answer, doing: doing))) }
                guard let token = answer.json["token"] as? String, !token.isEmpty else {
                    return finish(.failure(HubClientError(.malformed, "the hub answered a session without a token: \(answer.body.prefix(200))", status: 200)))
                }
                // The lifetime the hub gave, measured from the time this proof carried (clocks
                // agree within HUB-API's five minutes); a second at least.
                let expires = (answer.json["expiresAt"] as? NSNumber)?.int64Value ?? (time + 60_000)
                finish(.success((token, max(1_000, expires - time))))
            }
        }
    }
}

/// A hub request that failed: no answer, a refusal with HUB-API's code, or an
/// answer this client cannot read.
public struct HubClientError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// No answer arrived (the hub is down, the URL is wrong, the network is out).
        case unreachable
        /// The hub refused: ``status`` and ``hubCode`` say how.
        case refused
        /// The hub answered something that is not what HUB-API says (garbage, a cut body).
        case malformed
    }

    public let code: Code
    /// The HTTP status, 0 when no answer came.
    public let status: Int
    /// HUB-API's error code (`forbidden`, `stale_generation`, …), empty when none.
    public let hubCode: String
    public let message: String
    /// With `unreachable`: the request may have reached the hub before the answer was lost
    /// (a timeout), so what it asked may have been done.
    public var mayHaveArrived = false

    public init(_ code: Code, _ message: String, status: Int = 0, hubCode: String = "") {
        self.code = code
        self.status = status
        self.hubCode = hubCode
        self.message = message
    }

    /// The refusal in `answer`, for the step `doing`.
    public init(_ answer: HubAnswer, doing: String) {
        let refusal = answer.refusal
        self.init(.refused, "the hub refused to \(doing): \(answer.status) \(refusal?.code ?? "") \(refusal?.message ?? "")", status: answer.status, hubCode: refusal?.code ?? "")
    }

    /// Whether the hub said this device is no longer on the account's roster.
    public var isRevoked: Bool { code == .refused && status == 403 && hubCode == "revoked" }

    public var description: String { message }
}
