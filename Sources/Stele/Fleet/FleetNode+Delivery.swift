/// A contact's devices as this device knows them: read from the directory and
/// verified like the account's own roster (``Roster``), then handed to
/// ``FleetInput/contactsChanged(_:)``.
public struct ContactRoster: Sendable, Equatable {
    public let account: AccountID
    public let members: Set<DeviceID>
    /// Devices taken off the contact's roster: their frames are refused by name.
    public let revoked: Set<DeviceID>

    public init(account: AccountID, members: Set<DeviceID>, revoked: Set<DeviceID> = []) {
        self.account = account
        self.members = members
        self.revoked = revoked
    }

    /// The members and revocations of a verified roster.
    public init(_ roster: Roster) {
        self.init(account: roster.account, members: roster.members, revoked: roster.revoked)
    }
}

extension FleetNode {
    /// The most messages one delivery frame carries.
    static let recordsPerDelivery = 256

    /// Replaces the contacts this device talks to (each contact's roster, read
    /// from the directory and verified like the account's own). Frames from a
    /// contact's device are opened with the contact channel; ops the
    /// conversations owe a contact are delivered to every device on its roster.
    mutating func onContactsChanged(_ rosters: [ContactRoster]) -> [FleetOutput] {
        let before = contacts
        contacts = Dictionary(rosters.filter { $0.account != replica.account }.map { ($0.account, $0) }, uniquingKeysWith: { _, last in last })
        if let identity = channel?.identity {
            var channels: [AccountID: SiblingChannel] = [:]
            for (account, roster) in contacts {
                var contactChannel =
                    contactChannels[account]
                    ?? .contact(identity: identity, account: replica.account, contact: account, members: roster.members, revoked: roster.revoked)
                contactChannel.update(members: roster.members, revoked: roster.revoked)
                channels[account] = contactChannel
            }
            contactChannels = channels
        }
        // A device new on a contact's roster gets at once what went to every device of that
        // contact, in its conversations only (the conversations unread: in every one).
        let gained = Set(contacts.filter { !$0.value.members.isSubset(of: before[$0.key]?.members ?? []) }.keys)
        let widened = gained.isEmpty ? [] : (try? replica.conversations()).map { Set($0.filter { gained.contains($0.contact) }.map(\.name)) }
        delivery.onContactsChanged(Set(contacts.values.flatMap(\.members)), widened: widened)
        return attemptDeliveries()
    }

    /// The contact whose roster holds `device`.
    func contactAccount(of device: DeviceID) -> AccountID? {
        contacts.first { $0.value.members.contains(device) }?.key
    }

    /// Opens sealed bytes no sibling sealed with each contact's channel.
    /// - Returns: the contact, the sending device and the frame, or why nothing opened
    ///   (``SealError/unknownSender`` when no contact's device sealed it either).
    mutating func openFromContact(_ bytes: [UInt8]) -> Result<(account: AccountID, sender: DeviceID, frame: [UInt8]), SealError> {
        var failure = SealError.unknownSender
        for account in contactChannels.keys.sorted(by: { $0.bytes.lexicographicallyPrecedes($1.bytes) }) {
            guard var contactChannel = contactChannels[account] else { continue }
            defer { contactChannels[account] = contactChannel }
            do {
                let opened = try contactChannel.open(bytes)
                return .success((account, opened.sender, opened.frame))
            } catch {
                if error != .unknownSender { failure = error }
            }
        }
        return .failure(failure)
    }

    /// Raises what counts as shared with siblings: one conversation (`nil`: all of them).
    mutating func noteShared(_ conversation: String?) {
        delivery.onShared(conversation, at: Int64(bitPattern: replica.hybridClock.last.rawValue))
    }

    /// A sibling's advertisement showed `conversation` equal here: what waited
    /// for that may go once the moment to settle has passed.
    mutating func agreed(on conversation: String) -> Bool {
        delivery.onAgreement(on: conversation, at: monotonicNow)
    }

    /// Whether what waits in `conversation` may go: a sibling agreed after the
    /// wait began, at least the settling moment ago (with a hub: the relay mailbox
    /// was drained after the agreement), and every sibling heard from within two
    /// advertisement intervals last advertised what this device holds.
    func mayRelease(_ conversation: String) -> Bool {
        guard let agreedAt = delivery.agreedSinceWaitBegan(conversation) else { return false }
        let now = monotonicNow
        // Monotonic: a wall clock set back since the agreement changes nothing.
        let settled =
            configuration.confirmsByRelayDrain
            ? (delivery.drainedAt.map { $0 >= agreedAt } ?? false) : now - agreedAt >= configuration.deliverySettleMilliseconds
        guard settled, let mine = try? replica.digest(of: conversation) else { return false }
        let lately = 2 * configuration.advertiseIntervalMilliseconds
        for (peer, advertisement) in siblings.heard where peer != replica.device && roster.contains(peer) {
            guard let heardAt = siblings.heardAt[peer], now - heardAt <= lately else { continue }
            guard advertisement.generation == replica.generation, advertisement.roots.first(where: { $0.namespace == conversation })?.digest == mine else {
                return false
            }
        }
        return true
    }

