import Stele

/// The oracle's judgement of a converged fleet: every device's visible state against what the operations imply (G1, G2).
extension Oracle {
    // MARK: - Checking

    /// Checks every device's visible state against what the operations imply.
    /// Call it only when the devices have converged (everyone online, reachable, settled).
    func check(_ devices: [(name: String, replica: Replica)], namespaces: [(name: String, kind: NamespaceKind)]) {
        Self.suspendingFaults(devices.map(\.replica)) { self.checkAll(devices, namespaces: namespaces) }
    }

    func checkAll(_ devices: [(name: String, replica: Replica)], namespaces: [(name: String, kind: NamespaceKind)]) {
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

    /// Reads a device's store for a check. A read that fails is a finding
    /// (``unreadable``), never a skip: `nil` then, and the caller judges nothing more of it.
    func read<T>(_ device: String, _ what: String, _ body: () throws -> T) -> T? {
        do {
            return try body()
        } catch {
            unreadable += 1
            if findings.count < 50 { findings.append("unreadable: \(device) could not read \(what): \(error)") }
            return nil
        }
    }

    /// Every key some device's store shows in a namespace, with the operations' keys.
    func keys(_ operations: [Operation], _ devices: [(name: String, replica: Replica)], _ namespace: String, _ shown: (Replica) throws -> [String]) -> [String] {
        var keys = Set(operations.map(\.key))
        for device in devices { keys.formUnion(read(device.name, "the keys of \(namespace)") { try shown(device.replica) } ?? []) }
        return keys.sorted()
    }

    func checkCausal(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        let byKey = Dictionary(grouping: operations, by: \.key)
        for key in keys(operations, devices, namespace, { try $0.causal(namespace).entries().map(\.key) }) {
            let ops = byKey[key] ?? []
            // A put is superseded when another operation's history covers its dot.
            var frontier: [(value: [UInt8], stamp: WriteStamp)] = []
            var superseded: [[UInt8]] = []
            for op in ops {
                guard case let .causalPut(value, dot, timestamp, _) = op.kind else { continue }
                let covered = ops.contains { other in
                    guard other.id != op.id else { return false }
                    switch other.kind {
                    // Two writes under one dot (a counter reissued at the limit) never
                    // saw each other: the replica keeps the one reads would show.
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
                guard let shown = read(device.name, "\(namespace) \(key)", { try device.replica.causal(namespace).get(key) }) else { continue }
                judge(namespace, key, device.name, shown: shown, expected: expected, stale: superseded)
            }
        }
    }

    /// 000 §5 as README states it: the later timestamp; on an exact tie the
    /// delete; then the larger device id; then (one writer, one stamp: only a
    /// stamp issued twice) the larger value.
    static func lwwPrecedes(_ lhs: (value: [UInt8]?, stamp: WriteStamp), _ rhs: (value: [UInt8]?, stamp: WriteStamp)) -> Bool {
        if lhs.stamp.timestamp != rhs.stamp.timestamp { return lhs.stamp.timestamp < rhs.stamp.timestamp }
        if (lhs.value == nil) != (rhs.value == nil) { return lhs.value != nil }
        if lhs.stamp.writer != rhs.stamp.writer { return lhs.stamp.writer < rhs.stamp.writer }
        return (lhs.value ?? []).lexicographicallyPrecedes(rhs.value ?? [])
    }

    func checkLWW(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        let byKey = Dictionary(grouping: operations, by: \.key)
        for key in keys(operations, devices, namespace, { try $0.lww(namespace).entries().map(\.key) }) {
            let writes: [(value: [UInt8]?, stamp: WriteStamp)] = (byKey[key] ?? []).compactMap { op in
                if case .lww(let value, let stamp) = op.kind { return (value, stamp) } else { return nil }
            }
            let winner = writes.max(by: Self.lwwPrecedes)
            let stale = writes.compactMap { $0.value == winner?.value ? nil : $0.value }
            for device in devices {
                guard let shown = read(device.name, "\(namespace) \(key)", { try device.replica.lww(namespace).get(key) }) else { continue }
                judge(namespace, key, device.name, shown: shown, expected: winner?.value ?? nil, stale: stale)
            }
        }
    }

    func checkAppendOnly(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        let byKey = Dictionary(grouping: operations, by: \.key)
        for key in keys(operations, devices, namespace, { try $0.appendOnly(namespace).entries().map(\.key) }) {
            let writes: [(value: [UInt8], stamp: WriteStamp)] = (byKey[key] ?? []).compactMap { op in
                if case .appendOnly(let value, let stamp) = op.kind { return (value, stamp) } else { return nil }
            }
            // The earlier stamp; one stamp issued twice: the smaller value (002, README).
            let first = writes.min { $0.stamp != $1.stamp ? $0.stamp < $1.stamp : $0.value.lexicographicallyPrecedes($1.value) }?.value
            for device in devices {
                guard let shown = read(device.name, "\(namespace) \(key)", { try device.replica.appendOnly(namespace).get(key) }) else { continue }
                judge(namespace, key, device.name, shown: shown, expected: first, stale: [])
            }
        }
    }

    func checkLog(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        // An event is buried by a bury made after it, or by one whose marker some
        // store held when it was made; not by one the barrier had collected before
        // (the name then starts a new group), nor by one forgotten (``buriers(of:)``).
        var expected: [EventID: String] = [:]
        var buriedEvents: [EventID: String] = [:]
        for op in operations {
            guard case .append(let id) = op.kind else { continue }
            if buriers(of: op).isEmpty { expected[id] = op.key } else { buriedEvents[id] = op.key }
        }
        // In the order of the ids as text, worked out once for every device.
        let ordered = expected.map { (text: $0.key.description, id: $0.key, group: $0.value) }.sorted { $0.text < $1.text }
        for device in devices {
            guard let events = read(device.name, "the live events of \(namespace)", { try device.replica.log(namespace).live() }) else { continue }
            for event in events where expected[event.id] == nil {
                count(
                    .resurrection, namespace, event.group, "\(namespace) event \(event.id)",
                    "\(device.name) shows an event of a buried group (\(event.group))" + (buriedEvents[event.id] != nil ? "" : " (never appended)"))
            }
            let shown = Set(events.map(\.id))
            for (_, id, group) in ordered where !shown.contains(id) {
                count(.lostWrite, namespace, group, "\(namespace) event \(id)", "\(device.name) lacks a live event")
            }
        }
    }

    /// Each message must show what its ops imply (000 §6), by ``MessageModel``,
    /// an account of the rules written apart from the fold the replica runs,
    /// whatever order they arrived in; a deleted one may show deleted or, once
    /// collected, absent, and keeps no body on disk.
    func checkMessages(_ namespace: String, _ operations: [Operation], _ devices: [(name: String, replica: Replica)]) {
        var byMessage: [String: [MessageOp]] = [:]
        // A message is judged by the ops of its id's current life (``reusedFrom``).
        for operation in operations where operation.id >= lifeStart(namespace, operation.key) {
            if case .message(let op) = operation.kind { byMessage[operation.key, default: []].append(op) }
        }
        var messages = Set(byMessage.keys)
        for device in devices {
            messages.formUnion(read(device.name, "the messages of \(namespace)") { try device.replica.messages(namespace).liveIDs() } ?? [])
        }
        for message in messages.sorted() {
            let ops = byMessage[message] ?? []
            let expected = MessageModel(ops)
            let bodies = Set(ops.compactMap { op -> [UInt8]? in
                switch op.action {
                case .post(_, let body), .edit(let body): body
                default: nil
                }
            })
            let subject = "\(namespace) message \(message)"
            for device in devices {
                guard let shownRow = read(device.name, subject, { try device.replica.messages(namespace).message(message) }) else { continue }
                guard let shown = shownRow else {
                    if let expected, !expected.isDeleted { count(.lostWrite, namespace, message, subject, "\(device.name) lacks a live message") }
                    continue
                }
                guard let expected, !expected.isDeleted else {
                    if !shown.isDeleted {
                        count(.resurrection, namespace, message, subject, "\(device.name) shows a message " + (expected == nil ? "never posted" : "that was deleted"))
                    }
                    if let bytes = read(device.name, "the stored text of \(subject)", { try device.replica.messages(namespace).storedBodyBytes(of: message) }), bytes > 0 {
                        count(.resurrection, namespace, message, subject, "\(device.name) keeps \(bytes) bytes of a deleted message's text on disk")
                    }
                    continue
                }
                guard let difference = expected.difference(from: shown) else { continue }
                let stale = !shown.isDeleted && shown.body != expected.body && bodies.contains(shown.body)
                count(stale ? .resurrection : .lostWrite, namespace, message, subject, "\(device.name) \(difference)")
            }
        }
    }

    enum Finding: String { case resurrection, lostWrite = "lost write" }

    func judge(_ namespace: String, _ key: String, _ device: String, shown: [UInt8]?, expected: [UInt8]?, stale: [[UInt8]]) {
        guard shown != expected else { return }
        let describe = { (bytes: [UInt8]?) in bytes.map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "absent" }
        let detail = "\(device) shows \(describe(shown)), expected \(describe(expected))"
        let finding: Finding = if let shown, expected == nil || stale.contains(shown) { .resurrection } else { .lostWrite }
        count(finding, namespace, key, "\(namespace) \(key)", detail)
    }

    /// Counts a finding once per subject and kind; one on a record written at the
    /// limit (``keysRolledBack(_:floor:)``) counts apart.
    func count(_ finding: Finding, _ namespace: String, _ key: String, _ subject: String, _ detail: String) {
        guard !limited.contains("\(namespace)|\(key)") else {
            guard counted.insert("reissue|\(finding)|\(subject)").inserted else { return }
            reissuesAtTheLimit += 1
            if findings.count < 50 { findings.append("\(finding.rawValue) at the limit (a stamp reissued after a key store rollback): \(subject): \(detail)") }
            return
        }
        count(finding, subject, detail)
    }

    func count(_ finding: Finding, _ subject: String, _ detail: String) {
        guard counted.insert("\(finding)|\(subject)").inserted else { return }
        switch finding {
        case .resurrection: resurrections += 1
        case .lostWrite: lostWrites += 1
        }
        if findings.count < 50 { findings.append("\(finding.rawValue): \(subject): \(detail)") }
    }
}
