/// The one place where canonical truth and local intent are composed (003
/// "Reads compose the overlay": "one rule to get right, not four"). Every
/// effective read of ``MirrorStore`` (single records, sets, groups, rollups,
/// listings) is built from these fragments and from nothing else.
///
/// Each fragment is an SQL expression over a record named by two SQL
/// expressions, its kind and its id (column references or parameters). Every
/// queue row counts whatever its state: a pending, in-flight or failed
/// mutation is intent the hub has not echoed yet, and a failed delete must
/// keep its record hidden (004, #1366).
enum MirrorOverlay {
    /// The queued payload op of a record, as a subquery column.
    private static func queued(_ column: String, kind: String, id: String) -> String {
        "(SELECT q.\(column) FROM mirror_queue q WHERE q.kind = \(kind) AND q.id = \(id) AND q.set_name = '' AND q.member = '')"
    }

    /// The canonical column of a record, as a subquery.
    private static func canonical(_ column: String, kind: String, id: String) -> String {
        "(SELECT r.\(column) FROM mirror_records r WHERE r.kind = \(kind) AND r.id = \(id))"
    }

    /// The effective payload: a queued put's payload, nothing under a queued
    /// delete, else the canonical payload (NULL for a tombstone or an unknown record).
    static func payload(kind: String, id: String) -> String {
        """
        (CASE \(queued("op", kind: kind, id: id)) WHEN 'put' THEN \(queued("payload", kind: kind, id: id)) WHEN 'delete' THEN NULL
         ELSE \(canonical("payload", kind: kind, id: id)) END)
        """
    }

    /// 1 when the record is effectively alive.
    static func alive(kind: String, id: String) -> String {
        """
        (CASE \(queued("op", kind: kind, id: id)) WHEN 'put' THEN 1 WHEN 'delete' THEN 0
         ELSE coalesce(\(canonical("payload IS NOT NULL", kind: kind, id: id)), 0) END)
        """
    }

    /// The effective modification time (the queued op's, else the canonical one; NULL when unknown).
    static func modifiedAt(kind: String, id: String) -> String {
        "coalesce(\(queued("modified_at", kind: kind, id: id)), \(canonical("modified_at", kind: kind, id: id)))"
    }

    /// The effective group: a queued put that names one moves the record there.
    static func group(kind: String, id: String) -> String {
        "coalesce(\(queued("grp", kind: kind, id: id)), \(canonical("grp", kind: kind, id: id)))"
    }

    /// 1 when the record's effective set `set` holds `member`: a queued add or
    /// remove decides, else the canonical membership; a record that is not
    /// effectively alive holds nothing.
    static func holds(kind: String, id: String, set: String, member: String) -> String {
        """
        (\(alive(kind: kind, id: id)) AND (CASE (SELECT q.op FROM mirror_queue q WHERE q.kind = \(kind) AND q.id = \(id) AND q.set_name = \(set) AND q.member = \(member))
         WHEN 'add' THEN 1 WHEN 'remove' THEN 0
         ELSE EXISTS (SELECT 1 FROM mirror_members m WHERE m.kind = \(kind) AND m.id = \(id) AND m.set_name = \(set) AND m.member = \(member)) END))
        """
    }

    /// The effective members of set `set` of a record, as a SELECT of one column `member`.
    static func members(kind: String, id: String, set: String) -> String {
        """
        SELECT member FROM (
            SELECT m.member FROM mirror_members m WHERE m.kind = \(kind) AND m.id = \(id) AND m.set_name = \(set)
            UNION SELECT q.member FROM mirror_queue q WHERE q.kind = \(kind) AND q.id = \(id) AND q.set_name = \(set) AND q.op = 'add'
        ) AS c WHERE \(holds(kind: kind, id: id, set: set, member: "c.member"))
        """
    }

    /// The ids of records of `kind` that may be in group `group` (canonically, or by a
    /// queued put), as a SELECT of one column `id`; filter with ``group(kind:id:)``.
    static func groupCandidates(kind: String, group: String) -> String {
        """
        SELECT id FROM mirror_records WHERE kind = \(kind) AND grp = \(group)
        UNION SELECT id FROM mirror_queue WHERE kind = \(kind) AND grp = \(group) AND set_name = '' AND member = ''
        """
    }

    /// 1 when some effective record of group `group` holds `member` in `set`: the
    /// records of ``groupRecords(kind:group:)`` (a candidate in the group by its
    /// effective group; ``holds(kind:id:set:member:)`` already asks that it be
    /// alive), asked of each source of candidates in turn, so the answer comes at
    /// the first holder without the candidates being collected first.
    static func groupHolds(kind: String, group: String, set: String, member: String) -> String {
        """
        (EXISTS (SELECT 1 FROM mirror_records c WHERE c.kind = \(kind) AND c.grp = \(group)
                 AND \(Self.group(kind: kind, id: "c.id")) = \(group) AND \(holds(kind: kind, id: "c.id", set: set, member: member)))
         OR EXISTS (SELECT 1 FROM mirror_queue c WHERE c.kind = \(kind) AND c.grp = \(group) AND c.set_name = '' AND c.member = ''
                 AND \(Self.group(kind: kind, id: "c.id")) = \(group) AND \(holds(kind: kind, id: "c.id", set: set, member: member))))
        """
    }

    /// The effective records of group `group`: a SELECT of `id`, `modified_at`, alive only.
    static func groupRecords(kind: String, group: String) -> String {
        """
        SELECT c.id AS id, \(modifiedAt(kind: kind, id: "c.id")) AS modified_at FROM (\(groupCandidates(kind: kind, group: group))) AS c
        WHERE \(alive(kind: kind, id: "c.id")) AND \(Self.group(kind: kind, id: "c.id")) = \(group)
        """
    }
}
