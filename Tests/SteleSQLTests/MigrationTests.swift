import Testing
@testable import SteleSQL

@Suite struct MigrationTests {
    struct Boom: Error {}

    static let migrator = Migrator([
        Migration(version: 1, name: "create") { try $0.executeScript("CREATE TABLE a (x INTEGER)") },
        Migration(version: 2, name: "add column") { try $0.executeScript("ALTER TABLE a ADD COLUMN y TEXT") },
        Migration(version: 3, name: "index") { try $0.executeScript("CREATE INDEX a_y ON a (y)") },
    ])

    private func schema(_ connection: Connection) throws -> [String] {
        try connection.query("SELECT sql FROM sqlite_schema ORDER BY name") { $0.text(0) }
    }

    @Test func migratesAnEmptyFileToTheLatestVersion() throws {
        let connection = try Connection(path: ":memory:")
        #expect(try Self.migrator.migrate(connection) == 0)
        #expect(try Migrator.version(of: connection) == 3)
        #expect(try Self.migrator.migrate(connection) == 3)
    }

    @Test(arguments: 0...3)
    func migratesFromEveryEarlierVersionToTheSameSchema(start: Int) throws {
        let fresh = try Connection(path: ":memory:")
        try Self.migrator.migrate(fresh)
        let old = try Connection(path: ":memory:")
        try Self.migrator.migrate(old, upTo: start)
        #expect(try Migrator.version(of: old) == start)
        try Self.migrator.migrate(old)
        #expect(try schema(old) == schema(fresh))
    }

    @Test func refusesAFileNewerThanItKnowsAndLeavesItAlone() throws {
        let connection = try Connection(path: ":memory:")
        try connection.executeScript("PRAGMA user_version = 9")
        #expect { try Self.migrator.migrate(connection) } throws: { error in
            guard let error = error as? MigrationError else { return false }
            return error.foundVersion == 9 && error.knownVersion == 3 && error.message.contains("newer")
        }
        #expect(try Migrator.version(of: connection) == 9)
    }

    @Test func aFailingMigrationLeavesThePreviousVersion() throws {
        let broken = Migrator([
            Migration(version: 1, name: "create") { try $0.executeScript("CREATE TABLE a (x INTEGER)") },
            Migration(version: 2, name: "half done") { connection in
                try connection.executeScript("CREATE TABLE b (x INTEGER)")
                throw Boom()
            },
        ])
        let connection = try Connection(path: ":memory:")
        #expect(throws: Boom.self) { try broken.migrate(connection) }
        #expect(try Migrator.version(of: connection) == 1)
        #expect(try connection.scalarInt("SELECT count(*) FROM sqlite_schema WHERE name = 'b'") == 0)
    }
}
