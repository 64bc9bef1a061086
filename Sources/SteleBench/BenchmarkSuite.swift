import Foundation

/// The benchmarks `stele bench` runs, by group. Each group measures Stele and
/// its baseline in the same process, so a noisy machine shifts both alike.
public struct BenchmarkSuite {
    /// How much work to do: `full` is what the issues specify; `quick` is a tenth,
    /// for checking that the suite runs (its figures are not the ones to report).
    public enum Scale: Sendable {
        case full, quick

        var divisor: Int { self == .full ? 1 : 10 }
    }

    public struct Group: Sendable {
        /// The figure names the group produces (fixed: tools read them).
        public let figures: [String]
        let run: @Sendable (Scale, String) throws -> [BenchmarkFigure]
    }

    public static let groups: [Group] = [
        Group(figures: ["local.put", "local.delete", "local.tombstone_bytes", "local.delete.floor"], run: LocalWriteBenchmarks.run),
        Group(figures: ["sync.digest_overhead", "sync.digest_rebuild_at_open"], run: DigestOverheadBenchmark.run),
        Group(
            figures: ["local.stamp_floor", "local.stamp_floor.saves", "sync.other_writers_check", "sync.other_writers_catch_up"],
            run: OtherWritersBenchmarks.run),
        Group(
            figures: ["sync.reconcile_small_diff.bytes", "sync.reconcile_small_diff.round_trips", "sync.reconcile_small_diff.bytes.uncompressed"],
            run: SyncBenchmarks.smallDiff),
        Group(
            figures: [
                "sync.delete_batch", "sync.delete_batch.wire_bytes_per_deleted_key", "sync.delete_batch.wire_bytes_per_deleted_key.uncompressed",
                "sync.delete_batch.apply_floor", "crypto.sync_overhead", "crypto.sync_overhead.wire_bytes",
            ],
            run: SyncBenchmarks.deleteBatch),
        Group(figures: ["gc.storage_returned", "gc.storage_returned.bytes_per_deleted_key"], run: CollectionBenchmarks.storage),
        Group(
            figures: ["gc.round.3_devices", "gc.round.3_devices.frames", "gc.round.10_devices", "gc.round.10_devices.frames"],
            run: CollectionBenchmarks.rounds),
        Group(figures: ["crypto.seal_open.1k", "crypto.seal_open.64k", "crypto.overhead_bytes"], run: CryptoBenchmarks.run),
        Group(figures: ["messages.fold", "messages.fold.in_order"], run: MessageBenchmarks.run),
        Group(figures: ["sim.throughput", "sim.throughput.jobs"], run: SimulatorBenchmark.run),
        Group(figures: ["mirror.enqueue", "mirror.enqueue.floor", "mirror.inbox"], run: MirrorBenchmarks.run),
        Group(figures: ["ledger.pass"], run: LedgerBenchmarks.run),
    ]

    /// Every figure name the suite knows.
    public static var figureNames: [String] { groups.flatMap(\.figures) }

    /// Runs the groups that produce a figure whose name starts with one of `filters`
    /// (all when `filters` is empty), in a temporary directory removed afterwards.
    /// - Parameter progress: called with a group's figure names before it runs.
    public static func run(scale: Scale, filters: [String], progress: ([String]) -> Void) throws -> [BenchmarkFigure] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("stele-bench-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var figures: [BenchmarkFigure] = []
        for group in groups where filters.isEmpty || group.figures.contains(where: { name in filters.contains { name.hasPrefix($0) } }) {
            progress(group.figures)
            figures += try group.run(scale, directory).filter { figure in filters.isEmpty || filters.contains { figure.name.hasPrefix($0) } }
        }
        return figures
    }
}
