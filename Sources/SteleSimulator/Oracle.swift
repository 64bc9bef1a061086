import Stele

/// Knows every write and delete the workload issued, with the dot, vector or
/// stamp the replica reported for it, and checks the guarantees on the devices'
/// stores (DESIGN §9): G1, no superseded value visible; G2, every unsuperseded
/// write visible, or beaten by a concurrent write under the documented rule; G3,
/// identical visible state. It counts resurrections and lost writes, each row at
/// most once per kind of finding.
///
/// A device restored from a backup takes back what it wrote after the backup and
/// never shared: the oracle forgets those operations (they no longer happened),
/// rather than counting their absence as lost writes, unless a frame it sent
/// before the restore still lands and shares them.
public final class Oracle {
    public private(set) var resurrections = 0
    public private(set) var lostWrites = 0
    /// Deliveries of a message deleted for everyone before it was delivered,
    /// made while the deleting device was out of the deliverer's reach (``leakedAtTheLimit(_:_:)``).
    public private(set) var leaksAtTheLimit = 0
    /// The first findings, described for a report.
    public private(set) var findings: [String] = []
    /// Checks run (each over every device).
    public private(set) var checks = 0

    private struct Operation {
        let id: Int
        let namespace: String
        let key: String
        let device: DeviceID
        let deviceName: String
        let time: Int64
        var erased = false
        let kind: Kind

        enum Kind {
            case causalPut(value: [UInt8], dot: Dot, timestamp: HybridTimestamp, vector: VersionVector)
            case causalDelete(vector: VersionVector)
            case lww(value: [UInt8]?, stamp: WriteStamp)
            case append(id: EventID)
            case bury(marker: EventID)
            case appendOnly(value: [UInt8], stamp: WriteStamp)
            /// One op of a message (the key is the message id).
            case message(MessageOp)
        }
    }

    private var operations: [Operation] = []
    /// Ops from outside the account already recorded (``arrived(_:namespace:on:deviceName:time:)``).
    private var arrivedOps: [MessageOpID: Int] = [:]
    private var counted: Set<String> = []
    /// Operations a restore or revocation left only on frames in flight: by
    /// operation index, the frames (sequence numbers) carrying each, and back.
    private var carriersOf: [Int: Set<UInt64>] = [:]
    private var carried: [UInt64: Set<Int>] = [:]
    /// Operations an anchor that landed holds (its snapshot, or the collection it
    /// recorded): no restore can take them back, since a restored device recovers
    /// from the anchor (001 §7).
    private var anchored: Set<Int> = []

    public init() {}

    /// An anchor landed holding `snapshot`, taken at virtual time `takenAt`: every
    /// operation made before then that the snapshot reflects is permanent.
    func anchorLanded(_ snapshot: Snapshot, takenAt: Int64) {
        let evidence = SnapshotEvidence(snapshot)
        for index in operations.indices where !operations[index].erased && operations[index].time <= takenAt {
            if isKnown(operations[index], by: [evidence]) { anchored.insert(index) }
        }
    }

    /// Operations recorded (rule refusals and storage failures are not).
    public var operationCount: Int { operations.count }

    // MARK: - Recording

