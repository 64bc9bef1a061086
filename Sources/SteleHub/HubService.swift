import Foundation
import Stele
import SteleSQL

/// The hub's request handling (DESIGN §8.1, HUB-API.md), as plain code over a
/// ``HubStorage``: no sockets, so tests, the fuzzer and the simulator call
/// ``handle(_:)`` directly and `SteleHubServer` only translates HTTP. Every
/// request runs in one storage transaction; a refusal (``HubRefusal``) rolls it
/// back, so a refused request changes nothing.
public final class HubService: HubHandler {
    /// Limits and policies; each is a `stele-hub serve` flag.
    public struct Configuration: Sendable {
        /// Accounts may be created without an invite (`--open`; SECURITY.md says what that costs).
        public var open = false
        public var maximumBodyBytes = 8 << 20
        public var maximumFrameBytes = 1 << 20
        public var maximumMailboxBytes = 64 << 20
        /// How long a session token lives.
        public var sessionLifetimeSeconds = 3_600
        /// How far a session proof's time may be from the hub's clock.
        public var maximumProofSkewSeconds = 300
        /// Pending join requests kept per account.
        public var maximumJoinRequests = 64
        /// How long a join request waits for approval before it ages out (not listed,
        /// not counted against ``maximumJoinRequests``, deleted by ``HubService/sweep()``).
        public var joinRequestLifetimeSeconds = 7 * 86_400
        /// The longest long poll a client may ask for.
        public var maximumWaitSeconds = 60
        /// What a full mailbox's `Retry-After` says.
        public var retryAfterSeconds = 5
        /// Mutations one push may carry, and changes one page of the feed or of replay holds
        /// (`--max-mutations-per-push`, `--max-changes-per-page`).
        public var maximumMutationsPerPush = 1_000
        public var maximumChangesPerPage = 1_000
        /// The largest record payload.
        public var maximumRecordBytes = 1 << 20
        /// How far ahead of the hub's clock a `modifiedAt` may be (`stele-hub serve --max-clock-ahead`).
        public var maximumClockAheadSeconds = 3_600
        /// How long a mutation id is remembered (a push retried later than this applies again).
        public var mutationMemorySeconds = 30 * 86_400
        /// A member device behind the history that has not pulled the change feed for this
        /// long is reported in the account's status as a stalled cursor.
        public var stalledCursorSeconds = 300
        /// How far a device's clock (its `Stele-Client-Time`) may be off the hub's before
        /// the account's status warns of it (a clock a minute off already decides conflicts wrongly).
        public var clockWarningSeconds = 60

        public init() {}
    }

    public let storage: any HubStorage
    public let configuration: Configuration
    public let wakeups = HubWakeups()
    /// Pushes waiting for their account's next transaction (HubService+Records).
    let pushGroups = PushGroups()
    /// Milliseconds since 1970 (injected: tests move it).
    let now: @Sendable () -> Int64

    /// - Parameter clock: the hub's wall clock in milliseconds; the system clock by default.
    public init(storage: any HubStorage, configuration: Configuration = Configuration(), clock: (@Sendable () -> Int64)? = nil) {
        self.storage = storage
        self.configuration = configuration
        self.now = clock ?? { Int64(Date().timeIntervalSince1970 * 1000) }
        let wakeups = self.wakeups
        storage.listen { key in
            if key == "*" { wakeups.wakeAll() } else { wakeups.wake(key) }
        }
        // The history's epoch is written in a transaction of its own. Made inside a request
        // that is then refused (a 409 rolls its transaction back), it would be a new one at
        // every request, and a client would replay for ever. (When the storage cannot be
        // reached now, the first request that reads the epoch writes it.)
        for shard in storage.shards { _ = try? shard.transaction { sql in try epoch(sql) } }
    }

    /// Answers `request`, or parks it as a long poll. Never traps on input.
    public func handle(_ request: HubRequest) -> HubOutcome {
        let outcome: HubOutcome
        do {
            if request.body.count > configuration.maximumBodyBytes {
                throw HubRefusal(413, "too_large", "the body is \(request.body.count) bytes, over the hub's \(configuration.maximumBodyBytes)-byte limit")
            }
            if let malformed = request.malformedQuery {
                // Read as written, `epoch=%ZZ` named an epoch no history has: the client was told to replay everything.
                throw HubRefusal.badRequest("the query holds \"\(malformed.prefix(80))\", which is not percent-encoded UTF-8 (% takes two hex digits); encode the parameter")
            }
            outcome = try route(request)
        } catch {
            outcome = .respond(Self.answer(for: error))
        }
        switch outcome {
        case .respond(let response): return .respond(timed(response))
        case .wait(let wait):
            return .wait(HubWait(key: wait.key, waitSeconds: wait.waitSeconds, poll: { [self] in wait.poll().map(timed) }, expire: { [self] in timed(wait.expire()) }))
        }
    }

