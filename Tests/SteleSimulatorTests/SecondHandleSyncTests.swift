import Foundation
import SteleSimulator
import Testing
import TestSupport
@testable import Stele

/// A write through a second handle on a device's file reaches the fleet within
/// one advertisement interval, with nobody telling the node (issue 14 §3).
@Suite struct SecondHandleSyncTests {
    @Test func aWriteThroughASecondHandleSyncsWithinOneAdvertisementInterval() throws {
        // Stores as shipped: the fast storage holds each file through one handle only.
        let simulation = try Simulation(seed: 31, storage: .asShipped)
        try simulation.declare("notes", .causal)
        try simulation.declare("memory", .log)
        for name in ["phone", "laptop"] { try simulation.addDevice(name) }
        #expect(simulation.perform("phone", .put(namespace: "notes", key: "a", value: "1")))
        #expect(simulation.sync() == nil)
        let phone = try #require(simulation.device("phone"))
        // The app's own handle on the phone's file, sharing its key store (the stamp floor).
        let second = try Replica.open(
            at: phone.path, account: phone.account, device: phone.id, options: Replica.Options(clock: ManualWallClock(), stampFloor: phone.keys))
        try second.causal("notes").put("b", "from the second handle".bytes)
        try second.log("memory").append(group: "c1", body: "an event".bytes)
        try second.causal("notes").delete("a")
        // No localChange reaches the node: only its periodic advertisement.
        simulation.advance(byMilliseconds: FleetConfiguration().advertiseIntervalMilliseconds + 5_000)
        let laptop = try #require(simulation.device("laptop")).replica
        #expect(try laptop.causal("notes").get("b") == "from the second handle".bytes)
        #expect(try laptop.causal("notes").get("a") == nil)
        #expect(try laptop.log("memory").live(group: "c1").count == 1)
        #expect(simulation.sync() == nil)
        #expect(try laptop.digest(of: "notes") == phone.replica.digest(of: "notes"))
        // The node's own handle writes on top without reusing a counter of the second's.
        let next = try phone.replica.causal("notes").put("c", "3".bytes)
        let theirs = try #require(try second.causal("notes").record("b")?.versions.first?.dot)
        #expect(next.counter > theirs.counter)
    }
}
