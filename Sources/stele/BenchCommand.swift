import Stele
import Foundation
import SteleBench
import SteleSimulator

/// `stele bench [--json] [--quick] [NAME...]`: the benchmark suite (DESIGN §11).
enum BenchCommand {
    static let usage = "usage: stele bench [--json] [--quick] [NAME-PREFIX...]"

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--json", "--quick"], usage: usage)
        for filter in parsed.positionals where !BenchmarkSuite.figureNames.contains(where: { $0.hasPrefix(filter) }) {
            var message = "no benchmark named '\(filter)'"
            message += Spelling.hint(filter, in: BenchmarkSuite.figureNames)
            throw UsageError(message: message + " (known: \(BenchmarkSuite.figureNames.joined(separator: ", ")))", usage: usage)
        }
        let json = parsed.has("--json")
        if isDebugBuild {
            printError("stele bench: this is a debug build; its figures are not comparable with anyone's. Build with swift build -c release and run .build/release/stele bench")
        }
        let figures = try BenchmarkSuite.run(scale: parsed.has("--quick") ? .quick : .full, filters: parsed.positionals) { names in
            printError("running \(names.joined(separator: ", ")) ...")
        }
        if json {
            print(try jsonText(figures))
            return
        }
        print(
            table(
                ["figure", "value", "unit", "baseline", "ratio", "target", "met"],
                figures.map { figure in
                    [
                        figure.name, format(figure.value), figure.unit, figure.baseline.map(format) ?? "-",
                        figure.ratio.map { String(format: "%.3f", $0) } ?? "-", figure.target ?? "-",
                        figure.met.map { $0 ? "yes" : "NO" } ?? "-",
                    ]
                }, numeric: [1, 3, 4]))
        if parsed.has("--quick") { print("\n(--quick: a tenth of the work; report full runs, not these)") }
        if isDebugBuild { print("\n(a debug build: none of these figures is comparable; run a release build's stele bench)") }
    }

    /// Whether this binary was built without `-c release` (its figures measure the debug checks).
    static var isDebugBuild: Bool {
        #if DEBUG
            true
        #else
            false
        #endif
    }

    private static func format(_ value: Double) -> String {
        if value >= 100 { return grouped(Int(value.rounded())) }
        // A small figure (a read's seconds) keeps three significant digits rather than printing 0.00.
        if value != 0 && abs(value) < 0.01 { return String(format: "%.3g", value) }
        return String(format: "%.2f", value)
    }
}