    /// A delivery that waited for a sibling's agreement goes when the outbox
    /// timer fires next, or (``FleetConfiguration/confirmsByRelayDrain``) at the
    /// next ``FleetInput/relayDrained``: the simulator's `sync` waits for it, and a
    /// hub runtime drains its mailbox for it.
    public var hasDeliverySettling: Bool { delivery.isSettling }

    /// Whether an owed op waits out its writer's turn (``DeliveryGate``): it goes
    /// to every device of the contact when the outbox timer fires next, which the
    /// simulator's `sync` waits for. Nothing to drain for: only time helps.
    package var hasDeliveryWaitingOutATurn: Bool { delivery.isWaitingOutATurn }

    // MARK: - Sending

    /// Sends what every conversation owes its contact to each of the contact's
    /// devices, held back by the gate (``DeliveryGate``), and arms the retry
    /// while anything is still owed.
    mutating func attemptDeliveries() -> [FleetOutput] {
        guard !contacts.isEmpty else { return [] }
        let conversations: [(name: String, contact: AccountID)]
        do {
            conversations = try replica.conversations()
        } catch {
            return [.log(FleetEvent.failed(.rejectedRecords, peer: nil, namespace: nil, "could not read the conversations: \(error)", error))]
        }
        var outputs: [FleetOutput] = []
        var owesAny = false
        var prompt = false
        // Once per try, not once per record (``split(_:shared:alone:)``).
        let alone = !roster.contains { $0 != replica.device }
        for (name, contact) in conversations {
            guard let roster = contacts[contact], !roster.members.isEmpty else { continue }
            let owed: [MessageRecord]
            do {
                owed = try replica.messages(name).outbox()
            } catch {
                outputs.append(.log(FleetEvent.failed(.rejectedRecords, peer: nil, namespace: name, "could not read the outbox: \(error)", error)))
                continue
            }
            let moment = monotonicNow
            delivery.onOwed(name, records: owed, at: moment)
            guard !owed.isEmpty else {
                delivery.onOpened(name)
                continue
            }
            owesAny = true
            // Whose turn it is (DeliveryGate): in its turn an op goes from its writer, once, to
            // one device of the contact (a receipt went as its delivery's answer); after it, to
            // every device, again every retry interval. The rest goes nowhere in this try,
            // neither sent nor held back.
            let retry = configuration.deliveryRetryMilliseconds
            let (toEveryone, toFirst) = delivery.due(owed, in: name, at: moment, turn: retry, retry: retry, writer: replica.device)
            let due = Self.keeping(owed, toEveryone.union(toFirst))
            var now: [MessageRecord] = []
            var later: [MessageRecord] = []
            for record in due {
                let (immediate, gated) = split(record, shared: delivery.shared(name), alone: alone)
                if let immediate { now.append(immediate) }
                if let gated { later.append(gated) }
            }
            if !later.isEmpty {
                if mayRelease(name) {
                    now = Self.merge(now, later)
                    delivery.onOpened(name)
                } else if delivery.onHeldBack(name) {
                    prompt = true
                    outputs.append(
                        .log(FleetEvent(
                            kind: .deliveryWaits, peer: nil, namespace: name,
                            message: "\(later.count) messages a sibling may hold wait until this device agrees with a sibling (a delete may be on its way)")))
                }
            }
            let first = Self.keeping(now, toFirst)
            let everyone = Self.keeping(now, toEveryone)
            delivery.onSent(name, first.flatMap { $0.ops.map(\.id) }, reach: .one)
            delivery.onSent(name, everyone.flatMap { $0.ops.map(\.id) }, reach: .everyone(at: moment))
            let recipient = delivery.firstRecipient(among: roster.members)
            for (records, recipients) in [(first, recipient.map { [$0] } ?? []), (everyone, roster.members.sorted())] where !records.isEmpty {
                var start = 0
                while start < records.count {
                    let chunk = Array(records[start..<min(start + Self.recordsPerDelivery, records.count)])
                    start += chunk.count
                    let bytes = FrameCodec.encode(.delivery(Delivery(conversation: name, records: chunk)))
                    outputs += recipients.map { .send(to: $0, bytes: bytes) }
                }
                let ops = records.reduce(0) { $0 + $1.ops.count }
                outputs.append(
                    .log(FleetEvent(
                        kind: .delivered, peer: nil, namespace: name,
                        message: "\(ops) ops of \(records.count) messages sent to \(recipients.count) of the \(roster.members.count) devices of account \(contact)")))
            }
        }
        if prompt { outputs += advertiseToAll() }
        if owesAny { outputs.append(.arm(.outbox, afterMilliseconds: configuration.deliveryRetryMilliseconds)) }
        return outputs
    }

