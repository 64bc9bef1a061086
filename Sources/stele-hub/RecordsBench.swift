import Foundation
import Stele
import SteleBench
import SteleHub
import SteleHubPostgres
import SteleHubServer
import SteleSQL

/// The record API's figures (issue 18): pushes and pulls over loopback HTTP,
/// each against the same rows written or read straight in the database by
/// this process.
enum RecordsBench {
    static func run(quick: Bool, postgres: String?, say: (String) -> Void) throws -> [BenchmarkFigure] {
        let count = quick ? 10_000 : 100_000
        var figures: [BenchmarkFigure] = []
        say("hub.push ...")
        let directory = NSTemporaryDirectory() + "stele-hub-records-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The best of three rounds of each, every round into new files (a run of either
        // alone varies by a quarter on this machine from one run to the next).
        var rig: HubBenchCommand.Rig?
        var pushed = Double.infinity
        var raw = Double.infinity
        for round in 0..<(quick ? 1 : 3) {
            rig?.stop()
            let next = try HubBenchCommand.Rig(storage: try SQLiteHubStorage(path: "\(directory)/hub-\(round).sqlite"))
            rig = next
            pushed = min(pushed, try pushAll(count, to: next))
            raw = min(raw, try rawSQLite(count, path: "\(directory)/raw-\(round).sqlite"))
        }
        guard let rig else { throw HubBenchCommand.BenchError("no round of hub.push ran") }
        figures.append(BenchmarkFigure(name: "hub.push", value: Double(count) / pushed, unit: "mutations/s", baseline: Double(count) / raw, target: .ratioAtLeast(0.3)))
        say("hub.pull ...")
        var pulled = Double.infinity
        var select = Double.infinity
        for _ in 0..<(quick ? 1 : 3) {
            pulled = min(pulled, try pullAll(count, from: rig))
            select = min(
                select,
                try Stopwatch.time {
                    _ = try rig.storage.transaction { sql in
                        try sql.query("SELECT kind, id, payload, modified_ms, grp, seq FROM records WHERE account = $1 ORDER BY seq", [.text(rig.account.hex)])
                    }
                })
        }
        rig.stop()
        figures.append(BenchmarkFigure(name: "hub.pull", value: pulled, unit: "seconds", baseline: select, target: .ratioAtMost(3)))
        if let postgres {
            say("hub.push.postgresql ...")
            let pgRig = try HubBenchCommand.Rig(storage: try PostgresHubStorage(url: postgres))
            defer { pgRig.stop() }
            let pushedPG = try pushAll(count, to: pgRig)
            let rawPG = try rawPostgres(count, url: postgres)
            figures.append(
                BenchmarkFigure(name: "hub.push.postgresql", value: Double(count) / pushedPG, unit: "mutations/s", baseline: Double(count) / rawPG, target: .ratioAtLeast(0.5)))
        }
        return figures
    }

    /// The 100-byte payload of mutation `index`, as the raw baselines write it too.
    static func payload(_ index: Int) -> [UInt8] { (0..<100).map { UInt8(truncatingIfNeeded: index &+ $0 &* 31) } }

    /// A push as a Swift client builds it (Codable, as apps do).
    struct Push: Encodable {
        struct Mutation: Encodable {
            let mutation: String
            let kind: String
            let id: String
            let op: String
            let payload: String
            let modifiedAt: Int64
        }

        let mutations: [Mutation]
    }

    /// Seconds to push `count` put mutations in pushes of 1,000, each encoded by
    /// the client as it goes.
    static func pushAll(_ count: Int, to rig: HubBenchCommand.Rig) throws -> Double {
        let client = HubClient(hub: rig.base, account: rig.account, identity: rig.phone, timeoutSeconds: 120)
        let payloads = (0..<count).map { Data(payload($0)).base64EncodedString() }
        _ = try client.send("GET", "\(client.accountPath)/status")
        let encoder = JSONEncoder()
        return try Stopwatch.time {
            for start in stride(from: 0, to: count, by: 1_000) {
                let push = Push(mutations: (start..<min(start + 1_000, count)).map { index in
                    .init(mutation: "bench-\(index)", kind: "note", id: "record-\(index)", op: "put", payload: payloads[index], modifiedAt: Int64(index))
                })
                let answer = try client.send("POST", "\(client.accountPath)/records/push", body: Array(try encoder.encode(push)))
                guard answer.status == 200 else { throw HubBenchCommand.BenchError("a push was answered \(answer.status): \(String(decoding: answer.body.prefix(200), as: UTF8.self))") }
            }
        }
    }

