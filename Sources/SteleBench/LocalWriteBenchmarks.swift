import Foundation
import Stele
import SteleSQL

/// `local.put`, `local.delete` and `local.tombstone_bytes` (issue: the foundation).
///
/// 100,000 puts of 100-byte values into a `causal` namespace in transactions of
/// 1,000, then 90,000 deletes, against raw SQLite upserts and deletes of the same
/// rows into `(key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID`, same batching,
/// same journal settings (WAL, synchronous=NORMAL), same process.
enum LocalWriteBenchmarks {
    static let batch = 1_000

    static func keys(_ count: Int) -> [String] { (0..<count).map { String(format: "key-%06d", $0) } }

    /// 100 bytes that differ per row (so pages hold realistic data).
    static func value(_ index: Int) -> [UInt8] {
        (0..<100).map { UInt8(truncatingIfNeeded: index &* 31 &+ $0 &* 7) }
    }

    /// Every 10th key survives; the others are deleted (90%).
    static func deleted(_ keys: [String]) -> [String] {
        keys.enumerated().filter { $0.offset % 10 != 0 }.map(\.element)
    }

    /// Rounds of the whole workload, each on fresh files. Within a round the two
    /// sides alternate batch by batch (a raw batch of 1,000, then the same batch
    /// through Stele), so machine noise falls on both sides alike; the fastest
    /// round of each side is reported, since noise only ever adds time.
    static let rounds = 3

    static func run(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let count = 100_000 / scale.divisor
        let keys = keys(count)
        let values = (0..<count).map(value)
        let doomed = deleted(keys)

        var best = (rawPut: Double.infinity, rawDelete: Double.infinity, stelePut: Double.infinity, steleDelete: Double.infinity)
        var bestFloor = Double.infinity
        var bytesPerTombstone = 0.0
        for round in 0..<rounds {
            let raw = try Connection(path: "\(directory)/raw-\(round).db")
            try raw.executeScript("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID")
            let account = AccountID.generate()
            let device = try DeviceIdentity.generate().deviceID
            // As an app would open it: with its stamp floor in a key store file (`local.stamp_floor` isolates what that costs).
            let replica = try Replica.create(
                at: "\(directory)/stele-\(round).stele", account: account, device: device,
                options: Replica.Options(stampFloor: FileKeyStore(path: "\(directory)/stele-\(round).keys")))
            let notes = try replica.causal("notes")

            // The floor: Stele's own table, the same rows, and only the two statements
            // any causal delete must run, issued straight through SteleSQL.
            let floor = try DeleteFloor(path: "\(directory)/floor-\(round).stele", account: account, keys: keys, values: values)
            var floorTime = 0.0
            var times = (rawPut: 0.0, rawDelete: 0.0, stelePut: 0.0, steleDelete: 0.0)
            for start in stride(from: 0, to: count, by: batch) {
                let range = start..<min(start + batch, count)
                times.rawPut += try Stopwatch.time {
                    try raw.transaction {
                        let statement = try raw.cached("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
                        for index in range {
                            statement.reset()
                            try statement.bind(1, keys[index])
                            try statement.bind(2, values[index])
                            try statement.step()
                        }
                    }
                }
                times.stelePut += try Stopwatch.time {
                    try replica.write { for index in range { try notes.put(keys[index], values[index]) } }
                }
            }
            for start in stride(from: 0, to: doomed.count, by: batch) {
                let range = start..<min(start + batch, doomed.count)
                times.rawDelete += try Stopwatch.time {
                    try raw.transaction {
                        let statement = try raw.cached("DELETE FROM kv WHERE key = ?")
                        for index in range {
                            statement.reset()
                            try statement.bind(1, doomed[index])
                            try statement.step()
                        }
                    }
                }
                times.steleDelete += try Stopwatch.time {
                    try replica.write { for index in range { try notes.delete(doomed[index]) } }
                }
                floorTime += try Stopwatch.time { try floor.delete(doomed[range]) }
            }
            bestFloor = min(bestFloor, floorTime)
            guard try notes.tombstoneCount() == doomed.count, try notes.count() == count - doomed.count else {
                throw BenchmarkError("the causal namespace does not hold the expected rows after the deletes")
            }
            best = (
                min(best.rawPut, times.rawPut), min(best.rawDelete, times.rawDelete),
                min(best.stelePut, times.stelePut), min(best.steleDelete, times.steleDelete)
            )

            // Bytes per tombstone: the pages of the namespace's table now, minus the
            // pages the same survivors take in a store that never held the deleted rows.
            let withTombstones = try namespaceBytes(replica, "notes")
            let survivorsOnly = try Replica.create(at: "\(directory)/survivors-\(round).stele", account: account, device: device)
            let survivorNotes = try survivorsOnly.causal("notes")
            try survivorsOnly.write {
                for (index, key) in keys.enumerated() where index % 10 == 0 { try survivorNotes.put(key, values[index]) }
            }
            bytesPerTombstone = Double(withTombstones - (try namespaceBytes(survivorsOnly, "notes"))) / Double(doomed.count)
        }
        return [
            BenchmarkFigure(
                name: "local.put", value: Double(count) / best.stelePut, unit: "puts/s", baseline: Double(count) / best.rawPut,
                target: .ratioAtLeast(0.5)),
            BenchmarkFigure(
                name: "local.delete", value: Double(doomed.count) / best.steleDelete, unit: "deletes/s",
                baseline: Double(doomed.count) / best.rawDelete, target: .ratioAtLeast(0.5)),
            BenchmarkFigure(name: "local.tombstone_bytes", value: bytesPerTombstone, unit: "bytes", target: .valueAtMost(64)),
            BenchmarkFigure(
                name: "local.delete.floor", value: Double(doomed.count) / bestFloor, unit: "deletes/s",
                baseline: Double(doomed.count) / best.rawDelete),
        ]
    }

    /// Bytes of every page (leaf and interior, used or not) of a namespace's table, from `dbstat`.
    static func namespaceBytes(_ replica: Replica, _ name: String) throws -> Int {
        guard let namespace = try replica.report().namespaces.first(where: { $0.name == name }), namespace.bytes > 0 else {
            throw BenchmarkError("SQLite's dbstat is needed to measure bytes on disk, and this SQLite lacks it")
        }
        return namespace.bytes
    }
}

/// The least any `causal` delete can do in SQLite, to show where `local.delete`'s
/// ratio is bounded: read the row's vector (the delete must supersede what it saw,
/// 000 §4) and replace the row by its tombstone (a replace, not an in-place update,
/// is what keeps a tombstone near 40 bytes: `local.tombstone_bytes`), numbered for
/// the barrier's watermark. No vector arithmetic, digest, events or checks: only
/// the two statements, on Stele's own table holding the same rows.
struct DeleteFloor {
    let connection: Connection
    let table: String

