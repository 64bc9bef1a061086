/// One device's side of fleet sync, as a state machine (DESIGN §3): inputs in
/// (a frame, a timer, a local change), outputs out (frames to send, timers to
/// arm, events to log). No I/O, no threads, no clock: the runtime, real or
/// simulated, delivers the inputs and carries out the outputs, so the simulator
/// runs exactly this code. SQLite is touched within a step (it is local).
///
/// A device advertises its digest (every namespace root, then its generation)
/// periodically and shortly after changes. A device that receives an
/// advertisement with a different root, at the same generation, starts a
/// reconcile of that namespace (``ReconcileEngine``); a different generation
/// stops content reconcile both ways (001 §7). Rows a device learns in a
/// reconcile count as changes, so they travel on to its other siblings.
///
/// It also carries conversations with contacts (``FleetInput/contactsChanged(_:)``, in
/// FleetNode+Delivery.swift): what a conversation owes a contact is delivered
/// to the contact's devices over the contact channel, and receipts come back.
public struct FleetNode {
    public let replica: Replica
    /// The devices of the account, this one included. Frames from anyone else are refused.
    public private(set) var roster: Set<DeviceID>
    /// How the node paces itself (``FleetInput/configurationChanged(_:)``).
    public private(set) var configuration: FleetConfiguration
    /// The sealed channel every frame travels through (`nil` only for a node built
    /// unsealed inside this package, for tests and the benchmark baseline).
    public private(set) var channel: SiblingChannel?
    /// The account keys this device holds, oldest first: the newest seals the
    /// snapshots it serves, any of them may open one (a sibling may not have
    /// heard of a rotation yet).
    public private(set) var accountKeys: [AccountKey]
    /// The contacts this device delivers conversations to (``FleetInput/contactsChanged(_:)``), by account.
    public internal(set) var contacts: [AccountID: ContactRoster] = [:]
    /// The channel to each contact's devices (a node with a sibling channel only).
    var contactChannels: [AccountID: SiblingChannel] = [:]
    var random: any RandomNumberGenerator
    /// Whether ``seal(_:)`` keeps each frame's plaintext beside its sealed bytes
    /// until the next input: the simulator's oracle reads what a frame carries
    /// from the node that sealed it (``plaintext(ofSealed:)``) instead of opening
    /// every frame a second time. Off in an app: a node keeps no plaintext of
    /// what it sent.
    package var keepsSealedPlaintexts = false
    private var sealedPlaintexts: [(sealed: [UInt8], plain: [UInt8])] = []

    /// Whether the input being handled waited in the mailbox while this device was away (``FleetInput/backlog(_:)``).
    var handlingBacklog = false

    /// Sealed frames refused because no device on the roster or a contact's
    /// sealed them: a runtime that sees this grow reads its directory again (a
    /// device approved since the last read) and hands the frames in once more.
    public private(set) var framesFromStrangers = 0

    /// The monotonic time of the latest input (``handle(_:at:)``): durations are
    /// measured on it, never on the wall clock a user may set back.
    public private(set) var monotonicNow: Int64 = 0

    // The sub-machines (Fleet/Machines/), each with its own state and events;
    // this struct routes inputs to them and does the replica's reads and writes.
    /// Advertising and reconcile sessions.
    var sync = ContentSync()
    /// What this device has heard of each sibling.
    var siblings = SiblingView()
    /// The barrier as leader: the round this device leads, its back-off.
    var leading = BarrierLeader()
    /// The barrier as member: the last ack this device recorded, and its hold.
    var acking = BarrierMember()
    /// The debounce before a round is opened or asked for.
    var roundDebounce = Debounce()
    /// Catching up with a fleet whose generation moved past this device.
    var recovery = RecoveryMachine()
    /// Conversations' deliveries to contacts: what may go now, and what waits.
    var delivery = DeliveryGate()
    private var logged: Set<LoggedOnce> = []
    /// The last epoch handed to a timer that may go stale (sessions, rounds, holds).
    var nextEpoch: UInt64 = 0

