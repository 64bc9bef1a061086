import Stele

/// A scenario file, parsed: every line checked before anything runs.
public struct Scenario: Sendable {
    public struct Line: Sendable {
        public let number: Int
        public let text: String
        public let statement: Statement
    }

    public let file: String
    public let lines: [Line]
}

/// A scenario that does not parse: the file, the line, and what is wrong with it.
public struct ScenarioParseError: Error, Sendable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let text: String
    public let message: String

    public var description: String { "\(file):\(line): \(message)\n    \(text)" }
}

/// Reads the scenario language of `SCENARIOS.md`: one statement per line, `#`
/// comments, bare-word names, double-quoted values with `\"` and `\\`, and
/// durations such as `15s` or `30d`. An unknown statement, a wrong number of
/// arguments, or a device or namespace not declared above is a parse error that
/// names the line. The statements themselves are the rows of ``ScenarioGrammar``.
public enum ScenarioParser {
    /// Parses every line of `text`.
    /// - Throws: ``ScenarioParseError`` naming the first line that does not parse.
    public static func parse(_ text: String, file: String = "scenario") throws -> Scenario {
        try parse(text, file: file, grammar: .standard)
    }

    /// Parses `text` in `grammar` (a test's altered table, say).
    static func parse(_ text: String, file: String, grammar: ScenarioGrammar) throws -> Scenario {
        var state = ParseState(file: file, grammar: grammar)
        var lines: [Scenario.Line] = []
        // A line ends at LF, CRLF (a file saved on Windows: Swift holds "\r\n" as one
        // Character, which a split at "\n" never meets) or a lone CR.
        let rawLines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }
        for (index, raw) in rawLines.enumerated() {
            let number = index + 1
            let text = String(raw).trimmingCharacters(in: .whitespaces)
            let tokens: [Token]
            do {
                tokens = try tokenize(text)
            } catch let message as Message {
                throw ScenarioParseError(file: file, line: number, text: text, message: message.text)
            }
            guard !tokens.isEmpty else { continue }
            do {
                lines.append(Scenario.Line(number: number, text: text, statement: try state.statement(tokens)))
            } catch let message as Message {
                throw ScenarioParseError(file: file, line: number, text: text, message: message.text)
            }
        }
        return Scenario(file: file, lines: lines)
    }

    struct Message: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    struct Token: Equatable {
        let text: String
        /// Written in quotes: a value, never a keyword or a name.
        let quoted: Bool
    }

    static func tokenize(_ line: String) throws -> [Token] {
        var tokens: [Token] = []
        var current = ""
        var inQuotes = false
        var hasToken = false
        var iterator = line.makeIterator()
        while let character = iterator.next() {
            if inQuotes {
                switch character {
                case "\\":
                    guard let escaped = iterator.next(), escaped == "\"" || escaped == "\\" else {
                        throw Message("inside quotes, a backslash escapes only \" and \\")
                    }
                    current.append(escaped)
                case "\"":
                    inQuotes = false
                    tokens.append(Token(text: current, quoted: true))
                    current = ""
                    hasToken = false
                default:
                    current.append(character)
                }
                continue
            }
            switch character {
            case "#":
                // A comment starts a word of its own: `v#x` would store `v` without a word.
                guard !hasToken else { throw Message("a # inside the word \(current)#...: quote the value (\"\(current)#...\"), or put a space before a comment") }
                return tokens
            case " ", "\t":
                if hasToken { tokens.append(Token(text: current, quoted: false)) }
                current = ""
                hasToken = false
            case "\"":
                guard !hasToken else { throw Message("a quote must start a value of its own") }
                inQuotes = true
            default:
                current.append(character)
                hasToken = true
            }
        }
        guard !inQuotes else { throw Message("a quoted value is not closed") }
        if hasToken { tokens.append(Token(text: current, quoted: false)) }
        return tokens
    }

    /// Durations: a number and `ms`, `s`, `m`, `h` or `d`.
    static func duration(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            guard let value = Int64(number), value >= 0 else { continue }
            return value.multipliedReportingOverflow(by: factor).overflow ? nil : value * factor
        }
        return nil
    }

    static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
    }
}
