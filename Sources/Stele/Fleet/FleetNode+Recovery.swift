/// Catching up with the fleet's generation (001 §7, DESIGN §6). A device checks
/// the anchor at launch and whenever a sibling advertises a higher generation:
/// - an anchor ahead of it names a round this device acked: it only missed the
///   commit, and adopts the generation without any import;
/// - an anchor ahead of it names a round it has no memory of: it was rolled
///   back by a restore, and recovers from the anchor's snapshot;
/// - with the anchor out of reach (or not ahead) while a sibling is: it asks
///   that sibling for a snapshot, so it is never stuck for want of the anchor.
/// What a device can say about collection (DESIGN §6 "Nothing is silent").
public struct CollectionStatus: Sendable {
    /// Current, behind, rolled back, recovering, or stuck and why.
    public let state: RecoveryStatus
    public let generation: UInt64
    /// Tombstones retained, per namespace that keeps any.
    public let tombstones: [String: Int]
    /// When this device last collected (wall-clock ms) and how many, if ever.
    public let lastCollection: (milliseconds: Int64, count: Int)?
    /// The siblings that keep it from collecting, each with when it was last heard
    /// agreeing with this device, on the runtime's monotonic clock (``FleetNode/monotonicNow``;
    /// `nil`: not since this node started).
    public let blockedBy: [(device: DeviceID, lastAgreedMilliseconds: Int64?)]
}

/// How a device stands with respect to the fleet's generation (DESIGN §6 "Nothing is silent").
public enum RecoveryStatus: Sendable, Equatable, CustomStringConvertible {
    /// No sibling is known to be ahead.
    case current
    /// A sibling is ahead; catching up has not started yet.
    case behind
    /// The anchor showed this device was restored from before the fleet's last
    /// collection; it has not recovered yet.
    case rolledBack
    /// Catching up: reading the anchor or waiting for a sibling's snapshot.
    case recovering
    /// Behind, and the last attempt to catch up failed: why.
    case stuck(String)

    public var description: String {
        switch self {
        case .current: "current"
        case .behind: "behind"
        case .rolledBack: "rolled-back"
        case .recovering: "recovering"
        case .stuck(let reason): "stuck (\(reason))"
        }
    }
}

extension FleetNode {
    /// The siblings that keep this device from collecting, as it sees them: it may
    /// hold tombstones, and their last advertisement (if any) differs from its own
    /// (DESIGN §6 "Nothing is silent"). Empty when there is nothing to collect.
    public var blockingCollection: [DeviceID] {
        guard replica.mayHoldTombstones, let mine = try? advertisement() else { return [] }
        return peers.filter { siblings.heard[$0] != mine }
    }

    /// Everything a device can say about collection from its own view (DESIGN §6
    /// "Nothing is silent").
    public var collectionStatus: CollectionStatus {
        CollectionStatus(
            state: recoveryStatus, generation: replica.generation,
            tombstones: (try? replica.tombstoneCounts()) ?? [:],
            lastCollection: try? replica.lastCollection(),
            blockedBy: blockingCollection.map { (device: $0, lastAgreedMilliseconds: siblings.agreedAt[$0]) })
    }

    /// Where this device stands with respect to the fleet's generation.
    public var recoveryStatus: RecoveryStatus { recovery.status(at: replica.generation) }

    /// Starts a check of the anchor unless one is under way.
    mutating func checkAnchor() -> [FleetOutput] {
        guard configuration.collects, recovery.onCheckAnchor() else { return [] }
        return [.readAnchor]
    }

    /// A sibling advertised a generation above this device's.
    mutating func heardAhead(_ peer: DeviceID, at generation: UInt64) -> [FleetOutput] {
        recovery.onHeard(peer, ahead: generation)
        return checkAnchor()
    }

