/// Each namespace keeps its rows in a table of its own, named after its kind and
/// local id (`causal_3`), keyed by the key alone: SQLite compares a leading text
/// key with its fast path, the B-tree holds one namespace, so scans and sizes
/// need no filtering, and rows sit in key order, the order of the digest's key
/// ranges (``RangeIndex``), so reconcile reads a range as one contiguous scan.
/// A `log` table is keyed by the event id. A `messages` namespace has two tables:
/// the folded rows (`messages_4`, keyed by message id, what reads and the digest
/// see) and the immutable ops they fold from (`messages_4_ops`, keyed by message
/// id then op id, so one message's ops are one contiguous scan).
///
/// Live rows keep their 16-byte digest leaf (`leaf`), so removing a row from the
/// digest never rehashes it and the digest is rebuilt at open from one column;
/// tombstones keep none (they stay a few dozen bytes).
///
/// A tombstone (a `causal` or `lww` delete, a `log` marker, a deleted message) carries in `seq` the
/// replica-wide sequence number it was written under, which is what a barrier
/// ack vouches for (``Replica/recordAck(round:digest:generation:)``); live rows
/// have none.
///
/// Every table is `WITHOUT ROWID`, so a row, and a retained tombstone, cost one
/// B-tree cell. The CHECK constraints that keep reads honest are in the schema,
/// so a damaged or hand-edited file fails loudly.
extension NamespaceKind {
    private var tablePrefix: String {
        switch self {
        case .causal: "causal"
        case .lww: "lww"
        case .log: "log"
        case .appendOnly: "append_only"
        case .messages: "messages"
        case .local: "local"
        }
    }

    func tableName(id: Int64) -> String { "\(tablePrefix)_\(id)" }

    /// The column a namespace's rows are keyed by: a `log` event's id (a blob), otherwise the key (text).
    var keyColumn: String { self == .log ? "id" : "key" }

    /// Whether tombstones are digest leaves (a `log` marker, a deleted message)
    /// rather than a set of their own, so dropping one takes its leaf out too.
    var tombstonesAreLeaves: Bool { self == .log || self == .messages }

    /// The DDL for a namespace's table (and its indexes) in the current layout.
    /// The messages that owe a delivery, in the outbox's order: the outbox reads
    /// them after every change, so they are found without reading every message.
    static func owingIndexSQL(_ table: String) -> String {
        "CREATE INDEX IF NOT EXISTS \(table)_owing ON \(table) (posted, key) WHERE duty = 1;"
    }

    func createTableSQL(_ table: String) -> String {
        switch self {
        case .causal:
            // The row and its RowVersion bookkeeping in one cell (000 §4).
            // value/ts/writer/dot are the version reads show; concurrent versions
            // that also survive sit in siblings (rare). `contexts`: what each version
            // had seen, for the versions a merge carried past it (rare; NULL when
            // every version saw exactly the row's vector). A tombstone keeps key and
            // vector only: everything else is NULL. Only the two checks
            // that keep reads honest run on every write: each CHECK costs a few
            // percent of `local.delete`, and the decoder rejects the rest (a live
            // row without its dot or leaf fails as corrupt).
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                vv BLOB NOT NULL,
                value BLOB,
                ts INTEGER,
                writer INTEGER,
                dot INTEGER,
                siblings BLOB,
                leaf BLOB,
                tombstoned INTEGER NOT NULL CHECK (tombstoned IN (0, 1)),
                seq INTEGER,
                contexts BLOB,
                CHECK ((tombstoned = 1) = (value IS NULL))
            ) WITHOUT ROWID;
            """
        case .lww:
            // A deleted row keeps its timestamp and writer: the merge needs them (000 §5).
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                value BLOB,
                ts INTEGER NOT NULL CHECK (ts >= 0),
                writer INTEGER NOT NULL,
                leaf BLOB,
                deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
                seq INTEGER,
                CHECK ((deleted = 1) = (value IS NULL))
            ) WITHOUT ROWID;
            """
        case .log:
            // Events and tombstone markers (000 §2); buried events are purged.
            """
            CREATE TABLE \(table) (
                id BLOB NOT NULL PRIMARY KEY CHECK (length(id) = 16),
                grp TEXT NOT NULL,
                marker INTEGER NOT NULL CHECK (marker IN (0, 1)),
                body BLOB NOT NULL,
                ts INTEGER NOT NULL CHECK (ts >= 0),
                writer INTEGER NOT NULL,
                leaf BLOB NOT NULL,
                seq INTEGER,
                CHECK (marker = 0 OR length(body) = 0)
            ) WITHOUT ROWID;
            CREATE INDEX \(table)_by_group ON \(table) (grp, marker);
            """
        case .appendOnly:
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                value BLOB NOT NULL,
                ts INTEGER NOT NULL CHECK (ts >= 0),
                writer INTEGER NOT NULL,
                leaf BLOB NOT NULL
            ) WITHOUT ROWID;
            """
        case .messages:
            // The folded row (000 §6): identity, scope and the digest leaf of its
            // canonical bytes (reads fold the ops, a handful per message); a deleted
            // row (scope 1 or 2) is the namespace's tombstone. Ops: `action` its ``MessageOp/Action/Code``
            // (0 post through 5 receipt); `actor` the author or reactor, `content`
            // the body (emptied by a delete), the emoji or the receipted op's id,
            // `scope` a delete's; `account` the writer's account, NULL for this
            // replica's own. `duty`: the row's ops owe a delivery (``MessageFold/duty(of:for:)``);
            // `owed`: the ids of those ops (16 bytes each, in id order), NULL when none
            // are owed or the row was written before format 5.
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                author TEXT NOT NULL,
                posted INTEGER NOT NULL,
                scope INTEGER NOT NULL CHECK (scope IN (0, 1, 2)),
                leaf BLOB NOT NULL,
                seq INTEGER,
                duty INTEGER NOT NULL DEFAULT 0 CHECK (duty IN (0, 1)),
                owed BLOB,
                CHECK ((scope = 0) = (seq IS NULL))
            ) WITHOUT ROWID;
            CREATE TABLE \(table)_ops (
                message TEXT NOT NULL,
                id BLOB NOT NULL CHECK (length(id) = 16),
                time INTEGER NOT NULL CHECK (time >= 0),
                writer INTEGER NOT NULL,
                account BLOB CHECK (account IS NULL OR length(account) = 16),
                action INTEGER NOT NULL CHECK (action BETWEEN \(MessageOp.Action.Code.post.rawValue) AND \(MessageOp.Action.Code.receipt.rawValue)),
                actor TEXT,
                content BLOB,
                scope INTEGER,
                PRIMARY KEY (message, id)
            ) WITHOUT ROWID;
            \(Self.owingIndexSQL(table))
            """
        case .local:
            """
            CREATE TABLE \(table) (
                key TEXT NOT NULL PRIMARY KEY,
                value BLOB NOT NULL
            ) WITHOUT ROWID;
            """
        }
    }
}
