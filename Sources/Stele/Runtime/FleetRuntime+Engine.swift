import Dispatch
import Foundation

extension FleetRuntime {
    /// Everything the runtime keeps, on its queue: the driver and its
    /// environment, the long poll, the directory reads, the status.
    final class Engine {
        let replica: Replica
        let keyStore: any KeyStore
        let client: HubClient
        let configuration: Configuration
        let queue: DispatchQueue
        let scheduler: DispatchFleetScheduler
        let transport: HubRelayTransport
        let anchors: HubAnchorSubstrate
        let directory: HubDirectorySource
        let driver: FleetDriver
        /// Hands a status (and an event) to whoever listens.
        var publish: (FleetRuntimeStatus?, FleetEvent?) -> Void = { _, _ in }

        enum Phase {
            case idle
            /// Not on the roster yet: asking the hub every few seconds.
            case awaitingApproval
            case running
            case stopped
        }

        private(set) var phase = Phase.idle
        private var connection = FleetRuntimeStatus.Connection.notStarted
        private var error: FleetRuntimeError?
        private var random = SystemRandomNumberGenerator()
        private var pollBackoff: Backoff
        /// The relay cursor: frames up to it were handed to the node.
        private var cursor: UInt64 = 0
        private var reassembly = RelayReassembly()
        /// Frames no known device sealed, kept for one more try after the directory is read.
        private var fromStrangers: [[UInt8]] = []
        private var directoryReading = false
        private var directoryAgain = false
        private var lastDirectoryRead: UInt64 = 0
        private var checkingRevocation = false
        /// A look at the mailbox for a waiting delivery is under way.
        private var draining = false
        /// The next relay answer holds what waited while this device was away (``FleetInput/backlog(_:)``).
        private var backlogDue = true
        private var statusDue = false
        private var lock: StoreLock?

        init(replica: Replica, identity: DeviceIdentity, keyStore: any KeyStore, client: HubClient, configuration: Configuration, queue: DispatchQueue) throws {
            self.replica = replica
            self.keyStore = keyStore
            self.client = client
            self.configuration = configuration
            self.queue = queue
            pollBackoff = Backoff(initialSeconds: configuration.reconnectInitialSeconds, maximumSeconds: configuration.reconnectMaximumSeconds)
            scheduler = DispatchFleetScheduler(queue: queue)
            transport = HubRelayTransport(client: client, queue: queue)
            transport.pieceBytes = configuration.relayPieceBytes
            anchors = HubAnchorSubstrate(client: client, queue: queue)
            directory = HubDirectorySource(client: client, queue: queue)
            do {
                driver = try FleetDriver(
                    replica: replica, identity: identity, keyStore: keyStore,
                    environment: FleetEnvironment(transport: transport, scheduler: scheduler, anchors: anchors, directory: directory),
                    configuration: configuration.fleet)
            } catch {
                throw FleetRuntimeError(.keyRing, "cannot start the device's node: \(error)")
            }
            let directory = self.directory
            transport.contactAccount = { directory.contactDevices[$0] }
            // Weak: a request answered after the runtime is gone finds nobody to tell.
            transport.onTrouble = { [weak self] trouble in self?.onTransport(trouble) }
            anchors.onForbidden = { [weak self] in self?.checkRevocation() }
            directory.onForbidden = { [weak self] in self?.checkRevocation() }
            driver.onEvent = { [weak self] event in self?.publish(nil, event) }
        }

        var me: QueueConfined<Engine> { QueueConfined(self, on: queue) }

        // MARK: - Starting and stopping

        func start() {
            guard phase == .idle else { return }
            if replica.path != ":memory:" {
                do {
                    lock = try StoreLock(path: replica.path + "-runtime.lock")
                } catch let failure as FleetRuntimeError {
                    return stop(reason: failure)
                } catch {
                    return stop(reason: FleetRuntimeError(.storeInUse, "\(error)"))
                }
            }
            connection = .connecting
            publish(currentStatus(), nil)
            if isMember {
                run()
            } else {
                phase = .awaitingApproval
                awaitApproval()
            }
            statusChanged()
        }

