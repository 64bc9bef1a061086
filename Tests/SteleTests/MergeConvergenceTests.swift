import Testing
import TestSupport
@testable import Stele

/// Seeded property tests: random histories on several devices, records exchanged
/// in random orders, partially and repeatedly; once everything has been delivered
/// everywhere, every replica holds identical records. Every failure names its seed.
@Suite struct MergeConvergenceTests {
    static let keys = ["a", "b", "c", "d"]

    private func randomStep(_ fleet: TestFleet, _ generator: inout SeededGenerator) throws {
        let device = Int.random(in: 0..<fleet.replicas.count, using: &generator)
        fleet.clocks[device].advance(byMilliseconds: Int64.random(in: -2...5, using: &generator))
        let replica = fleet[device]
        let key = Self.keys.randomElement(using: &generator)!
        switch Int.random(in: 0..<10, using: &generator) {
        case 0..<4: try replica.causal("notes").put(key, [UInt8.random(in: 0...255, using: &generator)])
        case 4..<6: try replica.causal("notes").delete(key)
        case 6: try replica.lww("flags").put(key, [UInt8.random(in: 0...255, using: &generator)])
        case 7: try replica.lww("flags").delete(key)
        case 8:
            // Appending to a buried group is refused by design; the test appends only to live ones.
            if try !replica.log("memory").isBuried(key) {
                try replica.log("memory").append(group: key, body: [UInt8.random(in: 0...255, using: &generator)])
            }
        default:
            if Bool.random(using: &generator) { try replica.log("memory").bury(key) }
            // Some of the time, deliver part of one device's state to another.
            let target = Int.random(in: 0..<fleet.replicas.count, using: &generator)
            try deliver(from: replica, to: fleet[target], fraction: 0.5, &generator)
        }
    }

    private func deliver(from source: Replica, to target: Replica, fraction: Double, _ generator: inout SeededGenerator) throws {
        guard source !== target else { return }
        for record in try source.causal("notes").records().shuffled(using: &generator) where Double.random(in: 0..<1, using: &generator) < fraction {
            try target.causal("notes").apply(record)
        }
        for record in try source.lww("flags").records().shuffled(using: &generator) where Double.random(in: 0..<1, using: &generator) < fraction {
            try target.lww("flags").apply(record)
        }
        for event in try source.log("memory").events().shuffled(using: &generator) where Double.random(in: 0..<1, using: &generator) < fraction {
            try target.log("memory").apply(event)
        }
    }

    @Test(arguments: 0..<60)
    func replicasConvergeWhateverTheOrderOfDelivery(seed: UInt64) throws {
        var generator = SeededGenerator(seed: seed)
        let fleet = try TestFleet(count: 3, seed: seed)
        for _ in 0..<40 { try randomStep(fleet, &generator) }
        // Full delivery, twice around in random pair orders, is enough for records to meet.
        for _ in 0..<2 {
            for source in fleet.replicas.shuffled(using: &generator) {
                for target in fleet.replicas.shuffled(using: &generator) { try deliver(from: source, to: target, fraction: 1, &generator) }
            }
        }
        let reference = fleet[0]
        for replica in fleet.replicas.dropFirst() {
            #expect(try replica.causal("notes").records() == reference.causal("notes").records(), "seed \(seed)")
            #expect(try replica.lww("flags").records() == reference.lww("flags").records(), "seed \(seed)")
            #expect(try replica.log("memory").events() == reference.log("memory").events(), "seed \(seed)")
            #expect(try replica.log("memory").live() == reference.log("memory").live(), "seed \(seed)")
        }
    }

    /// The merge is a join: applying a set of records in any order gives one result.
    @Test(arguments: 0..<40)
    func theCausalMergeIsOrderIndependent(seed: UInt64) throws {
        var generator = SeededGenerator(seed: seed)
        let fleet = try TestFleet(count: 3, seed: seed)
        var records: [CausalRecord] = []
        for _ in 0..<4 {
            let device = Int.random(in: 0..<3, using: &generator)
            let notes = try fleet[device].causal("notes")
            if Bool.random(using: &generator), try notes.get("k") != nil { try notes.delete("k") } else { try notes.put("k", [UInt8.random(in: 0...9, using: &generator)]) }
            records.append(try #require(try notes.record("k")))
            let other = Int.random(in: 0..<3, using: &generator)
            if Bool.random(using: &generator) { try fleet[other].causal("notes").apply(records.last!) }
        }
        var results: [CausalRecord?] = []
        for order in records.permutations() {
            let observer = try Fixtures.memoryReplica(account: fleet.account, device: Fixtures.device(1_000)).causal("notes")
            for record in order { try observer.apply(record) }
            results.append(try observer.record("k"))
        }
        #expect(Set(results.map { "\(String(describing: $0))" }).count == 1, "seed \(seed)")
    }
}