    /// Every answer carries the hub's clock (`Stele-Hub-Time`, milliseconds since
    /// 1970): a client whose clock runs behind stamps its writes by it, so a slow
    /// clock does not lose every last-writer-wins conflict (HUB-API "Records").
    private func timed(_ response: HubResponse) -> HubResponse {
        var response = response
        response.headers["Stele-Hub-Time"] = String(now())
        return response
    }

    /// The response for a failure: a refusal as it says, the storage down as `503`,
    /// a damaged database as `500`. What the storage said (its files, its
    /// statements) goes to the operator's log (``HubResponse/detail``), not to
    /// the client.
    static func answer(for error: any Error) -> HubResponse {
        var response: HubResponse
        switch error {
        case let refusal as HubRefusal:
            return refusal.response
        case let failure as HubStorageError where failure.code == .conflict:
            return .error(409, "conflict", "another request changed the same thing at the same moment; retry")
        case let failure as HubStorageError where failure.code == .damaged:
            response = .error(500, "internal", "the hub's database is damaged; retrying will not help: tell the hub's operator (the hub's log says what failed)")
        case is HubStorageError:
            response = .error(503, "unavailable", "the hub's storage is unavailable; retry shortly", headers: ["Retry-After": "1"])
        default:
            response = .error(500, "internal", "the hub failed; tell the hub's operator (the hub's log says what failed)")
        }
        response.detail = "\(error)"
        return response
    }

    /// Deletes what no request can use any more: expired sessions, aged join
    /// requests and mutation ids older than ``Configuration/mutationMemorySeconds``, on every account. `stele-hub serve` runs it every minute; it is
    /// one short transaction over two indexed ranges.
    /// - Returns: how many sessions and join requests it deleted.
    /// - Throws: ``HubStorageError`` when the storage is unavailable (the next sweep tries again).
    @discardableResult
    public func sweep() throws -> (sessions: Int, joinRequests: Int) {
        let time = now()
        var swept = (sessions: 0, joinRequests: 0)
        for shard in storage.shards {
            try shard.transaction { sql in
                swept.sessions += try sql.execute("DELETE FROM sessions WHERE expires_ms <= $1", [.integer(time)])
                swept.joinRequests += try sql.execute("DELETE FROM join_requests WHERE created_ms <= $1", [.integer(joinRequestsBornBefore(time))])
                try sql.execute("DELETE FROM mutations WHERE created_ms <= $1", [.integer(time - Int64(configuration.mutationMemorySeconds) * 1000)])
            }
        }
        return swept
    }

    /// Join requests created at or before this time have aged out.
    func joinRequestsBornBefore(_ time: Int64) -> Int64 {
        time - Int64(configuration.joinRequestLifetimeSeconds) * 1000
    }

    /// Runs `body` in one hub-wide storage transaction (invites; the first shard).
    @discardableResult
    func transaction<T>(_ body: (any HubSQL) throws -> T) throws -> T {
        try storage.transaction(body)
    }

    /// Runs `body` in one transaction of the storage `account` lives in.
    @discardableResult
    func transaction<T>(_ account: AccountID, _ body: (any HubSQL) throws -> T) throws -> T {
        try storage.shard(for: account.hex).transaction(body)
    }

    /// Wakes `key`'s waiters in every hub process, after the commit.
    func announce(_ key: String) {
        storage.announce(key)
    }

    /// A random secret as lowercase hex (tokens, invite codes).
    static func secret(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return Hex.encode((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// The hex SHA-256 of a secret: what the hub stores instead of it.
    static func digest(_ secret: String) -> String {
        Hash32.sha256(of: Array(secret.utf8)).hex
    }
}

extension SQLValue {
    var int64: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    var string: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    var bytes: [UInt8]? {
        switch self {
        case .blob(let value): return value
        case .null: return nil
        default: return nil
        }
    }
}

extension Array where Element == SQLValue {
    /// Column `index`, or `.null` past the end.
    subscript(column index: Int) -> SQLValue { index < count ? self[index] : .null }
}
