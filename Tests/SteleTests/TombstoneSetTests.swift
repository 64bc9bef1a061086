import Testing
import TestSupport
@testable import Stele

/// The bulk tombstone path reconcile takes must decide exactly as the general merge.
@Suite struct TombstoneSetTests {
    @Test(arguments: 0..<20)
    func theBulkPathMatchesTheGeneralMergeRowForRow(seed: UInt64) throws {
        var generator = SeededGenerator(seed: seed)
        let fleet = try TestFleet(count: 3, seed: seed)
        // Three devices write, delete and partly exchange, so local rows are live,
        // tombstoned, concurrent (siblings) or absent.
        for _ in 0..<120 {
            let device = Int.random(in: 0..<3, using: &generator)
            let notes = try fleet[device].causal("notes")
            let key = "k\(Int.random(in: 0..<25, using: &generator))"
            if Bool.random(using: &generator) { try notes.put(key, [UInt8.random(in: 0...255, using: &generator)]) } else { try notes.delete(key) }
            if Int.random(in: 0..<3, using: &generator) == 0, let record = try notes.record(key) {
                try fleet[(device + 1) % 3].causal("notes").apply(record)
            }
        }
        let tombstones = try fleet[0].causal("notes").tombstones() + fleet[2].causal("notes").tombstones().filter { $0.key.hasSuffix("3") }
        // Two copies of device 1's store: one takes the bulk path, one the general merge.
        let bulk = try Fixtures.memoryReplica(account: fleet.account, device: fleet.devices[1])
        let general = try Fixtures.memoryReplica(account: fleet.account, device: fleet.devices[1])
        for record in try fleet[1].causal("notes").records() {
            try bulk.causal("notes").apply(record)
            try general.causal("notes").apply(record)
        }
        let unique = Dictionary(tombstones.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first }).values.sorted { $0.key < $1.key }
        let result = try bulk.causal("notes").applyTombstones(unique)
        for tombstone in unique { try general.causal("notes").apply(tombstone) }
        #expect(try bulk.causal("notes").records() == general.causal("notes").records(), "seed \(seed)")
        #expect(try bulk.digest(of: "notes") == general.digest(of: "notes"), "seed \(seed)")
        #expect(try bulk.causal("notes").tombstoneFingerprint() == general.causal("notes").tombstoneFingerprint(), "seed \(seed)")
        // What it reports as differing is exactly the tombstones now held unlike the ones received.
        let received = Dictionary(unique.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        let expected = try general.causal("notes").tombstones().filter { received[$0.key] != nil && received[$0.key] != $0 }
        #expect(result.differing.sorted { $0.key < $1.key } == expected, "seed \(seed)")
    }
}
