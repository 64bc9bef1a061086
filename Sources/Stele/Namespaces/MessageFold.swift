/// Messages are event-sourced (000 §6, DESIGN §7): immutable ops, and a
/// message's row is the fold of its ops in (opTime, opID) order, never arrival
/// order. This file holds the ops, the folded row and the fold itself, as pure
/// values; storing ops and replicating them is the `messages` namespace's part.

/// 16 bytes naming one op. Ops with the same time fold in the byte order of their ids.
public struct MessageOpID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let byteCount = 16

    /// The bytes as two big-endian words, so comparing words compares bytes. Ids
    /// are hashed, compared and copied in every fold and every outbox (issue 22):
    /// two words cost no allocation and no reference count.
    private let high: UInt64
    private let low: UInt64

    /// - Throws: ``CodecError`` unless `bytes` holds exactly 16 bytes.
    public init(bytes: some Collection<UInt8>) throws {
        try self.init(bytes: Array(bytes)[...])
    }

    /// An id from an array's bytes, read in place.
    /// - Throws: ``CodecError`` unless `bytes` holds exactly 16 bytes.
    public init(bytes: [UInt8]) throws {
        try self.init(bytes: bytes[...])
    }

    /// An id from a slice's bytes (a frame's, a row's list of ids), read in place:
    /// not generic, so that a caller in another file of a build without whole-module
    /// optimization (the one `scripts/test` sweeps with) does not go through
    /// `Collection`'s witnesses for every id of every op it reads.
    /// - Throws: ``CodecError`` unless `bytes` holds exactly 16 bytes.
    public init(bytes: ArraySlice<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw CodecError(.valueOutOfRange, "a message op id is \(Self.byteCount) bytes, got \(bytes.count)")
        }
        (high, low) = bytes.withUnsafeBytes(Self.words)
    }

    /// A fresh id from `generator`.
    public static func generate<Generator: RandomNumberGenerator>(using generator: inout Generator) -> MessageOpID {
        MessageOpID(words: generator.bytes(byteCount).withUnsafeBytes(Self.words))
    }

    private init(words: (high: UInt64, low: UInt64)) { (high, low) = words }

    /// The two big-endian words of 16 bytes.
    private static func words(_ raw: UnsafeRawBufferPointer) -> (high: UInt64, low: UInt64) {
        (UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)), UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
    }

    /// The 16 bytes.
    public var bytes: [UInt8] {
        withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { Array($0) }
    }

    /// 000 §6: a same-millisecond tie is broken byte-lexicographically.
    public static func < (lhs: MessageOpID, rhs: MessageOpID) -> Bool { (lhs.high, lhs.low) < (rhs.high, rhs.low) }

    public var description: String { Hex.encode(bytes.prefix(4)) }
}

/// How far a message is deleted: everyone (2) > me (1) > live (0); the stronger wins (000 §6).
public enum DeleteScope: UInt8, Comparable, Sendable {
    case live = 0
    case me = 1
    case everyone = 2

    public static func < (lhs: DeleteScope, rhs: DeleteScope) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One immutable op on one message.
public struct MessageOp: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// The message itself: who wrote it and what.
        case post(author: String, body: [UInt8])
        case edit(body: [UInt8])
        /// Delete for me (`.me`, to this account's devices only) or for everyone.
        case delete(DeleteScope)
        case react(reactor: String, emoji: String)
        case unreact(reactor: String)
        /// The other side of a conversation received op `of` (a delivery receipt).
        case receipt(of: MessageOpID)

        /// The one number each action has, on the wire, in the store and in its
        /// schema's `CHECK`: never renumber one.
        public enum Code: UInt8, Sendable, CaseIterable {
            case post = 0, edit, delete, react, unreact, receipt
        }

