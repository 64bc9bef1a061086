import Foundation
import Stele
import SteleBench
import SteleHub
import SteleSQL

/// Tombstone compaction's figures (issue 20): `hub.replay.fresh`, a replay to an
/// empty client of an account that held 100,000 live and 900,000 tombstoned
/// records, after compaction, against the replay of an account that only ever
/// held the 100,000 live ones; and `hub.compact`, how fast compaction collects.
enum CompactionBench {
    static func run(quick: Bool, say: (String) -> Void) throws -> [BenchmarkFigure] {
        let live = quick ? 10_000 : 100_000
        let gone = live * 9
        let directory = NSTemporaryDirectory() + "stele-hub-compaction-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        say("hub.replay.fresh: \(live + gone) records, \(gone) of them deleted ...")
        let churned = try HubBenchCommand.Rig(storage: try SQLiteHubStorage(path: "\(directory)/churned.sqlite"))
        defer { churned.stop() }
        try fill(churned, live: live, gone: gone)
        // Every device pulls to the end (the laptop never pulled: it holds the horizon
        // until it does), then the hub collects.
        for token in [churned.phoneToken, churned.laptopToken] { try pullToTheEnd(churned, token: token) }
        var compaction = HubService.Compaction()
        let compacting = try Stopwatch.time { compaction = try churned.service.compact() }
        guard compaction.collected == gone else { throw HubBenchCommand.BenchError("compaction collected \(compaction.collected) of \(gone) tombstones") }

        let plain = try HubBenchCommand.Rig(storage: try SQLiteHubStorage(path: "\(directory)/plain.sqlite"))
        defer { plain.stop() }
        try fill(plain, live: live, gone: 0)

        var replayed = Double.infinity
        var baseline = Double.infinity
        for _ in 0..<(quick ? 1 : 3) {
            replayed = min(replayed, try replayAll(live, from: churned))
            baseline = min(baseline, try replayAll(live, from: plain))
        }
        return [
            BenchmarkFigure(name: "hub.replay.fresh", value: replayed, unit: "seconds", baseline: baseline, target: .ratioAtMost(1.2)),
            BenchmarkFigure(name: "hub.compact", value: Double(gone) / compacting, unit: "tombstones/s"),
        ]
    }

    /// Writes `live` records and `gone` tombstones straight into the account's
    /// tables (ids interleaved, one live in ten), with their history ids.
    static func fill(_ rig: HubBenchCommand.Rig, live: Int, gone: Int) throws {
        let total = live + gone
        let stride = gone == 0 ? 1 : (total / live)
        var seq: Int64 = 0
        var written = 0
        while written < total {
            try rig.storage.transaction { sql in
                for _ in 0..<min(10_000, total - written) {
                    let index = written
                    written += 1
                    seq += 1
                    let isLive = index % stride == 0
                    try sql.execute(
                        "INSERT INTO records (account, kind, id, payload, modified_ms, grp, seq) VALUES ($1, 'note', $2, $3, $4, NULL, $5)",
                        [.text(rig.account.hex), .text(String(format: "record-%08d", index)), isLive ? .blob(RecordsBench.payload(index)) : .null, .integer(seq), .integer(seq)])
                }
                try sql.execute("UPDATE accounts SET history = $2 WHERE id = $1", [.text(rig.account.hex), .integer(seq)])
            }
        }
    }

    /// Pages the change feed from the history id to the end as `token`'s device, so
    /// the hub notes its cursor there.
    static func pullToTheEnd(_ rig: HubBenchCommand.Rig, token: String) throws {
        let history = try rig.storage.transaction { sql -> Int64 in
            if case .integer(let value)? = try sql.query("SELECT history FROM accounts WHERE id = $1", [.text(rig.account.hex)]).first?.first { return value }
            return 0
        }
        let answer = HubBenchCommand.Rig.call(rig.service, "GET", "/v1/accounts/\(rig.account.hex)/records/changes?since=\(history)", [:], token: token)
        guard answer.status == 200 else { throw HubBenchCommand.BenchError("the feed answered \(answer.status)") }
    }

    /// Seconds for an empty client to page the whole replay over loopback HTTP,
    /// each page read as the mirror client reads it.
    static func replayAll(_ expected: Int, from rig: HubBenchCommand.Rig) throws -> Double {
        let client = HubClient(hub: rig.base, account: rig.account, identity: rig.phone, timeoutSeconds: 120)
        _ = try client.send("GET", "\(client.accountPath)/status")
        var records = 0
        let seconds = try Stopwatch.time {
            var after = ""
            while true {
                var path = "\(client.accountPath)/records/replay?limit=1000"
                if !after.isEmpty { path += "&after=\(after.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? after)" }
                let answer = try client.send("GET", path)
                guard answer.status == 200, let page = MirrorSync.replayPage(answer.body) else {
                    throw HubBenchCommand.BenchError("a replay page was answered \(answer.status)")
                }
                records += page.records.count
                after = page.next
                if !page.more { break }
            }
        }
        guard records == expected else { throw HubBenchCommand.BenchError("the replay brought \(records) of \(expected) records") }
        return seconds
    }
}
