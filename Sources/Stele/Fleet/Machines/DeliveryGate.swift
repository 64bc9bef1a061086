/// Where this device's deliveries to contacts stand, as a state machine without
/// I/O: per conversation, the gate is open or waiting (since the count of
/// agreements when the wait began). ``FleetNode`` reads the outbox and sends.
///
/// The gate (issue 7: "an unsent-for-everyone message that was never delivered
/// is never delivered afterwards by any of your devices, even one that was
/// offline when you deleted it"). The duty is derived from the folded ops
/// (000 §6 "reconcileOutboxDuty"), so a delete cancels it on every device the
/// delete reaches; a device that has not heard of the delete yet still owes the
/// message. So a device delivers at once only what no sibling can have deleted:
/// a message it posted after it last let message records out to a sibling (a
/// reconcile reply, a snapshot, an anchor), and whatever carries no text (a
/// recall, a reaction, a receipt). Posts and edits of any other message wait
/// until this device has found its conversation equal to a sibling's after the
/// wait began, and then a moment more
/// (``FleetConfiguration/deliverySettleMilliseconds``) in which every sibling
/// heard from lately still holds what it holds: a sibling that came back at the
/// same moment as the one agreeing may be the one bringing the delete. By then
/// the delete has arrived from any sibling that holds it and can talk, and the
/// duty is recomputed from the fold. A sibling that deleted and has not synced
/// with anyone since, while every sibling this device can reach has not heard
/// of it, cannot be waited for without a device that is always reachable (the
/// hub, later): README "Conversations" states it.
///
/// With a hub (``FleetConfiguration/confirmsByRelayDrain``), "settled" is no
/// longer a moment of hoping: the runtime drains this device's relay mailbox
/// after the agreement, so every frame a sibling had sent it by then (a recall
/// that reached the hub, a greeting of a sibling back from a week offline) is in
/// before the delivery goes.
///
/// Whose turn it is (issue 22). What may go does not go from every device to
/// every device of the contact at once: a delivery that reached all of them
/// made each write its own receipt, and each receipt its own acknowledgement,
/// so that both accounts' devices then reconciled the receipts with one another:
/// twenty reconcile sessions in a fleet of five for one message of the
/// contact's. So an op owed here for less than
/// ``FleetConfiguration/deliveryRetryMilliseconds`` (its turn) goes from its
/// writer alone, and to one device of the contact: the one heard from last (the
/// lowest id when none was); the contact's devices pass it on among
/// themselves; once, not at every try. A receipt goes nowhere in its turn: it
/// went at once, as the answer to the delivery it receipts. Once its turn is over an op still owed
/// goes from every device that owes it to every device of the contact, as
/// before: its writer went quiet, or a frame was lost; and again every
/// ``FleetConfiguration/deliveryRetryMilliseconds`` while it is owed, not at every
/// try: a try comes after every change of this device's, and resending a
/// whole outbox to a contact away for a week at each sent 53,507 deliveries to
/// unreachable devices in 16 simulated runs (five devices, 1,000 steps), 23,702
/// once paced; each one sealed and (through a hub) kept in the contact's
/// mailbox. A device newly on the contact's roster gets it at the next try.
///
/// ```
/// open ──a post or edit a sibling may hold is owed──▶ waiting(since: agreements)
/// waiting ──an agreement after `since`, settled (or drained after it), siblings still equal──▶ open (released)
/// waiting ──nothing owed any more──▶ open
/// ```
/// ARCHITECTURE.md has the whole table.
struct DeliveryGate {
    /// This device's hybrid clock when it last let a conversation's records out
    /// to a sibling, per conversation; a message it posted later exists nowhere else.
    private var sharedThrough: [String: Int64] = [:]
    /// The same for every conversation at once (the start, a snapshot, an anchor):
    /// before the node starts, everything counts as shared.
    private var floor: Int64 = .max
    /// Times a sibling's advertisement showed the conversation's root equal to this device's.
    private var agreements: [String: UInt64] = [:]
    /// When (the runtime's monotonic clock) the latest agreement on each conversation was seen.
    private var agreedAt: [String: Int64] = [:]
    /// Conversations whose older ops wait for an agreement: the count when the wait began.
    private var waiting: [String: UInt64] = [:]
    /// When (monotonic) the runtime last found this device's relay mailbox empty.
    private(set) var drainedAt: Int64?
    /// How far an owed op has gone from here.
    enum Reach: Equatable {
        /// Nowhere yet (or, a receipt, only as its delivery's answer).
        case noted
        /// To one device of the contact, in its writer's turn.
        case one
        /// To every device of the contact, its turn over; last at `at` (monotonic).
        case everyone(at: Int64)