    /// Performs `operation` on `replica` and records what it reported.
    /// - Throws: storage errors (the operation did not happen). A write the rules
    ///   refuse (a second appendOnly write, an append to a buried group) happens
    ///   nowhere and is not recorded.
    /// - Returns: the rule's refusal, if the rules refused the write.
    @discardableResult
    public func perform(_ operation: WorkloadOperation, on replica: Replica, deviceName: String, time: Int64) throws -> ReplicaError? {
        func add(_ namespace: String, _ key: String, _ kind: Operation.Kind) {
            operations.append(Operation(id: operations.count, namespace: namespace, key: key, device: replica.device, deviceName: deviceName, time: time, kind: kind))
        }
        do {
            switch operation {
            case let .put(namespace, key, value):
                let bytes = Array(value.utf8)
                switch try replica.declaration(of: namespace).kind {
                case .causal:
                    let dot = try replica.causal(namespace).put(key, bytes)
                    guard let record = try observe(replica, { try $0.causal(namespace).record(key) }),
                        let version = record.versions.first(where: { $0.dot == dot })
                    else { return nil }
                    add(namespace, key, .causalPut(value: bytes, dot: dot, timestamp: version.timestamp, vector: record.vector))
                case .lww:
                    add(namespace, key, .lww(value: bytes, stamp: try replica.lww(namespace).put(key, bytes)))
                case .appendOnly:
                    add(namespace, key, .appendOnly(value: bytes, stamp: try replica.appendOnly(namespace).put(key, bytes)))
                case .local:
                    try replica.local(namespace).put(key, bytes)
                case .log:
                    add(namespace, key, .append(id: try replica.log(namespace).append(group: key, body: bytes)))
                case .messages:
                    return nil
                }
            case let .delete(namespace, key):
                switch try replica.declaration(of: namespace).kind {
                case .causal:
                    guard try replica.causal(namespace).delete(key) != nil, let record = try observe(replica, { try $0.causal(namespace).record(key) }) else { return nil }
                    add(namespace, key, .causalDelete(vector: record.vector))
                case .lww:
                    guard let stamp = try replica.lww(namespace).delete(key) else { return nil }
                    add(namespace, key, .lww(value: nil, stamp: stamp))
                case .log:
                    guard let marker = try replica.log(namespace).bury(key) else { return nil }
                    add(namespace, key, .bury(marker: marker))
                case .local:
                    try replica.local(namespace).delete(key)
                case .appendOnly, .messages:
                    return nil
                }
            case let .append(namespace, group, value):
                add(namespace, group, .append(id: try replica.log(namespace).append(group: group, body: Array(value.utf8))))
            case let .bury(namespace, group):
                guard let marker = try replica.log(namespace).bury(group) else { return nil }
                add(namespace, group, .bury(marker: marker))
            case let .post(namespace, message, text):
                add(namespace, message, .message(try replica.messages(namespace).post(message, body: Array(text.utf8), author: deviceName)))
            case let .edit(namespace, message, text):
                add(namespace, message, .message(try replica.messages(namespace).edit(message, body: Array(text.utf8))))
            case let .unsend(namespace, message, scope):
                guard let op = try replica.messages(namespace).unsend(message, scope: scope) else { return nil }
                add(namespace, message, .message(op))
            case let .react(namespace, message, emoji):
                add(namespace, message, .message(try replica.messages(namespace).react(message, emoji: emoji, as: deviceName)))
            case let .unreact(namespace, message, _):
                add(namespace, message, .message(try replica.messages(namespace).unreact(message, as: deviceName)))
            }
        } catch let error as ReplicaError
            where [.appendOnlyIsFinal, .groupBuried, .messageExists, .messageMissing, .messageDeleted].contains(error.code)
        {
            return error
        }
        return nil
    }

    /// A message op from outside the account (a contact's op, or a receipt
    /// written for one) that a device of the account took in: recorded once.
    func arrived(_ op: MessageOp, namespace: String, on replica: Replica, deviceName: String, time: Int64) {
        // Recorded again if the op was forgotten since (a restore lost it, and it came back).
        if let index = arrivedOps[op.id], !operations[index].erased { return }
        arrivedOps[op.id] = operations.count
        operations.append(
            Operation(id: operations.count, namespace: namespace, key: op.message, device: replica.device, deviceName: deviceName, time: time, kind: .message(op)))
    }

    /// The first delete for everyone of a message, if one was made: when (virtual time) and by which device.
    func deletedForEveryone(_ namespace: String, _ message: String) -> (time: Int64, device: String)? {
        operations.first { operation in
            guard !operation.erased, operation.namespace == namespace, operation.key == message, case .message(let op) = operation.kind else { return false }
            return op.action == .delete(.everyone)
        }.map { ($0.time, $0.deviceName) }
    }

    /// A deleted message's text reached a contact although the device that
    /// deleted it could talk to the one that delivered: counted with the resurrections.
    func leaked(_ subject: String, _ detail: String) {
        count(.resurrection, subject, "leak: " + detail)
    }

    /// A deleted message's text reached a contact while the device that deleted
    /// it was out of the deliverer's reach (or had only just come within it):
    /// the limit README "Conversations" states, counted apart, not a failure.
    func leakedAtTheLimit(_ subject: String, _ detail: String) {
        guard counted.insert("limit|\(subject)").inserted else { return }
        leaksAtTheLimit += 1
        if findings.count < 50 { findings.append("leak at the limit: \(subject): \(detail)") }
    }

    /// Reads what a write just committed (see ``suspendingFaults(_:_:)``).
    private func observe<T>(_ replica: Replica, _ read: (Replica) throws -> T) throws -> T {
        try Self.suspendingFaults([replica]) { try read(replica) }
    }

