import Testing
@testable import SteleSQL

@Suite struct TransactionTests {
    struct Boom: Error {}

    private func table() throws -> Connection {
        let connection = try Connection(path: ":memory:")
        try connection.executeScript("CREATE TABLE t (x INTEGER PRIMARY KEY)")
        return connection
    }

    private func count(_ connection: Connection) throws -> Int64 { try connection.scalarInt("SELECT count(*) FROM t") ?? -1 }

    @Test func commitsWhenTheBodyReturns() throws {
        let connection = try table()
        try connection.transaction { try connection.execute("INSERT INTO t VALUES (1)") }
        #expect(try count(connection) == 1)
        #expect(connection.isAutocommit)
    }

    @Test func rollsBackWhenTheBodyThrows() throws {
        let connection = try table()
        #expect(throws: Boom.self) {
            try connection.transaction {
                try connection.execute("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try count(connection) == 0)
        #expect(connection.isAutocommit)
    }

    @Test func theFirstErrorWinsWhenTheRollbackFailsToo() throws {
        let connection = try table()
        let faults = SQLiteFaultPlan()
        faults.fail(.rollback, with: .ioError)
        connection.faults = faults
        #expect(throws: Boom.self) {
            try connection.transaction {
                try connection.execute("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(faults.fired == 1)
        // The connection is still usable and nothing was committed.
        #expect(connection.isAutocommit)
        #expect(try count(connection) == 0)
    }

    @Test func noticesWhenSQLiteRolledBackOnItsOwn() throws {
        let connection = try table()
        #expect {
            try connection.transaction {
                try connection.execute("INSERT INTO t VALUES (1)")
                // Stands in for SQLite abandoning the transaction after SQLITE_FULL:
                // the body carries on as if nothing happened.
                try connection.executeScript("ROLLBACK")
            }
        } throws: { ($0 as? SQLiteError)?.code == .abort }
        #expect(try count(connection) == 0)
    }

    @Test func aFailedCommitIsReportedAndRolledBack() throws {
        let connection = try table()
        let faults = SQLiteFaultPlan()
        faults.fail(.commit, with: .busy)
        connection.faults = faults
        #expect { try connection.transaction { try connection.execute("INSERT INTO t VALUES (1)") } } throws: {
            ($0 as? SQLiteError)?.isBusy == true
        }
        #expect(connection.isAutocommit)
        #expect(try count(connection) == 0)
    }

    @Test func nestedTransactionsAreSavepoints() throws {
        let connection = try table()
        try connection.transaction {
            try connection.execute("INSERT INTO t VALUES (1)")
            #expect(throws: Boom.self) {
                try connection.transaction {
                    try connection.execute("INSERT INTO t VALUES (2)")
                    throw Boom()
                }
            }
            try connection.transaction { try connection.execute("INSERT INTO t VALUES (3)") }
        }
        #expect(try connection.query("SELECT x FROM t ORDER BY x") { $0.int64(0) } == [1, 3])
    }

    @Test func aFailingBeginIsReported() throws {
        let connection = try table()
        let faults = SQLiteFaultPlan()
        faults.fail(.begin, with: .busy)
        connection.faults = faults
        var ran = false
        #expect(throws: SQLiteError.self) { try connection.transaction { ran = true } }
        #expect(!ran)
        #expect(!connection.isInTransaction)
    }
}
