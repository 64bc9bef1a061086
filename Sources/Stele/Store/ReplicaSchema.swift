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
        Migration(version: 2, name: "tombstone sequence numbers and the barrier's memory") { connection in
            // Every tombstone (a causal or lww delete, a log marker) carries the
            // replica-wide sequence number it was written under; an ack records the
            // number reached, and a commit drops only tombstones at or below it
            // (DESIGN §6: a commit drops only what the ack vouched for).
            let tables = try connection.query("SELECT id, kind FROM namespaces WHERE kind IN ('causal', 'lww', 'log')") { row in
                (row.int64(0), row.text(1))
            }
            for (id, kind) in tables {
                guard let kind = NamespaceKind(rawValue: kind), let tombstones = Replica.tombstoneFilter(kind) else { continue }
                let table = kind.tableName(id: id)
                // Tombstones already held predate every ack: number them 0.
                try connection.executeScript("ALTER TABLE \(table) ADD COLUMN seq INTEGER; UPDATE \(table) SET seq = 0 WHERE \(tombstones)")
            }
            try connection.executeScript(
                """
                ALTER TABLE replica ADD COLUMN tombstone_seq INTEGER NOT NULL DEFAULT 0 CHECK (tombstone_seq >= 0);
                -- The last barrier round this device acked (001 §4-5), and the last collection.
                CREATE TABLE barrier (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    acked_round BLOB CHECK (acked_round IS NULL OR length(acked_round) = 16),
                    acked_digest BLOB CHECK (acked_digest IS NULL OR length(acked_digest) = 32),
                    acked_generation INTEGER CHECK (acked_generation IS NULL OR acked_generation > 0),
                    watermark INTEGER NOT NULL DEFAULT 0 CHECK (watermark >= 0),
                    collected_ms INTEGER,
                    collected_count INTEGER NOT NULL DEFAULT 0,
                    -- Every tombstone at or below this sequence number has been collected.
                    collected_through INTEGER NOT NULL DEFAULT 0 CHECK (collected_through >= 0),
                    -- What the fleet had seen at the rounds this device collected or recovered from.
                    knowledge BLOB
                );
                INSERT INTO barrier (id) VALUES (1);
                """)
        },
        Migration(version: 3, name: "the messages kind and conversations") { connection in
            // SQLite cannot alter a CHECK: the namespaces table is rebuilt with the
            // new kind allowed, ids kept (they name the tables). A conversation is a
            // messages namespace bound to the contact (another account) it is with.
            try connection.executeScript(
                """
                CREATE TABLE namespaces_new (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    kind TEXT NOT NULL CHECK (kind IN ('causal', 'lww', 'log', 'appendOnly', 'messages', 'local'))
                );
                INSERT INTO namespaces_new (id, name, kind) SELECT id, name, kind FROM namespaces;
                DROP TABLE namespaces;
                ALTER TABLE namespaces_new RENAME TO namespaces;
                CREATE TABLE conversations (
                    namespace INTEGER PRIMARY KEY REFERENCES namespaces (id),
                    contact BLOB NOT NULL CHECK (length(contact) = 16)
                );
                """)
        },
        Migration(version: 4, name: "what each causal version had seen") { connection in
            // A version's causal context, kept where it is less than the row's
            // vector, so a device holding a delete can tell an edit that saw it from
            // one that did not in every arrival order (``CausalVersion/context``).
            // Rows stored before know only their vector: NULL, the vector.
            let tables = try connection.query("SELECT id FROM namespaces WHERE kind = 'causal'") { $0.int64(0) }
            for id in tables {
                try connection.executeScript("ALTER TABLE \(NamespaceKind.causal.tableName(id: id)) ADD COLUMN contexts BLOB")
            }
        },
        Migration(version: 5, name: "the messages that owe a delivery, indexed, with what they owe") { connection in
            // The outbox read and folded every message of a conversation at each attempt
            // (after every change on the device): now only those that owe a delivery
            // (``NamespaceKind/owingIndexSQL(_:)``), and only the ops each owes (`owed`,
            // kept as rows are written; NULL, folded at the read, for rows written before).
            let tables = try connection.query("SELECT id FROM namespaces WHERE kind = 'messages'") { $0.int64(0) }
            for id in tables {
                let table = NamespaceKind.messages.tableName(id: id)
                try connection.executeScript("ALTER TABLE \(table) ADD COLUMN owed BLOB; " + NamespaceKind.owingIndexSQL(table))
            }
        },
    ])
}