    /// Writes `keys` through Stele into a fresh store at `path`, then opens its file directly.
    init(path: String, account: AccountID, keys: [String], values: [[UInt8]]) throws {
        do {
            let replica = try Replica.create(at: path, account: account, device: try DeviceIdentity.generate().deviceID)
            let notes = try replica.causal("notes")
            for start in stride(from: 0, to: keys.count, by: 1_000) {
                try replica.write { for index in start..<min(start + 1_000, keys.count) { try notes.put(keys[index], values[index]) } }
            }
        }
        try self.init(path: path)
    }

    /// Opens a store's file directly (its causal table must hold the rows to delete).
    init(path: String) throws {
        connection = try Connection(path: path)
        guard let table = try connection.queryFirst("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'causal\\_%' ESCAPE '\\'", [], { $0.text(0) }) else {
            throw BenchmarkError("the floor store has no causal table")
        }
        self.table = table
    }

    /// Deletes `keys` in one transaction, as `Replica.write` batches them; a key
    /// already a tombstone is replaced all the same (the work stays an upper bound).
    func delete(_ keys: some Collection<String>) throws {
        try connection.transaction {
            let lookup = try connection.cached("SELECT vv, tombstoned, leaf FROM \(table) WHERE key = ?1")
            let replace = try connection.cached("INSERT OR REPLACE INTO \(table) (key, vv, tombstoned, seq) VALUES (?1, ?2, 1, ?3)")
            var sequence = try connection.scalarInt("SELECT tombstone_seq FROM replica") ?? 0
            for key in keys {
                lookup.reset()
                try lookup.bind(1, key)
                guard try lookup.step() else { throw BenchmarkError("the floor store lacks the row \(key)") }
                let vector = lookup.blob(0)
                lookup.reset()
                replace.reset()
                try replace.bind(1, key)
                try replace.bind(2, vector)
                sequence += 1
                try replace.bind(3, sequence)
                try replace.step()
            }
        }
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
