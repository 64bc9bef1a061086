import Foundation
import Testing
import TestSupport
@testable import Stele

/// Writes through a second `Replica` on the same file (issue 14): the first
/// handle's digests, counters, device table and namespaces follow them.
@Suite struct SecondHandleTests {
    struct Handles {
        let directory: TemporaryDirectory
        let keys: FileKeyStore
        let first: Replica
        let second: Replica
    }

    /// Two handles on one file, sharing the device's key store (its stamp floor).
    static func handles(clock: ManualWallClock = ManualWallClock()) throws -> Handles {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        let keys = FileKeyStore(path: directory.file("device.keys"))
        let options = Replica.Options(clock: clock, random: SeededGenerator(seed: 1), stampFloor: keys)
        let first = try Replica.create(at: path, account: Fixtures.account(), device: Fixtures.device(1), options: options)
        try first.causal("notes").put("a", "1".bytes)
        var secondOptions = options
        secondOptions.random = SeededGenerator(seed: 2)
        let second = try Replica.open(at: path, account: Fixtures.account(), device: Fixtures.device(1), options: secondOptions)
        return Handles(directory: directory, keys: keys, first: first, second: second)
    }

    @Test func aWriteThroughTheOtherHandleShowsInThisHandlesDigest() throws {
        let handles = try Self.handles()
        let before = try handles.first.digest(of: "notes")
        try handles.second.causal("notes").put("b", "2".bytes)
        #expect(try handles.first.digest(of: "notes") != before)
        #expect(try handles.first.digest(of: "notes") == handles.second.digest(of: "notes"))
        try handles.second.causal("notes").delete("a")
        #expect(try handles.first.digest(of: "notes") == handles.second.digest(of: "notes"))
        #expect(try handles.first.tombstoneCounts() == ["notes": 1])
        #expect(handles.first.mayHoldTombstones)
    }

    /// Two handles writing in turn, with a wall clock that does not move (so the
    /// hybrid counter alone decides): every dot is new, and each write supersedes
    /// the other handle's earlier ones on the same key.
    @Test func twoHandlesNeverIssueTheSameDot() throws {
        let handles = try Self.handles()
        var dots: [Dot] = []
        for round in 0..<5 {
            dots.append(try handles.first.causal("notes").put("k", "first \(round)".bytes))
            dots.append(try handles.second.causal("notes").put("k", "second \(round)".bytes))
        }
        #expect(Set(dots).count == dots.count)
        #expect(dots.map(\.counter) == dots.map(\.counter).sorted())
        let record = try #require(try handles.first.causal("notes").record("k"))
        #expect(record.versions.count == 1)
        #expect(record.value == "second 4".bytes)
        // The log's stamps and the tombstone sequence numbers too.
        let one = try handles.first.log("memory").append(group: "g", body: "x".bytes)
        let two = try handles.second.log("memory").append(group: "g", body: "y".bytes)
        let events = try handles.first.log("memory").live()
        #expect(Set(events.map(\.id)) == [one, two])
        #expect(Set(events.map(\.stamp)).count == 2)
    }

    @Test func aNamespaceAndADeviceTheOtherHandleAddedRead() throws {
        let handles = try Self.handles()
        try handles.second.lww("flags").put("x", [1])
        #expect(try handles.first.declaration(of: "flags").kind == .lww)
        #expect(try handles.first.lww("flags").get("x") == [1])
        // A record from a device neither handle had seen: interned by the second.
        let stranger = Fixtures.device(9)
        try handles.second.causal("notes").apply(CausalRecord(key: "s", vector: VersionVector([stranger: 3]), versions: [
            CausalVersion(dot: Dot(device: stranger, counter: 3), timestamp: HybridTimestamp(milliseconds: 4, logical: 0), value: "hi".bytes)
        ]))
        #expect(try handles.first.causal("notes").record("s")?.versions.first?.dot.device == stranger)
        // And the first handle interns the next stranger without clashing with the second's index.
        let another = Fixtures.device(10)
        try handles.first.causal("notes").apply(CausalRecord(key: "t", vector: VersionVector([another: 1]), versions: [
            CausalVersion(dot: Dot(device: another, counter: 1), timestamp: HybridTimestamp(milliseconds: 5, logical: 0), value: "yo".bytes)
        ]))
        #expect(try handles.second.causal("notes").record("t")?.versions.first?.dot.device == another)
        #expect(try handles.second.causal("notes").record("s")?.versions.first?.dot.device == stranger)
    }

    /// The broken double: a handle that does not catch up (the state before this
    /// was fixed) would reuse the other's counters; the test above would catch it.
    /// Here the catch-up is shown to be what moves the first handle's counter.
    @Test func theFirstHandlesCounterFollowsTheOthersWrites() throws {
        let handles = try Self.handles()
        let mine = try handles.first.causal("notes").put("x", "1".bytes)
        let theirs = try handles.second.causal("notes").put("y", "2".bytes)
        #expect(theirs.counter > mine.counter)
        #expect(handles.first.ownCounter == mine.counter)
        try handles.first.catchUpWithOtherWriters()
        #expect(handles.first.ownCounter == theirs.counter)
    }
}
