import SteleSQL
import Testing
import TestSupport
@testable import Stele

/// G2, 000 §5: a delete that loses to a concurrent edit is reported to the app,
/// in every arrival order, on every device that held the delete; an edit made
/// after seeing the delete raises nothing. What decides it is each version's own
/// causal context, which travels with it (``CausalVersion/context``).
@Suite struct DeleteLostToEditTests {
    static let devices = Fixtures.devices(3)
    static var a: DeviceID { devices[0] }
    static var b: DeviceID { devices[1] }

    static func edit(_ counter: UInt64, context: VersionVector?) -> CausalVersion {
        CausalVersion(dot: Dot(device: b, counter: counter), timestamp: HybridTimestamp(milliseconds: 20, logical: 0), value: "edited".bytes, context: context)
    }

    /// A wrote k (a:1), B saw it; A deletes (a:2) while B edits (b:2).
    static let delete = CausalRecord.tombstone(key: "k", vector: VersionVector([a: 2, b: 1]))
    static let concurrentEdit = CausalRecord(key: "k", vector: VersionVector([a: 1, b: 2]), versions: [edit(2, context: nil)])
    /// B's record after it merged A's delete: the vector covers the delete, the edit's context does not.
    static let editorsMerge = CausalRecord(
        key: "k", vector: VersionVector([a: 2, b: 2]), versions: [edit(2, context: VersionVector([a: 1, b: 2]))])
    /// B wrote again after it had seen the delete.
    static let laterEdit = CausalRecord(key: "k", vector: VersionVector([a: 2, b: 3]), versions: [edit(3, context: nil)])

    typealias Merge = (CausalRecord?, CausalRecord) -> CausalMerge.Decision

    /// Applies `records` in order from `start`: the final record and whether any step reported a lost delete.
    static func run(_ start: CausalRecord?, _ records: [CausalRecord], merge: Merge = CausalMerge.merge) -> (CausalRecord?, Bool) {
        var state = start
        var told = false
        for record in records {
            let decision = merge(state, record)
            if decision.outcome.conflict?.resolution == .deleteLostToEdit { told = true }
            state = decision.store ?? state
        }
        return (state, told)
    }

    /// The orders of `records` arriving at a device holding `start` in which it
    /// was not told, though it should have been.
    static func ordersNotTold(_ start: CausalRecord?, _ records: [CausalRecord], merge: Merge = CausalMerge.merge) -> [[CausalRecord]] {
        records.permutations().filter { !run(start, $0, merge: merge).1 }
    }

    @Test func theDeletingDeviceIsToldInEveryOrder() {
        #expect(Self.ordersNotTold(Self.delete, [Self.concurrentEdit, Self.editorsMerge]).isEmpty)
        for order in [[Self.concurrentEdit, Self.editorsMerge], [Self.editorsMerge, Self.concurrentEdit]] {
            #expect(Self.run(Self.delete, order).0?.value == "edited".bytes)
        }
    }

    @Test func theEditorsMergeAloneTellsTheDeletingDevice() {
        // The order the issue found: the edit reaches A only after B merged the delete.
        let (state, told) = Self.run(Self.delete, [Self.editorsMerge])
        #expect(told)
        #expect(state?.value == "edited".bytes)
    }

    /// A third device that held the delete when the edit's record came is told in
    /// every order; one that got the editor's merge before the delete never showed
    /// the delete, and nothing is decided there.
    @Test func aThirdDeviceIsToldWheneverItHeldTheDelete() {
        for order in [Self.delete, Self.concurrentEdit, Self.editorsMerge].permutations() {
            let heldTheDelete = order.firstIndex(of: Self.delete)! < order.firstIndex(of: Self.editorsMerge)!
            let (state, told) = Self.run(nil, order)
            #expect(told == heldTheDelete, "order \(order.map { $0 == Self.delete ? "delete" : $0 == Self.editorsMerge ? "merge" : "edit" })")
            #expect(state?.value == "edited".bytes)
        }
    }

