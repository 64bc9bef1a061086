/// The hub's tables, as numbered migrations shared by both backends
/// (``HubMigration``). Ids are lowercase hex text; times are milliseconds
/// since 1970; `{blob}` is the backend's byte type.
public enum HubSchema {
    public static let migrations: [HubMigration] = [
        HubMigration(version: 1, name: "accounts, devices, sessions, relay, anchors", [
            "CREATE TABLE hub_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
            // An invite is stored as the SHA-256 of its code, spent once.
            "CREATE TABLE invites (code_hash TEXT PRIMARY KEY, created_ms BIGINT NOT NULL, spent_ms BIGINT)",
            "CREATE TABLE accounts (id TEXT PRIMARY KEY, created_ms BIGINT NOT NULL, roster_version BIGINT NOT NULL)",
            // The signed roster log, one row per change, in order from 0.
            "CREATE TABLE roster_changes (account TEXT NOT NULL REFERENCES accounts(id), idx BIGINT NOT NULL, change {blob} NOT NULL, PRIMARY KEY (account, idx))",
            // Every device the roster ever named, with its mailbox counters.
            """
            CREATE TABLE devices (
                account TEXT NOT NULL REFERENCES accounts(id), device TEXT NOT NULL,
                signing_key {blob} NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('member', 'revoked')),
                mailbox_next BIGINT NOT NULL DEFAULT 0, mailbox_bytes BIGINT NOT NULL DEFAULT 0,
                last_seen_ms BIGINT, relay_cursor BIGINT NOT NULL DEFAULT 0,
                PRIMARY KEY (account, device))
            """,
            // A bearer token is stored as its SHA-256, never in the clear.
            "CREATE TABLE sessions (token_hash TEXT PRIMARY KEY, account TEXT NOT NULL, device TEXT NOT NULL, expires_ms BIGINT NOT NULL)",
            "CREATE INDEX sessions_by_device ON sessions (account, device)",
            "CREATE TABLE join_requests (account TEXT NOT NULL REFERENCES accounts(id), device TEXT NOT NULL, public_keys {blob} NOT NULL, name TEXT NOT NULL, created_ms BIGINT NOT NULL, PRIMARY KEY (account, device))",
            "CREATE TABLE wrapped_keys (account TEXT NOT NULL REFERENCES accounts(id), device TEXT NOT NULL, epoch BIGINT NOT NULL, sealed {blob} NOT NULL, PRIMARY KEY (account, device, epoch))",
            "CREATE TABLE mailbox (account TEXT NOT NULL, device TEXT NOT NULL, seq BIGINT NOT NULL, frame {blob} NOT NULL, created_ms BIGINT NOT NULL, PRIMARY KEY (account, device, seq))",
            "CREATE TABLE anchors (account TEXT PRIMARY KEY REFERENCES accounts(id), generation BIGINT NOT NULL, body {blob} NOT NULL, updated_ms BIGINT NOT NULL)",
        ]),
        // A device's name (the join request's, or the founder's at creation) outlives its
        // request; the housekeeping sweep (HubService.sweep) finds expired sessions and
        // aged join requests by index instead of scanning.
        HubMigration(version: 2, name: "device names, housekeeping indexes", [
            "ALTER TABLE devices ADD COLUMN name TEXT",
            "CREATE INDEX sessions_by_expiry ON sessions (expires_ms)",
            "CREATE INDEX join_requests_by_age ON join_requests (created_ms)",
        ]),
        // Server-authoritative records (DESIGN §8.1, HUB-API "Records"). Each change takes
        // the account's next history position from `accounts.history`, under the account's
        // row lock, so positions are handed out in commit order and a pager never skips one.
        HubMigration(version: 3, name: "records, member sets, kinds, mutation ids", [
            "ALTER TABLE accounts ADD COLUMN history BIGINT NOT NULL DEFAULT 0",
            """
            CREATE TABLE records (
                account TEXT NOT NULL REFERENCES accounts(id), kind TEXT NOT NULL, id TEXT NOT NULL,
                payload {blob}, modified_ms BIGINT NOT NULL, grp TEXT, seq BIGINT NOT NULL,
                PRIMARY KEY (account, kind, id))
            """,
            "CREATE INDEX records_by_seq ON records (account, seq)",
            """
            CREATE TABLE record_members (
                account TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, set_name TEXT NOT NULL, member TEXT NOT NULL,
                PRIMARY KEY (account, kind, id, set_name, member))
            """,
            "CREATE TABLE record_kinds (account TEXT NOT NULL REFERENCES accounts(id), kind TEXT NOT NULL, append_only BIGINT NOT NULL, PRIMARY KEY (account, kind))",
            // A mutation id seen before is answered as the first time (`result` is that answer's JSON).
            "CREATE TABLE mutations (account TEXT NOT NULL, mutation TEXT NOT NULL, result TEXT NOT NULL, created_ms BIGINT NOT NULL, PRIMARY KEY (account, mutation))",
            "CREATE INDEX mutations_by_age ON mutations (created_ms)",
        ]),
        // The lineage of the history's epochs. An operator who restores the hub's
        // database from a backup gives its history a new epoch (`stele-hub restored`),
        // noting the epoch the backup was of and each account's history id in it: a
        // client of an older epoch is told how much of what it saw the hub still has
        // (`commonHistoryId` of a `409 history_rewound`), so it pushes again exactly
        // what lies past it.
        HubMigration(version: 4, name: "history epochs and where each forked", [
            "CREATE TABLE history_epochs (epoch TEXT PRIMARY KEY, parent TEXT NOT NULL, created_ms BIGINT NOT NULL)",
            "CREATE TABLE history_forks (epoch TEXT NOT NULL, account TEXT NOT NULL, history BIGINT NOT NULL, PRIMARY KEY (epoch, account))",
        ]),
        // Tombstone compaction (HubService+Compaction): each device's records cursor (the
        // history id it last asked the change feed after, and when), the account's horizon
        // (tombstones at or below it are collected) and how many were; a partial index
        // finds an account's tombstones in history order. A device already known holds
        // the horizon at 0 until it pulls; one that joins later starts at the history id
        // of its join.
        HubMigration(version: 5, name: "records cursors, tombstone horizon, device clocks", [
            "ALTER TABLE devices ADD COLUMN records_cursor BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE devices ADD COLUMN records_pulled_ms BIGINT",
            "ALTER TABLE accounts ADD COLUMN horizon BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE accounts ADD COLUMN collected BIGINT NOT NULL DEFAULT 0",
            "CREATE INDEX records_tombstones ON records (account, seq) WHERE payload IS NULL",
            // How far each device's clock was from the hub's when it last said (`Stele-Client-Time`).
            "ALTER TABLE devices ADD COLUMN clock_offset_ms BIGINT",
            "ALTER TABLE devices ADD COLUMN clock_seen_ms BIGINT",
            // Since when every push of the device was refused, and why (status: a client that cannot make progress).
            "ALTER TABLE devices ADD COLUMN push_refused_ms BIGINT",
            "ALTER TABLE devices ADD COLUMN push_refusal TEXT",
        ]),
    ]

    /// The newest schema version this build knows.
    public static var latestVersion: Int { migrations.count }

    /// The table holding the schema version, created by each storage before the first migration.
    public static let versionTable = "CREATE TABLE IF NOT EXISTS hub_schema (version BIGINT NOT NULL)"
}
