import SteleSQL

/// A `messages` namespace (000 §6, DESIGN §7): immutable ops stored
/// insert-if-absent, each message's row their fold in (opTime, opID) order.
///
/// The ops are the truth; the row table keeps what the digest and the barrier
/// need of each fold (identity, delete scope, the leaf of the canonical row),
/// refreshed whenever an op of the message lands. Reads fold the message's ops
/// (a handful) again, so a read can never disagree with the fold. An op whose
/// message has not arrived is kept as an orphan (no row, no leaf) and folded
/// when the post lands. Any delete purges the body of every stored post and
/// edit of the message and of every one that arrives later: 000 §6 for a delete
/// for everyone, beyond the seed for a delete for me (see ``MessageFold``).
public struct MessageNamespace {
    let replica: Replica
    public let declaration: NamespaceDeclaration
    let slots: StatementSlots

    init(replica: Replica, declaration: NamespaceDeclaration) {
        self.replica = replica
        self.declaration = declaration
        slots = replica.statementSlots(for: declaration, count: Slot.count)
    }

    public var name: String { declaration.name }
    private var table: String { declaration.table }
    private var opsTable: String { declaration.table + "_ops" }

    /// The statements every op that lands runs, one slot each: found by number,
    /// not by building their text and hashing it at every use (issue 22).
    enum Slot: Int, CaseIterable {
        case storedOps, storedRow, insertOp, upsertRow, updateOwed, outboxOf

        static let count = allCases.count
    }

    /// A hot statement, its parameters all bound afresh by the caller (``StatementSlots``).
    private func statement(_ slot: Slot, _ sql: @autoclosure () -> String) throws -> Statement {
        try slots.statement(slot.rawValue, sql())
    }

    /// Runs a hot statement that returns no rows, with `arguments` bound from parameter 1.
    private func run(_ slot: Slot, _ sql: @autoclosure () -> String, _ arguments: [SQLValue]) throws {
        let statement = try statement(slot, sql())
        try statement.bind(arguments)
        while try statement.step() {}
    }

    // MARK: - Reads (the fold is the only read)

    /// The message as its ops fold, or `nil` when this store holds no post of it.
    /// A deleted message reads as identity and scope only: no body, no edit, no
    /// reactions (reads never surface what a delete removed).
    public func message(_ id: String) throws -> MessageRow? {
        MessageFold.fold(try storedOps(of: id))
    }

    /// The live messages, oldest post first (ties by id).
    public func messages() throws -> [MessageRow] {
        try liveIDs().compactMap { try message($0) }
    }

    /// The ids of the live messages, in the order of ``messages()``, read from the
    /// rows without folding a message's ops.
    public func liveIDs() throws -> [String] {
        try replica.connection.query("SELECT key FROM \(table) WHERE scope = 0 ORDER BY posted, key") { $0.text(0) }
    }

