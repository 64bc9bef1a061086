import Foundation
import Testing
import TestSupport
@testable import Stele

/// Recovery from a snapshot (001 §7, DESIGN §6): a device restored from an old
/// backup takes the fleet's content, keeps what it wrote after the restore, and
/// only then moves to the fleet's generation.
@Suite struct RecoveryTests {
    /// Phone and laptop in sync; the phone is backed up; then the laptop deletes
    /// "old", edits "shared", and the fleet collects at generation 1.
    struct Story {
        let directory: TemporaryDirectory
        let phone: Replica
        let laptop: Replica
        let snapshot: Snapshot
        let backup: String

        init() throws {
            directory = try TemporaryDirectory("recovery")
            let clock = ManualWallClock()
            phone = try Fixtures.replica(in: directory, name: "phone.stele", device: Fixtures.device(1), clock: clock)
            laptop = try Fixtures.replica(in: directory, name: "laptop.stele", device: Fixtures.device(2), clock: clock)
            for replica in [phone, laptop] { try RandomWorkload.declare(on: replica) }
            try phone.causal("notes").put("old", "stale".bytes)
            try phone.causal("notes").put("shared", "v1".bytes)
            try phone.lww("flags").put("theme", "dark".bytes)
            try Self.copy(phone, to: laptop)
            backup = directory.file("phone-backup.stele")
            try phone.backup(to: backup)
            clock.advance(byMilliseconds: 1_000)
            try laptop.causal("notes").delete("old")
            try laptop.causal("notes").put("shared", "v2".bytes)
            try Self.copy(laptop, to: phone)
            // What both had seen when they acked: the round's knowledge.
            var knowledge = try phone.knowledge()
            knowledge.merge(try laptop.knowledge())
            snapshot = try Snapshot.take(of: laptop, generation: 1, knowledge: knowledge)
            for replica in [phone, laptop] {
                let digest = try replica.contentDigest()
                var generator = SeededGenerator(seed: 1)
                let round = RoundNonce.generate(using: &generator)
                try replica.recordAck(round: round, digest: digest, generation: 1)
                #expect(try replica.commit(round: round, digest: digest, generation: 1) == .collected(1))
            }
        }

        static func copy(_ source: Replica, to target: Replica) throws {
            for record in try source.causal("notes").records() { try target.causal("notes").apply(record) }
            for record in try source.lww("flags").records() { try target.lww("flags").apply(record) }
            for event in try source.log("memory").events() { try target.log("memory").apply(event) }
        }
    }

    /// A round vouches for all of a device revoked before it (``Knowledge/noteRevoked(_:)``):
    /// the tablet's write, which the fleet deleted and collected, is dropped from
    /// a restored phone; without the note it would be kept as never seen (seed 250028).
    @Test func aRoundVouchesForAllOfADeviceRevokedBeforeIt() throws {
        let directory = try TemporaryDirectory("recovery-revoked")
        let clock = ManualWallClock()
        let tablet = Fixtures.device(3)
        let writer = try Fixtures.replica(in: directory, name: "tablet.stele", device: tablet, clock: clock)
        let phone = try Fixtures.replica(in: directory, name: "phone.stele", device: Fixtures.device(1), clock: clock)
        let laptop = try Fixtures.replica(in: directory, name: "laptop.stele", device: Fixtures.device(2), clock: clock)
        for replica in [writer, phone, laptop] { try RandomWorkload.declare(on: replica) }
        try writer.lww("flags").put("lost", "from the tablet".bytes)
        for record in try writer.lww("flags").records() { try phone.lww("flags").apply(record) }
        let backup = directory.file("phone-backup.stele")
        try phone.backup(to: backup)
        // The fleet agreed on content without the tablet's write (deleted and collected).
        var plain = try laptop.knowledge()
        plain.merge(try phone.knowledge())
        var noted = plain
        noted.noteRevoked([tablet])
        for (knowledge, kept) in [(plain, true), (noted, false)] {
            let copy = directory.file("restored-\(kept).stele")
            try FileManager.default.copyItem(atPath: backup, toPath: copy)
            let restored = try Replica.open(at: copy, options: Replica.Options(clock: clock))
            let outcome = try restored.recover(from: try Snapshot.take(of: laptop, generation: 1, knowledge: knowledge))
            #expect(outcome.keptLocal == (kept ? 1 : 0))
            #expect(outcome.dropped == (kept ? 0 : 1))
            #expect(try restored.lww("flags").get("lost") == (kept ? "from the tablet".bytes : nil))
        }
    }

