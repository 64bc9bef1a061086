@_spi(Benchmarks) import Stele
import Foundation

/// `sync.digest_overhead`: the `local.put` workload (100,000 puts of 100-byte
/// values in transactions of 1,000) with digest maintenance, against the same
/// workload on a store that keeps no digests. Batches alternate between the two
/// stores, and the fastest of three rounds of each is kept (see ``LocalWriteBenchmarks``).
enum DigestOverheadBenchmark {
    static func run(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let count = 100_000 / scale.divisor
        let keys = LocalWriteBenchmarks.keys(count)
        let values = (0..<count).map(LocalWriteBenchmarks.value)
        var best = (with: Double.infinity, without: Double.infinity)
        var open = (with: Double.infinity, without: Double.infinity)
        for round in 0..<LocalWriteBenchmarks.rounds {
            let account = AccountID.generate()
            let device = try DeviceIdentity.generate().deviceID
            let with = try Replica.create(at: "\(directory)/digest-\(round).stele", account: account, device: device)
            var options = Replica.Options()
            options.maintainsDigests = false
            let without = try Replica.create(at: "\(directory)/nodigest-\(round).stele", account: account, device: device, options: options)
            let (withNotes, withoutNotes) = (try with.causal("notes"), try without.causal("notes"))
            var times = (with: 0.0, without: 0.0)
            for start in stride(from: 0, to: count, by: LocalWriteBenchmarks.batch) {
                let range = start..<min(start + LocalWriteBenchmarks.batch, count)
                times.without += try Stopwatch.time { try without.write { for index in range { try withoutNotes.put(keys[index], values[index]) } } }
                times.with += try Stopwatch.time { try with.write { for index in range { try withNotes.put(keys[index], values[index]) } } }
            }
            best = (min(best.with, times.with), min(best.without, times.without))
            // Reopening: the digest is rebuilt from the stored leaves, against an open that builds none.
            let path = with.path
            var noDigests = Replica.Options()
            noDigests.maintainsDigests = false
            open.without = min(open.without, try Stopwatch.time { _ = try Replica.open(at: path, options: noDigests) })
            open.with = min(open.with, try Stopwatch.time { _ = try Replica.open(at: path) })
        }
        return [
            BenchmarkFigure(name: "sync.digest_overhead", value: best.with, unit: "seconds", baseline: best.without, target: .ratioAtMost(1.3)),
            BenchmarkFigure(name: "sync.digest_rebuild_at_open", value: open.with, unit: "seconds", baseline: open.without),
        ]
    }
}
