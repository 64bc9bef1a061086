import Testing
import TestSupport
@testable import SteleSimulator
@testable import Stele

/// Fleet sync end to end: nodes, codec and reconcile over the simulated network,
/// checked by the oracle.
@Suite struct FleetSyncTests {
    /// A simulation of `count` devices with the workload's namespaces, after
    /// `steps` random writes made while every device was offline (maximally divergent).
    static func divergent(_ count: Int, steps: Int, seed: UInt64) throws -> Simulation {
        let simulation = try Simulation(seed: seed)
        for namespace in Workload.namespaces { try simulation.declare(namespace.name, namespace.kind) }
        for index in 0..<count { try simulation.addDevice("d\(index)") }
        for device in simulation.devices { try simulation.setOnline(device.name, false) }
        var random = SplitMix64(seed: seed)
        var workload = Workload(keys: 25)
        for _ in 0..<steps {
            simulation.advance(byMilliseconds: random.value(in: 0...50))
            simulation.perform(simulation.devices.randomElement(using: &random)!.name, workload.next(&random))
        }
        for device in simulation.devices { try simulation.setOnline(device.name, true) }
        return simulation
    }

    static func expectConverged(_ simulation: Simulation, seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let reference = try SimulationState.snapshot(simulation.devices[0].replica, simulation.namespaces)
        for device in simulation.devices.dropFirst() {
            let state = try SimulationState.snapshot(device.replica, simulation.namespaces)
            #expect(state == reference, "seed \(seed): \(SimulationState.difference(reference, state))", sourceLocation: sourceLocation)
        }
        try simulation.checkOracle()
        #expect(simulation.oracle.unreadable == 0, "seed \(seed): \(simulation.oracle.findings)", sourceLocation: sourceLocation)
        #expect(simulation.oracle.resurrections == 0, "seed \(seed): \(simulation.oracle.findings)", sourceLocation: sourceLocation)
        #expect(simulation.oracle.lostWrites == 0, "seed \(seed): \(simulation.oracle.findings)", sourceLocation: sourceLocation)
    }

    @Test(arguments: 0..<25)
    func twoReplicasConvergeFromDivergentStates(seed: UInt64) throws {
        let simulation = try Self.divergent(2, steps: Int(seed % 7) * 25, seed: seed)
        simulation.network.delayMilliseconds = 1...80
        simulation.network.duplicatePercent = 20
        #expect(simulation.sync() == nil, "seed \(seed): did not converge")
        try Self.expectConverged(simulation, seed: seed)
    }

    @Test(arguments: 0..<10)
    func fiveReplicasConvergeWithFramesReorderedAndDuplicated(seed: UInt64) throws {
        let simulation = try Self.divergent(5, steps: 200, seed: seed &+ 1_000)
        simulation.network.delayMilliseconds = 1...400
        simulation.network.duplicatePercent = 30
        #expect(simulation.sync() == nil, "seed \(seed): did not converge")
        try Self.expectConverged(simulation, seed: seed)
        #expect(simulation.statistics.faults["dup", default: 0] > 0)
    }

    @Test(arguments: 0..<6)
    func replicasConvergeAfterALossyNetworkHeals(seed: UInt64) throws {
        let simulation = try Self.divergent(3, steps: 150, seed: seed &+ 2_000)
        simulation.network.lossPercent = 25
        simulation.network.duplicatePercent = 10
        simulation.advance(byMilliseconds: 120_000)
        #expect(simulation.statistics.faults["loss", default: 0] > 0)
        simulation.heal()
        #expect(simulation.sync() == nil, "seed \(seed): did not converge")
        try Self.expectConverged(simulation, seed: seed)
    }

    /// 000 §1: the phone deletes a conversation while the iPad sleeps; the iPad
    /// re-ships its rows on waking; nothing comes back to any screen, and the rows
    /// are gone from disk (erasure).
    @Test func aConversationDeletedWhileTheIPadSleptStaysDeletedAndErased() throws {
        let simulation = try Simulation(seed: 1)
        try simulation.declare("memory", .log)
        try simulation.addDevice("phone")
        try simulation.addDevice("ipad")
        for body in ["one", "two", "three", "four"] { simulation.perform("phone", .append(namespace: "memory", group: "C", value: body)) }
        #expect(simulation.sync() == nil)
        let iPad = try #require(simulation.device("ipad")).replica
        #expect(try iPad.log("memory").live(group: "C").count == 4)
        try simulation.setOnline("ipad", false)
        simulation.perform("phone", .bury(namespace: "memory", group: "C"))
        simulation.advance(byMilliseconds: 120_000)
        try simulation.setOnline("ipad", true)
        #expect(simulation.sync() == nil)
        for device in simulation.devices {
            #expect(try device.replica.log("memory").live(group: "C").isEmpty)
            #expect(try device.replica.log("memory").storedEventCount(group: "C") == 0)
        }
        try Self.expectConverged(simulation, seed: 1)
    }

