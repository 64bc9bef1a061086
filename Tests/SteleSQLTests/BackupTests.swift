import Foundation
import Testing
import TestSupport
@testable import SteleSQL

@Suite struct BackupTests {
    @Test func copiesADatabaseToAFileAndBack() throws {
        let directory = try TemporaryDirectory()
        let connection = try Connection(path: directory.file("live.db"))
        try connection.executeScript("CREATE TABLE t (x INTEGER)")
        try connection.execute("INSERT INTO t VALUES (1)")
        try connection.backup(to: directory.file("backup.db"))

        try connection.execute("INSERT INTO t VALUES (2)")
        #expect(try connection.scalarInt("SELECT count(*) FROM t") == 2)

        try connection.restore(from: directory.file("backup.db"))
        #expect(try connection.query("SELECT x FROM t") { $0.int64(0) } == [1])

        let copy = try Connection(path: directory.file("backup.db"), mode: .readOnly, configuration: nil)
        #expect(try copy.query("SELECT x FROM t") { $0.int64(0) } == [1])
    }

    @Test func restoringFromAMissingFileFailsAndKeepsTheDatabase() throws {
        let directory = try TemporaryDirectory()
        let connection = try Connection(path: directory.file("live.db"))
        try connection.executeScript("CREATE TABLE t (x INTEGER)")
        #expect(throws: SQLiteError.self) { try connection.restore(from: directory.file("nope.db")) }
        #expect(try connection.scalarInt("SELECT count(*) FROM t") == 0)
    }

    @Test func restoringFromAFileThatIsNotADatabaseFailsAndKeepsTheDatabase() throws {
        let directory = try TemporaryDirectory()
        let connection = try Connection(path: directory.file("live.db"))
        try connection.executeScript("CREATE TABLE t (x INTEGER)")
        try connection.execute("INSERT INTO t VALUES (7)")
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: directory.file("garbage.db")))
        #expect(throws: SQLiteError.self) { try connection.restore(from: directory.file("garbage.db")) }
        #expect(try connection.query("SELECT x FROM t") { $0.int64(0) } == [7])
    }

    @Test(arguments: [SQLiteOperation.backupInit, .backupStep, .backupFinish])
    func aForcedBackupFailureIsReported(operation: SQLiteOperation) throws {
        let directory = try TemporaryDirectory()
        let connection = try Connection(path: directory.file("live.db"))
        try connection.executeScript("CREATE TABLE t (x INTEGER)")
        let faults = SQLiteFaultPlan()
        faults.fail(operation, with: .ioError)
        connection.faults = faults
        #expect { try connection.backup(to: directory.file("backup.db")) } throws: { ($0 as? SQLiteError)?.operation == operation }
        #expect(faults.fired == 1)
    }
}