    /// The number of live messages.
    public func count() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table) WHERE scope = 0") ?? 0)
    }

    /// The number of deleted message rows retained (the namespace's tombstones).
    public func tombstoneCount() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table) WHERE scope > 0") ?? 0)
    }

    /// The number of ops stored whose message has not arrived.
    public func orphanCount() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(opsTable) o WHERE NOT EXISTS (SELECT 1 FROM \(table) r WHERE r.key = o.message)") ?? 0)
    }

    /// Every op stored for `message`, orphans included, in id order: what sync ships.
    public func ops(of message: String) throws -> [MessageOp] {
        try storedOps(of: message)
    }

    /// The bytes of every body stored for `message` across its ops (posts and
    /// edits): what a delete must leave empty.
    public func storedBodyBytes(of message: String) throws -> Int {
        Int(try replica.connection.scalarInt("SELECT coalesce(sum(length(content)), 0) FROM \(opsTable) WHERE message = ? AND action IN \(Self.textActions)", [.text(message)]) ?? 0)
    }

    // MARK: - Local writes

    /// Posts a new message.
    /// - Throws: ``ReplicaError`` `messageExists` when the id is taken (a deleted
    ///   message's id included), `invalidName`/`limitExceeded` for sizes.
    @discardableResult
    public func post(_ message: String, body: [UInt8], author: String) throws -> MessageOp {
        try Limits.checkKey(message, "message id")
        try Limits.checkKey(author, "author")
        try Limits.checkValue(body)
        return try replica.operation {
            let held = try storedOps(of: message)
            guard MessageFold.fold(held) == nil else {
                throw ReplicaError(.messageExists, "message \(message) already exists in \(name) (or once did: a deleted message's id is not reused); post under a new id")
            }
            return try writeLocal(message, .post(author: author, body: body), held: held)
        }
    }

    /// Replaces the message's body (last writer wins on (editedAt, editOpID)).
    /// - Throws: ``ReplicaError`` `messageMissing`, `messageDeleted` (a delete is
    ///   absorbing: no later edit applies, 000 §6), `notAuthor` (a contact's
    ///   message), `limitExceeded`.
    @discardableResult
    public func edit(_ message: String, body: [UInt8]) throws -> MessageOp {
        try Limits.checkValue(body)
        return try replica.operation {
            let (held, row) = try liveMessage(message, to: "edit")
            try requireOwn(row, to: "edit")
            return try writeLocal(message, .edit(body: body), held: held)
        }
    }

    /// Deletes the message for this account's devices (`.me`) or for everyone.
    /// - Returns: the delete op, or `nil` when the message is already deleted with
    ///   that scope or a stronger one (nothing to do).
    /// - Throws: ``ReplicaError`` `messageMissing`; `notAuthor` for a delete for
    ///   everyone of a contact's message; `invalidRecord` for scope `.live`.
    @discardableResult
    public func unsend(_ message: String, scope: DeleteScope) throws -> MessageOp? {
        guard scope != .live else { throw ReplicaError(.invalidRecord, "unsend takes scope me or everyone, not live") }
        return try replica.operation {
            let held = try storedOps(of: message)
            guard let row = MessageFold.fold(held) else {
                throw ReplicaError(.messageMissing, "message \(message) is not in \(name); nothing to delete")
            }
            guard row.scope < scope else { return nil }
            if scope == .everyone { try requireOwn(row, to: "delete for everyone") }
            return try writeLocal(message, .delete(scope), held: held)
        }
    }

    /// Sets `reactor`'s reaction to `emoji` (one register per reactor).
    /// - Throws: ``ReplicaError`` `messageMissing`, `messageDeleted`, `invalidRecord` for an empty or oversized emoji.
    @discardableResult
    public func react(_ message: String, emoji: String, as reactor: String) throws -> MessageOp {
        try Limits.checkKey(reactor, "reactor")
        return try replica.operation {
            let (held, _) = try liveMessage(message, to: "react to")
            return try writeLocal(message, .react(reactor: reactor, emoji: emoji), held: held)
        }
    }

    /// Removes `reactor`'s reaction.
    /// - Throws: ``ReplicaError`` `messageMissing`, `messageDeleted`.
    @discardableResult
    public func unreact(_ message: String, as reactor: String) throws -> MessageOp {
        try Limits.checkKey(reactor, "reactor")
        return try replica.operation {
            let (held, _) = try liveMessage(message, to: "remove a reaction from")
            return try writeLocal(message, .unreact(reactor: reactor), held: held)
        }
    }

    /// The message's ops and row, read once for the check and the write.
    /// - Throws: `messageMissing`, or `messageDeleted` (a delete is absorbing).
    private func liveMessage(_ message: String, to verb: String) throws -> (held: [MessageOp], row: MessageRow) {
        let held = try storedOps(of: message)
        guard let row = MessageFold.fold(held) else {
            throw ReplicaError(.messageMissing, "message \(message) is not in \(name); cannot \(verb) it")
        }
        guard row.scope == .live else {
            throw ReplicaError(.messageDeleted, "message \(message) in \(name) was deleted; a delete is final, so it cannot \(verb == "edit" ? "be edited" : "take reactions")")
        }
        return (held, row)
    }

    /// Only the author's account edits a message or deletes it for everyone.
    private func requireOwn(_ row: MessageRow, to verb: String) throws {
        guard row.authorAccount == replica.account else {
            throw ReplicaError(.notAuthor, "message \(row.message) in \(name) was written by a contact; only its author can \(verb) it. Delete it for me instead")
        }
    }

    private func writeLocal(_ message: String, _ action: MessageOp.Action, held: [MessageOp]) throws -> MessageOp {
        let op = MessageOp(
            id: MessageOpID.generate(using: &replica.random), message: message,
            time: Int64(bitPattern: replica.nextTimestamp().rawValue), writer: replica.device, account: replica.account, action: action)
        try op.validate()
        let outcome = try insert([op], into: message, held: held)
        replica.emitOutcome(outcome, namespace: name, subject: .message(message), origin: .local)
        return op
    }

    // MARK: - Sync

    /// Every op of `message` held here, orphans included, or `nil` when there are none.
    public func record(_ message: String) throws -> MessageRecord? {
        let ops = try storedOps(of: message)
        return ops.isEmpty ? nil : MessageRecord(message: message, ops: ops)
    }

    /// Inserts the ops this store lacks and folds the message again.
    /// - Throws: ``ReplicaError`` `invalidRecord` for a malformed record (nothing changes).
    @discardableResult
    public func apply(_ record: MessageRecord) throws -> MergeOutcome {
        try record.validate()
        return try replica.operation {
            for op in record.ops { replica.observe(HybridTimestamp(rawValue: UInt64(op.time))) }
            let outcome = try insert(record.ops, into: record.message)
            replica.emitOutcome(outcome, namespace: name, subject: .message(record.message))
            return outcome
        }
    }

    // MARK: - Conversations: the outbox and receipts (000 §6 "reconcileOutboxDuty")

    /// The contact this namespace is a conversation with (``Replica/conversation(_:with:)``), if any.
    public func contact() throws -> AccountID? {
        try replica.connection.queryFirst("SELECT contact FROM conversations WHERE namespace = ?", [.integer(declaration.id)]) { row in
            guard let contact = try? AccountID(bytes: row.blob(0)) else {
                throw ReplicaError(.corrupt, "the contact of conversation \(name) is malformed; the file is damaged")
            }
            return contact
        } ?? nil
    }

    /// What this account still owes the other side of the conversation: per
    /// message, the ops to deliver (``MessageFold/duty(of:for:)``), derived from
    /// the folded ops, so a delivery receipt or a delete that reaches any device
    /// of the account cancels the duty on every device as the fold converges.
    public func outbox() throws -> [MessageRecord] {
        // The fleet asks after every change of any namespace and at every retry, most
        // often with nothing of this conversation's changed since (issue 22: 14 % of a
        // simulated run). Outside a transaction, while its two tables stand as at the
        // last read, the last answer holds; when only rows changed through this handle
        // since, only their messages are read again (a device whose contact is away
        // owes a long outbox, read whole at every change it was 10 % of a run).
        guard replica.connection.isAutocommit, let state = try outboxState() else { return try readOutbox().records }
        let id = declaration.id
        if var last = replica.outboxes[id] {
            if last.state == state { return last.records }
            if last.state.dataVersion == state.dataVersion, let changed = replica.connection.takeChangedRows(of: id) {
                // Taken out of the cache while it changes: patched in place, not copied.
                replica.outboxes[id] = nil
                last.replace(changed, with: try readOutbox(only: changed))
                last.state = state
                replica.outboxes[id] = last
                return last.records
            }
        }
        // Read whole: what changed before now is in it.
        _ = replica.connection.takeChangedRows(of: id)
        let owed = try readOutbox()
        replica.outboxes[id] = Replica.CachedOutbox(state: state, owed: owed)
        return owed.records
    }

    /// Where the conversation's tables stand (``Replica/OutboxState``), once this
    /// handle counts their changes (and notes the messages they were of); `nil`
    /// while it cannot (the triggers could not be made: a read-only handle, a
    /// failing file): the outbox is read every time.
    private func outboxState() throws -> Replica.OutboxState? {
        let id = declaration.id
        if !replica.watchedConversations.contains(id) {
            do {
                try replica.connection.countChanges(of: table, as: id, noting: "key")
                try replica.connection.countChanges(of: opsTable, as: id, noting: "message")
            } catch {
                return nil
            }
            replica.watchedConversations.insert(id)
        }
        return Replica.OutboxState(changes: replica.connection.changeCount(of: id), dataVersion: try replica.connection.dataVersion())
    }

    /// The messages that owe a delivery, with the ops each owes: all of them, in
    /// the outbox's order (``Replica/CachedOutbox/precedes(_:_:)``), or those of
    /// `only` among them (one query each, in no order).
    private func readOutbox(only keys: Set<[UInt8]>? = nil) throws -> Replica.OwedMessages {
        if keys == nil { replica.outboxReads += 1 } else { replica.outboxPatches += 1 }
        // One query for every owing message's ops, in the order of the messages. A
        // row keeps the ids its fold owes (`owed`), so only those ops are decoded and
        // nothing is folded; a row written before format 5 (NULL) is folded here.
        var owed = Replica.OwedMessages()
        var current: (message: String, posted: Int64, owing: Set<MessageOpID>?, ops: [MessageOp])?
        func close() {
            guard let current else { return }
            let ops = current.owing == nil ? MessageFold.duty(of: current.ops, for: replica.account) : current.ops
            if !ops.isEmpty {
                owed.order.append((current.posted, Array(current.message.utf8)))
                owed.records.append(MessageRecord(message: current.message, ops: ops))
            }
        }
        func take(_ row: Statement) throws {
            let message = row.text(0)
            // By bytes: `é` in one character and in two are two messages, side by side here.
            if !(current?.message.utf8.elementsEqual(message.utf8) ?? false) {
                close()
                current = (message, row.int64(1), try row.optionalBlob(2).map { try Self.owedIDs($0, message: message, in: name) }, [])
            }
            if let owing = current?.owing {
                guard let id = try? MessageOpID(bytes: row.blob(3)) else {
                    throw ReplicaError(.corrupt, "an op of message \(message) in \(name) has a malformed id; the file is damaged")
                }
                guard owing.contains(id) else { return }
            }
            current?.ops.append(try op(of: message, from: row, at: 3))
        }
        let columns = "m.key, m.posted, m.owed, o.id, o.time, o.writer, o.account, o.action, o.actor, o.content, o.scope"
        if let keys {
            // Each message alone; ``Replica/CachedOutbox/replace(_:with:)`` puts each at its place.
            for key in keys {
                let statement = try statement(
                    .outboxOf, "SELECT \(columns) FROM \(table) m JOIN \(opsTable) o ON o.message = m.key WHERE m.duty = 1 AND m.key = ? ORDER BY o.id")
                try statement.bind(1, textBytes: key)
                while try statement.step() { try take(statement) }
                close()
                current = nil
            }
            return owed
        }
        _ = try replica.connection.query(
            "SELECT \(columns) FROM \(table) m JOIN \(opsTable) o ON o.message = m.key WHERE m.duty = 1 ORDER BY m.posted, m.key, o.id"
        ) { try take($0) }
        close()
        return owed
    }

    /// The ids of the ops a row owes, as `owed` keeps them (16 bytes each, in id order).
    static func owedBytes(_ ops: [MessageOp]) -> [UInt8]? {
        ops.isEmpty ? nil : ops.flatMap(\.id.bytes)
    }

    private static func owedIDs(_ bytes: [UInt8], message: String, in name: String) throws -> Set<MessageOpID> {
        guard bytes.count % MessageOpID.byteCount == 0 else {
            throw ReplicaError(.corrupt, "message \(message) of \(name) lists what it owes in \(bytes.count) bytes; the file is damaged")
        }
        var ids = Set<MessageOpID>()
        var start = 0
        while start < bytes.count {
            guard let id = try? MessageOpID(bytes: bytes[start..<(start + MessageOpID.byteCount)]) else {
                throw ReplicaError(.corrupt, "message \(message) of \(name) lists a malformed op id among what it owes; the file is damaged")
            }
            ids.insert(id)
            start += MessageOpID.byteCount
        }
        return ids
    }

    /// The number of messages that owe a delivery.
    public func outboxCount() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table) WHERE duty = 1") ?? 0)
    }

    /// Takes in ops delivered by a contact's device and writes a receipt for
    /// each, to send back (and kept here too, so this account's devices agree
    /// on what arrived). Receipt ids are derived from the op and this device, so
    /// a delivery that comes twice is receipted once.
    ///
    /// Receipts come back the same way. The contact's receipt of one of this
    /// account's ops is acknowledged in turn (a receipt of the receipt: the
    /// contact owes its receipt until it hears that, ``MessageFold/duty(of:for:)``);
    /// an acknowledgement gets nothing back. A receipt naming an op this store
    /// does not hold (its message was collected, or it never was ours) is not
    /// kept; it is acknowledged all the same so the contact stops owing it,
    /// unless it came as an answer (`isAnswer`), which two collected sides would
    /// otherwise answer back and forth.
    /// - Throws: ``ReplicaError`` `conversationMismatch` when this namespace is
    ///   not a conversation with `account`; `invalidRecord` when an op claims
    ///   another account than the sender's, is a delete for me (it never travels),
    ///   or is malformed (nothing changes).
    @discardableResult
    public func receive(_ record: MessageRecord, from account: AccountID, isAnswer: Bool = false) throws -> MessageRecord {
        try record.validate()
        guard try contact() == account else {
            throw ReplicaError(.conversationMismatch, "\(name) is not a conversation with \(account); its delivery of message \(record.message) is refused")
        }
        guard record.ops.allSatisfy({ $0.account == account }) else {
            throw ReplicaError(.invalidRecord, "a delivery of message \(record.message) holds ops of another account than its sender's")
        }
        guard !record.ops.contains(where: { $0.action == .delete(.me) }) else {
            throw ReplicaError(.invalidRecord, "a delivery of message \(record.message) holds a delete for me, which never leaves its account")
        }
        return try replica.operation {
            // The clock moves past what arrived, so an op written here next folds after it.
            for op in record.ops { replica.observe(HybridTimestamp(rawValue: UInt64(op.time))) }
            let time = Int64(bitPattern: replica.nextTimestamp().rawValue)
            let held = try storedOps(of: record.message)
            let heldByID = Dictionary(held.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
            var kept: [MessageOp] = []
            var answered: [MessageOp] = []
            var unkept: [MessageOp] = []
            for op in record.ops {
                guard case .receipt(let target) = op.action else {
                    kept.append(op)
                    answered.append(op)
                    continue
                }
                guard let received = heldByID[target], received.account == replica.account else {
                    if !isAnswer { unkept.append(op) }
                    continue
                }
                kept.append(op)
                // A receipt of this account's op is acknowledged; an acknowledgement is not.
                if case .receipt = received.action { continue }
                answered.append(op)
            }
            let receipt = { (op: MessageOp) in
                MessageOp(
                    id: self.receiptID(of: op.id), message: record.message, time: time, writer: self.replica.device, account: self.replica.account,
                    action: .receipt(of: op.id))
            }
            let receipts = answered.map(receipt)
            let outcome = try insert(kept + receipts, into: record.message, held: held)
            replica.emitOutcome(outcome, namespace: name, subject: .message(record.message))
            // A receipt written before (a delivery that came again) is sent as it was stored.
            let stored = receipts.map { heldByID[$0.id] ?? $0 }
            return MessageRecord(message: record.message, ops: (stored + unkept.map(receipt)).sorted { $0.id < $1.id })
        }
    }

    private func receiptID(of op: MessageOpID) -> MessageOpID {
        var bytes = Array("stele receipt v1".utf8)
        bytes += op.bytes
        bytes += replica.device.bytes
        // 16 of SHA-256's 32 bytes: the same op received twice on one device gets one
        // receipt. (32 bytes always yield 16: the fallback is never taken.)
        return (try? MessageOpID(bytes: replica.hasher.hash(bytes).bytes.prefix(MessageOpID.byteCount))) ?? op
    }

    // MARK: - Storage

    /// Stores the ops not held yet (insert-if-absent by op id), purging bodies
    /// once the message holds a delete, and refreshes the message's row and leaf.
    /// `held`: the message's stored ops, when the caller has read them already.
    private func insert(_ ops: [MessageOp], into message: String, held: [MessageOp]? = nil) throws -> MergeOutcome {
        let held = try held ?? storedOps(of: message)
        var seen = Set(held.map(\.id))
        let fresh = ops.filter { seen.insert($0.id).inserted }
        guard !fresh.isEmpty else { return MergeOutcome(.unchanged) }

        let wasDeleted = held.contains(where: \.isDelete)
        let deleted = wasDeleted || fresh.contains(where: \.isDelete)
        if deleted && !wasDeleted {
            try replica.connection.execute(
                "UPDATE \(opsTable) SET content = x'' WHERE message = ? AND action IN \(Self.textActions) AND length(content) > 0", [.text(message)])
        }
        for op in fresh { try insertOp(deleted ? op.purged : op) }

        let all = (deleted ? held.map(\.purged) : held) + fresh
        let before = try storedRow(of: message)
        guard let row = MessageFold.fold(all) else { return MergeOutcome(.recorded) }
        let leaf = replica.hasher.leaf(LeafEncoding.message(row))
        let duty = MessageFold.duty(of: all, folded: row, for: replica.account)
        let owes = !duty.isEmpty
        let owed = Self.owedBytes(duty)
        if let before, before.leaf == leaf, before.owes == owes {
            // What is owed changed within the same row (a receipt among several): the row
            // itself, and a tombstone's number, stay as they are.
            if before.owed != owed {
                try run(.updateOwed, "UPDATE \(table) SET owed = ? WHERE key = ?", [owed.map(SQLValue.blob) ?? .null, .text(message)])
            }
            return MergeOutcome(.recorded)
        }
        try run(
            .upsertRow, "INSERT OR REPLACE INTO \(table) (key, author, posted, scope, leaf, seq, duty, owed) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(message), .text(row.author), .integer(row.postedAt), .integer(Int64(row.scope.rawValue)), .blob(leaf.bytes),
                // A deleted row is a tombstone: numbered afresh whenever it changes, so an
                // ack taken before the change never vouches for it (DESIGN §6).
                row.isDeleted ? .integer(replica.nextTombstoneSequence()) : .null,
                .integer(owes ? 1 : 0),
                owed.map(SQLValue.blob) ?? .null,
            ])
        if replica.maintainsDigests, before?.leaf != leaf {
            if let before { replica.recordLeaf(declaration, key: Array(message.utf8), leaf: before.leaf, added: false) }
            replica.recordLeaf(declaration, key: Array(message.utf8), leaf: leaf, added: true)
        }
        switch (before?.scope, row.scope) {
        case (nil, .live): return MergeOutcome(.inserted)
        case (nil, _): return MergeOutcome(.recorded)
        case (.live?, .live): return MergeOutcome(.updated)
        case (.live?, _): return MergeOutcome(.deleted)
        default: return MergeOutcome(.recorded)
        }
    }

    /// The actions that carry text (SQL, from the codes).
    static let textActions = "(\(MessageOp.Action.Code.post.rawValue), \(MessageOp.Action.Code.edit.rawValue))"

    private func insertOp(_ op: MessageOp) throws {
        let action = Int64(op.action.code.rawValue)
        let (actor, content, scope): (String?, [UInt8]?, Int64?) =
            switch op.action {
            case let .post(author, body): (author, body, nil)
            case .edit(let body): (nil, body, nil)
            case .delete(let scope): (nil, nil, Int64(scope.rawValue))
            case let .react(reactor, emoji): (reactor, Array(emoji.utf8), nil)
            case .unreact(let reactor): (reactor, nil, nil)
            case .receipt(let received): (nil, received.bytes, nil)
            }
        try run(
            .insertOp, "INSERT INTO \(opsTable) (message, id, time, writer, account, action, actor, content, scope) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(op.message), .blob(op.id.bytes), .integer(op.time),
                .integer(try replica.devices.intern(op.writer, replica.connection)),
                op.account == replica.account ? .null : .blob(op.account.bytes), .integer(action),
                actor.map { .text($0) } ?? .null, content.map { .blob($0) } ?? .null, scope.map { .integer($0) } ?? .null,
            ])
    }

    private func storedRow(of message: String) throws -> (scope: DeleteScope, leaf: Leaf, owes: Bool, owed: [UInt8]?)? {
        let row = try statement(.storedRow, "SELECT scope, leaf, duty, owed FROM \(table) WHERE key = ?")
        try row.bind(1, message)
        guard try row.step() else { return nil }
        defer { row.reset() }
        guard let scope = DeleteScope(rawValue: UInt8(clamping: row.int64(0))) else {
            throw ReplicaError(.corrupt, "message \(message) of \(name) has an unknown delete scope; the file is damaged")
        }
        return (scope, try replica.storedLeaf(row.blob(1), "message \(message) of \(name)"), row.int64(2) == 1, row.optionalBlob(3))
    }

    private func storedOps(of message: String) throws -> [MessageOp] {
        let statement = try statement(.storedOps, "SELECT id, time, writer, account, action, actor, content, scope FROM \(opsTable) WHERE message = ? ORDER BY id")
        try statement.bind(1, message)
        var ops: [MessageOp] = []
        while try statement.step() { ops.append(try op(of: message, from: statement, at: 0)) }
        return ops
    }

    /// The op stored in `row`'s columns from `first` on: id, time, writer,
    /// account, action, actor, content, scope.
    private func op(of message: String, from row: Statement, at first: Int32) throws -> MessageOp {
        guard let id = try? MessageOpID(bytes: row.blob(first)) else {
            throw ReplicaError(.corrupt, "an op of message \(message) in \(name) has a malformed id; the file is damaged")
        }
        let action: MessageOp.Action
        guard let code = MessageOp.Action.Code(rawValue: UInt8(clamping: row.int64(first + 4))) else {
            throw ReplicaError(.corrupt, "an op of message \(message) in \(name) has an unknown action; the file is damaged")
        }
        switch code {
        case .post: action = .post(author: row.text(first + 5), body: row.blob(first + 6))
        case .edit: action = .edit(body: row.blob(first + 6))
        case .delete:
            guard let scope = row.optionalInt64(first + 7).flatMap({ DeleteScope(rawValue: UInt8(clamping: $0)) }), scope != .live else {
                throw ReplicaError(.corrupt, "a delete of message \(message) in \(name) has no scope; the file is damaged")
            }
            action = .delete(scope)
        case .react: action = .react(reactor: row.text(first + 5), emoji: String(decoding: row.blob(first + 6), as: UTF8.self))
        case .unreact: action = .unreact(reactor: row.text(first + 5))
        case .receipt:
            guard let received = try? MessageOpID(bytes: row.blob(first + 6)) else {
                throw ReplicaError(.corrupt, "a receipt in message \(message) of \(name) names no op; the file is damaged")
            }
            action = .receipt(of: received)
        }
        let account: AccountID
        if let bytes = row.optionalBlob(first + 3) {
            guard let stored = try? AccountID(bytes: bytes) else {
                throw ReplicaError(.corrupt, "an op of message \(message) in \(name) has a malformed account; the file is damaged")
            }
            account = stored
        } else {
            account = replica.account
        }
        return MessageOp(
            id: id, message: message, time: row.int64(first + 1), writer: try replica.deviceID(at: row.int64(first + 2)), account: account, action: action)
    }
}