    @Test func aRestoredDeviceTakesTheFleetsContentAndKeepsItsNewerEdits() throws {
        let story = try Story()
        let restored = try Replica.open(at: story.backup, options: Replica.Options(clock: ManualWallClock(milliseconds: 1_700_000_100_000)))
        #expect(restored.generation == 0)
        #expect(try restored.causal("notes").get("old") == "stale".bytes)
        // After the restore, before recovering, the phone writes: a new row, and a delete.
        try restored.causal("notes").put("fresh", "written after the restore".bytes)
        try restored.lww("flags").put("font", "serif".bytes)
        try restored.causal("notes").delete("shared")
        let outcome = try restored.recover(from: story.snapshot)
        #expect(restored.generation == 1)
        #expect(outcome.keptLocal == 3)
        // What the fleet deleted and collected stays deleted; the fleet's edit is taken.
        #expect(try restored.causal("notes").get("old") == nil)
        #expect(try restored.causal("notes").record("old") == nil)
        // The post-restore delete had seen "v1" only: "v2", which it had not seen, survives (add-wins).
        #expect(try restored.causal("notes").get("shared") == "v2".bytes)
        #expect(try restored.causal("notes").get("fresh") == "written after the restore".bytes)
        #expect(try restored.lww("flags").get("font") == "serif".bytes)
        #expect(try restored.lww("flags").get("theme") == "dark".bytes)
        // The rows carry the snapshot's clocks.
        #expect(try restored.lww("flags").record("theme") == story.laptop.lww("flags").record("theme"))
        // Its next write's dot is above anything the fleet knew of it.
        let known = try story.laptop.causal("notes").records().map { $0.vector[restored.device] }.max() ?? 0
        let dot = try restored.causal("notes").put("next", "x".bytes)
        #expect(dot.counter > known)
        // And it survives reopening at the new generation with no barrier memory.
        let reopened = try Replica.open(at: story.backup)
        #expect(reopened.generation == 1)
        #expect(try reopened.lastAck() == nil)
        #expect(try reopened.causal("notes").get("old") == nil)
    }

    @Test func withoutNewerEditsTheRestoredDeviceEqualsTheFleet() throws {
        let story = try Story()
        let restored = try Replica.open(at: story.backup)
        let outcome = try restored.recover(from: story.snapshot)
        #expect(outcome.keptLocal == 0)
        #expect(outcome.dropped == 3)
        #expect(try restored.contentDigest() == story.laptop.contentDigest())
        #expect(try restored.tombstoneCounts().values.reduce(0, +) == 0)
    }

    @Test func aFailedImportLeavesTheDeviceAsItWas() throws {
        let story = try Story()
        let restored = try Replica.open(at: story.backup)
        let digest = try restored.contentDigest()
        // A namespace of another kind in the snapshot.
        let clashing = Snapshot(
            generation: 1, knowledge: story.snapshot.knowledge,
            namespaces: story.snapshot.namespaces + [ReconcileMessage(session: 0, namespace: "notes", kind: .lww, generation: 1)])
        #expect(throws: ReplicaError.self) { try restored.recover(from: clashing) }
        // A malformed record halfway through.
        let bad = CausalRecord(key: "", vector: VersionVector([Fixtures.device(2): 1]), versions: [])
        let malformed = Snapshot(
            generation: 1, knowledge: story.snapshot.knowledge,
            namespaces: story.snapshot.namespaces.map { namespace in
                guard namespace.namespace == "notes" else { return namespace }
                return ReconcileMessage(session: 0, namespace: "notes", kind: .causal, generation: 1, records: namespace.records + [.causal(bad)])
            })
        #expect(throws: ReplicaError.self) { try restored.recover(from: malformed) }
        // A snapshot that is not ahead.
        #expect(throws: ReplicaError.self) { try restored.recover(from: Snapshot(generation: 0, knowledge: story.snapshot.knowledge, namespaces: story.snapshot.namespaces)) }
        #expect(restored.generation == 0)
        #expect(try restored.contentDigest() == digest)
        #expect(try restored.causal("notes").get("old") == "stale".bytes)
        #expect(try Replica.open(at: story.backup).generation == 0)
    }

