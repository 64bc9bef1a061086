import Testing
import TestSupport
@testable import Stele

@Suite struct CausalNamespaceTests {
    @Test func readsNeverSurfaceTombstones() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        try notes.put("a", "1".bytes)
        try notes.put("b", "2".bytes)
        #expect(try notes.delete("a") != nil)
        #expect(try notes.get("a") == nil)
        #expect(try notes.entries().map(\.key) == ["b"])
        #expect(try notes.count() == 1)
        #expect(try notes.tombstoneCount() == 1)
        // The bookkeeping outlives the row (000 §4).
        #expect(try notes.record("a")?.isTombstone == true)
    }

    @Test func aDeleteBumpsTheOwnCounterSoItsTombstoneDominates() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        let written = try notes.put("a", [1])
        let before = try #require(try notes.record("a")).vector
        let deleted = try #require(try notes.delete("a"))
        let after = try #require(try notes.record("a")).vector
        #expect(after.compare(before) == .dominates)
        #expect(deleted.counter > written.counter)
        #expect(after[replica.device] == deleted.counter)
    }

    @Test func deletingWhatIsNotThereDoesNothing() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        #expect(try notes.delete("ghost") == nil)
        try notes.put("a", [1])
        try notes.delete("a")
        #expect(try notes.delete("a") == nil)
        #expect(try notes.tombstoneCount() == 1)
    }

    @Test func aPutAfterADeleteRevivesTheKeyWithADominatingVector() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        try notes.put("a", [1])
        try notes.delete("a")
        let tombstone = try #require(try notes.record("a")).vector
        try notes.put("a", [2])
        let revived = try #require(try notes.record("a")).vector
        #expect(revived.compare(tombstone) == .dominates)
        #expect(try notes.get("a") == [2])
        #expect(try notes.tombstoneCount() == 0)
    }

    @Test func aDeleteThatSawTheEditWinsInEveryArrivalOrder() throws {
        let fleet = try TestFleet(count: 3)
        let (a, b) = (try fleet[0].causal("notes"), try fleet[1].causal("notes"))
        try a.put("plan", "v1".bytes)
        try b.apply(try #require(try a.record("plan")))
        try b.delete("plan")
        let edit = try #require(try a.record("plan"))
        let tombstone = try #require(try b.record("plan"))
        for order in [edit, tombstone].permutations() {
            let observer = try Fixtures.memoryReplica(account: fleet.account, device: Fixtures.device(99)).causal("notes")
            for record in order { try observer.apply(record) }
            #expect(try observer.get("plan") == nil)
            #expect(try observer.record("plan") == tombstone)
        }
        #expect(try a.apply(tombstone).effect == .deleted)
        #expect(try a.get("plan") == nil)
    }

    @Test func addWinsAConcurrentDeleteLosesToAnEditOnBothSides() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (try fleet[0].causal("notes"), try fleet[1].causal("notes"))
        try a.put("note", "v1".bytes)
        try b.apply(try #require(try a.record("note")))
        // Concurrently: A edits, B deletes; neither has seen the other.
        try a.put("note", "v2".bytes)
        try b.delete("note")
        let edit = try #require(try a.record("note"))
        let tombstone = try #require(try b.record("note"))

        let atA = try a.apply(tombstone)
        #expect(atA.effect == .recorded)
        #expect(atA.conflict?.resolution == .deleteLostToEdit)
        let atB = try b.apply(edit)
        #expect(atB.effect == .inserted)
        #expect(atB.conflict?.resolution == .deleteLostToEdit)

        #expect(try a.get("note") == "v2".bytes)
        #expect(try b.get("note") == "v2".bytes)
        // The merged vector is recorded either way, so both sides now agree exactly.
        #expect(try a.record("note") == b.record("note"))
        #expect(try a.record("note")?.vector == edit.vector.merged(with: tombstone.vector))

        for order in [edit, tombstone].permutations() {
            let observer = try Fixtures.memoryReplica(account: fleet.account, device: Fixtures.device(99)).causal("notes")
            for record in order { try observer.apply(record) }
            #expect(try observer.get("note") == "v2".bytes)
            #expect(try observer.record("note") == a.record("note"))
        }
    }

    @Test func concurrentEditsPickTheSameWinnerInEveryOrder() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (try fleet[0].causal("notes"), try fleet[1].causal("notes"))
        fleet.clocks[1].advance(byMilliseconds: 10)  // B writes later
        try a.put("title", "from A".bytes)
        try b.put("title", "from B".bytes)
        let fromA = try #require(try a.record("title"))
        let fromB = try #require(try b.record("title"))

        let atA = try a.apply(fromB)
        #expect(atA.effect == .updated)
        #expect(atA.conflict == Conflict(resolution: .concurrentEditLost, lostValue: "from A".bytes, losingDevice: fleet.devices[0]))
        let atB = try b.apply(fromA)
        #expect(atB.effect == .recorded)
        #expect(atB.conflict?.lostValue == "from A".bytes)
        #expect(try a.record("title") == b.record("title"))
        #expect(try a.get("title") == "from B".bytes)

        for order in [fromA, fromB].permutations() {
            let observer = try Fixtures.memoryReplica(account: fleet.account, device: Fixtures.device(99)).causal("notes")
            for record in order { try observer.apply(record) }
            #expect(try observer.record("title") == a.record("title"))
        }
    }

    @Test func withEqualTimestampsTheLargerDeviceIDWins() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (try fleet[0].causal("notes"), try fleet[1].causal("notes"))
        try a.put("title", "low".bytes)
        try b.put("title", "high".bytes)
        try a.apply(try #require(try b.record("title")))
        try b.apply(try #require(try a.record("title")))
        #expect(try a.get("title") == "high".bytes)
        #expect(try b.get("title") == "high".bytes)
    }

    @Test func aDominatedRecordChangesNothing() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (try fleet[0].causal("notes"), try fleet[1].causal("notes"))
        try a.put("k", [1])
        let old = try #require(try a.record("k"))
        try a.put("k", [2])
        #expect(try a.apply(old) == MergeOutcome(.unchanged))
        #expect(try a.get("k") == [2])
        try b.apply(try #require(try a.record("k")))
        #expect(try b.apply(old).effect == .unchanged)
    }

    @Test func keysDeletedOnBothSidesConvergeOnTheMergedVector() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (try fleet[0].causal("notes"), try fleet[1].causal("notes"))
        try a.put("k", [1])
        try b.apply(try #require(try a.record("k")))
        try a.delete("k")
        try b.delete("k")
        let fromA = try #require(try a.record("k"))
        let fromB = try #require(try b.record("k"))
        #expect(fromA.vector.compare(fromB.vector) == .concurrent)
        #expect(try a.apply(fromB).effect == .recorded)
        #expect(try b.apply(fromA).effect == .recorded)
        #expect(try a.record("k") == b.record("k"))
        #expect(try a.record("k")?.isTombstone == true)
    }

    @Test func aTombstoneForAKeyNeverSeenIsRecorded() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (try fleet[0].causal("notes"), try fleet[1].causal("notes"))
        try a.put("k", [1])
        try a.delete("k")
        let tombstone = try #require(try a.record("k"))
        #expect(try b.apply(tombstone).effect == .recorded)
        #expect(try b.get("k") == nil)
        #expect(try b.tombstoneCount() == 1)
        // A stale live copy arriving afterwards stays buried.
        let writer = fleet.devices[0]
        let stale = CausalRecord(
            key: "k", vector: VersionVector([writer: tombstone.vector[writer] - 1]),
            versions: [CausalVersion(dot: Dot(device: writer, counter: tombstone.vector[writer] - 1), timestamp: HybridTimestamp(milliseconds: 1, logical: 0), value: [1])])
        #expect(try b.apply(stale).effect == .unchanged)
        #expect(try b.get("k") == nil)
    }

    @Test func malformedRemoteRecordsAreRefusedAndChangeNothing() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        let writer = Fixtures.device(5)
        let time = HybridTimestamp(milliseconds: 1, logical: 0)
        func version(_ counter: UInt64, _ value: [UInt8] = [1], at timestamp: HybridTimestamp = time) -> CausalVersion {
            CausalVersion(dot: Dot(device: writer, counter: counter), timestamp: timestamp, value: value)
        }
        let bad = [
            CausalRecord.tombstone(key: "k", vector: VersionVector()),
            // A version its own vector has not seen.
            CausalRecord(key: "k", vector: VersionVector([Fixtures.device(6): 1]), versions: [version(1)]),
            CausalRecord(key: "", vector: VersionVector([writer: 1]), versions: [version(1)]),
            CausalRecord(key: "k", vector: VersionVector([writer: 1]), versions: [version(1, [UInt8](repeating: 0, count: Limits.maximumValueBytes + 1))]),
            CausalRecord(key: "k", vector: VersionVector([writer: 1]), versions: [version(1, at: HybridTimestamp(rawValue: .max))]),
            // Two versions from one device: the later write would have covered the earlier.
            CausalRecord(key: "k", vector: VersionVector([writer: 2]), versions: [version(1), version(2)]),
        ]
        for record in bad {
            #expect { try notes.apply(record) } throws: { ($0 as? ReplicaError)?.code == .invalidRecord }
        }
        #expect(try notes.records().isEmpty)
    }

    @Test func aRemoteTimestampMovesTheLocalClockForward() throws {
        let fleet = try TestFleet(count: 2)
        fleet.clocks[1].advance(byMilliseconds: 60_000)  // B's clock runs a minute ahead
        try fleet[1].causal("notes").put("k", [1])
        let remote = try #require(try fleet[1].causal("notes").record("k"))
        try fleet[0].causal("notes").apply(remote)
        try fleet[0].causal("notes").put("k", [2])
        let local = try #require(try fleet[0].causal("notes").record("k")?.winner)
        let remoteVersion = try #require(remote.winner)
        let (localStamp, remoteStamp) = (local.stamp, remoteVersion.stamp)
        #expect(localStamp.timestamp > remoteStamp.timestamp)
    }
}
