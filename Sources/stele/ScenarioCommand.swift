import Foundation
import Stele
import SteleSimulator

/// `stele scenario FILE... [--seed N] [--quiet] [--trace | --trace-all] [--trace-device D] [--trace-kind K]`:
/// runs scenario files in the simulator; stops at the first failure (exit 1), or
/// at a file that does not parse (exit 2). `--trace` prints what every device's
/// node logs as it happens, but the `inSync` heartbeats (`--trace-all` keeps
/// them); `--trace-device` and `--trace-kind` keep one device's lines or one kind's.
enum ScenarioCommand {
    static let usage = """
        usage: stele scenario FILE... [--seed N] [--quiet] [--trace | --trace-all] [--trace-device D] [--trace-kind K]
          --trace           what every device's node logs, as it happens, but the inSync heartbeats
          --trace-all       the same with the heartbeats
          --trace-device D  only device D's lines (the hub's are "hub")
          --trace-kind K    only events of kind K (\(FleetEvent.Kind.allCases.map { "\($0)" }.joined(separator: ", ")))
        """

    /// The usage, then every statement a scenario file may hold, one form a line.
    static let help = """
        \(usage)

        Each line of a scenario is one statement (docs/scenarios.md); # starts a comment.
        Statements:
        \(ScenarioGrammar.usage.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        """

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(
            arguments, flags: ["--quiet", "--trace", "--trace-all"], options: ["--seed", "--trace-device", "--trace-kind"], usage: usage)
        guard !parsed.positionals.isEmpty else { throw UsageError(message: "name at least one scenario file", usage: usage) }
        let seed = try parseSeed(parsed.options["--seed"], usage: usage) ?? 0
        let kinds = FleetEvent.Kind.allCases.map { "\($0)" }
        if let kind = parsed.options["--trace-kind"], !kinds.contains(kind) {
            let hint = Spelling.hint(kind, in: Set(kinds))
            throw UsageError(message: "--trace-kind: no event kind \(kind)" + (hint.isEmpty ? "; stele scenario --help lists them" : hint), usage: usage)
        }
        let filter = TraceFilter(
            heartbeats: parsed.has("--trace-all"), device: parsed.options["--trace-device"], kind: parsed.options["--trace-kind"])
        let tracing = parsed.has("--trace") || parsed.has("--trace-all") || filter.device != nil || filter.kind != nil
        // Every file parses before any runs: a typo is reported before anything happens.
        var scenarios: [Scenario] = []
        for path in parsed.positionals {
            guard let data = FileManager.default.contents(atPath: path) else {
                var isFolder: ObjCBool = false
                let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
                let why = !exists ? "no such file" : isFolder.boolValue ? "it is a folder; name a scenario file" : "it cannot be read (check its permissions)"
                throw InputError(message: "cannot read \(path): \(why)")
            }
            guard let text = String(data: data, encoding: .utf8) else { throw InputError(message: "\(path) is not UTF-8 text") }
            do {
                scenarios.append(try ScenarioParser.parse(text, file: path))
            } catch let error as ScenarioParseError {
                throw InputError(message: "\(error)")
            }
        }
        for scenario in scenarios {
            let runner = try ScenarioRunner(scenario: scenario, seed: seed)
            if tracing { runner.simulation.trace = { if filter.keeps($0) { print($0) } } }
            do {
                try runner.run()
            } catch let failure as ScenarioFailure {
                printError(failure.description)
                throw ExitStatus(code: 1)
            }
            let names = runner.simulation.everyDevice.map(\.name) + (runner.simulation.hub.map { hub in hub.clients.map(\.name) + hub.ledgerClients.map(\.name) } ?? [])
            if let device = filter.device, device != "hub", !names.contains(device) {
                printError("stele scenario: --trace-device \(device): \(scenario.file) has no device of that name, so nothing was traced")
            }
            if !parsed.has("--quiet") { print("PASS \(scenario.file) (\(scenario.lines.count) statements, seed \(seed))") }
        }
    }
}

/// Leaves with a status after the command printed its own explanation.
struct ExitStatus: Error {
    let code: Int32
}

func parseSeed(_ text: String?, usage: String) throws -> UInt64? {
    guard let text else { return nil }
    guard let value = UInt64(text) else { throw UsageError(message: "--seed needs a whole number from 0, got \(text)", usage: usage) }
    return value
}

/// Which trace lines `stele scenario` prints. A line is
/// `TIME s  DEVICE  KIND ...` (``Simulation/trace``): the device is its second
/// field, the kind the first word of the third.
struct TraceFilter {
    /// Whether the `inSync` heartbeats (most of a long run's lines) are kept.
    let heartbeats: Bool
    let device: String?
    let kind: String?

    func keeps(_ line: String) -> Bool {
        let fields = line.trimmingCharacters(in: .whitespaces).components(separatedBy: "  ")
        guard fields.count >= 3 else { return device == nil && kind == nil }
        let lineKind = String(fields[2].prefix { $0 != " " && $0 != ":" })
        if !heartbeats && kind == nil && lineKind == "inSync" { return false }
        if let device, fields[1] != device { return false }
        if let kind, lineKind != kind { return false }
        return true
    }
}
