import Stele

/// Statements printed back as scenario lines: `ScenarioParser` reads every line
/// printed here as the statement it came from (a property test holds it to that),
/// so a run's transcript can be built from its statements.
extension Statement: CustomStringConvertible {
    public var description: String {
        switch self {
        case .fleet(let devices): "fleet " + devices.joined(separator: " ")
        case let .namespace(name, kind): "namespace \(name) \(kind.rawValue)"
        case .join(let device): "join \(device)"
        case .revoke(let device): "revoke \(device)"
        case let .operation(device, operation): "\(device) \(operation)"
        case .offline(let devices): "offline " + devices.joined(separator: " ")
        case .online(let devices): "online " + devices.joined(separator: " ")
        case let .partition(left, right): "partition \(left.joined(separator: " ")) / \(right.joined(separator: " "))"
        case .heal: "heal"
        case .networkLoss(let percent): "network loss \(Self.number(percent))"
        case .networkDuplicate(let percent): "network duplicate \(Self.number(percent))"
        case let .networkDelay(low, high): "network delay \(low)ms \(high)ms"
        case .sync: "sync"
        case .advance(let milliseconds): "advance \(milliseconds)ms"
        case .gc(let on): "gc \(on ? "on" : "off")"
        case let .backup(device, label): "backup \(device) as \(label)"
        case let .restore(device, label, withKeys): "restore \(device) from \(label)" + (withKeys ? " with keys" : "")
        case .crash(let device): "crash \(device)"
        case .anchor(.down): "anchor down"
        case .anchor(.up): "anchor up"
        case .anchor(.failNextWrite): "anchor fail next write"
        case .anchor(.delayNextWrite(let milliseconds)): "anchor delay next write \(milliseconds)ms"
        case let .skew(device, milliseconds): "skew \(device) \(milliseconds < 0 ? "-" : "")\(milliseconds.magnitude)ms"
        case let .storageFault(device, fault, after): "storage \(device) fail \(fault.rawValue)" + (after > 0 ? " after \(after)" : "")
        case let .contact(name, devices): "contact \(name) " + devices.joined(separator: " ")
        case let .conversation(namespace, contact): "conversation \(namespace) with \(contact)"
        case .expect(let expectation): "expect \(expectation)"
        }
    }

    /// A percentage as the parser reads it: whole numbers without a fraction.
    static func number(_ value: Double) -> String {
        value.rounded() == value && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

extension Expectation: CustomStringConvertible {
    /// The expectation as written after `expect`.
    public var description: String {
        switch self {
        case let .value(target, namespace, key, value): "\(target) \(namespace) \(key) " + (value.map { "= " + WorkloadOperation.quoted($0) } ?? "absent")
        case let .groupEmpty(target, namespace, group): "\(target) \(namespace) \(group) empty"
        case let .count(device, namespace, count): "\(device) \(namespace) count \(count)"
        case let .stored(device, namespace, group, count): "\(device) stored \(namespace) \(group) \(count)"
        case let .message(device, namespace, message, .text(text)): "\(device) message \(namespace) \(message) = \(WorkloadOperation.quoted(text))"
        case let .message(device, namespace, message, .deleted): "\(device) message \(namespace) \(message) deleted"
        case let .message(device, namespace, message, .absent): "\(device) message \(namespace) \(message) absent"
        case let .tombstones(device, namespace, count): "\(device) tombstones " + (namespace.map { "\($0) " } ?? "") + "\(count)"
        case let .generation(device, generation): "\(device) generation \(generation)"
        case let .status(device, state): "\(device) status \(state)"
        case let .gcBlockedBy(device, devices): "\(device) gc blocked by " + devices.joined(separator: " ")
        case let .conflict(device, namespace, key, raised): "\(device) \(raised ? "" : "no ")conflict \(namespace) \(key)"
        case let .refused(device, sender): "\(device) refused \(sender)"
        case let .anchorReadable(device, readable): "\(device) anchor \(readable ? "readable" : "unreadable")"
        case let .storageFailed(device, count): "\(device) storage failed \(count)"
        case let .delivered(device, namespace, message): "\(device) delivered \(namespace) \(message)"
        case let .outbox(device, namespace, count): "\(device) outbox \(namespace) \(count)"
        case .converged: "converged"
        case .resurrections(let count): "resurrections \(count)"
        case .lostWrites(let count): "lost-writes \(count)"
        }
    }
}

extension Expectation.Target: CustomStringConvertible {
    public var description: String {
        switch self {
        case .device(let name): name
        case .all: "all"
        }
    }
}
