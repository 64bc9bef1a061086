import Foundation
import Stele
import SteleSQL

/// Telling at start that the hub's history was rewound (issue 20), so that
/// every client is answered `409 history_rewound` and pushes again what the
/// hub lost, even when no operator ran `stele-hub restored`. Three signals,
/// each enough alone:
/// - **the database is not the one the hub last ran on.** Each start writes a new
///   run id into the database and into a note beside it (``Announced``, kept by
///   `stele-hub serve` next to an SQLite file): a copy put back from before that
///   start carries an older run id. (A file's inode would not do: a copy put in
///   place of a deleted file often gets the same number back.)
/// - **the history is behind what the hub announced**: the note also holds the sum
///   of every account's history id, written every second while it changes and at
///   exit; every change raises it, so a database found below it lost changes (a
///   copy taken during the last run, older than the note).
/// - **for PostgreSQL, the cluster is another** (``HubStorage/physicalIdentity()``):
///   a point-in-time restore or a promoted replica runs on a new timeline, a dump
///   restored into another cluster on another system identifier.
/// A false alarm (a data directory copied to a new disk with an old note) costs
/// each client one replay and loses nothing. What none sees (a copy of the last
/// second before the hub stopped; a dump restored into the same cluster) is what
/// `stele-hub restored` is for.
extension HubService {
    /// Why the hub decided its history was rewound.
    public enum RewindSignal: Sendable, Equatable, CustomStringConvertible {
        case anotherRun(found: String?, noted: String)
        case historyBehindAnnounced(found: Int64, announced: Int64)
        case physicalCopyChanged(from: String, to: String)

        public var description: String {
            switch self {
            case let .anotherRun(found, noted):
                "the database is not the one the hub last ran on (its run \(found ?? "none"), the note beside it says run \(noted)): it was put back from a copy"
            case let .historyBehindAnnounced(found, announced): "the database's history (\(found) changes in all) is behind what the hub announced (\(announced))"
            case let .physicalCopyChanged(from, to): "the database is another physical copy than the one the hub last ran on (\(from) -> \(to))"
            }
        }
    }

    /// What the hub notes beside its database: the run it last started and the
    /// history total it last saw (``historyTotal()``).
    public struct Announced: Sendable, Equatable {
        public var run: String
        public var total: Int64

        public init(run: String, total: Int64) {
            self.run = run
            self.total = total
        }

        /// `RUN TOTAL`, as written in the note.
        public var text: String { "\(run) \(total)\n" }

        public init?(text: String) {
            let words = text.split(whereSeparator: \.isWhitespace)
            guard words.count == 2, let total = Int64(words[1]) else { return nil }
            self.init(run: String(words[0]), total: total)
        }
    }

    /// Looks for a rewound history and, when a signal says so, starts a new epoch
    /// (``startNewEpoch(now:name:_:)``) on the shard concerned; then starts a new run.
    /// - Parameter announced: the note the hub last wrote beside the database, if any.
    /// - Returns: the signal and the new epoch when the history was rewound, and the new run's note.
    public func detectRewind(announced: Announced?) throws -> (rewound: (signal: RewindSignal, epoch: String)?, announced: Announced) {
        let time = now()
        var found: (signal: RewindSignal, epoch: String)?
        let total = try historyTotal()
        let run = Self.secret(bytes: 8)
        for (index, shard) in storage.shards.enumerated() {
            let identity = shard.physicalIdentity()
            let rewound = try shard.transaction { sql -> (RewindSignal, String)? in
                let stored = try sql.query("SELECT value FROM hub_meta WHERE name = 'physical_identity'", []).first?[column: 0].string
                let lastRun = try sql.query("SELECT value FROM hub_meta WHERE name = 'run'", []).first?[column: 0].string
                var signal: RewindSignal?
                if let stored, let identity, stored != identity {
                    signal = .physicalCopyChanged(from: stored, to: identity)
                } else if index == 0, let announced, lastRun != announced.run {
                    signal = .anotherRun(found: lastRun, noted: announced.run)
                } else if index == 0, let announced, total < announced.total {
                    signal = .historyBehindAnnounced(found: total, announced: announced.total)
                }
                if let identity { try setMeta("physical_identity", identity, sql) }
                try setMeta("run", run, sql)
                guard let signal else { return nil }
                return (signal, try Self.startNewEpoch(now: time, sql).current)
            }
            if let rewound, found == nil { found = rewound }
        }
        return (found, Announced(run: run, total: total))
    }

    /// Notes the database as it is now (after `stele-hub restored` started the new
    /// epoch itself): a new run, and the physical copy; returns the note to write beside it.
    public func noteCurrentCopy() throws -> Announced {
        let run = Self.secret(bytes: 8)
        for shard in storage.shards {
            let identity = shard.physicalIdentity()
            _ = try shard.transaction { sql in
                if let identity { try setMeta("physical_identity", identity, sql) }
                try setMeta("run", run, sql)
            }
        }
        return Announced(run: run, total: try historyTotal())
    }

    private func setMeta(_ name: String, _ value: String, _ sql: any HubSQL) throws {
        try sql.execute("INSERT INTO hub_meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value", [.text(name), .text(value)])
    }

    /// The sum of every account's history id: it only grows while the history is not rewound.
    public func historyTotal() throws -> Int64 {
        try storage.shards.reduce(0) { total, shard in total + (try shard.transaction { sql in try historyTotal(sql) }) }
    }

    private func historyTotal(_ sql: any HubSQL) throws -> Int64 {
        try sql.query("SELECT CAST(COALESCE(sum(history), 0) AS BIGINT) FROM accounts", []).first?[column: 0].int64 ?? 0
    }
}
