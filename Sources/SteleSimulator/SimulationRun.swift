import Stele

/// One randomized run (`stele simulate`): a fault phase of random writes and
/// faults, then a healed phase that must converge within a bound, then the
/// oracle's verdict. TigerBeetle's VOPR is the model: a failure names its seed.
public struct SimulationRun {
    /// The faults a run may inject.
    public enum Fault: String, Sendable, CaseIterable {
        case loss, dup, reorder, partition, offline, crash, restore, skew, join, revoke, storage, anchor
        /// With mirror clients: the hub down and up, pushes failed or their answers lost,
        /// a client crashed (at a point of its flush, or at once) or skewed.
        case hub
        /// With mirror clients: the hub backed up, and restored from its last backup (its history rewound).
        case hubRestore = "hub-restore"
    }

    public struct Options: Sendable {
        public var devices = 3
        /// Mirror clients of a hub beside the fleet (`--clients N`); none by default.
        public var clients = 0
        /// Ledger clients of the same hub (`--ledger-clients N`); none by default.
        public var ledgerClients = 0
        public var steps = 200
        public var faults: Set<Fault> = Set(Fault.allCases)
        /// How long the healed phase may take to converge, in virtual milliseconds.
        public var convergenceBoundMilliseconds: Int64 = 600_000
        /// Whether barrier rounds run (`gc on`).
        public var collects = true
        /// G4: once everyone is reachable and nobody writes, tombstone counts must
        /// reach zero within ``collectionBoundMilliseconds``.
        public var requiresCollection = true
        /// Long enough for the longest back-off (1 h) and a round after it.
        public var collectionBoundMilliseconds: Int64 = 7_200_000
        /// Whether a contact account (two devices) talks in "chat", a conversation:
        /// its devices post and react, go offline, and deliveries run both ways.
        public var contact = true
        /// Where the stores live (``Simulation/Storage``): the same verdicts either way.
        public var storage = Simulation.Storage.inMemoryFiles
        /// Whether the timeline counts the tombstones retained after every write
        /// (``Simulation/recordsTombstoneCounts``): for a report, off otherwise.
        public var recordsTombstoneCounts = false

        public init() {}
    }

    /// What one run found.
    public struct Outcome: Sendable {
        public let seed: UInt64
        /// Writes: the fleet's devices' and the hub's clients' (``clientOperations`` of them).
        public var operations = 0
        public var clientOperations = 0
        public var deletes = 0
        public var frames = 0
        public var faults: [String: Int] = [:]
        public var resurrections = 0
        public var lostWrites = 0
        /// Leaks at the limit (``Oracle/leaksAtTheLimit``): counted, not failures.
        public var leaksAtTheLimit = 0
        /// Findings on records written after a key store rollback
        /// (``Oracle/reissuesAtTheLimit``): counted, not failures.
        public var reissuesAtTheLimit = 0
        /// Stores the oracle could not read (``Oracle/unreadable``): failures.
        public var unreadable = 0
        /// Times the oracle was due to judge and could not (a failure: a check that
        /// did not run is no pass).
        public var uncheckable = 0
        /// Virtual time from healing to convergence, or `nil` if it never converged.
        public var convergenceMilliseconds: Int64?
        /// Virtual time from convergence until no tombstone was left, or `nil`.
        public var collectionMilliseconds: Int64?
        public var tombstonesLeft = 0
        public var findings: [String] = []
        public var eventLogHash: UInt64 = 0
        /// ``Simulation/wireDigest``: every delivered frame's bytes, in order.
        public var wireDigest = Hash32.zero
        public var timeline: [TimelineEntry] = []
        public var devices: [String] = []
        public var endTime: Int64 = 0
        /// The run as a scenario: `stele scenario FILE --seed S` replays it. Written
        /// out when read: most runs pass, and nobody reads theirs.
        public var scenario: String { transcript.map(\.text).joined(separator: "\n") + "\n" }
        /// The run's statements in order, and the comments between them.
        var transcript: [TranscriptLine] = []

        /// G4 failed: tombstones were left although collection was required.
        public var uncollected = false
        /// Deliveries still owed once everyone had been reachable for the bound.
        public var undelivered = false

        /// What the mirror clients' oracle found after healing (none without clients).
        public var mirrorFailures = 0
        public var mirrorMutations = 0

