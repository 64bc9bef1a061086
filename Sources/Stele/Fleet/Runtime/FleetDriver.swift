/// Runs one device's ``FleetNode`` in a ``FleetEnvironment``: the glue every
/// runtime needs and none should write again. It owns the replica, the key store
/// and the node, on one serial owner (every call, completion and timer on it;
/// ``FleetScheduler/assertOnOwner()`` checks). It keeps the timer table (arming
/// a timer replaces it, a cancelled or replaced timer never fires), seals the
/// anchor with the newest account key and opens it with any key held, reads the
/// directory (pinning the roster it verified and unwrapping the keys sealed for
/// this device into the key store), refreshes the contacts' rosters, and turns
/// the replica's local writes into ``FleetInput/localChange``.
///
/// Inputs that arrive while the driver is carrying out outputs (a completion
/// called at once) wait their turn: the node sees one input at a time.
public final class FleetDriver {
    public let replica: Replica
    /// This device's key pair (`nil` only for an unsealed node inside this package).
    public let identity: DeviceIdentity?
    public let keyStore: (any KeyStore)?
    public private(set) var node: FleetNode

    /// Keeps each sealed frame's plaintext until the next input (the simulator's
    /// oracle; ``FleetNode/keepsSealedPlaintexts``).
    package var keepsSealedPlaintexts: Bool {
        get { node.keepsSealedPlaintexts }
        set { node.keepsSealedPlaintexts = newValue }
    }
    /// Called with every event the node logs, in order.
    public var onEvent: ((FleetEvent) -> Void)?
    /// The latest failure a step reported, typed (``FleetFailure``): a status
    /// line tells a full disk (``FleetFailure/isDiskFull``) from a bad frame by it.
    public private(set) var lastFailure: FleetFailure?
    /// The accounts this device talks to: ``refreshContacts(completion:)`` reads their rosters.
    public var contactAccounts: [AccountID] = []

    private let environment: FleetEnvironment
    private struct Armed {
        let id: UInt64
        let deadline: Int64
        let timer: any FleetScheduledTimer
    }
    private var timers: [FleetTimer: Armed] = [:]
    private var nextTimerID: UInt64 = 0
    private var inbox: [FleetInput] = []
    private var draining = false
    private var localChangeQueued = false
    private var stopped = false
    /// Where the nonces anchors are sealed under come from.
    private var anchorRandom: any RandomNumberGenerator
    /// While the device's disk is full: frames that arrive before `until` (the
    /// scheduler's monotonic time) are dropped unopened, and the pause doubles
    /// with each step that fails for want of space again.
    private var diskFullPause: (until: Int64, length: Int64)?
    /// A step being carried out logged a failure for want of space.
    private var stepFoundDiskFull = false
    /// Frames dropped unopened while the disk was full.
    public private(set) var framesDroppedForDiskFull = 0
    /// The first pause after the disk fills, and the longest.
    public static let diskFullPauseMilliseconds: Int64 = 1_000
    public static let diskFullMaximumPauseMilliseconds: Int64 = 60_000
    /// Whether local writes reach the node by themselves (off: the owner calls ``nudge()``).
    package var deliversLocalChanges = true

    /// A driver for a device whose frames travel sealed: the node starts on the
    /// roster and the account keys its key store holds (pinned at its last
    /// directory read); call ``start()``, then ``refreshDirectory(completion:)``.
    /// - Throws: ``CryptoError`` when `identity` is not the replica's device;
    ///   ``KeyStoreError`` when the key store cannot be read.
    ///   `random` is the node's (``FleetNode/init(replica:identity:roster:revoked:accountKeys:configuration:random:)``);
    ///   `anchorRandom` gives the nonce each anchor is sealed under. Both must be
    ///   cryptographically secure in an app (the defaults); the simulator passes
    ///   seeded ones so that a run replays byte for byte.
    public init(
        replica: Replica, identity: DeviceIdentity, keyStore: any KeyStore, environment: FleetEnvironment,
        configuration: FleetConfiguration = FleetConfiguration(), random: any RandomNumberGenerator = SystemRandomNumberGenerator(),
        anchorRandom: any RandomNumberGenerator = SystemRandomNumberGenerator()
    ) throws {
        let ring = try keyStore.load()
        self.anchorRandom = anchorRandom
        self.replica = replica
        self.identity = identity
        self.keyStore = keyStore
        self.environment = environment
        node = try FleetNode(
            replica: replica, identity: identity, roster: ring?.roster?.members ?? [], revoked: ring?.roster?.revoked ?? [],
            accountKeys: ring?.orderedAccountKeys ?? [], configuration: configuration, random: random)
        observeLocalChanges()
    }

