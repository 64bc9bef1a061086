import Foundation
import SteleSQL

/// Writes a line to standard error.
func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// JSON with sorted keys and indentation, as `--json` prints it.
func jsonText(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// A table with left-aligned text columns and right-aligned number columns.
func table(_ header: [String], _ rows: [[String]], numeric: Set<Int>) -> String {
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    func line(_ cells: [String]) -> String {
        cells.enumerated().map { column, cell in
            let padding = String(repeating: " ", count: widths[column] - cell.count)
            return numeric.contains(column) ? padding + cell : cell + padding
        }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
    }
    return ([line(header)] + rows.map(line)).joined(separator: "\n")
}

/// An integer with thousands separators.
func grouped(_ value: Int) -> String {
    let digits = String(value.magnitude)
    var result = ""
    for (index, character) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { result.append(",") }
        result.append(character)
    }
    return (value < 0 ? "-" : "") + result
}

/// What a SQLite failure on a store means for its user, when it is one they can
/// act on: a damaged file (restore it), or a read-only one (SQLite writes its
/// `-wal` and `-shm` files beside the store even to read it).
func storeFailure(_ error: SQLiteError) -> InputError? {
    switch error.code.primary {
    case .corrupt, .notADatabase:
        return InputError(message: "the store is damaged (SQLite: \(error.message)); restore it from a backup")
    case .readOnly:
        return InputError(
            message: "the store cannot be written (SQLite: \(error.message)): its file or its folder is read-only, and SQLite writes the store's -wal and -shm files beside it even to read it; copy the store somewhere writable, or make it writable")
    default:
        return nil
    }
}
