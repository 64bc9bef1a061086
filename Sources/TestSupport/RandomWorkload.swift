import Stele

/// Random writes for convergence tests: every replicated kind, overlapping keys,
/// so devices make concurrent edits and deletes of the same rows.
public enum RandomWorkload {
    /// Applies `steps` random writes to `replica`.
    package static func run(_ replica: Replica, steps: Int, keys: Int = 30, clock: ManualWallClock? = nil, _ generator: inout SeededGenerator) throws {
        for _ in 0..<steps {
            clock?.advance(byMilliseconds: Int64.random(in: 0...3, using: &generator))
            let key = "k\(Int.random(in: 0..<keys, using: &generator))"
            let value = [UInt8.random(in: 0...255, using: &generator), UInt8.random(in: 0...255, using: &generator)]
            switch Int.random(in: 0..<12, using: &generator) {
            case 0...3: try replica.causal("notes").put(key, value)
            case 4, 5: try replica.causal("notes").delete(key)
            case 6: try replica.lww("flags").put(key, value)
            case 7: try replica.lww("flags").delete(key)
            case 8, 9:
                let log = try replica.log("memory")
                if try !log.isBuried(key) { try log.append(group: key, body: value) }
            case 10: try replica.log("memory").bury(key)
            default: _ = try? replica.appendOnly("sealed").put(key, value)
            }
        }
    }

    /// Declares the namespaces ``run(_:steps:keys:clock:_:)`` writes to.
    public static func declare(on replica: Replica) throws {
        try replica.declare("notes", .causal)
        try replica.declare("flags", .lww)
        try replica.declare("memory", .log)
        try replica.declare("sealed", .appendOnly)
    }

    /// Everything a device stores of the namespaces, tombstones included, as text:
    /// two devices that converged describe themselves identically.
    public static func snapshot(_ replica: Replica) throws -> [String] {
        var lines: [String] = []
        for record in try replica.causal("notes").records() { lines.append("notes \(record)") }
        for record in try replica.lww("flags").records() { lines.append("flags \(record)") }
        for event in try replica.log("memory").events() { lines.append("memory \(event)") }
        for record in try replica.appendOnly("sealed").records() { lines.append("sealed \(record)") }
        return lines
    }

    /// What reads show, namespace by namespace.
    public static func visible(_ replica: Replica) throws -> [String] {
        var lines: [String] = []
        for entry in try replica.causal("notes").entries() { lines.append("notes \(entry.key)=\(entry.value)") }
        for entry in try replica.lww("flags").entries() { lines.append("flags \(entry.key)=\(entry.value)") }
        for event in try replica.log("memory").live() { lines.append("memory \(event.group) \(event.body)") }
        for entry in try replica.appendOnly("sealed").entries() { lines.append("sealed \(entry.key)=\(entry.value)") }
        return lines
    }
}
