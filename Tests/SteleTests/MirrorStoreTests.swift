import Foundation
import SteleSQL
import Testing
import TestSupport

@testable import Stele

/// The mirror store without a hub (seeds 003, 004): the schema's guards, the
/// overlay composed in every read, 003's collision table in every state, undo,
/// rollups and group triage, and the sans-I/O machine fed answers by hand.
@Suite struct MirrorStoreTests {
    /// A store on a fresh file with a clock the test moves.
    final class Rig {
        let directory: TemporaryDirectory
        let clock = ManualWallClock(milliseconds: 1_800_000_000_000)
        var store: MirrorStore
        var sync: MirrorSync

        init(owner: String = "first") throws {
            directory = try TemporaryDirectory()
            var configuration = MirrorStore.Configuration()
            configuration.clock = clock
            configuration.owner = owner
            store = try MirrorStore(path: directory.file("mirror.sqlite"), configuration: configuration)
            sync = MirrorSync(store: store)
        }

        /// A second instance on the same file, as another process would open it.
        func second(owner: String) throws -> MirrorStore {
            var configuration = MirrorStore.Configuration()
            configuration.clock = clock
            configuration.owner = owner
            return try MirrorStore(path: store.path, configuration: configuration)
        }

        /// Claims what is due and answers every mutation of the push with `status` (seq counting up from `seq`), history id `history`.
        @discardableResult
        func flush(answering status: String = "applied", seq: Int64 = 1, history: Int64? = nil, reason: String? = nil) throws -> (request: MirrorRequest?, step: MirrorStep?) {
            guard let request = try sync.nextPush(), case .push(let ids) = request.purpose else { return (nil, nil) }
            var results: [[String: Any]] = []
            for (offset, id) in ids.enumerated() {
                var result: [String: Any] = ["mutation": id, "status": status]
                if status == "applied" { result["seq"] = seq + Int64(offset) }
                if let reason { result["reason"] = reason }
                results.append(result)
            }
            let body = try JSONSerialization.data(withJSONObject: ["historyId": history ?? (seq + Int64(ids.count) - 1), "results": results])
            return (request, try sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: request))
        }

