import Stele
import Foundation
import SteleSimulator
import Synchronization

/// `stele simulate`: randomized runs with faults, then healing, checked by the
/// oracle. Exit 1 if any run broke a guarantee or did not converge.
enum SimulateCommand {
    static let usage = """
        usage: stele simulate [--seed S] [--seeds N] [--jobs J] [--devices K] [--clients C] [--ledger-clients L] [--steps M] [--faults LIST] [--report FILE.svg] [--scenario FILE] [--json]
          --seed S      the (base) seed; alone, one run, replayable bit for bit (default 1)
          --seeds N     N runs, seeds S, S+1, ...
          --jobs J      runs at once, each on a core of its own (default: the cores this
                        machine has); every run is the same as alone, only sooner
          --devices K   devices per run (default 3)
          --clients C   mirror clients of a hub beside the fleet (default 0): their effective
                        reads must equal the hub's, no delete may come back, no mutation apply
                        twice, no intent be lost, every rollup equal its recomputation
          --ledger-clients L
                        ledger clients beside them (default 0): apps that own their store,
                        wiping it, corrupting their ledger and resetting; their stores must
                        equal the hub's, and none may push while halted or push a tombstone
                        for what neither it nor the hub deleted
          --steps M     writes in the fault phase (default 200)
          --faults LIST comma-separated: \(SimulationRun.Fault.allCases.map(\.rawValue).joined(separator: ",")), or all, or none (default all)
          --report F    an SVG timeline of the first failing run (or of the run, with one seed)
          --scenario F  the first failing run (or the first run) as a scenario file;
                        a failure writes one anyway: stele-simulate-seed-S.scenario
        """

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(
            arguments, flags: ["--json"], options: ["--seed", "--seeds", "--jobs", "--devices", "--clients", "--ledger-clients", "--steps", "--faults", "--report", "--scenario"], usage: usage)
        guard parsed.positionals.isEmpty else { throw UsageError(message: "simulate takes no file; did you mean stele scenario?", usage: usage) }
        let base = try parseSeed(parsed.options["--seed"], usage: usage) ?? 1
        let count = try positive(parsed.options["--seeds"], "--seeds", default: 1, limit: 1_000_000)
        var options = SimulationRun.Options()
        options.devices = try positive(parsed.options["--devices"], "--devices", default: 3, limit: 50)
        options.steps = try positive(parsed.options["--steps"], "--steps", default: 200, limit: 10_000_000)
        if let text = parsed.options["--clients"] {
            guard let clients = Int(text), (0...20).contains(clients) else {
                throw UsageError(message: "--clients needs a whole number from 0 to 20, got \(text)", usage: usage)
            }
            options.clients = clients
        }
        if let text = parsed.options["--ledger-clients"] {
            guard let clients = Int(text), (0...20).contains(clients) else {
                throw UsageError(message: "--ledger-clients needs a whole number from 0 to 20, got \(text)", usage: usage)
            }
            options.ledgerClients = clients
        }
        if let list = parsed.options["--faults"] { options.faults = try faults(list) }
        let hubFaults = options.faults.intersection([.hub, .hubRestore])
        if !hubFaults.isEmpty, options.clients + options.ledgerClients == 0, parsed.options["--faults"] != nil, parsed.options["--faults"] != "all" {
            throw UsageError(
                message: "--faults \(hubFaults.map(\.rawValue).sorted().joined(separator: ",")) needs a hub: add --clients C or --ledger-clients L", usage: usage)
        }
        // The files asked for are checked before the runs, not after them.
        for flag in ["--report", "--scenario"] {
            guard let path = parsed.options[flag] else { continue }
            try checkWritable(path, flag)
        }
        // The report draws the tombstones retained after every write.
        options.recordsTombstoneCounts = parsed.options["--report"] != nil

        let jobs = try positive(parsed.options["--jobs"], "--jobs", default: ProcessInfo.processInfo.activeProcessorCount, limit: 256)

