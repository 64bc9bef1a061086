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
        var bytesPerTombstone = 0.0
        for round in 0..<rounds {
            let raw = try Connection(path: "\(directory)/raw-\(round).db")
            try raw.executeScript("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID")
            let account = AccountID.generate()
            let device = try DeviceIdentity.generate().deviceID
            let replica = try Replica.create(at: "\(directory)/stele-\(round).stele", account: account, device: device)
            let notes = try replica.causal("notes")

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
            }
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

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
