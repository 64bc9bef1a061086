import SteleSQL

/// The replica file's schema, as numbered migrations (STYLE "SQLite").
///
/// The fixed tables live here; each namespace has a table of its own, made when
/// it is declared (``NamespaceKind/createTableSQL(_:)``). A future migration that
/// changes a kind's layout alters every table of that kind.
enum ReplicaSchema {
    /// `PRAGMA application_id` of every Stele store: "Stel".
    static let applicationID: Int64 = 0x5374_656C

    static let migrator = Migrator([
        Migration(version: 1, name: "replica, devices, namespaces and the five kinds' tables") { connection in
            try connection.executeScript(
                """
                CREATE TABLE replica (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    account BLOB NOT NULL CHECK (length(account) = 16),
                    device BLOB NOT NULL CHECK (length(device) = 32),
                    generation INTEGER NOT NULL DEFAULT 0 CHECK (generation >= 0),
                    own_counter INTEGER NOT NULL DEFAULT 0 CHECK (own_counter >= 0),
                    clock INTEGER NOT NULL DEFAULT 0 CHECK (clock >= 0),
                    created_ms INTEGER NOT NULL
                );
                -- Device ids are interned: vectors and writers on disk name a device by
                -- its small local index, which keeps a tombstone a few dozen bytes.
                CREATE TABLE devices (
                    idx INTEGER PRIMARY KEY,
                    id BLOB NOT NULL UNIQUE CHECK (length(id) = 32)
                );
                CREATE TABLE namespaces (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    kind TEXT NOT NULL CHECK (kind IN ('causal', 'lww', 'log', 'appendOnly', 'local'))
                );
                """)
        },
    ])
}
