import Foundation
import Stele
import SteleSQL

/// Telling at start that the hub's history was rewound (issue 20), so that
/// every client is answered `409 history_rewound` and pushes again what the
/// hub lost, even when no operator ran `stele-hub restored`. Two signals, each
/// enough alone:
/// - **the database's physical copy changed** (``HubStorage/physicalIdentity()``):
///   a backup copied into place is a new SQLite file; a PostgreSQL point-in-time
///   restore or a promoted replica runs on a new timeline, a dump restored into
///   another cluster on another system identifier. The identity the hub last ran
///   on is kept in `hub_meta`, so a copy restored from before carries the old one.
/// - **the history is behind what the hub announced**: `stele-hub serve` writes the
///   sum of every account's history id beside an SQLite database now and then and
///   at exit; every change raises it, so a database found below it lost changes.
/// A false alarm (a data directory copied to a new disk) costs each client one
/// replay and loses nothing; a restore that neither signal sees (a backup written
/// back into the same file, taken within the last few seconds before the hub
/// stopped) is what `stele-hub restored` is for.
extension HubService {
    /// Why the hub decided its history was rewound.
    public enum RewindSignal: Sendable, Equatable, CustomStringConvertible {
        case physicalCopyChanged(from: String, to: String)
        case historyBehindAnnounced(found: Int64, announced: Int64)

        public var description: String {
            switch self {
            case let .physicalCopyChanged(from, to): "the database is another physical copy than the one the hub last ran on (\(from) -> \(to))"
            case let .historyBehindAnnounced(found, announced): "the database's history (\(found) changes in all) is behind what the hub announced (\(announced))"
            }
        }
    }

    /// Looks for a rewound history and, when one of the signals says so, starts a
    /// new epoch (``startNewEpoch(now:name:_:)``); then notes the physical copy it runs on.
    /// - Parameter announced: the history total the hub last wrote down (``historyTotal()``), if any.
    /// - Returns: the signal and the new epoch, or `nil` when the history was not rewound.
    public func detectRewind(announced: Int64?) throws -> (signal: RewindSignal, epoch: String)? {
        let time = now()
        var found: (signal: RewindSignal, epoch: String)?
        // The history total is the whole hub's; a shard's own copy changed only rewinds that shard.
        let total = try historyTotal()
        for (index, shard) in storage.shards.enumerated() {
            let identity = shard.physicalIdentity()
            let rewound = try shard.transaction { sql -> (RewindSignal, String)? in
                let stored = try sql.query("SELECT value FROM hub_meta WHERE name = 'physical_identity'", []).first?[column: 0].string
                var signal: RewindSignal?
                if let stored, let identity, stored != identity {
                    signal = .physicalCopyChanged(from: stored, to: identity)
                } else if index == 0, let announced, total < announced {
                    signal = .historyBehindAnnounced(found: total, announced: announced)
                }
                if let identity {
                    try sql.execute(
                        "INSERT INTO hub_meta (name, value) VALUES ('physical_identity', $1) ON CONFLICT (name) DO UPDATE SET value = excluded.value", [.text(identity)])
                }
                guard let signal else { return nil }
                return (signal, try Self.startNewEpoch(now: time, sql).current)
            }
            if let rewound, found == nil { found = rewound }
        }
        return found
    }

    /// Notes the physical copy the database is now (after `stele-hub restored`
    /// started the new epoch itself), so the next start compares with it.
    public func notePhysicalCopy() throws {
        for shard in storage.shards {
            guard let identity = shard.physicalIdentity() else { continue }
            _ = try shard.transaction { sql in
                try sql.execute(
                    "INSERT INTO hub_meta (name, value) VALUES ('physical_identity', $1) ON CONFLICT (name) DO UPDATE SET value = excluded.value", [.text(identity)])
            }
        }
    }

    /// The sum of every account's history id: it only grows while the history is not rewound.
    public func historyTotal() throws -> Int64 {
        try storage.shards.reduce(0) { total, shard in total + (try shard.transaction { sql in try historyTotal(sql) }) }
    }

    private func historyTotal(_ sql: any HubSQL) throws -> Int64 {
        try sql.query("SELECT CAST(COALESCE(sum(history), 0) AS BIGINT) FROM accounts", []).first?[column: 0].int64 ?? 0
    }
}
