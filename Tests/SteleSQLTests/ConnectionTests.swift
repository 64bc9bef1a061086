import Foundation
import Testing
import TestSupport
@testable import SteleSQL

@Suite struct ConnectionTests {
    @Test func opensInWALWithSynchronousNormal() throws {
        let directory = try TemporaryDirectory()
        let connection = try Connection(path: directory.file("a.db"))
        #expect(try connection.scalarText("PRAGMA journal_mode") == "wal")
        // synchronous NORMAL is 1.
        #expect(try connection.scalarInt("PRAGMA synchronous") == 1)
    }

    /// Exclusive locking (the simulator's stores): the file is this connection's
    /// alone once it has read, its WAL index lives in memory, and closing it lets
    /// another connection in.
    @Test func anExclusiveConnectionKeepsOthersOutUntilItCloses() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        var configuration = Connection.Configuration.standard
        configuration.lockingMode = "EXCLUSIVE"
        configuration.busyTimeoutMilliseconds = 0
        var exclusive: Connection? = try Connection(path: path, mode: .readWriteCreate, configuration: configuration)
        #expect(exclusive != nil)
        try exclusive?.execute("CREATE TABLE t (x)")
        try exclusive?.execute("INSERT INTO t VALUES (1)")
        #expect(try exclusive?.scalarText("PRAGMA locking_mode") == "exclusive")
        #expect(try exclusive?.scalarText("PRAGMA journal_mode") == "wal")
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"), "the WAL index should be in memory")
        // Unconfigured: no busy timeout, so a held lock answers SQLITE_BUSY at once.
        let other = try Connection(path: path, mode: .readWrite, configuration: nil)
        let refused = #expect(throws: SQLiteError.self) { try other.scalarInt("SELECT count(*) FROM t") }
        #expect(refused?.code.primary == .busy)
        exclusive = nil
        #expect(try other.scalarInt("SELECT count(*) FROM t") == 1)
    }

    /// Every row inserted, updated or deleted through this connection counts under
    /// its table's key, a rolled-back one too; another table's and another
    /// connection's rows do not; the triggers are this connection's alone.
    @Test func changesAreCountedPerWatchedTableThroughThisConnectionOnly() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let connection = try Connection(path: path)
        try connection.executeScript("CREATE TABLE a (x PRIMARY KEY) WITHOUT ROWID; CREATE TABLE \"b c\" (x); CREATE TABLE d (x);")
        #expect(connection.changeCount(of: 1) == 0)
        try connection.countChanges(of: "a", as: 1)
        try connection.countChanges(of: "b c", as: 2)
        try connection.countChanges(of: "a", as: 1)
        try connection.execute("INSERT INTO a VALUES (1), (2)")
        try connection.execute("UPDATE a SET x = 3 WHERE x = 2")
        try connection.execute("DELETE FROM a")
        #expect(connection.changeCount(of: 1) == 5)
        #expect(connection.changeCount(of: 2) == 0)
        try connection.execute("INSERT INTO \"b c\" VALUES (1)")
        try connection.execute("INSERT INTO d VALUES (1)")
        #expect(connection.changeCount(of: 2) == 1)
        #expect(connection.changeCount(of: 1) == 5)
        try connection.execute("BEGIN")
        try connection.execute("INSERT INTO a VALUES (9)")
        try connection.execute("ROLLBACK")
        #expect(connection.changeCount(of: 1) == 6)
        #expect(try connection.scalarInt("SELECT count(*) FROM a") == 0)
        let other = try Connection(path: path)
        try other.execute("INSERT INTO a VALUES (7)")
        #expect(connection.changeCount(of: 1) == 6)
        #expect(other.changeCount(of: 1) == 0)
    }

    /// With `noting`, the keys of the rows changed through this connection are
    /// taken once each: an insert's, a delete's, an update's old and new, a
    /// rolled-back change's; not another connection's. Too many, or a key that
    /// is not text, and they cannot be listed (`nil`), as for a group noting nothing.
    @Test func changedRowsAreNotedByKeyAndTakenOnce() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("a.db")
        let connection = try Connection(path: path)
        try connection.executeScript("CREATE TABLE a (k TEXT PRIMARY KEY, v) WITHOUT ROWID; CREATE TABLE b (m TEXT, x); CREATE TABLE c (k);")
        try connection.countChanges(of: "a", as: 1, noting: "k")
        try connection.countChanges(of: "b", as: 1, noting: "m")
        try connection.countChanges(of: "c", as: 2)
        #expect(connection.takeChangedRows(of: 1) == [])
        #expect(connection.takeChangedRows(of: 2) == nil)
        try connection.execute("INSERT INTO a VALUES ('x', 1), ('y', 2), (?, 3)", [.text("a\u{0}b")])
        try connection.execute("INSERT INTO b VALUES ('z', 1)")
        try connection.execute("INSERT INTO c VALUES ('ignored')")
        #expect(connection.takeChangedRows(of: 1) == Set(["x", "y", "a\u{0}b", "z"].map { Array($0.utf8) }))
        #expect(connection.takeChangedRows(of: 1) == [])
        try connection.execute("UPDATE a SET k = 'w' WHERE k = 'x'")
        try connection.execute("DELETE FROM a WHERE k = 'y'")
        #expect(connection.takeChangedRows(of: 1) == Set(["x", "w", "y"].map { Array($0.utf8) }))
        try connection.execute("BEGIN")
        try connection.execute("INSERT INTO b VALUES ('rolled', 2)")
        try connection.execute("ROLLBACK")
        #expect(connection.takeChangedRows(of: 1) == [Array("rolled".utf8)])
        let other = try Connection(path: path)
        try other.execute("INSERT INTO a VALUES ('elsewhere', 9)")
        #expect(connection.takeChangedRows(of: 1) == [])
        // Two keys Swift's String holds equal are two rows.
        try connection.execute("INSERT INTO a VALUES (?, 1), (?, 2)", [.text("\u{E9}"), .text("e\u{301}")])
        #expect(connection.takeChangedRows(of: 1)?.count == 2)
        // A key that is not text cannot be named.
        try connection.execute("INSERT INTO b VALUES (x'07', 1)")
        #expect(connection.takeChangedRows(of: 1) == nil)
        #expect(connection.takeChangedRows(of: 1) == [])
        // Nor hundreds of them; a NULL key is no row to name.
        try connection.execute("INSERT INTO b VALUES (NULL, 1)")
        #expect(connection.takeChangedRows(of: 1) == [])
        try connection.transaction {
            for index in 0..<600 { try connection.execute("INSERT INTO b VALUES (?, 1)", [.text("r\(index)")]) }
        }
        #expect(connection.takeChangedRows(of: 1) == nil)
        try connection.execute("INSERT INTO b VALUES ('after', 1)")
        #expect(connection.takeChangedRows(of: 1) == [Array("after".utf8)])
        // The count goes on as before: one per row changed.
        #expect(connection.changeCount(of: 1) == 612)
    }

    @Test func freedPagesGoBackToTheFileSystem() throws {
        let directory = try TemporaryDirectory()
        for incremental in [true, false] {
            let path = directory.file("vacuum-\(incremental).db")
            let connection = try Connection(path: path, configuration: Connection.Configuration(autoVacuum: incremental ? "INCREMENTAL" : "NONE"))
            #expect(try connection.scalarInt("PRAGMA auto_vacuum") == (incremental ? 2 : 0))
            try connection.executeScript("CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID")
            try connection.transaction {
                for index in 0..<5_000 { try connection.execute("INSERT INTO t VALUES (?, ?)", [.text("k\(index)"), .blob(Array(repeating: 7, count: 100))]) }
            }
            try connection.execute("DELETE FROM t WHERE k > 'k1'")
            let free = try #require(try connection.scalarInt("PRAGMA freelist_count"))
            #expect(free > 50)
            let pagesBefore = try #require(try connection.scalarInt("PRAGMA page_count"))
            let returned = try connection.returnFreePages()
            #expect(returned >= Int(free) - 2, "incremental \(incremental)")
            #expect(try connection.scalarInt("PRAGMA freelist_count") == 0)
            #expect(try connection.scalarInt("PRAGMA page_count") == pagesBefore - Int64(returned))
            // Either way the file is incremental afterwards.
            #expect(try connection.scalarInt("PRAGMA auto_vacuum") == 2)
            #expect(try connection.scalarInt("SELECT count(*) FROM t") == 2)
        }
    }

    @Test func readOnlyOpenOfMissingFileFailsAndCreatesNothing() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("missing.db")
        #expect {
            _ = try Connection(path: path, mode: .readOnly, configuration: nil)
        } throws: { ($0 as? SQLiteError)?.code.primary == .cantOpen }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aReadOnlyOpenWritesNothingAndLeavesNoFilesBesideTheDatabase() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("store.db")
        let beside = [path + "-wal", path + "-shm"]
        func present() -> [Bool] { beside.map { FileManager.default.fileExists(atPath: $0) } }
        do {
            let writer = try Connection(path: path)
            try writer.execute("CREATE TABLE t(x)")
            try writer.execute("INSERT INTO t VALUES (1)")
        }
        #expect(present() == [false, false])
        let bytes = try #require(FileManager.default.contents(atPath: path))
        do {
            let reader = try Connection(path: path, mode: .readOnly, configuration: nil)
            #expect(try reader.scalarInt("SELECT count(*) FROM t") == 1)
            #expect(present() == [true, true])  // SQLite's own, while the reader is open
            #expect { try reader.execute("INSERT INTO t VALUES (2)") } throws: { ($0 as? SQLiteError)?.code.primary == .readOnly }
        }
        #expect(present() == [false, false])
        #expect(FileManager.default.contents(atPath: path) == bytes)

        // While another connection uses the file, its files stay, and go when it closes.
        do {
            let other = try Connection(path: path)
            #expect(try other.scalarInt("SELECT count(*) FROM t") == 1)
            do {
                let reader = try Connection(path: path, mode: .readOnly, configuration: nil)
                try other.execute("INSERT INTO t VALUES (3)")
                #expect(try reader.scalarInt("SELECT count(*) FROM t") == 2)
                #expect { try reader.execute("DELETE FROM t") } throws: { ($0 as? SQLiteError)?.code.primary == .readOnly }
            }
            #expect(present() == [true, true])
            #expect(try other.scalarInt("SELECT count(*) FROM t") == 2)
        }
        #expect(present() == [false, false])
    }

    @Test func statementsAreCachedBySQLText() throws {
        let connection = try Connection(path: ":memory:")
        let before = connection.cachedStatementCount
        let first = try connection.cached("SELECT 1")
        let second = try connection.cached("SELECT 1")
        #expect(first === second)
        let other = try connection.cached("SELECT 2")
        #expect(first !== other)
        #expect(connection.cachedStatementCount == before + 2)
    }

    @Test func aStatementWhoseStepFailedIsEvicted() throws {
        let connection = try Connection(path: ":memory:")
        try connection.executeScript("CREATE TABLE t (x INTEGER PRIMARY KEY)")
        try connection.execute("INSERT INTO t VALUES (?)", [1])
        let before = try connection.cached("INSERT INTO t VALUES (?)")
        #expect(throws: SQLiteError.self) { try connection.execute("INSERT INTO t VALUES (?)", [1]) }
        let after = try connection.cached("INSERT INTO t VALUES (?)")
        #expect(before !== after)
    }

    @Test func errorsCarryCodeMessageAndSQLButNeverBoundValues() throws {
        let connection = try Connection(path: ":memory:")
        try connection.executeScript("CREATE TABLE t (x TEXT PRIMARY KEY)")
        try connection.execute("INSERT INTO t VALUES (?)", ["secret-value"])
        do {
            try connection.execute("INSERT INTO t VALUES (?)", ["secret-value"])
            Issue.record("a duplicate primary key must fail")
        } catch let error as SQLiteError {
            #expect(error.code.primary == .constraint)
            #expect(error.sql == "INSERT INTO t VALUES (?)")
            #expect(error.message.contains("UNIQUE"))
            #expect(!error.description.contains("secret-value"))
        }
    }

    @Test func aSyntaxErrorIsATypedPrepareError() throws {
        let connection = try Connection(path: ":memory:")
        #expect {
            _ = try connection.prepare("SELEC nonsense")
        } throws: { error in
            guard let error = error as? SQLiteError else { return false }
            return error.operation == .prepare && error.code.primary == .error && error.sql == "SELEC nonsense"
        }
    }

    @Test func valuesRoundTripThroughEveryType() throws {
        let connection = try Connection(path: ":memory:")
        try connection.executeScript("CREATE TABLE t (a, b, c, d, e)")
        let values: [SQLValue] = [.integer(-42), .real(2.5), .text("héllo"), .blob([0, 1, 255]), .null]
        try connection.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", values)
        let row = try connection.queryFirst("SELECT a, b, c, d, e FROM t") { row in (0..<5).map { row.value(Int32($0)) } }
        #expect(row == values)
    }

    @Test func anEmptyBlobIsNotNull() throws {
        let connection = try Connection(path: ":memory:")
        try connection.executeScript("CREATE TABLE t (b BLOB)")
        try connection.execute("INSERT INTO t VALUES (?)", [.blob([])])
        #expect(try connection.queryFirst("SELECT b IS NULL, length(b) FROM t") { ($0.int64(0), $0.int64(1)) }! == (0, 0))
    }
}