    /// Runs the oracle's own reads. They are the observer's, not the devices':
    /// a storage fault forced on a device must neither fire on them (making the
    /// oracle miss a write that happened, or forget one that did not vanish) nor
    /// be used up by them, so faults wait until the reads are done.
    static func suspendingFaults<T>(_ replicas: [Replica], _ body: () throws -> T) rethrows -> T {
        let plans = replicas.compactMap(\.faults)
        for plan in plans { plan.pause() }
        defer { for plan in plans { plan.resume() } }
        return try body()
    }

    /// A device's state was discarded (restored from a backup, or revoked): an
    /// operation no remaining store knows of is gone from the world (its absence
    /// is then neither a lost write nor its supersession a resurrection), unless
    /// a frame sent before still carries it: then it lives if one of those frames
    /// lands and dies with the last of them (``frameLanded(_:in:)``, ``frameLost(_:)``).
    ///
    /// Knowing is judged now, not later: afterwards the restored device's counter
    /// runs on past the dots it lost, and a vector covering one of them would no
    /// longer prove anything.
    /// - Parameters:
    ///   - inFlight: the frames on the wire that can still land, by sequence number.
    ///   - account: the account, and `keys` every key of it: a snapshot a
    ///     sibling served (before a restore, say) carries what it held.
    func forgetOperationsUnknown(to replicas: [Replica], inFlight: [(id: UInt64, bytes: [UInt8])], account: AccountID? = nil, keys: [AccountKey] = []) {
        Self.suspendingFaults(replicas) {
            let stores = replicas.map(StoreEvidence.init)
            var frames: [(id: UInt64, evidence: FrameEvidence)]?
            for index in operations.indices where !operations[index].erased && carriersOf[index] == nil && !anchored.contains(index) {
                guard !isKnown(operations[index], by: stores) else { continue }
                if frames == nil { frames = inFlight.map { ($0.id, FrameEvidence($0.bytes, account: account, keys: keys)) }.filter { !$0.evidence.isEmpty } }
                let carrying = Set((frames ?? []).filter { isKnown(operations[index], by: [$0.evidence]) }.map(\.id))
                if carrying.isEmpty {
                    operations[index].erased = true
                } else {
                    carriersOf[index] = carrying
                    for id in carrying { carried[id, default: []].insert(index) }
                }
            }
        }
    }

    /// Whether frame `id` carries operations that live or die with it.
    func isCarrier(_ id: UInt64) -> Bool { carried[id] != nil }

    /// Frame `id` was handed to a device on the roster: what it carried and the
    /// store now holds is back in the world; what the store did not take is as
    /// if the frame was lost.
    func frameLanded(_ id: UInt64, in replica: Replica) {
        guard let indexes = carried.removeValue(forKey: id) else { return }
        let store = StoreEvidence(replica: replica)
        Self.suspendingFaults([replica]) {
            for index in indexes.sorted() {
                guard isKnown(operations[index], by: [store]) else {
                    drop(id, from: index)
                    continue
                }
                for other in carriersOf.removeValue(forKey: index) ?? [] where other != id {
                    carried[other]?.remove(index)
                    if carried[other]?.isEmpty == true { carried[other] = nil }
                }
            }
        }
    }

    /// Frame `id` will never land: what it alone carried is gone.
    func frameLost(_ id: UInt64) {
        guard let indexes = carried.removeValue(forKey: id) else { return }
        for index in indexes.sorted() { drop(id, from: index) }
    }

    private func drop(_ id: UInt64, from index: Int) {
        carriersOf[index]?.remove(id)
        guard carriersOf[index]?.isEmpty == true else { return }
        carriersOf[index] = nil
        operations[index].erased = true
    }

    private func isKnown(_ operation: Operation, by evidence: [any Evidence]) -> Bool {
        evidence.contains { store in
            switch operation.kind {
            case .causalPut(_, let dot, _, _):
                return store.causal(operation.namespace, operation.key)?.vector.covers(dot) ?? false
            case .causalDelete(let vector):
                let counter = vector[operation.device]
                // In a whole snapshot, a key that is not there was deleted and collected.
                return store.causal(operation.namespace, operation.key).map { $0.vector[operation.device] >= counter } ?? store.isComplete
            case .lww(let value, let stamp):
                return store.lww(operation.namespace, operation.key).map { $0.stamp >= stamp } ?? (value == nil && store.isComplete)
            case .append(let id):
                return store.hasEvent(operation.namespace, id) || store.isBuried(operation.namespace, operation.key) || store.isComplete
            case .bury(let marker):
                return store.hasEvent(operation.namespace, marker) || store.isComplete
            case .appendOnly(_, let stamp):
                return store.appendOnly(operation.namespace, operation.key)?.stamp == stamp
            case .message(let op):
                // In a whole snapshot, a message that is not there was deleted and collected.
                guard let held = store.messageOps(operation.namespace, operation.key) else {
                    if case .post = op.action { return false }
                    return store.isComplete
                }
                return held.contains(op.id)
            }
        }
    }