    @Test func anEditThatSawTheDeleteRaisesNothing() {
        for order in [[Self.laterEdit], [Self.editorsMerge, Self.laterEdit]] {
            let (state, told) = Self.run(Self.delete, order.count == 1 ? order : [Self.laterEdit])
            #expect(!told)
            #expect(state?.value == "edited".bytes)
        }
        // The same record with an explicit context that covers the delete.
        let sawIt = CausalRecord(key: "k", vector: VersionVector([Self.a: 2, Self.b: 3]), versions: [Self.edit(3, context: VersionVector([Self.a: 2, Self.b: 3]))])
        #expect(!Self.run(Self.delete, [sawIt]).1)
    }

    /// The checker fails on a broken double: records that travel without their
    /// contexts (the vector stands in for what the edit saw), as before contexts
    /// travelled, leave the deleting device untold when the editor's merge comes first.
    @Test func theCheckerCatchesRecordsWithoutContexts() {
        let stripped: Merge = { local, remote in
            CausalMerge.merge(local: local, remote: CausalRecord(key: remote.key, vector: remote.vector, versions: remote.versions.map {
                CausalVersion(dot: $0.dot, timestamp: $0.timestamp, value: $0.value)
            }))
        }
        #expect(!Self.ordersNotTold(Self.delete, [Self.concurrentEdit, Self.editorsMerge], merge: stripped).isEmpty)
    }

    @Test func contextsSurviveTheWireAndTheStore() throws {
        var writer = ByteWriter()
        var records = RecordWriter()
        records.append([.causal(Self.editorsMerge)], into: &writer)
        let devices = records.devices
        var reader = ByteReader(writer.bytes)
        var decoder = RecordReader(devices: devices)
        let decoded = try decoder.records(of: .causal, &reader)
        #expect(decoded.contains(.causal(Self.editorsMerge)))

        let replica = try Fixtures.memoryReplica(device: Fixtures.device(3))
        let notes = try replica.causal("notes")
        try notes.apply(Self.editorsMerge)
        #expect(try notes.record("k") == Self.editorsMerge)
        #expect(try notes.record("k")?.versions.first?.context == VersionVector([Self.a: 1, Self.b: 2]))
    }

    /// A store of format 3 (before contexts were kept) opens as the latest format with every
    /// row, vector and digest as it was; its versions' contexts read as their vectors.
    @Test func aStoreOfFormat3UpgradesKeepingItsRowsAndDigest() throws {
        let directory = try TemporaryDirectory()
        let path: String
        let before: (records: [CausalRecord], digest: Hash32)
        do {
            let replica = try Fixtures.replica(in: directory, device: Fixtures.device(3))
            let notes = try replica.causal("notes")
            try notes.put("a", "1".bytes)
            try notes.apply(Self.concurrentEdit)
            try notes.apply(CausalRecord(key: "k", vector: VersionVector([Self.a: 1]), versions: [
                CausalVersion(dot: Dot(device: Self.a, counter: 1), timestamp: HybridTimestamp(milliseconds: 5, logical: 0), value: "v".bytes)
            ]))
            try notes.delete("a")
            before = (try notes.records(), try replica.digest(of: "notes"))
            path = replica.path
        }
        do {
            let connection = try Connection(path: path)
            let table = try #require(try connection.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'causal_*'") { $0.text(0) }.first)
            try connection.executeScript("ALTER TABLE \(table) DROP COLUMN contexts; PRAGMA user_version = 3")
        }
        let replica = try Replica.open(at: path)
        #expect(try replica.report().format == 5)
        #expect(try replica.causal("notes").records() == before.records)
        #expect(try replica.digest(of: "notes") == before.digest)
        // A merge after the upgrade keeps contexts as before.
        try replica.causal("notes").apply(Self.editorsMerge)
        #expect(try replica.causal("notes").get("k") == "edited".bytes)
    }

