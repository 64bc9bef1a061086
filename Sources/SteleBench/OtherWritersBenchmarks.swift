@_spi(Benchmarks) import Stele
import Foundation

/// What issue 14's two mechanisms cost a write:
/// - `local.stamp_floor`: the `local.put` workload (100,000 puts of 100-byte
///   values in transactions of 1,000) on a store that keeps its stamp floor in a
///   key store file, against the same workload with no floor
///   (`local.stamp_floor.saves`: how many times the floor was saved);
/// - `sync.other_writers_check`: the same workload on a handle that checks for
///   other handles' writes at every transaction (SQLite's `data_version`),
///   against one that does not;
/// - `sync.other_writers_catch_up`: how long a handle takes to take in another
///   handle's commit on a store of 100,000 rows (its digests are rebuilt from the
///   stored leaves), against the digest rebuild of an open of the same store.
/// Batches alternate between the two sides; the fastest of three rounds is kept
/// (``LocalWriteBenchmarks``).
enum OtherWritersBenchmarks {
    /// A key store that counts how often the floor is saved.
    final class CountingFloorStore: StampFloorStore {
        let inner: FileKeyStore
        private(set) var saves = 0

        init(path: String) { inner = FileKeyStore(path: path) }

        func loadStampFloor() throws -> StampFloor? { try inner.loadStampFloor() }
        func saveStampFloor(_ floor: StampFloor) throws {
            saves += 1
            try inner.saveStampFloor(floor)
        }
    }

    static func run(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let count = 100_000 / scale.divisor
        let keys = LocalWriteBenchmarks.keys(count)
        let values = (0..<count).map(LocalWriteBenchmarks.value)
        var floor = (with: Double.infinity, without: Double.infinity, saves: 0)
        var check = (with: Double.infinity, without: Double.infinity)
        var catchUp = (value: Double.infinity, open: Double.infinity)
        for round in 0..<LocalWriteBenchmarks.rounds {
            let account = AccountID.generate()
            let device = try DeviceIdentity.generate().deviceID
            let keyStore = CountingFloorStore(path: "\(directory)/stamped-\(round).keys")
            let withFloor = try Replica.create(at: "\(directory)/stamped-\(round).stele", account: account, device: device, options: Replica.Options(stampFloor: keyStore))
            let withoutFloor = try Replica.create(at: "\(directory)/nofloor-\(round).stele", account: account, device: device)
            var unchecked = Replica.Options()
            unchecked.followsOtherWriters = false
            let withoutCheck = try Replica.create(at: "\(directory)/nocheck-\(round).stele", account: account, device: device, options: unchecked)
            let stores = [withFloor, withoutFloor, withoutCheck]
            let notes = try stores.map { try $0.causal("notes") }
            var times = [0.0, 0.0, 0.0]
            for start in stride(from: 0, to: count, by: LocalWriteBenchmarks.batch) {
                let range = start..<min(start + LocalWriteBenchmarks.batch, count)
                for (index, store) in stores.enumerated() {
                    times[index] += try Stopwatch.time { try store.write { for key in range { try notes[index].put(keys[key], values[key]) } } }
                }
            }
            floor = (min(floor.with, times[0]), min(floor.without, times[1]), keyStore.saves)
            // withoutFloor checks for other writers and keeps no floor: the check's "with".
            check = (min(check.with, times[1]), min(check.without, times[2]))

            // A second handle commits one write; the first takes it in at its next digest read.
            let other = try Replica.open(at: withoutFloor.path)
            try other.causal("notes").put("from-the-other-handle", [1])
            catchUp.value = min(catchUp.value, try Stopwatch.time { _ = try withoutFloor.digest(of: "notes") })
            catchUp.open = min(catchUp.open, try Stopwatch.time { _ = try Replica.open(at: withoutFloor.path) })
        }
        return [
            BenchmarkFigure(name: "local.stamp_floor", value: floor.with, unit: "seconds", baseline: floor.without, target: .ratioAtMost(1.05)),
            BenchmarkFigure(name: "local.stamp_floor.saves", value: Double(floor.saves), unit: "saves per \(count) puts"),
            BenchmarkFigure(name: "sync.other_writers_check", value: check.with, unit: "seconds", baseline: check.without, target: .ratioAtMost(1.05)),
            BenchmarkFigure(name: "sync.other_writers_catch_up", value: catchUp.value, unit: "seconds", baseline: catchUp.open),
        ]
    }
}