        var isEveryone: Bool {
            if case .everyone = self { true } else { false }
        }
    }

    /// Each owed op, per conversation: when (monotonic) it was first found owed
    /// here, and how far it has gone from here.
    private var owed: [String: [MessageOpID: (since: Int64, reach: Reach)]] = [:]
    /// When (monotonic) each contact's device was last heard from.
    private var contactHeardAt: [DeviceID: Int64] = [:]

    /// What counts as shared with siblings in `conversation`: ops made after it exist here only.
    func shared(_ conversation: String) -> Int64 {
        max(sharedThrough[conversation] ?? floor, floor)
    }

    /// When a sibling agreed on `conversation` after its wait began, if one did.
    func agreedSinceWaitBegan(_ conversation: String) -> Int64? {
        guard let since = waiting[conversation], agreements[conversation, default: 0] > since else { return nil }
        return agreedAt[conversation]
    }

    /// Whether some conversation's wait has seen its agreement and only waits out
    /// the settling moment: the outbox timer then is work about to happen, not a retry.
    var isSettling: Bool { waiting.keys.contains { agreedSinceWaitBegan($0) != nil } }

    /// Whether an owed op has not gone from here to every device of the contact
    /// yet: its turn ends at the outbox timer, which is then work about to
    /// happen too, not a retry.
    var isWaitingOutATurn: Bool { owed.values.contains { $0.values.contains { !$0.reach.isEveryone } } }

    /// How far `op` of `conversation` has gone from here.
    func reach(of op: MessageOpID, in conversation: String) -> Reach {
        owed[conversation]?[op]?.reach ?? .noted
    }

    /// Whether `op`'s turn is over at `now`: it has been owed here for `turn`.
    func isTurnOver(_ op: MessageOpID, in conversation: String, at now: Int64, turn: Int64) -> Bool {
        guard let noted = owed[conversation]?[op] else { return false }
        return now - noted.since >= turn
    }

    /// Whether `op`, its turn over at `now`, goes to every device of the
    /// contact in this try: it has not yet, or last did `retry` ago or more.
    func isDueForEveryone(_ op: MessageOpID, in conversation: String, at now: Int64, retry: Int64) -> Bool {
        guard case .everyone(let last) = owed[conversation]?[op]?.reach else { return true }
        return now - last >= retry
    }

    /// Which of the ops `records` owe go in this try at `now`, in one pass over
    /// them (the conversation's table looked up once): to every device of the
    /// contact, those whose turn is over (``isTurnOver(_:in:at:turn:)``) and
    /// that are due for everyone (``isDueForEveryone(_:in:at:retry:)``); to the
    /// first recipient only, those still in their turn that `writer` (this
    /// device) wrote and that have gone nowhere yet (``reach(of:in:)``), never a
    /// receipt (it went as its delivery's answer).
    func due(
        _ records: [MessageRecord], in conversation: String, at now: Int64, turn: Int64, retry: Int64, writer: DeviceID
    ) -> (everyone: Set<MessageOpID>, first: Set<MessageOpID>) {
        let noted = owed[conversation] ?? [:]
        var everyone: Set<MessageOpID> = []
        var first: Set<MessageOpID> = []
        for record in records {
            for op in record.ops {
                let entry = noted[op.id]
                if let entry, now - entry.since >= turn {
                    if case .everyone(let last) = entry.reach, now - last < retry { continue }
                    everyone.insert(op.id)
                } else if case .receipt = op.action {
                    continue
                } else if op.writer == writer, (entry?.reach ?? .noted) == .noted {
                    first.insert(op.id)
                }
            }
        }
        return (everyone, first)
    }

