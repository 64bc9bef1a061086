import Stele

/// One write the workload (or a scenario) asks a device to make.
public enum WorkloadOperation: Sendable, Equatable, CustomStringConvertible {
    /// An upsert in a `causal`, `lww` or `appendOnly` namespace.
    case put(namespace: String, key: String, value: String)
    case delete(namespace: String, key: String)
    /// A new event in a group of a `log` namespace.
    case append(namespace: String, group: String, value: String)
    /// A tombstone for a group of a `log` namespace.
    case bury(namespace: String, group: String)
    /// Messages (`messages` namespace): the device's name is the author and the reactor.
    case post(namespace: String, message: String, text: String)
    case edit(namespace: String, message: String, text: String)
    case unsend(namespace: String, message: String, scope: DeleteScope)
    case react(namespace: String, message: String, emoji: String)
    case unreact(namespace: String, message: String, emoji: String)

    var isDelete: Bool {
        switch self {
        case .delete, .bury, .unsend: true
        case .put, .append, .post, .edit, .react, .unreact: false
        }
    }

    /// The operation as a scenario writes it after the device's name (the
    /// ``ScenarioGrammar`` row of `D put NS KEY VALUE` and its siblings prints it).
    public var description: String { ScenarioGrammar.standard.line(for: .operation(device: "", self), from: 1) }

    var hashValueStable: Int { description.hashValueStable }

    // MARK: - Writing

    /// What a write did, with what the oracle records of it (the causal
    /// timestamp and vector it reads back itself).
    public enum Written: Sendable {
        /// Nothing to record: a `local` write, a delete of nothing, a write that kind cannot take.
        case nothing
        case causalPut(namespace: String, key: String, value: [UInt8], dot: Dot)
        case causalDelete(namespace: String, key: String)
        case lww(namespace: String, key: String, value: [UInt8]?, stamp: WriteStamp)
        case appendOnly(namespace: String, key: String, value: [UInt8], stamp: WriteStamp)
        case append(namespace: String, group: String, id: EventID)
        case bury(namespace: String, group: String, marker: EventID)
        case message(namespace: String, message: String, op: MessageOp)

        /// The namespace and the key (group, message) written.
        var place: (namespace: String, key: String) {
            switch self {
            case .nothing: ("", "")
            case let .causalPut(namespace, key, _, _), let .causalDelete(namespace, key), let .lww(namespace, key, _, _),
                let .appendOnly(namespace, key, _, _), let .append(namespace, key, _), let .bury(namespace, key, _), let .message(namespace, key, _):
                (namespace, key)
            }
        }
    }

    /// The refusals of the rules: a write that happens nowhere (a second
    /// appendOnly write, an append to a buried group, a message that is not there).
    public static let refusals: Set<ReplicaError.Code> = [.appendOnlyIsFinal, .groupBuried, .messageExists, .messageMissing, .messageDeleted]

    /// Makes the write on `replica`, with `author` as the messages' author and reactor:
    /// the oracle records what it returns; `sim.throughput`'s baseline makes the
    /// same writes with no simulator around them.
    /// - Throws: ``ReplicaError`` (a refusal of the rules among them, ``refusals``) or storage errors.
    public func write(on replica: Replica, author: String) throws -> Written {
        switch self {
        case let .put(namespace, key, value):
            let bytes = Array(value.utf8)
            switch try replica.declaration(of: namespace).kind {
            case .causal: return .causalPut(namespace: namespace, key: key, value: bytes, dot: try replica.causal(namespace).put(key, bytes))
            case .lww: return .lww(namespace: namespace, key: key, value: bytes, stamp: try replica.lww(namespace).put(key, bytes))
            case .appendOnly: return .appendOnly(namespace: namespace, key: key, value: bytes, stamp: try replica.appendOnly(namespace).put(key, bytes))
            case .local:
                try replica.local(namespace).put(key, bytes)
                return .nothing
            case .log: return .append(namespace: namespace, group: key, id: try replica.log(namespace).append(group: key, body: bytes))
            case .messages: return .nothing
            }
        case let .delete(namespace, key):
            switch try replica.declaration(of: namespace).kind {
            case .causal: return try replica.causal(namespace).delete(key) == nil ? .nothing : .causalDelete(namespace: namespace, key: key)
            case .lww: return try replica.lww(namespace).delete(key).map { .lww(namespace: namespace, key: key, value: nil, stamp: $0) } ?? .nothing
            case .log: return try replica.log(namespace).bury(key).map { .bury(namespace: namespace, group: key, marker: $0) } ?? .nothing
            case .local:
                try replica.local(namespace).delete(key)
                return .nothing
            case .appendOnly, .messages: return .nothing
            }
        case let .append(namespace, group, value):
            return .append(namespace: namespace, group: group, id: try replica.log(namespace).append(group: group, body: Array(value.utf8)))
        case let .bury(namespace, group):
            return try replica.log(namespace).bury(group).map { .bury(namespace: namespace, group: group, marker: $0) } ?? .nothing
        case let .post(namespace, message, text):
            return .message(namespace: namespace, message: message, op: try replica.messages(namespace).post(message, body: Array(text.utf8), author: author))
        case let .edit(namespace, message, text):
            return .message(namespace: namespace, message: message, op: try replica.messages(namespace).edit(message, body: Array(text.utf8)))
        case let .unsend(namespace, message, scope):
            return try replica.messages(namespace).unsend(message, scope: scope).map { .message(namespace: namespace, message: message, op: $0) } ?? .nothing
        case let .react(namespace, message, emoji):
            return .message(namespace: namespace, message: message, op: try replica.messages(namespace).react(message, emoji: emoji, as: author))
        case let .unreact(namespace, message, _):
            return .message(namespace: namespace, message: message, op: try replica.messages(namespace).unreact(message, as: author))
        }
    }
}
