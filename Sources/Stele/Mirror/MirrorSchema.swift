import SteleSQL

/// The mirror client's store (DESIGN §8.2, seed 003): canonical tables that only
/// the pull applier writes, the mutation queue of local intent, the rollups the
/// app declared, and the conflict events.
enum MirrorSchema {
    static let migrator = Migrator([
        Migration(version: 1, name: "canonical records and members, the mutation queue, rollups, conflicts") { connection in
            try connection.executeScript(
                """
                CREATE TABLE mirror_meta (
                    name TEXT PRIMARY KEY,
                    value
                ) WITHOUT ROWID;

                -- Server truth, written only by the pull applier. A tombstone keeps its
                -- row (payload NULL) with its time, so a stale copy cannot bring it back (004).
                CREATE TABLE mirror_records (
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    payload BLOB,
                    modified_at INTEGER NOT NULL,
                    grp TEXT,
                    seq INTEGER NOT NULL,
                    PRIMARY KEY (kind, id)
                ) WITHOUT ROWID;
                CREATE INDEX mirror_records_group ON mirror_records (kind, grp) WHERE grp IS NOT NULL;

                CREATE TABLE mirror_members (
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    set_name TEXT NOT NULL,
                    member TEXT NOT NULL,
                    PRIMARY KEY (kind, id, set_name, member)
                ) WITHOUT ROWID;

                -- Local intent (003 "The design"): one live row per record for a payload op
                -- (set_name and member empty) and per (record, set, member) for a set delta.
                -- Every legal value is a CHECK, so an INSERT or an UPDATE that writes an
                -- illegal one fails (003 "Crash safety": the guard must cover updates too).
                CREATE TABLE mirror_queue (
                    qid INTEGER PRIMARY KEY,
                    mutation TEXT NOT NULL UNIQUE CHECK (length(mutation) BETWEEN 1 AND 200),
                    kind TEXT NOT NULL CHECK (length(kind) BETWEEN 1 AND 1024),
                    id TEXT NOT NULL CHECK (length(id) BETWEEN 1 AND 1024),
                    op TEXT NOT NULL CHECK (op IN ('put', 'delete', 'add', 'remove')),
                    set_name TEXT NOT NULL DEFAULT '',
                    member TEXT NOT NULL DEFAULT '',
                    payload BLOB,
                    grp TEXT,
                    modified_at INTEGER NOT NULL,
                    state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'in_flight', 'failed')),
                    attempts INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
                    -- How many times a flusher claimed it: a row claimed once may have reached the hub.
                    claims INTEGER NOT NULL DEFAULT 0 CHECK (claims >= 0),
                    claim_owner TEXT,
                    claim_until INTEGER,
                    next_attempt_at INTEGER NOT NULL DEFAULT 0,
                    -- The retirement gate (003 "Retirement: on echo"), recorded when the hub answered.
                    expected_history_id INTEGER CHECK (expected_history_id IS NULL OR expected_history_id >= 0),
                    -- The epoch of the hub's history the gate belongs to: in another, it means nothing.
                    expected_epoch TEXT,
                    outcome TEXT CHECK (outcome IS NULL OR outcome IN ('applied', 'stale', 'not_found', 'refused')),
                    ordinal INTEGER NOT NULL,
                    last_error TEXT,
                    CHECK ((op = 'put') = (payload IS NOT NULL)),
                    CHECK ((op IN ('add', 'remove')) = (set_name <> '' AND member <> '')),
                    CHECK ((state = 'in_flight') = (expected_history_id IS NOT NULL)),
                    CHECK ((claim_owner IS NULL) = (claim_until IS NULL)),
                    UNIQUE (kind, id, set_name, member)
                );
                CREATE INDEX mirror_queue_order ON mirror_queue (state, ordinal);

                CREATE TABLE mirror_rollup_rules (
                    kind TEXT NOT NULL,
                    set_name TEXT NOT NULL CHECK (set_name <> ''),
                    member TEXT NOT NULL CHECK (member <> ''),
                    PRIMARY KEY (kind, set_name, member)
                ) WITHOUT ROWID;

                -- 003's thread_rollup: one row per group of a kind with a live record, per rule;
                -- present = some effective record of the group carries the member.
                CREATE TABLE mirror_rollups (
                    kind TEXT NOT NULL,
                    grp TEXT NOT NULL,
                    set_name TEXT NOT NULL,
                    member TEXT NOT NULL,
                    present INTEGER NOT NULL CHECK (present IN (0, 1)),
                    latest INTEGER NOT NULL,
                    PRIMARY KEY (kind, set_name, member, grp)
                ) WITHOUT ROWID;
                CREATE INDEX mirror_rollups_listing ON mirror_rollups (kind, set_name, member, present, latest DESC, grp);

                CREATE TABLE mirror_conflicts (
                    number INTEGER PRIMARY KEY,
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    mutation TEXT NOT NULL,
                    op TEXT NOT NULL,
                    set_name TEXT NOT NULL,
                    member TEXT NOT NULL,
                    losing_payload BLOB,
                    losing_modified_at INTEGER NOT NULL,
                    reason TEXT NOT NULL,
                    at INTEGER NOT NULL
                );
                """)
        },
        Migration(version: 2, name: "rollups keyed by a rule number, so the inbox listing's index is as narrow as a plain table's") { connection in
            // The listing (`groups(kind:set:member:limit:)`) walks the index entries of
            // one rule; with kind, set and member repeated in every entry it read 1.3
            // times slower than the same listing on a plain table (`mirror.inbox`).
            try connection.executeScript(
                """
                CREATE TABLE mirror_rollup_rules_2 (
                    rule INTEGER PRIMARY KEY,
                    kind TEXT NOT NULL,
                    set_name TEXT NOT NULL CHECK (set_name <> ''),
                    member TEXT NOT NULL CHECK (member <> ''),
                    UNIQUE (kind, set_name, member)
                );
                INSERT INTO mirror_rollup_rules_2 (kind, set_name, member) SELECT kind, set_name, member FROM mirror_rollup_rules ORDER BY kind, set_name, member;

                -- One row per group of the rule's kind with a live record; present = some
                -- effective record of the group carries the rule's member in its set.
                CREATE TABLE mirror_rollups_2 (
                    rule INTEGER NOT NULL,
                    grp TEXT NOT NULL,
                    present INTEGER NOT NULL CHECK (present IN (0, 1)),
                    latest INTEGER NOT NULL,
                    PRIMARY KEY (rule, grp)
                ) WITHOUT ROWID;
                INSERT INTO mirror_rollups_2 (rule, grp, present, latest)
                    SELECT r.rule, o.grp, o.present, o.latest FROM mirror_rollups o
                    JOIN mirror_rollup_rules_2 r ON r.kind = o.kind AND r.set_name = o.set_name AND r.member = o.member;

                DROP TABLE mirror_rollups;
                DROP TABLE mirror_rollup_rules;
                ALTER TABLE mirror_rollup_rules_2 RENAME TO mirror_rollup_rules;
                ALTER TABLE mirror_rollups_2 RENAME TO mirror_rollups;
                CREATE INDEX mirror_rollups_listing ON mirror_rollups (rule, present, latest DESC, grp);
                """)
        },
        Migration(version: 3, name: "the put a delete overlaid forward, kept for an append-only kind's refusal") { connection in
            // A delete that overlays a put that may have reached the hub (003 "overlay forward")
            // keeps that put here. If the hub refuses the delete (`append_only`: a tombstone
            // never beats a live copy, 002), the put is what the user keeps, and the row
            // turns back into it: the hub may have lost it (a restore), and nothing else
            // holds it. A migration cannot add a CHECK to a table, so triggers guard both
            // INSERT and UPDATE (003 "Crash safety": the guard must cover updates too).
            try connection.executeScript(
                """
                ALTER TABLE mirror_queue ADD COLUMN overlaid_payload BLOB;
                ALTER TABLE mirror_queue ADD COLUMN overlaid_modified_at INTEGER;
                ALTER TABLE mirror_queue ADD COLUMN overlaid_group TEXT;
                CREATE TRIGGER mirror_queue_overlaid_insert BEFORE INSERT ON mirror_queue
                WHEN (NEW.overlaid_payload IS NOT NULL AND NEW.op <> 'delete') OR ((NEW.overlaid_payload IS NULL) <> (NEW.overlaid_modified_at IS NULL))
                BEGIN SELECT RAISE(ABORT, 'mirror_queue: only a delete keeps an overlaid put, with its payload and time'); END;
                CREATE TRIGGER mirror_queue_overlaid_update BEFORE UPDATE ON mirror_queue
                WHEN (NEW.overlaid_payload IS NOT NULL AND NEW.op <> 'delete') OR ((NEW.overlaid_payload IS NULL) <> (NEW.overlaid_modified_at IS NULL))
                BEGIN SELECT RAISE(ABORT, 'mirror_queue: only a delete keeps an overlaid put, with its payload and time'); END;
                """)
        },
    ])
}
