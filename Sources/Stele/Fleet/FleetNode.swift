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
    var delivery = DeliveryState()
    var random: any RandomNumberGenerator

    private struct SessionKey: Hashable {
        let peer: DeviceID
        let namespace: String
    }

    private struct Session {
        let id: UInt64
        /// The device that started it (ties between two simultaneous starts go to the lower id).
        let initiator: DeviceID
        var progress = ReconcileEngine.Progress()
        var epoch: UInt64 = 0
    }

    /// The monotonic time of the latest input (``handle(_:at:)``): durations are
    /// measured on it, never on the wall clock a user may set back.
    public private(set) var monotonicNow: Int64 = 0

    private var sessions: [SessionKey: Session] = [:]
    private var changePending = false
    private var logged: Set<String> = []
    var nextEpoch: UInt64 = 0
    var barrier = BarrierState()
    var recovery = RecoveryState()

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
    public var openSessions: Int { sessions.count }

    /// Handles one input, which arrived at `now` on the runtime's monotonic clock
    /// (milliseconds from any origin; a `now` earlier than the last one counts as the last).
    public mutating func handle(_ input: FleetInput, at now: Int64) -> [FleetOutput] {
        monotonicNow = max(monotonicNow, now)
        let outputs = seal(step(input))
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
        var broken: [String] = []
        for key in sessions.keys where !roster.contains(key.peer) || key.peer == replica.device {
            broken.append("a session with \(key.peer), who is not a sibling")
        }
        for peer in barrier.heard.keys where !roster.contains(peer) || peer == replica.device {
            broken.append("an advertisement kept from \(peer), who is not a sibling")
        }
        if let round = barrier.round {
            if leader != replica.device { broken.append("a round open on a device that does not lead") }
            if round.members != roster { broken.append("a round open across a roster change") }
            if !round.acks.keys.allSatisfy(round.members.contains) { broken.append("an ack counted from a device outside the round") }
        }
        return broken
    }

    /// Seals every frame among `outputs` for its recipient (a node with a
    /// channel): with the sibling channel, or a contact's for its devices.
    mutating func seal(_ outputs: [FleetOutput]) -> [FleetOutput] {
        guard channel != nil else { return outputs }
        var sealed: [FleetOutput] = []
        sealed.reserveCapacity(outputs.count)
        for output in outputs {
            guard case let .send(recipient, bytes) = output else {
                sealed.append(output)
                continue
            }
            do {
                // Salts come from the node's generator: replayable in the simulator.
                if !roster.contains(recipient), let account = contactAccount(of: recipient), var contactChannel = contactChannels[account] {
                    defer { contactChannels[account] = contactChannel }
                    sealed.append(.send(to: recipient, bytes: try contactChannel.seal(bytes, to: recipient, using: &random)))
                } else if var channel {
                    defer { self.channel = channel }
                    sealed.append(.send(to: recipient, bytes: try channel.seal(bytes, to: recipient, using: &random)))
                }
            } catch {
                sealed.append(.log(FleetEvent.failed(.rejectedSeal, peer: recipient, namespace: nil, "could not seal a frame for this device: \(error)", error)))
            }
        }
        return sealed
    }

    private mutating func step(_ input: FleetInput) -> [FleetOutput] {
        switch input {
        case .start:
            sessions.removeAll()
            changePending = false
            barrier = BarrierState()
            recovery = RecoveryState()
            // What this device held before it started may have reached a sibling.
            delivery = DeliveryState()
            noteShared(nil)
            let held = resumeHold()
            // A device alone triggers its own rounds (DESIGN §6); every device checks
            // the anchor at launch (a restore is a relaunch).
            let alone = peers.isEmpty ? considerRound() : []
            return held + advertiseToAll() + [.arm(.advertise, afterMilliseconds: configuration.advertiseIntervalMilliseconds)] + alone + checkAnchor()
                + attemptDeliveries()
        case .timer(.advertise):
            // An ack that could not be read at start is tried again first.
            let held = barrier.ackUnreadable == nil ? [] : resumeHold()
            return held + advertiseToAll() + [.arm(.advertise, afterMilliseconds: configuration.advertiseIntervalMilliseconds)]
        case .localChange:
            return noteChange() + considerRound()
        case .timer(.changeDebounce):
            changePending = false
            return advertiseToAll() + attemptDeliveries()
        case .timer(.outbox):
            return attemptDeliveries()
        case .timer(.session(let peer, let namespace, let epoch)):
            let key = SessionKey(peer: peer, namespace: namespace)
            guard let session = sessions[key], session.epoch == epoch else { return [] }
            sessions[key] = nil
            return [.log(FleetEvent(kind: .sessionTimedOut, peer: peer, namespace: namespace, message: "no reply within \(configuration.sessionTimeoutMilliseconds) ms; dropped"))]
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
                    case .success(let opened): return receive(contactFrame: opened.frame, from: opened.sender, account: opened.account)
                    case .failure(let contactFailure): failure = contactFailure
                    }
                }
                // A revoked device is named: whoever watches can tell it is still talking.
                if case .revokedSender(let device) = failure { return logOnce(.unknownDevice, peer: device, namespace: nil, failure.description) }
                return logOnce(.rejectedSeal, peer: nil, namespace: nil, failure.description)
            }
            return receive(opened.frame, from: opened.sender)
        case .frame(let peer, let bytes):
            guard channel == nil else {
                return logOnce(.rejectedSeal, peer: peer, namespace: nil, "an unsealed frame was refused: this node accepts sealed frames only")
            }
            if !roster.contains(peer), let account = contactAccount(of: peer) { return receive(contactFrame: bytes, from: peer, account: account) }
            return receive(bytes, from: peer)
        case .timer(.barrierDebounce):
            return barrierDebounceFired()
        case .timer(.barrierRound(let epoch)):
            return barrierRoundExpired(epoch: epoch)
        case .timer(.barrierBackoff):
            return barrierBackoffFired()
        case let .anchorWritten(round, succeeded):
            return anchorWritten(round: round, succeeded: succeeded)
        case .anchorRead(let reading):
            return anchorRead(reading)
        case .timer(.snapshotWait):
            snapshotRequestExpired()
            return []
        case .timer(.barrierHold(let epoch)):
            return barrierHoldExpired(epoch: epoch)
        case let .rosterChanged(members, revoked):
            return rosterChanged(members, revoked: revoked)
        case .accountKeysChanged(let keys):
            accountKeys = keys
            return []
        case .contactsChanged(let rosters):
            return contactsChanged(rosters)
        case .configurationChanged(let configuration):
            self.configuration = configuration
            return []
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
            let first = barrier.ackUnreadable == nil
            barrier.ackUnreadable = "\(error)"
            guard first else { return [] }
            return [
                .log(FleetEvent(
                    kind: .storageFailed, peer: nil, namespace: nil,
                    message: "could not read the ack recorded before the restart (\(error)); no records taken in and no round until it can be read, tried again at each advertisement",
                    failure: FleetFailure(error)))
            ]
        }
        let wasUnreadable = barrier.ackUnreadable != nil
        barrier.ackUnreadable = nil
        var outputs: [FleetOutput] = []
        if let ack, ack.generation > replica.generation {
            nextEpoch += 1
            barrier.held = (ack.round, nextEpoch)
            barrier.outstanding = ack.round
            barrier.answered.insert(ack.round)
            outputs = [.arm(.barrierHold(epoch: nextEpoch), afterMilliseconds: configuration.barrierRoundMilliseconds)]
        }
        return outputs + (wasUnreadable ? considerRound() : [])
    }

    private mutating func rosterChanged(_ devices: Set<DeviceID>, revoked: Set<DeviceID>) -> [FleetOutput] {
        roster = devices.union([replica.device])
        channel?.update(members: roster, revoked: revoked)
        for key in sessions.keys where !roster.contains(key.peer) { sessions[key] = nil }
        barrier.heard = barrier.heard.filter { roster.contains($0.key) }
        // A request is for the leader; one that stopped leading forgets it.
        if leader != replica.device { barrier.requested = false }
        guard let round = barrier.round, round.members != roster else { return [] }
        return failRound("the roster changed during the round", missing: [])
    }

    // MARK: - Advertising

    /// This device's advertisement: every replicated namespace's root, then the generation.
    public func advertisement() throws -> Advertisement {
        Advertisement(
            roots: try replica.namespaces.filter { $0.kind.isReplicated }.map { .init(namespace: $0.name, digest: try replica.digest(of: $0.name)) },
            generation: replica.generation)
    }

    func advertiseToAll() -> [FleetOutput] {
        do {
            let bytes = FrameCodec.encode(.advertisement(try advertisement()))
            return peers.map { .send(to: $0, bytes: bytes) }
        } catch {
            return [.log(FleetEvent.failed(.rejectedFrame, peer: nil, namespace: nil, "could not build an advertisement: \(error)", error))]
        }
    }

    mutating func noteChange() -> [FleetOutput] {
        guard !changePending else { return [] }
        changePending = true
        return [.arm(.changeDebounce, afterMilliseconds: configuration.changeDebounceMilliseconds)]
    }

    // MARK: - Receiving

    private mutating func receive(_ bytes: [UInt8], from peer: DeviceID) -> [FleetOutput] {
        guard roster.contains(peer), peer != replica.device else {
            return logOnce(.unknownDevice, peer: peer, namespace: nil, "a frame from a device that is not on the account's roster was refused")
        }
        let frame: Frame
        do {
            frame = try FrameCodec.decode(bytes)
        } catch {
            return logOnce(.rejectedFrame, peer: peer, namespace: nil, "\(error)", failure: FleetFailure(error))
        }
        let resumed = heardFrom(peer)
        switch frame {
        case .advertisement(let advertisement): return resumed + receive(advertisement, from: peer)
        case .reconcile(let message): return resumed + receive(message, from: peer)
        case .gcPropose(let proposal): return resumed + receive(proposal: proposal, from: peer)
        case .gcAck(let answer): return resumed + receive(answer, from: peer)
        case .gcCommit(let commit): return resumed + receive(commit: commit, from: peer)
        case .gcRequest: return resumed + receiveRoundRequest(from: peer)
        case .snapshotRequest(let generation): return resumed + receive(snapshotRequest: generation, from: peer)
        case .snapshot(let snapshot): return resumed + receive(snapshot: snapshot, from: peer)
        case .delivery: return resumed + logOnce(.rejectedFrame, peer: peer, namespace: nil, "a delivery came from a device of this account; deliveries come from contacts only")
        }
    }

    private mutating func receive(_ advertisement: Advertisement, from peer: DeviceID) -> [FleetOutput] {
        barrier.heard[peer] = advertisement
        delivery.heardAt[peer] = monotonicNow
        if (try? self.advertisement()) == advertisement { barrier.agreedAt[peer] = monotonicNow }
        guard advertisement.generation == replica.generation else {
            var outputs: [FleetOutput] = []
            if advertisement.generation > replica.generation {
                outputs = heardAhead(peer, at: advertisement.generation)
            } else {
                recovery.ahead[peer] = nil
            }
            // 001 §7: pulling across a generation gap is the operation that would resurrect.
            return outputs + logOnce(
                .generationGap, peer: peer, namespace: nil,
                "peer is at generation \(advertisement.generation), this device at \(replica.generation); no content reconcile either way")
        }
        recovery.ahead[peer] = nil
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

    private mutating func startSession(with peer: DeviceID, namespace declaration: NamespaceDeclaration) -> [FleetOutput] {
        let key = SessionKey(peer: peer, namespace: declaration.name)
        guard sessions[key] == nil else { return [] }
        do {
            let source = try NamespaceSync(replica: replica, declaration: declaration)
            var session = Session(id: random.next(), initiator: replica.device)
            let opening = try ReconcileEngine.opening(session: session.id, generation: replica.generation, source: source)
            let timer = armTimer(for: key, &session)
            sessions[key] = session
            return [
                .send(to: peer, bytes: FrameCodec.encode(.reconcile(opening))), timer,
                .log(FleetEvent(kind: .sessionStarted, peer: peer, namespace: declaration.name, message: "roots differ")),
            ]
        } catch {
            return [.log(FleetEvent.failed(.rejectedRecords, peer: peer, namespace: declaration.name, "could not start a reconcile: \(error)", error))]
        }
    }

    /// Between its ack (or, leading, its proposal) and the round's end, a device
    /// applies no sibling's records (``BarrierState/held``): it starts no reconcile
    /// and answers reconcile steps with an empty one that ends the peer's session.
    var isHoldingRecords: Bool { barrier.round != nil || barrier.held != nil || barrier.ackUnreadable != nil }

    private mutating func receive(_ message: ReconcileMessage, from peer: DeviceID) -> [FleetOutput] {
        guard !isHoldingRecords else {
            // An empty step ends the peer's session now rather than at its timeout;
            // this device advertises when the round ends, and the reconcile starts again.
            let end = ReconcileMessage(session: message.session, namespace: message.namespace, kind: message.kind, generation: message.generation)
            return (message.needsReply ? [.send(to: peer, bytes: FrameCodec.encode(.reconcile(end)))] : [])
                + logOnce(.reconcileHeld, peer: peer, namespace: message.namespace, "a barrier round is open; records wait until it ends")
        }
        guard let declaration = try? replica.declaration(of: message.namespace), declaration.kind == message.kind else {
            return logOnce(.undeclaredNamespace, peer: peer, namespace: message.namespace, "a reconcile for a namespace not declared here as \(message.kind) was refused")
        }
        guard message.generation == replica.generation else {
            return logOnce(
                .generationGap, peer: peer, namespace: message.namespace,
                "reconcile at generation \(message.generation) refused at generation \(replica.generation)")
        }
        let key = SessionKey(peer: peer, namespace: message.namespace)
        var session: Session
        if let existing = sessions[key], existing.id == message.session {
            session = existing
        } else if let existing = sessions[key], existing.initiator == replica.device, replica.device < peer {
            // Both started at once: the session of the lower device id goes on; the peer adopts it.
            _ = existing
            return []
        } else {
            session = Session(id: message.session, initiator: peer)
        }
        // Records may come in now: an ack whose commit never came stops vouching for this content.
        let withdrawn = withdrawOutstandingAck()
        do {
            let source = try NamespaceSync(replica: replica, declaration: declaration)
            let before = session.progress.changed
            let reply = try ReconcileEngine.respond(to: message, source: source, progress: &session.progress)
            var outputs: [FleetOutput] = withdrawn
            if session.progress.changed > before { outputs += noteChange() }
            // A reply that asks nothing back ends the session here; with nothing to
            // say at all, an empty reply tells a peer that is waiting that it is over.
            let outgoing = reply ?? (message.needsReply ? ReconcileMessage(session: message.session, namespace: message.namespace, kind: message.kind, generation: message.generation) : nil)
            if let outgoing {
                // A conversation's records left for a sibling: what they carry may be deleted there.
                if outgoing.kind == .messages, !outgoing.records.isEmpty || outgoing.tombstones?.isEmpty == false { noteShared(outgoing.namespace) }
                outputs.append(.send(to: peer, bytes: FrameCodec.encode(.reconcile(outgoing))))
            }
            if let outgoing, outgoing.needsReply {
                outputs.append(armTimer(for: key, &session))
                sessions[key] = session
            } else {
                sessions[key] = nil
                if session.epoch > 0 { outputs.append(.cancel(.session(peer: peer, namespace: message.namespace, epoch: session.epoch))) }
                outputs.append(
                    .log(FleetEvent(kind: .sessionFinished, peer: peer, namespace: message.namespace, message: "\(session.progress.changed) rows changed here, \(session.progress.conflicts) conflicts")))
                // What this device holds may now equal what its siblings last advertised.
                outputs += considerRound()
            }
            return outputs
        } catch {
            sessions[key] = nil
            return withdrawn + [.log(FleetEvent.failed(.rejectedRecords, peer: peer, namespace: message.namespace, "reconcile refused: \(error)", error))]
        }
    }

    private mutating func armTimer(for key: SessionKey, _ session: inout Session) -> FleetOutput {
        nextEpoch += 1
        session.epoch = nextEpoch
        return .arm(.session(peer: key.peer, namespace: key.namespace, epoch: nextEpoch), afterMilliseconds: configuration.sessionTimeoutMilliseconds)
    }

    /// Logs a rejection the first time it happens for this peer, namespace and reason.
    mutating func logOnce(_ kind: FleetEvent.Kind, peer: DeviceID?, namespace: String?, _ message: String, failure: FleetFailure? = nil) -> [FleetOutput] {
        // Bounded: a flood of distinct garbage cannot grow it without end.
        if logged.count >= 4_096 { logged.removeAll() }
        guard logged.insert("\(kind)|\(peer?.hex ?? "")|\(namespace ?? "")|\(message)").inserted else { return [] }
        return [.log(FleetEvent(kind: kind, peer: peer, namespace: namespace, message: message, failure: failure))]
    }
}