        public var code: Code {
            switch self {
            case .post: .post
            case .edit: .edit
            case .delete: .delete
            case .react: .react
            case .unreact: .unreact
            case .receipt: .receipt
            }
        }
    }

    public let id: MessageOpID
    public let message: String
    /// The op time: the writing device's hybrid timestamp
    /// (``HybridTimestamp/rawValue``), so one device's ops never tie and a wall
    /// clock set back does not reorder them. With the id, the order the fold takes.
    public let time: Int64
    /// The device that wrote the op. The fold never looks at it; recovery does
    /// (``Knowledge``: what a fleet had seen of each device's writes).
    public let writer: DeviceID
    /// The account whose device wrote the op: this account's (outbound) or a
    /// contact's (inbound). What a device must deliver follows from it.
    public let account: AccountID
    public let action: Action

    public init(id: MessageOpID, message: String, time: Int64, writer: DeviceID, account: AccountID, action: Action) {
        self.id = id
        self.message = message
        self.time = time
        self.writer = writer
        self.account = account
        self.action = action
    }

    /// Whether the op is a delete, of either scope.
    public var isDelete: Bool { if case .delete = action { true } else { false } }

    /// Whether the op carries text of the message (a post or an edit): what a
    /// delete erases, and what must never reach the other side after it.
    public var carriesText: Bool {
        switch action {
        case .post, .edit: true
        case .delete, .react, .unreact, .receipt: false
        }
    }

    /// Whether this op folds before `other`: (opTime, opID).
    public func precedes(_ other: MessageOp) -> Bool { (time, id) < (other.time, other.id) }

    /// The op with its body removed: what a delete leaves of a post or an edit.
    public var purged: MessageOp {
        switch action {
        case .post(let author, _): MessageOp(id: id, message: message, time: time, writer: writer, account: account, action: .post(author: author, body: []))
        case .edit: MessageOp(id: id, message: message, time: time, writer: writer, account: account, action: .edit(body: []))
        case .delete, .react, .unreact, .receipt: self
        }
    }
}

/// A reactor's register (000 §5): the latest reaction or removal.
public struct Reaction: Sendable, Equatable {
    /// `nil` for a removal.
    public let emoji: String?
    public let time: Int64


    /// The register's total order: newer wins; on a tie a removal beats a
    /// reaction; then the larger emoji.
    public func beats(_ other: Reaction) -> Bool {
        if time != other.time { return time > other.time }
        switch (emoji, other.emoji) {
        case (nil, nil): return false
        case (nil, _): return true
        case (_, nil): return false
        case let (mine?, theirs?): return theirs.utf8.lexicographicallyPrecedes(mine.utf8)
        }
    }
}

/// A message as its ops fold: what reads show and what the digest hashes.
public struct MessageRow: Sendable, Equatable {
    public let message: String
    public let author: String
    public let postedAt: Int64
    public fileprivate(set) var body: [UInt8]
    /// The winning edit, `nil` before any edit and on a deleted row.
    public fileprivate(set) var editedAt: Int64?
    public fileprivate(set) var editOp: MessageOpID?
    public fileprivate(set) var scope: DeleteScope = .live
    /// Each reactor's register; empty on a deleted row.
    public fileprivate(set) var reactions: [String: Reaction] = [:]
    /// The ops of this message the other side has receipted (whatever order the
    /// receipts and the ops came in).
    public fileprivate(set) var receipted: Set<MessageOpID> = []
    /// The receipt ops among the message's ops.
    public fileprivate(set) var receipts: Set<MessageOpID> = []
    /// The post's id: its receipt is what "delivered" means.
    public let postOp: MessageOpID
    /// The account that wrote the post: only it edits the message or deletes it for everyone.
    public let authorAccount: AccountID
    /// The deletes for everyone among the ops (one, or a few made concurrently).
    public fileprivate(set) var recalls: [MessageOpID] = []

    public var isDeleted: Bool { scope != .live }

    /// Whether the other side has the message.
    public var isDelivered: Bool { receipted.contains(postOp) }

    /// Whether the other side has a delete for everyone of it.
    public var isRecallDelivered: Bool { recalls.contains { receipted.contains($0) } }

    /// The receipts the other side has acknowledged (receipted in turn), in id order.
    public var acknowledgedReceipts: [MessageOpID] { receipts.intersection(receipted).sorted() }

    /// The reactions shown: reactor → emoji.
    public var shownReactions: [String: String] { reactions.compactMapValues(\.emoji) }