    /// A node whose frames travel sealed (``SiblingChannel``), the only kind an app builds.
    /// - Parameters:
    ///   - identity: this device's key pair; its public key must be the replica's device id.
    ///   - roster: the account's devices; `revoked`: devices taken off it, refused by name.
    ///   - accountKeys: the account keys this device holds, oldest first (from its ``KeyStore``).
    ///   - random: where session ids, round nonces and the salts and nonces of
    ///     sealing come from. In an app, `SystemRandomNumberGenerator()` (the
    ///     default): a salt drawn twice would seal two frames under one key. The
    ///     simulator passes a seeded generator so that a run replays byte for byte.
    /// - Throws: ``CryptoError`` when `identity` is not the replica's device.
    public init(
        replica: Replica, identity: DeviceIdentity, roster: Set<DeviceID>, revoked: Set<DeviceID> = [], accountKeys: [AccountKey],
        configuration: FleetConfiguration = FleetConfiguration(), random: any RandomNumberGenerator = SystemRandomNumberGenerator()
    ) throws {
        guard identity.deviceID == replica.device else {
            throw CryptoError(message: "the identity's public key \(identity.deviceID) is not this replica's device \(replica.device)")
        }
        self.init(unsealed: replica, roster: roster, accountKeys: accountKeys, configuration: configuration, random: random)
        channel = SiblingChannel(identity: identity, account: replica.account, members: self.roster, revoked: revoked)
    }

    /// A node that sends and accepts unsealed frames: for this package's protocol
    /// tests and the benchmark that measures what sealing costs.
    package init(
        unsealed replica: Replica, roster: Set<DeviceID>, accountKeys: [AccountKey] = [], configuration: FleetConfiguration = FleetConfiguration(),
        random: any RandomNumberGenerator
    ) {
        self.replica = replica
        self.roster = roster.union([replica.device])
        self.configuration = configuration
        self.accountKeys = accountKeys
        self.random = random
    }

    /// The other devices of the roster.
    public var peers: [DeviceID] { roster.subtracting([replica.device]).sorted() }

    /// Reconcile sessions in progress.
    public var openSessions: Int { sync.openSessions }

    /// Handles one input, which arrived at `now` on the runtime's monotonic clock
    /// (milliseconds from any origin; a `now` earlier than the last one counts as the last).
    /// - Parameter mayCarry: whether the transport could carry a frame to a device
    ///   now (``FleetTransport/mayCarry(from:to:)``): a frame it would drop is
    ///   neither sealed nor returned.
    public mutating func handle(_ input: FleetInput, at now: Int64, carrying mayCarry: (DeviceID) -> Bool = { _ in true }) -> [FleetOutput] {
        monotonicNow = max(monotonicNow, now)
        let outputs = seal(step(input), carrying: mayCarry)
        checkInvariants()
        return outputs
    }

    /// What must hold between any two inputs, checked after every step in debug
    /// builds (the simulator's and `scripts/test`'s): a precondition, since
    /// `scripts/test` builds the debug configuration optimized.
    func checkInvariants() {
        #if DEBUG
        let broken = invariantViolations()
        precondition(broken.isEmpty, "FleetNode invariants broken: \(broken.joined(separator: "; "))")
        #endif
    }

    /// Every invariant that does not hold now (empty when the node is sound).
    func invariantViolations() -> [String] {
        sync.violations(device: replica.device, roster: roster) + siblings.violations(device: replica.device, roster: roster)
            + leading.violations(device: replica.device, leader: leader, roster: roster)
    }

    /// Seals every frame among `outputs` for its recipient (a node with a
    /// channel): with the sibling channel, or a contact's for its devices. A
    /// frame for a device `mayCarry` says no frame can reach now is dropped unsealed.
    mutating func seal(_ outputs: [FleetOutput], carrying mayCarry: (DeviceID) -> Bool = { _ in true }) -> [FleetOutput] {
        if !sealedPlaintexts.isEmpty { sealedPlaintexts.removeAll(keepingCapacity: true) }
        guard channel != nil else { return outputs }
        var sealed: [FleetOutput] = []
        sealed.reserveCapacity(outputs.count)
        for output in outputs {
            guard case let .send(recipient, bytes) = output else {
                sealed.append(output)
                continue
            }
            guard mayCarry(recipient) else { continue }
            do {
                // Salts come from the node's generator: replayable in the simulator.
                let sealedBytes: [UInt8]
                if !roster.contains(recipient), let account = contactAccount(of: recipient), var contactChannel = contactChannels[account] {
                    defer { contactChannels[account] = contactChannel }
                    sealedBytes = try contactChannel.seal(bytes, to: recipient, using: &random)
                } else if var channel {
                    defer { self.channel = channel }
                    sealedBytes = try channel.seal(bytes, to: recipient, using: &random)
                } else {
                    continue
                }
                sealed.append(.send(to: recipient, bytes: sealedBytes))
                if keepsSealedPlaintexts { sealedPlaintexts.append((sealedBytes, bytes)) }
            } catch {
                sealed.append(.log(FleetEvent.failed(.rejectedSeal, peer: recipient, namespace: nil, "could not seal a frame for this device: \(error)", error)))
            }
        }
        return sealed
    }

