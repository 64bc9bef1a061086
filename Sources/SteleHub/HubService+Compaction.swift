import Foundation
import Stele
import SteleSQL

/// Tombstone compaction without a timer (seed 004 "Pitfall #3: tombstones
/// accumulate forever", its answer "a per-device acknowledgment cursor"; the
/// hub-mode twin of the fleet's barrier, DESIGN §8).
///
/// Every device of an account has a records cursor: the history id it asked
/// the change feed for last (`since`), in the hub's current epoch. A client
/// asks after `H` only once everything up to `H` is applied in its store (the
/// mirror and ledger clients move their cursor in the transaction that applies
/// a page), so the cursor is an acknowledgment. A device that joins starts at
/// the history id of its join: it never held a record older than that.
///
/// The **horizon** of an account is the history id up to which its tombstones
/// are collected. It moves to the lowest cursor of the account's member devices
/// (a revoked device holds nothing back) and never back. A tombstone at or below
/// it is deleted: every device that could still hold the live record has seen
/// the delete. A cursor below the horizon would miss a delete, so it is refused
/// with `410 history_compacted` and its client replays.
extension HubService {
    /// What one compaction collected.
    public struct Compaction: Sendable, Equatable {
        /// Accounts whose horizon moved.
        public var accounts = 0
        /// Tombstones deleted.
        public var collected = 0

        public init(accounts: Int = 0, collected: Int = 0) {
            self.accounts = accounts
            self.collected = collected
        }
    }

    /// The device holding an account's horizon back: the member device with the
    /// lowest records cursor (the earliest to pull among equals).
    public struct HorizonHolder: Sendable, Equatable {
        public var device: String
        public var name: String?
        public var cursor: Int64
        /// When it last pulled the change feed; `nil` when it never did.
        public var pulledAt: Int64?
    }

    /// Collects, on every account (or on `only`), the tombstones every member
    /// device has pulled past. `stele-hub serve` runs it every minute and
    /// `stele-hub compact` at once. Each account is its own transactions of at most
    /// `batch` deletions, so a large backlog never holds the account's lock long.
    /// On SQLite the freed pages go back to the file system afterwards.
    /// - Throws: ``HubStorageError`` when the storage is unavailable (the next run tries again).
    @discardableResult
    public func compact(only: AccountID? = nil, batch: Int = 5_000) throws -> Compaction {
        var candidates: [(account: String, horizon: Int64, target: Int64)] = []
        for shard in only.map({ [storage.shard(for: $0.hex)] }) ?? storage.shards {
            candidates += try shard.transaction { sql in try compactionCandidates(only, sql) }
        }
        var done = Compaction()
        for candidate in candidates {
            var moved = false
            let shard = storage.shard(for: candidate.account)
            while true {
                let step = try shard.transaction { sql -> (collected: Int, finished: Bool) in
                    try collectBatch(of: candidate.account, batch: batch, sql)
                }
                done.collected += step.collected
                moved = moved || step.collected > 0 || !step.finished
                if step.finished { break }
            }
            if moved { done.accounts += 1 }
        }
        if done.collected > 0 { storage.reclaimSpace() }
        return done
    }

    /// The accounts (of one shard) whose horizon can move: their lowest member cursor is past it.
    private func compactionCandidates(_ only: AccountID?, _ sql: any HubSQL) throws -> [(account: String, horizon: Int64, target: Int64)] {
        let filter = only == nil ? "" : "WHERE a.id = $1"
        return try sql.query(
            """
            SELECT a.id, a.horizon, (SELECT min(d.records_cursor) FROM devices d WHERE d.account = a.id AND d.state = 'member')
            FROM accounts a \(filter)
            """, only.map { [.text($0.hex)] } ?? []
        ).compactMap { row in
            guard let account = row[column: 0].string, let horizon = row[column: 1].int64, let target = row[column: 2].int64, target > horizon else { return nil }
            return (account, horizon, target)
        }
    }

    /// Collects one batch of an account's tombstones under its lock; says whether the horizon reached its target.
    private func collectBatch(of account: String, batch: Int, _ sql: any HubSQL) throws -> (collected: Int, finished: Bool) {
        try sql.lockAccount(account)
        // Read again under the lock: a device may have pulled, joined or been revoked since.
        guard let row = try sql.query(
            """
            SELECT a.horizon, (SELECT min(d.records_cursor) FROM devices d WHERE d.account = a.id AND d.state = 'member')
            FROM accounts a WHERE a.id = $1
            """, [.text(account)]
        ).first, let horizon = row[column: 0].int64, let target = row[column: 1].int64, target > horizon
        else { return (0, true) }
        // The batch ends at the `batch`-th tombstone past the horizon, or at the target.
        let bound = try sql.query(
            "SELECT seq FROM records WHERE account = $1 AND payload IS NULL AND seq > $2 AND seq <= $3 ORDER BY seq LIMIT 1 OFFSET $4",
            [.text(account), .integer(horizon), .integer(target), .integer(Int64(max(1, batch) - 1))]
        ).first?[column: 0].int64 ?? target
        let collected = try sql.execute(
            "DELETE FROM records WHERE account = $1 AND payload IS NULL AND seq > $2 AND seq <= $3",
            [.text(account), .integer(horizon), .integer(bound)])
        try sql.execute("UPDATE accounts SET horizon = $2, collected = collected + $3 WHERE id = $1", [.text(account), .integer(bound), .integer(Int64(collected))])
        return (collected, bound >= target)
    }

    /// Notes that `device` asked the change feed for what follows `since`: it
    /// holds everything up to it. Written only when it changes or a few seconds
    /// passed, so a long poll that looks again writes nothing new.
    func notePulled(_ account: AccountID, device: String, since: Int64, _ sql: any HubSQL) throws {
        let time = now()
        try sql.execute(
            """
            UPDATE devices SET records_cursor = $3, records_pulled_ms = $4
            WHERE account = $1 AND device = $2 AND (records_cursor <> $3 OR records_pulled_ms IS NULL OR records_pulled_ms < $5)
            """, [.text(account.hex), .text(device), .integer(since), .integer(time), .integer(time - 5_000)])
    }

    /// The account's horizon: tombstones at or below it are collected.
    func horizon(_ account: AccountID, _ sql: any HubSQL) throws -> Int64 {
        try sql.query("SELECT horizon FROM accounts WHERE id = $1", [.text(account.hex)]).first?[column: 0].int64 ?? 0
    }

    /// The member device with the lowest records cursor; `nil` when the account has none.
    func horizonHolder(_ account: AccountID, _ sql: any HubSQL) throws -> HorizonHolder? {
        guard let row = try sql.query(
            """
            SELECT device, name, records_cursor, records_pulled_ms FROM devices WHERE account = $1 AND state = 'member'
            ORDER BY records_cursor, records_pulled_ms NULLS FIRST, device LIMIT 1
            """, [.text(account.hex)]
        ).first, let device = row[column: 0].string, let cursor = row[column: 2].int64
        else { return nil }
        return HorizonHolder(device: device, name: row[column: 1].string, cursor: cursor, pulledAt: row[column: 3].int64)
    }
}