    /// The canonical bytes the digest hashes (000 §6). A deleted row is identity
    /// and scope only, so a device that saw edit-then-delete and one that saw
    /// only the delete hash alike; beyond the seed, with the delivery facts the
    /// outbox duty follows from (delivered, recall delivered, the receipts the
    /// other side acknowledged), so devices that disagree on them differ and
    /// reconcile the receipts.
    public var leaf: [UInt8] {
        var writer = ByteWriter(capacity: 64 + body.count)
        for text in [message, author] {
            writer.appendVarint(UInt64(text.utf8.count))
            writer.append(text.utf8)
        }
        writer.appendBigEndian(UInt64(bitPattern: postedAt))
        writer.append(authorAccount.bytes)
        writer.append(scope.rawValue)
        guard scope == .live else {
            let acknowledged = acknowledgedReceipts
            writer.append((isDelivered ? 1 : 0) | (isRecallDelivered ? 2 : 0) | (acknowledged.isEmpty ? 0 : 4))
            if !acknowledged.isEmpty {
                writer.appendVarint(UInt64(acknowledged.count))
                for id in acknowledged { writer.append(id.bytes) }
            }
            return writer.bytes
        }
        writer.appendVarint(UInt64(body.count))
        writer.append(body)
        if let editedAt, let editOp {
            writer.append(1)
            writer.appendBigEndian(UInt64(bitPattern: editedAt))
            writer.append(editOp.bytes)
        } else {
            writer.append(0)
        }
        writer.appendVarint(UInt64(reactions.count))
        for (reactor, reaction) in reactions.sorted(by: { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }) {
            writer.appendVarint(UInt64(reactor.utf8.count))
            writer.append(reactor.utf8)
            writer.appendBigEndian(UInt64(bitPattern: reaction.time))
            let emoji = reaction.emoji.map { Array($0.utf8) }
            writer.append(emoji == nil ? 0 : 1)
            writer.appendVarint(UInt64(emoji?.count ?? 0))
            writer.append(emoji ?? [])
        }
        writer.appendVarint(UInt64(receipted.count))
        for id in receipted.sorted() { writer.append(id.bytes) }
        return writer.bytes
    }
}

/// The fold (000 §6).
public enum MessageFold {
    /// The row `ops` fold to, whatever order they come in; `nil` while no post of
    /// the message is among them (its other ops wait as orphans). Ops of another
    /// message than the post's are ignored.
    public static func fold(_ ops: some Sequence<MessageOp>) -> MessageRow? {
        fold(Array(ops))
    }

    /// The fold of an array of ops: what the namespace calls on every read and
    /// every insert, not generic, so that it is specialized wherever it is called
    /// from (issue 22: the generic sort cost 4 % of a simulated run).
    public static func fold(_ ops: [MessageOp]) -> MessageRow? {
        let ordered = ops.sorted { $0.precedes($1) }
        // The earliest post is the message; a later one with the same id changes nothing.
        guard let post = ordered.first(where: { if case .post = $0.action { true } else { false } }),
            case let .post(author, body) = post.action
        else { return nil }
        var row = MessageRow(message: post.message, author: author, postedAt: post.time, body: body, postOp: post.id, authorAccount: post.account)
        for op in ordered where op.message.utf8.elementsEqual(post.message.utf8) && op.id != post.id {
            apply(op, to: &row)
        }
        return row
    }

    /// The outbox duty (000 §6 "reconcileOutboxDuty"): the ops of `account` that
    /// a device of that account must still deliver to the other side, derived
    /// from the ops alone, so every device that holds the same ops owes the same.
    ///
    /// - A message not yet delivered and deleted (either scope) owes nothing: the
    ///   recall rides the same convergence as the delete, and the other side
    ///   never learns it existed.
    /// - A delivered message deleted for everyone owes only its delete.
    /// - A delivered message deleted for me owes nothing more (a delete for me
    ///   reaches this account's devices only, and the text to edit is erased).
    /// - A live message owes every op of `account` not receipted: its post (with
    ///   the current text), edits, reactions. Deletes for me never travel.
    /// - Whatever the scope, a receipt of `account` for one of the other side's
    ///   ops is owed until the other side acknowledges a receipt of that op (its
    ///   receipt of the receipt): until then it delivers the op again whenever it
    ///   has not heard, and a row collected here would let that retry bring the
    ///   message back. Acknowledgements themselves are never owed.
    public static func duty(of ops: [MessageOp], for account: AccountID) -> [MessageOp] {
        guard let row = fold(ops) else { return [] }
        return duty(of: ops, folded: row, for: account)
    }