    /// Seconds to page every change, 1,000 at a time, each page read into records
    /// as Stele's mirror client reads it (`MirrorSync.changesPage`).
    static func pullAll(_ count: Int, from rig: HubBenchCommand.Rig) throws -> Double {
        let client = HubClient(hub: rig.base, account: rig.account, identity: rig.phone, timeoutSeconds: 120)
        var pulled = 0
        let seconds = try Stopwatch.time {
            var cursor: Int64 = 0
            while true {
                let answer = try client.send("GET", "\(client.accountPath)/records/changes?since=\(cursor)&limit=1000")
                guard answer.status == 200 else { throw HubBenchCommand.BenchError("a page was answered \(answer.status)") }
                guard let page = MirrorSync.changesPage(answer.body) else { throw HubBenchCommand.BenchError("a page is not HUB-API's page") }
                pulled += page.records.count
                cursor = page.next
                if !page.more { break }
            }
        }
        guard pulled == count else { throw HubBenchCommand.BenchError("the pull brought \(pulled) of \(count) changes") }
        return seconds
    }

    /// The baseline: the same upserts into the same table, straight into SQLite, 1,000 per transaction.
    static func rawSQLite(_ count: Int, path: String) throws -> Double {
        let connection = try Connection(path: path)
        try connection.executeScript(
            "CREATE TABLE records (account TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, payload BLOB, modified_ms INTEGER NOT NULL, grp TEXT, seq INTEGER NOT NULL, PRIMARY KEY (account, kind, id)); CREATE INDEX records_by_seq ON records (account, seq)")
        return try Stopwatch.time {
            for start in stride(from: 0, to: count, by: 1_000) {
                try connection.transaction {
                    for index in start..<min(start + 1_000, count) {
                        try connection.execute(
                            "INSERT INTO records (account, kind, id, payload, modified_ms, grp, seq) VALUES (?, 'note', ?, ?, ?, NULL, ?) ON CONFLICT (account, kind, id) DO UPDATE SET payload = excluded.payload, modified_ms = excluded.modified_ms, seq = excluded.seq",
                            [.text("bench"), .text("record-\(index)"), .blob(payload(index)), .integer(Int64(index)), .integer(Int64(index + 1))])
                    }
                }
            }
        }
    }

    /// The baseline on PostgreSQL: the same rows inserted with libpq, 1,000 per transaction on one connection.
    static func rawPostgres(_ count: Int, url: String) throws -> Double {
        let connection = try PostgresConnection(url: url)
        _ = try connection.run("DROP TABLE IF EXISTS bench_records")
        _ = try connection.run(
            "CREATE TABLE bench_records (account TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, payload BYTEA, modified_ms BIGINT NOT NULL, grp TEXT, seq BIGINT NOT NULL, PRIMARY KEY (account, kind, id))")
        defer { _ = try? connection.run("DROP TABLE bench_records") }
        return try Stopwatch.time {
            for start in stride(from: 0, to: count, by: 1_000) {
                _ = try connection.run("BEGIN")
                for index in start..<min(start + 1_000, count) {
                    _ = try connection.run(
                        "INSERT INTO bench_records (account, kind, id, payload, modified_ms, grp, seq) VALUES ($1, 'note', $2, $3, $4, NULL, $5) ON CONFLICT (account, kind, id) DO UPDATE SET payload = excluded.payload, modified_ms = excluded.modified_ms, seq = excluded.seq",
                        [.text("bench"), .text("record-\(index)"), .blob(payload(index)), .integer(Int64(index)), .integer(Int64(index + 1))])
                }
                _ = try connection.run("COMMIT")
            }
        }
    }
}