    /// The anchor read ended: adopt it, recover from it, or ask a sibling.
    mutating func onAnchorRead(_ reading: AnchorReading) -> [FleetOutput] {
        switch reading {
        case .found(let anchor):
            guard anchor.header.account == replica.account else {
                recovery.onAnchorRead()
                return askSibling(because: "the anchor belongs to another account")
            }
            switch AnchorDecision.decide(local: replica.generation, anchor: anchor.header.generation) {
            case .noAnchor, .current:
                return settled(because: "the anchor is not ahead of this device")
            case .rolledBack:
                recovery.onAnchorRead()
                return catchUp(with: anchor)
            }
        case .none:
            return settled(because: "no anchor has been written")
        case .unopened(let header, let why):
            // Not ahead: the body is not needed (a device that joined after the key
            // it was sealed with). Ahead: only a sibling can bring this device up.
            guard header.account == replica.account, header.generation > replica.generation else {
                return settled(because: "the anchor is not ahead of this device")
            }
            recovery.onAnchorRead()
            return askSibling(because: "the anchor is at generation \(header.generation) and cannot be opened: \(why)")
        case .unavailable(let why):
            // Not settled: tried again at each advertisement (``RecoveryMachine/anchorUnsettled``).
            recovery.onAnchorRead()
            return askSibling(because: "the anchor cannot be read: \(why)")
        }
    }

    /// The read told where the anchor stands, and it is not ahead: a round this
    /// device leads may write over it again, and one it held back for the read may open.
    private mutating func settled(because reason: String) -> [FleetOutput] {
        recovery.onAnchorRead(settled: true)
        return askSibling(because: reason) + considerRound()
    }

    /// At each advertisement: a check of the anchor that could not read it is tried
    /// again (not while this device's own round is open: it is writing the anchor).
    mutating func recheckUnsettledAnchor() -> [FleetOutput] {
        recovery.anchorUnsettled && leading.round == nil ? checkAnchor() : []
    }

    private mutating func catchUp(with anchor: Anchor) -> [FleetOutput] {
        let header = anchor.header
        do {
            if let ack = try replica.lastAck(), ack.round == header.round, ack.generation == header.generation {
                // It acked that round: it missed the commit, nothing was rolled back.
                // What the fleet had seen is what later recoveries keep local records
                // against: a snapshot that does not decode is no anchor to adopt.
                let knowledge = try Snapshot(decoding: anchor.snapshot).knowledge
                let outcome = try replica.commit(round: header.round, digest: header.digest, generation: header.generation, knowledge: knowledge)
                return caughtUp(fromAnchor: true, "adopted generation \(header.generation) from the anchor of a round it had acked (\(outcome))")
            }
            recovery.onRolledBack()
            let snapshot = try Snapshot(decoding: anchor.snapshot)
            guard snapshot.generation == header.generation else {
                return askSibling(because: "the anchor's snapshot is for generation \(snapshot.generation), its header says \(header.generation)")
            }
            let outcome = try replica.recover(from: snapshot)
            return caughtUp(
                fromAnchor: true,
                "rolled back below the anchor: recovered generation \(header.generation) from it (\(outcome.imported) imported, "
                    + "\(outcome.keptLocal) kept from after the restore, \(outcome.dropped) dropped)")
        } catch {
            return askSibling(because: "recovery from the anchor failed: \(error)")
        }
    }

    /// Asks the sibling furthest ahead for a snapshot, or records why this device is stuck.
    private mutating func askSibling(because reason: String) -> [FleetOutput] {
        guard let peer = recovery.furthestAhead(of: replica.generation) else {
            recovery.onNobodyToAsk()
            return []
        }
        recovery.onAskedForSnapshot(from: peer, because: reason)
        return [
            .send(to: peer, bytes: FrameCodec.encode(.snapshotRequest(generation: replica.generation))),
            .arm(.snapshotWait, afterMilliseconds: configuration.sessionTimeoutMilliseconds),
            .log(FleetEvent(kind: .recoveryFailed, peer: peer, namespace: nil, message: "\(reason); asking this sibling for a snapshot")),
        ]
    }