    /// A driver for an unsealed node: this package's protocol tests only.
    package init(
        unsealed replica: Replica, roster: Set<DeviceID>, accountKeys: [AccountKey], environment: FleetEnvironment, configuration: FleetConfiguration,
        random: any RandomNumberGenerator
    ) {
        self.replica = replica
        identity = nil
        keyStore = nil
        anchorRandom = SystemRandomNumberGenerator()
        self.environment = environment
        node = FleetNode(unsealed: replica, roster: roster, accountKeys: accountKeys, configuration: configuration, random: random)
        observeLocalChanges()
    }

    /// The timers armed now, with when they fire on the scheduler's monotonic clock.
    public var armedTimers: [FleetTimer: Int64] { timers.mapValues(\.deadline) }

    /// Starts the node: it advertises, arms its timers and checks the anchor.
    /// After a crash, a new driver over the reopened replica starts instead
    /// (a stopped driver stays stopped).
    public func start() { handle(.start) }

    /// Stops for good: every timer is cancelled, and nothing that arrives later
    /// (a frame, a completion, a change) reaches the node.
    public func stop() {
        stopped = true
        for armed in timers.values { armed.timer.cancel() }
        timers.removeAll()
        inbox.removeAll()
    }

    /// Sealed bytes the transport received for this device. `sender` is what
    /// the transport claims; a sealed node trusts only the seal.
    ///
    /// While the disk is full (``isPausedForDiskFull``) the bytes are dropped
    /// unopened: every frame a sibling sends asks for a write, each would fail
    /// the same way, and the protocol recovers dropped frames like lost ones
    /// (advertisements repeat, sessions time out, a round fails and backs off).
    ///
    /// `backlog`: the bytes waited in this device's mailbox while it was away
    /// (``FleetInput/backlog(_:)``).
    public func receive(_ bytes: [UInt8], from sender: DeviceID, backlog: Bool = false) {
        if isPausedForDiskFull {
            framesDroppedForDiskFull += 1
            return
        }
        handle(identity == nil ? .frame(from: sender, bytes: bytes) : backlog ? .backlog(bytes) : .sealed(bytes))
    }

    /// Whether frames are being dropped because the last step found the disk full.
    public var isPausedForDiskFull: Bool {
        guard let diskFullPause else { return false }
        return environment.scheduler.monotonicMilliseconds < diskFullPause.until
    }

    /// Tells the node the app wrote (the driver does this itself for writes on
    /// its replica) or that the world changed enough to look again (back online).
    public func nudge() { handle(.localChange) }

    /// Replaces how the node paces itself.
    public func setConfiguration(_ configuration: FleetConfiguration) { handle(.configurationChanged(configuration)) }

    /// Hands one input to the node and carries out what it returns.
    public func handle(_ input: FleetInput) {
        environment.scheduler.assertOnOwner()
        guard !stopped else { return }
        inbox.append(input)
        guard !draining else { return }
        draining = true
        defer { draining = false }
        stepFoundDiskFull = false
        var framesTaken = false
        while !inbox.isEmpty, !stopped {
            let input = inbox.removeFirst()
            switch input {
            case .sealed, .backlog, .frame: framesTaken = true
            default: break
            }
            let (transport, device) = (environment.transport, replica.device)
            carryOut(node.handle(input, at: environment.scheduler.monotonicMilliseconds) { transport.mayCarry(from: device, to: $0) })
        }
        noteDiskFull(stepFoundDiskFull, framesTaken: framesTaken)
    }

