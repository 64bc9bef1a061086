import Foundation
import SteleSQL
import Testing
import TestSupport
@testable import Stele

/// The replica's side of a barrier round (DESIGN §6): the ack and its watermark,
/// the commit, and what a commit may and may not drop.
@Suite struct CollectionTests {
    static func round(_ seed: UInt64) -> RoundNonce {
        var generator = SeededGenerator(seed: seed)
        return RoundNonce.generate(using: &generator)
    }

    /// A store with every kind that keeps tombstones, each holding one.
    static func storeWithTombstones(_ directory: TemporaryDirectory, name: String = "device.stele") throws -> Replica {
        let replica = try Fixtures.replica(in: directory, name: name)
        let notes = try replica.causal("notes")
        let flags = try replica.lww("flags")
        let memory = try replica.log("memory")
        _ = try replica.appendOnly("sealed")
        try notes.put("kept", "live".bytes)
        try notes.put("gone", "doomed".bytes)
        try notes.delete("gone")
        try flags.put("dark", "on".bytes)
        try flags.delete("dark")
        try memory.append(group: "chat", body: "hello".bytes)
        try memory.bury("chat")
        try memory.append(group: "other", body: "stays".bytes)
        return replica
    }

    @Test func aCommitOfTheAckedRoundCollectsEveryKind() throws {
        let directory = try TemporaryDirectory()
        let replica = try Self.storeWithTombstones(directory)
        #expect(try replica.tombstoneCounts() == ["notes": 1, "flags": 1, "memory": 1])
        let live = (try replica.causal("notes").entries(), try replica.log("memory").live())
        let digest = try replica.contentDigest()
        try replica.recordAck(round: Self.round(1), digest: digest, generation: 1)
        #expect(try replica.commit(round: Self.round(1), digest: digest, generation: 1) == .collected(3))
        #expect(try replica.tombstoneCounts() == ["notes": 0, "flags": 0, "memory": 0])
        #expect(replica.generation == 1)
        // Nothing a read returns changes.
        #expect(try replica.causal("notes").entries().map(\.key) == live.0.map(\.key))
        #expect(try replica.log("memory").live() == live.1)
        #expect(try replica.lww("flags").get("dark") == nil)
        #expect(try replica.lastCollection()?.count == 3)
        // The marker was a leaf: the log digest now equals that of a store that never had it.
        let fresh = try Fixtures.replica(in: directory, name: "fresh.stele", device: Fixtures.device(2))
        for event in try replica.log("memory").events() { try fresh.log("memory").apply(event) }
        #expect(try fresh.digest(of: "memory") == replica.digest(of: "memory"))
        // The generation and the memory of the collection survive reopening.
        let path = replica.path
        let reopened = try Replica.open(at: path, options: Replica.Options(clock: ManualWallClock()))
        #expect(reopened.generation == 1)
        #expect(try reopened.lastCollection()?.count == 3)
    }

    @Test func aTombstoneWrittenAfterTheAckWaitsForTheNextRound() throws {
        let directory = try TemporaryDirectory()
        let replica = try Self.storeWithTombstones(directory)
        let digest = try replica.contentDigest()
        try replica.recordAck(round: Self.round(1), digest: digest, generation: 1)
        // A row created and deleted while the round is open: the content digest is
        // back to the agreed value, but this tombstone was never vouched for.
        let notes = try replica.causal("notes")
        try notes.put("brief", "here and gone".bytes)
        try notes.delete("brief")
        #expect(try replica.contentDigest() == digest)
        #expect(try replica.commit(round: Self.round(1), digest: digest, generation: 1) == .collected(3))
        #expect(try notes.tombstoneCount() == 1)
        #expect(try notes.record("brief")?.isTombstone == true)
        // The next round takes it (the content moved: the log's marker was a leaf).
        let next = try replica.contentDigest()
        #expect(next != digest)
        try replica.recordAck(round: Self.round(2), digest: next, generation: 2)
        #expect(try replica.commit(round: Self.round(2), digest: next, generation: 2) == .collected(1))
        #expect(try notes.tombstoneCount() == 0)
    }

    /// 001 §4: the causal and lww tombstones wait for a later round; the log
    /// marker the ack vouched for goes (a leaf every member held, which the
    /// round collected: kept, it would bury a group started again under its name).
    @Test func aDeviceWhoseContentMovedAdoptsTheGenerationAndKeepsItsTombstones() throws {
        let directory = try TemporaryDirectory()
        let replica = try Self.storeWithTombstones(directory)
        let digest = try replica.contentDigest()
        try replica.recordAck(round: Self.round(1), digest: digest, generation: 1)
        try replica.causal("notes").put("edited", "after the ack".bytes)
        #expect(try replica.commit(round: Self.round(1), digest: digest, generation: 1) == .adoptedKeepingTombstones)
        #expect(replica.generation == 1)
        #expect(try replica.tombstoneCounts() == ["notes": 1, "flags": 1, "memory": 0])
        #expect(try replica.lastCollection() == nil)
    }

