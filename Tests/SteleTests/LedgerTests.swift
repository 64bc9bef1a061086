import Foundation
import SteleSQL
import Testing
import TestSupport

@testable import Stele

/// The ledger client without a hub (seed 002): passes over a real app store,
/// wipes and corrupt bookkeeping, and the sans-I/O machine fed the hub's answers
/// and pages by hand as HUB-API bodies, on real SQLite files and a clock the test moves.
@Suite struct LedgerTests {
    static let start: Int64 = 1_800_000_000_000
    static let account = "account-1"
    static let hub = "https://hub.example"

    /// An app store (one SQLite table) and a ledger beside it, on fresh files.
    final class Rig {
        let directory: TemporaryDirectory
        let clock = ManualWallClock(milliseconds: LedgerTests.start)
        let store: SQLiteTableSource
        let configuration: Ledger.Configuration
        var ledger: Ledger
        var sync: LedgerSync
        var ledgerPath: String { directory.file("app.ledger") }

        init(_ adjust: (inout Ledger.Configuration) -> Void = { _ in }) throws {
            directory = try TemporaryDirectory()
            store = try SQLiteTableSource(path: directory.file("app.sqlite"))
            var configuration = Ledger.Configuration()
            configuration.clock = clock
            adjust(&configuration)
            self.configuration = configuration
            ledger = try Ledger(path: directory.file("app.ledger"), source: store, account: LedgerTests.account, hub: LedgerTests.hub, configuration: configuration)
            sync = LedgerSync(ledger: ledger)
        }

        /// Closes the ledger and opens it again, as the app's next launch does.
        func reopen() throws {
            ledger.close()
            ledger = try Ledger(path: ledgerPath, source: store, account: LedgerTests.account, hub: LedgerTests.hub, configuration: configuration)
            sync = LedgerSync(ledger: ledger)
        }

        func put(_ id: String, _ value: String, kind: String = "note") throws {
            try store.put(kind: kind, id: id, payload: Array(value.utf8))
        }

        func remove(_ id: String, kind: String = "note") throws {
            try store.delete(kind: kind, id: id)
        }

        /// What the app's store holds for the entity.
        func value(_ id: String, kind: String = "note") throws -> String? {
            try store.payload(kind: kind, id: id).map { String(decoding: $0, as: UTF8.self) }
        }

        func stamp(_ id: String, kind: String = "note") throws -> Ledger.Stamp? {
            try ledger.stamp(kind: kind, id: id)
        }

        /// Answers `request` (a push) with one result per mutation.
        @discardableResult
        func answer(_ request: MirrorRequest, _ results: [[String: Any]], history: Int64 = 1) throws -> MirrorStep {
            let body = try JSONSerialization.data(withJSONObject: ["historyId": history, "results": results])
            return try sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: request)
        }

        /// Builds the next push and answers every mutation of it with `status` (seq counting up from `seq`).
        @discardableResult
        func flush(_ status: String = "applied", seq: Int64 = 1, reason: String? = nil, hubTime: Int64? = nil) throws -> (request: MirrorRequest, step: MirrorStep)? {
            guard let request = try sync.nextPush() else { return nil }
            var results: [[String: Any]] = []
            for (offset, mutation) in LedgerTests.mutations(of: request).enumerated() {
                var result: [String: Any] = ["mutation": mutation, "status": status]
                if status == "applied" { result["seq"] = seq + Int64(offset) }
                if let reason { result["reason"] = reason }
                if let hubTime { result["hubTime"] = hubTime }
                results.append(result)
            }
            return (request, try answer(request, results, history: seq + Int64(results.count)))
        }