        /// Whether the roster this device pinned has it on it, and it holds an account key.
        private var isMember: Bool {
            guard let ring = (try? keyStore.load()) ?? nil else { return false }
            return ring.roster?.members.contains(replica.device) == true && !ring.accountKeys.isEmpty
        }

        private func run() {
            phase = .running
            driver.start()
            refreshDirectory(force: true)
            poll()
            scheduleDirectoryRefresh()
            scheduleOtherWritersCheck()
        }

        func stop(reason: FleetRuntimeError?) {
            guard phase != .stopped else { return }
            phase = .stopped
            driver.stop()
            transport.stop()
            lock = nil
            connection = .stopped
            if let reason { error = reason }
            publish(currentStatus(), nil)
        }

        // MARK: - Waiting for approval

        /// Reads the directory until the roster has this device on it and a key was wrapped for it.
        private func awaitApproval() {
            guard phase == .awaitingApproval else { return }
            driver.refreshRoster { [weak self] result in
                guard let self, phase == .awaitingApproval else { return }
                switch result {
                case .success where isMember:
                    error = nil
                    connection = .connected
                    run()
                    statusChanged()
                case .success:
                    later(configuration.approvalCheckSeconds) { $0.awaitApproval() }
                case .failure(let failure):
                    let trouble = Self.runtimeError(failure)
                    if trouble.isFatal { return stop(reason: trouble) }
                    if trouble.code == .unreachable {
                        connection = .reconnecting(retryInSeconds: configuration.approvalCheckSeconds)
                        error = trouble
                    } else {
                        connection = .connected
                        error = FleetRuntimeError(
                            .awaitingApproval,
                            "device \(replica.device.hex.prefix(8)) is waiting for a member of account \(replica.account.hex.prefix(8)) to approve it (stele approve STORE \(replica.device.hex))")
                    }
                    statusChanged()
                    later(configuration.approvalCheckSeconds) { $0.awaitApproval() }
                }
            }
        }

        // MARK: - The long poll

        private func poll() {
            guard phase == .running else { return }
            // Until a poll is answered (at the start, after a failure) the hub is asked not to
            // wait: its answer is the backlog, and tells the device it is connected. Held,
            // it kept a device that nothing writes to "connecting" for a whole wait, and a
            // one-pass `stele sync` alone on its account never in sync.
            let wait = connection == .connected ? configuration.pollWaitSeconds : 0
            let me = self.me
            client.request("GET", "\(client.accountPath)/relay?after=\(cursor)&wait=\(wait)", timeoutSeconds: Double(wait) + 20, heldSeconds: Double(wait)) { result in
                me.async { $0.polled(result) }
            }
        }

        private func polled(_ result: Result<HubAnswer, HubClientError>) {
            guard phase == .running else { return }
            switch result {
            case .success(let answer) where answer.status == 200:
                do {
                    // The first answer since the node started: what waited in the mailbox meanwhile.
                    try takeRelayAnswer(answer.body, backlog: backlogDue)
                    backlogDue = false
                } catch {
                    return retryPoll(FleetRuntimeError(.malformed, "the hub's relay answer did not decode (\(error)); is \(client.hub) a stele-hub?"), after: nil)
                }
                pollBackoff.reset()
                connected()
                statusChanged()
                poll()
                drainIfADeliveryWaits()
            case .success(let answer) where answer.status == 403:
                checkRevocation()
                retryPoll(FleetRuntimeError(.refused, "the hub refused the long poll (403 \(answer.refusal?.code ?? ""))"), after: nil)
            case .success(let answer) where answer.status == 404:
                stop(reason: FleetRuntimeError(.unknownAccount, "account \(replica.account.hex) is not on the hub at \(client.hub): check the hub's URL (--hub), or whether the hub's storage was replaced"))
            case .success(let answer):
                retryPoll(
                    FleetRuntimeError(.refused, "the hub answered the long poll with \(answer.status) \(answer.refusal?.code ?? "")\(answer.refusal.map { ": " + $0.message } ?? "")"),
                    after: answer.retryAfterSeconds)
            case .failure(let failure):
                retryPoll(Self.runtimeError(failure), after: nil)
            }
        }

