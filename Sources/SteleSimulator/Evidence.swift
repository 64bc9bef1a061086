import Stele

/// Where the oracle looks for traces of a write: a device's store, or the
/// records a frame in flight carries.
protocol Evidence {
    func causal(_ namespace: String, _ key: String) -> CausalRecord?
    func lww(_ namespace: String, _ key: String) -> LWWRecord?
    func appendOnly(_ namespace: String, _ key: String) -> AppendOnlyRecord?
    func hasEvent(_ namespace: String, _ id: EventID) -> Bool
    func isBuried(_ namespace: String, _ group: String) -> Bool
    /// The ids of the ops held of a message, `nil` when none are.
    func messageOps(_ namespace: String, _ message: String) -> Set<MessageOpID>?
    /// Whether this is all of a fleet's content (an anchor's snapshot), where a
    /// missing row was deleted and its tombstone collected, rather than unknown.
    var isComplete: Bool { get }
}

extension Evidence {
    var isComplete: Bool { false }
}

/// A device's store as evidence (read with faults held back by the caller).
/// Each lookup is read from the store once and remembered: the oracle asks
/// about every operation it tracks, many of them of the same key, and holds one
/// of these only while the store cannot change (one judgement, faults held back).
final class StoreEvidence: Evidence {
    private struct Key: Hashable {
        let namespace: String
        let key: String
    }

    let replica: Replica
    private var causalRecords: [Key: CausalRecord?] = [:]
    private var lwwRecords: [Key: LWWRecord?] = [:]
    private var appendOnlyRecords: [Key: AppendOnlyRecord?] = [:]
    private var buried: [Key: Bool] = [:]
    private var messages: [Key: Set<MessageOpID>?] = [:]
    private struct EventKey: Hashable {
        let namespace: String
        let id: EventID
    }
    /// Asked again and again of a bury's marker: once for every event of its group.
    private var events: [EventKey: Bool] = [:]

    init(replica: Replica) {
        self.replica = replica
    }

    private static func remembered<T>(_ cache: inout [Key: T], _ key: Key, _ read: () -> T) -> T {
        if let known = cache[key] { return known }
        let value = read()
        cache[key] = value
        return value
    }

    func causal(_ namespace: String, _ key: String) -> CausalRecord? {
        Self.remembered(&causalRecords, Key(namespace: namespace, key: key)) { (try? replica.causal(namespace).record(key)) ?? nil }
    }
    func lww(_ namespace: String, _ key: String) -> LWWRecord? {
        Self.remembered(&lwwRecords, Key(namespace: namespace, key: key)) { (try? replica.lww(namespace).record(key)) ?? nil }
    }
    func appendOnly(_ namespace: String, _ key: String) -> AppendOnlyRecord? {
        Self.remembered(&appendOnlyRecords, Key(namespace: namespace, key: key)) { (try? replica.appendOnly(namespace).record(key)) ?? nil }
    }
    func hasEvent(_ namespace: String, _ id: EventID) -> Bool {
        let key = EventKey(namespace: namespace, id: id)
        if let known = events[key] { return known }
        let held = ((try? replica.log(namespace).event(id)) ?? nil) != nil
        events[key] = held
        return held
    }
    func isBuried(_ namespace: String, _ group: String) -> Bool {
        Self.remembered(&buried, Key(namespace: namespace, key: group)) { (try? replica.log(namespace).isBuried(group)) ?? false }
    }
    func messageOps(_ namespace: String, _ message: String) -> Set<MessageOpID>? {
        Self.remembered(&messages, Key(namespace: namespace, key: message)) {
            guard let ops = try? replica.messages(namespace).ops(of: message), !ops.isEmpty else { return nil }
            return Set(ops.map(\.id))
        }
    }
}

/// An anchor's snapshot as evidence: the live content the fleet agreed on when
/// it collected, complete (a row it lacks was deleted, its tombstone collected).
struct SnapshotEvidence: Evidence {
    private var records = FrameEvidence([])

    init(_ snapshot: Snapshot) {
        for namespace in snapshot.namespaces { records.add(namespace.records, in: namespace.namespace) }
    }

    var isComplete: Bool { true }

    func causal(_ namespace: String, _ key: String) -> CausalRecord? { records.causal(namespace, key) }
    func lww(_ namespace: String, _ key: String) -> LWWRecord? { records.lww(namespace, key) }
    func appendOnly(_ namespace: String, _ key: String) -> AppendOnlyRecord? { records.appendOnly(namespace, key) }
    func hasEvent(_ namespace: String, _ id: EventID) -> Bool { records.hasEvent(namespace, id) }
    func isBuried(_ namespace: String, _ group: String) -> Bool { records.isBuried(namespace, group) }
    func messageOps(_ namespace: String, _ message: String) -> Set<MessageOpID>? { records.messageOps(namespace, message) }
}

/// The records of one frame in flight as evidence: what it would hand its
/// receiver. A frame that does not decode carries nothing.
struct FrameEvidence: Evidence {
    private var causalRecords: [String: CausalRecord] = [:]
    private var lwwRecords: [String: LWWRecord] = [:]
    private var appendOnlyRecords: [String: AppendOnlyRecord] = [:]
    private var events: Set<String> = []
    private var buried: Set<String> = []
    private var messages: [String: Set<MessageOpID>] = [:]

    /// - Parameters:
    ///   - account: the account, and `keys` its account keys: a sibling's
    ///     snapshot in flight carries records too (sealed with one of them).
    init(_ bytes: [UInt8], account: AccountID? = nil, keys: [AccountKey] = []) {
        guard !bytes.isEmpty, let frame = try? FrameCodec.decode(bytes) else { return }
        switch frame {
        case .reconcile(let message):
            add((message.tombstones ?? []) + message.records, in: message.namespace)
        case .snapshot(let sealed):
            guard let account, let snapshot = try? sealed.open(account: account, keys: keys) else { return }
            for namespace in snapshot.namespaces { add((namespace.tombstones ?? []) + namespace.records, in: namespace.namespace) }
        default:
            return
        }
    }

    mutating func add(_ records: [WireRecord], in namespace: String) {
        for record in records {
            switch record {
            case .causal(let record): causalRecords["\(namespace)/\(record.key)"] = record
            case .lww(let record): lwwRecords["\(namespace)/\(record.key)"] = record
            case .appendOnly(let record): appendOnlyRecords["\(namespace)/\(record.key)"] = record
            case .event(let event):
                events.insert("\(namespace)/\(event.id)")
                if event.isMarker { buried.insert("\(namespace)/\(event.group)") }
            case .message(let record): messages["\(namespace)/\(record.message)", default: []].formUnion(record.ops.map(\.id))
            }
        }
    }

    var isEmpty: Bool { causalRecords.isEmpty && lwwRecords.isEmpty && appendOnlyRecords.isEmpty && events.isEmpty && messages.isEmpty }

    func causal(_ namespace: String, _ key: String) -> CausalRecord? { causalRecords["\(namespace)/\(key)"] }
    func lww(_ namespace: String, _ key: String) -> LWWRecord? { lwwRecords["\(namespace)/\(key)"] }
    func appendOnly(_ namespace: String, _ key: String) -> AppendOnlyRecord? { appendOnlyRecords["\(namespace)/\(key)"] }
    func hasEvent(_ namespace: String, _ id: EventID) -> Bool { events.contains("\(namespace)/\(id)") }
    func isBuried(_ namespace: String, _ group: String) -> Bool { buried.contains("\(namespace)/\(group)") }
    func messageOps(_ namespace: String, _ message: String) -> Set<MessageOpID>? { messages["\(namespace)/\(message)"] }
}
