/// The convergence barrier (001 §4-5, §8; DESIGN §6), as part of the node's
/// state machine: the leader (the lowest device id on the roster) opens a round
/// once every sibling's last advertisement equals its own and tombstones may be
/// held; every roster member acks with its freshly computed content digest;
/// with every ack in and every digest equal to the leader's fresh one, the
/// anchor is written at the next generation, and only once it has landed is
/// `gc_commit` sent and anything dropped. Each device's commit drops only what
/// its ack vouched for, and only if its content is unmoved
/// (``Replica/commit(round:digest:generation:)``).
///
/// The state lives in two machines (``BarrierLeader``, ``BarrierMember``) and a
/// debounce (``Debounce``); this extension reads and writes the replica and
/// turns what they decide into outputs.
extension FleetNode {
    /// The device that leads rounds: the lowest id on the roster (001 §4).
    var leader: DeviceID { roster.min() ?? replica.device }

    // MARK: - Triggering

    /// Whether this device, as leader, is pausing after a failed round.
    public var isBackingOff: Bool { leading.isBackingOff }

    /// Whether this device would still take part in collecting: collection on,
    /// tombstones possibly held, and (as leader) no back-off under way. The
    /// simulator's `sync` waits for this work when every device can reach every other.
    package var hasCollectionWork: Bool {
        guard configuration.collects else { return false }
        let holds = replica.mayHoldTombstones
        guard leader == replica.device else { return holds }
        return !leading.isBackingOff && (holds || leading.requested || leading.round != nil)
    }

    /// Arms the debounce when a round could open now (the leader), or when this
    /// device should ask the leader for one (a sibling holding tombstones).
    mutating func considerRound() -> [FleetOutput] {
        guard !roundDebounce.isArmed, acking.unreadable == nil, mayOpenRound() || mayRequestRound(), roundDebounce.onWanted() else { return [] }
        return [.arm(.barrierDebounce, afterMilliseconds: configuration.barrierDebounceMilliseconds)]
    }

    private func mayOpenRound() -> Bool {
        guard configuration.collects, acking.unreadable == nil, leader == replica.device, leading.isIdle else { return false }
        guard leading.requested || replica.mayHoldTombstones else { return false }
        return everySiblingInSync()
    }

    private func mayRequestRound() -> Bool {
        guard configuration.collects, acking.unreadable == nil, leader != replica.device, replica.mayHoldTombstones else { return false }
        return everySiblingInSync()
    }

    /// Every sibling last advertised exactly what this device holds now.
    private func everySiblingInSync() -> Bool {
        guard let mine = try? advertisement() else { return false }
        return peers.allSatisfy { siblings.heard[$0] == mine }
    }

    /// The round debounce fired: open a round, or ask the leader for one.
    mutating func onDebounce() -> [FleetOutput] {
        roundDebounce.onFired()
        if mayOpenRound() { return openRound() }
        if mayRequestRound() {
            return [
                .send(to: leader, bytes: FrameCodec.encode(.gcRequest)),
                .log(FleetEvent(kind: .roundRequested, peer: leader, namespace: nil, message: "this device may hold tombstones and the fleet is in sync")),
            ]
        }
        return []
    }