        /// Applies a page of changes as the hub would send it.
        @discardableResult
        func pull(_ records: [[String: Any]], next: Int64, epoch: String = "e1") throws -> MirrorStep {
            let request = try sync.nextPull()
            let body = try JSONSerialization.data(withJSONObject: ["changes": records, "next": next, "epoch": epoch, "more": false])
            return try sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: request)
        }

        /// A page of changes as the hub wrote it, byte for byte (a Swift dictionary holds two names
        /// that differ only in Unicode spelling as one key).
        @discardableResult
        func pull(raw body: String) throws -> MirrorStep {
            let request = try sync.nextPull()
            return try sync.handle(.answer(HubAnswer(status: 200, body: Array(body.utf8))), to: request)
        }

        func value(_ kind: String, _ id: String) throws -> String? {
            try store.value(kind: kind, id: id).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    static func record(_ id: String, _ value: String?, seq: Int64, at time: Int64 = 1, group: String? = nil, labels: [String] = [], kind: String = "mail") -> [String: Any] {
        [
            "kind": kind, "id": id, "payload": value.map { Data($0.utf8).base64EncodedString() as Any } ?? NSNull(), "modifiedAt": time,
            "group": group.map { $0 as Any } ?? NSNull(), "sets": ["labels": labels], "seq": seq,
        ]
    }

    // MARK: - The schema's guards (003 "Crash safety")

    @Test func theSchemaRefusesAnIllegalQueueRowOnInsertAndOnUpdate() throws {
        let rig = try Rig()
        try rig.store.put(kind: "note", id: "a", payload: Array("x".utf8))
        let connection = try Connection(path: rig.store.path)
        let illegalInserts = [
            "INSERT INTO mirror_queue (mutation, kind, id, op, payload, modified_at, ordinal) VALUES ('m1', 'note', 'b', 'archive', NULL, 1, 99)",
            "INSERT INTO mirror_queue (mutation, kind, id, op, payload, modified_at, state, ordinal) VALUES ('m2', 'note', 'c', 'put', x'00', 1, 'sent', 99)",
            "INSERT INTO mirror_queue (mutation, kind, id, op, modified_at, ordinal) VALUES ('m3', 'note', 'd', 'add', 1, 99)",
            "INSERT INTO mirror_queue (mutation, kind, id, op, payload, modified_at, attempts, ordinal) VALUES ('m4', 'note', 'e', 'put', x'00', 1, -1, 99)",
            "INSERT INTO mirror_queue (mutation, kind, id, op, modified_at, state, ordinal) VALUES ('m5', 'note', 'f', 'delete', 1, 'in_flight', 99)",
            // The triggers of schema version 3: only a delete keeps an overlaid put, with its time.
            "INSERT INTO mirror_queue (mutation, kind, id, op, payload, modified_at, ordinal, overlaid_payload, overlaid_modified_at) VALUES ('m6', 'note', 'g', 'put', x'00', 1, 99, x'01', 1)",
            "INSERT INTO mirror_queue (mutation, kind, id, op, modified_at, ordinal, overlaid_payload) VALUES ('m7', 'note', 'h', 'delete', 1, 99, x'01')",
        ]
        for sql in illegalInserts {
            #expect(throws: SQLiteError.self, "\(sql)") { try connection.execute(sql) }
        }
        let illegalUpdates = [
            "UPDATE mirror_queue SET state = 'done'",
            "UPDATE mirror_queue SET op = 'archive'",
            "UPDATE mirror_queue SET state = 'in_flight'",
            "UPDATE mirror_queue SET payload = NULL",
            "UPDATE mirror_queue SET attempts = -3",
            "UPDATE mirror_queue SET overlaid_payload = x'01', overlaid_modified_at = 1",
            "UPDATE mirror_queue SET overlaid_modified_at = 1",
        ]
        for sql in illegalUpdates {
            #expect(throws: SQLiteError.self, "\(sql)") { try connection.execute(sql) }
        }
        #expect(try rig.store.queue().map(\.state) == [.pending])
        #expect(try rig.value("note", "a") == "x")
        // The legal form passes the triggers.
        try connection.execute(
            "INSERT INTO mirror_queue (mutation, kind, id, op, modified_at, ordinal, overlaid_payload, overlaid_modified_at) VALUES ('m8', 'note', 'i', 'delete', 2, 99, x'01', 1)")
    }

    @Test func aFileOfAnotherProgramIsRefusedAndLeftAlone() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("other.sqlite")
        let other = try Connection(path: path)
        try other.execute("CREATE TABLE mine (x)")
        #expect(throws: MirrorError.self) { _ = try MirrorStore(path: path) }
        #expect(try other.scalarInt("SELECT count(*) FROM sqlite_master") == 1)
        let garbage = directory.file("garbage")
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: garbage))
        #expect(throws: MirrorError.self) { _ = try MirrorStore(path: garbage) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: garbage)) == Data(repeating: 0x41, count: 4096))
    }

    // MARK: - The overlay

    @Test func everyReadComposesCanonicalTruthAndLocalIntent() throws {
        let rig = try Rig()
        try rig.pull([Self.record("m1", "hello", seq: 1, group: "t1", labels: ["INBOX", "UNREAD"]), Self.record("m2", "gone", seq: 2)], next: 2)
        #expect(try rig.value("mail", "m1") == "hello")
        #expect(try rig.store.members(kind: "mail", id: "m1", set: "labels") == ["INBOX", "UNREAD"])
        try rig.store.remove(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        try rig.store.add(kind: "mail", id: "m1", set: "labels", member: "STARRED")
        try rig.store.put(kind: "mail", id: "m1", payload: Array("edited".utf8))
        try rig.store.delete(kind: "mail", id: "m2")
        #expect(try rig.value("mail", "m1") == "edited")
        #expect(try rig.store.members(kind: "mail", id: "m1", set: "labels") == ["STARRED", "UNREAD"])
        #expect(try rig.store.holds(kind: "mail", id: "m1", set: "labels", member: "INBOX") == false)
        #expect(try rig.value("mail", "m2") == nil)
        #expect(try rig.store.records(kind: "mail").map(\.id) == ["m1"])
        #expect(try rig.store.group(kind: "mail", id: "m1") == "t1")
        // The canonical tables were not touched by any of it.
        let canonical = try Connection(path: rig.store.path)
        #expect(try canonical.scalarInt("SELECT count(*) FROM mirror_members WHERE member = 'INBOX'") == 1)
        #expect(try canonical.scalarText("SELECT CAST(payload AS TEXT) FROM mirror_records WHERE id = 'm1'") == "hello")
        #expect(try canonical.scalarInt("SELECT payload IS NULL FROM mirror_records WHERE id = 'm2'") == 0)
    }

    // MARK: - 003's collision table, every row

    /// A name the hub would refuse (U+0000 in it) is refused at the write and
    /// never queued, where it would stop every later push.
    @Test func aNameHoldingNULIsRefusedAndNothingIsQueued() throws {
        let rig = try Rig()
        #expect(throws: MirrorError.self) { try rig.store.put(kind: "mail", id: "m\u{0}1", payload: [1], group: nil) }
        #expect(throws: MirrorError.self) { try rig.store.put(kind: "ma\u{0}il", id: "m1", payload: [1], group: nil) }
        #expect(throws: MirrorError.self) { try rig.store.delete(kind: "mail", id: "\u{0}") }
        #expect(try rig.store.queue().isEmpty)
    }

    @Test func noneThenAnyInserts() throws {
        let rig = try Rig()
        try rig.pull([Self.record("m1", "x", seq: 1)], next: 1)
        #expect(try rig.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX") == .inserted)
        #expect(try rig.store.queue().count == 1)
    }

    @Test func pendingThenTheSameOpIsANoOp() throws {
        let rig = try Rig()
        try rig.pull([Self.record("m1", "x", seq: 1)], next: 1)
        try rig.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        #expect(try rig.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX") == .unchanged)
        #expect(try rig.store.queue().count == 1)
    }

    @Test func pendingThenTheOppositeCancelsAndNothingIsSent() throws {
        let rig = try Rig()
        try rig.pull([Self.record("m1", "x", seq: 1, labels: ["INBOX"])], next: 1)
        try rig.store.remove(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        #expect(try rig.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX") == .cancelled)
        #expect(try rig.store.queue().isEmpty)
        #expect(try rig.sync.nextPush() == nil)
        #expect(try rig.store.holds(kind: "mail", id: "m1", set: "labels", member: "INBOX"))
    }

    @Test func inFlightThenTheOppositeOverlaysForwardUnderANewMutationID() throws {
        let rig = try Rig()
        try rig.pull([Self.record("m1", "x", seq: 1, labels: ["INBOX"])], next: 1)
        try rig.store.remove(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        let sent = try #require(try rig.store.queue().first?.mutation)
        try rig.flush(seq: 2)
        #expect(try rig.store.queue().map(\.state) == [.inFlight])
        #expect(try rig.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX") == .overlaidForward)
        let row = try #require(try rig.store.queue().first)
        #expect(row.state == .pending && row.op == "add" && row.mutation != sent && row.expectedHistoryID == nil)
        #expect(try rig.store.holds(kind: "mail", id: "m1", set: "labels", member: "INBOX"))
        // The inverse goes out normally.
        let (request, _) = try rig.flush(seq: 3)
        #expect(request?.purpose == .push([row.mutation]))
    }

    @Test func aPendingRowThatWasClaimedOnceIsOverlaidForwardNotCancelled() throws {
        // 003's table says "pending, opposite: delete, nothing was ever sent". A row a flusher
        // claimed may have reached the hub (a crash after the send, before the answer was
        // recorded, leaves it pending): deleting it would lose the inverse.
        let rig = try Rig()
        try rig.pull([Self.record("m1", "x", seq: 1, labels: ["INBOX"])], next: 1)
        try rig.store.remove(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        let request = try #require(try rig.sync.nextPush())
        _ = try rig.sync.handle(.unreachable("down"), to: request)
        #expect(try rig.store.queue().map(\.state) == [.pending])
        #expect(try rig.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX") == .overlaidForward)
        #expect(try rig.store.queue().map(\.op) == ["add"])
    }

    @Test func undoCancelsAPendingWriteAndOverlaysAnInFlightOne() throws {
        let rig = try Rig()
        try rig.pull([Self.record("m1", "x", seq: 1, labels: ["INBOX"]), Self.record("m2", "y", seq: 2, labels: ["INBOX"])], next: 2)
        try rig.store.remove(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        #expect(try rig.store.undo())
        #expect(try rig.store.queue().isEmpty)
        #expect(try rig.store.holds(kind: "mail", id: "m1", set: "labels", member: "INBOX"))
        #expect(try rig.store.undo() == false)

        try rig.store.remove(kind: "mail", id: "m2", set: "labels", member: "INBOX")
        try rig.flush(seq: 3)
        #expect(try rig.store.undo())
        #expect(try rig.store.queue().map { "\($0.op) \($0.state)" } == ["add pending"])
        #expect(try rig.store.holds(kind: "mail", id: "m2", set: "labels", member: "INBOX"))

        // A put is undone by putting back what was there; a delete likewise.
        try rig.store.put(kind: "mail", id: "m1", payload: Array("changed".utf8))
        #expect(try rig.store.undo())
        #expect(try rig.value("mail", "m1") == "x")
        try rig.store.delete(kind: "mail", id: "m1")
        #expect(try rig.value("mail", "m1") == nil)
        #expect(try rig.store.undo())
        #expect(try rig.value("mail", "m1") == "x")
    }

    // MARK: - Rollups and group triage (003 "Thread-level vs message-level")

    @Test func archivingOneMessageOfAThreadLeavesItInTheInboxAndArchivingTheThreadDoesNot() throws {
        let rig = try Rig()
        try rig.store.declareRollup(kind: "mail", set: "labels", member: "INBOX")
        try rig.pull(
            [
                Self.record("m1", "a", seq: 1, at: 10, group: "t1", labels: ["INBOX"]), Self.record("m2", "b", seq: 2, at: 20, group: "t1", labels: ["INBOX"]),
                Self.record("m3", "c", seq: 3, at: 30, group: "t2", labels: ["INBOX"]),
            ], next: 3)
        #expect(try rig.store.groups(kind: "mail", set: "labels", member: "INBOX") == ["t2", "t1"])
        try rig.store.remove(kind: "mail", id: "m2", set: "labels", member: "INBOX")
        #expect(try rig.store.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == true)
        #expect(try rig.store.removeFromGroup(kind: "mail", group: "t1", set: "labels", member: "INBOX").count == 1)
        #expect(try rig.store.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == false)
        #expect(try rig.store.groups(kind: "mail", set: "labels", member: "INBOX") == ["t2"])
        // Undo of the triage restores exactly the message it changed.
        #expect(try rig.store.undo())
        #expect(try rig.store.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == true)
        #expect(try rig.store.holds(kind: "mail", id: "m2", set: "labels", member: "INBOX") == false)
        // A message moved to another thread by a put moves the rollup with it.
        try rig.store.put(kind: "mail", id: "m3", payload: Array("c".utf8), group: "t1")
        #expect(try rig.store.rollup(kind: "mail", group: "t2", set: "labels", member: "INBOX") == nil)
        // A deleted message counts for nothing.
        try rig.store.delete(kind: "mail", id: "m1")
        try rig.store.delete(kind: "mail", id: "m3")
        #expect(try rig.store.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == false)
        try Self.expectRollupsMatchRecomputation(rig.store)
    }

    /// Two group names Swift's `String` holds equal (`é` as one character, and as
    /// `e` with a combining accent) are two groups to SQLite and to the hub: a
    /// page that changes both brings both rollups up to date, as do a local change
    /// and a recomputation from scratch.
    @Test func groupsWhoseNamesAreCanonicallyEqualKeepARollupEach() throws {
        let rig = try Rig()
        try rig.store.declareRollup(kind: "mail", set: "labels", member: "INBOX")
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        try rig.pull(
            [
                Self.record("m1", "a", seq: 1, at: 10, group: composed, labels: ["INBOX"]),
                Self.record("m2", "b", seq: 2, at: 20, group: decomposed, labels: ["INBOX"]),
            ], next: 2)
        #expect(try rig.store.rollup(kind: "mail", group: composed, set: "labels", member: "INBOX") == true)
        #expect(try rig.store.rollup(kind: "mail", group: decomposed, set: "labels", member: "INBOX") == true)
        #expect(try rig.store.groups(kind: "mail", set: "labels", member: "INBOX").count == 2)
        try rig.store.remove(kind: "mail", id: "m2", set: "labels", member: "INBOX")
        #expect(try rig.store.rollup(kind: "mail", group: composed, set: "labels", member: "INBOX") == true)
        #expect(try rig.store.rollup(kind: "mail", group: decomposed, set: "labels", member: "INBOX") == false)
        try Self.expectRollupsMatchRecomputation(rig.store)
        try rig.store.connection.transaction { try rig.store.recomputeAllRollups() }
        #expect(try rig.store.groups(kind: "mail", set: "labels", member: "INBOX").count == 1)
        #expect(try rig.store.rollup(kind: "mail", group: decomposed, set: "labels", member: "INBOX") == false)
    }

    /// Kinds are told apart by their bytes too: rollups on kind `é` and on kind
    /// `e` + U+0301 are each recomputed, by a pull touching both, by a change,
    /// and from scratch; and the rollup check tells their rows apart.
    @Test func kindsWhoseNamesAreCanonicallyEqualKeepTheirRollups() throws {
        let rig = try Rig()
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        try rig.store.declareRollup(kind: composed, set: "labels", member: "INBOX")
        try rig.store.declareRollup(kind: decomposed, set: "labels", member: "INBOX")
        try rig.pull(
            [
                Self.record("m1", "a", seq: 1, at: 10, group: "t", labels: ["INBOX"], kind: decomposed),
                // At one time: the two kinds' rollup rows then read alike but for the kind's bytes.
                Self.record("m2", "b", seq: 2, at: 10, group: "t", labels: ["INBOX"], kind: composed),
            ], next: 2)
        #expect(try rig.store.rollup(kind: composed, group: "t", set: "labels", member: "INBOX") == true)
        #expect(try rig.store.rollup(kind: decomposed, group: "t", set: "labels", member: "INBOX") == true)
        try rig.store.remove(kind: composed, id: "m2", set: "labels", member: "INBOX")
        #expect(try rig.store.rollup(kind: composed, group: "t", set: "labels", member: "INBOX") == false)
        #expect(try rig.store.rollup(kind: decomposed, group: "t", set: "labels", member: "INBOX") == true)
        #expect(try rig.store.rollupMismatches().isEmpty)
        try rig.store.connection.transaction { try rig.store.recomputeAllRollups() }
        #expect(try rig.store.rollup(kind: composed, group: "t", set: "labels", member: "INBOX") == false)
        #expect(try rig.store.rollup(kind: decomposed, group: "t", set: "labels", member: "INBOX") == true)
        // A stale row of one kind is found, though its text is canonically that of the other's.
        try rig.store.connection.execute(
            "UPDATE mirror_rollups SET present = 1 WHERE rule = (SELECT rule FROM mirror_rollup_rules WHERE kind = ?)", [.text(composed)])
        #expect(try rig.store.rollupMismatches().count == 2)
    }

    /// The hub keeps set names apart by their bytes, and so does a pull: a record's
    /// sets `é` and `e` + U+0301 keep their own members.
    @Test func setsWhoseNamesAreCanonicallyEqualAreTwo() throws {
        let rig = try Rig()
        try rig.pull(
            raw: #"{"changes":[{"kind":"mail","id":"m1","payload":"YQ==","modifiedAt":1,"group":null,"sets":{"e\u0301":["a"],"\u00e9":["b"]},"seq":1}],"next":1,"epoch":"e1","more":false}"#)
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        #expect(try rig.store.members(kind: "mail", id: "m1", set: decomposed) == ["a"])
        #expect(try rig.store.members(kind: "mail", id: "m1", set: composed) == ["b"])
        #expect(try !rig.store.holds(kind: "mail", id: "m1", set: composed, member: "a"))
        // A name written twice byte for byte is no page of the usual shape (the scanner gives up; JSONDecoder reads it).
        let twice = #"{"changes":[{"kind":"mail","id":"m1","modifiedAt":1,"sets":{"s":["a"],"s":["b"]},"seq":1}],"next":1,"epoch":"e1","more":false}"#
        #expect(MirrorPageScanner.page(Array(twice.utf8), listKey: "changes") == nil)
        let canonical = #"{"changes":[{"kind":"mail","id":"m1","modifiedAt":1,"sets":{"e\u0301":["a"],"\u00e9":["b"]},"seq":1}],"next":1,"epoch":"e1","more":false}"#
        #expect(MirrorPageScanner.page(Array(canonical.utf8), listKey: "changes")?.records.first?.sets.count == 2)
    }

    /// Every rollup equals its recomputation from scratch.
    static func expectRollupsMatchRecomputation(_ store: MirrorStore, after step: String = "", sourceLocation: SourceLocation = #_sourceLocation) throws {
        let read = { try store.connection.query("SELECT r.kind, o.grp, r.set_name, r.member, o.present, o.latest FROM mirror_rollups o JOIN mirror_rollup_rules r USING (rule) ORDER BY 1, 2, 3, 4") { row in
            (0..<6).map { "\(row.value(Int32($0)))" }.joined(separator: "|")
        } }
        let kept = try read()
        try store.connection.transaction { try store.recomputeAllRollups() }
        #expect(kept == (try read()), "\(step)", sourceLocation: sourceLocation)
    }

    /// A set delta brings only its rule's presence up to date (count and latest
    /// cannot move): after every step of a run that takes each path (insert,
    /// cancel, overlay forward, a cancel that falls back to a canonical copy the
    /// hub changed meanwhile, deltas on a deleted record, on a set without a
    /// rule, triage and undo), the rollups equal their recomputation from scratch.
    @Test func setDeltasKeepEveryRollupEqualToItsRecomputation() throws {
        let rig = try Rig()
        try rig.store.declareRollup(kind: "mail", set: "labels", member: "INBOX")
        try rig.store.declareRollup(kind: "mail", set: "labels", member: "UNREAD")
        try rig.pull(
            [
                Self.record("m1", "a", seq: 1, at: 10, group: "t1", labels: ["INBOX"]), Self.record("m2", "b", seq: 2, at: 20, group: "t1", labels: ["INBOX", "UNREAD"]),
                Self.record("m3", "c", seq: 3, at: 30, group: "t2", labels: []),
            ], next: 3)
        let steps: [(String, () throws -> Void)] = [
            ("remove m1", { try rig.store.remove(kind: "mail", id: "m1", set: "labels", member: "INBOX") }),
            ("remove m2", { try rig.store.remove(kind: "mail", id: "m2", set: "labels", member: "INBOX") }),
            ("add m2 cancels", { try rig.store.add(kind: "mail", id: "m2", set: "labels", member: "INBOX") }),
            ("add m3", { try rig.store.add(kind: "mail", id: "m3", set: "labels", member: "INBOX") }),
            ("label without a rule", { try rig.store.add(kind: "mail", id: "m3", set: "labels", member: "STARRED") }),
            ("remove UNREAD", { try rig.store.remove(kind: "mail", id: "m2", set: "labels", member: "UNREAD") }),
            ("flush", { try rig.flush(seq: 4, history: 9) }),
            ("add m1 overlays forward", { try rig.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX") }),
            ("delete m3", { try rig.store.delete(kind: "mail", id: "m3") }),
            ("remove INBOX from the deleted m3", { try rig.store.remove(kind: "mail", id: "m3", set: "labels", member: "INBOX") }),
            ("archive t1", { try rig.store.removeFromGroup(kind: "mail", group: "t1", set: "labels", member: "INBOX") }),
            ("undo", { try rig.store.undo() }),
            ("remove m2 again", { try rig.store.remove(kind: "mail", id: "m2", set: "labels", member: "INBOX") }),
            // The hub takes INBOX off m2 meanwhile: the pending remove is now moot, and adding cancels it onto a canonical copy without INBOX.
            ("the hub drops m2's INBOX", { try rig.pull([Self.record("m2", "b", seq: 10, at: 20, group: "t1", labels: [])], next: 10) }),
            ("add m2 cancels onto canonical", { try rig.store.add(kind: "mail", id: "m2", set: "labels", member: "INBOX") }),
        ]
        for (name, step) in steps {
            try step()
            try Self.expectRollupsMatchRecomputation(rig.store, after: name)
        }
        #expect(try rig.store.holds(kind: "mail", id: "m2", set: "labels", member: "INBOX") == false)
    }

    /// The undo record, written by hand as JSON, reads back whatever the keys hold.
    @Test func undoReadsBackKeysWithQuotesBackslashesControlsAndEmoji() throws {
        let rig = try Rig()
        let odd = "a\"b\\c\nd\u{1}e\u{1F4EC}f"
        try rig.store.put(kind: "k\"", id: odd, payload: [0, 127, 255], group: "g\\")
        try rig.store.add(kind: "k\"", id: odd, set: "s\n", member: odd)
        #expect(try rig.store.undo())
        #expect(try rig.store.members(kind: "k\"", id: odd, set: "s\n") == [])
        try rig.store.put(kind: "k\"", id: odd, payload: [1], group: "h")
        #expect(try rig.store.undo())
        #expect(try rig.store.value(kind: "k\"", id: odd) == [0, 127, 255])
        #expect(try rig.store.group(kind: "k\"", id: odd) == "g\\")
        let record = MirrorStore.UndoRecord(
            kind: odd, setChanges: [.init(id: odd, op: "add", set: "\u{7F}", member: "\t")], before: .init(id: odd, alive: false, payload: [9], group: nil))
        let decoded = try JSONDecoder().decode(MirrorStore.UndoRecord.self, from: Data(record.json))
        #expect(decoded.kind == odd && decoded.setChanges.first?.member == "\t" && decoded.setChanges.first?.set == "\u{7F}")
        #expect(decoded.before?.payload == [9] && decoded.before?.alive == false && decoded.before?.group == nil)
    }

    /// A first download loaded in bulk reads, rolls up and retires as the same records applied page by page.
    @Test func aBulkLoadEqualsTheSamePagesApplied() throws {
        let bulk = try Rig()
        let paged = try Rig(owner: "second")
        var records: [MirrorStore.PulledRecord] = []
        for index in 0..<40 {
            records.append(
                .init(
                    kind: "mail", id: "m\(index)", payload: index % 7 == 0 ? nil : [UInt8(index)], modifiedAt: Int64(index), group: "t\(index % 5)",
                    sets: ["labels": index % 3 == 0 ? ["INBOX"] : []], seq: Int64(index + 1)))
        }
        for rig in [bulk, paged] {
            try rig.store.declareRollup(kind: "mail", set: "labels", member: "INBOX")
            try rig.store.put(kind: "mail", id: "m4", payload: [4], group: "t9")
            try rig.store.remove(kind: "mail", id: "m3", set: "labels", member: "INBOX")
        }
        try bulk.store.applyNew(page: Array(records[..<20]), next: 20, epoch: "e1")
        try bulk.store.applyNew(page: Array(records[20...]), next: 40, epoch: "e1")
        _ = try paged.store.apply(page: Array(records[..<20]), next: 20, epoch: "e1")
        _ = try paged.store.apply(page: Array(records[20...]), next: 40, epoch: "e1")
        for group in (0..<5).map({ "t\($0)" }) + ["t9"] {
            #expect(try bulk.store.rollup(kind: "mail", group: group, set: "labels", member: "INBOX") == paged.store.rollup(kind: "mail", group: group, set: "labels", member: "INBOX"))
        }
        #expect(try bulk.store.records(kind: "mail").map(\.id) == paged.store.records(kind: "mail").map(\.id))
        #expect(try bulk.store.groups(kind: "mail", set: "labels", member: "INBOX") == paged.store.groups(kind: "mail", set: "labels", member: "INBOX"))
        #expect(try bulk.store.cursor() == paged.store.cursor())
        try Self.expectRollupsMatchRecomputation(bulk.store)
        // A record the store already holds is refused, and nothing of the page is written.
        #expect(throws: SQLiteError.self) { try bulk.store.applyNew(page: [records[0]], next: 41, epoch: "e1") }
        #expect(try bulk.store.cursor().historyID == 40)
    }

    /// A store of the first format (rollups keyed by kind, set and member) keeps its rules and rollups.
    @Test func aStoreOfTheFirstFormatKeepsItsRollups() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("old.mirror")
        do {
            let connection = try Connection(path: path)
            try connection.transaction {
                try MirrorSchema.migrator.migrate(connection, upTo: 1)
                try connection.executeScript(
                    """
                    PRAGMA application_id = \(MirrorStore.applicationID);
                    INSERT INTO mirror_records (kind, id, payload, modified_at, grp, seq) VALUES ('mail', 'm1', x'01', 5, 't1', 1), ('mail', 'm2', x'02', 9, 't2', 2);
                    INSERT INTO mirror_members (kind, id, set_name, member) VALUES ('mail', 'm1', 'labels', 'INBOX');
                    INSERT INTO mirror_rollup_rules (kind, set_name, member) VALUES ('mail', 'labels', 'INBOX'), ('mail', 'labels', 'UNREAD');
                    INSERT INTO mirror_rollups (kind, grp, set_name, member, present, latest) VALUES
                        ('mail', 't1', 'labels', 'INBOX', 1, 5), ('mail', 't2', 'labels', 'INBOX', 0, 9), ('mail', 't1', 'labels', 'UNREAD', 0, 5), ('mail', 't2', 'labels', 'UNREAD', 0, 9);
                    """)
            }
        }
        let store = try MirrorStore(path: path)
        #expect(try store.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == true)
        #expect(try store.rollup(kind: "mail", group: "t2", set: "labels", member: "INBOX") == false)
        #expect(try store.rollup(kind: "mail", group: "t2", set: "labels", member: "UNREAD") == false)
        #expect(try store.groups(kind: "mail", set: "labels", member: "INBOX") == ["t1"])
        try Self.expectRollupsMatchRecomputation(store)
        try store.add(kind: "mail", id: "m2", set: "labels", member: "INBOX")
        #expect(try store.groups(kind: "mail", set: "labels", member: "INBOX") == ["t2", "t1"])
    }

    // MARK: - Retirement on echo, never on 2xx (003)

    @Test func anAcknowledgedMutationStaysUntilThePulledCursorPassesItsGate() throws {
        let rig = try Rig()
        try rig.store.declareRollup(kind: "mail", set: "labels", member: "INBOX")
        try rig.pull([Self.record("m1", "a", seq: 1, group: "t1", labels: ["INBOX"])], next: 1)
        try rig.store.removeFromGroup(kind: "mail", group: "t1", set: "labels", member: "INBOX")
        try rig.flush(seq: 5, history: 5)
        #expect(try rig.store.queue().map(\.expectedHistoryID) == [5])
        #expect(try rig.store.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == false)
        // A page that stops short of the gate retires nothing.
        try rig.pull([Self.record("other", "z", seq: 4)], next: 4)
        #expect(try rig.store.queue().count == 1)
        #expect(try rig.store.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == false)
        // The echo: canonical write and retirement in one step, no flicker.
        let step = try rig.pull([Self.record("m1", "a", seq: 5, group: "t1", labels: [])], next: 5)
        #expect(step == .pulled(changed: 1, retired: 1, superseded: 0, more: false))
        #expect(try rig.store.queue().isEmpty)
        #expect(try rig.store.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == false)
    }

    @Test func aStaleOrRefusedAnswerRaisesAConflictWithTheLosingValue() throws {
        let rig = try Rig()
        try rig.store.put(kind: "note", id: "n", payload: Array("mine".utf8))
        try rig.flush(answering: "stale", history: 7, reason: "a newer version won")
        let conflict = try #require(try rig.store.conflicts().first)
        #expect(conflict.id == "n" && conflict.reason == "stale" && conflict.losingPayload == Array("mine".utf8))
        try rig.store.delete(kind: "note", id: "n")  // nothing canonical, the put was answered: overlaid forward
        try rig.flush(answering: "refused", history: 7, reason: "append_only")
        #expect(try rig.store.conflicts().last?.reason == "refused: append_only")
        try rig.pull([Self.record("n", "theirs", seq: 7, kind: "note")], next: 7)
        #expect(try rig.store.queue().isEmpty)
        #expect(try rig.value("note", "n") == "theirs")
    }

    /// Seed 252020, the case two handles make: a put another process claimed goes out
    /// after this one pulled a later version of its record (a claimed row is not settled
    /// while it is pushed), and the hub, restored without that later version, takes it.
    /// The replay then finds this client's copy newer than the hub's: the put in flight,
    /// which that copy beats, lost already and goes with a conflict event, and the copy
    /// is queued again in its place (sent again instead, the put would stay on the hub).
    @Test func aCopyNewerThanAPutInFlightIsQueuedAgainByTheReplay() throws {
        let rig = try Rig(owner: "app")
        let other = try rig.second(owner: "cli")
        let otherSync = MirrorSync(store: other)
        try rig.store.put(kind: "note", id: "n", payload: Array("old".utf8))
        let claimed = try #require(try otherSync.nextPush())
        let stamped = try #require(try rig.store.queue().first?.modifiedAt)
        let later = stamped + 10_000
        try rig.pull([Self.record("n", "new", seq: 1, at: later, kind: "note")], next: 1)
        #expect(try rig.value("note", "n") == "old", "the claimed put still overlays the pulled version")
        let mutation = try #require(try rig.store.queue().first?.mutation)
        let answer = try JSONSerialization.data(withJSONObject: ["historyId": 2, "results": [["mutation": mutation, "status": "applied", "seq": 2]]])
        #expect(try otherSync.handle(.answer(HubAnswer(status: 200, body: [UInt8](answer))), to: claimed) == .pushed(gated: 1, retired: 0, conflicts: 0, restamped: 0))
        // The hub is put back from a backup taken before "new", and takes "old" again.
        let rewound = try JSONSerialization.data(withJSONObject: ["error": ["code": "history_rewound", "message": "rewound"], "epoch": "e2", "historyId": 1, "commonHistoryId": 0])
        #expect(try rig.sync.handle(.answer(HubAnswer(status: 409, body: [UInt8](rewound))), to: try rig.sync.nextPull()) == .replayStarted)
        let page = try JSONSerialization.data(withJSONObject: [
            "records": [Self.record("n", "old", seq: 1, at: stamped, kind: "note")], "next": "end", "more": false,
        ])
        #expect(try rig.sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](page))), to: try rig.sync.nextPull()) == .replayed(records: 1, more: false))
        let queue = try rig.store.queue()
        #expect(queue.map { $0.payload.map { String(decoding: $0, as: UTF8.self) } } == ["new"])
        #expect(queue.map(\.state) == [.pending])
        #expect(queue.first?.mutation != mutation)
        #expect(try rig.store.conflicts().map(\.reason) == ["stale"])
        #expect(try rig.store.conflicts().first?.losingPayload == Array("old".utf8))
        #expect(try rig.value("note", "n") == "new")
    }

    // MARK: - Failures

    @Test func anUnreachableHubCostsNoAttemptAndErrorsBackOffUntilFailedWithTheOverlayInForce() throws {
        let rig = try Rig()
        try rig.pull([Self.record("d", "diary", seq: 1, at: 100, kind: "entry")], next: 1)
        try rig.store.delete(kind: "entry", id: "d")
        for _ in 0..<10 {
            let request = try #require(try rig.sync.nextPush())
            _ = try rig.sync.handle(.unreachable("connection refused"), to: request)
        }
        #expect(try rig.store.queue().map(\.attempts) == [0])
        for attempt in 1...5 {
            let request = try #require(try rig.sync.nextPush(), "attempt \(attempt)")
            let step = try rig.sync.handle(.answer(HubAnswer(status: 500, body: Array(#"{"error":{"code":"internal","message":"boom"}}"#.utf8))), to: request)
            #expect(step == .pushFailed(reason: "the hub answered the push 500 internal: boom", countsAttempt: true, failedNow: attempt == 5 ? 1 : 0, reachable: true))
            // Not due again before its back-off.
            #expect(try rig.sync.nextPush() == nil)
            rig.clock.advance(byMilliseconds: 61_000)
        }
        #expect(try rig.store.queue().map(\.state) == [.failed])
        #expect(try rig.sync.nextPush() == nil)
        // 004 #1366: the failed delete still hides the record, and an older server copy does not bring it back.
        #expect(try rig.value("entry", "d") == nil)
        try rig.pull([Self.record("d", "diary", seq: 2, at: 50, kind: "entry")], next: 2)
        #expect(try rig.value("entry", "d") == nil)
        // A genuinely newer edit on the hub wins: the failed mutation goes, with a conflict event.
        try rig.pull([Self.record("d", "edited elsewhere", seq: 3, at: Int64.max / 2, kind: "entry")], next: 3)
        #expect(try rig.value("entry", "d") == "edited elsewhere")
        #expect(try rig.store.queue().isEmpty)
        #expect(try rig.store.conflicts().map(\.reason) == ["superseded"])
    }

    @Test func retryMovesFailedMutationsBackWithFreshAttempts() throws {
        let rig = try Rig()
        try rig.store.put(kind: "note", id: "n", payload: [1])
        for _ in 1...5 {
            let request = try #require(try rig.sync.nextPush())
            _ = try rig.sync.handle(.lost("timed out"), to: request)
            rig.clock.advance(byMilliseconds: 61_000)
        }
        #expect(try rig.store.queue().map(\.state) == [.failed])
        #expect(try rig.store.retryFailed() == 1)
        #expect(try rig.store.queue().map { "\($0.state) \($0.attempts)" } == ["pending 0"])
        #expect(try rig.sync.nextPush() != nil)
    }

    @Test func anAnswerTheClientCannotParseLeavesTheMutationPendingAndIsReportedOnce() throws {
        let rig = try Rig()
        try rig.store.put(kind: "note", id: "n", payload: [1])
        for _ in 0..<3 {
            let request = try #require(try rig.sync.nextPush())
            _ = try rig.sync.handle(.answer(HubAnswer(status: 200, body: Array("<html>proxy error</html>".utf8))), to: request)
            rig.clock.advance(byMilliseconds: 2_000)
        }
        #expect(try rig.store.queue().map { "\($0.state) \($0.attempts)" } == ["pending 0"])
        #expect(rig.sync.reports.count == 1)
    }

    // MARK: - One mutation never fails the rest

    @Test func aPayloadOverTheHubsLimitIsRefusedAtOnceAndAPushStaysUnderItsBytes() throws {
        let rig = try Rig()
        #expect(throws: MirrorError.self) { try rig.store.put(kind: "note", id: "huge", payload: [UInt8](repeating: 1, count: (1 << 20) + 1)) }
        #expect(try rig.store.queue().isEmpty)
        for index in 0..<20 { try rig.store.put(kind: "note", id: "n\(index)", payload: [UInt8](repeating: 2, count: 300_000)) }
        var pushed: [Int] = []
        while pushed.count < 5, case .push(let ids)? = try rig.flush(seq: Int64(pushed.reduce(0, +) + 1)).request?.purpose {
            pushed.append(ids.count)
        }
        #expect(pushed == [13, 7], "4 MiB of 300 kB payloads a push, every mutation once")
        #expect(try rig.store.queue().allSatisfy { $0.state == .inFlight })
    }

    // MARK: - Two flushers on one store

    @Test func aClaimHasAnOwnerAndALease() throws {
        let rig = try Rig(owner: "app")
        let other = try rig.second(owner: "cli")
        let otherSync = MirrorSync(store: other)
        try rig.store.put(kind: "note", id: "n", payload: [1])
        let first = try #require(try rig.sync.nextPush())
        #expect(try otherSync.nextPush() == nil)
        rig.clock.advance(byMilliseconds: 30_001)
        let second = try #require(try otherSync.nextPush())
        #expect(first.purpose == second.purpose)  // the same mutation id: the hub applies it once
        // The first owner's late answer changes nothing: the row is the other's now.
        let body = try JSONSerialization.data(withJSONObject: ["historyId": 1, "results": [["mutation": try rig.store.queue()[0].mutation, "status": "applied", "seq": 1]]])
        #expect(try rig.sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: first) == .pushed(gated: 0, retired: 0, conflicts: 0, restamped: 0))
        #expect(try otherSync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: second) == .pushed(gated: 1, retired: 0, conflicts: 0, restamped: 0))
    }

    // MARK: - Clocks

    @Test func aWriteIsStampedAfterTheVersionItReplacesAndAClockSkewRefusalCorrectsTheClock() throws {
        let rig = try Rig()
        try rig.pull([Self.record("n", "theirs", seq: 1, at: 1_900_000_000_000, kind: "note")], next: 1)
        try rig.store.put(kind: "note", id: "n", payload: Array("mine".utf8))
        #expect(try rig.store.queue().first?.modifiedAt == 1_900_000_000_001)
        let request = try #require(try rig.sync.nextPush())
        let body = try JSONSerialization.data(withJSONObject: [
            "historyId": 1, "results": [["mutation": try rig.store.queue()[0].mutation, "status": "refused", "reason": "clock_skew", "hubTime": 1_700_000_000_000]],
        ])
        #expect(try rig.sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: request) == .pushed(gated: 0, retired: 0, conflicts: 0, restamped: 1))
        let row = try #require(try rig.store.queue().first)
        #expect(row.state == .pending && row.modifiedAt == 1_700_000_000_000 && row.attempts == 1)
        #expect(try rig.store.conflicts().isEmpty)
    }

    // MARK: - Wiped data

    @Test func canonicalDataGoneUnderASurvivingCursorIsDownloadedAgain() throws {
        let rig = try Rig()
        try rig.pull([Self.record("m1", "a", seq: 1)], next: 9)
        #expect(try rig.sync.nextPull().path.contains("since=9"))
        try rig.store.connection.execute("DELETE FROM mirror_records")
        try rig.store.connection.execute("DELETE FROM mirror_members")
        #expect(try rig.sync.nextPull().path.contains("since=0&"))
    }
}
