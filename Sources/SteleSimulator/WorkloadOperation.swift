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

    /// The operation as a scenario writes it after the device's name.
    public var description: String {
        switch self {
        case let .put(namespace, key, value): "put \(namespace) \(key) \(Self.quoted(value))"
        case let .delete(namespace, key): "delete \(namespace) \(key)"
        case let .append(namespace, group, value): "append \(namespace) \(group) \(Self.quoted(value))"
        case let .bury(namespace, group): "bury \(namespace) \(group)"
        case let .post(namespace, message, text): "post \(namespace) \(message) \(Self.quoted(text))"
        case let .edit(namespace, message, text): "edit \(namespace) \(message) \(Self.quoted(text))"
        case let .unsend(namespace, message, scope): "unsend \(namespace) \(message) \(scope == .everyone ? "everyone" : "me")"
        case let .react(namespace, message, emoji): "react \(namespace) \(message) \(emoji)"
        case let .unreact(namespace, message, emoji): "unreact \(namespace) \(message) \(emoji)"
        }
    }

    /// A value in scenario quotes, with `\"` and `\\` escaped.
    static func quoted(_ value: String) -> String {
        "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    var hashValueStable: Int { description.hashValueStable }
}
