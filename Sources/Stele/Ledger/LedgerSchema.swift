import SteleSQL

/// The ledger's file (DESIGN §8.3, seed 002): a stamp per synced entity, the
/// pushes not yet answered, the cursor and the store's identity, kept apart
/// from the app's own store.
enum LedgerSchema {
    static let migrator = Migrator([
        Migration(version: 1, name: "stamps, outbox, apply journal, refetches, conflicts") { connection in
            try connection.executeScript(
                """
                CREATE TABLE ledger_meta (
                    name TEXT PRIMARY KEY,
                    value
                ) WITHOUT ROWID;

                -- A stamp per entity the ledger has seen (002 "Ledgers"): the fingerprint
                -- of its encoded payload (NULL: a tombstone, kept with its deletion time so
                -- that an older copy cannot bring it back), the modification date, the
                -- hub's seq of that version (0 while the hub has not answered for it),
                -- `unsent` when the hub is known to lack this version (a rewound hub), and
                -- `seen` marking what a running replay has mentioned.
                CREATE TABLE ledger_stamps (
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    fingerprint BLOB CHECK (fingerprint IS NULL OR length(fingerprint) = 32),
                    modified_at INTEGER NOT NULL,
                    seq INTEGER NOT NULL DEFAULT 0 CHECK (seq >= 0),
                    unsent INTEGER NOT NULL DEFAULT 0 CHECK (unsent IN (0, 1)),
                    seen INTEGER NOT NULL DEFAULT 0 CHECK (seen IN (0, 1)),
                    PRIMARY KEY (kind, id)
                ) WITHOUT ROWID;

                -- What the passes found and the hub has not answered yet: one row per
                -- entity, its latest version. A changed version gets a new mutation id;
                -- a retry keeps it, so the hub applies a resent push once.
                CREATE TABLE ledger_outbox (
                    qid INTEGER PRIMARY KEY,
                    mutation TEXT NOT NULL UNIQUE CHECK (length(mutation) BETWEEN 1 AND 200),
                    kind TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 1024),
                    id TEXT NOT NULL CHECK (length(id) BETWEEN 1 AND 1024),
                    op TEXT NOT NULL CHECK (op IN ('put', 'delete')),
                    payload BLOB,
                    modified_at INTEGER NOT NULL,
                    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'failed')),
                    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                    next_attempt_at INTEGER NOT NULL DEFAULT 0,
                    ordinal INTEGER NOT NULL,
                    last_error TEXT,
                    CHECK ((op = 'put') = (payload IS NOT NULL)),
                    UNIQUE (kind, id)
                );
                CREATE INDEX ledger_outbox_order ON ledger_outbox (state, ordinal);

                -- Remote versions being written into the app's store: written before the
                -- store's transaction, cleared with the stamps after it, so a crash between
                -- the two is told apart from a local edit at the next pass.
                CREATE TABLE ledger_applying (
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    fingerprint BLOB,
                    modified_at INTEGER NOT NULL,
                    seq INTEGER NOT NULL,
                    PRIMARY KEY (kind, id)
                ) WITHOUT ROWID;

                -- Records whose hub version must be fetched again (a push the hub answered
                -- stale or refused: the hub's copy is what stands).
                CREATE TABLE ledger_refetch (
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    PRIMARY KEY (kind, id)
                ) WITHOUT ROWID;

                CREATE TABLE ledger_conflicts (
                    number INTEGER PRIMARY KEY,
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    op TEXT NOT NULL,
                    losing_modified_at INTEGER NOT NULL,
                    reason TEXT NOT NULL,
                    at INTEGER NOT NULL
                );
                """)
        }
    ])
}