    /// Splits what a message owes into what may go at once and what waits
    /// (``DeliveryGate``): all of it goes when this device posted it after it
    /// last let records out (or has no sibling); otherwise what carries none of
    /// its text (a recall, reactions, receipts) goes, and posts and edits wait.
    /// `alone`: this device has no sibling (``peers`` is empty).
    private func split(_ record: MessageRecord, shared: Int64, alone: Bool) -> (now: MessageRecord?, later: MessageRecord?) {
        let isPrivate = alone
            || record.ops.contains { op in
                if case .post = op.action { op.writer == replica.device && op.time > shared } else { false }
            }
        if isPrivate { return (record, nil) }
        let texts = record.ops.filter(\.carriesText)
        let rest = record.ops.filter { !$0.carriesText }
        return (
            rest.isEmpty ? nil : MessageRecord(message: record.message, ops: rest),
            texts.isEmpty ? nil : MessageRecord(message: record.message, ops: texts)
        )
    }

    /// `records` with only the ops among `ids`; a record left with none is dropped.
    private static func keeping(_ records: [MessageRecord], _ ids: Set<MessageOpID>) -> [MessageRecord] {
        // Most tries find nothing due: no record to look through.
        guard !ids.isEmpty else { return [] }
        return records.compactMap { record in
            let ops = record.ops.filter { ids.contains($0.id) }
            return ops.isEmpty ? nil : MessageRecord(message: record.message, ops: ops)
        }
    }

    /// Two lists of records with the ops of one message joined, in id order. A
    /// message is told by its id's bytes, as the store tells it: two ids Swift's
    /// `String` holds equal (`é` as one character, and as `e` with a combining
    /// accent) are two messages, whose ops one record would have mixed.
    static func merge(_ first: [MessageRecord], _ second: [MessageRecord]) -> [MessageRecord] {
        var ops: [ExactText: [MessageOp]] = [:]
        for record in first + second { ops[ExactText(record.message), default: []] += record.ops }
        return ops.sorted { $0.key < $1.key }.map { MessageRecord(message: $0.key.text, ops: $0.value.sorted { $0.id < $1.id }) }
    }

    // MARK: - Receiving

    /// A frame from a contact's device: only a delivery is accepted; its ops go
    /// into the conversation of that name with that contact, and the receipts
    /// go back to the sender.
    mutating func onContactFrame(_ bytes: [UInt8], from sender: DeviceID, account: AccountID) -> [FleetOutput] {
        let frame: Frame
        do {
            frame = try FrameCodec.decode(bytes)
        } catch {
            return logOnce(.rejectedFrame, peer: sender, namespace: nil, "\(error)", failure: FleetFailure(error))
        }
        guard case .delivery(let delivery) = frame else {
            return logOnce(.rejectedFrame, peer: sender, namespace: nil, "a contact's device sent a frame other than a delivery; refused")
        }
        let name = delivery.conversation
        let conversation: MessageNamespace
        do {
            guard try replica.conversations().contains(where: { $0.name == name && $0.contact == account }) else {
                return logOnce(
                    .undeclaredNamespace, peer: sender, namespace: name,
                    "a delivery for a conversation this device does not hold with account \(account); open it with conversation(_:with:) to take it in")
            }
            conversation = try replica.messages(name)
        } catch {
            return [.log(FleetEvent.failed(.rejectedRecords, peer: sender, namespace: name, "could not open the conversation: \(error)", error))]
        }
        guard !isHoldingRecords else {
            // The contact delivers again until it hears a receipt.
            return logOnce(.reconcileHeld, peer: sender, namespace: name, "a barrier round is open; a contact's delivery waits for its next try")
        }
        self.delivery.onHeard(contact: sender, at: monotonicNow)
        var outputs = withdrawOutstandingAck()
        var receipts: [MessageRecord] = []
        var taken = 0
        for record in delivery.records {
            do {
                let answer = try conversation.receive(record, from: account, isAnswer: delivery.isAnswer)
                taken += 1
                if !answer.ops.isEmpty { receipts.append(answer) }
            } catch {
                outputs.append(.log(FleetEvent.failed(.rejectedRecords, peer: sender, namespace: name, "message \(record.message) refused: \(error)", error)))
            }
        }
        guard taken > 0 else { return outputs }
        // Receipts answering unkept ones change nothing here; anything kept is news for
        // the siblings, and may be a tombstone to collect (a recall, or the
        // acknowledgement that frees one): a device alone on its account has no
        // sibling whose advertisement would prompt the round (DESIGN §6 "Single
        // devices trigger too").
        outputs += noteChange() + considerRound()
        if !receipts.isEmpty {
            outputs.append(.send(to: sender, bytes: FrameCodec.encode(.delivery(Delivery(conversation: name, records: receipts, isAnswer: true)))))
        }
        outputs.append(
            .log(FleetEvent(
                kind: .deliveryReceived, peer: sender, namespace: name,
                message: "\(taken) messages taken in from account \(account), \(receipts.count) receipted")))
        return outputs
    }
}