        let interactive = isatty(STDERR_FILENO) == 1
        let lastLine = LastLine()
        let started = ContinuousClock.now
        let outcomes = try SimulationRun.run(seeds: (0..<count).map { base &+ UInt64($0) }, options: options, jobs: jobs) { done, failed in
            lastLine.value.withLock { progress(done, of: count, failures: failed, interactive: interactive, lastLine: &$0) }
        }
        if interactive { FileHandle.standardError.write(Data("\n".utf8)) }
        var summary = SimulationSummary(outcomes)
        let elapsed = (ContinuousClock.now - started).components
        summary.wallSeconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        if parsed.has("--json") {
            print(try jsonText(summary))
        } else {
            for line in summary.lines { print(line) }
        }
        if let path = parsed.options["--report"], let chosen = outcomes.first(where: \.failed) ?? outcomes.first {
            do {
                try TimelineReport.svg(chosen).write(toFile: path, atomically: true, encoding: .utf8)
                if !parsed.has("--json") { print("report              \(path) (seed \(chosen.seed))") }
            } catch {
                throw InputError(message: "cannot write the report to \(path): \(error.localizedDescription)")
            }
        }
        let failed = outcomes.first(where: \.failed)
        if let chosen = failed ?? outcomes.first, let path = parsed.options["--scenario"] ?? failed.map({ "stele-simulate-seed-\($0.seed).scenario" }) {
            do {
                try chosen.scenario.write(toFile: path, atomically: true, encoding: .utf8)
                if !parsed.has("--json") { print("scenario            \(path) (seed \(chosen.seed)): stele scenario \(path) --seed \(chosen.seed)") }
            } catch {
                throw InputError(message: "cannot write the scenario to \(path): \(error.localizedDescription)")
            }
        }
        if let failed {
            printError(
                "stele simulate: \(summary.failures.count) of \(count) runs broke a guarantee; replay one with --seed \(failed.seed) "
                    + "(and the same --devices, --clients, --ledger-clients, --steps and --faults)")
            throw ExitStatus(code: 1)
        }
    }

    /// The tenth of the runs the last plain progress line was printed at.
    private final class LastLine: Sendable {
        let value = Mutex(-1)
    }

    private static func progress(_ done: Int, of total: Int, failures: Int, interactive: Bool, lastLine: inout Int) {
        if interactive {
            let width = 30
            let filled = width * done / total
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            FileHandle.standardError.write(Data("\r[\(bar)] \(done)/\(total) runs, \(failures) failed".utf8))
        } else {
            // Plain lines, one per tenth, for logs.
            let tenth = done * 10 / total
            guard tenth != lastLine else { return }
            lastLine = tenth
            FileHandle.standardError.write(Data("simulate: \(done)/\(total) runs, \(failures) failed\n".utf8))
        }
    }

    private static func positive(_ text: String?, _ flag: String, default value: Int, limit: Int) throws -> Int {
        guard let text else { return value }
        guard let number = Int(text), number >= 1, number <= limit else {
            throw UsageError(message: "\(flag) needs a whole number from 1 to \(limit), got \(text)", usage: usage)
        }
        return number
    }

    /// A file the run will write: a folder, or a place that cannot be written, is said now.
    private static func checkWritable(_ path: String, _ flag: String) throws {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            guard !isFolder.boolValue else { throw UsageError(message: "\(flag) \(path) is a folder; name a file", usage: usage) }
            guard FileManager.default.isWritableFile(atPath: path) else { throw UsageError(message: "\(flag) \(path) cannot be written", usage: usage) }
            return
        }
        let folder = (path as NSString).deletingLastPathComponent
        let parent = folder.isEmpty ? "." : folder
        guard FileManager.default.fileExists(atPath: parent, isDirectory: &isFolder), isFolder.boolValue else {
            throw UsageError(message: "\(flag) \(path): the folder \(parent) does not exist", usage: usage)
        }
        guard FileManager.default.isWritableFile(atPath: parent) else {
            throw UsageError(message: "\(flag) \(path): the folder \(parent) cannot be written", usage: usage)
        }
    }

    private static func faults(_ list: String) throws -> Set<SimulationRun.Fault> {
        // Spaces around a name are no part of it ("loss, dup" as typed in a shell's quotes).
        let names = list.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        if names == ["all"] { return Set(SimulationRun.Fault.allCases) }
        if names == ["none"] { return [] }
        guard !names.contains(where: \.isEmpty) else {
            throw UsageError(message: "--faults '\(list)' names no fault; give a comma-separated list, all, or none", usage: usage)
        }
        var faults: Set<SimulationRun.Fault> = []
        for name in names {
            guard let fault = SimulationRun.Fault(rawValue: name) else {
                var message = "unknown fault '\(name)'"
                message += Spelling.hint(name, in: SimulationRun.Fault.allCases.map(\.rawValue))
                throw UsageError(message: message, usage: usage)
            }
            faults.insert(fault)
        }
        return faults
    }
}
