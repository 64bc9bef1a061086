/// The convergence barrier (001 §4-5, §8; DESIGN §6), as part of the node's
/// state machine: the leader (the lowest device id on the roster) opens a round
/// once every sibling's last advertisement equals its own and tombstones may be
/// held; every roster member acks with its freshly computed content digest;
/// with every ack in and every digest equal to the leader's fresh one, the
/// anchor is written at the next generation, and only once it has landed is
/// `gc_commit` sent and anything dropped. Each device's commit drops only what
/// its ack vouched for, and only if its content is unmoved
/// (``Replica/commit(round:digest:generation:)``).
struct BarrierState {
    /// A round this device leads.
    struct Round {
        let proposal: BarrierProposal
        /// The roster when the round opened: a change before commit aborts it.
        let members: Set<DeviceID>
        var acks: [DeviceID: Hash32]
        /// The union of what every member that acked had seen (``Knowledge``).
        var knowledge: Knowledge
        let epoch: UInt64
        /// The digest every ack agreed on, once the anchor write was asked for.
        var agreed: Hash32?
    }

    /// Each sibling's last advertisement: the leader's view of who is in sync.
    var heard: [DeviceID: Advertisement] = [:]
    /// When (``FleetNode/monotonicNow``) each sibling was last heard agreeing with this device.
    var agreedAt: [DeviceID: Int64] = [:]
    var debounceArmed = false
    var round: Round?
    /// After a failed round: no new round until the back-off timer fires or one
    /// of these devices (whose ack was missing) is heard from.
    var backingOff = false
    var waitingFor: Set<DeviceID> = []
    /// Failed rounds in a row: the back-off doubles with each.
    var failures = 0
    /// A sibling holding tombstones asked for a round (the leader may hold none).
    var requested = false
    /// The current round is an early retry: if it fails too, the leader waits out
    /// its whole pause (a device heard from but still not acking is slow, not back).
    var retriedEarly = false
    /// The rounds this device has acked since it started, by nonce: a proposal
    /// seen again (a duplicate on the wire, or a replay of an older round at the
    /// same generation) is not acked again, so it can neither move the recorded
    /// ack's watermark nor replace the ack of the round in progress (SECURITY.md).
    var answered: Set<RoundNonce> = []
    /// The round this device acked and whose commit it awaits, with the epoch of
    /// its hold timer. Between its ack and the commit a device applies no
    /// sibling's records: a row it took in after acking, whose maker then deleted
    /// it and acked the agreed digest, would outlive the tombstone the maker drops.
    var held: (round: RoundNonce, epoch: UInt64)?
    /// The round of the ack this device recorded (leading or not) whose commit it
    /// has not seen. The first sibling record it applies once the hold is over
    /// withdraws that ack: a commit, or the adoption of that round's anchor, then
    /// no longer counts on content that has since taken records in (recovery
    /// imports the anchor's snapshot instead). Until then a late commit is as
    /// good as a timely one, and a missed one is adopted without an import.
    var outstanding: RoundNonce?
    /// Why the ack recorded before a restart could not be read, while it cannot:
    /// the device may be in a hold, so it takes no sibling's records in, acks no
    /// round and opens none, and tries again at each advertisement (G5).
    var ackUnreadable: String?
}

extension FleetNode {
    /// The device that leads rounds: the lowest id on the roster (001 §4).
    var leader: DeviceID { roster.min() ?? replica.device }

    // MARK: - Triggering

    /// Whether this device, as leader, is pausing after a failed round.
    public var isBackingOff: Bool { barrier.backingOff }

    /// Whether this device would still take part in collecting: collection on,
    /// tombstones possibly held, and (as leader) no back-off under way. The
    /// simulator's `sync` waits for this work when every device can reach every other.
    package var hasCollectionWork: Bool {
        guard configuration.collects else { return false }
        let holds = replica.mayHoldTombstones
        guard leader == replica.device else { return holds }
        return !barrier.backingOff && (holds || barrier.requested || barrier.round != nil)
    }

