import Foundation
import SteleSQL
import Testing
import TestSupport
@testable import Stele

/// G5: damaged bookkeeping stops with a typed error and nothing is discarded to make progress.
@Suite struct CorruptionTests {
    private func store(_ directory: TemporaryDirectory) throws -> (path: String, table: String) {
        let replica = try Fixtures.replica(in: directory)
        let notes = try replica.causal("notes")
        try notes.put("a", [1])
        try notes.put("b", [2])
        return (directory.file("device.stele"), notes.declaration.table)
    }

    @Test func aDamagedVersionVectorIsCorruptOnReadAndWriteAndStaysAsEvidence() throws {
        let directory = try TemporaryDirectory()
        let (path, table) = try store(directory)
        do {
            let raw = try Connection(path: path)
            try raw.execute("UPDATE \(table) SET vv = x'05ff' WHERE key = 'a'")
        }
        let replica = try Replica.open(at: path)
        let notes = try replica.causal("notes")
        #expect { _ = try notes.record("a") } throws: { ($0 as? ReplicaError)?.code == .corrupt }
        #expect { try notes.put("a", [9]) } throws: { ($0 as? ReplicaError)?.code == .corrupt }
        #expect { try notes.delete("a") } throws: { ($0 as? ReplicaError)?.code == .corrupt }
        // The damaged row is left as it was, and the healthy one still works.
        let stored = try replica.connection.queryFirst("SELECT hex(vv) FROM \(table) WHERE key = 'a'") { $0.text(0) }
        #expect(stored == "05FF")
        try notes.put("b", [3])
        #expect(try notes.get("b") == [3])
    }

    @Test func aVectorNamingAnUnknownDeviceIsCorrupt() throws {
        let directory = try TemporaryDirectory()
        let (path, table) = try store(directory)
        do {
            let raw = try Connection(path: path)
            // One entry: device index 77 (never interned), counter 5.
            try raw.execute("UPDATE \(table) SET vv = x'014d05' WHERE key = 'a'")
        }
        let notes = try Replica.open(at: path).causal("notes")
        #expect { _ = try notes.records() } throws: { ($0 as? ReplicaError)?.code == .corrupt }
    }

    @Test func aLiveRowWithoutItsDotIsCorrupt() throws {
        let directory = try TemporaryDirectory()
        let (path, table) = try store(directory)
        do {
            let raw = try Connection(path: path)
            try raw.execute("UPDATE \(table) SET dot = NULL WHERE key = 'a'")
        }
        let notes = try Replica.open(at: path).causal("notes")
        #expect { _ = try notes.record("a") } throws: { ($0 as? ReplicaError)?.code == .corrupt }
    }

    @Test func aNamespaceThatLostItsTableIsCorruptAtOpen() throws {
        let directory = try TemporaryDirectory()
        let (path, table) = try store(directory)
        do {
            let raw = try Connection(path: path)
            try raw.executeScript("DROP TABLE \(table)")
        }
        #expect { _ = try Replica.open(at: path) } throws: { error in
            guard let error = error as? ReplicaError else { return false }
            return error.code == .corrupt && error.message.contains("notes")
        }
    }

    @Test func aStoreWithAnUnknownNamespaceKindIsRefused() throws {
        let directory = try TemporaryDirectory()
        let (path, _) = try store(directory)
        do {
            let raw = try Connection(path: path)
            // A hand edit that bypasses the CHECK (a newer Stele's kind would look like this).
            try raw.executeScript("PRAGMA ignore_check_constraints = 1; UPDATE namespaces SET kind = 'quantum'")
        }
        #expect { _ = try Replica.open(at: path) } throws: { ($0 as? ReplicaError)?.code == .corrupt }
    }

    @Test func aNamespaceDeclaredInARolledBackBatchIsNotDeclared() throws {
        struct Abort: Error {}
        let replica = try Fixtures.memoryReplica()
        #expect(throws: Abort.self) {
            try replica.write {
                try replica.causal("short-lived").put("k", [1])
                throw Abort()
            }
        }
        #expect(replica.namespaces.isEmpty)
        #expect { _ = try replica.declaration(of: "short-lived") } throws: { ($0 as? ReplicaError)?.code == .undeclaredNamespace }
        // Declaring it again works: the table was rolled back with the row.
        try replica.causal("short-lived").put("k", [2])
        #expect(try replica.causal("short-lived").get("k") == [2])
    }

    @Test func anEmptyFileIsCreatedIntoAStoreButNeverOpenedAsOne() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("empty.stele")
        _ = FileManager.default.createFile(atPath: path, contents: Data())
        #expect { _ = try Replica.open(at: path) } throws: { ($0 as? ReplicaError)?.code == .storeMissing }
        let replica = try Replica.openOrCreate(at: path, account: Fixtures.account(), device: Fixtures.device(1))
        #expect(replica.generation == 0)
    }
}