    /// The plaintext of a frame the last input's outputs carry sealed, when
    /// ``keepsSealedPlaintexts`` is on; `nil` for bytes this node did not seal then.
    package func plaintext(ofSealed bytes: [UInt8]) -> [UInt8]? {
        sealedPlaintexts.last { $0.sealed == bytes }?.plain
    }

    private mutating func step(_ input: FleetInput) -> [FleetOutput] {
        switch input {
        case .start:
            sync.onStart()
            siblings = SiblingView()
            leading = BarrierLeader()
            acking = BarrierMember()
            roundDebounce = Debounce()
            recovery = RecoveryMachine()
            // What this device held before it started may have reached a sibling.
            delivery = DeliveryGate()
            noteShared(nil)
            let held = resumeHold()
            // A device alone triggers its own rounds (DESIGN §6); every device checks
            // the anchor at launch (a restore is a relaunch).
            let alone = peers.isEmpty ? considerRound() : []
            return held + advertise(to: peers, greeting: true) + [.arm(.advertise, afterMilliseconds: configuration.advertiseIntervalMilliseconds)] + alone
                + checkAnchor() + attemptDeliveries()
        case .timer(.advertise):
            // An ack that could not be read at start is tried again first.
            let held = acking.unreadable == nil ? [] : resumeHold()
            // So is a check of the anchor that could not read it (seed 7052).
            return held + advertiseToAll() + [.arm(.advertise, afterMilliseconds: configuration.advertiseIntervalMilliseconds)]
                + recheckUnsettledAnchor()
        case .localChange:
            return noteChange() + considerRound()
        case .timer(.changeDebounce):
            sync.onChangeDebounceFired()
            return advertiseToAll() + attemptDeliveries()
        case .timer(.outbox):
            return attemptDeliveries()
        case .timer(.session(let peer, let namespace, let epoch)):
            guard sync.onTimer(ContentSync.Key(peer: peer, namespace: namespace), epoch: epoch) else { return [] }
            return [.log(FleetEvent(kind: .sessionTimedOut, peer: peer, namespace: namespace, message: "no reply within \(configuration.sessionTimeoutMilliseconds) ms; dropped"))]
        case .backlog(let bytes):
            handlingBacklog = true
            defer { handlingBacklog = false }
            return step(.sealed(bytes))
        case .sealed(let bytes):
            guard var channel else {
                return [.log(FleetEvent(kind: .rejectedSeal, peer: nil, namespace: nil, message: "sealed bytes reached a node built without a channel; refused"))]
            }
            let opened: (sender: DeviceID, frame: [UInt8])
            do {
                opened = try channel.open(bytes)
                self.channel = channel
            } catch {
                self.channel = channel
                var failure = error
                if error == .unknownSender {
                    // Not a sibling's: perhaps a contact's delivery.
                    switch openFromContact(bytes) {
                    case .success(let opened): return onContactFrame(opened.frame, from: opened.sender, account: opened.account)
                    case .failure(let contactFailure): failure = contactFailure
                    }
                    framesFromStrangers += 1
                }
                // A revoked device is named: whoever watches can tell it is still talking.
                if case .revokedSender(let device) = failure { return logOnce(.unknownDevice, peer: device, namespace: nil, failure.description) }
                return logOnce(.rejectedSeal, peer: nil, namespace: nil, failure.description)
            }
            return onFrame(opened.frame, from: opened.sender)
        case .frame(let peer, let bytes):
            guard channel == nil else {
                return logOnce(.rejectedSeal, peer: peer, namespace: nil, "an unsealed frame was refused: this node accepts sealed frames only")
            }
            if !roster.contains(peer), let account = contactAccount(of: peer) { return onContactFrame(bytes, from: peer, account: account) }
            return onFrame(bytes, from: peer)
        case .timer(.barrierDebounce):
            return onDebounce()
        case .timer(.barrierRound(let epoch)):
            return onRoundTimer(epoch: epoch)
        case .timer(.barrierBackoff):
            return onBackoffTimer()
        case let .anchorWritten(round, succeeded):
            return onAnchorWritten(round: round, succeeded: succeeded)
        case let .anchorSuperseded(round, reason):
            return onAnchorSuperseded(round: round, reason: reason)
        case .anchorRead(let reading):
            return onAnchorRead(reading)
        case .timer(.snapshotWait):
            recovery.onSnapshotWaitExpired()
            return []
        case .timer(.barrierHold(let epoch)):
            return onHoldTimer(epoch: epoch)
        case let .rosterChanged(members, revoked):
            return onRosterChanged(members, revoked: revoked)
        case .accountKeysChanged(let keys):
            accountKeys = keys
            return []
        case .contactsChanged(let rosters):
            return onContactsChanged(rosters)
        case .configurationChanged(let configuration):
            self.configuration = configuration
            return []
        case .relayDrained:
            delivery.onDrained(at: monotonicNow)
            return attemptDeliveries()
        }
    }

