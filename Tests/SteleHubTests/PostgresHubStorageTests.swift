import Dispatch
import Foundation
import SteleSQL
import Synchronization
import Testing
import TestSupport
@testable import SteleHub
@testable import SteleHubPostgres

/// Collects what a listener hears and lets a test wait for one key.
private final class Heard: Sendable {
    private let keys = Mutex<[String]>([])

    var all: [String] { keys.withLock { $0 } }

    func record(_ key: String) { keys.withLock { $0.append(key) } }

    /// Waits up to `seconds` for `key` to have been heard.
    func waitFor(_ key: String, seconds: Double = 15) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if all.contains(key) { return true }
            usleep(10_000)
        }
        return all.contains(key)
    }
}

private func storageError(_ error: (any Error)?) -> HubStorageError.Code? {
    (error as? HubStorageError)?.code
}

@Suite(.serialized) struct PostgresHubStorageTests {
    @Test func everySQLValueKindRoundTripsIncludingBytesWithNULsAndAnEmptyBlob() throws {
        let storage = try PostgresHubStorage(url: try PostgresTestCluster.url())
        defer { storage.close() }
        let nulBytes: [UInt8] = [0, 1, 0, 255, 0, 0x5C, 0x78]
        let everyByte = (0...255).map { UInt8($0) }
        let rows: [[SQLValue]] = [
            [.integer(Int64.min), .real(-0.1), .text("héllo 'quoted' \\x00"), .blob(nulBytes), .null],
            [.integer(Int64.max), .real(1e300), .text(""), .blob([]), .null],
            [.integer(0), .real(.infinity), .text("🙂"), .blob(everyByte), .null],
        ]
        let read = try storage.transaction { sql -> [[SQLValue]] in
            try sql.execute("CREATE TABLE kinds (n BIGINT PRIMARY KEY, i BIGINT, r DOUBLE PRECISION, t TEXT, b BYTEA, z TEXT)", [])
            for (number, row) in rows.enumerated() {
                let changed = try sql.execute("INSERT INTO kinds VALUES ($1, $2, $3, $4, $5, $6)", [.integer(Int64(number))] + row)
                #expect(changed == 1)
            }
            return try sql.query("SELECT i, r, t, b, z FROM kinds ORDER BY n", [])
        }
        #expect(read == rows)
        // Smaller integer types and a parameter read back as itself.
        let small = try storage.transaction { sql in
            try sql.query("SELECT 7::int2, 8::int4, 9::int8, 1.5::float4, $1::bytea, $2::bigint", [.blob([0]), .integer(42)])
        }
        #expect(small == [[.integer(7), .integer(8), .integer(9), .real(1.5), .blob([0]), .integer(42)]])
    }

