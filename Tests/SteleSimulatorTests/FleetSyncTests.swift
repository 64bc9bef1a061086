import SteleSimulator
import Testing
import TestSupport
@testable import Stele

/// Fleet sync end to end: nodes, codec and reconcile over the in-memory network.
@Suite struct FleetSyncTests {
    /// `count` replicas of one account with the workload's namespaces declared.
    static func fleet(_ count: Int, seed: UInt64) throws -> TestFleet {
        let fleet = try TestFleet(count: count, seed: seed)
        for replica in fleet.replicas { try RandomWorkload.declare(on: replica) }
        return fleet
    }

    static func expectConverged(_ fleet: TestFleet, seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let reference = fleet[0]
        for replica in fleet.replicas.dropFirst() {
            for name in ["notes", "flags", "memory", "sealed"] {
                #expect(try replica.digest(of: name) == reference.digest(of: name), "seed \(seed): \(name) roots differ", sourceLocation: sourceLocation)
            }
            #expect(try RandomWorkload.visible(replica) == RandomWorkload.visible(reference), "seed \(seed): visible state differs", sourceLocation: sourceLocation)
            #expect(try RandomWorkload.snapshot(replica) == RandomWorkload.snapshot(reference), "seed \(seed): stored state differs", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: 0..<25)
    func twoReplicasConvergeFromDivergentStates(seed: UInt64) throws {
        var generator = SeededGenerator(seed: seed)
        let fleet = try Self.fleet(2, seed: seed)
        for (index, replica) in fleet.replicas.enumerated() {
            try RandomWorkload.run(replica, steps: Int.random(in: 0...120, using: &generator), clock: fleet.clocks[index], &generator)
        }
        let driver = FleetDriver(replicas: fleet.replicas, network: .init(delayMilliseconds: 1...80, duplicatePercent: 20), seed: seed)
        driver.start()
        #expect(driver.runUntilConverged(limitMilliseconds: 600_000), "seed \(seed): did not converge")
        try Self.expectConverged(fleet, seed: seed)
    }

    @Test(arguments: 0..<10)
    func fiveReplicasConvergeWithFramesReorderedAndDuplicated(seed: UInt64) throws {
        var generator = SeededGenerator(seed: seed &+ 1_000)
        let fleet = try Self.fleet(5, seed: seed)
        for (index, replica) in fleet.replicas.enumerated() {
            try RandomWorkload.run(replica, steps: Int.random(in: 10...80, using: &generator), clock: fleet.clocks[index], &generator)
        }
        let driver = FleetDriver(replicas: fleet.replicas, network: .init(delayMilliseconds: 1...200, duplicatePercent: 30), seed: seed)
        driver.start()
        #expect(driver.runUntilConverged(limitMilliseconds: 900_000), "seed \(seed): did not converge")
        try Self.expectConverged(fleet, seed: seed)
        #expect(driver.traffic.duplicated > 0)
    }

    @Test(arguments: 0..<6)
    func replicasConvergeThroughLossAsLongAsFramesGetThroughEventually(seed: UInt64) throws {
        var generator = SeededGenerator(seed: seed &+ 2_000)
        let fleet = try Self.fleet(3, seed: seed)
        for (index, replica) in fleet.replicas.enumerated() {
            try RandomWorkload.run(replica, steps: 60, clock: fleet.clocks[index], &generator)
        }
        let driver = FleetDriver(
            replicas: fleet.replicas, network: .init(delayMilliseconds: 1...100, lossPercent: 25, duplicatePercent: 10),
            configuration: FleetConfiguration(advertiseIntervalMilliseconds: 2_000, sessionTimeoutMilliseconds: 1_000), seed: seed)
        driver.start()
        driver.advance(byMilliseconds: 60_000)
        driver.network.lossPercent = 0
        #expect(driver.runUntilConverged(limitMilliseconds: 600_000), "seed \(seed): did not converge")
        try Self.expectConverged(fleet, seed: seed)
    }

    /// 000 §1: the phone deletes a conversation while the iPad sleeps; the iPad
    /// re-ships its rows on waking; nothing comes back to any screen, and the rows
    /// are gone from disk (erasure).
    @Test func aConversationDeletedWhileTheIPadSleptStaysDeletedAndErased() throws {
        let fleet = try Self.fleet(2, seed: 1)
        let (phone, iPad) = (fleet[0], fleet[1])
        for body in ["one", "two", "three", "four"] { try phone.log("memory").append(group: "C", body: body.bytes) }
        let driver = FleetDriver(replicas: fleet.replicas, seed: 1)
        driver.start()
        #expect(driver.runUntilConverged())
        #expect(try iPad.log("memory").live(group: "C").count == 4)

        driver.offline = [iPad.device]
        try phone.log("memory").bury("C")
        driver.localChange(on: phone.device)
        driver.advance(byMilliseconds: 120_000)
        driver.offline = []
        #expect(driver.runUntilConverged())
        for replica in [phone, iPad] {
            #expect(try replica.log("memory").live(group: "C").isEmpty)
            #expect(try replica.log("memory").storedEventCount(group: "C") == 0)
        }
        try Self.expectConverged(fleet, seed: 1)
    }

    @Test func keysDeletedOnBothSidesEndWithTheSameTombstone() throws {
        let fleet = try Self.fleet(2, seed: 2)
        let (a, b) = (fleet[0], fleet[1])
        try a.causal("notes").put("k", [1])
        let driver = FleetDriver(replicas: fleet.replicas, seed: 2)
        driver.start()
        #expect(driver.runUntilConverged())
        driver.offline = [a.device, b.device]
        try a.causal("notes").delete("k")
        try b.causal("notes").delete("k")
        #expect(try a.causal("notes").record("k") != b.causal("notes").record("k"))
        driver.offline = []
        // Roots are already equal (no live leaves); the periodic advertisement sees
        // equal roots, so tombstones travel on the next reconcile of a difference.
        try a.causal("notes").put("other", [2])
        driver.localChange(on: a.device)
        #expect(driver.runUntilConverged())
        #expect(try a.causal("notes").record("k") == b.causal("notes").record("k"))
        #expect(try a.causal("notes").record("k")?.isTombstone == true)
    }

    @Test func aConcurrentDeleteLosesToAnEditOnBothDevices() throws {
        let fleet = try Self.fleet(2, seed: 3)
        let (a, b) = (fleet[0], fleet[1])
        try a.causal("notes").put("note", "v1".bytes)
        let driver = FleetDriver(replicas: fleet.replicas, seed: 3)
        driver.start()
        #expect(driver.runUntilConverged())
        driver.offline = [a.device, b.device]
        try a.causal("notes").put("note", "v2".bytes)
        try b.causal("notes").delete("note")
        driver.offline = []
        driver.localChange(on: a.device)
        driver.localChange(on: b.device)
        #expect(driver.runUntilConverged())
        #expect(try a.causal("notes").get("note") == "v2".bytes)
        #expect(try b.causal("notes").get("note") == "v2".bytes)
    }

    @Test func aGenerationGapStopsContentReconcileBothWays() throws {
        let fleet = try Self.fleet(2, seed: 4)
        let (a, b) = (fleet[0], fleet[1])
        try a.causal("notes").put("from-a", [1])
        try b.causal("notes").put("from-b", [2])
        try b.setGeneration(1)
        let driver = FleetDriver(replicas: fleet.replicas, seed: 4)
        driver.start()
        driver.advance(byMilliseconds: 300_000)
        #expect(try a.causal("notes").get("from-b") == nil)
        #expect(try b.causal("notes").get("from-a") == nil)
        #expect(driver.traffic.frames > 0)
        let gaps = driver.events.filter { $0.event.kind == .generationGap }
        #expect(Set(gaps.map(\.device)) == [a.device, b.device])
        // Logged once per peer, not on every advertisement.
        #expect(gaps.count == 2)
        #expect(!driver.events.contains { $0.event.kind == .sessionStarted })
    }
}
