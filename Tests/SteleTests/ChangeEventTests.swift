import Testing
import TestSupport
@testable import Stele

@Suite struct ChangeEventTests {
    /// Collects the events of `stream` after the replica that feeds it is gone.
    private func collect(_ stream: AsyncStream<ChangeEvent>) async -> [ChangeEvent] {
        var events: [ChangeEvent] = []
        for await event in stream { events.append(event) }
        return events
    }

    @Test func localWritesAreReportedInOrder() async throws {
        var replica: Replica? = try Fixtures.memoryReplica()
        let stream = replica!.changes()
        do {
            let notes = try replica!.causal("notes")
            try notes.put("a", [1])
            try notes.put("a", [2])
            try notes.delete("a")
            try replica!.log("memory").bury("g")
        }
        // The stream ends when the replica (and every namespace handle on it) is released.
        replica = nil
        let events = await collect(stream)
        #expect(events.map(\.kind) == [.inserted, .updated, .deleted, .deleted])
        #expect(events.map(\.subject) == [.row(key: "a"), .row(key: "a"), .row(key: "a"), .group("g")])
        #expect(events.allSatisfy { $0.origin == .local })
    }

    @Test func aRolledBackBatchReportsNothingAndACommittedOneReportsAll() async throws {
        struct Abort: Error {}
        var replica: Replica? = try Fixtures.memoryReplica()
        let stream = replica!.changes()
        do {
            let notes = try replica!.causal("notes")
            _ = try? replica!.write {
                try notes.put("lost", [1])
                throw Abort()
            }
            try replica!.write {
                try notes.put("kept", [1])
                // An inner failure undoes only its own events.
                _ = try? replica!.write {
                    try notes.put("inner", [1])
                    throw Abort()
                }
            }
        }
        replica = nil
        #expect(await collect(stream).map(\.subject) == [.row(key: "kept")])
    }

    @Test func aConcurrentDeleteThatLostIsReportedAsAConflict() async throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (try fleet[0].causal("notes"), try fleet[1].causal("notes"))
        try a.put("note", "v1".bytes)
        try b.apply(try #require(try a.record("note")))
        try a.put("note", "v2".bytes)
        try b.delete("note")
        let stream = fleet[1].changes()
        try b.apply(try #require(try a.record("note")))
        fleet[1].feed.finish()
        let events = await collect(stream)
        #expect(events.map(\.kind) == [.inserted, .conflict(Conflict(resolution: .deleteLostToEdit, lostValue: nil, losingDevice: nil))])
        #expect(events.allSatisfy { $0.origin == .remote })
    }

    @Test func everySubscriberGetsEveryEvent() async throws {
        var replica: Replica? = try Fixtures.memoryReplica()
        let first = replica!.changes()
        let second = replica!.changes()
        try replica!.causal("notes").put("a", [1])
        replica = nil
        #expect(await collect(first).count == 1)
        #expect(await collect(second).count == 1)
    }
}