    @Test func keysDeletedOnBothSidesEndWithTheSameTombstone() throws {
        let simulation = try Simulation(seed: 2)
        // The tombstone itself is under test: no barrier round may collect it.
        simulation.setCollection(false)
        try simulation.declare("notes", .causal)
        try simulation.addDevice("a")
        try simulation.addDevice("b")
        simulation.perform("a", .put(namespace: "notes", key: "k", value: "1"))
        #expect(simulation.sync() == nil)
        try simulation.partition([["a"], ["b"]])
        simulation.perform("a", .delete(namespace: "notes", key: "k"))
        simulation.perform("b", .delete(namespace: "notes", key: "k"))
        let (a, b) = (try #require(simulation.device("a")).replica, try #require(simulation.device("b")).replica)
        #expect(try a.causal("notes").record("k") != b.causal("notes").record("k"))
        simulation.heal()
        // Roots are equal (tombstones are not leaves): tombstone sets travel with the
        // next reconcile, which any live difference starts.
        simulation.perform("a", .put(namespace: "notes", key: "other", value: "2"))
        #expect(simulation.sync() == nil)
        #expect(try a.causal("notes").record("k") == b.causal("notes").record("k"))
        #expect(try a.causal("notes").record("k")?.isTombstone == true)
    }

    @Test func aConcurrentDeleteLosesToAnEditOnBothDevices() throws {
        let simulation = try Simulation(seed: 3)
        try simulation.declare("notes", .causal)
        try simulation.addDevice("a")
        try simulation.addDevice("b")
        simulation.perform("a", .put(namespace: "notes", key: "note", value: "v1"))
        #expect(simulation.sync() == nil)
        try simulation.partition([["a"], ["b"]])
        simulation.perform("a", .put(namespace: "notes", key: "note", value: "v2"))
        simulation.perform("b", .delete(namespace: "notes", key: "note"))
        simulation.heal()
        #expect(simulation.sync() == nil)
        for device in simulation.devices { #expect(try device.replica.causal("notes").get("note") == Array("v2".utf8)) }
        #expect(simulation.devices.contains { !$0.conflicts.isEmpty })
        try Self.expectConverged(simulation, seed: 3)
    }

    @Test func aGenerationGapStopsContentReconcileBothWays() throws {
        let simulation = try Simulation(seed: 4)
        // With collection off nobody tries to catch up: the gap alone is under test.
        simulation.setCollection(false)
        try simulation.declare("notes", .causal)
        let a = try simulation.addDevice("a").replica
        let b = try simulation.addDevice("b").replica
        simulation.perform("a", .put(namespace: "notes", key: "from-a", value: "1"))
        simulation.perform("b", .put(namespace: "notes", key: "from-b", value: "2"))
        try b.setGeneration(1)
        simulation.advance(byMilliseconds: 300_000)
        #expect(try a.causal("notes").get("from-b") == nil)
        #expect(try b.causal("notes").get("from-a") == nil)
        #expect(simulation.statistics.frames > 0)
    }

    /// DESIGN §6 "No deadlock without the anchor": behind a sibling and with no
    /// anchor to read, a device takes the sibling's snapshot and keeps its own
    /// newer writes.
    @Test func aDeviceBehindWithoutAnAnchorCatchesUpFromASibling() throws {
        let simulation = try Simulation(seed: 4)
        try simulation.declare("notes", .causal)
        let a = try simulation.addDevice("a")
        let b = try simulation.addDevice("b")
        simulation.perform("a", .put(namespace: "notes", key: "from-a", value: "1"))
        simulation.perform("b", .put(namespace: "notes", key: "from-b", value: "2"))
        try b.replica.setGeneration(1)
        simulation.anchorSubstrate.isDown = true
        #expect(simulation.sync() == nil)
        #expect(a.replica.generation == 1)
        #expect(a.node.recoveryStatus == .current)
        for device in [a, b] {
            #expect(try device.replica.causal("notes").get("from-a") == "1".bytes)
            #expect(try device.replica.causal("notes").get("from-b") == "2".bytes)
        }
        #expect(a.logged[.recovered] == 1)
    }
}
