/// The leader's side of the convergence barrier (001 §4-5, §8; DESIGN §6) as a
/// state machine: no I/O and no replica; ``FleetNode`` reads the replica, asks
/// this machine what the event means, and turns the answer into outputs.
///
/// ```
/// idle ──open──▶ collecting ──every ack, digests equal──▶ anchoring ──landed──▶ idle
///   ▲                │  declined, roster changed,              │ write failed,
///   │                │  digest moved, round timer              │ round timer
///   │                ▼                                         ▼
///   └──back-off timer, or a device it waited for is heard── backingOff
/// ```
/// ARCHITECTURE.md has the whole table (states × events → next state, effects).
struct BarrierLeader {
    /// A round this device leads.
    struct Round: Equatable {
        let proposal: BarrierProposal
        /// The roster when the round opened: a change before commit aborts it.
        let members: Set<DeviceID>
        fileprivate(set) var acks: [DeviceID: Hash32]
        /// The union of what every member that acked had seen (``Knowledge``).
        fileprivate(set) var knowledge: Knowledge
        /// The epoch of its round timer.
        let epoch: UInt64
        /// Opened as an early retry: if it fails too, the leader waits out its
        /// whole pause (a device heard from but still not acking is slow, not back).
        let isEarlyRetry: Bool

        init(proposal: BarrierProposal, members: Set<DeviceID>, acks: [DeviceID: Hash32], knowledge: Knowledge, epoch: UInt64, isEarlyRetry: Bool) {
            self.proposal = proposal
            self.members = members
            self.acks = acks
            self.knowledge = knowledge
            self.epoch = epoch
            self.isEarlyRetry = isEarlyRetry
        }

        /// Every member has acked.
        var isComplete: Bool { Set(acks.keys) == members }
    }

    enum State: Equatable {
        /// No round. `earlyRetry`: the last back-off was cut short by a device it waited for.
        case idle(earlyRetry: Bool)
        /// A round is open and acks come in.
        case collecting(Round)
        /// Every member acked `agreed`; the anchor write is under way.
        case anchoring(Round, agreed: Hash32)
        /// After a failed round: no new round until the back-off timer fires or
        /// one of `waitingFor` (whose ack was missing) is heard from.
        case backingOff(waitingFor: Set<DeviceID>)
    }

    private(set) var state: State = .idle(earlyRetry: false)
    /// Failed rounds in a row: the back-off doubles with each.
    private(set) var failures = 0
    /// A sibling holding tombstones asked for a round (the leader may hold none).
    private(set) var requested = false

    /// The round open or being anchored.
    var round: Round? {
        switch state {
        case .collecting(let round), .anchoring(let round, _): round
        case .idle, .backingOff: nil
        }
    }

    var isIdle: Bool {
        if case .idle = state { true } else { false }
    }

    var isBackingOff: Bool {
        if case .backingOff = state { true } else { false }
    }

    // MARK: - Events

    /// A sibling asked for a round (`gc_request`).
    mutating func onRequest() {
        requested = true
    }

    /// The roster changed and this device no longer leads: a request was for the leader.
    mutating func onStoppedLeading() {
        requested = false
    }

    /// The device caught up with a generation (adopted or recovered from the
    /// anchor): a request was made below it. A sibling that still holds tombstones
    /// asks again once it is in sync.
    mutating func onCaughtUp() {
        requested = false
    }

    /// idle → collecting. The leader's own ack is the first in `acks`.
    mutating func onOpen(proposal: BarrierProposal, members: Set<DeviceID>, acks: [DeviceID: Hash32], knowledge: Knowledge, epoch: UInt64) {
        guard case .idle(let earlyRetry) = state else { preconditionFailure("a round opened while the leader was \(state)") }
        state = .collecting(Round(proposal: proposal, members: members, acks: acks, knowledge: knowledge, epoch: epoch, isEarlyRetry: earlyRetry))
    }

    enum AckOutcome: Equatable {
        /// No round with that nonce is collecting acks from that device.
        case notOpen
        /// The member has collection off and said no (001 §9).
        case declined
        /// Counted; the round may now be complete (``Round/isComplete``).
        case counted
    }