    /// An ack recorded before a crash still awaits its commit: the hold goes on.
    /// If the ack cannot be read, the device cannot tell whether it is in a hold:
    /// it holds records, acks and opens no round, and says so, until a later
    /// try reads it (G5: nothing decided on a guess).
    private mutating func resumeHold() -> [FleetOutput] {
        let ack: BarrierAck?
        do {
            ack = try replica.lastAck()
        } catch {
            guard acking.onRecordedAckUnreadable("\(error)") else { return [] }
            return [
                .log(FleetEvent(
                    kind: .storageFailed, peer: nil, namespace: nil,
                    message: "could not read the ack recorded before the restart (\(error)); no records taken in and no round until it can be read, tried again at each advertisement",
                    failure: FleetFailure(error)))
            ]
        }
        var outputs: [FleetOutput] = []
        var pending: RoundNonce?
        if let ack, ack.generation > replica.generation {
            nextEpoch += 1
            pending = ack.round
            outputs = [.arm(.barrierHold(epoch: nextEpoch), afterMilliseconds: configuration.barrierRoundMilliseconds)]
        }
        let wasUnreadable = acking.onRecordedAckRead(pending: pending, epoch: nextEpoch)
        return outputs + (wasUnreadable ? considerRound() : [])
    }

    private mutating func onRosterChanged(_ devices: Set<DeviceID>, revoked: Set<DeviceID>) -> [FleetOutput] {
        roster = devices.union([replica.device])
        channel?.update(members: roster, revoked: revoked)
        sync.onRosterChanged(roster)
        siblings.onRosterChanged(roster)
        recovery.onRosterChanged(roster)
        if leader != replica.device { leading.onStoppedLeading() }
        guard let round = leading.round, round.members != roster else { return [] }
        return failRound("the roster changed during the round", missing: [])
    }

    // MARK: - Advertising

    /// This device's advertisement: every replicated namespace's root, then the generation.
    public func advertisement() throws -> Advertisement {
        Advertisement(
            roots: try replica.replicatedDigests().map { .init(namespace: $0.namespace, digest: $0.digest) },
            generation: replica.generation)
    }

    func advertiseToAll() -> [FleetOutput] { advertise(to: peers) }

    /// This device's advertisement for `recipients`; as a ``Frame/greeting(_:)``
    /// (each answers with its own) when it starts.
    func advertise(to recipients: [DeviceID], greeting: Bool = false) -> [FleetOutput] {
        guard !recipients.isEmpty else { return [] }
        do {
            let advertisement = try advertisement()
            let bytes = FrameCodec.encode(greeting ? .greeting(advertisement) : .advertisement(advertisement))
            return recipients.map { .send(to: $0, bytes: bytes) }
        } catch {
            return [.log(FleetEvent.failed(.rejectedFrame, peer: nil, namespace: nil, "could not build an advertisement: \(error)", error))]
        }
    }

    mutating func noteChange() -> [FleetOutput] {
        guard sync.onChange() else { return [] }
        return [.arm(.changeDebounce, afterMilliseconds: configuration.changeDebounceMilliseconds)]
    }

    // MARK: - Receiving

    private mutating func onFrame(_ bytes: [UInt8], from peer: DeviceID) -> [FleetOutput] {
        guard roster.contains(peer), peer != replica.device else {
            return logOnce(.unknownDevice, peer: peer, namespace: nil, "a frame from a device that is not on the account's roster was refused")
        }
        let frame: Frame
        do {
            frame = try FrameCodec.decode(bytes)
        } catch {
            return logOnce(.rejectedFrame, peer: peer, namespace: nil, "\(error)", failure: FleetFailure(error))
        }
        let resumed = leading.onHeard(from: peer) ? [FleetOutput.cancel(.barrierBackoff)] : []
        switch frame {
        case .advertisement(let advertisement): return resumed + onAdvertisement(advertisement, from: peer)
        case .greeting(let advertisement):
            // The peer (re)started: it hears where this device stands at once, and a
            // round that waits for its ack gives up now (it will never come).
            return resumed + onRestarted(peer) + onAdvertisement(advertisement, from: peer) + advertise(to: [peer])
        case .reconcile(let message): return resumed + onReconcile(message, from: peer)
        case .gcPropose(let proposal): return resumed + onProposal(proposal, from: peer)
        case .gcAck(let answer): return resumed + onAck(answer, from: peer)
        case .gcCommit(let commit): return resumed + onCommit(commit, from: peer)
        case .gcRequest: return resumed + onRoundRequest(from: peer)
        case .gcAbort(let round): return resumed + onAbort(round, from: peer)
        case .snapshotRequest(let generation): return resumed + onSnapshotRequest(generation, from: peer)
        case .snapshot(let snapshot): return resumed + onSnapshot(snapshot, from: peer)
        case .delivery: return resumed + logOnce(.rejectedFrame, peer: peer, namespace: nil, "a delivery came from a device of this account; deliveries come from contacts only")
        }
    }

