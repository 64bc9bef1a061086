import Dispatch
import Foundation
import Synchronization

/// A device that syncs through a hub, for real (DESIGN §8.4): it owns the
/// device's ``Replica``, its ``KeyStore`` and a ``FleetDriver``, and carries out
/// every effect of the ``FleetNode`` inside against a `stele-hub`:
/// - frames go out through the relay (``HubRelayTransport``: in order per
///   recipient, pieces for frames over the relay's limit, `Retry-After` honoured,
///   back-off with jitter) and come in through a long poll, acknowledged only
///   once the node has taken them;
/// - timers run on a monotonic clock; the anchor is the hub's anchor object;
///   the roster and the account keys are read from the hub's directory, every
///   few minutes and at once when a frame arrives from a device this one does not
///   know yet (then the frame is handed in again); contacts' rosters are read
///   for the conversations the replica declares;
/// - writes reach the node by themselves: those made through ``withReplica(_:)``
///   at once, those another process or handle commits to the same file within
///   ``Configuration/otherWritersCheckMilliseconds``;
/// - session tokens are renewed before they expire; a revoked device stops with
///   ``FleetRuntimeError/Code/revoked`` and says so.
///
/// One serial queue owns everything (the driver, the replica, the outbox): the
/// node sees one input at a time, and no I/O happens inside it. Status arrives as
/// an `AsyncSequence` (``statusUpdates()``).
public final class FleetRuntime: Sendable {
    /// How the runtime paces itself.
    public struct Configuration: Sendable {
        /// The node's own pacing. Through a hub, whose relay loses nothing, the
        /// periodic advertisement only has to catch a frame given up after its
        /// retries: once a minute (a change still advertises within
        /// ``FleetConfiguration/changeDebounceMilliseconds``).
        /// Deliveries to contacts wait for a drain of the relay mailbox, not a moment
        /// of settling (``FleetConfiguration/confirmsByRelayDrain``).
        public var fleet = FleetConfiguration(advertiseIntervalMilliseconds: 60_000, confirmsByRelayDrain: true)
        /// How long a long poll waits at the hub (HUB-API allows up to 60 s).
        public var pollWaitSeconds = 60
        /// How often the directory (roster, keys, contacts' rosters) is read unprompted.
        public var directoryRefreshSeconds = 300.0
        /// How often the store is checked for other processes' writes (0: never; the
        /// runtime still looks for new conversations and waiting deliveries every 250 ms).
        public var otherWritersCheckMilliseconds = 250
        /// The first and the longest pause before trying the hub again.
        public var reconnectInitialSeconds = 0.5
        public var reconnectMaximumSeconds = 30.0
        /// The largest relay frame sent; a larger sealed frame goes in pieces
        /// (keep it under the hub's `--max-frame-bytes`, 1 MiB by default).
        public var relayPieceBytes = 512 << 10
        /// How often a device not yet approved asks the hub again.
        public var approvalCheckSeconds = 3.0

        public init() {}

        /// Every timer short (advertisements each second, rounds after 300 ms in
        /// sync, long polls of 5 s), so a story through real processes takes
        /// seconds: for tests and demos (`STELE_FAST_PACE=1` in `stele sync`). An
        /// app keeps the defaults.
        public static var quick: Configuration {
            var configuration = Configuration()
            configuration.fleet = FleetConfiguration(
                advertiseIntervalMilliseconds: 1_000, changeDebounceMilliseconds: 50, sessionTimeoutMilliseconds: 5_000, barrierDebounceMilliseconds: 300,
                barrierRoundMilliseconds: 5_000, barrierBackoffMilliseconds: 1_000, barrierMaximumBackoffMilliseconds: 2_000, deliveryRetryMilliseconds: 1_000,
                deliverySettleMilliseconds: 200, confirmsByRelayDrain: true)
            configuration.pollWaitSeconds = 5
            configuration.otherWritersCheckMilliseconds = 100
            configuration.reconnectInitialSeconds = 0.1
            configuration.reconnectMaximumSeconds = 1
            configuration.approvalCheckSeconds = 0.3
            return configuration
        }
    }

