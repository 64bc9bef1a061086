import Foundation
import Stele

/// `stele inspect STORE [--json]`: what a store holds, without changing it.
enum InspectCommand {
    static let usage = "usage: stele inspect STORE [--json]"

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--json"], usage: usage)
        guard parsed.positionals.count == 1, let path = parsed.positionals.first else {
            throw UsageError(message: parsed.positionals.isEmpty ? "name the store to inspect" : "inspect takes one store", usage: usage)
        }
        let report: StoreReport
        do {
            // Read-only: inspecting never writes to the store.
            let replica = try Replica.open(at: path, options: Replica.Options(readOnly: true))
            report = try replica.report()
        } catch let error as ReplicaError {
            throw InputError(message: error.message)
        }
        if parsed.has("--json") {
            print(try jsonText(report))
            return
        }
        print(
            table(
                ["store", report.path], [
                    ["account", report.account],
                    ["device", report.device],
                    ["generation", String(report.generation)],
                    ["last collection", collection(report)],
                    ["acked round", report.ackedRound.map { "\($0) (to generation \(report.ackedGeneration ?? 0))" } ?? "none"],
                    ["format", String(report.format)],
                    ["size", "\(grouped(report.fileBytes)) bytes"],
                ], numeric: []))
        print("")
        if report.namespaces.isEmpty {
            print("no namespaces declared")
            return
        }
        print(
            table(
                ["namespace", "kind", "live", "tombstones", "bytes"],
                report.namespaces.map { [$0.name, $0.kind, grouped($0.live), grouped($0.tombstones), grouped($0.bytes)] },
                numeric: [2, 3, 4]))
    }

    /// When the store last collected tombstones, and how many, or "never".
    static func collection(_ report: StoreReport) -> String {
        guard let milliseconds = report.lastCollectionMilliseconds else { return "never" }
        let date = Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
        return "\(date.formatted(.iso8601)) (\(grouped(report.lastCollectionCount)) tombstones dropped)"
    }
}