    /// ``duty(of:for:)`` with the ops' fold already made.
    static func duty(of ops: [MessageOp], folded row: MessageRow, for account: AccountID) -> [MessageOp] {
        let mine = ops.filter { $0.account == account && !row.receipted.contains($0.id) }
        let owed: [MessageOp]
        switch row.scope {
        case .everyone:
            owed = row.isDelivered && !row.isRecallDelivered ? mine.filter { $0.action == .delete(.everyone) } : []
        case .me:
            owed = []
        case .live:
            owed = mine.filter { op in
                switch op.action {
                case .post, .edit, .react, .unreact: true
                case .delete, .receipt: false
                }
            }
        }
        return (owed + unacknowledgedReceipts(of: ops, folded: row, for: account)).sorted { $0.id < $1.id }
    }

    /// The receipts of `account` for the other side's ops (not its receipts)
    /// whose op no acknowledgement of the other side covers yet.
    private static func unacknowledgedReceipts(of ops: [MessageOp], folded row: MessageRow, for account: AccountID) -> [MessageOp] {
        let byID = Dictionary(ops.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var receiptsOf: [MessageOpID: [MessageOp]] = [:]
        for op in ops where op.account == account {
            guard case .receipt(let target) = op.action, let received = byID[target], received.account != account else { continue }
            // Our receipt of their receipt is an acknowledgement: never owed.
            if case .receipt = received.action { continue }
            receiptsOf[target, default: []].append(op)
        }
        return receiptsOf.values.filter { receipts in !receipts.contains { row.receipted.contains($0.id) } }.flatMap { $0 }
    }

    static func apply(_ op: MessageOp, to row: inout MessageRow) {
        switch op.action {
        case .post:
            return
        case .edit(let body):
            // Any delete is absorbing: no later edit applies. Only the author's account edits.
            guard row.scope == .live, op.account == row.authorAccount else { return }
            if let editedAt = row.editedAt, let editOp = row.editOp, (op.time, op.id) < (editedAt, editOp) { return }
            row.body = body
            row.editedAt = op.time
            row.editOp = op.id
        case .delete(let scope):
            // Only the author's account deletes for everyone (a contact's copy is
            // theirs to delete for themselves). Every delete for everyone is a
            // recall to deliver, a weaker-or-equal one too.
            if scope == .everyone {
                guard op.account == row.authorAccount else { return }
                row.recalls.append(op.id)
            }
            guard scope > row.scope else { return }
            row.scope = scope
            // Canonical: edit fields and reactions cleared (000 §6). 000 §6 purges
            // the body for everyone; beyond the seed a delete for me purges it too,
            // on this account's devices (the only ones it reaches): the message is
            // never shown again, so keeping its text would only be a copy to leak.
            row.editedAt = nil
            row.editOp = nil
            row.reactions = [:]
            row.body = []
        case let .react(reactor, emoji):
            register(Reaction(emoji: emoji, time: op.time), for: reactor, in: &row)
        case .unreact(let reactor):
            register(Reaction(emoji: nil, time: op.time), for: reactor, in: &row)
        case .receipt(let received):
            row.receipted.insert(received)
            row.receipts.insert(op.id)
        }
    }

    private static func register(_ reaction: Reaction, for reactor: String, in row: inout MessageRow) {
        guard row.scope == .live else { return }
        if let current = row.reactions[reactor], !reaction.beats(current) { return }
        row.reactions[reactor] = reaction
    }
}

/// The ops one device holds for one message: insert-if-absent by op id, folded
/// on demand. A delete purges the body of every post and edit held, and of any
/// that arrives later (000 §6: "the content is gone"; for a delete for me, beyond
/// the seed, on this account's devices).
public struct MessageHistory: Sendable, Equatable {
    public let message: String
    public private(set) var ops: [MessageOpID: MessageOp] = [:]

    public init(message: String) { self.message = message }

    /// Whether a delete (of either scope) is among the ops.
    public var isDeleted: Bool { ops.values.contains { $0.isDelete } }

    /// Stores `op` unless it is held already or belongs to another message.
    /// - Returns: whether anything was stored.
    @discardableResult
    public mutating func insert(_ op: MessageOp) -> Bool {
        guard op.message.utf8.elementsEqual(message.utf8), ops[op.id] == nil else { return false }
        if op.isDelete {
            ops = ops.mapValues(\.purged)
            ops[op.id] = op
        } else {
            ops[op.id] = isDeleted ? op.purged : op
        }
        return true
    }

    /// The folded row, or `nil` while the post has not arrived.
    public var row: MessageRow? { MessageFold.fold(ops.values) }
}
