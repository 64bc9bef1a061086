import SteleSQL

/// A namespace as the replica records it.
public struct NamespaceDeclaration: Sendable, Equatable {
    /// The namespace's local id.
    let id: Int64
    /// The table holding its rows.
    var table: String { kind.tableName(id: id) }
    /// The name, the same on every device of the account.
    public let name: String
    /// The merge rule.
    public let kind: NamespaceKind
}

extension Replica {
    static func loadNamespaces(_ connection: Connection) throws -> [String: NamespaceDeclaration] {
        var declared: [String: NamespaceDeclaration] = [:]
        let rows = try connection.query("SELECT id, name, kind FROM namespaces") { ($0.int64(0), $0.text(1), $0.text(2)) }
        let tables = Set(try connection.query("SELECT name FROM sqlite_schema WHERE type = 'table'") { $0.text(0) })
        for (id, name, kindText) in rows {
            guard let kind = NamespaceKind(rawValue: kindText) else {
                throw ReplicaError(.corrupt, "namespace \(name) has unknown kind \(kindText); the file is damaged or from a newer Stele")
            }
            let declaration = NamespaceDeclaration(id: id, name: name, kind: kind)
            guard tables.contains(declaration.table) else {
                throw ReplicaError(.corrupt, "namespace \(name) has lost its table \(declaration.table); the file is damaged. Keep it for diagnosis and restore from a backup")
            }
            declared[name] = declaration
        }
        return declared
    }

    /// Every declared namespace, sorted by name, another handle's declarations included.
    public var namespaces: [NamespaceDeclaration] {
        // A failure here leaves the list as it was; the digest and reconcile reads
        // that follow it catch up again and throw.
        try? catchUpWithOtherWriters()
        return declared.values.sorted { $0.name < $1.name }
    }

    /// Declares a namespace, or checks an earlier declaration.
    ///
    /// Declaring is idempotent; every device of an account must declare the same set.
    /// - Throws: ``ReplicaError`` `kindMismatch` if `name` was declared with another
    ///   kind (nothing changes), `invalidName` for a name that is not a bare word.
    @discardableResult
    public func declare(_ name: String, _ kind: NamespaceKind) throws -> NamespaceDeclaration {
        if declared[name] == nil { try catchUpWithOtherWriters() }
        if let existing = declared[name] {
            guard existing.kind == kind else {
                throw ReplicaError(
                    .kindMismatch,
                    "namespace \(name) is declared as \(existing.kind) in this store, not \(kind); a namespace keeps its kind for life: use another name")
            }
            return existing
        }
        try Limits.checkNamespaceName(name)
        let declaration = try write {
            try connection.execute("INSERT INTO namespaces (name, kind) VALUES (?, ?)", [.text(name), .text(kind.rawValue)])
            let declaration = NamespaceDeclaration(id: connection.lastInsertRowID, name: name, kind: kind)
            try connection.executeScript(kind.createTableSQL(declaration.table))
            return declaration
        }
        declared[name] = declaration
        if kind.isReplicated { digests[declaration.id] = NamespaceDigest() }
        return declaration
    }

    /// The declaration of `name`.
    /// - Throws: ``ReplicaError`` `undeclaredNamespace`.
    public func declaration(of name: String) throws -> NamespaceDeclaration {
        // Another handle may have declared it since this one loaded its table.
        if declared[name] == nil { try catchUpWithOtherWriters() }
        guard let declaration = declared[name] else {
            throw ReplicaError(.undeclaredNamespace, "namespace \(name) is not declared in this store; declare it (with its kind) first")
        }
        return declaration
    }

    /// The `causal` namespace `name`, declared now if it is new.
    public func causal(_ name: String) throws -> CausalNamespace {
        CausalNamespace(replica: self, declaration: try declare(name, .causal))
    }

    /// The `lww` namespace `name`, declared now if it is new.
    public func lww(_ name: String) throws -> LWWNamespace {
        LWWNamespace(replica: self, declaration: try declare(name, .lww))
    }

    /// The `log` namespace `name`, declared now if it is new.
    public func log(_ name: String) throws -> EventLog {
        EventLog(replica: self, declaration: try declare(name, .log))
    }

    /// The `appendOnly` namespace `name`, declared now if it is new.
    public func appendOnly(_ name: String) throws -> AppendOnlyNamespace {
        AppendOnlyNamespace(replica: self, declaration: try declare(name, .appendOnly))
    }

    /// The `messages` namespace `name`, declared now if it is new.
    public func messages(_ name: String) throws -> MessageNamespace {
        MessageNamespace(replica: self, declaration: try declare(name, .messages))
    }

    /// The conversation `name` with `contact`: a `messages` namespace whose
    /// outbound ops are owed to that account (``MessageNamespace/outbox()``) and
    /// which takes deliveries from it alone. Declared now if it is new; every
    /// device of the account declares the same.
    /// - Throws: ``ReplicaError`` `conversationMismatch` when `name` is a
    ///   conversation with another contact, or `contact` is this account;
    ///   `kindMismatch` when `name` is not a `messages` namespace.
    public func conversation(_ name: String, with contact: AccountID) throws -> MessageNamespace {
        guard contact != account else {
            throw ReplicaError(.conversationMismatch, "a conversation is with another account; \(contact) is this store's own")
        }
        let declaration = try declare(name, .messages)
        let bound = try connection.queryFirst("SELECT contact FROM conversations WHERE namespace = ?", [.integer(declaration.id)]) { $0.blob(0) }
        if let bound {
            guard bound == contact.bytes else {
                throw ReplicaError(
                    .conversationMismatch,
                    "namespace \(name) is a conversation with \(Hex.encode(bound.prefix(4))), not \(contact); a conversation keeps its contact for life: use another name")
            }
        } else {
            try write {
                try connection.execute("INSERT INTO conversations (namespace, contact) VALUES (?, ?)", [.integer(declaration.id), .blob(contact.bytes)])
            }
        }
        return MessageNamespace(replica: self, declaration: declaration)
    }

    /// Every conversation: the namespace and the contact it is with, by name.
    public func conversations() throws -> [(name: String, contact: AccountID)] {
        let rows = try connection.query("SELECT namespace, contact FROM conversations") { ($0.int64(0), $0.blob(1)) }
        return try rows.compactMap { id, bytes in
            guard let declaration = declared.values.first(where: { $0.id == id }) else { return nil }
            guard let contact = try? AccountID(bytes: bytes) else {
                throw ReplicaError(.corrupt, "the contact of conversation \(declaration.name) is malformed; the file is damaged")
            }
            return (declaration.name, contact)
        }.sorted { $0.name < $1.name }
    }

    /// The `local` namespace `name`, declared now if it is new.
    public func local(_ name: String) throws -> LocalNamespace {
        LocalNamespace(replica: self, declaration: try declare(name, .local))
    }
}
