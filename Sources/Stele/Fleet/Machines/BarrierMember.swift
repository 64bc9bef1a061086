/// A member's side of the convergence barrier (001 §4-5, §8): what became of the
/// last ack this device recorded, as a state machine without I/O. The leader
/// passes through it too (it acks its own round). ``FleetNode`` reads and writes
/// the replica; this machine says what an event means for the hold.
///
/// Between its ack and the commit a device applies no sibling's records (the
/// hold): a row it took in after acking, whose maker then deleted it and acked
/// the agreed digest, would outlive the tombstone the maker drops. Once the hold
/// is over and no commit came, the first sibling record it applies withdraws the
/// ack: a commit, or the adoption of that round's anchor, then no longer counts
/// on content that has since taken records in (recovery imports the anchor's
/// snapshot instead). Until then a late commit is as good as a timely one.
///
/// ```
/// free ──ack──▶ holding ──commit──▶ free
///   ▲             │ hold timer
///   │             ▼
///   └─withdraw── acked ──commit──▶ free
/// unreadable ──the recorded ack read──▶ free or holding
/// ```
/// ARCHITECTURE.md has the whole table.
struct BarrierMember {
    /// A hold: the round acked and the epoch of its hold timer.
    struct Hold: Equatable {
        let round: RoundNonce
        let epoch: UInt64
    }

    enum State: Equatable {
        /// No recorded ack awaits a commit.
        case free
        /// An ack awaits its commit and records are taken in: the first withdraws it.
        case acked(RoundNonce)
        /// Holding for a round: no sibling's records until its commit or its hold
        /// timer. `outstanding`: the ack awaiting a commit, the held round's unless
        /// this device went on to lead a round of its own.
        case holding(Hold, outstanding: RoundNonce?)
        /// The ack recorded before a restart could not be read (why): the device
        /// may be in a hold, so it takes no sibling's records in, acks no round and
        /// opens none, and tries again at each advertisement (G5).
        case unreadable(String)
    }

    private(set) var state: State = .free
    /// The rounds this device has acked since it started, by nonce: a proposal
    /// seen again (a duplicate on the wire, or a replay of an older round at the
    /// same generation) is not acked again, so it can neither move the recorded
    /// ack's watermark nor replace the ack of the round in progress (SECURITY.md).
    private(set) var answered: Set<RoundNonce> = []

    /// The hold in force, if any.
    var hold: Hold? {
        if case .holding(let hold, _) = state { hold } else { nil }
    }

    /// Why the recorded ack cannot be read, while it cannot.
    var unreadable: String? {
        if case .unreadable(let why) = state { why } else { nil }
    }

    /// No sibling's records may be applied (a hold, or an ack that cannot be read).
    var isHoldingRecords: Bool {
        switch state {
        case .holding, .unreadable: true
        case .free, .acked: false
        }
    }

    // MARK: - Events

    /// The recorded ack could not be read (any → unreadable): `true` the first time,
    /// when the device says so.
    mutating func onRecordedAckUnreadable(_ why: String) -> Bool {
        let first = unreadable == nil
        state = .unreadable(why)
        return first
    }

    /// The recorded ack was read (unreadable → free; any → holding when it is
    /// ahead of the device's generation, `pending`, with a hold of `epoch`).
    /// Returns whether it could not be read before.
    mutating func onRecordedAckRead(pending: RoundNonce?, epoch: UInt64) -> Bool {
        let wasUnreadable = unreadable != nil
        if let pending {
            state = .holding(Hold(round: pending, epoch: epoch), outstanding: pending)
            answered.insert(pending)
        } else if wasUnreadable {
            state = .free
        }
        return wasUnreadable
    }

    /// Whether `round` was acked already since the start.
    func hasAnswered(_ round: RoundNonce) -> Bool {
        answered.contains(round)
    }

    /// This device recorded an ack of `round` (→ acked, or holding on with `round`
    /// outstanding): as a member (`answering`, remembered so that the proposal
    /// is not acked twice) or as the leader of its own round.
    mutating func onAckRecorded(_ round: RoundNonce, answering: Bool) {
        if answering {
            // Bounded: a device acks one round per proposal the leader makes.
            if answered.count >= 4_096 { answered.removeAll() }
            answered.insert(round)
        }
        switch state {
        case .free, .acked: state = .acked(round)
        case .holding(let hold, _): state = .holding(hold, outstanding: round)
        case .unreadable: preconditionFailure("an ack recorded while the recorded ack is unreadable")
        }
    }

    /// The ack of `round` went out: the device holds for it under a timer of
    /// `epoch` (→ holding). Returns the hold it replaces, whose timer is to be cancelled.
    mutating func onHolding(for round: RoundNonce, epoch: UInt64) -> Hold? {
        let previous = hold
        state = .holding(Hold(round: round, epoch: epoch), outstanding: round)
        return previous
    }

    /// The hold timer of `epoch` fired (holding → acked, or free): the round no
    /// longer held for, if the timer was the hold's.
    mutating func onHoldTimer(epoch: UInt64) -> RoundNonce? {
        guard case .holding(let hold, let outstanding) = state, hold.epoch == epoch else { return nil }
        state = outstanding.map { .acked($0) } ?? .free
        return hold.round
    }

    /// The commit of `round` arrived (holding or acked → free when it is theirs):
    /// the hold it ends, whose timer is to be cancelled.
    mutating func onCommit(of round: RoundNonce) -> Hold? {
        switch state {
        case .holding(let hold, let outstanding):
            let left = outstanding == round ? nil : outstanding
            guard hold.round == round else {
                state = .holding(hold, outstanding: left)
                return nil
            }
            state = left.map { .acked($0) } ?? .free
            return hold
        case .acked(let outstanding):
            if outstanding == round { state = .free }
            return nil
        case .free, .unreadable:
            return nil
        }
    }

    /// A sibling's record is about to be applied: the ack it withdraws, if one
    /// awaited a commit (acked → free).
    mutating func onRecordsComing() -> RoundNonce? {
        switch state {
        case .acked(let round):
            state = .free
            return round
        case .holding(let hold, let outstanding?):
            state = .holding(hold, outstanding: nil)
            return outstanding
        case .holding(_, nil), .free, .unreadable:
            return nil
        }
    }

    /// The device caught up past every round it held for (recovery): the hold
    /// it ends, whose timer is to be cancelled. An unreadable ack stays unread.
    mutating func onCaughtUp() -> Hold? {
        switch state {
        case .holding(let hold, _):
            state = .free
            return hold
        case .acked:
            state = .free
            return nil
        case .free, .unreadable:
            return nil
        }
    }
}
