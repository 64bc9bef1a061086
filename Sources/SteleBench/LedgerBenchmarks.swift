import Foundation
import Stele

/// The ledger client's figure (DESIGN §8.3, seed 002).
///
/// - `ledger.pass`: a sync pass over 100,000 entities of which 1,000 changed and
///   100 were deleted, up to the push (nothing is sent): the store read through
///   its ``LedgerSource``, every payload fingerprinted, the stamps read and
///   compared, and the 1,100 changes stamped and queued in one transaction.
///   Baseline: reading the same 100,000 rows through the same source and hashing
///   their payloads with SHA-256, in the same process. Best of three rounds each.
enum LedgerBenchmarks {
    static let rounds = 3

    static func run(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let entities = 100_000 / scale.divisor
        let changed = 1_000 / scale.divisor
        let deleted = 100 / scale.divisor
        let source = try SQLiteTableSource(path: "\(directory)/ledger-store.sqlite")
        try source.transaction {
            for index in 0..<entities { try source.put(kind: "note", id: "note-\(index)", payload: payload(index, version: 0)) }
        }
        let clock = ManualWallClock(milliseconds: 1_800_000_000_000)
        var configuration = Ledger.Configuration()
        configuration.clock = clock
        let ledger = try Ledger(path: "\(directory)/ledger.ledger", source: source, account: "bench", hub: "bench", configuration: configuration)
        let sync = LedgerSync(ledger: ledger)
        try ledger.pass()
        try answerEverything(sync)

        var best = Double.infinity
        var baseline = Double.infinity
        var next = 0
        for round in 0..<rounds {
            // This round's edits and deletions, made by the app in its own store.
            try source.transaction {
                for offset in 0..<changed { try source.put(kind: "note", id: "note-\((next + offset) % entities)", payload: payload(next + offset, version: round + 1)) }
                for offset in 0..<deleted { try source.delete(kind: "note", id: "note-\(entities - 1 - (round * deleted + offset))") }
            }
            next += changed
            clock.advance(byMilliseconds: 1_000)
            var report = Ledger.PassReport()
            best = min(best, try Stopwatch.time { report = try ledger.pass() })
            guard report.upserts == changed, report.tombstones == deleted else {
                throw BenchmarkError("ledger.pass: the pass found \(report.upserts) upserts and \(report.tombstones) tombstones, not \(changed) and \(deleted)")
            }
            try answerEverything(sync)
            baseline = min(baseline, try Stopwatch.time { try readAndHash(source) })
        }
        return [BenchmarkFigure(name: "ledger.pass", value: best, unit: "s", baseline: baseline, target: .ratioAtMost(1.5))]
    }

    /// 200 bytes that differ per entity and version.
    static func payload(_ index: Int, version: Int) -> [UInt8] {
        (0..<200).map { UInt8(truncatingIfNeeded: index &* 131 &+ $0 &* 7 &+ version &* 31) }
    }

    /// The baseline: every row read through the source and its payload hashed.
    static func readAndHash(_ source: SQLiteTableSource) throws {
        let hasher = SHA256()
        var sink: UInt64 = 0
        try source.forEachEntity { entity in sink &+= hasher.hash(entity.payload).low64 }
        if sink == 42 { print("") }
    }

    /// Answers every pending push as the hub would (`applied`), so the next pass starts clean.
    static func answerEverything(_ sync: LedgerSync) throws {
        var seq: Int64 = 0
        while let request = try sync.nextPush() {
            guard case .push(let ids) = request.purpose else { break }
            var results: [String] = []
            for id in ids {
                seq += 1
                results.append(#"{"mutation":"\#(id)","status":"applied","seq":\#(seq)}"#)
            }
            let body = #"{"historyId":\#(seq),"results":[\#(results.joined(separator: ","))]}"#
            _ = try sync.handle(.answer(HubAnswer(status: 200, body: Array(body.utf8))), to: request)
        }
    }
}
