import CSQLite

/// How many rows each watched group of tables has had changed through one
/// connection: SQLite calls ``changeCounted`` from the watching triggers.
final class ChangeCounts {
    var counts: [Int64: Int64] = [:]
}

/// `stele_changed(key)`, called by a watching trigger once per row changed:
/// counts one more change of `key`'s tables.
private func changeCounted(_ context: OpaquePointer?, _ count: Int32, _ arguments: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let data = sqlite3_user_data(context), count == 1, let argument = arguments?[0] else { return }
    let counts = Unmanaged<ChangeCounts>.fromOpaque(data).takeUnretainedValue()
    counts.counts[sqlite3_value_int64(argument), default: 0] += 1
    sqlite3_result_null(context)
}

/// Lets SQLite's last reference to the counts go when the function is dropped
/// (the connection closes).
private func releaseChangeCounts(_ data: UnsafeMutableRawPointer?) {
    guard let data else { return }
    Unmanaged<ChangeCounts>.fromOpaque(data).release()
}

extension Connection {
    /// Counts every row inserted, updated or deleted in `table` through this
    /// connection under `key` (``changeCount(of:)``), by temporary triggers that
    /// live as long as the connection and are seen by no other. A statement
    /// rolled back still counts: the count says the table may have changed,
    /// never that it has not. Changes through other connections are not counted
    /// (``dataVersion()`` tells of their commits).
    ///
    /// Watching a table twice under the same key is harmless.
    /// - Throws: ``SQLiteError`` when the function or a trigger cannot be made
    ///   (a read-only connection cannot); nothing is counted then.
    public func countChanges(of table: String, as key: Int64) throws {
        if changeCounts == nil {
            let counts = ChangeCounts()
            let data = Unmanaged.passRetained(counts).toOpaque()
            let code = sqlite3_create_function_v2(
                handle, "stele_changed", 1, SQLITE_UTF8, data, changeCounted, nil, nil, releaseChangeCounts)
            guard code == SQLITE_OK else {
                // SQLite calls the destructor itself when the function cannot be made.
                throw error(code: code, operation: .execute, sql: "sqlite3_create_function_v2(stele_changed)")
            }
            changeCounts = counts
        }
        func quoted(_ identifier: String) -> String {
            "\"" + identifier.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
        }
        try executeScript(
            [("INSERT", "i"), ("UPDATE", "u"), ("DELETE", "d")].map { event, suffix in
                let trigger = quoted("stele_changed_\(table)_\(suffix)")
                return "CREATE TEMP TRIGGER IF NOT EXISTS \(trigger) AFTER \(event) ON main.\(quoted(table)) BEGIN SELECT stele_changed(\(key)); END;"
            }.joined(separator: "\n"))
    }

    /// The rows changed through this connection in the tables counted under
    /// `key` (``countChanges(of:as:)``) since it opened.
    public func changeCount(of key: Int64) -> Int64 {
        changeCounts?.counts[key] ?? 0
    }
}