    @Test func aSnapshotSurvivesItsEncodingAndRefusesDamage() throws {
        let story = try Story()
        let bytes = story.snapshot.encoded
        #expect(try Snapshot(decoding: bytes) == story.snapshot)
        for length in stride(from: 0, to: bytes.count, by: 7) {
            #expect(throws: CodecError.self) { _ = try Snapshot(decoding: Array(bytes.prefix(length))) }
        }
        #expect(throws: CodecError.self) { _ = try Snapshot(decoding: bytes + [0]) }
        var version = bytes
        version[8] = 9
        #expect(throws: CodecError.self) { _ = try Snapshot(decoding: version) }
    }

    /// Records written after the round by another device (while this one was cut
    /// off from the anchor) are newer than the snapshot too, and survive.
    @Test func writesTheFleetHadNotSeenSurviveWhoeverMadeThem() throws {
        let story = try Story()
        let restored = try Replica.open(at: story.backup)
        let tablet = try Fixtures.replica(in: story.directory, name: "tablet.stele", device: Fixtures.device(3))
        try RandomWorkload.declare(on: tablet)
        try tablet.causal("notes").put("island", "written by the tablet".bytes)
        try tablet.lww("flags").put("island", "on".bytes)
        try Story.copy(tablet, to: restored)
        let outcome = try restored.recover(from: story.snapshot)
        #expect(outcome.keptLocal == 2)
        #expect(try restored.causal("notes").get("island") == "written by the tablet".bytes)
        #expect(try restored.lww("flags").get("island") == "on".bytes)
        // What the fleet had seen and deleted stays gone.
        #expect(try restored.causal("notes").get("old") == nil)
        // And the knowledge is remembered for recoveries this device may serve later.
        #expect(try restored.knowledge().counters[Fixtures.device(2)] >= story.snapshot.knowledge.counters[Fixtures.device(2)])
    }

    /// The snapshot holds the log markers it was taken with (they are leaves). A
    /// recovery drops those the round collected, which its knowledge covers, so
    /// a group started again under a collected name lives on; a marker the
    /// knowledge does not cover (a sibling's snapshot, written after its last
    /// round) is a tombstone still held, and stays.
    @Test func aRecoveryHoldsNoMarkerTheRoundCollectedAndKeepsOneItDidNot() throws {
        let directory = try TemporaryDirectory("recovery-markers")
        let clock = ManualWallClock()
        let phone = try Fixtures.replica(in: directory, name: "phone.stele", device: Fixtures.device(1), clock: clock)
        let laptop = try Fixtures.replica(in: directory, name: "laptop.stele", device: Fixtures.device(2), clock: clock)
        for replica in [phone, laptop] { try RandomWorkload.declare(on: replica) }
        try laptop.log("memory").append(group: "c1", body: "old".bytes)
        try laptop.log("memory").append(group: "c2", body: "kept".bytes)
        try Story.copy(laptop, to: phone)
        let backup = directory.file("phone-backup.stele")
        try phone.backup(to: backup)
        clock.advance(byMilliseconds: 1_000)
        try laptop.log("memory").bury("c1")
        let collected = try laptop.knowledge()
        clock.advance(byMilliseconds: 1_000)
        try laptop.log("memory").bury("c2")

        // An anchor's snapshot: its round had seen the bury of c1, not of c2.
        let restored = try Replica.open(at: backup)
        let outcome = try restored.recover(from: try Snapshot.take(of: laptop, generation: 1, knowledge: collected))
        #expect(outcome.imported == 1)
        #expect(try restored.log("memory").isBuried("c1") == false)
        #expect(try restored.log("memory").isBuried("c2"))
        #expect(try restored.tombstoneCounts()["memory"] == 1)
        // The name c1 starts a new group here, and nothing buries it.
        try restored.log("memory").append(group: "c1", body: "new".bytes)
        #expect(try restored.log("memory").live().map(\.group) == ["c1"])
    }
}