    private mutating func onAdvertisement(_ advertisement: Advertisement, from peer: DeviceID) -> [FleetOutput] {
        siblings.onAdvertisement(advertisement, from: peer, agreeing: (try? self.advertisement()) == advertisement, at: monotonicNow)
        guard advertisement.generation == replica.generation else {
            var outputs: [FleetOutput] = []
            if advertisement.generation > replica.generation {
                outputs = heardAhead(peer, at: advertisement.generation)
            } else {
                recovery.onHeard(peer, ahead: nil)
            }
            // 001 §7: pulling across a generation gap is the operation that would resurrect.
            return outputs + logOnce(
                .generationGap, peer: peer, namespace: nil,
                "peer is at generation \(advertisement.generation), this device at \(replica.generation); no content reconcile either way")
        }
        recovery.onHeard(peer, ahead: nil)
        var outputs: [FleetOutput] = []
        let theirs = Dictionary(advertisement.roots.map { ($0.namespace, $0.digest) }, uniquingKeysWith: { first, _ in first })
        var allEqual = true
        var agreedWhileWaiting = false
        for declaration in replica.namespaces where declaration.kind.isReplicated {
            guard let root = theirs[declaration.name] else {
                allEqual = false
                outputs += logOnce(.undeclaredNamespace, peer: peer, namespace: declaration.name, "peer does not advertise this namespace; declare it on every device")
                continue
            }
            let mine: Hash32
            do {
                mine = try replica.digest(of: declaration.name)
            } catch {
                // Unread is not equal: no round may start on it.
                allEqual = false
                outputs += logOnce(.storageFailed, peer: peer, namespace: declaration.name, "could not read this namespace's digest: \(error)", failure: FleetFailure(error))
                continue
            }
            guard mine != root else {
                if declaration.kind == .messages, agreed(on: declaration.name) { agreedWhileWaiting = true }
                continue
            }
            allEqual = false
            outputs += isHoldingRecords ? [] : startSession(with: peer, namespace: declaration)
        }
        for name in theirs.keys where (try? replica.declaration(of: name)) == nil {
            allEqual = false
            outputs += logOnce(.undeclaredNamespace, peer: peer, namespace: name, "peer advertises a namespace this device has not declared")
        }
        if allEqual {
            // 001 §4: the one place where a digest exchange found no divergent namespace.
            outputs.append(.log(FleetEvent(kind: .inSync, peer: peer, namespace: nil, message: "every namespace root equal")))
            outputs += considerRound()
        }
        // What waited goes after the settling moment, if every sibling heard from still agrees then.
        return outputs + (agreedWhileWaiting ? [.arm(.outbox, afterMilliseconds: configuration.deliverySettleMilliseconds)] : [])
    }

    /// Logs a rejection the first time it happens for this peer, namespace and reason.
    mutating func logOnce(_ kind: FleetEvent.Kind, peer: DeviceID?, namespace: String?, _ message: String, failure: FleetFailure? = nil) -> [FleetOutput] {
        // Bounded: a flood of distinct garbage cannot grow it without end.
        if logged.count >= 4_096 { logged.removeAll() }
        guard logged.insert(LoggedOnce(kind: kind, peer: peer, namespace: namespace, message: message)).inserted else { return [] }
        return [.log(FleetEvent(kind: kind, peer: peer, namespace: namespace, message: message, failure: failure))]
    }
}

/// What ``FleetNode/logOnce(_:peer:namespace:_:failure:)`` says once: a rejection
/// is logged once for each kind, peer, namespace and message, not for each frame.
struct LoggedOnce: Hashable {
    let kind: FleetEvent.Kind
    let peer: DeviceID?
    let namespace: String?
    let message: String
}