    /// A sibling behind this device asks for its snapshot.
    mutating func onSnapshotRequest(_ generation: UInt64, from peer: DeviceID) -> [FleetOutput] {
        guard configuration.collects, replica.generation > generation else {
            return [.log(FleetEvent(kind: .snapshotDeclined, peer: peer, namespace: nil, message: "a snapshot request from generation \(generation), not behind this device"))]
        }
        do {
            guard let key = accountKeys.last else {
                return [
                    .log(FleetEvent(
                        kind: .snapshotDeclined, peer: peer, namespace: nil, message: "no account key to seal a snapshot with; this device has not received one",
                        failure: FleetFailure(cause: .crypto, detail: "no account key")))
                ]
            }
            // It vouches only for what the fleet agreed at the rounds this device
            // collected or recovered from, never for its own counter and clock: a
            // device restored from a backup has lost writes it made after the
            // backup, which the asking sibling may be the last to hold (seed 210071).
            // And it carries the tombstones this device keeps: no round has collected them.
            let snapshot = try Snapshot.take(of: replica, generation: replica.generation, knowledge: try replica.collectedKnowledge(), tombstones: true)
            noteShared(nil)
            return [.send(to: peer, bytes: FrameCodec.encode(.snapshot(SealedSnapshot(snapshot, account: replica.account, key: key, using: &random))))]
        } catch {
            return [.log(FleetEvent(kind: .storageFailed, peer: peer, namespace: nil, message: "could not take a snapshot: \(error)", failure: FleetFailure(error)))]
        }
    }

    /// A sibling's snapshot, asked for by this device (or not).
    mutating func onSnapshot(_ sealed: SealedSnapshot, from peer: DeviceID) -> [FleetOutput] {
        guard configuration.collects, sealed.generation > replica.generation, recovery.onSnapshot(from: peer) else {
            return [.log(FleetEvent(kind: .snapshotDeclined, peer: peer, namespace: nil, message: "an unasked-for snapshot at generation \(sealed.generation)"))]
        }
        do {
            let snapshot = try sealed.open(account: replica.account, keys: accountKeys)
            let outcome = try replica.recover(from: snapshot)
            return caughtUp(
                "recovered generation \(snapshot.generation) from a sibling's snapshot (\(outcome.imported) imported, "
                    + "\(outcome.keptLocal) kept from after the restore, \(outcome.dropped) dropped)")
        } catch {
            let failure = "the sibling's snapshot could not be imported: \(error)"
            recovery.onFailed(failure)
            return [.log(FleetEvent(kind: .recoveryFailed, peer: peer, namespace: nil, message: failure))]
        }
    }

    private mutating func caughtUp(fromAnchor: Bool = false, _ how: String) -> [FleetOutput] {
        // The generation moved past any round this device held for.
        let released: [FleetOutput] = acking.onCaughtUp().map { [.cancel(.barrierHold(epoch: $0.epoch))] } ?? []
        recovery.onCaughtUp(to: replica.generation, fromAnchor: fromAnchor)
        leading.onCaughtUp()
        // A round this device leads to a generation it now stands at is over: its
        // anchor would only be refused (``AnchorHeader/mayReplace(_:)``).
        var over: [FleetOutput] = []
        if let round = leading.round, round.proposal.generation <= replica.generation {
            over = failRound("this device caught up with generation \(replica.generation), which the round was to move to", missing: [])
        }
        // The generation moved: siblings hear it at once, and content reconcile resumes.
        return released + over + [.log(FleetEvent(kind: .recovered, peer: nil, namespace: nil, message: how))] + noteChange()
    }
}

extension FleetNode {
    /// The siblings whose last advertisement differs from this device's own
    /// digest, or who have not advertised since this node started: while any is
    /// listed, this device cannot tell that the fleet agrees.
    public var siblingsOutOfSync: [DeviceID] {
        guard let mine = try? advertisement() else { return peers }
        return peers.filter { siblings.heard[$0] != mine }
    }

    /// Whether a change waits for its debounce before this device advertises it:
    /// until then the siblings do not know where it stands.
    public var advertisementDue: Bool { sync.changeDebounce.isArmed }

    /// When `peer`'s latest advertisement arrived, on the runtime's monotonic clock.
    public func lastHeard(from peer: DeviceID) -> Int64? { siblings.heardAt[peer] }
}