    public let replicaPath: String
    public let account: AccountID
    public let device: DeviceID
    public let client: HubClient
    public let configuration: Configuration

    let queue: DispatchQueue
    let engine: QueueConfined<Engine>
    /// The latest status, readable from any thread; and the status streams.
    let board: StatusBoard

    /// A runtime for the device whose store `replica` is. From now on the
    /// replica belongs to the runtime: read and write it through
    /// ``withReplica(_:)``, or open a second handle on the same file.
    /// - Parameters:
    ///   - keyStore: the device's key ring (its identity, the account keys, the pinned roster).
    ///   - client: a ``HubClient`` for this account and device.
    /// - Throws: ``FleetRuntimeError`` `keyRing` when the key store holds no ring,
    ///   or one of another device, or the client is for another account or device.
    public init(replica: Replica, keyStore: any KeyStore, client: HubClient, configuration: Configuration = Configuration()) throws {
        let ring: KeyRing?
        do {
            ring = try keyStore.load()
        } catch {
            throw FleetRuntimeError(.keyRing, "cannot read the key ring: \(error)")
        }
        guard let ring else {
            throw FleetRuntimeError(.keyRing, "there is no key ring for the store at \(replica.path): the device's identity lives there; give the key ring's path (--keys F) or set the device up again")
        }
        guard ring.identity.deviceID == replica.device else {
            throw FleetRuntimeError(.keyRing, "the key ring belongs to device \(ring.identity.deviceID.hex.prefix(8)), not to this store's device \(replica.device.hex.prefix(8)); give the right key ring (--keys F)")
        }
        if let roster = ring.roster, roster.account != replica.account {
            throw FleetRuntimeError(.keyRing, "the key ring's roster is account \(roster.account.hex)'s, not this store's account \(replica.account.hex); give the right key ring (--keys F)")
        }
        guard client.account == replica.account, client.identity.deviceID == replica.device else {
            throw FleetRuntimeError(.keyRing, "the hub client is for account \(client.account.hex.prefix(8)) device \(client.identity.deviceID.hex.prefix(8)), not this store's")
        }
        replicaPath = replica.path
        account = replica.account
        device = replica.device
        self.client = client
        self.configuration = configuration
        queue = DispatchQueue(label: "stele.runtime.\(replica.device.hex.prefix(8))")
        let initial = FleetRuntimeStatus(
            connection: .notStarted, isMember: false, siblingsOutOfSync: [], openSessions: 0, framesWaiting: 0, advertisementDue: false,
            collection: CollectionStatus(state: .current, generation: replica.generation, tombstones: [:], lastCollection: nil, blockedBy: []), error: nil)
        board = StatusBoard(initial)
        let queue = self.queue
        let engine = try queue.sync {
            try Engine(replica: replica, identity: ring.identity, keyStore: keyStore, client: client, configuration: configuration, queue: queue)
        }
        self.engine = QueueConfined(engine, on: queue)
        let board = self.board
        queue.sync { engine.publish = { status, event in board.publish(status, event) } }
    }

    deinit {
        let engine = self.engine
        queue.async { engine.value.stop(reason: nil) }
    }

    // MARK: - Control

    /// Starts syncing: takes the store's runtime lock, reads the directory,
    /// starts the node and the long poll. A device not approved yet waits for its
    /// approval (status ``FleetRuntimeError/Code/awaitingApproval``) and starts then.
    public func start() {
        engine.async { $0.start() }
    }

    /// Stops for good: no frame, timer or request is handled after this returns.
    /// Frames still waiting to go out are dropped (the protocol sends again next time).
    public func stop() {
        dispatchPrecondition(condition: .notOnQueue(queue))
        queue.sync { engine.value.stop(reason: nil) }
    }

    /// Runs `body` with the replica on the runtime's queue, and returns what it
    /// returned: the app's reads and writes go through here (or through a second
    /// handle on the same file). Writes reach the node by themselves.
    /// Never call it from inside another `withReplica`.
    public func withReplica<T>(_ body: (Replica) throws -> T) rethrows -> T {
        dispatchPrecondition(condition: .notOnQueue(queue))
        return try queue.sync { try body(engine.value.replica) }
    }

