import SteleSQL

/// Device-local state that is never replicated (000 §7: derived state any device
/// can regenerate has no business in a replicated set). A delete removes the row;
/// there is nothing to tell other devices.
public struct LocalNamespace: KeyValueNamespace {
    let replica: Replica
    public let declaration: NamespaceDeclaration

    public var name: String { declaration.name }
    private var table: String { declaration.table }

    public func get(_ key: String) throws -> [UInt8]? {
        try replica.connection.queryFirst("SELECT value FROM \(table) WHERE key = ?", [.text(key)]) { $0.blob(0) }
    }

    public func entries() throws -> [(key: String, value: [UInt8])] {
        try replica.connection.query("SELECT key, value FROM \(table) ORDER BY key") { ($0.text(0), $0.blob(1)) }
    }

    public func count() throws -> Int {
        Int(try replica.connection.scalarInt("SELECT count(*) FROM \(table)") ?? 0)
    }

    public func put(_ key: String, _ value: [UInt8]) throws {
        try Limits.checkKey(key)
        try Limits.checkValue(value)
        try replica.operation {
            let existed = try get(key) != nil
            try replica.connection.execute(
                "INSERT INTO \(table) (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [.text(key), .blob(value)])
            replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: existed ? .updated : .inserted, origin: .local))
        }
    }

    public func putBytes(_ key: String, _ value: [UInt8]) throws { try put(key, value) }

    /// Removes `key`.
    /// - Returns: whether there was a row.
    @discardableResult
    public func delete(_ key: String) throws -> Bool {
        try replica.operation {
            try replica.connection.execute("DELETE FROM \(table) WHERE key = ?", [.text(key)])
            let removed = replica.connection.changes > 0
            if removed { replica.emit(ChangeEvent(namespace: name, subject: .row(key: key), kind: .deleted, origin: .local)) }
            return removed
        }
    }
}