    /// A step that failed for want of space starts the pause, or doubles it when
    /// the last one ended with the disk still full; frames taken in without that
    /// failure once the pause is over end it.
    private func noteDiskFull(_ full: Bool, framesTaken: Bool) {
        let now = environment.scheduler.monotonicMilliseconds
        if full {
            let length = diskFullPause.map { min($0.length * 2, Self.diskFullMaximumPauseMilliseconds) } ?? Self.diskFullPauseMilliseconds
            diskFullPause = (now + length, length)
        } else if framesTaken, let pause = diskFullPause, now >= pause.until {
            diskFullPause = nil
        }
    }

    private func carryOut(_ outputs: [FleetOutput]) {
        for output in outputs where !stopped {
            switch output {
            case let .send(recipient, bytes): environment.transport.send(bytes, from: replica.device, to: recipient)
            case let .arm(timer, delay): arm(timer, afterMilliseconds: delay)
            case .cancel(let timer): timers.removeValue(forKey: timer)?.timer.cancel()
            case .log(let event):
                if let failure = event.failure {
                    lastFailure = failure
                    if failure.isDiskFull { stepFoundDiskFull = true }
                }
                onEvent?(event)
            case .writeAnchor(let anchor): write(anchor)
            case .readAnchor: readAnchor()
            }
        }
    }

    // MARK: - Timers

    private func arm(_ timer: FleetTimer, afterMilliseconds delay: Int64) {
        timers.removeValue(forKey: timer)?.timer.cancel()
        nextTimerID += 1
        let id = nextTimerID
        let deadline = environment.scheduler.monotonicMilliseconds + delay
        let scheduled = environment.scheduler.schedule(afterMilliseconds: delay) { [weak self] in self?.fire(timer, id: id) }
        timers[timer] = Armed(id: id, deadline: deadline, timer: scheduled)
    }

    private func fire(_ timer: FleetTimer, id: UInt64) {
        // A scheduler that fires a cancelled timer anyway (a race it lost) is ignored.
        guard timers[timer]?.id == id else { return }
        timers[timer] = nil
        handle(.timer(timer))
    }

    // MARK: - The change feed

    private func observeLocalChanges() {
        replica.observeChanges { [weak self] event in
            guard event.origin == .local, let self, self.deliversLocalChanges, !self.localChangeQueued, !self.stopped else { return }
            // One input for a burst of writes, after the write that caused them has returned.
            self.localChangeQueued = true
            _ = self.environment.scheduler.schedule(afterMilliseconds: 0) { [weak self] in
                guard let self else { return }
                self.localChangeQueued = false
                self.handle(.localChange)
            }
        }
    }

    // MARK: - The anchor

    /// Seals the anchor with the newest account key held (the one every member
    /// holds after a rotation; a revoked device never gets it) and writes it.
    private func write(_ anchor: Anchor) {
        let round = anchor.header.round
        guard let key = node.accountKeys.last else {
            let failure = FleetFailure(cause: .crypto, detail: "no account key")
            lastFailure = failure
            onEvent?(
                FleetEvent(
                    kind: .roundFailed, peer: nil, namespace: nil, message: "no account key to seal the anchor with; this device has not received one", failure: failure))
            handle(.anchorWritten(round: round, succeeded: false))
            return
        }
        environment.anchors.writeAnchor(AnchorFile.encode(anchor, key: key, using: &anchorRandom), of: replica.account) { [weak self] result in
            switch result {
            case .failure(let error) where error.code == .superseded: self?.handle(.anchorSuperseded(round: round, reason: error.message))
            case .failure: self?.handle(.anchorWritten(round: round, succeeded: false))
            case .success: self?.handle(.anchorWritten(round: round, succeeded: true))
            }
        }
    }

    private func readAnchor() {
        environment.anchors.readAnchor(of: replica.account) { [weak self] result in
            guard let self else { return }
            self.handle(.anchorRead(Self.opening(result, account: self.replica.account, keys: self.node.accountKeys)))
        }
    }

