import Stele

/// Random writes across the standard namespaces, on overlapping keys, so devices
/// make concurrent edits and deletes of the same rows. Every value is unique,
/// which lets the oracle tell which write a device shows.
public struct Workload: Sendable {
    /// The namespaces the workload writes to, one of each replicated kind.
    public static let namespaces: [(name: String, kind: NamespaceKind)] = [
        ("notes", .causal), ("flags", .lww), ("memory", .log), ("sealed", .appendOnly),
    ]

    public var keys: Int
    private var counter = 0
    /// Groups buried so far. The workload never appends to one again: a marker
    /// buries the group's future events only while it is held, and once the
    /// barrier collects it the same name would start a new group (ARCHITECTURE,
    /// "Collecting log markers"), which is not the story the oracle checks.
    private var buried: Set<String> = []

    public init(keys: Int = 40) { self.keys = keys }

    /// The next write.
    public mutating func next(_ random: inout SplitMix) -> WorkloadOperation {
        counter += 1
        let key = "k\(random.next() % UInt64(keys))"
        let value = "v\(counter)"
        switch random.next() % 20 {
        case 0..<8: return .put(namespace: "notes", key: key, value: value)
        case 8..<11: return .delete(namespace: "notes", key: key)
        case 11, 12: return .put(namespace: "flags", key: key, value: value)
        case 13: return .delete(namespace: "flags", key: key)
        case 14, 15, 16:
            let group = "g\(random.next() % UInt64(max(1, keys / 4)))"
            return .append(namespace: "memory", group: buried.contains(group) ? "\(group)-\(counter)" : group, value: value)
        case 17:
            let group = "g\(random.next() % UInt64(max(1, keys / 4)))"
            buried.insert(group)
            return .bury(namespace: "memory", group: group)
        default: return .put(namespace: "sealed", key: key, value: value)
        }
    }
}