        public var failed: Bool {
            resurrections > 0 || lostWrites > 0 || unreadable > 0 || uncheckable > 0 || convergenceMilliseconds == nil || uncollected || undelivered
                || mirrorFailures > 0
        }
    }

    public static func run(seed: UInt64, options: Options) throws -> Outcome {
        let simulation = try Simulation(seed: seed, storage: options.storage)
        simulation.setCollection(options.collects)
        simulation.recordsTombstoneCounts = options.recordsTombstoneCounts
        var random = SplitMix64(seed: seed ^ 0x5EED_F00D)
        // Every step is a scenario statement, carried out by the simulation and
        // written down as it prints: the transcript is the program, and
        // `stele scenario --seed` replays it (DESIGN §9).
        var transcript: [TranscriptLine] = [
            .comment("# stele simulate --seed \(seed) --devices \(options.devices) --steps \(options.steps): replay with stele scenario FILE --seed \(seed)")
        ]
        func run(_ statement: Statement) throws {
            try simulation.apply(statement)
            transcript.append(.statement(statement))
        }
        if !options.collects { transcript.append(.statement(.gc(false))) }
        for namespace in Workload.namespaces { try run(.namespace(namespace.name, namespace.kind)) }
        let names = (0..<options.devices).map { "d\($0)" }
        try run(.fleet(names))
        let contactNames = options.contact ? ["bob0", "bob1"] : []
        if options.contact {
            try run(.contact(name: "bob", devices: contactNames))
            try run(.conversation(namespace: "chat", contact: "bob"))
        }
        var nextDevice = options.devices
        var workload = Workload()
        var backups: [String: String] = [:]
        // In a fixed order: a Set's order changes from process to process.
        let hubClients = options.clients + options.ledgerClients
        let faults = Fault.allCases.filter { options.faults.contains($0) && (($0 != .hub && $0 != .hubRestore) || hubClients > 0) }
        var mirror = MirrorWorkload(clients: options.clients, ledgerClients: options.ledgerClients)
        for statement in mirror.setup() { try run(statement) }

        // Fault phase.
        for _ in 0..<options.steps {
            try run(.advance(random.value(in: 10...2_000)))
            if hubClients > 0, random.chance(Double(100 * hubClients) / Double(hubClients + options.devices)) {
                for statement in mirror.next(&random) { try run(statement) }
                let hubFaults = faults.filter { $0 == .hub || $0 == .hubRestore }
                if random.chance(12), let fault = hubFaults.randomElement(using: &random) {
                    for statement in mirror.fault(fault, &random, simulation) { try run(statement) }
                }
                continue
            }
            let active = simulation.devices.map(\.name)
            guard var name = active.randomElement(using: &random) else { break }
            var operation: WorkloadOperation
            if !contactNames.isEmpty, random.chance(25) {
                name = contactNames[Int(random.next() % UInt64(contactNames.count))]
                operation = workload.nextForContact(&random)
            } else {
                operation = workload.next(&random)
            }
            // A write the store refuses is part of the story, not a failure of the run.
            simulation.perform(name, operation)
            if let refusal = simulation.lastRefusal, refusal.code == .messageMissing {
                // The workload aimed at a message this device has not received: nothing happened.
                transcript.append(.comment("# \(name) \(operation): not run, \(refusal.message)"))
            } else {
                transcript.append(.statement(.operation(device: name, operation)))
            }
            guard random.chance(12) else { continue }
            switch faults.randomElement(using: &random) {
            case .loss:
                try run(.networkLoss(Double(random.value(in: 5...40))))
            case .dup:
                try run(.networkDuplicate(Double(random.value(in: 5...30))))
            case .reorder:
                try run(.networkDelay(min: 1, max: random.value(in: 100...3_000)))
                simulation.count("reorder")
            case .partition:
                let shuffled = active.shuffled(using: &random)
                let cut = max(1, shuffled.count / 2)
                try run(.partition(Array(shuffled[..<cut]), Array(shuffled[cut...])))
            case .offline:
                let target = (active + contactNames).randomElement(using: &random)!
                let going = simulation.device(target)?.isOnline ?? false
                try run(going ? .offline([target]) : .online([target]))
                if going { simulation.count("offline") }
            case .crash:
                try run(.crash(active.randomElement(using: &random)!))
            case .restore:
                let target = active.randomElement(using: &random)!
                if let label = backups[target], random.chance(50) {
                    // Rarely the key store goes back with the replica: the stated
                    // limit of the stamp floor, whose findings are counted apart.
                    try run(.restore(device: target, label: label, withKeys: random.chance(10)))
                } else {
                    let label = "\(target)-\(simulation.now)"
                    try run(.backup(device: target, label: label))
                    backups[target] = label
                }
            case .skew:
                let target = active.randomElement(using: &random)!
                try run(.skew(device: target, milliseconds: random.value(in: -600_000...600_000)))
            case .join:
                guard simulation.devices.count < options.devices + 2 else { continue }
                let name = "d\(nextDevice)"
                nextDevice += 1
                try run(.join(name))
                simulation.count("join")
            case .revoke:
                guard simulation.devices.count > 2, let target = active.last else { continue }
                try run(.revoke(target))
                backups[target] = nil
                simulation.count("revoke")
            case .storage:
                // A failed SQLite step a little later: a write refused, or a
                // reconcile rolled back mid-apply.
                let fault = StorageFault.allCases.randomElement(using: &random)!
                let target = active.randomElement(using: &random)!
                try run(.storageFault(device: target, fault, afterSteps: Int(random.value(in: 0...40))))
            case .hub, .hubRestore:
                for statement in mirror.fault(faults.contains(.hub) ? .hub : .hubRestore, &random, simulation) { try run(statement) }
            case .anchor:
                // The anchor substrate in trouble: out of reach (or back), a failed
                // upload, or a slow one that may outlive its round (001 §8).
                simulation.count("anchor")
                switch random.value(in: 0...2) {
                case 0: try run(.anchor(simulation.anchorSubstrate.isDown ? .up : .down))
                case 1: try run(.anchor(.failNextWrite))
                default: try run(.anchor(.delayNextWrite(random.value(in: 1_000...30_000))))
                }
            case nil:
                break
            }
        }

        // Healed phase: everyone online and reachable over a perfect network, the anchor reachable.
        try run(.heal)
        // A write failure or delay the fault phase armed does not outlive it (seed 275008: a
        // round of the healed phase failed on it, and its leader paused for 10 minutes).
        let anchor = simulation.anchorSubstrate
        if anchor.isDown || anchor.failNextWrite || anchor.delayNextWriteMilliseconds != nil { try run(.anchor(.heal)) }
        try run(.online(simulation.devices.map(\.name) + contactNames))
        transcript += [Statement.sync, .expect(.converged), .expect(.resurrections(0)), .expect(.lostWrites(0))].map(TranscriptLine.statement)
        let healedAt = simulation.now
        var outcome = Outcome(seed: seed)
        // The fleet has settled whenever the oracle is asked: it must be able to judge.
        func judge(_ when: String) {
            do {
                try simulation.checkOracle()
            } catch {
                outcome.uncheckable += 1
                outcome.findings.append("\(when): \(error)")
            }
        }
        if simulation.sync(limitMilliseconds: options.convergenceBoundMilliseconds) == nil {
            outcome.convergenceMilliseconds = simulation.now - healedAt
            judge("after healing")
        } else {
            outcome.findings.append("did not converge within \(options.convergenceBoundMilliseconds / 1_000) s of virtual time: \(simulation.stillMoving() ?? "")")
        }
        if outcome.convergenceMilliseconds != nil && options.requiresCollection {
            // G4: everyone reachable, nobody writing: the barrier must collect every
            // tombstone within the bound, and nothing may come back once it has.
            let start = simulation.now
            while simulation.totalTombstones() > 0 && simulation.now - start < options.collectionBoundMilliseconds {
                simulation.noteTombstones()
                simulation.advance(byMilliseconds: 60_000)
                transcript += [Statement.advance(60_000), .sync].map(TranscriptLine.statement)
                if let moving = simulation.sync(limitMilliseconds: options.convergenceBoundMilliseconds) {
                    outcome.findings.append("did not settle while collecting: \(moving)")
                    outcome.convergenceMilliseconds = nil
                    break
                }
            }
            simulation.noteTombstones()
            if simulation.totalTombstones() == 0 { outcome.collectionMilliseconds = simulation.now - start }
            // What G4 asks, written whether or not it held: a run that failed it replays as a failure.
            transcript += simulation.devices.map { .statement(.expect(.tombstones(device: $0.name, namespace: nil, count: 0))) }
            if outcome.convergenceMilliseconds != nil { judge("after collecting") }
            transcript += [Statement.expect(.resurrections(0)), .expect(.lostWrites(0))].map(TranscriptLine.statement)
        }
        if outcome.convergenceMilliseconds != nil && options.contact {
            // Everyone reachable: whatever either side owes the other is delivered
            // within the bound (a wait for an agreement lasts one advertisement).
            let start = simulation.now
            let owing = { simulation.owingDeliveries() }
            while !owing().isEmpty && simulation.now - start < options.convergenceBoundMilliseconds {
                simulation.advance(byMilliseconds: 60_000)
                transcript += [Statement.advance(60_000), .sync].map(TranscriptLine.statement)
                _ = simulation.sync(limitMilliseconds: options.convergenceBoundMilliseconds)
            }
            let left = owing()
            // Written whether or not it held, as above.
            transcript += (simulation.devices.map(\.name) + contactNames).map { .statement(.expect(.outbox(device: $0, namespace: "chat", count: 0))) }
            if !left.isEmpty {
                outcome.undelivered = true
                outcome.findings.append(
                    "deliveries still owed after everyone was reachable for \(options.convergenceBoundMilliseconds / 60_000) min: "
                        + left.map { "\($0.device) \($0.count)" }.joined(separator: ", "))
            }
            if simulation.sync(limitMilliseconds: options.convergenceBoundMilliseconds) == nil {
                judge("after the deliveries")
            } else {
                outcome.findings.append("did not settle after the deliveries: \(simulation.stillMoving() ?? "")")
                outcome.convergenceMilliseconds = nil
            }
        }
        if hubClients > 0, let hub = simulation.hub {
            // Healed: the hub up, every client retries what failed and syncs until quiet, twice round
            // (a halted ledger client is reset), then all are judged.
            try mirror.heal(simulation) { try run($0) }
            let oracle = hub.oracle
            try oracle.check(hub)
            // The same judgement in the run's scenario, so that replaying a failed run fails too.
            transcript.append(.statement(.expect(.hub(.clientsAgree))))
            outcome.mirrorFailures = oracle.failures
            outcome.mirrorMutations = oracle.appliedCount
            outcome.findings += oracle.findings
        }
        outcome.operations = simulation.statistics.operations
        outcome.clientOperations = simulation.statistics.clientOperations
        outcome.deletes = simulation.statistics.deletes
        outcome.frames = simulation.statistics.frames
        outcome.faults = simulation.statistics.faults
        outcome.resurrections = simulation.oracle.resurrections
        outcome.lostWrites = simulation.oracle.lostWrites
        outcome.leaksAtTheLimit = simulation.oracle.leaksAtTheLimit
        outcome.reissuesAtTheLimit = simulation.oracle.reissuesAtTheLimit
        outcome.unreadable = simulation.oracle.unreadable
        outcome.findings += simulation.oracle.findings
        outcome.tombstonesLeft = simulation.totalTombstones()
        if options.requiresCollection && outcome.convergenceMilliseconds != nil && outcome.tombstonesLeft > 0 {
            outcome.uncollected = true
            outcome.findings.append(
                "G4: \(outcome.tombstonesLeft) tombstones left after everyone was reachable for \(options.collectionBoundMilliseconds / 60_000) min")
        }
        outcome.eventLogHash = simulation.eventLogHash
        outcome.wireDigest = simulation.wireDigest
        outcome.timeline = simulation.timeline
        outcome.devices = Array(Set(simulation.timeline.compactMap(\.device))).sorted()
        outcome.endTime = simulation.now
        outcome.transcript = transcript
        return outcome
    }
}

/// A line of a run's transcript: a statement, printed only when the scenario is read.
enum TranscriptLine: Sendable {
    case statement(Statement)
    case comment(String)

    var text: String {
        switch self {
        case .statement(let statement): statement.description
        case .comment(let text): text
        }
    }
}