    @Test func staleReplayedAndForeignCommitsChangeNothing() throws {
        let directory = try TemporaryDirectory()
        let replica = try Self.storeWithTombstones(directory)
        let digest = try replica.contentDigest()
        // No ack at all.
        #expect(try replica.commit(round: Self.round(1), digest: digest, generation: 1) == .notAcked)
        try replica.recordAck(round: Self.round(1), digest: digest, generation: 1)
        // Another round's commit, or this round's to another generation.
        #expect(try replica.commit(round: Self.round(9), digest: digest, generation: 1) == .notAcked)
        #expect(try replica.commit(round: Self.round(1), digest: digest, generation: 2) == .notAcked)
        // A newer ack replaces the older: the older round's commit is stale now.
        try replica.recordAck(round: Self.round(2), digest: digest, generation: 1)
        #expect(try replica.commit(round: Self.round(1), digest: digest, generation: 1) == .notAcked)
        #expect(replica.generation == 0)
        #expect(try replica.tombstoneCounts() == ["notes": 1, "flags": 1, "memory": 1])
        // The real one, then its replay.
        #expect(try replica.commit(round: Self.round(2), digest: digest, generation: 1) == .collected(3))
        try replica.causal("notes").delete("kept")
        #expect(try replica.commit(round: Self.round(2), digest: digest, generation: 1) == .generationNotAhead)
        #expect(try replica.causal("notes").tombstoneCount() == 1)
        // An ack cannot name a generation the device already stands at.
        #expect(throws: ReplicaError.self) { try replica.recordAck(round: Self.round(3), digest: digest, generation: 1) }
    }

    @Test func aStoreRestoredFromBeforeItsAckRemembersNoRound() throws {
        let directory = try TemporaryDirectory()
        let replica = try Self.storeWithTombstones(directory)
        try replica.backup(to: directory.file("backup.stele"))
        let digest = try replica.contentDigest()
        let ack = try replica.recordAck(round: Self.round(1), digest: digest, generation: 1)
        #expect(try replica.lastAck() == ack)
        #expect(try Replica.open(at: replica.path).lastAck() == ack)
        let restored = try Replica.open(at: directory.file("backup.stele"))
        #expect(try restored.lastAck() == nil)
        #expect(try restored.commit(round: Self.round(1), digest: digest, generation: 1) == .notAcked)
    }

    @Test func collectedTombstonesGiveTheirPagesBack() throws {
        let directory = try TemporaryDirectory()
        let replica = try Fixtures.replica(in: directory)
        let notes = try replica.causal("notes")
        let value = [UInt8](repeating: 7, count: 100)
        try replica.write { for index in 0..<5_000 { try notes.put("key-\(index)", value) } }
        try replica.write { for index in 0..<5_000 where index % 10 != 0 { try notes.delete("key-\(index)") } }
        let pages = { try replica.connection.scalarInt("PRAGMA page_count") ?? 0 }
        let before = try pages()
        let digest = try replica.contentDigest()
        try replica.recordAck(round: Self.round(1), digest: digest, generation: 1)
        #expect(try replica.commit(round: Self.round(1), digest: digest, generation: 1) == .collected(4_500))
        #expect(try replica.connection.scalarInt("PRAGMA freelist_count") == 0)
        let after = try pages()
        #expect(after < before / 2, "\(after) pages after, \(before) before")
        #expect(try notes.count() == 500)
    }

    @Test func aFormatOneStoreGainsSequencesAndItsOldTombstonesAreCollectable() throws {
        let directory = try TemporaryDirectory()
        let path: String
        do {
            let replica = try Self.storeWithTombstones(directory)
            path = replica.path
        }
        // Take the file back to format 1: no sequence column, no barrier memory, no conversations
        // (the namespaces table's CHECK stays wider than format 1's, which the upgrade rebuilds anyway).
        do {
            let connection = try Connection(path: path)
            let tables = try connection.query("SELECT name FROM sqlite_master WHERE type = 'table' AND (name GLOB 'causal_*' OR name GLOB 'lww_*' OR name GLOB 'log_*')") { $0.text(0) }
            #expect(tables.count == 3)
            for table in tables {
                try connection.executeScript("ALTER TABLE \(table) DROP COLUMN seq")
                if table.hasPrefix("causal_") { try connection.executeScript("ALTER TABLE \(table) DROP COLUMN contexts") }
            }
            try connection.executeScript(
                """
                DROP TABLE barrier;
                DROP TABLE conversations;
                CREATE TABLE replica_v1 AS SELECT id, account, device, generation, own_counter, clock, created_ms FROM replica;
                DROP TABLE replica;
                CREATE TABLE replica (
                    id INTEGER PRIMARY KEY CHECK (id = 1), account BLOB NOT NULL, device BLOB NOT NULL,
                    generation INTEGER NOT NULL DEFAULT 0, own_counter INTEGER NOT NULL DEFAULT 0,
                    clock INTEGER NOT NULL DEFAULT 0, created_ms INTEGER NOT NULL);
                INSERT INTO replica SELECT * FROM replica_v1;
                DROP TABLE replica_v1;
                PRAGMA user_version = 1;
                """)
        }
        let replica = try Replica.open(at: path)
        #expect(try replica.report().format == 5)
        #expect(try replica.tombstoneCounts() == ["notes": 1, "flags": 1, "memory": 1])
        let digest = try replica.contentDigest()
        try replica.recordAck(round: Self.round(1), digest: digest, generation: 1)
        #expect(try replica.commit(round: Self.round(1), digest: digest, generation: 1) == .collected(3))
        // The upgrade allows the messages kind, which the old CHECK refused.
        #expect(try replica.messages("chat").count() == 0)
    }
}
