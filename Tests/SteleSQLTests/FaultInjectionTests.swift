import Testing
@testable import SteleSQL

@Suite struct FaultInjectionTests {
    private func table() throws -> Connection {
        let connection = try Connection(path: ":memory:")
        try connection.executeScript("CREATE TABLE t (x INTEGER PRIMARY KEY)")
        return connection
    }

    @Test(arguments: [SQLiteResultCode.busy, .ioError, .full])
    func aForcedStepFailureIsTypedAndWritesNothing(code: SQLiteResultCode) throws {
        let connection = try table()
        let faults = SQLiteFaultPlan()
        faults.fail(.step, with: code, sqlContains: "INSERT", after: 2)
        connection.faults = faults
        var failedAt: Int?
        do {
            try connection.transaction {
                for value in 1...5 {
                    do {
                        try connection.execute("INSERT INTO t VALUES (?)", [.integer(Int64(value))])
                    } catch {
                        failedAt = value
                        throw error
                    }
                }
            }
            Issue.record("the forced failure must surface")
        } catch let error as SQLiteError {
            #expect(error.code == code)
            #expect(error.operation == .step)
            #expect(error.sql == "INSERT INTO t VALUES (?)")
        }
        #expect(failedAt == 3)
        #expect(try connection.scalarInt("SELECT count(*) FROM t") == 0)
        #expect(faults.fired == 1)
        #expect(faults.pendingRules == 0)
    }

    @Test func aPausedPlanLetsCallsThroughWithoutCountingThem() throws {
        let connection = try table()
        let faults = SQLiteFaultPlan()
        faults.fail(.step, with: .ioError, after: 1)
        connection.faults = faults
        faults.pause()
        faults.pause()
        for value in 1...3 { try connection.execute("INSERT INTO t VALUES (?)", [.integer(Int64(value))]) }
        faults.resume()
        // Still paused once: nested pauses need as many resumes.
        try connection.execute("INSERT INTO t VALUES (4)")
        faults.resume()
        #expect(faults.fired == 0)
        // The paused calls did not count toward `after`: one call through, then the failure.
        try connection.execute("INSERT INTO t VALUES (5)")
        #expect(throws: SQLiteError.self) { try connection.execute("INSERT INTO t VALUES (6)") }
        #expect(faults.fired == 1)
        #expect(try connection.scalarInt("SELECT count(*) FROM t") == 5)
    }

    @Test func aRuleCanFailSeveralCallsInARow() throws {
        let connection = try table()
        let faults = SQLiteFaultPlan()
        faults.fail(.prepare, with: .busy, count: 2)
        connection.faults = faults
        #expect(throws: SQLiteError.self) { _ = try connection.prepare("SELECT 1") }
        #expect(throws: SQLiteError.self) { _ = try connection.prepare("SELECT 1") }
        _ = try connection.prepare("SELECT 1")
        #expect(faults.fired == 2)
    }

    @Test func aForcedOpenFailureThrows() throws {
        let faults = SQLiteFaultPlan()
        faults.fail(.open, with: .cantOpen)
        #expect { _ = try Connection(path: ":memory:", faults: faults) } throws: {
            ($0 as? SQLiteError)?.operation == .open
        }
    }

    @Test func aForcedBindFailureThrows() throws {
        let connection = try table()
        let faults = SQLiteFaultPlan()
        faults.fail(.bind, with: .tooBig)
        connection.faults = faults
        #expect { try connection.execute("INSERT INTO t VALUES (?)", [1]) } throws: { ($0 as? SQLiteError)?.code == .tooBig }
    }

    @Test func rulesOnlyMatchTheirSQL() throws {
        let connection = try table()
        let faults = SQLiteFaultPlan()
        faults.fail(.step, with: .full, sqlContains: "DELETE")
        connection.faults = faults
        try connection.execute("INSERT INTO t VALUES (1)")
        #expect(faults.pendingRules == 1)
        #expect(throws: SQLiteError.self) { try connection.execute("DELETE FROM t") }
        #expect(try connection.scalarInt("SELECT count(*) FROM t") == 1)
    }
}
