/// Everything one device holds of one message: its ops, what reconcile ships
/// when a message's folded rows differ (DESIGN §7: the leaves are folded rows,
/// the records are ops). A device that lacks some of the ops inserts them; one
/// that has them all changes nothing.
public struct MessageRecord: Sendable, Equatable {
    public let message: String
    /// The ops, in id order.
    public let ops: [MessageOp]

    /// The most ops one message may hold: a message with more (a storm of
    /// reactions) is refused on the wire rather than let one record grow without bound.
    public static let maximumOps = 4_096
    /// The most accounts one record's ops may name (a conversation has two sides).
    public static let maximumAccounts = 8
    /// The longest emoji, in UTF-8 bytes (a family emoji with modifiers is about 30).
    public static let maximumEmojiBytes = 64

    public init(message: String, ops: [MessageOp]) {
        self.message = message
        self.ops = ops.sorted { $0.id < $1.id }
    }

    /// Checks the record's rules before anything is stored.
    /// - Throws: ``ReplicaError`` `invalidRecord` naming what is wrong.
    func validate() throws {
        do {
            try Limits.checkKey(message, "message id")
        } catch let error as ReplicaError {
            throw ReplicaError(.invalidRecord, "a message record's id is not allowed: \(error.message)")
        }
        guard ops.count <= Self.maximumOps else {
            throw ReplicaError(.invalidRecord, "message \(message) carries \(ops.count) ops; at most \(Self.maximumOps)")
        }
        for (index, op) in ops.enumerated() {
            // By bytes: `é` and `e` + U+0301 are two messages to the store, though Swift's `==` holds them equal.
            guard op.message.utf8.elementsEqual(message.utf8) else {
                throw ReplicaError(.invalidRecord, "an op of message \(op.message) arrived in the record of \(message)")
            }
            if index > 0, !(ops[index - 1].id < op.id) {
                throw ReplicaError(.invalidRecord, "message \(message) carries op \(op.id) twice or out of order")
            }
            try op.validate()
        }
    }
}

extension MessageOp {
    /// Checks one op's sizes and fields.
    /// - Throws: ``ReplicaError`` `invalidRecord` (or `limitExceeded` for a local write's body).
    func validate() throws {
        guard time >= 0 else { throw ReplicaError(.invalidRecord, "op \(id) of message \(message) has a negative time") }
        switch action {
        case .post(let author, let body):
            try Self.checkName(author, "author", op: self)
            try Limits.checkValue(body)
        case .edit(let body):
            try Limits.checkValue(body)
        case .delete(let scope):
            guard scope != .live else { throw ReplicaError(.invalidRecord, "op \(id) of message \(message) deletes with scope live") }
        case .react(let reactor, let emoji):
            try Self.checkName(reactor, "reactor", op: self)
            let bytes = emoji.utf8.count
            guard bytes > 0, bytes <= MessageRecord.maximumEmojiBytes else {
                throw ReplicaError(.invalidRecord, "a reaction is 1 to \(MessageRecord.maximumEmojiBytes) UTF-8 bytes; op \(id) has \(bytes)")
            }
        case .unreact(let reactor):
            try Self.checkName(reactor, "reactor", op: self)
        case .receipt:
            break
        }
    }

    private static func checkName(_ name: String, _ what: String, op: MessageOp) throws {
        let bytes = name.utf8.count
        guard bytes > 0, bytes <= Limits.maximumKeyBytes else {
            throw ReplicaError(.invalidRecord, "the \(what) of op \(op.id) of message \(op.message) is 1 to \(Limits.maximumKeyBytes) UTF-8 bytes; it has \(bytes)")
        }
    }
}
