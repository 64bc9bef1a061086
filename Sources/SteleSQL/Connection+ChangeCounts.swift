import CSQLite

/// How many rows each watched group of tables has had changed through one
/// connection, and, for the groups that note them, which rows: SQLite calls
/// ``changeCounted`` from the watching triggers.
final class ChangeCounts {
    var counts: [Int64: Int64] = [:]
    /// Per group that notes its rows: the row keys changed since they were last
    /// taken (``Connection/takeChangedRows(of:)``), as their UTF-8 bytes: two
    /// keys Swift's `String` holds equal (`é` as one character, and as `e` with
    /// a combining accent) are two rows to SQLite.
    var noted: [Int64: Set<[UInt8]>] = [:]
    /// The groups that changed more rows since they were last taken than are
    /// worth listing (``ChangeCounts/notedLimit``): the taker reads everything.
    var overflowed: Set<Int64> = []
    /// The groups with a table whose triggers note its rows.
    var noting: Set<Int64> = []
    /// Past this many rows changed between two takes, a group's rows are no longer listed.
    static let notedLimit = 512

    func note(_ row: [UInt8], of key: Int64) {
        guard !overflowed.contains(key) else { return }
        if noted[key, default: []].insert(row).inserted, noted[key]?.count ?? 0 > Self.notedLimit {
            noted[key] = nil
            overflowed.insert(key)
        }
    }
}

/// `stele_changed(key)` or `stele_changed(key, row)`, called by a watching
/// trigger once per row changed: counts one more change of `key`'s tables, and
/// notes the row's key when the trigger passes it.
private func changeCounted(_ context: OpaquePointer?, _ count: Int32, _ arguments: UnsafeMutablePointer<OpaquePointer?>?) {
    guard let data = sqlite3_user_data(context), count >= 1, let arguments, let argument = arguments[0] else { return }
    let counts = Unmanaged<ChangeCounts>.fromOpaque(data).takeUnretainedValue()
    let key = sqlite3_value_int64(argument)
    counts.counts[key, default: 0] += 1
    for index in 1..<Int(count) {
        guard let row = arguments[index] else { continue }
        if sqlite3_value_type(row) == SQLITE_TEXT, let text = sqlite3_value_text(row) {
            // The text's bytes, a NUL among them too.
            counts.note(Array(UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(row)))), of: key)
        } else if sqlite3_value_type(row) != SQLITE_NULL {
            // A key that is not text cannot be named: the taker reads everything.
            counts.noted[key] = nil
            counts.overflowed.insert(key)
        }
    }
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
    /// With `noting` a text column, each changed row's value of it (its key) is
    /// noted too, for ``takeChangedRows(of:)``: the new row's for an insert, the
    /// old row's for a delete, both for an update.
    ///
    /// Watching a table twice under the same key is harmless (with and without
    /// `noting`, its changes count twice).
    /// - Throws: ``SQLiteError`` when the function or a trigger cannot be made
    ///   (a read-only connection cannot); nothing is counted then.
    public func countChanges(of table: String, as key: Int64, noting column: String? = nil) throws {
        if changeCounts == nil {
            let counts = ChangeCounts()
            let data = Unmanaged.passRetained(counts).toOpaque()
            let code = sqlite3_create_function_v2(
                handle, "stele_changed", -1, SQLITE_UTF8, data, changeCounted, nil, nil, releaseChangeCounts)
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
            [("INSERT", "i", "NEW"), ("UPDATE", "u", "OLD"), ("DELETE", "d", "OLD")].map { event, suffix, row in
                let trigger = quoted("stele_changed_\(table)_\(suffix)" + (column.map { "_\($0)" } ?? ""))
                let arguments: String
                switch (column, event) {
                case (nil, _): arguments = "\(key)"
                case (let column?, "UPDATE"): arguments = "\(key), OLD.\(quoted(column)), NEW.\(quoted(column))"
                case (let column?, _): arguments = "\(key), \(row).\(quoted(column))"
                }
                return "CREATE TEMP TRIGGER IF NOT EXISTS \(trigger) AFTER \(event) ON main.\(quoted(table)) BEGIN SELECT stele_changed(\(arguments)); END;"
            }.joined(separator: "\n"))
        if column != nil { changeCounts?.noting.insert(key) }
    }

    /// The keys of the rows changed through this connection, committed or
    /// rolled back, in the tables counted under `key` with `noting` a column,
    /// since the last take, as their UTF-8 bytes (SQLite's `BINARY` equality,
    /// not `String`'s); then forgets them. `nil` when they cannot be listed:
    /// more than a few hundred (the caller reads everything), a key that is not
    /// text, or no table noted under `key`.
    public func takeChangedRows(of key: Int64) -> Set<[UInt8]>? {
        guard let changeCounts, changeCounts.noting.contains(key) else { return nil }
        if changeCounts.overflowed.remove(key) != nil { return nil }
        return changeCounts.noted.removeValue(forKey: key) ?? []
    }

    /// The rows changed through this connection in the tables counted under
    /// `key` (``countChanges(of:as:)``) since it opened.
    public func changeCount(of key: Int64) -> Int64 {
        changeCounts?.counts[key] ?? 0
    }
}
