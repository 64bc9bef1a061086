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

    /// Rounds of each side, alternating, on fresh files; the median of each side is
    /// reported, so a burst of machine noise cannot decide the ratio.
    static let rounds = 3

    static func run(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let count = 100_000 / scale.divisor
        let keys = keys(count)
        let values = (0..<count).map(value)
        let doomed = deleted(keys)

        var raw: [(put: Double, delete: Double)] = []
        var stele: [(put: Double, delete: Double)] = []
        var bytesPerTombstone = 0.0
        for round in 0..<rounds {
            raw.append(try runRaw(path: "\(directory)/raw-\(round).db", keys: keys, values: values, doomed: doomed))
            let (times, bytes) = try runStele(directory: directory, round: round, keys: keys, values: values, doomed: doomed)
            stele.append(times)
            bytesPerTombstone = bytes
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        let rawPut = median(raw.map(\.put))
        let rawDelete = median(raw.map(\.delete))
        let stelePut = median(stele.map(\.put))
        let steleDelete = median(stele.map(\.delete))
        return [
            BenchmarkFigure(
                name: "local.put", value: Double(count) / stelePut, unit: "puts/s", baseline: Double(count) / rawPut,
                target: .ratioAtLeast(0.5)),
            BenchmarkFigure(
                name: "local.delete", value: Double(doomed.count) / steleDelete, unit: "deletes/s",
                baseline: Double(doomed.count) / rawDelete, target: .ratioAtLeast(0.5)),
            BenchmarkFigure(name: "local.tombstone_bytes", value: bytesPerTombstone, unit: "bytes", target: .valueAtMost(64)),
        ]
    }

    /// The baseline: raw upserts, then raw deletes, through SteleSQL's statement wrapper only.
    static func runRaw(path: String, keys: [String], values: [[UInt8]], doomed: [String]) throws -> (put: Double, delete: Double) {
        let raw = try Connection(path: path)
        try raw.executeScript("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID")
        let put = try Stopwatch.time {
            for start in stride(from: 0, to: keys.count, by: batch) {
                try raw.transaction {
                    let statement = try raw.cached("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
                    for index in start..<min(start + batch, keys.count) {
                        statement.reset()
                        try statement.bind(1, keys[index])
                        try statement.bind(2, values[index])
                        try statement.step()
                    }
                }
            }
        }
        let delete = try Stopwatch.time {
            for start in stride(from: 0, to: doomed.count, by: batch) {
                try raw.transaction {
                    let statement = try raw.cached("DELETE FROM kv WHERE key = ?")
                    for index in start..<min(start + batch, doomed.count) {
                        statement.reset()
                        try statement.bind(1, doomed[index])
                        try statement.step()
                    }
                }
            }
        }
        return (put, delete)
    }

    /// Stele: the same rows through a `causal` namespace; also measures bytes per tombstone.
    static func runStele(
        directory: String, round: Int, keys: [String], values: [[UInt8]], doomed: [String]
    ) throws -> ((put: Double, delete: Double), Double) {
        let account = AccountID.generate()
        let device = try DeviceIdentity.generate().deviceID
        let replica = try Replica.create(at: "\(directory)/stele-\(round).stele", account: account, device: device)
        let notes = try replica.causal("notes")
        let put = try Stopwatch.time {
            for start in stride(from: 0, to: keys.count, by: batch) {
                try replica.write {
                    for index in start..<min(start + batch, keys.count) { try notes.put(keys[index], values[index]) }
                }
            }
        }
        let delete = try Stopwatch.time {
            for start in stride(from: 0, to: doomed.count, by: batch) {
                try replica.write {
                    for index in start..<min(start + batch, doomed.count) { try notes.delete(doomed[index]) }
                }
            }
        }
        guard try notes.tombstoneCount() == doomed.count, try notes.count() == keys.count - doomed.count else {
            throw BenchmarkError("the causal namespace does not hold the expected rows after the deletes")
        }

        // Bytes per tombstone: the pages of the causal table now, minus the pages the
        // same survivors take in a store that never held the deleted rows.
        let withTombstones = try namespaceBytes(replica, "notes")
        let survivorsOnly = try Replica.create(at: "\(directory)/survivors-\(round).stele", account: account, device: device)
        let survivorNotes = try survivorsOnly.causal("notes")
        try survivorsOnly.write {
            for (index, key) in keys.enumerated() where index % 10 == 0 { try survivorNotes.put(key, values[index]) }
        }
        let survivorBytes = try namespaceBytes(survivorsOnly, "notes")
        return ((put, delete), Double(withTombstones - survivorBytes) / Double(doomed.count))
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