    /// Reads the directory now (a device was approved or revoked elsewhere).
    public func refreshDirectory() {
        engine.async { $0.refreshDirectory(force: true) }
    }

    // MARK: - Status

    /// The latest status.
    public var status: FleetRuntimeStatus { board.status }

    /// The longest ``waitUntilInSync(timeoutSeconds:)`` waits: a hundred years.
    public static let longestWaitSeconds: Double = 100 * 365 * 86_400

    /// The status now, then each time it changes, until the runtime stops.
    public func statusUpdates() -> AsyncStream<FleetRuntimeStatus> { board.statusUpdates() }

    /// Every event the node logs (a finished session, a committed round, a refused frame), from now on.
    public func events() -> AsyncStream<FleetEvent> { board.events() }

    /// Waits until the device is in sync with every sibling (``FleetRuntimeStatus/inSync``),
    /// the runtime stops for an error, or `timeoutSeconds` pass; returns the status then.
    /// A timeout above ``longestWaitSeconds`` (infinity included) waits that long.
    public func waitUntilInSync(timeoutSeconds: Double) async -> FleetRuntimeStatus {
        let updates = statusUpdates()
        let reached = await withTaskGroup(of: FleetRuntimeStatus?.self) { group in
            group.addTask {
                for await status in updates where status.inSync || (status.connection == .stopped && status.error?.isFatal == true) {
                    return status
                }
                return nil
            }
            group.addTask {
                // Clamped: nanoseconds past 2^64 do not convert (`--timeout 1e12h` trapped).
                try? await Task.sleep(nanoseconds: UInt64(min(max(0, timeoutSeconds), Self.longestWaitSeconds) * 1e9))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return reached ?? status
    }
}

/// A runtime's latest status and its listeners, shared by any thread.
final class StatusBoard: Sendable {
    private struct State {
        var status: FleetRuntimeStatus
        var subscribers: [UInt64: AsyncStream<FleetRuntimeStatus>.Continuation] = [:]
        var eventSubscribers: [UInt64: AsyncStream<FleetEvent>.Continuation] = [:]
        var next: UInt64 = 0
        var finished = false
    }

    private let state: Mutex<State>

    init(_ status: FleetRuntimeStatus) { state = Mutex(State(status: status)) }

    var status: FleetRuntimeStatus { state.withLock { $0.status } }

    func statusUpdates() -> AsyncStream<FleetRuntimeStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: FleetRuntimeStatus.self, bufferingPolicy: .bufferingNewest(16))
        state.withLock { state in
            continuation.yield(state.status)
            guard !state.finished else { return continuation.finish() }
            state.next += 1
            state.subscribers[state.next] = continuation
            let id = state.next
            continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) } }
        }
        return stream
    }

    func events() -> AsyncStream<FleetEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: FleetEvent.self, bufferingPolicy: .bufferingNewest(256))
        state.withLock { state in
            guard !state.finished else { return continuation.finish() }
            state.next += 1
            state.eventSubscribers[state.next] = continuation
            let id = state.next
            continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.eventSubscribers.removeValue(forKey: id) } }
        }
        return stream
    }

    /// Records `status` and hands it (and `event`) to every listener; a status
    /// whose connection is `.stopped` is the last: every stream ends after it.
    func publish(_ status: FleetRuntimeStatus?, _ event: FleetEvent?) {
        let (subscribers, eventSubscribers, last) = state.withLock { state in
            if let status { state.status = status }
            let last = status?.connection == .stopped
            if last { state.finished = true }
            defer {
                if last {
                    state.subscribers = [:]
                    state.eventSubscribers = [:]
                }
            }
            return (Array(state.subscribers.values), Array(state.eventSubscribers.values), last)
        }
        if let event { for subscriber in eventSubscribers { subscriber.yield(event) } }
        if let status { for subscriber in subscribers { subscriber.yield(status) } }
        if last {
            for subscriber in subscribers { subscriber.finish() }
            for subscriber in eventSubscribers { subscriber.finish() }
        }
    }
}