    // MARK: - Checking

    /// Checks every device's visible state against what the operations imply.
    /// Call it only when the devices have converged (everyone online, reachable, settled).
    func check(_ devices: [(name: String, replica: Replica)], namespaces: [(name: String, kind: NamespaceKind)]) {
        Self.suspendingFaults(devices.map(\.replica)) { self.checkAll(devices, namespaces: namespaces) }
    }

    private func checkAll(_ devices: [(name: String, replica: Replica)], namespaces: [(name: String, kind: NamespaceKind)]) {
        checks += 1
        let live = operations.filter { !$0.erased }
        for namespace in namespaces {
            let mine = live.filter { $0.namespace == namespace.name }
            switch namespace.kind {
            case .causal: checkCausal(namespace.name, mine, devices)
            case .lww: checkLWW(namespace.name, mine, devices)
            case .log: checkLog(namespace.name, mine, devices)
            case .appendOnly: checkAppendOnly(namespace.name, mine, devices)
            case .messages: checkMessages(namespace.name, mine, devices)
            case .local: break
            }
        }
    }

    private func checkCausal(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        let byKey = Dictionary(grouping: operations, by: \.key)
        var keys = Set(byKey.keys)
        for device in devices { for entry in (try? device.replica.causal(namespace).entries()) ?? [] { keys.insert(entry.key) } }
        for key in keys.sorted() {
            let ops = byKey[key] ?? []
            // A put is superseded when another operation's history covers its dot.
            var frontier: [(value: [UInt8], stamp: WriteStamp)] = []
            var superseded: [[UInt8]] = []
            for op in ops {
                guard case let .causalPut(value, dot, timestamp, _) = op.kind else { continue }
                let covered = ops.contains { other in
                    guard other.id != op.id else { return false }
                    switch other.kind {
                    // Two writes under one dot (a counter reissued after a restore)
                    // never saw each other: the replica keeps the one reads would show.
                    case .causalPut(_, let other, _, _) where other == dot: return false
                    case .causalPut(_, _, _, let vector), .causalDelete(let vector): return vector.covers(dot)
                    default: return false
                    }
                }
                if covered { superseded.append(value) } else { frontier.append((value, WriteStamp(timestamp: timestamp, writer: dot.device))) }
            }
            // The documented order: the later write stamp, then the larger value.
            let expected = frontier.max { $0.stamp != $1.stamp ? $0.stamp < $1.stamp : $0.value.lexicographicallyPrecedes($1.value) }?.value
            for device in devices {
                let shown = (try? device.replica.causal(namespace).get(key)) ?? nil
                judge(namespace, key, device.name, shown: shown, expected: expected, stale: superseded)
            }
        }
    }

    private func checkLWW(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        let byKey = Dictionary(grouping: operations, by: \.key)
        var keys = Set(byKey.keys)
        for device in devices { for entry in (try? device.replica.lww(namespace).entries()) ?? [] { keys.insert(entry.key) } }
        for key in keys.sorted() {
            let writes: [(value: [UInt8]?, stamp: WriteStamp)] = (byKey[key] ?? []).compactMap { op in
                if case .lww(let value, let stamp) = op.kind { return (value, stamp) } else { return nil }
            }
            // Later timestamp; on an exact tie the delete; then the larger device id (000 §5).
            let winner = writes.max { lhs, rhs in
                if lhs.stamp.timestamp != rhs.stamp.timestamp { return lhs.stamp.timestamp < rhs.stamp.timestamp }
                if (lhs.value == nil) != (rhs.value == nil) { return lhs.value != nil }
                return lhs.stamp.writer < rhs.stamp.writer
            }
            let stale = writes.compactMap { $0.value == winner?.value ? nil : $0.value }
            for device in devices {
                judge(namespace, key, device.name, shown: (try? device.replica.lww(namespace).get(key)) ?? nil, expected: winner?.value ?? nil, stale: stale)
            }
        }
    }