        private func retryPoll(_ trouble: FleetRuntimeError, after seconds: Double?) {
            let delay = seconds ?? pollBackoff.next(using: &random)
            connection = .reconnecting(retryInSeconds: delay)
            error = trouble
            statusChanged()
            later(delay) { $0.poll() }
        }

        private func connected() {
            if connection != .connected { connection = .connected }
            if let current = error, !current.isFatal, current.code != .storage, current.code != .directory { error = nil }
        }

        /// One relay frame: an envelope, perhaps the last piece of a sealed frame.
        private func take(_ envelope: [UInt8], backlog: Bool) {
            let sealed: [UInt8]?
            do {
                sealed = try reassembly.take(envelope, at: scheduler.monotonicMilliseconds)
            } catch {
                publish(nil, FleetEvent(kind: .rejectedFrame, peer: nil, namespace: nil, message: "a relay frame was not a Stele envelope: \(error)"))
                return
            }
            guard let sealed else { return }
            let strangers = driver.node.framesFromStrangers
            driver.receive(sealed, from: replica.device, backlog: backlog)
            if driver.node.framesFromStrangers > strangers {
                // A device approved (or a contact met) since the directory was read: read it, then try again.
                if fromStrangers.count < 64 { fromStrangers.append(sealed) }
                refreshDirectory(force: false)
            }
        }

        /// Hands in the frames of a relay answer that are past the cursor (the long
        /// poll and a drain may answer the same frame), and moves the cursor.
        /// - Returns: how many frames were new.
        /// - Throws: ``CodecError`` when the body is not HUB-API's (nothing is taken then).
        @discardableResult
        private func takeRelayAnswer(_ body: [UInt8], backlog: Bool = false) throws -> Int {
            let (next, frames) = try Self.relayFrames(body)
            var taken = 0
            for (seq, frame) in frames where seq > cursor {
                take(frame, backlog: backlog)
                cursor = seq
                taken += 1
            }
            cursor = max(cursor, next)
            return taken
        }

        /// HUB-API's relay body: u64 next-seq, then per frame u64 seq, u32 length, bytes.
        static func relayFrames(_ body: [UInt8]) throws -> (next: UInt64, frames: [(seq: UInt64, bytes: [UInt8])]) {
            var reader = ByteReader(body)
            let next = try reader.readBigEndianUInt64("relay next sequence")
            var frames: [(UInt64, [UInt8])] = []
            while !reader.isAtEnd {
                let seq = try reader.readBigEndianUInt64("relay frame sequence")
                let length = Int(try reader.readBigEndianUInt32("relay frame length"))
                frames.append((seq, Array(try reader.readBytes(length, "relay frame"))))
            }
            return (next, frames)
        }

        // MARK: - Draining the mailbox for a delivery

        /// A delivery to a contact waits only for proof that no sibling's frame is
        /// still at the hub (``FleetConfiguration/confirmsByRelayDrain``): ask the
        /// hub for this device's pending frames without waiting; an empty answer is
        /// the proof, and the node hears ``FleetInput/relayDrained``.
        private func drainIfADeliveryWaits() {
            guard phase == .running, !draining, configuration.fleet.confirmsByRelayDrain, driver.node.hasDeliverySettling else { return }
            draining = true
            let me = self.me
            client.request("GET", "\(client.accountPath)/relay?after=\(cursor)&wait=0") { result in
                me.async { engine in
                    engine.draining = false
                    guard engine.phase == .running, case .success(let answer) = result, answer.status == 200,
                        let taken = try? engine.takeRelayAnswer(answer.body)
                    else { return }
                    // Frames came: they are in now; the next look may find the mailbox empty.
                    if taken == 0 { engine.driver.handle(.relayDrained) }
                    engine.statusChanged()
                }
            }
        }

