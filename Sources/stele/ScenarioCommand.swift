import Foundation
import SteleSimulator

/// `stele scenario FILE... [--seed N] [--quiet] [--trace]`: runs scenario files in
/// the simulator; stops at the first failure (exit 1), or at a file that does not
/// parse (exit 2). `--trace` prints what every device's node logs as it happens.
enum ScenarioCommand {
    static let usage = "usage: stele scenario FILE... [--seed N] [--quiet] [--trace]"

    /// The usage, then every statement a scenario file may hold, one form a line.
    static let help = """
        \(usage)

        Each line of a scenario is one statement (SCENARIOS.md); # starts a comment.
        Statements:
        \(ScenarioGrammar.usage.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        """

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--quiet", "--trace"], options: ["--seed"], usage: usage)
        guard !parsed.positionals.isEmpty else { throw UsageError(message: "name at least one scenario file", usage: usage) }
        let seed = try parseSeed(parsed.options["--seed"], usage: usage) ?? 0
        // Every file parses before any runs: a typo is reported before anything happens.
        var scenarios: [Scenario] = []
        for path in parsed.positionals {
            guard let data = FileManager.default.contents(atPath: path) else { throw InputError(message: "cannot read \(path): no such file") }
            guard let text = String(data: data, encoding: .utf8) else { throw InputError(message: "\(path) is not UTF-8 text") }
            do {
                scenarios.append(try ScenarioParser.parse(text, file: path))
            } catch let error as ScenarioParseError {
                throw InputError(message: "\(error)")
            }
        }
        for scenario in scenarios {
            let runner = try ScenarioRunner(scenario: scenario, seed: seed)
            if parsed.has("--trace") { runner.simulation.trace = { print($0) } }
            do {
                try runner.run()
            } catch let failure as ScenarioFailure {
                printError(failure.description)
                throw ExitStatus(code: 1)
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
