import Testing
import TestSupport
@testable import Stele

@Suite struct EventLogTests {
    @Test func buryWritesTheMarkerAndErasesTheGroup() throws {
        let replica = try Fixtures.memoryReplica()
        let memory = try replica.log("memory")
        try memory.append(group: "c1", body: "hello".bytes)
        try memory.append(group: "c1", body: "how are you".bytes)
        try memory.append(group: "c2", body: "other".bytes)
        #expect(try memory.bury("c1") != nil)
        #expect(try memory.live(group: "c1").isEmpty)
        #expect(try memory.live().map(\.body) == ["other".bytes])
        #expect(try memory.storedEventCount(group: "c1") == 0)
        #expect(try memory.tombstoneCount() == 1)
        #expect(try memory.isBuried("c1"))
        #expect(try memory.bury("c1") == nil)
        #expect(try memory.tombstoneCount() == 1)
    }

    @Test func appendingToABuriedGroupIsRefused() throws {
        let replica = try Fixtures.memoryReplica()
        let memory = try replica.log("memory")
        try memory.bury("c1")
        #expect { try memory.append(group: "c1", body: [1]) } throws: { ($0 as? ReplicaError)?.code == .groupBuried }
        #expect(try memory.storedEventCount(group: "c1") == 0)
    }

    /// 000 §3: `live([tombstone, resurrected])` and `live([resurrected, tombstone])` are both empty.
    @Test func aTombstoneBuriesItsGroupInEitherArrivalOrder() throws {
        let source = try Fixtures.memoryReplica(device: Fixtures.device(1)).log("memory")
        let eventID = try source.append(group: "c", body: "resurrected".bytes)
        let event = try #require(try source.events().first { $0.id == eventID })
        try source.bury("c")
        let marker = try #require(try source.events().first { $0.isMarker })

        for order in [[marker, event], [event, marker]] {
            let replica = try Fixtures.memoryReplica(device: Fixtures.device(2)).log("memory")
            for item in order { try replica.apply(item) }
            #expect(try replica.live().isEmpty)
            // Erasure (beyond the seed): the buried event is not on disk either.
            #expect(try replica.storedEventCount(group: "c") == 0)
            #expect(try replica.events() == [marker])
        }
    }

    @Test func anEventOfABuriedGroupIsDiscardedNotStored() throws {
        let source = try Fixtures.memoryReplica(device: Fixtures.device(1)).log("memory")
        try source.append(group: "c", body: [1])
        let event = try #require(try source.events().first)
        let target = try Fixtures.memoryReplica(device: Fixtures.device(2)).log("memory")
        try target.bury("c")
        #expect(try target.apply(event).effect == .discarded)
        #expect(try target.storedEventCount(group: "c") == 0)
    }

    /// 000 §1, with the marker in place: the iPad re-ships the rows the phone
    /// deleted, and nothing comes back, to the screen or to disk.
    @Test func theReshippedRowsOfADeletedConversationStayGone() throws {
        let fleet = try TestFleet(count: 2)
        let phone = try fleet[0].log("memory")
        let iPad = try fleet[1].log("memory")
        for body in ["one", "two", "three", "four"] { try phone.append(group: "C", body: body.bytes) }
        for event in try phone.events() { try iPad.apply(event) }
        #expect(try iPad.live(group: "C").count == 4)

        try phone.bury("C")
        // The iPad, asleep, knows nothing and re-ships its four rows.
        for event in try iPad.events() { #expect(try phone.apply(event).effect == .discarded) }
        #expect(try phone.live(group: "C").isEmpty)
        #expect(try phone.storedEventCount(group: "C") == 0)
        // The marker reaches the iPad, which buries and erases its copies.
        for event in try phone.events() { try iPad.apply(event) }
        #expect(try iPad.live(group: "C").isEmpty)
        #expect(try iPad.storedEventCount(group: "C") == 0)
        #expect(try phone.events() == iPad.events())
    }

    @Test func applyIsInsertIfAbsent() throws {
        let source = try Fixtures.memoryReplica(device: Fixtures.device(1)).log("memory")
        try source.append(group: "c", body: [1])
        let event = try #require(try source.events().first)
        let target = try Fixtures.memoryReplica(device: Fixtures.device(2)).log("memory")
        #expect(try target.apply(event).effect == .inserted)
        #expect(try target.apply(event).effect == .unchanged)
        #expect(try target.live().count == 1)
    }

    @Test func twoDevicesBuryingTheSameGroupKeepBothMarkers() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (try fleet[0].log("memory"), try fleet[1].log("memory"))
        try a.bury("g")
        try b.bury("g")
        let fromA = try a.events()
        let fromB = try b.events()
        for event in fromB { #expect(try a.apply(event).effect == .recorded) }
        for event in fromA { try b.apply(event) }
        #expect(try a.events() == b.events())
        #expect(try a.tombstoneCount() == 2)
    }

    @Test func liveEventsComeOldestFirstWhateverTheArrivalOrder() throws {
        let clock = ManualWallClock(milliseconds: 1_000)
        let source = try Fixtures.memoryReplica(device: Fixtures.device(1), clock: clock).log("memory")
        for index in 0..<4 {
            try source.append(group: "c", body: [UInt8(index)])
            clock.advance(byMilliseconds: 1)
        }
        let events = try source.events()
        for order in events.permutations() {
            let target = try Fixtures.memoryReplica(device: Fixtures.device(2)).log("memory")
            for event in order { try target.apply(event) }
            #expect(try target.live().map(\.body) == [[0], [1], [2], [3]])
        }
    }

    @Test func malformedEventsAreRefused() throws {
        let target = try Fixtures.memoryReplica().log("memory")
        var generator = SeededGenerator(seed: 1)
        let stamp = WriteStamp(timestamp: HybridTimestamp(milliseconds: 1, logical: 0), writer: Fixtures.device(2))
        let bad = LogEvent(id: EventID.random(using: &generator), group: "", kind: .event(body: [1]), stamp: stamp)
        #expect { try target.apply(bad) } throws: { ($0 as? ReplicaError)?.code == .invalidRecord }
        #expect(try target.events().isEmpty)
    }

    @Test func eventIDsAreVersion4UUIDs() throws {
        var generator = SeededGenerator(seed: 2)
        let id = EventID.random(using: &generator)
        let text = id.description
        #expect(text.count == 36)
        #expect(Array(text)[14] == "4")
        #expect(try EventID(bytes: id.bytes) == id)
        #expect(throws: CodecError.self) { _ = try EventID(bytes: [1]) }
    }
}
