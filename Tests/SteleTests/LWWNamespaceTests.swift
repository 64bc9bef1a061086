import Testing
import TestSupport
@testable import Stele

@Suite struct LWWNamespaceTests {
    static let writerA = Fixtures.devices(2)[0]
    static let writerB = Fixtures.devices(2)[1]

    private func stamp(_ milliseconds: Int64, _ writer: DeviceID) -> WriteStamp {
        WriteStamp(timestamp: HybridTimestamp(milliseconds: milliseconds, logical: 0), writer: writer)
    }

    private func outcome(applying records: [LWWRecord]) throws -> LWWRecord? {
        let replica = try Fixtures.memoryReplica(device: Fixtures.device(99))
        let flags = try replica.lww("flags")
        for record in records { try flags.apply(record) }
        return try flags.record(records[0].key)
    }

    @Test func readsNeverSurfaceDeletes() throws {
        let replica = try Fixtures.memoryReplica()
        let flags = try replica.lww("flags")
        try flags.put("a", [1])
        #expect(try flags.delete("a") != nil)
        #expect(try flags.get("a") == nil)
        #expect(try flags.entries().isEmpty)
        #expect(try flags.count() == 0)
        #expect(try flags.tombstoneCount() == 1)
        #expect(try flags.delete("a") == nil)
    }

    @Test func theLaterWriteWinsInBothOrders() throws {
        let early = LWWRecord(key: "k", value: "early".bytes, stamp: stamp(100, Self.writerB))
        let late = LWWRecord(key: "k", value: "late".bytes, stamp: stamp(200, Self.writerA))
        for order in [early, late].permutations() { #expect(try outcome(applying: order) == late) }
    }

    @Test func aLaterDeleteWinsAndAnEarlierOneLosesInBothOrders() throws {
        let write = LWWRecord(key: "k", value: "v".bytes, stamp: stamp(100, Self.writerA))
        let laterDelete = LWWRecord(key: "k", value: nil, stamp: stamp(200, Self.writerB))
        let earlierDelete = LWWRecord(key: "k", value: nil, stamp: stamp(50, Self.writerB))
        for order in [write, laterDelete].permutations() { #expect(try outcome(applying: order) == laterDelete) }
        for order in [write, earlierDelete].permutations() { #expect(try outcome(applying: order) == write) }
    }

    @Test func anExactTieIsWonByTheDeleteInBothOrders() throws {
        // The writer with the larger id writes; the smaller one deletes at the same instant:
        // the device-id order alone would pick the write, the rule picks the delete (000 §5).
        let write = LWWRecord(key: "k", value: "v".bytes, stamp: stamp(100, Self.writerB))
        let delete = LWWRecord(key: "k", value: nil, stamp: stamp(100, Self.writerA))
        for order in [write, delete].permutations() { #expect(try outcome(applying: order) == delete) }
    }

    @Test func aTieWonByTheDeleteIsReportedAsAConflict() throws {
        let replica = try Fixtures.memoryReplica(device: Fixtures.device(99))
        let flags = try replica.lww("flags")
        try flags.apply(LWWRecord(key: "k", value: "v".bytes, stamp: stamp(100, Self.writerB)))
        let result = try flags.apply(LWWRecord(key: "k", value: nil, stamp: stamp(100, Self.writerA)))
        #expect(result.effect == .deleted)
        #expect(result.conflict == Conflict(resolution: .deleteWonTie, lostValue: "v".bytes, losingDevice: Self.writerB))

        let other = try Fixtures.memoryReplica(device: Fixtures.device(98)).lww("flags")
        try other.apply(LWWRecord(key: "k", value: nil, stamp: stamp(100, Self.writerA)))
        let reverse = try other.apply(LWWRecord(key: "k", value: "v".bytes, stamp: stamp(100, Self.writerB)))
        #expect(reverse.effect == .unchanged)
        #expect(reverse.conflict?.resolution == .deleteWonTie)
    }

    @Test func aTieBetweenTwoWritesGoesToTheLargerDeviceIDInBothOrders() throws {
        let fromA = LWWRecord(key: "k", value: "a".bytes, stamp: stamp(100, Self.writerA))
        let fromB = LWWRecord(key: "k", value: "b".bytes, stamp: stamp(100, Self.writerB))
        for order in [fromA, fromB].permutations() { #expect(try outcome(applying: order) == fromB) }
    }

    @Test func applyingTheSameRecordTwiceChangesNothing() throws {
        let replica = try Fixtures.memoryReplica(device: Fixtures.device(99))
        let flags = try replica.lww("flags")
        let record = LWWRecord(key: "k", value: "v".bytes, stamp: stamp(100, Self.writerA))
        #expect(try flags.apply(record).effect == .inserted)
        #expect(try flags.apply(record).effect == .unchanged)
    }

    @Test func aLocalWriteAfterSeeingAFutureTimestampStillWins() throws {
        let fleet = try TestFleet(count: 2)
        fleet.clocks[1].advance(byMilliseconds: 3_600_000)  // B's clock is an hour fast
        try fleet[1].lww("flags").put("k", "from the future".bytes)
        try fleet[0].lww("flags").apply(try #require(try fleet[1].lww("flags").record("k")))
        try fleet[0].lww("flags").put("k", "newer".bytes)
        try fleet[1].lww("flags").apply(try #require(try fleet[0].lww("flags").record("k")))
        #expect(try fleet[1].lww("flags").get("k") == "newer".bytes)
    }

    @Test func malformedRecordsAreRefused() throws {
        let flags = try Fixtures.memoryReplica().lww("flags")
        let tooLong = LWWRecord(key: String(repeating: "x", count: Limits.maximumKeyBytes + 1), value: [1], stamp: stamp(1, Self.writerA))
        #expect { try flags.apply(tooLong) } throws: { ($0 as? ReplicaError)?.code == .invalidRecord }
        #expect(try flags.records().isEmpty)
    }
}