        /// Applies a page of changes as the hub sends it.
        @discardableResult
        func pull(_ records: [[String: Any]], next: Int64, epoch: String = "e1", more: Bool = false) throws -> MirrorStep {
            let request = try sync.nextPull()
            #expect(request.purpose == .changes)
            let body = try JSONSerialization.data(withJSONObject: ["changes": records, "next": next, "epoch": epoch, "more": more])
            return try sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: request)
        }

        /// Applies a page of the replay.
        @discardableResult
        func replay(_ records: [[String: Any]], next: String = "t", more: Bool = false) throws -> MirrorStep {
            let request = try sync.nextPull()
            #expect(request.purpose == .replay)
            let body = try JSONSerialization.data(withJSONObject: ["records": records, "next": next, "more": more])
            return try sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: request)
        }
    }

    /// HUB-API's record object.
    static func record(_ id: String, _ value: String?, at time: Int64, seq: Int64, kind: String = "note") -> [String: Any] {
        record(id, value.map { Array($0.utf8) }, at: time, seq: seq, kind: kind)
    }

    static func record(_ id: String, _ payload: [UInt8]?, at time: Int64, seq: Int64, kind: String = "note") -> [String: Any] {
        [
            "kind": kind, "id": id, "payload": payload.map { Data($0).base64EncodedString() as Any } ?? NSNull(), "modifiedAt": time,
            "group": NSNull(), "sets": [String: Any](), "seq": seq,
        ]
    }

    static func mutations(of request: MirrorRequest) -> [String] {
        guard case .push(let ids) = request.purpose else { return [] }
        return ids
    }

    /// The mutations of a push body, as the hub reads them.
    static func pushed(_ request: MirrorRequest) throws -> [[String: Any]] {
        let object = try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
        return object?["mutations"] as? [[String: Any]] ?? []
    }

    static func fingerprint(_ value: String) -> Hash32 { SHA256().hash(Array(value.utf8)) }

    static func digest(ofFile path: String) throws -> Hash32 {
        SHA256().hash([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
    }

    /// A compact view of the outbox: `id op modifiedAt state`.
    static func rows(_ ledger: Ledger) throws -> [String] {
        try ledger.outbox().map { "\($0.id) \($0.op) \($0.modifiedAt) \($0.state)" }
    }

    // MARK: - 1. The pass

    @Test func aPassQueuesWhatIsNewChangedOrGoneAndNothingElse() throws {
        let rig = try Rig()
        let start = Self.start
        try rig.put("a", "hello")
        try rig.put("b", "bee")
        try rig.put("c", "sea")
        let first = try rig.ledger.pass()
        #expect(first.entities == 3 && first.upserts == 3 && first.tombstones == 0 && first.resent == 0)
        #expect(try Self.rows(rig.ledger) == ["a put \(start) pending", "b put \(start) pending", "c put \(start) pending"])
        // The stamp's fingerprint is the SHA-256 of the payload (SHA-256 of "hello").
        let hello: [UInt8] = [
            0x2c, 0xf2, 0x4d, 0xba, 0x5f, 0xb0, 0xa3, 0x0e, 0x26, 0xe8, 0x3b, 0x2a, 0xc5, 0xb9, 0xe2, 0x9e,
            0x1b, 0x16, 0x1e, 0x5c, 0x1f, 0xa7, 0x42, 0x5e, 0x73, 0x04, 0x33, 0x62, 0x93, 0x8b, 0x98, 0x24,
        ]
        #expect(try rig.stamp("a")?.fingerprint?.bytes == hello)
        #expect(try rig.stamp("b") == Ledger.Stamp(kind: "note", id: "b", fingerprint: Self.fingerprint("bee"), modifiedAt: start, seq: 0, unsent: false))

        // Nothing changed: nothing is queued, nothing is restamped.
        let stamps = try rig.ledger.stamps()
        let outbox = try rig.ledger.outbox()
        let again = try rig.ledger.pass()
        #expect(again.entities == 3 && again.upserts == 0 && again.tombstones == 0)
        #expect(try rig.ledger.stamps() == stamps)
        #expect(try rig.ledger.outbox() == outbox)
        try rig.flush(seq: 1)
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.ledger.pass().upserts == 0)
        #expect(try rig.ledger.outbox().isEmpty)

        // A changed payload, with the clock behind the stamp: dated just after the version it changes.
        rig.clock.advance(byMilliseconds: -60_000)
        try rig.put("a", "hello again")
        let changed = try rig.ledger.pass()
        #expect(changed.upserts == 1 && changed.tombstones == 0)
        #expect(try Self.rows(rig.ledger) == ["a put \(start + 1) pending"])
        #expect(try rig.stamp("a") == Ledger.Stamp(kind: "note", id: "a", fingerprint: Self.fingerprint("hello again"), modifiedAt: start + 1, seq: 0, unsent: false))
        // With the clock ahead, the date is now.
        rig.clock.set(milliseconds: start + 10_000)
        try rig.put("c", "sea 2")
        try rig.ledger.pass()
        #expect(try rig.stamp("c")?.modifiedAt == start + 10_000)

        // A removed entity: a tombstone, dated after the live stamp (the clock behind it again).
        rig.clock.set(milliseconds: start - 5_000)
        let live = try #require(try rig.stamp("b"))
        try rig.remove("b")
        let removed = try rig.ledger.pass()
        #expect(removed.tombstones == 1 && removed.upserts == 0 && removed.entities == 2)
        let tombstone = try #require(try rig.stamp("b"))
        #expect(tombstone.isTombstone && tombstone.fingerprint == nil && tombstone.modifiedAt > live.modifiedAt && tombstone.modifiedAt == live.modifiedAt + 1)
        let delete = try #require(try rig.ledger.outbox().first { $0.id == "b" })
        #expect(delete.op == "delete" && delete.modifiedAt == tombstone.modifiedAt)
        // A tombstone with nothing behind it is not queued again.
        let settled = try rig.ledger.outbox()
        #expect(try rig.ledger.pass().tombstones == 0)
        #expect(try rig.ledger.outbox() == settled)

        // Two changes before a push: one row per entity, a new mutation id each time, the latest payload.
        rig.clock.set(milliseconds: start + 20_000)
        try rig.put("d", "one")
        try rig.ledger.pass()
        let firstD = try #require(try rig.ledger.outbox().first { $0.id == "d" })
        try rig.put("d", "two")
        try rig.ledger.pass()
        let rowsD = try rig.ledger.outbox().filter { $0.id == "d" }
        #expect(rowsD.count == 1)
        #expect(rowsD.first?.mutation != firstD.mutation)
        let everyID = try rig.ledger.outbox().map(\.id)
        #expect(Set(everyID).count == everyID.count)
        let push = try #require(try rig.sync.nextPush())
        let sentD = try Self.pushed(push).filter { $0["id"] as? String == "d" }
        #expect(sentD.count == 1 && sentD.first?["payload"] as? String == Data("two".utf8).base64EncodedString() && sentD.first?["mutation"] as? String == rowsD.first?.mutation)
    }

    // MARK: - 2. Bad input changes nothing

    /// An app store as a list, which may list an identity twice or hold what does not encode.
    final class ListSource: LedgerSource {
        var identity = "list-store"
        var entities: [LedgerEntity] = []
        /// A value whose encoding is attempted while listing.
        var unencodable: Unencodable?

        func storeIdentity() throws -> String { identity }

        func forEachEntity(_ visit: (LedgerEntity) throws -> Void) throws {
            for entity in entities { try visit(entity) }
            if let unencodable { try visit(LedgerEntity(kind: "reading", id: "nan", encoding: unencodable)) }
        }

        // Names compared by their bytes, as a database compares them (Swift's `==` holds `é` and `e` + U+0301 equal).
        func payload(kind: String, id: String) throws -> [UInt8]? {
            entities.last { $0.kind.utf8.elementsEqual(kind.utf8) && $0.id.utf8.elementsEqual(id.utf8) }?.payload
        }

        func apply(_ changes: [LedgerChange]) throws {
            for change in changes {
                entities.removeAll { $0.kind.utf8.elementsEqual(change.kind.utf8) && $0.id.utf8.elementsEqual(change.id.utf8) }
                if case .upsert(let kind, let id, let payload) = change { entities.append(LedgerEntity(kind: kind, id: id, payload: payload)) }
            }
        }
    }

    struct Unencodable: Encodable {
        var value: Double
    }

    static func entity(_ id: String, _ value: String, kind: String = "note") -> LedgerEntity {
        LedgerEntity(kind: kind, id: id, payload: Array(value.utf8))
    }

    @Test func badInputFromTheStoreChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let source = ListSource()
        var configuration = Ledger.Configuration()
        configuration.clock = ManualWallClock(milliseconds: Self.start)
        configuration.maximumPayloadBytes = 64
        let ledger = try Ledger(path: directory.file("list.ledger"), source: source, account: Self.account, hub: Self.hub, configuration: configuration)
        source.entities = [Self.entity("a", "1"), Self.entity("b", "2"), Self.entity("c", "3")]
        try ledger.pass()
        let stamps = try ledger.stamps()
        let outbox = try ledger.outbox()
        #expect(stamps.count == 3 && outbox.count == 3)

        // Each listing also holds a change, a new entity and a removal, which a pass that went on would queue.
        let good = [Self.entity("a", "1 changed"), Self.entity("d", "4")]
        let cases: [(String, [LedgerEntity], LedgerError.Code)] = [
            ("a stamped identity twice", good + [Self.entity("a", "1 changed")], .duplicateEntity),
            ("a new identity twice", good + [Self.entity("e", "5"), Self.entity("e", "5")], .duplicateEntity),
            ("a new identity twice, different payloads", good + [Self.entity("e", "5"), Self.entity("e", "6")], .duplicateEntity),
            ("a payload over the limit", good + [Self.entity("big", String(repeating: "x", count: 65))], .invalidEntity),
            ("an empty kind", good + [Self.entity("x", "7", kind: "")], .invalidEntity),
            ("an empty id", good + [Self.entity("", "7")], .invalidEntity),
            ("a kind over 1,024 bytes", good + [Self.entity("x", "7", kind: String(repeating: "k", count: 1_025))], .invalidEntity),
            ("an id holding U+0000", good + [Self.entity("a\u{0}b", "7")], .invalidEntity),
            ("a kind holding U+0000", good + [Self.entity("x", "7", kind: "k\u{0}")], .invalidEntity),
        ]
        for (name, listing, code) in cases {
            source.entities = listing
            let error = #expect(throws: LedgerError.self, "\(name)") { try ledger.pass() }
            #expect(error?.code == code, "\(name)")
            #expect(try ledger.stamps() == stamps, "\(name)")
            #expect(try ledger.outbox() == outbox, "\(name)")
            #expect(ledger.halt == nil, "\(name)")
        }
        // A payload exactly at the limit is taken.
        source.entities = [Self.entity("a", "1"), Self.entity("b", "2"), Self.entity("c", "3"), Self.entity("edge", String(repeating: "x", count: 64))]
        #expect(try ledger.pass().upserts == 1)
        let stampsNow = try ledger.stamps()
        let outboxNow = try ledger.outbox()

        // A value that does not encode (NaN in JSON): the encoding error, nothing changed.
        let direct = #expect(throws: LedgerError.self) { _ = try LedgerEntity(kind: "reading", id: "r", encoding: Unencodable(value: .nan)) }
        #expect(direct?.code == .encoding)
        source.entities = good
        source.unencodable = Unencodable(value: .nan)
        let encoding = #expect(throws: LedgerError.self) { try ledger.pass() }
        #expect(encoding?.code == .encoding)
        #expect(try ledger.stamps() == stampsNow)
        #expect(try ledger.outbox() == outboxNow)
        #expect(ledger.halt == nil)
    }

    /// `LedgerSource.forEachEntity` lists "in any order": a source that does not list by
    /// (kind, id) is diffed as one that does, and a duplicate is still a duplicate.
    @Test func aSourceMayListItsEntitiesInAnyOrder() throws {
        let directory = try TemporaryDirectory()
        let source = ListSource()
        var configuration = Ledger.Configuration()
        configuration.clock = ManualWallClock(milliseconds: Self.start)
        let ledger = try Ledger(path: directory.file("list.ledger"), source: source, account: Self.account, hub: Self.hub, configuration: configuration)
        source.entities = [Self.entity("b", "2"), Self.entity("a", "1"), Self.entity("c", "3")]
        let first = try ledger.pass()
        #expect(first.entities == 3 && first.upserts == 3)
        #expect(try ledger.stamps().map(\.id) == ["a", "b", "c"])
        source.entities = [Self.entity("c", "3 changed"), Self.entity("a", "1"), Self.entity("b", "2")]
        let second = try ledger.pass()
        #expect(second.upserts == 1 && second.tombstones == 0)
        #expect(try ledger.stamp(kind: "note", id: "c")?.fingerprint == Self.fingerprint("3 changed"))
        source.entities = [Self.entity("b", "2"), Self.entity("a", "1"), Self.entity("b", "2")]
        let duplicate = #expect(throws: LedgerError.self) { try ledger.pass() }
        #expect(duplicate?.code == .duplicateEntity)
    }

    /// `é` as one character and as `e` + U+0301 are two entities to the app's
    /// store, the stamps and the hub, though Swift's `String` holds them equal: a
    /// pass keeps them apart, whatever order the source lists them in, and the
    /// deletion of either becomes its own tombstone.
    @Test(arguments: [false, true]) func entitiesWhoseIdsAreCanonicallyEqualAreTwo(inByteOrder: Bool) throws {
        let directory = try TemporaryDirectory()
        let source = ListSource()
        var configuration = Ledger.Configuration()
        configuration.clock = ManualWallClock(milliseconds: Self.start)
        let ledger = try Ledger(path: directory.file("list.ledger"), source: source, account: Self.account, hub: Self.hub, configuration: configuration)
        let composed = "\u{E9}"
        let decomposed = "e\u{301}"
        // In byte order: 65 CC 81, then 7A, then C3 A9.
        let both = [Self.entity(decomposed, "decomposed"), Self.entity("z", "z"), Self.entity(composed, "composed")]
        source.entities = inByteOrder ? both : both.reversed()
        let first = try ledger.pass()
        #expect(first.entities == 3 && first.upserts == 3)
        #expect(try ledger.stamps().map { Array($0.id.utf8) } == [Array(decomposed.utf8), Array("z".utf8), Array(composed.utf8)])
        // The composed one is deleted: its tombstone, and the decomposed one untouched.
        source.entities.removeAll { $0.id.utf8.elementsEqual(composed.utf8) }
        let second = try ledger.pass()
        #expect(second.upserts == 0 && second.tombstones == 1)
        let gone = try #require(try ledger.stamp(kind: "note", id: composed))
        #expect(gone.fingerprint == nil)
        let kept = try ledger.stamps().filter { $0.id.utf8.elementsEqual(decomposed.utf8) }
        #expect(kept.count == 1 && kept.first?.fingerprint == Self.fingerprint("decomposed"))
        // A pass with nothing changed queues nothing.
        let third = try ledger.pass()
        #expect(third.upserts == 0 && third.tombstones == 0)
    }

    // MARK: - 3. An app's own Codable file as a source

    struct Note: Codable, Equatable {
        var title: String
        var body: String
    }

    /// The example the docs point to: a `LedgerSource` over an app's own Codable
    /// file. The app keeps its notes as it likes (here one JSON file holding
    /// `{"identity": UUID, "notes": {id: Note}}`); the store's identity is a UUID
    /// written inside the file when it was made, so a file wiped or replaced
    /// reports another one. Entities are built with `LedgerEntity(kind:id:encoding:)`,
    /// whose sorted-key JSON gives one value one fingerprint. Remote changes are
    /// applied all or none: the whole file is rewritten atomically. The app deletes
    /// a note by removing it; the ledger's next pass makes the tombstone.
    final class NotesFile: LedgerSource {
        struct Contents: Codable {
            var identity: String
            var notes: [String: Note]
        }

        let url: URL

        init(path: String) throws {
            url = URL(fileURLWithPath: path)
            if !FileManager.default.fileExists(atPath: path) { try save(Contents(identity: UUID().uuidString, notes: [:])) }
        }

        func load() throws -> Contents { try JSONDecoder().decode(Contents.self, from: Data(contentsOf: url)) }

        func save(_ contents: Contents) throws {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try encoder.encode(contents).write(to: url, options: .atomic)
        }

        // The app's own writes.
        func write(_ id: String, _ note: Note) throws {
            var contents = try load()
            contents.notes[id] = note
            try save(contents)
        }

        func remove(_ id: String) throws {
            var contents = try load()
            contents.notes[id] = nil
            try save(contents)
        }

        // LedgerSource
        func storeIdentity() throws -> String { try load().identity }

        func forEachEntity(_ visit: (LedgerEntity) throws -> Void) throws {
            // Any order will do (see `aSourceMayListItsEntitiesInAnyOrder`); by id keeps this example's runs alike.
            for (id, note) in try load().notes.sorted(by: { $0.key < $1.key }) { try visit(LedgerEntity(kind: "note", id: id, encoding: note)) }
        }

        func payload(kind: String, id: String) throws -> [UInt8]? {
            guard kind == "note", let note = try load().notes[id] else { return nil }
            return try LedgerEntity(kind: kind, id: id, encoding: note).payload
        }

        func apply(_ changes: [LedgerChange]) throws {
            var contents = try load()
            for change in changes where change.kind == "note" {
                switch change {
                case .upsert(_, let id, let payload): contents.notes[id] = try JSONDecoder().decode(Note.self, from: Data(payload))
                case .delete(_, let id): contents.notes[id] = nil
                }
            }
            try save(contents)
        }
    }

    @Test func aCodableJSONFileSyncsBothWays() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualWallClock(milliseconds: Self.start)
        let notes = try NotesFile(path: directory.file("notes.json"))
        let groceries = Note(title: "Groceries", body: "eggs, milk")
        let ideas = Note(title: "Ideas", body: "a ledger")
        try notes.write("n1", groceries)
        try notes.write("n2", ideas)
        var configuration = Ledger.Configuration()
        configuration.clock = clock
        let ledger = try Ledger(path: directory.file("notes.ledger"), source: notes, account: Self.account, hub: Self.hub, configuration: configuration)
        let sync = LedgerSync(ledger: ledger)

        // A pass pushes the notes, encoded with sorted keys.
        #expect(try ledger.pass().upserts == 2)
        let push = try #require(try sync.nextPush())
        let sent = try Self.pushed(push)
        let decoded = try sent.reduce(into: [String: Note]()) { notes, item in
            let payload = try #require(Data(base64Encoded: item["payload"] as? String ?? ""))
            notes[item["id"] as? String ?? ""] = try JSONDecoder().decode(Note.self, from: payload)
            #expect(item["kind"] as? String == "note" && item["op"] as? String == "put")
        }
        #expect(decoded == ["n1": groceries, "n2": ideas])
        let results = Self.mutations(of: push).enumerated().map { ["mutation": $1, "status": "applied", "seq": $0 + 1] as [String: Any] }
        let answer = try JSONSerialization.data(withJSONObject: ["historyId": 2, "results": results])
        #expect(try sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](answer))), to: push) == .pushed(gated: 0, retired: 2, conflicts: 0, restamped: 0))
        #expect(try ledger.outbox().isEmpty)

        // Another device wrote n3 and deleted n1: both land in the file.
        let errands = Note(title: "Errands", body: "post office")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let page = try JSONSerialization.data(withJSONObject: [
            "changes": [
                Self.record("n3", [UInt8](try encoder.encode(errands)), at: Self.start + 1_000, seq: 3),
                Self.record("n1", nil as [UInt8]?, at: Self.start + 2_000, seq: 4),
            ],
            "next": 4, "epoch": "e1", "more": false,
        ])
        let request = try sync.nextPull()
        #expect(try sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](page))), to: request) == .pulled(changed: 2, retired: 0, superseded: 0, more: false))
        #expect(try notes.load().notes == ["n2": ideas, "n3": errands])
        #expect(try ledger.stamp(kind: "note", id: "n1")?.isTombstone == true)

        // The file holds what the ledger stamped: the next pass sends nothing back.
        let after = try ledger.pass()
        #expect(after.upserts == 0 && after.tombstones == 0 && after.entities == 2)
        #expect(try ledger.outbox().isEmpty)
        // And the app's own deletion goes out as a tombstone.
        try notes.remove("n2")
        #expect(try ledger.pass().tombstones == 1)
        #expect(try ledger.outbox().map { "\($0.id) \($0.op)" } == ["n2 delete"])
    }

    // MARK: - 4. Wipes

    @Test func aReplacedStoreHaltsSyncAcrossReopeningUntilReset() throws {
        let rig = try Rig()
        for id in ["a", "b", "c"] { try rig.put(id, "value \(id)") }
        try rig.ledger.pass()
        try rig.flush()
        let stamps = try rig.ledger.stamps()
        try rig.store.wipe()
        try rig.put("fresh", "written after the wipe")
        let error = #expect(throws: LedgerError.self) { try rig.ledger.pass() }
        #expect(error?.code == .storeReplaced)
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.ledger.stamps() == stamps)
        #expect(rig.ledger.halt?.code == .storeReplaced)

        try rig.reopen()
        #expect(rig.ledger.halt?.code == .storeReplaced)
        #expect(try rig.ledger.status().halt?.code == .storeReplaced)
        let push = #expect(throws: LedgerError.self) { _ = try rig.sync.nextPush() }
        #expect(push?.code == .storeReplaced)
        let pull = #expect(throws: LedgerError.self) { _ = try rig.sync.nextPull() }
        #expect(pull?.code == .storeReplaced)
        let again = #expect(throws: LedgerError.self) { try rig.ledger.pass() }
        #expect(again?.code == .storeReplaced)
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.ledger.stamps() == stamps)

        #expect(try rig.ledger.reset() == nil)
        #expect(rig.ledger.halt == nil)
        #expect(try rig.ledger.pass().adopting)
        #expect(try rig.sync.nextPush() == nil)
        #expect(try rig.sync.nextPull().path.hasPrefix("records/changes?since=0&"))
    }

    @Test func anEmptiedStoreHaltsSyncUntilReset() throws {
        let rig = try Rig()
        for id in ["a", "b", "c"] { try rig.put(id, "value \(id)") }
        try rig.ledger.pass()
        try rig.flush()
        let stamps = try rig.ledger.stamps()
        try rig.store.wipe(keepingIdentity: true)
        let error = #expect(throws: LedgerError.self) { try rig.ledger.pass() }
        #expect(error?.code == .storeEmptied)
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.ledger.stamps() == stamps)
        try rig.reopen()
        #expect(rig.ledger.halt?.code == .storeEmptied)
        let push = #expect(throws: LedgerError.self) { _ = try rig.sync.nextPush() }
        #expect(push?.code == .storeEmptied)
        try rig.ledger.reset()
        #expect(rig.ledger.halt == nil)
    }

    @Test func anEmptyStoreTheUserConfirmsBecomesTombstones() throws {
        let rig = try Rig()
        for id in ["a", "b", "c"] { try rig.put(id, "value \(id)") }
        try rig.ledger.pass()
        try rig.flush()
        try rig.store.wipe(keepingIdentity: true)
        let report = try rig.ledger.pass(confirmingEmptyStore: true)
        #expect(report.tombstones == 3 && report.entities == 0)
        #expect(try rig.ledger.outbox().map { "\($0.id) \($0.op)" } == ["a delete", "b delete", "c delete"])
        #expect(try rig.ledger.stamps().allSatisfy(\.isTombstone))
        #expect(rig.ledger.halt == nil)
    }

    @Test func aWaveOfDeletionsIsRefusedUntilConfirmed() throws {
        let rig = try Rig()
        for index in 0..<10 { try rig.put("n\(index)", "value \(index)") }
        try rig.ledger.pass()
        try rig.flush()
        let stamps = try rig.ledger.stamps()
        for index in 0..<6 { try rig.remove("n\(index)") }
        let error = #expect(throws: LedgerError.self) { try rig.ledger.pass() }
        #expect(error?.code == .massDeletion)
        #expect(rig.ledger.halt?.code == .massDeletion)
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.ledger.stamps() == stamps)
        let push = #expect(throws: LedgerError.self) { _ = try rig.sync.nextPush() }
        #expect(push?.code == .massDeletion)
        // Fewer confirmed than found: still refused.
        let short = #expect(throws: LedgerError.self) { try rig.ledger.pass(confirmingDeletions: 5) }
        #expect(short?.code == .massDeletion)
        #expect(try rig.ledger.outbox().isEmpty)

        let confirmed = try rig.ledger.pass(confirmingDeletions: 6)
        #expect(confirmed.tombstones == 6)
        #expect(rig.ledger.halt == nil)
        #expect(try rig.ledger.outbox().filter { $0.op == "delete" }.count == 6)
        #expect(try rig.sync.nextPush() != nil)

        // Half of the store is not a wave.
        let other = try Rig()
        for index in 0..<10 { try other.put("n\(index)", "value \(index)") }
        try other.ledger.pass()
        try other.flush()
        for index in 0..<5 { try other.remove("n\(index)") }
        #expect(try other.ledger.pass().tombstones == 5)
        #expect(other.ledger.halt == nil)
        #expect(try other.ledger.outbox().count == 5)
    }

    // MARK: - 5. Corrupt bookkeeping halts

    @Test func aDamagedPageHaltsAndTheFileIsKeptAsEvidence() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.put("b", "beta")
        try rig.ledger.pass()
        try rig.flush()
        rig.ledger.close()
        let path = rig.ledgerPath
        var root: Int64 = 0
        var pageSize: Int64 = 0
        do {
            let reader = try Connection(path: path, mode: .readOnly, configuration: nil)
            root = try #require(try reader.scalarInt("SELECT rootpage FROM sqlite_master WHERE name = 'ledger_stamps'"))
            pageSize = try #require(try reader.scalarInt("PRAGMA page_size"))
        }
        #expect(root > 1 && pageSize >= 512)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64((root - 1) * pageSize))
        try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(pageSize)))
        try handle.close()
        let damaged = try Self.digest(ofFile: path)

        try rig.reopen()
        #expect(rig.ledger.halt?.code == .corrupt)
        #expect(rig.ledger.halt?.file == path)
        #expect(try Self.digest(ofFile: path) == damaged)
        #expect(FileManager.default.fileExists(atPath: path + ".halted"))
        let refused = #expect(throws: LedgerError.self) { try rig.ledger.pass() }
        #expect(refused?.code == .corrupt)
        let push = #expect(throws: LedgerError.self) { _ = try rig.sync.nextPush() }
        #expect(push?.code == .corrupt)
        // Opened again, still halted (the note says so), the file still untouched.
        try rig.reopen()
        #expect(rig.ledger.halt?.code == .corrupt)
        #expect(try Self.digest(ofFile: path) == damaged)

        let evidence = try #require(try rig.ledger.reset())
        #expect(evidence != path)
        #expect(try Self.digest(ofFile: evidence) == damaged)
        #expect(!FileManager.default.fileExists(atPath: path + ".halted"))
        #expect(rig.ledger.halt == nil)
        // The fresh ledger works: it downloads first, then sends what the hub lacks.
        #expect(try rig.ledger.pass().adopting)
        #expect(try rig.pull([Self.record("a", "alpha", at: Self.start, seq: 1)], next: 1) == .pulled(changed: 1, retired: 0, superseded: 0, more: false))
        let report = try rig.ledger.pass()
        #expect(report.adopting == false && report.entities == 2 && report.upserts == 1)
        #expect(try rig.ledger.outbox().map { "\($0.id) \($0.op)" } == ["b put"])
    }

    @Test func aStampThatDoesNotParseHalts() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.ledger.pass()
        rig.ledger.close()
        do {
            let writer = try Connection(path: rig.ledgerPath, configuration: nil)
            try writer.execute("PRAGMA ignore_check_constraints = ON")
            try writer.execute("UPDATE ledger_stamps SET fingerprint = x'0102030405' WHERE kind = 'note' AND id = 'a'")
            #expect(try writer.scalarInt("SELECT length(fingerprint) FROM ledger_stamps WHERE id = 'a'") == 5)
        }
        try rig.reopen()
        #expect(rig.ledger.halt?.code == .corrupt)
        let refused = #expect(throws: LedgerError.self) { try rig.ledger.pass() }
        #expect(refused?.code == .corrupt)
        #expect(FileManager.default.fileExists(atPath: rig.ledgerPath + ".halted"))
    }

    @Test func aLedgerOfANewerSteleHalts() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.ledger.pass()
        rig.ledger.close()
        do {
            let writer = try Connection(path: rig.ledgerPath, configuration: nil)
            try writer.execute("PRAGMA user_version = 99")
        }
        let before = try Self.digest(ofFile: rig.ledgerPath)
        try rig.reopen()
        #expect(rig.ledger.halt?.code == .newerFormat)
        #expect(try Self.digest(ofFile: rig.ledgerPath) == before)
        let push = #expect(throws: LedgerError.self) { _ = try rig.sync.nextPush() }
        #expect(push?.code == .newerFormat)
    }

    @Test func aDatabaseOfAnotherProgramIsRefusedAndLeftAlone() throws {
        let directory = try TemporaryDirectory()
        let store = try SQLiteTableSource(path: directory.file("app.sqlite"))
        let path = directory.file("other.sqlite")
        do {
            let other = try Connection(path: path, configuration: nil)
            try other.execute("CREATE TABLE recipes (name TEXT, steps TEXT)")
            try other.execute("INSERT INTO recipes VALUES ('bread', 'knead')")
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let error = #expect(throws: LedgerError.self) { _ = try Ledger(path: path, source: store, account: Self.account, hub: Self.hub) }
        #expect(error?.code == .notALedger)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(!FileManager.default.fileExists(atPath: path + ".halted"))
    }

    @Test func aLedgerOfAnotherAccountOrHubIsRefused() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.ledger.pass()
        rig.ledger.close()
        let before = try Self.digest(ofFile: rig.ledgerPath)
        let account = #expect(throws: LedgerError.self) { _ = try Ledger(path: rig.ledgerPath, source: rig.store, account: "account-2", hub: Self.hub) }
        #expect(account?.code == .wrongAccount)
        let hub = #expect(throws: LedgerError.self) { _ = try Ledger(path: rig.ledgerPath, source: rig.store, account: Self.account, hub: "https://other.example") }
        #expect(hub?.code == .wrongAccount)
        #expect(try Self.digest(ofFile: rig.ledgerPath) == before)
        #expect(!FileManager.default.fileExists(atPath: rig.ledgerPath + ".halted"))
        try rig.reopen()
        #expect(rig.ledger.halt == nil)
        #expect(try rig.ledger.stamps().map(\.id) == ["a"])
    }

    @Test func aCursorBeyondTheHubsHistoryHaltsAndAnotherEpochReplays() throws {
        for epoch in ["e1", "e2"] {
            let rig = try Rig()
            try rig.pull([], next: 10)
            #expect(try rig.ledger.status().cursorHistoryID == 10)
            let request = try rig.sync.nextPull()
            #expect(request.purpose == .changes && request.path.contains("since=10") && request.path.contains("epoch=e1"))
            let body = try JSONSerialization.data(withJSONObject: ["error": ["code": "history_gone", "message": "rewound"], "epoch": epoch, "historyId": 5])
            let reply = MirrorReply.answer(HubAnswer(status: 409, body: [UInt8](body)))
            if epoch == "e1" {
                let error = #expect(throws: LedgerError.self) { _ = try rig.sync.handle(reply, to: request) }
                #expect(error?.code == .corrupt)
                #expect(rig.ledger.halt?.code == .corrupt)
                let push = #expect(throws: LedgerError.self) { _ = try rig.sync.nextPull() }
                #expect(push?.code == .corrupt)
            } else {
                #expect(try rig.sync.handle(reply, to: request) == .replayStarted)
                #expect(rig.ledger.halt == nil)
                #expect(try rig.ledger.status().replaying == "rewind")
                #expect(try rig.sync.nextPull().purpose == .replay)
            }
        }
    }

    // MARK: - 6. A remote deletion known by name alone

    @Test func aDeletionByNameAloneBecomesAProperTombstone() throws {
        let rig = try Rig()
        for id in ["a", "b", "c", "d"] { try rig.put(id, "value \(id)") }
        try rig.ledger.pass()
        try rig.flush()
        let live = try #require(try rig.stamp("a"))

        // The clock behind the stamp: dated just after it.
        rig.clock.advance(byMilliseconds: -30_000)
        let date = try #require(try rig.ledger.completeRemoteDeletion(kind: "note", id: "a"))
        #expect(date == live.modifiedAt + 1)
        #expect(try rig.value("a") == nil)
        #expect(try rig.stamp("a") == Ledger.Stamp(kind: "note", id: "a", fingerprint: nil, modifiedAt: date, seq: 0, unsent: false))
        #expect(try Self.rows(rig.ledger) == ["a delete \(date) pending"])
        // The clock ahead: dated now.
        rig.clock.set(milliseconds: Self.start + 600_000)
        #expect(try rig.ledger.completeRemoteDeletion(kind: "note", id: "b") == Self.start + 600_000)
        #expect(try rig.value("b") == nil)
        #expect(try rig.stamp("b")?.isTombstone == true)

        // No stamp: nothing to delete, nothing to date, nothing changed.
        try rig.put("e", "not yet seen by a pass")
        let stamps = try rig.ledger.stamps()
        let outbox = try rig.ledger.outbox()
        #expect(try rig.ledger.completeRemoteDeletion(kind: "note", id: "e") == nil)
        #expect(try rig.ledger.completeRemoteDeletion(kind: "note", id: "never") == nil)
        #expect(try rig.value("e") == "not yet seen by a pass")
        #expect(try rig.ledger.stamps() == stamps)
        #expect(try rig.ledger.outbox() == outbox)

        // Again: the same date, nothing queued again.
        rig.clock.advance(byMilliseconds: 5_000)
        #expect(try rig.ledger.completeRemoteDeletion(kind: "note", id: "a") == date)
        #expect(try rig.ledger.outbox() == outbox)
        #expect(try rig.ledger.stamps() == stamps)
        // The pass after it finds only the new entity.
        let report = try rig.ledger.pass()
        #expect(report.upserts == 1 && report.tombstones == 0)
    }

    // MARK: - 7. A crash between the app's transaction and the ledger's

    @Test func aJournaledVersionTheStoreHoldsIsAdoptedAndOneItLacksIsDropped() throws {
        let rig = try Rig()
        try rig.put("a", "v1")
        try rig.put("b", "other")
        try rig.ledger.pass()
        try rig.flush()
        let connection = try #require(rig.ledger.connection)
        let remote = Self.start + 5_000

        // The journal was written and the store's transaction committed; the ledger's never ran.
        try connection.execute(
            "INSERT INTO ledger_applying (kind, id, fingerprint, modified_at, seq) VALUES ('note', 'a', ?, ?, 7)", [.blob(Self.fingerprint("v2").bytes), .integer(remote)])
        try rig.put("a", "v2")
        let report = try rig.ledger.pass()
        #expect(report.recovered == 1 && report.upserts == 0 && report.tombstones == 0)
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.stamp("a") == Ledger.Stamp(kind: "note", id: "a", fingerprint: Self.fingerprint("v2"), modifiedAt: remote, seq: 7, unsent: false))
        #expect(try connection.scalarInt("SELECT count(*) FROM ledger_applying") == 0)

        // The journal was written and the store's transaction did not commit.
        let stamps = try rig.ledger.stamps()
        try connection.execute(
            "INSERT INTO ledger_applying (kind, id, fingerprint, modified_at, seq) VALUES ('note', 'a', ?, ?, 8)", [.blob(Self.fingerprint("v3").bytes), .integer(remote + 5_000)])
        let mirror = try rig.ledger.pass()
        #expect(mirror.recovered == 0 && mirror.upserts == 0 && mirror.tombstones == 0)
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.ledger.stamps() == stamps)
        #expect(try rig.value("a") == "v2")
        #expect(try connection.scalarInt("SELECT count(*) FROM ledger_applying") == 0)
    }

    // MARK: - 8. Push answers

    @Test func anAppliedPushLeavesTheOutboxAndSetsTheSeq() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.ledger.pass()
        let flushed = try #require(try rig.flush(seq: 7))
        #expect(flushed.step == .pushed(gated: 0, retired: 1, conflicts: 0, restamped: 0))
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.stamp("a")?.seq == 7)
        #expect(try rig.sync.nextPush() == nil)
    }

    @Test func aStalePushFetchesTheHubsVersionIntoTheStore() throws {
        let rig = try Rig()
        try rig.put("a", "mine")
        try rig.ledger.pass()
        let mine = try #require(try rig.stamp("a"))
        let flushed = try #require(try rig.flush("stale"))
        #expect(flushed.step == .pushed(gated: 0, retired: 0, conflicts: 1, restamped: 0))
        #expect(try rig.ledger.outbox().isEmpty)
        let conflict = try #require(try rig.ledger.conflicts().first)
        #expect(conflict.id == "a" && conflict.op == "put" && conflict.reason == "stale" && conflict.losingModifiedAt == mine.modifiedAt)

        let fetch = try rig.sync.nextPull()
        #expect(fetch.purpose == .fetch(kind: "note", id: "a") && fetch.method == "GET" && fetch.path == "records/note/a")
        let record = try JSONSerialization.data(withJSONObject: Self.record("a", "theirs", at: mine.modifiedAt + 500, seq: 9))
        #expect(try rig.sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](record))), to: fetch) == .fetched(changed: 1))
        #expect(try rig.value("a") == "theirs")
        #expect(try rig.stamp("a") == Ledger.Stamp(kind: "note", id: "a", fingerprint: Self.fingerprint("theirs"), modifiedAt: mine.modifiedAt + 500, seq: 9, unsent: false))
        #expect(try rig.sync.nextPull().purpose == .changes)
        #expect(try rig.ledger.pass().upserts == 0)
        #expect(try rig.ledger.outbox().isEmpty)
    }

    @Test func aRefusedTombstoneOfAnAppendOnlyKindBringsTheLiveCopyBack() throws {
        let rig = try Rig()
        for id in ["w1", "w2", "w3"] { try rig.put(id, "workout \(id)", kind: "workout") }
        try rig.ledger.pass()
        try rig.flush()
        let live = try #require(try rig.stamp("w1", kind: "workout"))
        rig.clock.advance(byMilliseconds: 1_000)
        try rig.remove("w1", kind: "workout")
        #expect(try rig.ledger.pass().tombstones == 1)
        let flushed = try #require(try rig.flush("refused", reason: "append_only"))
        #expect(flushed.step == .pushed(gated: 0, retired: 0, conflicts: 1, restamped: 0))
        #expect(try rig.ledger.conflicts().map { "\($0.id) \($0.op) \($0.reason)" } == ["w1 delete refused: append_only"])
        #expect(try rig.ledger.outbox().isEmpty)

        let fetch = try rig.sync.nextPull()
        #expect(fetch.purpose == .fetch(kind: "workout", id: "w1") && fetch.path == "records/workout/w1")
        let record = try JSONSerialization.data(withJSONObject: Self.record("w1", "workout w1", at: live.modifiedAt, seq: 1, kind: "workout"))
        #expect(try rig.sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](record))), to: fetch) == .fetched(changed: 1))
        #expect(try rig.value("w1", kind: "workout") == "workout w1")
        #expect(try rig.stamp("w1", kind: "workout")?.fingerprint == Self.fingerprint("workout w1"))
        let report = try rig.ledger.pass()
        #expect(report.upserts == 0 && report.tombstones == 0)
        #expect(try rig.ledger.outbox().isEmpty)
    }

    @Test func aClockSkewRefusalRestampsFromTheHubsClock() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.ledger.pass()
        let row = try #require(try rig.ledger.outbox().first)
        let hubTime = Self.start - 3_600_000
        let flushed = try #require(try rig.flush("refused", reason: "clock_skew", hubTime: hubTime))
        #expect(flushed.step == .pushed(gated: 0, retired: 0, conflicts: 0, restamped: 1))
        let restamped = try #require(try rig.ledger.outbox().first)
        #expect(restamped.mutation != row.mutation && restamped.modifiedAt == hubTime && restamped.attempts == 1 && restamped.state == "pending")
        #expect(try rig.stamp("a")?.modifiedAt == hubTime)
        #expect(try rig.ledger.conflicts().isEmpty)
        let next = try #require(try rig.sync.nextPush())
        #expect(Self.mutations(of: next) == [restamped.mutation])
        #expect(try Self.pushed(next).first?["modifiedAt"] as? Int64 == hubTime)
        // Later changes are dated by the corrected clock.
        rig.clock.advance(byMilliseconds: 1_000)
        try rig.put("b", "beta")
        try rig.ledger.pass()
        #expect(try rig.stamp("b")?.modifiedAt == hubTime + 1_000)
    }

    @Test func aLostAnswerSendsTheSameMutationAgain() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.ledger.pass()
        let first = try #require(try rig.sync.nextPush())
        #expect(try rig.sync.handle(.lost("timed out"), to: first) == .pushFailed(reason: "timed out", countsAttempt: true, failedNow: 0, reachable: true))
        let row = try #require(try rig.ledger.outbox().first)
        #expect(row.attempts == 1 && row.state == "pending" && Self.mutations(of: first) == [row.mutation])
        #expect(try rig.sync.nextPush() == nil)
        rig.clock.advance(byMilliseconds: 1_001)
        let second = try #require(try rig.sync.nextPush())
        #expect(second.purpose == first.purpose)
        let resent = try Self.pushed(second).first
        #expect(resent?["mutation"] as? String == row.mutation && resent?["modifiedAt"] as? Int64 == row.modifiedAt)
        #expect(resent?["payload"] as? String == Data("alpha".utf8).base64EncodedString())
        #expect(try rig.ledger.outbox().map(\.attempts) == [1])
    }

    @Test func failuresBackOffUntilFailedAndAnUnreachableHubCostsNothing() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.ledger.pass()
        for _ in 0..<3 {
            let request = try #require(try rig.sync.nextPush())
            let step = try rig.sync.handle(.unreachable("connection refused"), to: request)
            #expect(step == .pushFailed(reason: "connection refused", countsAttempt: false, failedNow: 0, reachable: false))
        }
        #expect(try rig.ledger.outbox().map(\.attempts) == [0])
        let boom = Array(#"{"error":{"code":"internal","message":"boom"}}"#.utf8)
        for attempt in 1...5 {
            let request = try #require(try rig.sync.nextPush(), "attempt \(attempt)")
            let step = try rig.sync.handle(.answer(HubAnswer(status: 500, body: boom)), to: request)
            #expect(step == .pushFailed(reason: "the hub answered the push 500 internal: boom", countsAttempt: true, failedNow: attempt == 5 ? 1 : 0, reachable: true))
            #expect(try rig.ledger.outbox().first?.attempts == attempt)
            #expect(try rig.sync.nextPush() == nil)
            rig.clock.advance(byMilliseconds: 61_000)
        }
        #expect(try rig.ledger.outbox().map(\.state) == ["failed"])
        #expect(try rig.ledger.status().failed == 1)
        #expect(try rig.sync.nextPush() == nil)
        try rig.ledger.retryFailed()
        #expect(try rig.ledger.outbox().map { "\($0.state) \($0.attempts)" } == ["pending 0"])
        #expect(try rig.sync.nextPush() != nil)
    }

    // MARK: - 9. Pulls

    /// A put, pushed, its answer and its echo in either order (the echo after a lost answer, then the retry's late answer).
    func echoRun(answerFirst: Bool) throws -> Rig {
        let rig = try Rig()
        try rig.put("a", "mine")
        try rig.put("b", "other")
        try rig.ledger.pass()
        let dates = try rig.ledger.stamps().map(\.modifiedAt)
        let echo = [Self.record("a", "mine", at: dates[0], seq: 5), Self.record("b", "other", at: dates[1], seq: 6)]
        if answerFirst {
            try rig.flush(seq: 5)
            #expect(try rig.ledger.outbox().isEmpty)
            #expect(try rig.pull(echo, next: 6) == .pulled(changed: 0, retired: 0, superseded: 0, more: false))
        } else {
            let first = try #require(try rig.sync.nextPush())
            _ = try rig.sync.handle(.lost("timed out"), to: first)
            rig.clock.advance(byMilliseconds: 1_001)
            let retry = try #require(try rig.sync.nextPush())
            #expect(retry.purpose == first.purpose)
            try rig.pull(echo, next: 6)
            #expect(try rig.ledger.outbox().isEmpty)
            let results = Self.mutations(of: retry).enumerated().map { ["mutation": $1, "status": "applied", "seq": 5 + $0] as [String: Any] }
            #expect(try rig.answer(retry, results, history: 6) == .pushed(gated: 0, retired: 0, conflicts: 0, restamped: 0))
        }
        return rig
    }

    @Test func anEchoRetiresAPendingChangeWhicheverComesFirst() throws {
        let answered = try echoRun(answerFirst: true)
        let echoed = try echoRun(answerFirst: false)
        for rig in [answered, echoed] {
            #expect(try rig.ledger.outbox().isEmpty)
            #expect(try rig.ledger.conflicts().isEmpty)
            #expect(try rig.ledger.stamps().map(\.seq) == [5, 6])
            #expect(try rig.value("a") == "mine")
        }
        #expect(try answered.ledger.stamps() == echoed.ledger.stamps())
        #expect(try answered.ledger.outbox() == echoed.ledger.outbox())
        #expect(try answered.ledger.status().cursorHistoryID == echoed.ledger.status().cursorHistoryID)
        #expect(try answered.ledger.pass().upserts == 0)
        #expect(try echoed.ledger.pass().upserts == 0)
    }

    @Test func aNewerRemoteVersionSupersedesAPendingOne() throws {
        let rig = try Rig()
        try rig.put("a", "mine")
        try rig.ledger.pass()
        let pending = try #require(try rig.ledger.outbox().first)
        try rig.pull([Self.record("a", "theirs", at: pending.modifiedAt + 1_000, seq: 3)], next: 3)
        #expect(try rig.value("a") == "theirs")
        #expect(try rig.ledger.outbox().isEmpty)
        #expect(try rig.ledger.conflicts().map { "\($0.id) \($0.op) \($0.losingModifiedAt) \($0.reason)" } == ["a put \(pending.modifiedAt) superseded"])
        #expect(try rig.stamp("a") == Ledger.Stamp(kind: "note", id: "a", fingerprint: Self.fingerprint("theirs"), modifiedAt: pending.modifiedAt + 1_000, seq: 3, unsent: false))
        #expect(try rig.ledger.pass().upserts == 0)
    }

    @Test func anOlderRemoteVersionLosesToAPendingOne() throws {
        let rig = try Rig()
        try rig.put("a", "mine")
        try rig.ledger.pass()
        let outbox = try rig.ledger.outbox()
        let stamp = try #require(try rig.stamp("a"))
        try rig.pull([Self.record("a", "theirs", at: stamp.modifiedAt - 1_000, seq: 3)], next: 3)
        #expect(try rig.value("a") == "mine")
        #expect(try rig.ledger.outbox() == outbox)
        #expect(try rig.stamp("a")?.fingerprint == Self.fingerprint("mine"))
        #expect(try rig.ledger.conflicts().isEmpty)
        #expect(try Self.mutations(of: #require(try rig.sync.nextPush())) == outbox.map(\.mutation))
    }

    @Test func aRemoteVersionLeavesAnEditNoPassHasSeenAndThePassDatesItAfter() throws {
        let rig = try Rig()
        try rig.put("a", "v1")
        try rig.put("b", "other")
        try rig.ledger.pass()
        try rig.flush()
        try rig.put("a", "edited")
        let remote = Self.start + 50_000
        try rig.pull([Self.record("a", "theirs", at: remote, seq: 3)], next: 3)
        #expect(try rig.value("a") == "edited")
        #expect(try rig.stamp("a")?.modifiedAt == remote)
        let report = try rig.ledger.pass()
        #expect(report.upserts == 1)
        #expect(try Self.rows(rig.ledger) == ["a put \(remote + 1) pending"])
        #expect(try rig.stamp("a")?.fingerprint == Self.fingerprint("edited"))
    }

    // MARK: - 10. Replay

    @Test func aReplayKeepsNewerLocalEditsAndTombstonesAndTakesNewerRemoteVersions() throws {
        let rig = try Rig()
        for id in ["k", "w", "x", "y", "z"] { try rig.put(id, "\(id)1") }
        try rig.ledger.pass()
        try rig.flush(seq: 1)
        try rig.pull([], next: 10)
        let t0 = Self.start
        // A tombstone the hub took (w), then a pending edit (x) and a pending tombstone (y).
        rig.clock.advance(byMilliseconds: 1_000)
        try rig.remove("w")
        try rig.ledger.pass()
        try rig.flush(seq: 11)
        rig.clock.advance(byMilliseconds: 1_000)
        try rig.put("x", "x2")
        try rig.remove("y")
        try rig.ledger.pass()
        let outbox = try rig.ledger.outbox()
        #expect(outbox.map { "\($0.id) \($0.op)" } == ["x put", "y delete"])
        let tombstoneW = try #require(try rig.stamp("w"))

        try rig.sync.startReplay()
        #expect(try rig.ledger.status().replaying == "explicit")
        let step = try rig.replay([
            Self.record("k", "k1", at: t0, seq: 1),
            Self.record("w", "w1", at: t0, seq: 2),
            Self.record("x", "x1", at: t0, seq: 3),
            Self.record("y", "y1", at: t0, seq: 4),
            Self.record("z", "z remote", at: t0 + 5_000, seq: 12),
        ])
        #expect(step == .replayed(records: 1, more: false))
        #expect(try rig.value("k") == "k1")
        #expect(try rig.value("w") == nil)
        #expect(try rig.value("x") == "x2")
        #expect(try rig.value("y") == nil)
        #expect(try rig.value("z") == "z remote")
        #expect(try rig.ledger.outbox() == outbox)
        #expect(try rig.stamp("w")?.isTombstone == true && rig.stamp("w")?.modifiedAt == tombstoneW.modifiedAt)
        #expect(try rig.stamp("y")?.isTombstone == true)
        #expect(try rig.stamp("z")?.fingerprint == Self.fingerprint("z remote"))
        let status = try rig.ledger.status()
        #expect(status.cursorHistoryID == 10 && status.cursorEpoch == "e1" && status.replaying == nil)
        #expect(try rig.sync.nextPull().path.hasPrefix("records/changes?since=10&"))
    }

    @Test func aRewoundHubIsSentWhatItLacksWithTheOriginalDate() throws {
        let rig = try Rig()
        try rig.put("a", "alpha")
        try rig.put("b", "beta")
        try rig.ledger.pass()
        try rig.flush(seq: 1)
        let stampA = try #require(try rig.stamp("a"))
        let stampB = try #require(try rig.stamp("b"))
        try rig.pull([Self.record("a", "alpha", at: stampA.modifiedAt, seq: 1), Self.record("b", "beta", at: stampB.modifiedAt, seq: 2)], next: 2)
        rig.clock.advance(byMilliseconds: 100_000)

        let request = try rig.sync.nextPull()
        let rewound = try JSONSerialization.data(withJSONObject: ["error": ["code": "history_gone", "message": "rewound"], "epoch": "e2", "historyId": 1])
        #expect(try rig.sync.handle(.answer(HubAnswer(status: 409, body: [UInt8](rewound))), to: request) == .replayStarted)
        #expect(try rig.replay([Self.record("a", "alpha", at: stampA.modifiedAt, seq: 1)]) == .replayed(records: 0, more: false))
        #expect(try rig.stamp("b")?.unsent == true)
        #expect(try rig.stamp("a")?.unsent == false)
        let status = try rig.ledger.status()
        #expect(status.cursorEpoch == "e2" && status.cursorHistoryID == 1 && status.replaying == nil)

        let report = try rig.ledger.pass()
        #expect(report.resent == 1 && report.upserts == 0 && report.tombstones == 0)
        #expect(try Self.rows(rig.ledger) == ["b put \(stampB.modifiedAt) pending"])
        let push = try #require(try rig.sync.nextPush())
        let sent = try Self.pushed(push)
        #expect(sent.count == 1 && sent.first?["payload"] as? String == Data("beta".utf8).base64EncodedString())
        #expect(sent.first?["modifiedAt"] as? Int64 == stampB.modifiedAt)
    }

    /// After a rewind, a version the hub lacks waits to be sent again; a page of the feed
    /// that brings an older version of the record before that (another client pushing
    /// what it held) must not replace it, and a newer one must (seed 13015).
    @Test(arguments: [false, true]) func aVersionTheRewoundHubLacksOutlivesAnOlderOneFromTheFeed(newerArrives: Bool) throws {
        let rig = try Rig()
        try rig.put("a", "mine, confirmed")
        try rig.ledger.pass()
        try rig.flush(seq: 1)
        let mine = try #require(try rig.stamp("a"))
        try rig.pull([Self.record("a", "mine, confirmed", at: mine.modifiedAt, seq: 1)], next: 1)
        let request = try rig.sync.nextPull()
        let rewound = try JSONSerialization.data(withJSONObject: ["error": ["code": "history_rewound", "message": "rewound"], "epoch": "e2", "historyId": 0])
        #expect(try rig.sync.handle(.answer(HubAnswer(status: 409, body: [UInt8](rewound))), to: request) == .replayStarted)
        #expect(try rig.replay([]) == .replayed(records: 0, more: false))
        #expect(try rig.stamp("a")?.unsent == true)

        // Before this client's next pass, the feed brings another client's version.
        let theirs = newerArrives ? mine.modifiedAt + 5 : mine.modifiedAt - 5
        try rig.pull([Self.record("a", "theirs", at: theirs, seq: 1)], next: 1, epoch: "e2")
        if newerArrives {
            #expect(try rig.value("a") == "theirs")
            #expect(try rig.stamp("a")?.modifiedAt == theirs)
            #expect(try rig.ledger.pass().resent == 0)
        } else {
            #expect(try rig.value("a") == "mine, confirmed")
            #expect(try rig.stamp("a")?.modifiedAt == mine.modifiedAt && rig.stamp("a")?.unsent == true)
            let report = try rig.ledger.pass()
            #expect(report.resent == 1)
            #expect(try Self.rows(rig.ledger) == ["a put \(mine.modifiedAt) pending"])
        }
    }

    // MARK: - 11. Adoption after a reset

    @Test func aResetAdoptsWhatTheStoreHoldsAndMakesNoTombstone() throws {
        let rig = try Rig()
        for id in ["same", "diff", "gone", "forgot"] { try rig.put(id, "\(id) 1") }
        try rig.ledger.pass()
        try rig.flush(seq: 1)
        let t0 = Self.start
        // The app changes things no pass sees before the reset.
        try rig.put("diff", "diff local")
        try rig.remove("forgot")
        try rig.put("local", "only here")
        try rig.ledger.reset()
        #expect(try rig.ledger.status().adopting)
        #expect(try rig.ledger.pass().adopting)
        #expect(try rig.ledger.outbox().isEmpty)

        let request = try rig.sync.nextPull()
        #expect(request.path.hasPrefix("records/changes?since=0&"))
        let body = try JSONSerialization.data(withJSONObject: [
            "changes": [
                Self.record("same", "same 1", at: t0, seq: 1),
                Self.record("diff", "diff hub", at: t0 + 1_000, seq: 5),
                Self.record("gone", nil as String?, at: t0 + 2_000, seq: 6),
            ],
            "next": 6, "epoch": "e1", "more": false,
        ])
        _ = try rig.sync.handle(.answer(HubAnswer(status: 200, body: [UInt8](body))), to: request)
        #expect(try rig.ledger.status().adopting == false)
        #expect(try rig.value("same") == "same 1")
        #expect(try rig.value("diff") == "diff hub")
        #expect(try rig.value("gone") == nil)
        #expect(try rig.value("local") == "only here")
        let conflicts = try rig.ledger.conflicts()
        #expect(conflicts.contains { $0.id == "diff" && $0.reason == "replaced after a reset" })
        #expect(!conflicts.contains { $0.id == "same" })
        #expect(try rig.stamp("forgot") == nil)
        #expect(try rig.stamp("same")?.seq == 1)
        #expect(try rig.stamp("gone")?.isTombstone == true)

        let report = try rig.ledger.pass()
        #expect(report.upserts == 1 && report.tombstones == 0 && report.resent == 0)
        #expect(try rig.ledger.outbox().map { "\($0.id) \($0.op)" } == ["local put"])
        let push = try #require(try rig.sync.nextPush())
        #expect(try Self.pushed(push).map { $0["id"] as? String } == ["local"])
    }
}