        // MARK: - The directory

        /// Reads the roster, the keys and the contacts' rosters; `force` skips the
        /// two-second pause that keeps a stream of strangers' frames from reading it each time.
        func refreshDirectory(force: Bool) {
            guard phase == .running else { return }
            guard !directoryReading else {
                directoryAgain = true
                return
            }
            let now = DispatchTime.now().uptimeNanoseconds
            if !force, now - lastDirectoryRead < 2_000_000_000 {
                directoryAgain = true
                return later(2) { $0.refreshDirectory(force: true) }
            }
            directoryReading = true
            directoryAgain = false
            lastDirectoryRead = now
            driver.contactAccounts = ((try? replica.conversations()) ?? []).map(\.contact)
            driver.refreshDirectory { [weak self] result in
                guard let self else { return }
                directoryReading = false
                guard phase == .running else { return }
                switch result {
                case .success:
                    if error?.code == .directory { error = nil }
                    let strangers = fromStrangers
                    fromStrangers = []
                    for sealed in strangers { driver.receive(sealed, from: replica.device) }
                case .failure(let failure):
                    let trouble = Self.runtimeError(failure)
                    if trouble.isFatal { return stop(reason: trouble) }
                    error = trouble.code == .unreachable ? trouble : FleetRuntimeError(.directory, "the account's directory was not taken: \(failure)")
                }
                statusChanged()
                if directoryAgain { refreshDirectory(force: false) }
            }
        }

        private func scheduleDirectoryRefresh() {
            later(configuration.directoryRefreshSeconds) { engine in
                engine.refreshDirectory(force: true)
                engine.scheduleDirectoryRefresh()
            }
        }

        // MARK: - Other processes' writes, and new conversations

        /// Every ``Configuration/otherWritersCheckMilliseconds`` (250 ms when 0):
        /// other processes' writes, new conversations, a delivery waiting for a drain.
        private func scheduleOtherWritersCheck() {
            let period = configuration.otherWritersCheckMilliseconds > 0 ? configuration.otherWritersCheckMilliseconds : 250
            later(Double(period) / 1000) { engine in
                guard engine.phase == .running else { return }
                engine.drainIfADeliveryWaits()
                do {
                    if engine.configuration.otherWritersCheckMilliseconds > 0, try engine.replica.takeInOtherWriters() { engine.driver.nudge() }
                    // A conversation declared since the directory was read: read its contact's roster now.
                    let contacts = Set(try engine.replica.conversations().map(\.contact))
                    if contacts != Set(engine.driver.contactAccounts) { engine.refreshDirectory(force: true) }
                    if engine.error?.code == .storage { engine.error = nil }
                } catch {
                    engine.error = FleetRuntimeError(.storage, "cannot read the store's changes: \(error)")
                }
                engine.statusChanged()
                engine.scheduleOtherWritersCheck()
            }
        }

        // MARK: - Trouble

        private func onTransport(_ trouble: HubRelayTransport.Trouble) {
            switch trouble {
            case .answered: connected()
            case .failed(let failure): error = failure
            case .recipientGone: refreshDirectory(force: false)
            case .forbidden: checkRevocation()
            }
            statusChanged()
        }

        /// A `403`: opens a new session to learn whether this device was revoked.
        func checkRevocation() {
            guard !checkingRevocation, phase == .running else { return }
            checkingRevocation = true
            let me = self.me
            // A completion, not a Task: the runtime never waits on Swift concurrency's
            // pool, which an app (or a test runner) may keep busy.
            client.openSession { outcome in
                me.async { engine in
                    engine.checkingRevocation = false
                    if case .failure(let failure) = outcome, failure.isRevoked || failure.hubCode == "not_a_member" {
                        engine.stop(reason: FleetRuntimeError(
                            .revoked,
                            "device \(engine.replica.device.hex.prefix(8)) was revoked from account \(engine.replica.account.hex.prefix(8)): it syncs no more; its store keeps what it held. "
                                + "To come back, join again as a new device (stele join)"))
                    }
                }
            }
        }

