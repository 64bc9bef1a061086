import Testing
import TestSupport
@testable import Stele

@Suite struct AppendOnlyNamespaceTests {
    @Test func theFirstWriteIsFinal() throws {
        let workouts = try Fixtures.memoryReplica().appendOnly("workouts")
        try workouts.put("run-1", "5 km".bytes)
        #expect { try workouts.put("run-1", "50 km".bytes) } throws: { ($0 as? ReplicaError)?.code == .appendOnlyIsFinal }
        #expect { try workouts.delete("run-1") } throws: { ($0 as? ReplicaError)?.code == .appendOnlyIsFinal }
        #expect(try workouts.get("run-1") == "5 km".bytes)
    }

    /// 002: "a tombstone can never beat a live copy", in either arrival order.
    @Test func tombstonesNeverBeatALiveCopyInEitherOrder() throws {
        let source = try Fixtures.memoryReplica(device: Fixtures.device(1)).appendOnly("workouts")
        try source.put("run-1", "5 km".bytes)
        let live = try #require(try source.record("run-1"))
        let tombstone = AppendOnlyRecord(
            key: "run-1", value: nil,
            stamp: WriteStamp(timestamp: HybridTimestamp(milliseconds: HybridTimestamp.maximumMilliseconds, logical: 0), writer: Fixtures.device(3)))
        for order in [live, tombstone].permutations() {
            let target = try Fixtures.memoryReplica(device: Fixtures.device(2)).appendOnly("workouts")
            for record in order {
                let outcome = try target.apply(record)
                if record.value == nil { #expect(outcome.effect == .discarded) }
            }
            #expect(try target.get("run-1") == "5 km".bytes)
        }
    }

    @Test func ofTwoConcurrentFirstWritesTheEarlierStaysInEitherOrder() throws {
        let fleet = try TestFleet(count: 2)
        fleet.clocks[0].advance(byMilliseconds: 5)  // A writes later
        try fleet[0].appendOnly("w").put("k", "later".bytes)
        try fleet[1].appendOnly("w").put("k", "earlier".bytes)
        let later = try #require(try fleet[0].appendOnly("w").record("k"))
        let earlier = try #require(try fleet[1].appendOnly("w").record("k"))
        let atA = try fleet[0].appendOnly("w").apply(earlier)
        #expect(atA.effect == .updated)
        #expect(atA.conflict?.resolution == .laterFirstWriteLost)
        #expect(atA.conflict?.lostValue == "later".bytes)
        let atB = try fleet[1].appendOnly("w").apply(later)
        #expect(atB.effect == .unchanged)
        #expect(atB.conflict?.lostValue == "later".bytes)
        for order in [later, earlier].permutations() {
            let target = try Fixtures.memoryReplica(device: Fixtures.device(9)).appendOnly("w")
            for record in order { try target.apply(record) }
            #expect(try target.record("k") == earlier)
        }
    }

    @Test func applyingTheSameRecordTwiceChangesNothing() throws {
        let source = try Fixtures.memoryReplica(device: Fixtures.device(1)).appendOnly("w")
        try source.put("k", [1])
        let record = try #require(try source.record("k"))
        let target = try Fixtures.memoryReplica(device: Fixtures.device(2)).appendOnly("w")
        #expect(try target.apply(record).effect == .inserted)
        #expect(try target.apply(record) == MergeOutcome(.unchanged))
    }
}
