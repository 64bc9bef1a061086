import Stele

/// Random work for the hub's mirror clients in `stele simulate --clients N`:
/// mail with threads and labels (the inbox rollup), notes, and an append-only
/// kind; flushes, pulls and syncs at random moments; and the hub's faults. Every
/// step is a scenario statement, so the run's transcript replays it.
struct MirrorWorkload {
    let clients: [String]
    private var written = 0

    init(clients: Int) {
        self.clients = (0..<clients).map { "c\($0)" }
    }

    /// The hub, its append-only kind, the inbox rollup and the clients.
    func setup() -> [Statement] {
        guard !clients.isEmpty else { return [] }
        return [.hub(.start), .hub(.appendOnly(kind: "entry")), .hub(.rollup(kind: "mail", set: "labels", member: "INBOX"))] + clients.map { .hub(.client($0)) }
    }

    private static let labels = ["INBOX", "STARRED", "UNREAD"]

    /// One client's next step.
    mutating func next(_ random: inout SplitMix64) -> [Statement] {
        let client = clients[Int(random.next() % UInt64(clients.count))]
        let message = "m\(random.value(in: 0...23))"
        let thread = "t\(random.value(in: 0...5))"
        let label = Self.labels[Int(random.next() % UInt64(Self.labels.count))]
        let note = "n\(random.value(in: 0...7))"
        written += 1
        switch random.value(in: 0...99) {
        case 0..<16: return [.hub(.put(client: client, kind: "mail", id: message, value: "v\(written)", group: thread))]
        case 16..<22: return [.hub(.delete(client: client, kind: "mail", id: message))]
        case 22..<34: return [.hub(.member(client: client, add: true, kind: "mail", id: message, set: "labels", member: label))]
        case 34..<44: return [.hub(.member(client: client, add: false, kind: "mail", id: message, set: "labels", member: label))]
        case 44..<49: return [.hub(.groupMember(client: client, add: false, kind: "mail", group: thread, set: "labels", member: "INBOX"))]
        case 49..<52: return [.hub(.groupMember(client: client, add: true, kind: "mail", group: thread, set: "labels", member: "INBOX"))]
        case 52..<56: return [.hub(.step(client: client, .undo))]
        case 56..<64: return [.hub(.put(client: client, kind: "note", id: note, value: "w\(written)", group: nil))]
        case 64..<69: return [.hub(.delete(client: client, kind: "note", id: note))]
        case 69..<72: return [.hub(.put(client: client, kind: "entry", id: "e\(random.value(in: 0...3))", value: "x\(written)", group: nil))]
        case 72..<74: return [.hub(.delete(client: client, kind: "entry", id: "e\(random.value(in: 0...3))"))]
        case 74..<82: return [.hub(.step(client: client, .flush))]
        case 82..<88: return [.hub(.step(client: client, .pull))]
        case 88..<98: return [.hub(.step(client: client, .sync))]
        default: return [.hub(.step(client: client, .retry))]
        }
    }

    /// One of the hub's faults.
    func fault(_ kind: SimulationRun.Fault, _ random: inout SplitMix64, _ simulation: Simulation) -> [Statement] {
        guard let hub = simulation.hub, !clients.isEmpty else { return [] }
        let client = clients[Int(random.next() % UInt64(clients.count))]
        simulation.count(kind.rawValue)
        if kind == .hubRestore {
            // A backup now and then; a restore of the last one later (the hub's history rewound).
            if let last = hub.lastBackup, random.chance(50) { return [.hub(.restore(label: last))] }
            return [.hub(.backup(label: "hub-\(simulation.now)"))]
        }
        switch random.value(in: 0...7) {
        case 0, 1: return [.hub(hub.isDown ? .up : .down)]
        case 2, 3:
            let codes = HubStatement.PushFault.allCases
            return [.hub(.failPushes(count: Int(random.value(in: 1...3)), codes[Int(random.next() % UInt64(codes.count))]))]
        case 4, 5:
            let points = MirrorDriver.CrashPoint.allCases
            return [.hub(.crashAt(client: client, points[Int(random.next() % UInt64(points.count))])), .hub(.step(client: client, .sync))]
        case 6: return [.hub(.crash(client: client))]
        default: return [.hub(.skew(client: client, milliseconds: random.value(in: -600_000...600_000)))]
        }
    }

    /// Heals: the hub up and its injected push failures dropped, then each client retries what failed and syncs until quiet, twice round.
    func heal(_ simulation: Simulation) -> [Statement] {
        guard simulation.hub != nil, !clients.isEmpty else { return [] }
        var steps: [Statement] = [.hub(.heal)]
        for _ in 0..<2 {
            for client in clients { steps += [.hub(.step(client: client, .retry)), .hub(.step(client: client, .sync))] }
        }
        for client in clients { steps.append(.hub(.step(client: client, .sync))) }
        return steps
    }
}