    private func checkAppendOnly(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        let byKey = Dictionary(grouping: operations, by: \.key)
        for (key, ops) in byKey.sorted(by: { $0.key < $1.key }) {
            let writes: [(value: [UInt8], stamp: WriteStamp)] = ops.compactMap { op in
                if case .appendOnly(let value, let stamp) = op.kind { return (value, stamp) } else { return nil }
            }
            let first = writes.min { $0.stamp < $1.stamp }?.value
            for device in devices {
                judge(namespace, key, device.name, shown: (try? device.replica.appendOnly(namespace).get(key)) ?? nil, expected: first, stale: [])
            }
        }
    }

    private func checkLog(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        let buried = Set(operations.compactMap { op -> String? in if case .bury = op.kind { return op.key } else { return nil } })
        var expected = Set<EventID>()
        var buriedEvents = Set<EventID>()
        for op in operations {
            guard case .append(let id) = op.kind else { continue }
            if buried.contains(op.key) { buriedEvents.insert(id) } else { expected.insert(id) }
        }
        for device in devices {
            guard let shown = try? Set(device.replica.log(namespace).live().map(\.id)) else { continue }
            for id in shown.subtracting(expected).sorted() {
                count(.resurrection, "\(namespace) event \(id)", "\(device.name) shows an event of a buried group" + (buriedEvents.contains(id) ? "" : " (never appended)"))
            }
            for id in expected.subtracting(shown).sorted() {
                count(.lostWrite, "\(namespace) event \(id)", "\(device.name) lacks a live event")
            }
        }
    }

    /// Each message must show the fold of every op made on it (000 §6), whatever
    /// order they arrived in; a deleted one may show deleted or, once collected,
    /// absent, and keeps no body on disk.
    private func checkMessages(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        var byMessage: [String: [MessageOp]] = [:]
        for operation in operations { if case .message(let op) = operation.kind { byMessage[operation.key, default: []].append(op) } }
        var messages = Set(byMessage.keys)
        for device in devices { for row in (try? device.replica.messages(namespace).messages()) ?? [] { messages.insert(row.message) } }
        for message in messages.sorted() {
            let ops = byMessage[message] ?? []
            let expected = MessageFold.fold(ops)
            let bodies = Set(ops.compactMap { op -> [UInt8]? in
                switch op.action {
                case .post(_, let body), .edit(let body): body
                default: nil
                }
            })
            for device in devices {
                let store = try? device.replica.messages(namespace)
                let shown = (try? store?.message(message)) ?? nil
                let subject = "\(namespace) message \(message)"
                guard let shown else {
                    if let expected, !expected.isDeleted { count(.lostWrite, subject, "\(device.name) lacks a live message") }
                    continue
                }
                guard let expected, !expected.isDeleted else {
                    if !shown.isDeleted { count(.resurrection, subject, "\(device.name) shows a message " + (expected == nil ? "never posted" : "that was deleted")) }
                    if let bytes = try? store?.storedBodyBytes(of: message), bytes > 0 {
                        count(.resurrection, subject, "\(device.name) keeps \(bytes) bytes of a deleted message's text on disk")
                    }
                    continue
                }
                do {
                    guard shown.leaf != expected.leaf else { continue }
                    let stale = !shown.isDeleted && shown.body != expected.body && bodies.contains(shown.body)
                    let detail = "\(device.name) shows \(shown.isDeleted ? "deleted" : "\"\(String(decoding: shown.body, as: UTF8.self))\"")" +
                        ", expected \"\(String(decoding: expected.body, as: UTF8.self))\""
                    count(stale ? .resurrection : .lostWrite, subject, detail)
                }
            }
        }
    }

    private enum Finding: String { case resurrection, lostWrite = "lost write" }

    private func judge(_ namespace: String, _ key: String, _ device: String, shown: [UInt8]?, expected: [UInt8]?, stale: [[UInt8]]) {
        guard shown != expected else { return }
        let describe = { (bytes: [UInt8]?) in bytes.map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "absent" }
        if let shown, expected == nil || stale.contains(shown) {
            count(.resurrection, "\(namespace) \(key)", "\(device) shows \(describe(shown)), expected \(describe(expected))")
        } else {
            count(.lostWrite, "\(namespace) \(key)", "\(device) shows \(describe(shown)), expected \(describe(expected))")
        }
    }

    private func count(_ finding: Finding, _ subject: String, _ detail: String) {
        guard counted.insert("\(finding)|\(subject)").inserted else { return }
        switch finding {
        case .resurrection: resurrections += 1
        case .lostWrite: lostWrites += 1
        }
        if findings.count < 50 { findings.append("\(finding.rawValue): \(subject): \(detail)") }
    }
}
