/// One event of a `log` namespace: an ordinary event of a group, or a tombstone
/// marker that buries the whole group (000 §2: "a tombstone is an ordinary row
/// whose meaning is: the thing named here is gone").
public struct LogEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// An event with its body.
        case event(body: [UInt8])
        /// A tombstone: buries every event of the group, past and future.
        case marker
    }

    public let id: EventID
    /// The group the event belongs to (a conversation, say); a marker names the group it buries.
    public let group: String
    public let kind: Kind
    public let stamp: WriteStamp

    public init(id: EventID, group: String, kind: Kind, stamp: WriteStamp) {
        self.id = id
        self.group = group
        self.kind = kind
        self.stamp = stamp
    }

    public var isMarker: Bool { kind == .marker }

    /// The body of an ordinary event (empty for a marker).
    public var body: [UInt8] {
        if case .event(let body) = kind { return body }
        return []
    }

    /// How errors name the record (built only when an error is).
    private var label: String { "log event \(id)" }

    func validate() throws {
        do {
            try Limits.checkKey(group, "group")
            try Limits.checkValue(body)
        } catch let error as ReplicaError {
            throw ReplicaError(.invalidRecord, "\(label): \(error.message)")
        }
        try stamp.validate(label)
    }
}