        /// The runtime's reading of a failure from the hub or the directory.
        static func runtimeError(_ failure: any Error) -> FleetRuntimeError {
            switch failure {
            case let error as HubClientError where error.isRevoked:
                return FleetRuntimeError(.revoked, "this device was revoked from the account: it syncs no more; its store keeps what it held. To come back, join again as a new device")
            case let error as HubClientError where error.hubCode == "not_a_member":
                return FleetRuntimeError(.awaitingApproval, "this device is not on the account's roster yet: a member must approve it (stele approve)")
            case let error as HubClientError where error.code == .unreachable:
                return FleetRuntimeError(.unreachable, error.message)
            case let error as HubClientError where error.code == .malformed:
                return FleetRuntimeError(.malformed, error.message)
            case let error as HubClientError where error.status == 404:
                return FleetRuntimeError(.unknownAccount, "the account is not on this hub: check the hub's URL (--hub). \(error.message)")
            case let error as HubClientError:
                return FleetRuntimeError(.refused, error.message)
            case let error as RosterError:
                if case .unknownAccount = error { return FleetRuntimeError(.unknownAccount, "the account is not on this hub: check the hub's URL (--hub)") }
                return FleetRuntimeError(.directory, "the roster the hub served does not verify: \(error)")
            case let error as KeyStoreError:
                return FleetRuntimeError(.storage, "the key ring could not be updated: \(error)")
            default:
                return FleetRuntimeError(.directory, "\(failure)")
            }
        }

        // MARK: - Status

        func currentStatus() -> FleetRuntimeStatus {
            let node = driver.node
            return FleetRuntimeStatus(
                connection: connection, isMember: phase == .running, siblingsOutOfSync: phase == .running ? node.siblingsOutOfSync : [], openSessions: node.openSessions,
                framesWaiting: transport.framesWaiting, advertisementDue: node.advertisementDue, collection: node.collectionStatus, error: error)
        }

        /// Publishes the status soon (many changes in a moment publish once).
        func statusChanged() {
            guard !statusDue, phase != .stopped else { return }
            statusDue = true
            later(0.05) { engine in
                engine.statusDue = false
                guard engine.phase != .stopped else { return }
                engine.publish(engine.currentStatus(), nil)
            }
        }

        /// Runs `body` on the queue after `seconds`, unless the runtime stopped by then.
        func later(_ seconds: Double, _ body: @escaping (Engine) -> Void) {
            let work = QueueConfined((self, body), on: queue)
            queue.asyncAfter(deadline: .now() + max(0, seconds)) {
                let (engine, body) = work.value
                guard engine.phase != .stopped else { return }
                body(engine)
            }
        }
    }
}

/// An exclusive lock on a file beside the store (`flock`), held while a runtime
/// runs the store: two runtimes on one device would take each other's frames
/// from the hub. Released when dropped, and by the kernel when the process dies.
final class StoreLock {
    private let descriptor: Int32

    /// - Throws: ``FleetRuntimeError`` `storeInUse` when another process holds it.
    init(path: String) throws {
        // The descriptor is stored only once the lock is held. A class whose
        // initializer throws after every stored property is set runs `deinit`,
        // which would close the descriptor a second time: by then its number may
        // belong to a file another thread opened (libdispatch's epoll file, in
        // the `stele sync` that crashed with SIGILL when refused).
        let opened = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard opened >= 0 else {
            throw FleetRuntimeError(.storage, "cannot open the lock file \(path): \(String(cString: strerror(errno))); check the store's directory is writable")
        }
        guard flock(opened, LOCK_EX | LOCK_NB) == 0 else {
            close(opened)
            throw FleetRuntimeError(.storeInUse, "another process is syncing this store (it holds \(path)); stop the other stele sync first")
        }
        descriptor = opened
    }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