    /// An anchor written by an older build holds a snapshot of format 1, whose
    /// causal versions carry no context: it still reads (recovery must not be
    /// stuck on an upgrade). Built here from a format 2 snapshot by taking out
    /// the one byte format 2 added (the empty context's count after the value).
    @Test func aSnapshotOfFormat1StillReads() throws {
        let marker = "MARKER-VALUE".bytes
        let record = CausalRecord(key: "k", vector: VersionVector([Self.a: 1]), versions: [
            CausalVersion(dot: Dot(device: Self.a, counter: 1), timestamp: HybridTimestamp(milliseconds: 5, logical: 0), value: marker)
        ])
        let snapshot = Snapshot(
            generation: 3, knowledge: Knowledge(),
            namespaces: [ReconcileMessage(session: 0, namespace: "notes", kind: .causal, generation: 3, records: [.causal(record)])])
        var bytes = snapshot.encoded
        let end = try #require(bytes.indices.first { bytes[$0...].starts(with: marker) }) + marker.count
        #expect(bytes[end] == 0)
        bytes.remove(at: end)
        // The namespace body's length (one byte here) shrinks by one; the format byte goes back to 1.
        let header = Snapshot.magic.count
        #expect(bytes[header] == Snapshot.format)
        bytes[header] = 1
        let lengthAt = try #require(bytes.indices.first { index in index > header && Int(bytes[index]) == bytes.count - index })
        bytes[lengthAt] -= 1
        let read = try Snapshot(decoding: bytes)
        #expect(read.generation == 3)
        #expect(read.namespaces.first?.records == [.causal(record)])
        // The same bytes claiming format 2 do not decode: the format byte is what tells them apart.
        bytes[header] = 2
        #expect(throws: CodecError.self) { try Snapshot(decoding: bytes) }
    }

    @Test func aContextOutsideItsVectorIsRefused() {
        let outside = CausalRecord(key: "k", vector: VersionVector([Self.a: 1, Self.b: 2]), versions: [Self.edit(2, context: VersionVector([Self.a: 5, Self.b: 2]))])
        #expect(throws: ReplicaError.self) { try outside.validate() }
        let missingItsOwnDot = CausalRecord(key: "k", vector: VersionVector([Self.a: 1, Self.b: 2]), versions: [Self.edit(2, context: VersionVector([Self.a: 1]))])
        #expect(throws: ReplicaError.self) { try missingItsOwnDot.validate() }
    }

    /// Three real stores: the phone deletes, the laptop edits, the laptop merges the
    /// delete, the tablet takes the laptop's record, and the phone hears only from
    /// the tablet. The phone's app gets a conflict event; a later edit that saw the
    /// delete gets none.
    @Test func aDeleteLostThroughAThirdDeviceReachesTheApp() throws {
        let phone = try Fixtures.memoryReplica(device: Fixtures.device(1))
        let laptop = try Fixtures.memoryReplica(device: Fixtures.device(2))
        let tablet = try Fixtures.memoryReplica(device: Fixtures.device(3))
        var phoneConflicts: [Conflict] = []
        phone.observeChanges { event in if case .conflict(let conflict) = event.kind { phoneConflicts.append(conflict) } }
        let first = try phone.causal("notes")
        try first.put("k", "v1".bytes)
        try laptop.causal("notes").apply(try #require(try first.record("k")))
        try first.delete("k")
        try laptop.causal("notes").put("k", "edited".bytes)
        try laptop.causal("notes").apply(try #require(try first.record("k")))
        try tablet.causal("notes").apply(try #require(try laptop.causal("notes").record("k")))
        try first.apply(try #require(try tablet.causal("notes").record("k")))
        #expect(try first.get("k") == "edited".bytes)
        #expect(phoneConflicts.map(\.resolution) == [.deleteLostToEdit])

        phoneConflicts = []
        try first.delete("k")
        try laptop.causal("notes").apply(try #require(try first.record("k")))
        try laptop.causal("notes").put("k", "again".bytes)
        try tablet.causal("notes").apply(try #require(try laptop.causal("notes").record("k")))
        try first.apply(try #require(try tablet.causal("notes").record("k")))
        #expect(try first.get("k") == "again".bytes)
        #expect(phoneConflicts.isEmpty)
    }
}
