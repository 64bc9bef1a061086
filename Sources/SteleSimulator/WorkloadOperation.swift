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
}