    /// Tells "no anchor" from "cannot read it": an anchor that exists and opens
    /// with none of the keys held is unopened (its header read), never absent (G5).
    package static func opening(_ result: Result<[UInt8]?, AnchorError>, account: AccountID, keys: [AccountKey]) -> AnchorReading {
        let bytes: [UInt8]
        switch result {
        case .failure(let error): return .unavailable(error.message)
        case .success(nil): return AnchorReading.none
        case .success(let found?): bytes = found
        }
        let header: AnchorHeader
        do {
            header = try AnchorFile.header(bytes)
            guard header.account == account else {
                return .unavailable("the anchor read belongs to account \(header.account), not \(account)")
            }
        } catch {
            return .unavailable("\(error)")
        }
        var failure = "this device holds no account key"
        // Newest first: after a rotation the anchor is sealed with the new key.
        for key in keys.reversed() {
            do {
                return .found(try AnchorFile.decode(bytes, key: key))
            } catch {
                failure = "\(error)"
            }
        }
        return .unopened(header, failure)
    }

    // MARK: - The directory

    /// Reads the account's roster and this device's wrapped keys, then the contacts' rosters.
    public func refreshDirectory(completion: ((Result<Void, any Error>) -> Void)? = nil) {
        refreshRoster { [weak self] result in
            self?.refreshContacts()
            completion?(result)
        }
    }

    /// Reads the account's roster and the keys wrapped for this device. The
    /// roster must extend the one pinned in the key store (a directory cannot
    /// serve an older or forked log, ``Roster/adopting(_:)``); keys it lacks are
    /// opened and saved in the key store before the node hears of them, then
    /// the node gets the keys, then the roster. Anything that does not hold is
    /// refused whole, and said (``FleetEvent/Kind/directoryFailed``).
    public func refreshRoster(completion: ((Result<Void, any Error>) -> Void)? = nil) {
        guard let identity, let keyStore else {
            completion?(.success(()))
            return
        }
        environment.directory.read(replica.account, keysFor: replica.device) { [weak self] result in
            guard let self else { return }
            do {
                let reading = try result.get()
                let stored = try keyStore.load()
                var ring = stored ?? KeyRing(identity: identity)
                let roster = try ring.roster?.adopting(reading.roster) ?? reading.roster
                ring.roster = roster
                for wrapped in reading.wrappedKeys where ring.accountKeys[wrapped.epoch] == nil {
                    ring.insert(try wrapped.open(with: identity, roster: roster), epoch: wrapped.epoch)
                }
                if ring != stored { try keyStore.save(ring) }
                self.handle(.accountKeysChanged(ring.orderedAccountKeys))
                self.handle(.rosterChanged(members: roster.members, revoked: roster.revoked))
                completion?(.success(()))
            } catch {
                self.onEvent?(FleetEvent(kind: .directoryFailed, peer: nil, namespace: nil, message: "the account's directory entry was not taken: \(error)"))
                completion?(.failure(error))
            }
        }
    }

    /// Reads the roster of every account in ``contactAccounts`` and hands them
    /// to the node together; an account that cannot be read is left out (its
    /// deliveries wait) and said.
    public func refreshContacts(completion: (() -> Void)? = nil) {
        let accounts = contactAccounts
        final class Gathering {
            var rosters: [AccountID: ContactRoster] = [:]
            var pending: Int
            init(_ pending: Int) { self.pending = pending }
        }
        let gathering = Gathering(accounts.count)
        let finish = { [weak self] in
            self?.handle(.contactsChanged(accounts.compactMap { gathering.rosters[$0] }))
            completion?()
        }
        guard !accounts.isEmpty else { return finish() }
        for account in accounts {
            environment.directory.read(account, keysFor: nil) { [weak self] result in
                switch result {
                case .success(let reading): gathering.rosters[account] = ContactRoster(reading.roster)
                case .failure(let error):
                    self?.onEvent?(FleetEvent(kind: .directoryFailed, peer: nil, namespace: nil, message: "contact \(account)'s roster could not be read: \(error)"))
                }
                gathering.pending -= 1
                if gathering.pending == 0 { finish() }
            }
        }
    }
}