    /// Arms the debounce when a round could open now (the leader), or when this
    /// device should ask the leader for one (a sibling holding tombstones).
    mutating func considerRound() -> [FleetOutput] {
        guard !barrier.debounceArmed, barrier.ackUnreadable == nil, mayOpenRound() || mayRequestRound() else { return [] }
        barrier.debounceArmed = true
        return [.arm(.barrierDebounce, afterMilliseconds: configuration.barrierDebounceMilliseconds)]
    }

    private func mayOpenRound() -> Bool {
        guard configuration.collects, barrier.ackUnreadable == nil, leader == replica.device, barrier.round == nil, !barrier.backingOff else { return false }
        guard barrier.requested || replica.mayHoldTombstones else { return false }
        return everySiblingInSync()
    }

    private func mayRequestRound() -> Bool {
        guard configuration.collects, barrier.ackUnreadable == nil, leader != replica.device, replica.mayHoldTombstones else { return false }
        return everySiblingInSync()
    }

    /// Every sibling last advertised exactly what this device holds now.
    private func everySiblingInSync() -> Bool {
        guard let mine = try? advertisement() else { return false }
        return peers.allSatisfy { barrier.heard[$0] == mine }
    }

    mutating func barrierDebounceFired() -> [FleetOutput] {
        barrier.debounceArmed = false
        if mayOpenRound() { return openRound() }
        if mayRequestRound() {
            return [
                .send(to: leader, bytes: FrameCodec.encode(.gcRequest)),
                .log(FleetEvent(kind: .roundRequested, peer: leader, namespace: nil, message: "this device may hold tombstones and the fleet is in sync")),
            ]
        }
        return []
    }