    /// A member's `gc_ack` (collecting → collecting).
    mutating func onAck(_ answer: BarrierAnswer, from peer: DeviceID) -> AckOutcome {
        guard case .collecting(var round) = state, round.proposal.round == answer.round, round.members.contains(peer) else { return .notOpen }
        if answer.isDecline { return .declined }
        round.acks[peer] = answer.digest
        round.knowledge.merge(answer.knowledge)
        state = .collecting(round)
        return .counted
    }

    /// The round collecting acks, once every member has acked.
    var completeRound: Round? {
        guard case .collecting(let round) = state, round.isComplete else { return nil }
        return round
    }

    /// Every ack equals the leader's fresh digest and the anchor write is asked for (collecting → anchoring).
    mutating func onAgreed(on digest: Hash32) {
        guard case .collecting(let round) = state else { preconditionFailure("agreement outside a round: \(state)") }
        state = .anchoring(round, agreed: digest)
    }

    enum AnchorOutcome: Equatable {
        /// No round of that nonce awaits its anchor: it was abandoned while the write was slow.
        case abandoned
        /// The write failed: the caller fails the round (``onRoundFailed(missing:backoff:maximum:)``).
        case failed
        /// Landed (anchoring → idle): commit the round everywhere.
        case landed(Round, agreed: Hash32)
    }

    mutating func onAnchorWritten(round nonce: RoundNonce, succeeded: Bool) -> AnchorOutcome {
        guard case .anchoring(let round, let agreed) = state, round.proposal.round == nonce else { return .abandoned }
        guard succeeded else { return .failed }
        state = .idle(earlyRetry: false)
        failures = 0
        requested = false
        return .landed(round, agreed: agreed)
    }

    /// The round timer of `epoch` fired: if its round is still open, the members
    /// that did not ack and whether the anchor write was under way. The caller fails it.
    func expired(epoch: UInt64) -> (missing: Set<DeviceID>, anchoring: Bool)? {
        switch state {
        case .collecting(let round) where round.epoch == epoch: (round.members.subtracting(round.acks.keys), false)
        case .anchoring(let round, _) where round.epoch == epoch: (round.members.subtracting(round.acks.keys), true)
        default: nil
        }
    }

    /// The round failed (collecting or anchoring → backingOff): the epoch of its
    /// timer, and the pause before the next round, doubling with each failure in a
    /// row up to `maximum`. `nil` when no round is open.
    mutating func onRoundFailed(missing: Set<DeviceID>, backoff: Int64, maximum: Int64) -> (roundEpoch: UInt64, pause: Int64)? {
        guard let round else { return nil }
        failures += 1
        state = .backingOff(waitingFor: round.isEarlyRetry ? [] : missing)
        let doubling = Int64(1) << Int64(min(failures - 1, 20))
        let pause = min(backoff.multipliedReportingOverflow(by: doubling).partialValue, maximum)
        return (round.epoch, pause)
    }

    /// The back-off timer fired (backingOff → idle).
    mutating func onBackoffTimer() {
        guard isBackingOff else { return }
        state = .idle(earlyRetry: false)
    }

    /// A frame from `peer` (backingOff → idle when the failed round waited for it):
    /// `true` when the back-off ended and its timer is to be cancelled.
    mutating func onHeard(from peer: DeviceID) -> Bool {
        guard case .backingOff(let waitingFor) = state, waitingFor.contains(peer) else { return false }
        state = .idle(earlyRetry: true)
        return true
    }

    /// What must hold of the leader's state on a device whose roster is
    /// `roster` and whose leader is `leader` (``FleetNode/checkInvariants()``).
    func violations(device: DeviceID, leader: DeviceID, roster: Set<DeviceID>) -> [String] {
        guard let round else { return [] }
        var broken: [String] = []
        if leader != device { broken.append("a round open on a device that does not lead") }
        if round.members != roster { broken.append("a round open across a roster change") }
        if !round.acks.keys.allSatisfy(round.members.contains) { broken.append("an ack counted from a device outside the round") }
        if round.acks[device] == nil { broken.append("a round open without the leader's own ack") }
        return broken
    }
}
