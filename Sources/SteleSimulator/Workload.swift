import Stele

/// Random writes across the standard namespaces, on overlapping keys, so devices
/// make concurrent edits and deletes of the same rows. Every value is unique,
/// which lets the oracle tell which write a device shows.
public struct Workload: Sendable {
    /// The namespaces the workload writes to, one of each replicated kind.
    public static let namespaces: [(name: String, kind: NamespaceKind)] = [
        ("notes", .causal), ("flags", .lww), ("memory", .log), ("sealed", .appendOnly), ("chat", .messages),
    ]

    public var keys: Int
    private var counter = 0
    /// Groups buried so far. The workload never appends to one again: a marker
    /// buries the group's future events only while it is held, and once the
    /// barrier collects it the same name starts a new group. The oracle judges
    /// that story (``Oracle/markersAtAppend``) in the scenarios that tell it
    /// (`000-a-group-name-used-again-*`, `001-a-*-marker*`), but a long run can
    /// hold a marker where the oracle cannot yet tell whether it will meet the
    /// event (seed 1061 of --steps 3000, with names used again): the sweeps keep
    /// to fresh names until it can.
    private var buried: Set<String> = []
    /// Messages posted so far: edits, deletes and reactions pick among them (a
    /// device that has not received one yet is refused, as an app would be).
    private var posted: [String] = []
    /// Messages the contact's devices posted: only they edit them; this
    /// account's devices react to them but never delete them (a contact's
    /// deleted message is a tombstone no barrier collects, which would fail G4).
    private var contactPosted: [String] = []

    public init(keys: Int = 40) { self.keys = keys }

    /// The next write.
    package mutating func next(_ random: inout SplitMix64) -> WorkloadOperation {
        counter += 1
        let key = "k\(random.next() % UInt64(keys))"
        let value = "v\(counter)"
        switch random.next() % 24 {
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
        case 18, 19: return .put(namespace: "sealed", key: key, value: value)
        case 20:
            posted.append("m\(counter)")
            return .post(namespace: "chat", message: "m\(counter)", text: value)
        default:
            guard !posted.isEmpty else {
                posted.append("m\(counter)")
                return .post(namespace: "chat", message: "m\(counter)", text: value)
            }
            // Recent messages are the busy ones.
            let message = posted[posted.count - 1 - Int(random.next() % UInt64(min(posted.count, keys / 2)))]
            switch random.next() % 8 {
            case 0, 1, 2: return .edit(namespace: "chat", message: message, text: value)
            case 3: return .unsend(namespace: "chat", message: message, scope: random.next() % 2 == 0 ? .me : .everyone)
            case 4, 5:
                return .react(namespace: "chat", message: message, emoji: ["👍", "❤️", "😂"][Int(random.next() % 3)])
            case 6:
                let target = contactPosted.isEmpty ? message : contactPosted[contactPosted.count - 1 - Int(random.next() % UInt64(min(contactPosted.count, 4)))]
                return .react(namespace: "chat", message: target, emoji: "🎉")
            default: return .unreact(namespace: "chat", message: message, emoji: "-")
            }
        }
    }

    /// The next write of a contact's device in the conversation "chat": posts,
    /// edits of its own account's posts, reactions to anyone's.
    package mutating func nextForContact(_ random: inout SplitMix64) -> WorkloadOperation {
        counter += 1
        let value = "v\(counter)"
        guard !contactPosted.isEmpty, random.next() % 3 != 0 else {
            contactPosted.append("c\(counter)")
            return .post(namespace: "chat", message: "c\(counter)", text: value)
        }
        let own = contactPosted[contactPosted.count - 1 - Int(random.next() % UInt64(min(contactPosted.count, 4)))]
        switch random.next() % 4 {
        case 0: return .edit(namespace: "chat", message: own, text: value)
        case 1: return .unreact(namespace: "chat", message: own, emoji: "-")
        default:
            let target = posted.isEmpty || random.next() % 2 == 0 ? own : posted[posted.count - 1 - Int(random.next() % UInt64(min(posted.count, 4)))]
            return .react(namespace: "chat", message: target, emoji: "👀")
        }
    }
}