    /// The device of a contact (`members`) that gets what goes in its writer's
    /// turn: the one heard from last, the lowest id among equals or when none was.
    func firstRecipient(among members: Set<DeviceID>) -> DeviceID? {
        members.min { first, second in
            let (a, b) = (contactHeardAt[first] ?? .min, contactHeardAt[second] ?? .min)
            return a != b ? a > b : first < second
        }
    }

    // MARK: - Events

    /// Records of `conversation` (`nil`: of every one) left for a sibling at `clock`.
    mutating func onShared(_ conversation: String?, at clock: Int64) {
        if let conversation {
            sharedThrough[conversation] = clock
        } else {
            floor = clock
            sharedThrough.removeAll()
        }
    }

    /// A sibling's advertisement showed `conversation` equal here at `now`:
    /// `true` when something waits for that (then the settling timer is armed).
    mutating func onAgreement(on conversation: String, at now: Int64) -> Bool {
        agreements[conversation, default: 0] += 1
        agreedAt[conversation] = now
        return waiting[conversation] != nil
    }

    /// The relay mailbox was found empty at `now`: every frame a sibling sent before is in.
    mutating func onDrained(at now: Int64) {
        drainedAt = now
    }

    /// `conversation` owes `ops` at `now`: each is noted when first found owed;
    /// those owed no more are forgotten.
    mutating func onOwed(_ conversation: String, _ ops: [MessageOpID], at now: Int64) {
        guard !ops.isEmpty else {
            owed[conversation] = nil
            return
        }
        let known = owed[conversation] ?? [:]
        // Most tries find the very ops of the last one (an outbox lists each op once): nothing to note or forget.
        if known.count == ops.count, ops.allSatisfy({ known[$0] != nil }) { return }
        var noted: [MessageOpID: (since: Int64, reach: Reach)] = [:]
        for op in ops { noted[op] = known[op] ?? (now, .noted) }
        owed[conversation] = noted
    }

    /// `conversation` owes the ops of `records` at `now` (``onOwed(_:_:at:)``,
    /// without listing their ids when they are the very ops of the last try).
    mutating func onOwed(_ conversation: String, records: [MessageRecord], at now: Int64) {
        if let known = owed[conversation], !records.isEmpty {
            var count = 0
            var same = true
            for record in records {
                count += record.ops.count
                if same, !record.ops.allSatisfy({ known[$0.id] != nil }) { same = false }
            }
            if same, count == known.count { return }
        }
        onOwed(conversation, records.flatMap { $0.ops.map(\.id) }, at: now)
    }

    /// `ops` of `conversation` went from here as far as `reach`.
    mutating func onSent(_ conversation: String, _ ops: [MessageOpID], reach: Reach) {
        for op in ops { owed[conversation]?[op]?.reach = reach }
    }

    /// A frame came from a contact's `device` at `now`.
    mutating func onHeard(contact device: DeviceID, at now: Int64) {
        contactHeardAt[device] = now
    }

    /// The contacts' devices are now `devices`: the others are forgotten. In the
    /// conversations `widened` (those with a contact whose roster gained a device;
    /// `nil`: not known, every one), whatever went to every device goes again at
    /// the next try, so that it reaches the new one without waiting out a retry.
    mutating func onContactsChanged(_ devices: Set<DeviceID>, widened: Set<String>?) {
        contactHeardAt = contactHeardAt.filter { devices.contains($0.key) }
        for (conversation, ops) in owed where widened?.contains(conversation) ?? true {
            for (op, noted) in ops where noted.reach.isEveryone { owed[conversation]?[op]?.reach = .one }
        }
    }

    /// What waited in `conversation` went out, or nothing is owed there any more (waiting → open).
    mutating func onOpened(_ conversation: String) {
        waiting[conversation] = nil
    }

    /// Posts or edits a sibling may hold are owed in `conversation` and may not go
    /// yet: `true` when the wait begins now (open → waiting).
    mutating func onHeldBack(_ conversation: String) -> Bool {
        guard waiting[conversation] == nil else { return false }
        waiting[conversation] = agreements[conversation, default: 0]
        return true
    }
}