    mutating func receiveRoundRequest(from peer: DeviceID) -> [FleetOutput] {
        guard leader == replica.device else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a round request, but this device does not lead"))]
        }
        barrier.requested = true
        // The sibling waited out its own debounce: open at once if the fleet is in sync.
        guard mayOpenRound() else { return considerRound() }
        let cancel: [FleetOutput] = barrier.debounceArmed ? [.cancel(.barrierDebounce)] : []
        barrier.debounceArmed = false
        return cancel + openRound()
    }

    private mutating func openRound() -> [FleetOutput] {
        do {
            let digest = try replica.contentDigest()
            let proposal = BarrierProposal(round: RoundNonce.generate(using: &random), digest: digest, generation: replica.generation + 1)
            // The leader acks its own round: its watermark is taken now.
            try replica.recordAck(round: proposal.round, digest: digest, generation: proposal.generation)
            barrier.outstanding = proposal.round
            nextEpoch += 1
            var knowledge = try replica.knowledge()
            knowledge.noteRevoked(channel?.revoked ?? [])
            barrier.round = BarrierState.Round(
                proposal: proposal, members: roster, acks: [replica.device: digest], knowledge: knowledge, epoch: nextEpoch)
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

    mutating func receive(_ answer: BarrierAnswer, from peer: DeviceID) -> [FleetOutput] {
        guard var round = barrier.round, round.proposal.round == answer.round, round.members.contains(peer), round.agreed == nil else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "an ack for round \(answer.round), which is not open here"))]
        }
        if answer.isDecline {
            // Not a device to wait for: it is there and says no (001 §9).
            return failRound("device \(peer) has collection off and declined", missing: [])
        }
        round.acks[peer] = answer.digest
        round.knowledge.merge(answer.knowledge)
        barrier.round = round
        return acksComplete()
    }

    /// With every member's ack in: the fence, the digests, then the anchor write.
    private mutating func acksComplete() -> [FleetOutput] {
        guard let round = barrier.round, round.agreed == nil, Set(round.acks.keys) == round.members else { return [] }
        guard roster == round.members else { return failRound("the roster changed during the round", missing: []) }
        do {
            let fresh = try replica.contentDigest()
            if let differing = round.acks.first(where: { $0.value != fresh }) {
                let who = differing.key == replica.device ? "this device's content moved" : "device \(differing.key) acked another digest"
                return failRound("\(who); the fleet is not converged", missing: [])
            }
            let generation = round.proposal.generation
            let header = AnchorHeader(account: replica.account, generation: generation, round: round.proposal.round, digest: fresh)
            let snapshot = try Snapshot.take(of: replica, generation: generation, knowledge: round.knowledge)
            barrier.round?.agreed = fresh
            // Siblings restore from the anchor: its content counts as shared.
            noteShared(nil)
            return [.writeAnchor(Anchor(header: header, snapshot: snapshot.encoded))]
        } catch {
            return failRound("could not take the snapshot: \(error)", missing: [])
        }
    }

    /// The anchor write ended. Landed: commit everywhere (001 §8: anchor first, then GC).
    mutating func anchorWritten(round nonce: RoundNonce, succeeded: Bool) -> [FleetOutput] {
        guard let round = barrier.round, round.proposal.round == nonce, let agreed = round.agreed else {
            // A round abandoned while its write was slow: the anchor it left is a floor
            // nobody stands on, and the next round overwrites it (001 §8).
            return [.log(FleetEvent(kind: .barrierIgnored, peer: nil, namespace: nil, message: "the anchor of round \(nonce) landed after the round was abandoned"))]
        }
        guard succeeded else { return failRound("the anchor write failed; every tombstone is kept", missing: []) }
        barrier.round = nil
        barrier.failures = 0
        barrier.requested = false
        barrier.retriedEarly = false
        let commit = BarrierCommit(proposal: BarrierProposal(round: nonce, digest: agreed, generation: round.proposal.generation), knowledge: round.knowledge)
        let frame = FrameCodec.encode(.gcCommit(commit))
        var outputs: [FleetOutput] = round.members.subtracting([replica.device]).sorted().map { .send(to: $0, bytes: frame) }
        outputs.append(.cancel(.barrierRound(epoch: round.epoch)))
        // The leader's own commit re-checks its digest: a delete made during the
        // upload has been through no barrier and keeps its tombstone (001 §8).
        return outputs + applyCommit(commit, from: nil)
    }

    mutating func barrierRoundExpired(epoch: UInt64) -> [FleetOutput] {
        guard let round = barrier.round, round.epoch == epoch else { return [] }
        let missing = round.members.subtracting(round.acks.keys)
        let reason =
            round.agreed != nil
            ? "the anchor did not land within \(configuration.barrierRoundMilliseconds) ms"
            : "no ack from \(missing.sorted().map(\.description).joined(separator: ", ")) within \(configuration.barrierRoundMilliseconds) ms"
        return failRound(reason, missing: missing, timerFired: true)
    }

    mutating func failRound(_ reason: String, missing: Set<DeviceID>, timerFired: Bool = false) -> [FleetOutput] {
        var outputs: [FleetOutput] = []
        if let round = barrier.round, !timerFired { outputs.append(.cancel(.barrierRound(epoch: round.epoch))) }
        barrier.round = nil
        barrier.failures += 1
        barrier.backingOff = true
        barrier.waitingFor = barrier.retriedEarly ? [] : missing
        barrier.retriedEarly = false
        let doubling = Int64(1) << Int64(min(barrier.failures - 1, 20))
        let pause = min(configuration.barrierBackoffMilliseconds.multipliedReportingOverflow(by: doubling).partialValue, configuration.barrierMaximumBackoffMilliseconds)
        outputs.append(.arm(.barrierBackoff, afterMilliseconds: max(pause, 0)))
        outputs.append(.log(FleetEvent(kind: .roundFailed, peer: nil, namespace: nil, message: "\(reason); next round in \(pause / 1000) s at the latest")))
        // The leader held siblings' records while the round was open: sync resumes.
        return outputs + noteChange()
    }

    /// No commit came for the round this device acked: it takes siblings' records
    /// again (the first one withdraws the ack, ``BarrierState/outstanding``).
    mutating func barrierHoldExpired(epoch: UInt64) -> [FleetOutput] {
        guard let held = barrier.held, held.epoch == epoch else { return [] }
        barrier.held = nil
        let message = "no commit of round \(held.round) within \(configuration.barrierRoundMilliseconds) ms: siblings' records are taken again"
        return [.log(FleetEvent(kind: .holdEnded, peer: nil, namespace: nil, message: message))] + noteChange()
    }

    /// Before the first sibling record after an unresolved ack: the ack is withdrawn.
    mutating func withdrawOutstandingAck() -> [FleetOutput] {
        guard let round = barrier.outstanding else { return [] }
        barrier.outstanding = nil
        do {
            try replica.withdrawAck(round: round)
            return [.log(FleetEvent(kind: .holdEnded, peer: nil, namespace: nil, message: "the ack of round \(round) is withdrawn: siblings' records come in, and no commit came"))]
        } catch {
            return [.log(FleetEvent(kind: .storageFailed, peer: nil, namespace: nil, message: "could not withdraw the ack of round \(round): \(error)", failure: FleetFailure(error)))]
        }
    }

    mutating func barrierBackoffFired() -> [FleetOutput] {
        barrier.backingOff = false
        barrier.waitingFor = []
        return considerRound()
    }

    /// Any frame from a device a failed round waited for ends the back-off early.
    mutating func heardFrom(_ peer: DeviceID) -> [FleetOutput] {
        guard barrier.backingOff, barrier.waitingFor.contains(peer) else { return [] }
        barrier.backingOff = false
        barrier.waitingFor = []
        barrier.retriedEarly = true
        return [.cancel(.barrierBackoff)]
    }

    // MARK: - A member's side

    mutating func receive(proposal: BarrierProposal, from peer: DeviceID) -> [FleetOutput] {
        guard peer == leader else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a proposal from a device that does not lead this roster"))]
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
        guard barrier.ackUnreadable == nil else {
            return [
                .log(FleetEvent(
                    kind: .storageFailed, peer: peer, namespace: nil, message: "this device cannot read its recorded ack; not acked",
                    failure: FleetFailure(cause: .storage(sqliteCode: nil), detail: barrier.ackUnreadable ?? "")))
            ]
        }
        let recorded: BarrierAck?
        do {
            recorded = try replica.lastAck()
        } catch {
            // Unread, the ack might be this very round's: acking again could move its watermark.
            return [.log(FleetEvent(kind: .storageFailed, peer: peer, namespace: nil, message: "could not read the recorded ack, so round \(proposal.round) is not acked: \(error)", failure: FleetFailure(error)))]
        }
        guard !barrier.answered.contains(proposal.round), recorded?.round != proposal.round else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a proposal for round \(proposal.round), already acked; not acked again"))]
        }
        do {
            let digest = try replica.contentDigest()
            try replica.recordAck(round: proposal.round, digest: digest, generation: proposal.generation)
            barrier.outstanding = proposal.round
            // Bounded: a device acks one round per proposal the leader makes.
            if barrier.answered.count >= 4_096 { barrier.answered.removeAll() }
            barrier.answered.insert(proposal.round)
            let answer = BarrierAnswer(round: proposal.round, digest: digest, knowledge: try replica.knowledge())
            var outputs: [FleetOutput] = [.send(to: peer, bytes: FrameCodec.encode(.gcAck(answer)))]
            if let held = barrier.held { outputs.append(.cancel(.barrierHold(epoch: held.epoch))) }
            nextEpoch += 1
            barrier.held = (proposal.round, nextEpoch)
            // As long as the leader's round: a commit later than that finds the ack
            // withdrawn and is ignored, and its anchor is recovered from like a missed round.
            outputs.append(.arm(.barrierHold(epoch: nextEpoch), afterMilliseconds: configuration.barrierRoundMilliseconds))
            return outputs
        } catch {
            return [.log(FleetEvent(kind: .storageFailed, peer: peer, namespace: nil, message: "could not ack: \(error)", failure: FleetFailure(error)))]
        }
    }

    mutating func receive(commit: BarrierCommit, from peer: DeviceID) -> [FleetOutput] {
        guard peer == leader else {
            return [.log(FleetEvent(kind: .barrierIgnored, peer: peer, namespace: nil, message: "a commit from a device that does not lead this roster"))]
        }
        return applyCommit(commit, from: peer)
    }

    private mutating func applyCommit(_ commit: BarrierCommit, from peer: DeviceID?) -> [FleetOutput] {
        let proposal = commit.proposal
        var released: [FleetOutput] = []
        if let held = barrier.held, held.round == proposal.round {
            barrier.held = nil
            released = [.cancel(.barrierHold(epoch: held.epoch))] + noteChange()
        }
        if barrier.outstanding == proposal.round { barrier.outstanding = nil }
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