    /// A sibling holding tombstones asks this device, which leads, for a round.
    mutating func onRoundRequest(from peer: DeviceID) -> [FleetOutput] {
        guard !handlingBacklog else {
            // What the sibling saw when it asked is long gone; it asks again once it is in sync.
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a round request that waited in the mailbox while this device was away; ignored"))]
        }
        guard leader == replica.device else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a round request, but this device does not lead"))]
        }
        if let heard = siblings.heard[peer], heard.generation < replica.generation {
            // Asked before this device moved to its generation (a caught-up floor, seed
            // 370010's rule): the sibling is catching up, and asks again once in sync.
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a round request from a device last heard below this device's generation"))]
        }
        leading.onRequest()
        // The sibling waited out its own debounce: open at once if the fleet is in sync.
        guard mayOpenRound() else { return considerRound() }
        let cancel: [FleetOutput] = roundDebounce.onOvertaken() ? [.cancel(.barrierDebounce)] : []
        return cancel + openRound()
    }

    private mutating func openRound() -> [FleetOutput] {
        // A leader whose last check could not read the anchor reads it first: the round
        // would fail at the fence (``acksComplete()``) once every member had acked, and
        // pause for a back-off while the fleet waits (seed 275008; DESIGN §6 "no futile
        // rounds"). Once the read settles where the anchor stands, the round is considered
        // again (``settled(because:)``).
        guard !recovery.anchorUnsettled else { return checkAnchor() }
        do {
            let digest = try replica.contentDigest()
            let proposal = BarrierProposal(round: RoundNonce.generate(using: &random), digest: digest, generation: replica.generation + 1)
            // The leader acks its own round: its watermark is taken now.
            try replica.recordAck(round: proposal.round, digest: digest, generation: proposal.generation)
            acking.onAckRecorded(proposal.round, answering: false)
            nextEpoch += 1
            var knowledge = try replica.knowledge()
            knowledge.noteRevoked(channel?.revoked ?? [])
            leading.onOpen(proposal: proposal, members: roster, acks: [replica.device: digest], knowledge: knowledge, epoch: nextEpoch)
            let frame = FrameCodec.encode(.gcPropose(proposal))
            var outputs: [FleetOutput] = peers.map { .send(to: $0, bytes: frame) }
            outputs.append(.arm(.barrierRound(epoch: nextEpoch), afterMilliseconds: configuration.barrierRoundMilliseconds))
            outputs.append(.log(FleetEvent(kind: .roundOpened, peer: nil, namespace: nil, message: "round \(proposal.round) to generation \(proposal.generation)")))
            return outputs + acksComplete()
        } catch {
            return [.log(FleetEvent.failed(.roundFailed, peer: nil, namespace: nil, "could not open a round: \(error)", error))]
        }
    }

    // MARK: - The leader's side

    /// A member's ack (or decline) of the round this device leads.
    mutating func onAck(_ answer: BarrierAnswer, from peer: DeviceID) -> [FleetOutput] {
        switch leading.onAck(answer, from: peer) {
        case .notOpen:
            // The member holds for a round this device no longer runs: it may stop.
            let abort: [FleetOutput] = leader == replica.device && !answer.isDecline ? [.send(to: peer, bytes: FrameCodec.encode(.gcAbort(answer.round)))] : []
            return abort + [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "an ack for round \(answer.round), which is not open here"))]
        case .declined:
            // Not a device to wait for: it is there and says no (001 §9).
            return failRound("device \(peer) has collection off and declined", missing: [])
        case .counted:
            return acksComplete()
        }
    }

    /// With every member's ack in: the fence, the digests, then the anchor write.
    private mutating func acksComplete() -> [FleetOutput] {
        guard let round = leading.completeRound else { return [] }
        guard roster == round.members else { return failRound("the roster changed during the round", missing: []) }
        do {
            let fresh = try replica.contentDigest()
            if let differing = round.acks.first(where: { $0.value != fresh }) {
                let who = differing.key == replica.device ? "this device's content moved" : "device \(differing.key) acked another digest"
                return failRound("\(who); the fleet is not converged", missing: [])
            }
            // A leader whose last check could not read the anchor may be below it with
            // the whole fleet (every device restored from before its rounds while it
            // was out of reach, seed 7052): the substrate would refuse this round's
            // anchor (``AnchorHeader/mayReplace(_:)``), and a substrate that does not
            // check would let it replace the only copy of what the restores took away.
            // The round fails as a failed write would, and the anchor is read again.
            guard !recovery.anchorUnsettled else {
                return failRound("the anchor could not be read since this device last checked it, and may be ahead of the fleet", missing: [])
                    + checkAnchor()
            }
            let generation = round.proposal.generation
            let header = AnchorHeader(account: replica.account, generation: generation, round: round.proposal.round, digest: fresh)
            let snapshot = try Snapshot.take(of: replica, generation: generation, knowledge: round.knowledge)
            leading.onAgreed(on: fresh)
            // Siblings restore from the anchor: its content counts as shared.
            noteShared(nil)
            return [.writeAnchor(Anchor(header: header, snapshot: snapshot.encoded))]
        } catch {
            return failRound("could not take the snapshot: \(error)", missing: [])
        }
    }

    /// The anchor write ended. Landed: commit everywhere (001 §8: anchor first, then GC).
    mutating func onAnchorWritten(round nonce: RoundNonce, succeeded: Bool) -> [FleetOutput] {
        let round: BarrierLeader.Round
        let agreed: Hash32
        switch leading.onAnchorWritten(round: nonce, succeeded: succeeded) {
        case .abandoned:
            guard succeeded else {
                return [.log(FleetEvent(kind: .barrierIgnored, peer: nil, namespace: nil, message: "the anchor write of round \(nonce), abandoned, failed"))]
            }
            // A round abandoned while its write was slow: the anchor it left is a floor
            // nobody stands on (001 §8), and no round may write over its generation
            // (``AnchorHeader/mayReplace(_:)``). Every member acked it with the same
            // digest, which is all a commit needs: this device reads the anchor and
            // adopts the round it acked, if that ack is still its last (else it
            // recovers from the snapshot); its siblings, hearing it ahead, do the
            // same. No round opens until the read settles: it could only be refused.
            recovery.onAnchorMoved()
            return [.log(FleetEvent(kind: .barrierIgnored, peer: nil, namespace: nil, message: "the anchor of round \(nonce) landed after the round was abandoned; it is read again"))]
                + checkAnchor()
        case .failed:
            return failRound("the anchor write failed; every tombstone is kept", missing: [])
        case .landed(let landed, let digest):
            (round, agreed) = (landed, digest)
        }
        let commit = BarrierCommit(proposal: BarrierProposal(round: nonce, digest: agreed, generation: round.proposal.generation), knowledge: round.knowledge)
        let frame = FrameCodec.encode(.gcCommit(commit))
        var outputs: [FleetOutput] = round.members.subtracting([replica.device]).sorted().map { .send(to: $0, bytes: frame) }
        outputs.append(.cancel(.barrierRound(epoch: round.epoch)))
        // The leader's own commit re-checks its digest: a delete made during the
        // upload has been through no barrier and keeps its tombstone (001 §8).
        return outputs + applyCommit(commit, from: nil)
    }

    /// The substrate refused the anchor write: another round's anchor holds its
    /// generation or a higher one (``AnchorHeader/mayReplace(_:)``). Seed 001 §8
    /// overwrites a dangling anchor at the same generation; but a slow write of an
    /// abandoned round could then land over the anchor a later round committed, and
    /// a device recovering from it brought back what that round collected (seed
    /// 370010). So nothing is written over another round's generation: the round
    /// fails with every tombstone kept, the anchor is read again, and this device
    /// catches up with it (it adopts the generation of a round it acked, or
    /// recovers from the snapshot). No round opens until that read settles.
    mutating func onAnchorSuperseded(round nonce: RoundNonce, reason: String) -> [FleetOutput] {
        switch leading.onAnchorWritten(round: nonce, succeeded: false) {
        case .abandoned:
            // The late write of an abandoned round, refused: the anchor is as it was.
            return [.log(FleetEvent(kind: .barrierIgnored, peer: nil, namespace: nil, message: "the anchor of round \(nonce), abandoned, was refused when it landed: \(reason)"))]
        case .failed, .landed:
            recovery.onAnchorMoved()
            return failRound("the anchor write was refused: \(reason); every tombstone is kept and the anchor is read again", missing: []) + checkAnchor()
        }
    }

    /// The round timer fired: the round, if still open, fails.
    mutating func onRoundTimer(epoch: UInt64) -> [FleetOutput] {
        guard let (missing, anchoring) = leading.expired(epoch: epoch) else { return [] }
        let reason =
            anchoring
            ? "the anchor did not land within \(configuration.barrierRoundMilliseconds) ms"
            : "no ack from \(missing.sorted().map(\.description).joined(separator: ", ")) within \(configuration.barrierRoundMilliseconds) ms"
        return failRound(reason, missing: missing, timerFired: true)
    }

    mutating func failRound(_ reason: String, missing: Set<DeviceID>, timerFired: Bool = false) -> [FleetOutput] {
        var outputs: [FleetOutput] = []
        let round = leading.round
        guard let (epoch, pause) = leading.onRoundFailed(
            missing: missing, backoff: configuration.barrierBackoffMilliseconds, maximum: configuration.barrierMaximumBackoffMilliseconds)
        else { return [] }
        if !timerFired { outputs.append(.cancel(.barrierRound(epoch: epoch))) }
        // Whoever acked holds until its hold timer: tell them the round is over.
        if let round {
            let abort = FrameCodec.encode(.gcAbort(round.proposal.round))
            for member in round.acks.keys.sorted() where member != replica.device && roster.contains(member) { outputs.append(.send(to: member, bytes: abort)) }
        }
        outputs.append(.arm(.barrierBackoff, afterMilliseconds: max(pause, 0)))
        outputs.append(.log(FleetEvent(kind: .roundFailed, peer: nil, namespace: nil, message: "\(reason); next round in \(pause / 1000) s at the latest")))
        // The leader held siblings' records while the round was open: sync resumes.
        return outputs + noteChange()
    }

    /// The leader gave up the round this device holds for (``Frame/gcAbort(_:)``):
    /// the hold ends now, as its timer would have ended it.
    mutating func onAbort(_ round: RoundNonce, from peer: DeviceID) -> [FleetOutput] {
        guard peer == leader else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "an abort from a device that does not lead this roster"))]
        }
        guard let hold = acking.hold, hold.round == round else { return [] }
        return [.cancel(.barrierHold(epoch: hold.epoch))] + onHoldTimer(epoch: hold.epoch, because: "the leader gave round \(round) up")
    }

    /// A sibling (re)started while the round this device leads waits for its ack:
    /// the ack will never come (the sibling keeps no proposal across a start), so
    /// the round fails now, as one missing that sibling's ack.
    mutating func onRestarted(_ peer: DeviceID) -> [FleetOutput] {
        guard case .collecting(let round) = leading.state, round.members.contains(peer), round.acks[peer] == nil else { return [] }
        return failRound("device \(peer) started again during the round and will not ack it", missing: [peer])
    }

    /// No commit came for the round this device acked: it takes siblings' records
    /// again (the first one withdraws the ack, ``BarrierMember/State/acked(_:)``).
    mutating func onHoldTimer(epoch: UInt64, because reason: String? = nil) -> [FleetOutput] {
        guard let heldRound = acking.onHoldTimer(epoch: epoch) else { return [] }
        let message = "\(reason ?? "no commit of round \(heldRound) within \(configuration.barrierRoundMilliseconds) ms"): siblings' records are taken again"
        return [.log(FleetEvent(kind: .holdEnded, peer: nil, namespace: nil, message: message))] + noteChange()
    }

    /// Before the first sibling record after an unresolved ack: the ack is withdrawn.
    mutating func withdrawOutstandingAck() -> [FleetOutput] {
        guard let round = acking.onRecordsComing() else { return [] }
        do {
            try replica.withdrawAck(round: round)
            return [.log(FleetEvent(kind: .holdEnded, peer: nil, namespace: nil, message: "the ack of round \(round) is withdrawn: siblings' records come in, and no commit came"))]
        } catch {
            return [.log(FleetEvent(kind: .storageFailed, peer: nil, namespace: nil, message: "could not withdraw the ack of round \(round): \(error)", failure: FleetFailure(error)))]
        }
    }

    /// The back-off after a failed round is over. (Any frame from a device the
    /// failed round waited for ends it early: ``BarrierLeader/onHeard(from:)``.)
    mutating func onBackoffTimer() -> [FleetOutput] {
        leading.onBackoffTimer()
        return considerRound()
    }

    // MARK: - A member's side

    /// The leader proposes a round: ack it with this device's digest and hold.
    mutating func onProposal(_ proposal: BarrierProposal, from peer: DeviceID) -> [FleetOutput] {
        guard peer == leader else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a proposal from a device that does not lead this roster"))]
        }
        guard !handlingBacklog else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a proposal that waited in the mailbox while this device was away; not acked (its round is over)"))]
        }
        guard configuration.collects else {
            // 001 §9: such a device never acks. It says so, rather than leaving the
            // leader to wait out the round and retry each time it is heard from.
            return [
                .send(to: peer, bytes: FrameCodec.encode(.gcAck(.decline(proposal.round)))),
                .log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "collection is off on this device; declined")),
            ]
        }
        guard proposal.generation == replica.generation + 1 else {
            return [
                .log(FleetEvent(
                    kind: .barrierIgnored, peer: peer, namespace: nil,
                    message: "a proposal to generation \(proposal.generation) at generation \(replica.generation)"))
            ]
        }
        if let unreadable = acking.unreadable {
            return [
                .log(FleetEvent(
                    kind: .storageFailed, peer: peer, namespace: nil, message: "this device cannot read its recorded ack; not acked",
                    failure: FleetFailure(cause: .storage(sqliteCode: nil), detail: unreadable)))
            ]
        }
        let recorded: BarrierAck?
        do {
            recorded = try replica.lastAck()
        } catch {
            // Unread, the ack might be this very round's: acking again could move its watermark.
            return [.log(FleetEvent(kind: .storageFailed, peer: peer, namespace: nil, message: "could not read the recorded ack, so round \(proposal.round) is not acked: \(error)", failure: FleetFailure(error)))]
        }
        guard !acking.hasAnswered(proposal.round), recorded?.round != proposal.round else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a proposal for round \(proposal.round), already acked; not acked again"))]
        }
        do {
            let digest = try replica.contentDigest()
            try replica.recordAck(round: proposal.round, digest: digest, generation: proposal.generation)
            acking.onAckRecorded(proposal.round, answering: true)
            let answer = BarrierAnswer(round: proposal.round, digest: digest, knowledge: try replica.knowledge())
            var outputs: [FleetOutput] = [.send(to: peer, bytes: FrameCodec.encode(.gcAck(answer)))]
            // The leader's round overtakes this device's own wait to ask for one: a
            // request sent while the round runs would open a futile one after it.
            if roundDebounce.onOvertaken() { outputs.append(.cancel(.barrierDebounce)) }
            nextEpoch += 1
            if let previous = acking.onHolding(for: proposal.round, epoch: nextEpoch) { outputs.append(.cancel(.barrierHold(epoch: previous.epoch))) }
            // As long as the leader's round: a commit later than that finds the ack
            // withdrawn and is ignored, and its anchor is recovered from like a missed round.
            outputs.append(.arm(.barrierHold(epoch: nextEpoch), afterMilliseconds: configuration.barrierRoundMilliseconds))
            return outputs
        } catch {
            return [.log(FleetEvent(kind: .storageFailed, peer: peer, namespace: nil, message: "could not ack: \(error)", failure: FleetFailure(error)))]
        }
    }

    /// The leader's commit of a round: drop what this device's ack vouched for.
    mutating func onCommit(_ commit: BarrierCommit, from peer: DeviceID) -> [FleetOutput] {
        guard peer == leader else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a commit from a device that does not lead this roster"))]
        }
        return applyCommit(commit, from: peer)
    }

    private mutating func applyCommit(_ commit: BarrierCommit, from peer: DeviceID?) -> [FleetOutput] {
        let proposal = commit.proposal
        var released: [FleetOutput] = []
        if let held = acking.onCommit(of: proposal.round) {
            released = [.cancel(.barrierHold(epoch: held.epoch))] + noteChange()
        }
        return released + carryOutCommit(commit, from: peer)
    }

    private mutating func carryOutCommit(_ commit: BarrierCommit, from peer: DeviceID?) -> [FleetOutput] {
        let proposal = commit.proposal
        do {
            let outcome = try replica.commit(round: proposal.round, digest: proposal.digest, generation: proposal.generation, knowledge: commit.knowledge)
            switch outcome {
            case .notAcked, .generationNotAhead:
                return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "commit of round \(proposal.round): \(outcome)"))]
            case .adoptedKeepingTombstones, .collected:
                // The generation moved: siblings hear it at once.
                return [.log(FleetEvent(kind: .roundCommitted, peer: peer, namespace: nil, message: "generation \(proposal.generation): \(outcome)"))] + noteChange()
            }
        } catch {
            return [.log(FleetEvent(kind: .storageFailed, peer: peer, namespace: nil, message: "could not commit round \(proposal.round): \(error)", failure: FleetFailure(error)))]
        }
    }
}
