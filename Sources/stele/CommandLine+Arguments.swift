import Stele
import SteleSimulator

/// A usage error: a wrong flag, a missing argument. Printed with the command's
/// usage line; the process exits with status 2.
struct UsageError: Error {
    let message: String
    let usage: String
}

/// A failure that is the input's fault (a missing or foreign store): a clear
/// one-line message and exit status 2, like a usage error but without the usage.
struct InputError: Error {
    let message: String
}

/// The arguments of one subcommand: flags it declared, and positional words.
struct ParsedArguments {
    private(set) var flags: Set<String> = []
    private(set) var options: [String: String] = [:]
    private(set) var positionals: [String] = []

    /// Parses `arguments`, accepting only `flags` (booleans) and `options` (taking a value).
    /// - Throws: ``UsageError`` for an unknown flag (suggesting the closest known one),
    ///   an option without its value, or one given twice.
    init(_ arguments: [String], flags knownFlags: Set<String>, options knownOptions: Set<String> = [], usage: String) throws {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if argument == "--" {
                while let rest = iterator.next() { positionals.append(rest) }
            } else if argument.hasPrefix("-") && argument.count > 1 {
                if knownFlags.contains(argument) {
                    flags.insert(argument)
                } else if knownOptions.contains(argument) {
                    guard let value = iterator.next() else { throw UsageError(message: "\(argument) needs a value", usage: usage) }
                    // Each option holds one value: a second would silently win over the first.
                    if let first = options[argument] {
                        throw UsageError(message: "\(argument) is given twice ('\(first)' and '\(value)'); give it once", usage: usage)
                    }
                    options[argument] = value
                } else {
                    let known = knownFlags.union(knownOptions)
                    var message = "unknown option '\(argument)'"
                    message += Spelling.hint(argument, in: known)
                    throw UsageError(message: message, usage: usage)
                }
            } else {
                positionals.append(argument)
            }
        }
    }

    func has(_ flag: String) -> Bool { flags.contains(flag) }
}
