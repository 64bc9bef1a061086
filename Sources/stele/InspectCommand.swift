import Foundation
import Stele
import SteleSQL

/// `stele inspect STORE [--json] [--keys NS]`: what a store holds, without changing it;
/// `--keys NS`: the live keys of one namespace (a log's events, a conversation's messages).
enum InspectCommand {
    static let usage = "usage: stele inspect STORE [--json] [--keys NAMESPACE]"

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--json"], options: ["--keys"], usage: usage)
        guard parsed.positionals.count == 1, let path = parsed.positionals.first else {
            throw UsageError(message: parsed.positionals.isEmpty ? "name the store to inspect" : "inspect takes one store", usage: usage)
        }
        let report: StoreReport
        let problems: [String]
        do {
            // Read-only: inspecting never writes to the store.
            let replica = try Replica.open(at: path, options: Replica.Options(readOnly: true))
            if let namespace = parsed.options["--keys"] {
                try keys(of: namespace, in: replica, json: parsed.has("--json"))
                return
            }
            report = try replica.report()
            // Every page read once: damage no command of the moment touches is found here.
            problems = try replica.integrityProblems()
        } catch let error as ReplicaError {
            throw InputError(message: error.message)
        } catch let error as SQLiteError {
            throw storeFailure(error) ?? error
        }
        show(report, json: parsed.has("--json"))
        if !problems.isEmpty {
            printError("stele inspect: \(path) is damaged (SQLite's quick_check: \(problems.prefix(3).joined(separator: "; "))); restore it from a backup")
            throw ExitStatus(code: 1)
        }
    }

    private static func show(_ report: StoreReport, json: Bool) {
        if json {
            print((try? jsonText(report)) ?? "{}")
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

    /// One live entry of a namespace as `--keys` lists it.
    struct Entry: Encodable {
        let key: String
        /// The value's bytes, or for a log event its group, for a message its author.
        let detail: String
    }

    /// Prints the live keys of `namespace`, in key order.
    private static func keys(of namespace: String, in replica: Replica, json: Bool) throws {
        guard let declaration = replica.namespaces.first(where: { $0.name == namespace }) else {
            let names = replica.namespaces.map(\.name)
            let hint = Spelling.hint(namespace, in: names)
            throw InputError(
                message: "the store declares no namespace \(namespace)"
                    + (hint.isEmpty ? (names.isEmpty ? "; it declares none" : "; it declares \(names.joined(separator: ", "))") : hint))
        }
        let bytes = { (value: [UInt8]) in "\(grouped(value.count)) bytes" }
        let entries: [Entry]
        switch declaration.kind {
        case .causal: entries = try replica.causal(namespace).entries().map { Entry(key: $0.key, detail: bytes($0.value)) }
        case .lww: entries = try replica.lww(namespace).entries().map { Entry(key: $0.key, detail: bytes($0.value)) }
        case .appendOnly: entries = try replica.appendOnly(namespace).entries().map { Entry(key: $0.key, detail: bytes($0.value)) }
        case .local: entries = try replica.local(namespace).entries().map { Entry(key: $0.key, detail: bytes($0.value)) }
        case .log: entries = try replica.log(namespace).live().map { Entry(key: "\($0.id)", detail: "group \($0.group), \(bytes($0.body))") }
        case .messages: entries = try replica.messages(namespace).messages().map { Entry(key: $0.message, detail: "by \($0.author), \(bytes($0.body))") }
        }
        if json {
            print(try jsonText(entries))
            return
        }
        if entries.isEmpty {
            print("\(namespace) (\(declaration.kind)) holds no live entries")
            return
        }
        print(table(["key", "value"], entries.map { [$0.key, $0.detail] }, numeric: []))
    }

    /// When the store last collected tombstones, and how many, or "never".
    static func collection(_ report: StoreReport) -> String {
        guard let milliseconds = report.lastCollectionMilliseconds else { return "never" }
        let date = Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
        return "\(date.formatted(.iso8601)) (\(grouped(report.lastCollectionCount)) tombstones dropped)"
    }
}
