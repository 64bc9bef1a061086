import Foundation
import SteleSQL
import Testing
import TestSupport
@testable import Stele

@Suite struct ReplicaTests {
    @Test func aCreatedStoreReopensWithItsIdentityAndGenerationZero() throws {
        let directory = try TemporaryDirectory()
        let account = Fixtures.account()
        let device = Fixtures.device(1)
        do {
            let replica = try Fixtures.replica(in: directory, account: account, device: device)
            try replica.causal("notes").put("a", "1".bytes)
        }
        let reopened = try Replica.open(at: directory.file("device.stele"), account: account, device: device)
        #expect(reopened.account == account)
        #expect(reopened.device == device)
        #expect(reopened.generation == 0)
        #expect(try reopened.causal("notes").get("a") == "1".bytes)
        #expect(try reopened.connection.scalarText("PRAGMA journal_mode") == "wal")
    }

    /// Another process holds the file's lock for a moment (its WAL recovery as it
    /// opens, a commit): a reader opening the store waits for it instead of failing.
    @Test(arguments: [true, false]) func openingWaitsOutAnotherConnectionsLock(readOnly: Bool) throws {
        let directory = try TemporaryDirectory()
        _ = try Fixtures.replica(in: directory)
        let path = directory.file("device.stele")
        let holder = try LockHolder(path)
        let release = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            usleep(300_000)
            holder.release()
            release.signal()
        }
        let started = Date()
        let opened = try Replica.open(at: path, options: Replica.Options(readOnly: readOnly))
        #expect(Date().timeIntervalSince(started) >= 0.2, "it waited for the lock")
        #expect(opened.device == Fixtures.device(1))
        release.wait()
    }

    @Test func createRefusesAnExistingStore() throws {
        let directory = try TemporaryDirectory()
        _ = try Fixtures.replica(in: directory)
        let before = fileBytes(directory.file("device.stele"))
        #expect { _ = try Fixtures.replica(in: directory) } throws: { ($0 as? ReplicaError)?.code == .storeExists }
        #expect(fileBytes(directory.file("device.stele")) == before)
    }

    @Test func openOrCreateCreatesOnceThenOpens() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("s.stele")
        let account = Fixtures.account()
        let device = Fixtures.device(1)
        try Replica.openOrCreate(at: path, account: account, device: device).causal("n").put("k", [1])
        #expect(try Replica.openOrCreate(at: path, account: account, device: device).causal("n").get("k") == [1])
    }

    @Test func aFailedCreateLeavesNothingBehind() throws {
        let directory = try TemporaryDirectory()
        let faults = SQLiteFaultPlan()
        faults.fail(.step, with: .full, sqlContains: "INSERT INTO replica", count: 2)
        var options = Replica.Options()
        options.faults = faults
        let fresh = directory.file("fresh.stele")
        #expect { _ = try Replica.create(at: fresh, account: Fixtures.account(), device: Fixtures.device(1), options: options) } throws: {
            ($0 as? SQLiteError)?.code == .full
        }
        #expect(!FileManager.default.fileExists(atPath: fresh))
        // An empty file we were asked to fill is left empty again.
        let empty = directory.file("empty.stele")
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        #expect { _ = try Replica.create(at: empty, account: Fixtures.account(), device: Fixtures.device(1), options: options) } throws: {
            ($0 as? SQLiteError)?.code == .full
        }
        #expect(fileBytes(empty) == Data())
        #expect(!FileManager.default.fileExists(atPath: empty + "-wal"))
    }

    @Test func openingAMissingStoreFailsAndCreatesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("missing.stele")
        #expect { _ = try Replica.open(at: path) } throws: { ($0 as? ReplicaError)?.code == .storeMissing }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aForeignSQLiteDatabaseIsNotAStoreAndIsNotModified() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("other.db")
        do {
            let other = try Connection(path: path, configuration: Connection.Configuration(journalMode: "DELETE"))
            try other.executeScript("CREATE TABLE recipes (name TEXT); INSERT INTO recipes VALUES ('soup')")
        }
        let before = fileBytes(path)
        #expect { _ = try Replica.open(at: path) } throws: { error in
            guard let error = error as? ReplicaError else { return false }
            return error.code == .notAStore && error.message.contains("not a Stele store")
        }
        #expect(fileBytes(path) == before)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func aFileThatIsNotSQLiteIsNotAStoreAndIsNotModified() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("notes.txt")
        let garbage = Data("this is a shopping list, not a database\n".utf8) + Data(repeating: 7, count: 5_000)
        try garbage.write(to: URL(fileURLWithPath: path))
        #expect { _ = try Replica.open(at: path) } throws: { ($0 as? ReplicaError)?.code == .notAStore }
        #expect(fileBytes(path) == garbage)
    }

    @Test func aDamagedStoreIsReportedAsCorruptAndIsNotModified() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        do {
            let replica = try Fixtures.replica(in: directory)
            try replica.causal("notes").put("a", [1])
        }
        // Overwrite every page after the first (the schema page) with garbage.
        var bytes = try #require(fileBytes(path))
        let pageSize = 4_096
        for index in pageSize..<bytes.count { bytes[index] = 0xA5 }
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect { _ = try Replica.open(at: path) } throws: { ($0 as? ReplicaError)?.code == .corrupt }
        #expect(fileBytes(path) == bytes)
    }

    @Test func aStoreWithoutItsIdentityRowIsCorrupt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        _ = try Fixtures.replica(in: directory)
        do {
            let raw = try Connection(path: path)
            try raw.execute("DELETE FROM replica")
        }
        #expect { _ = try Replica.open(at: path) } throws: { ($0 as? ReplicaError)?.code == .corrupt }
    }

    @Test func aStoreOfAnotherAccountIsRefusedAndNotModified() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        _ = try Fixtures.replica(in: directory, account: Fixtures.account(1))
        let before = fileBytes(path)
        #expect { _ = try Replica.open(at: path, account: Fixtures.account(2)) } throws: { error in
            guard let error = error as? ReplicaError else { return false }
            return error.code == .accountMismatch && error.message.contains(Fixtures.account(1).hex)
        }
        #expect(fileBytes(path) == before)
    }

    @Test func aStoreOfAnotherDeviceIsRefused() throws {
        let directory = try TemporaryDirectory()
        _ = try Fixtures.replica(in: directory, device: Fixtures.device(1))
        #expect { _ = try Replica.open(at: directory.file("device.stele"), device: Fixtures.device(2)) } throws: {
            ($0 as? ReplicaError)?.code == .deviceMismatch
        }
    }

    @Test func aStoreFromANewerStoreFormatIsRefusedAndNotModified() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        _ = try Fixtures.replica(in: directory)
        do {
            let raw = try Connection(path: path)
            try raw.executeScript("PRAGMA user_version = 99")
        }
        let before = fileBytes(path)
        #expect { _ = try Replica.open(at: path) } throws: { ($0 as? ReplicaError)?.code == .newerFormat }
        #expect(fileBytes(path) == before)
    }

    @Test func aNamespaceKeepsItsKindAcrossReopening() throws {
        let directory = try TemporaryDirectory()
        do {
            let replica = try Fixtures.replica(in: directory)
            try replica.declare("notes", .causal)
            #expect { try replica.declare("notes", .lww) } throws: { ($0 as? ReplicaError)?.code == .kindMismatch }
        }
        let reopened = try Replica.open(at: directory.file("device.stele"))
        #expect(reopened.namespaces.map(\.kind) == [.causal])
        #expect { _ = try reopened.log("notes") } throws: { error in
            guard let error = error as? ReplicaError else { return false }
            return error.code == .kindMismatch && error.message.contains("declared as causal")
        }
        #expect(reopened.namespaces.count == 1)
    }

    @Test func anUndeclaredNamespaceIsATypedError() throws {
        let replica = try Fixtures.memoryReplica()
        #expect { _ = try replica.declaration(of: "nowhere") } throws: { ($0 as? ReplicaError)?.code == .undeclaredNamespace }
    }

    @Test(arguments: ["", "has space", "slash/y", String(repeating: "n", count: 65), "émoji"])
    func namespaceNamesMustBeBareWords(name: String) throws {
        let replica = try Fixtures.memoryReplica()
        #expect { try replica.declare(name, .causal) } throws: { ($0 as? ReplicaError)?.code == .invalidName }
        #expect(replica.namespaces.isEmpty)
    }

    @Test func oversizedValuesAndKeysAreRefusedAndWriteNothing() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        let tooBig = [UInt8](repeating: 1, count: Limits.maximumValueBytes + 1)
        #expect { try notes.put("k", tooBig) } throws: { error in
            guard let error = error as? ReplicaError else { return false }
            return error.code == .limitExceeded && error.message.contains("1 MiB")
        }
        #expect { try notes.put(String(repeating: "k", count: Limits.maximumKeyBytes + 1), [1]) } throws: {
            ($0 as? ReplicaError)?.code == .limitExceeded
        }
        #expect { try notes.put("", [1]) } throws: { ($0 as? ReplicaError)?.code == .invalidName }
        try notes.put("k", [UInt8](repeating: 2, count: Limits.maximumValueBytes))
        #expect(try notes.count() == 1)
        #expect(try replica.log("events").count() == 0)
        #expect { try replica.log("events").append(group: "g", body: tooBig) } throws: { ($0 as? ReplicaError)?.code == .limitExceeded }
        #expect { try replica.lww("flags").put("k", tooBig) } throws: { ($0 as? ReplicaError)?.code == .limitExceeded }
        #expect { try replica.appendOnly("workouts").put("k", tooBig) } throws: { ($0 as? ReplicaError)?.code == .limitExceeded }
        #expect { try replica.local("cache").put("k", tooBig) } throws: { ($0 as? ReplicaError)?.code == .limitExceeded }
    }

    @Test func aReadOnlyStoreReadsButRefusesWrites() throws {
        let directory = try TemporaryDirectory()
        do { try Fixtures.replica(in: directory).causal("notes").put("a", [1]) }
        let path = directory.file("device.stele")
        let before = fileBytes(path)
        let replica = try Replica.open(at: path, options: Replica.Options(readOnly: true))
        #expect(try replica.causal("notes").get("a") == [1])
        #expect { try replica.causal("notes").put("b", [2]) } throws: { ($0 as? ReplicaError)?.code == .readOnly }
        #expect { _ = try replica.causal("other") } throws: { ($0 as? ReplicaError)?.code == .readOnly }
        #expect(fileBytes(path) == before)
    }

    @Test func aFailedWriteLeavesTheStoreAsItWas() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        try notes.put("a", [1])
        let faults = SQLiteFaultPlan()
        faults.fail(.step, with: .full, sqlContains: "UPDATE causal_")
        faults.fail(.step, with: .ioError, sqlContains: "INSERT OR REPLACE INTO causal_")
        replica.faults = faults
        #expect { try notes.put("a", [2]) } throws: { ($0 as? SQLiteError)?.code == .full }
        #expect { try notes.delete("a") } throws: { ($0 as? SQLiteError)?.code == .ioError }
        #expect(try notes.get("a") == [1])
        #expect(try notes.tombstoneCount() == 0)
        // The store keeps working once the disk has room again.
        try notes.put("a", [3])
        #expect(try notes.get("a") == [3])
    }

    @Test func aBatchCommitsTogetherOrNotAtAll() throws {
        struct Abort: Error {}
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        #expect(throws: Abort.self) {
            try replica.write {
                try notes.put("a", [1])
                try notes.put("b", [2])
                throw Abort()
            }
        }
        #expect(try notes.count() == 0)
        try replica.write {
            try notes.put("a", [1])
            try notes.put("b", [2])
        }
        #expect(try notes.count() == 2)
    }

    @Test func aStorageFailureInsideABatchFailsTheWholeBatchEvenIfCaught() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        let faults = SQLiteFaultPlan()
        faults.fail(.step, with: .ioError, sqlContains: "INSERT INTO causal_", after: 1)
        replica.faults = faults
        #expect { () throws in
            try replica.write {
                try notes.put("a", [1])
                // The app swallows the failure of the second put and carries on.
                _ = try? notes.put("b", [2])
                try notes.put("c", [3])
            }
        } throws: { ($0 as? SQLiteError)?.code == .ioError }
        #expect(try notes.count() == 0)
    }

    @Test func aRuleBrokenInsideABatchLeavesTheRestOfTheBatch() throws {
        let replica = try Fixtures.memoryReplica()
        let workouts = try replica.appendOnly("workouts")
        try replica.write {
            try workouts.put("run", [1])
            // A refused write changed nothing, so the batch may go on.
            #expect(throws: ReplicaError.self) { try workouts.put("run", [2]) }
            try workouts.put("swim", [3])
        }
        #expect(try workouts.entries().map(\.value) == [[1], [3]])
    }

    @Test func aBackupIsAFullCopyOfTheStore() throws {
        let directory = try TemporaryDirectory()
        let replica = try Fixtures.replica(in: directory)
        try replica.causal("notes").put("a", [1])
        try replica.backup(to: directory.file("backup.stele"))
        try replica.causal("notes").put("b", [2])
        let copy = try Replica.open(at: directory.file("backup.stele"), account: replica.account, device: replica.device)
        #expect(try copy.causal("notes").entries().map(\.key) == ["a"])
    }
}

/// A connection holding a file's exclusive lock until ``release()``.
///
/// `@unchecked Sendable`: made on the test's thread, then touched only by the
/// thread that releases it.
private final class LockHolder: @unchecked Sendable {
    private var connection: Connection?

    init(_ path: String) throws {
        let connection = try Connection(path: path)
        try connection.executeScript("PRAGMA locking_mode=EXCLUSIVE")
        try connection.executeScript("BEGIN EXCLUSIVE; CREATE TABLE held (x); COMMIT")
        self.connection = connection
    }

    func release() { connection = nil }
}
