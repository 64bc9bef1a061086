import Stele

/// One randomized run (`stele simulate`): a fault phase of random writes and
/// faults, then a healed phase that must converge within a bound, then the
/// oracle's verdict. TigerBeetle's VOPR is the model: a failure names its seed.
public struct SimulationRun {
    /// The faults a run may inject.
    public enum Fault: String, Sendable, CaseIterable {
        case loss, dup, reorder, partition, offline, crash, restore, skew, join, revoke, storage, anchor
    }

    public struct Options: Sendable {
        public var devices = 3
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

        public init() {}
    }

    /// What one run found.
    public struct Outcome: Sendable {
        public let seed: UInt64
        public var operations = 0
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
        /// The run as a scenario: `stele scenario FILE --seed S` replays it.
        public var scenario = ""

        /// G4 failed: tombstones were left although collection was required.
        public var uncollected = false
        /// Deliveries still owed once everyone had been reachable for the bound.
        public var undelivered = false

        public var failed: Bool {
            resurrections > 0 || lostWrites > 0 || unreadable > 0 || uncheckable > 0 || convergenceMilliseconds == nil || uncollected || undelivered
        }
    }

    public static func run(seed: UInt64, options: Options) throws -> Outcome {
        let simulation = try Simulation(seed: seed)
        simulation.setCollection(options.collects)
        var random = SplitMix64(seed: seed ^ 0x5EED_F00D)
        // Every step is also written down as a scenario statement: the run's
        // transcript replays it under `stele scenario --seed` (DESIGN §9).
        var transcript = ["# stele simulate --seed \(seed) --devices \(options.devices) --steps \(options.steps): replay with stele scenario FILE --seed \(seed)"]
        if !options.collects { transcript.append("gc off") }
        for namespace in Workload.namespaces {
            try simulation.declare(namespace.name, namespace.kind)
            transcript.append("namespace \(namespace.name) \(namespace.kind.rawValue)")
        }
        let names = (0..<options.devices).map { "d\($0)" }
        for name in names { try simulation.addDevice(name) }
        transcript.append("fleet " + names.joined(separator: " "))
        let contactNames = options.contact ? ["bob0", "bob1"] : []
        if options.contact {
            try simulation.addContact("bob", devices: contactNames)
            try simulation.addConversation("chat", with: "bob")
            transcript += ["contact bob " + contactNames.joined(separator: " "), "conversation chat with bob"]
        }
        var nextDevice = options.devices
        var workload = Workload()
        var backups: [String: String] = [:]
        // In a fixed order: a Set's order changes from process to process.
        let faults = Fault.allCases.filter { options.faults.contains($0) }

        // Fault phase.
        for _ in 0..<options.steps {
            let pause = random.value(in: 10...2_000)
            simulation.advance(byMilliseconds: pause)
            transcript.append("advance \(pause)ms")
            let active = simulation.devices.map(\.name)
            guard var name = active.randomElement(using: &random) else { break }
            var operation: WorkloadOperation
            if !contactNames.isEmpty, random.chance(25) {
                name = contactNames[Int(random.next() % UInt64(contactNames.count))]
                operation = workload.nextForContact(&random)
            } else {
                operation = workload.next(&random)
            }
            simulation.perform(name, operation)
            if let refusal = simulation.lastRefusal, refusal.code == .messageMissing {
                // The workload aimed at a message this device has not received: nothing happened.
                transcript.append("# \(name) \(operation): not run, \(refusal.message)")
            } else {
                transcript.append("\(name) \(operation)")
            }
            guard random.chance(12) else { continue }
            switch faults.randomElement(using: &random) {
            case .loss:
                let percent = random.value(in: 5...40)
                simulation.network.lossPercent = Double(percent)
                transcript.append("network loss \(percent)")
            case .dup:
                let percent = random.value(in: 5...30)
                simulation.network.duplicatePercent = Double(percent)
                transcript.append("network duplicate \(percent)")
            case .reorder:
                let longest = random.value(in: 100...3_000)
                simulation.network.delayMilliseconds = 1...longest
                simulation.count("reorder")
                transcript.append("network delay 1ms \(longest)ms")
            case .partition:
                let shuffled = active.shuffled(using: &random)
                let cut = max(1, shuffled.count / 2)
                simulation.partition([Array(shuffled[..<cut]), Array(shuffled[cut...])])
                transcript.append("partition \(shuffled[..<cut].joined(separator: " ")) / \(shuffled[cut...].joined(separator: " "))")
            case .offline:
                let target = (active + contactNames).randomElement(using: &random)!
                let going = simulation.device(target)?.isOnline ?? false
                simulation.setOnline(target, !going)
                if going { simulation.count("offline") }
                transcript.append("\(going ? "offline" : "online") \(target)")
            case .crash:
                let target = active.randomElement(using: &random)!
                try simulation.crash(target)
                transcript.append("crash \(target)")
            case .restore:
                let target = active.randomElement(using: &random)!
                if let label = backups[target], random.chance(50) {
                    // Rarely the key store goes back with the replica: the stated
                    // limit of the stamp floor, whose findings are counted apart.
                    let withKeys = random.chance(10)
                    try simulation.restore(target, from: label, withKeys: withKeys)
                    transcript.append("restore \(target) from \(label)" + (withKeys ? " with keys" : ""))
                } else {
                    let label = "\(target)-\(simulation.now)"
                    try simulation.backup(target, as: label)
                    backups[target] = label
                    transcript.append("backup \(target) as \(label)")
                }
            case .skew:
                let target = active.randomElement(using: &random)!
                let skew = random.value(in: -600_000...600_000)
                simulation.skew(target, byMilliseconds: skew)
                transcript.append("skew \(target) \(skew)ms")
            case .join:
                guard simulation.devices.count < options.devices + 2 else { continue }
                let name = "d\(nextDevice)"
                nextDevice += 1
                try simulation.addDevice(name)
                simulation.count("join")
                transcript.append("join \(name)")
            case .revoke:
                guard simulation.devices.count > 2, let target = active.last else { continue }
                try simulation.revoke(target)
                backups[target] = nil
                simulation.count("revoke")
                transcript.append("revoke \(target)")
            case .storage:
                // A failed SQLite step a little later: a write refused, or a
                // reconcile rolled back mid-apply.
                let fault = StorageFault.allCases.randomElement(using: &random)!
                let target = active.randomElement(using: &random)!
                let after = Int(random.value(in: 0...40))
                simulation.failStorage(target, with: fault, afterSteps: after)
                transcript.append("storage \(target) fail \(fault.rawValue) after \(after)")
            case .anchor:
                // The anchor substrate in trouble: out of reach (or back), a failed
                // upload, or a slow one that may outlive its round (001 §8).
                simulation.count("anchor")
                switch random.value(in: 0...2) {
                case 0:
                    simulation.anchorSubstrate.isDown.toggle()
                    transcript.append(simulation.anchorSubstrate.isDown ? "anchor down" : "anchor up")
                case 1:
                    simulation.anchorSubstrate.failNextWrite = true
                    transcript.append("anchor fail next write")
                default:
                    let delay = random.value(in: 1_000...30_000)
                    simulation.anchorSubstrate.delayNextWriteMilliseconds = delay
                    transcript.append("anchor delay next write \(delay)ms")
                }
            case nil:
                break
            }
        }

        // Healed phase: everyone online and reachable over a perfect network, the anchor reachable.
        simulation.heal()
        if simulation.anchorSubstrate.isDown {
            simulation.anchorSubstrate.isDown = false
            transcript.append("anchor up")
        }
        for name in simulation.devices.map(\.name) + contactNames { simulation.setOnline(name, true) }
        transcript += [
            "heal", "online " + (simulation.devices.map(\.name) + contactNames).joined(separator: " "), "sync", "expect converged", "expect resurrections 0",
            "expect lost-writes 0",
        ]
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
                simulation.advance(byMilliseconds: 60_000)
                transcript += ["advance 1m", "sync"]
                if let moving = simulation.sync(limitMilliseconds: options.convergenceBoundMilliseconds) {
                    outcome.findings.append("did not settle while collecting: \(moving)")
                    outcome.convergenceMilliseconds = nil
                    break
                }
            }
            if simulation.totalTombstones() == 0 {
                outcome.collectionMilliseconds = simulation.now - start
                transcript += simulation.devices.map { "expect \($0.name) tombstones 0" }
            }
            if outcome.convergenceMilliseconds != nil { judge("after collecting") }
            transcript += ["expect resurrections 0", "expect lost-writes 0"]
        }
        if outcome.convergenceMilliseconds != nil && options.contact {
            // Everyone reachable: whatever either side owes the other is delivered
            // within the bound (a wait for an agreement lasts one advertisement).
            let start = simulation.now
            let owing = { simulation.owingDeliveries() }
            while !owing().isEmpty && simulation.now - start < options.convergenceBoundMilliseconds {
                simulation.advance(byMilliseconds: 60_000)
                transcript += ["advance 1m", "sync"]
                _ = simulation.sync(limitMilliseconds: options.convergenceBoundMilliseconds)
            }
            let left = owing()
            if left.isEmpty {
                transcript += (simulation.devices.map(\.name) + contactNames).map { "expect \($0) outbox chat 0" }
            } else {
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
        outcome.operations = simulation.statistics.operations
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
        outcome.scenario = transcript.joined(separator: "\n") + "\n"
        return outcome
    }
}
