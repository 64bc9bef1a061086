import Stele

/// Random work for the hub's mirror clients in `stele simulate --clients N`:
/// mail with threads and labels (the inbox rollup), notes, and an append-only
/// kind; flushes, pulls and syncs at random moments; and the hub's faults. Every
/// step is a scenario statement, so the run's transcript replays it.
struct MirrorWorkload {
    let clients: [String]
    /// Ledger clients (`--ledger-clients`): apps that own their store, writing notes and entries.
    let ledgerClients: [String]
    private var written = 0

    init(clients: Int, ledgerClients: Int = 0) {
        self.clients = (0..<clients).map { "c\($0)" }
        self.ledgerClients = (0..<ledgerClients).map { "l\($0)" }
    }

    private var everyone: [String] { clients + ledgerClients }

    /// The hub, its append-only kind, the inbox rollup and the clients.
    func setup() -> [Statement] {
        guard !everyone.isEmpty else { return [] }
        return [.hub(.start), .hub(.appendOnly(kind: "entry")), .hub(.rollup(kind: "mail", set: "labels", member: "INBOX"))] + clients.map { .hub(.client($0)) }
            + ledgerClients.map { .hub(.ledgerClient($0)) }
    }

    /// A ledger client's next step: its app's writes and hard deletes, its syncs,
    /// and the wipes, resets and damage 002 is about.
    private mutating func nextForLedger(_ client: String, _ random: inout SplitMix64) -> [Statement] {
        let note = "n\(random.value(in: 0...7))"
        let entry = "e\(random.value(in: 0...3))"
        written += 1
        switch random.value(in: 0...199) {
        case 0..<56: return [.hub(.appWrite(client: client, kind: "note", id: note, value: "a\(written)"))]
        case 56..<82: return [.hub(.appWrite(client: client, kind: "note", id: note, value: nil))]
        case 82..<92: return [.hub(.appWrite(client: client, kind: "entry", id: entry, value: "y\(written)"))]
        case 92..<96: return [.hub(.appWrite(client: client, kind: "entry", id: entry, value: nil))]
        case 96..<118: return [.hub(.step(client: client, .flush))]
        case 118..<134: return [.hub(.step(client: client, .pull))]
        case 134..<174: return [.hub(.step(client: client, .sync))]
        case 174..<178: return [.hub(.step(client: client, .retry))]
        case 178..<184: return [.hub(.step(client: client, .replay))]
        case 184..<187: return [.hub(.step(client: client, .wipe))]
        case 187..<189: return [.hub(.wipeKeepingIdentity(client: client))]
        case 189..<191: return [.hub(.corruptLedger(client: client))]
        default: return [.hub(.step(client: client, .reset))]
        }
    }

    private static let labels = ["INBOX", "STARRED", "UNREAD"]

    /// One client's next step.
    mutating func next(_ random: inout SplitMix64) -> [Statement] {
        let pick = Int(random.next() % UInt64(everyone.count))
        if pick >= clients.count { return nextForLedger(everyone[pick], &random) }
        let client = clients[pick]
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
        guard let hub = simulation.hub, !everyone.isEmpty else { return [] }
        let client = everyone[Int(random.next() % UInt64(everyone.count))]
        simulation.count(kind.rawValue)
        if kind == .hubRestore {
            // A backup now and then; a restore of the last one later (the hub's history rewound).
            // The hub compacts before each backup, so a restore may bring back tombstones
            // it had collected, and clients below its horizon meet `410` (no draw of its
            // own: the runs of earlier seeds stay as they were).
            if let last = hub.lastBackup, random.chance(50) { return [.hub(.restore(label: last))] }
            return [.hub(.compact), .hub(.backup(label: "hub-\(simulation.now)"))]
        }
        switch random.value(in: 0...7) {
        case 0, 1: return hub.isDown ? [.hub(.up), .hub(.compact)] : [.hub(.down)]
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

    /// Heals: the hub up and its injected push failures dropped, then each client
    /// retries what failed and syncs until quiet, twice round; a ledger client still
    /// halted is reset and syncs again (a reset is the only way on, 002).
    func heal(_ simulation: Simulation, run: (Statement) throws -> Void) throws {
        guard let hub = simulation.hub, !everyone.isEmpty else { return }
        try run(.hub(.heal))
        // What every client has pulled past goes first, so the healing syncs meet `410` where a cursor fell behind.
        try run(.hub(.compact))
        for _ in 0..<2 {
            for client in everyone {
                try run(.hub(.step(client: client, .retry)))
                try run(.hub(.step(client: client, .sync)))
                if hub.ledgerClient(client)?.halted == true {
                    try run(.hub(.step(client: client, .reset)))
                    try run(.hub(.step(client: client, .sync)))
                }
            }
        }
        for client in everyone { try run(.hub(.step(client: client, .sync))) }
    }
}