    @Test func aThrowRollsBackEverything() throws {
        struct Refused: Error {}
        let storage = try PostgresHubStorage(url: try PostgresTestCluster.url())
        defer { storage.close() }
        #expect(throws: Refused.self) {
            try storage.transaction { sql in
                try sql.execute("INSERT INTO invites (code_hash, created_ms) VALUES ($1, $2)", ["abc", 1])
                throw Refused()
            }
        }
        let count = try storage.transaction { sql in try sql.query("SELECT count(*) FROM invites", []) }
        #expect(count == [[.integer(0)]])
    }

    @Test func aFailedStatementTheBodyCaughtStillFailsTheTransaction() throws {
        let storage = try PostgresHubStorage(url: try PostgresTestCluster.url())
        defer { storage.close() }
        let error = #expect(throws: PostgresError.self) {
            try storage.transaction { sql in
                try sql.execute("INSERT INTO invites (code_hash, created_ms) VALUES ($1, $2)", ["abc", 1])
                _ = try? sql.query("SELECT no_such_column FROM invites", [])
            }
        }
        #expect(error?.sqlState == "42703")
        #expect(try storage.transaction { sql in try sql.query("SELECT count(*) FROM invites", []) } == [[.integer(0)]])
    }

    @Test func migrationsRunOnceAndRecordTheVersion() throws {
        let url = try PostgresTestCluster.url()
        let first = try PostgresHubStorage(url: url)
        defer { first.close() }
        let version = try first.transaction { sql in try sql.query("SELECT version FROM hub_schema", []) }
        #expect(version == [[.integer(Int64(HubSchema.latestVersion))]])
        let tables = try first.transaction { sql in
            try sql.query("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name IN ('accounts', 'mailbox', 'anchors')", [])
        }
        #expect(tables == [[.integer(3)]])
        // A second process: running migration 1 again would fail on CREATE TABLE.
        let second = try PostgresHubStorage(url: url)
        defer { second.close() }
        let versions = try second.transaction { sql in try sql.query("SELECT version FROM hub_schema", []) }
        #expect(versions == [[.integer(Int64(HubSchema.latestVersion))]])
    }

    @Test func hubProcessesStartingTogetherMigrateOnce() throws {
        let url = try PostgresTestCluster.url()
        let failures = Mutex<[String]>([])
        let storages = Mutex<[PostgresHubStorage]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do {
                let storage = try PostgresHubStorage(url: url, connections: 1)
                storages.withLock { $0.append(storage) }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 } == [])
        let all = storages.withLock { $0 }
        let versions = try all.first.map { storage in try storage.transaction { sql in try sql.query("SELECT version FROM hub_schema", []) } }
        #expect(versions == [[.integer(Int64(HubSchema.latestVersion))]])
        all.forEach { $0.close() }
    }

    @Test func aNewerSchemaIsRefusedAndLeftUntouched() throws {
        let url = try PostgresTestCluster.url()
        let newer = Int64(HubSchema.latestVersion + 1)
        do {
            let storage = try PostgresHubStorage(url: url)
            defer { storage.close() }
            _ = try storage.transaction { sql in try sql.execute("UPDATE hub_schema SET version = $1", [.integer(newer)]) }
        }
        let error = #expect(throws: HubStorageError.self) { _ = try PostgresHubStorage(url: url) }
        #expect(error?.code == .newerSchema)
        let connection = try PostgresConnection(url: url)
        #expect(try connection.run("SELECT version FROM hub_schema").rows == [[.integer(newer)]])
    }

    @Test func aUniqueViolationIsAConflict() throws {
        let storage = try PostgresHubStorage(url: try PostgresTestCluster.url())
        defer { storage.close() }
        _ = try storage.transaction { sql in try sql.execute("INSERT INTO accounts VALUES ($1, $2, $3)", ["a1", 1, 0]) }
        let error = #expect(throws: HubStorageError.self) {
            try storage.transaction { sql in try sql.execute("INSERT INTO accounts VALUES ($1, $2, $3)", ["a1", 2, 0]) }
        }
        #expect(error?.code == .conflict)
        #expect(error?.message.contains("a1") == false, "the message must not quote bound values")
    }

    @Test func aSerializationFailureRunsTheBodyAgainThenSurfacesAsUnavailable() throws {
        let storage = try PostgresHubStorage(url: try PostgresTestCluster.url())
        defer { storage.close() }
        let raise = "DO $$ BEGIN RAISE EXCEPTION 'forced' USING ERRCODE = '40001'; END $$"
        var attempts = 0
        let value = try storage.transaction { sql -> Int in
            attempts += 1
            if attempts == 1 { try sql.execute(raise, []) }
            return attempts
        }
        #expect(value == 2)
        attempts = 0
        let error = #expect(throws: HubStorageError.self) {
            try storage.transaction { sql in
                attempts += 1
                try sql.execute(raise, [])
            }
        }
        #expect(error?.code == .unavailable)
        #expect(attempts == PostgresShared.maximumAttempts)
    }

    @Test func lockAccountSerializesConcurrentReadIncrementWrites() throws {
        let storage = try PostgresHubStorage(url: try PostgresTestCluster.url())
        defer { storage.close() }
        _ = try storage.transaction { sql in try sql.execute("INSERT INTO accounts VALUES ($1, $2, $3)", ["acct", 0, 0]) }
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { _ in
            for _ in 0..<100 {
                do {
                    try storage.transaction { sql in
                        try sql.lockAccount("acct")
                        guard case .integer(let value)? = try sql.query("SELECT roster_version FROM accounts WHERE id = $1", ["acct"]).first?.first else {
                            throw PostgresError(sqlState: "", message: "no counter")
                        }
                        try sql.execute("UPDATE accounts SET roster_version = $1 WHERE id = $2", [.integer(value + 1), "acct"])
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 } == [])
        #expect(try storage.transaction { sql in try sql.query("SELECT roster_version FROM accounts", []) } == [[.integer(200)]])
    }

    @Test func anAnnouncementReachesTheListenersOfEveryStorageOnTheDatabase() throws {
        let url = try PostgresTestCluster.url()
        let writer = try PostgresHubStorage(url: url)
        let reader = try PostgresHubStorage(url: url)
        defer {
            writer.close()
            reader.close()
        }
        let heardByReader = Heard()
        let heardByWriter = Heard()
        reader.listen { heardByReader.record($0) }
        writer.listen { heardByWriter.record($0) }
        for index in 0..<50 { writer.announce("key-\(index)") }
        #expect(heardByReader.waitFor("key-49"))
        #expect(heardByWriter.waitFor("key-0"))
        #expect(Set(heardByReader.all).isSuperset(of: (0..<50).map { "key-\($0)" }))
        #expect(!heardByReader.all.contains("*"))
    }

    @Test func aConnectionLostMidTransactionIsUnavailableAndTheNextTransactionSucceeds() throws {
        let url = try PostgresTestCluster.url()
        let storage = try PostgresHubStorage(url: url, connections: 1)
        defer { storage.close() }
        let admin = try PostgresConnection(url: url)
        let error = #expect(throws: HubStorageError.self) {
            try storage.transaction { sql in
                try sql.execute("INSERT INTO invites (code_hash, created_ms) VALUES ($1, $2)", ["lost", 1])
                _ = try admin.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'stele-hub'")
                usleep(100_000)
                try sql.execute("INSERT INTO invites (code_hash, created_ms) VALUES ($1, $2)", ["lost2", 1])
            }
        }
        #expect(error?.code == .unavailable)
        #expect(try storage.transaction { sql in try sql.query("SELECT count(*) FROM invites", []) } == [[.integer(0)]])
        // Idle connections terminated between transactions are reset on their next use.
        _ = try admin.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'stele-hub'")
        usleep(100_000)
        #expect(try storage.transaction { sql in try sql.query("SELECT 1", []) } == [[.integer(1)]])
    }

    @Test func aStoppedServerIsUnavailableAndTheSameStorageRecoversWhenItIsBack() throws {
        let cluster = try PostgresTestCluster.start()
        defer { PostgresTestCluster.remove(cluster) }
        let url = "postgresql://postgres@127.0.0.1:\(cluster.port)/postgres"
        let storage = try PostgresHubStorage(url: url, connections: 2)
        defer { storage.close() }
        let heard = Heard()
        storage.listen { heard.record($0) }
        _ = try storage.transaction { sql in try sql.execute("INSERT INTO accounts VALUES ($1, $2, $3)", ["a", 0, 0]) }

        try PostgresTestCluster.stop(cluster)
        for _ in 0..<3 {
            let error = #expect(throws: HubStorageError.self) {
                try storage.transaction { sql in try sql.query("SELECT count(*) FROM accounts", []) }
            }
            #expect(error?.code == .unavailable)
            #expect(error?.message.contains("check that the server is running") == true)
        }
        storage.announce("while-down")

        try PostgresTestCluster.restart(cluster)
        #expect(try storage.transaction { sql in try sql.query("SELECT count(*) FROM accounts", []) } == [[.integer(1)]])
        // The listener reconnects and tells every waiter to look again, then hears new announcements.
        #expect(heard.waitFor("*", seconds: 30))
        storage.announce("after")
        #expect(heard.waitFor("after"))
    }

    @Test func aClosedStorageRefusesTransactions() throws {
        let storage = try PostgresHubStorage(url: try PostgresTestCluster.url())
        storage.close()
        let error = #expect(throws: HubStorageError.self) {
            try storage.transaction { sql in try sql.query("SELECT 1", []) }
        }
        #expect(error?.code == .unavailable)
    }

    @Test func anUnreachableServerIsUnavailableAtInit() throws {
        let error = #expect(throws: HubStorageError.self) {
            _ = try PostgresHubStorage(url: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
        }
        #expect(error?.code == .unavailable)
    }
}
