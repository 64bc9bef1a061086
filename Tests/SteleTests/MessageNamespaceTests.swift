import Foundation
import SteleSQL
import Testing
import TestSupport
@testable import Stele

/// The `messages` namespace as stored (000 §6, DESIGN §7): the fold's claims
/// again, now through the store, its digest and its wire records, in every
/// arrival order.
@Suite struct MessageNamespaceTests {
    static func store(_ seed: UInt64) throws -> (Replica, MessageNamespace) {
        let replica = try Fixtures.memoryReplica(device: Fixtures.device(seed))
        return (replica, try replica.messages("chat"))
    }

    /// Applies `ops` one record each, in the given order, to a fresh store.
    static func received(_ ops: [MessageOp], seed: UInt64 = 9) throws -> (Replica, MessageNamespace) {
        let (replica, chat) = try store(seed)
        for op in ops { try chat.apply(MessageRecord(message: op.message, ops: [op])) }
        return (replica, chat)
    }

    static func op(_ byte: UInt8, at time: Int64, _ action: MessageOp.Action, message: String = "m1") -> MessageOp {
        MessageOp(
            id: try! MessageOpID(bytes: Array(repeating: byte, count: MessageOpID.byteCount)), message: message, time: time,
            writer: Fixtures.device(UInt64(byte)), account: Fixtures.account(), action: action)
    }

    static let post = op(1, at: 100, .post(author: "ana", body: "hello".bytes))

    /// Every arrival order of `ops` folds to one row and one digest; returns it.
    static func agreedOutcome(_ ops: [MessageOp], sourceLocation: SourceLocation = #_sourceLocation) throws -> MessageRow? {
        var rows: [MessageRow?] = []
        var digests: Set<Hash32> = []
        for order in ops.permutations() {
            let (replica, chat) = try received(order)
            rows.append(try chat.message("m1"))
            digests.insert(try replica.digest(of: "chat"))
        }
        #expect(Set(rows.map { $0?.leaf }).count == 1, "arrival orders disagree", sourceLocation: sourceLocation)
        #expect(digests.count == 1, "arrival orders leave different digests", sourceLocation: sourceLocation)
        return rows.first ?? nil
    }

    // MARK: - Local writes and their errors

    @Test func localWritesFoldIntoTheRowReadsShow() throws {
        let (_, chat) = try Self.store(1)
        try chat.post("m1", body: "hello".bytes, author: "ana")
        try chat.edit("m1", body: "hello, world".bytes)
        try chat.react("m1", emoji: "👍", as: "ben")
        try chat.react("m1", emoji: "❤️", as: "cy")
        try chat.unreact("m1", as: "cy")
        let row = try #require(try chat.message("m1"))
        #expect(row.body == "hello, world".bytes)
        #expect(row.author == "ana")
        #expect(row.shownReactions == ["ben": "👍"])
        #expect(try chat.count() == 1)
        #expect(try chat.messages().map(\.message) == ["m1"])
        #expect(try chat.liveIDs() == ["m1"])

        #expect(try chat.unsend("m1", scope: .me) != nil)
        #expect(try chat.unsend("m1", scope: .me) == nil)
        #expect(try chat.message("m1")?.scope == .me)
        #expect(try chat.unsend("m1", scope: .everyone) != nil)
        #expect(try chat.message("m1")?.scope == .everyone)
        #expect(try chat.count() == 0)
        #expect(try chat.messages().isEmpty)
        #expect(try chat.liveIDs().isEmpty)
        #expect(try chat.tombstoneCount() == 1)
    }

    @Test func eachRefusedWriteSaysWhyAndChangesNothing() throws {
        let (replica, chat) = try Self.store(1)
        try chat.post("m1", body: "hello".bytes, author: "ana")
        let before = try replica.digest(of: "chat")
        func code(_ body: () throws -> Void) -> ReplicaError.Code? {
            do { try body() } catch let error as ReplicaError { return error.code } catch { return nil }
            return nil
        }
        #expect(code { try chat.post("m1", body: [], author: "ana") } == .messageExists)
        #expect(code { try chat.edit("m2", body: [1]) } == .messageMissing)
        #expect(code { _ = try chat.unsend("m2", scope: .me) } == .messageMissing)
        #expect(code { try chat.react("m2", emoji: "👍", as: "ben") } == .messageMissing)
        #expect(code { try chat.react("m1", emoji: "", as: "ben") } == .invalidRecord)
        #expect(code { try chat.react("m1", emoji: String(repeating: "👍", count: 17), as: "ben") } == .invalidRecord)
        #expect(code { try chat.react("m1", emoji: "👍", as: "") } == .invalidName)
        #expect(code { _ = try chat.unsend("m1", scope: .live) } == .invalidRecord)
        #expect(code { try chat.post("", body: [], author: "ana") } == .invalidName)
        #expect(code { try chat.post("m3", body: [UInt8](repeating: 0, count: Limits.maximumValueBytes + 1), author: "ana") } == .limitExceeded)
        #expect(try replica.digest(of: "chat") == before)
        #expect(try chat.ops(of: "m1").count == 1)

        try chat.unsend("m1", scope: .me)
        // A delete is absorbing (000 §6): no edit, no reaction afterwards, and the id stays taken.
        #expect(code { try chat.edit("m1", body: [1]) } == .messageDeleted)
        #expect(code { try chat.react("m1", emoji: "👍", as: "ben") } == .messageDeleted)
        #expect(code { try chat.unreact("m1", as: "ben") } == .messageDeleted)
        #expect(code { try chat.post("m1", body: [], author: "ana") } == .messageExists)
    }

    @Test func aMalformedRecordIsRefusedWhole() throws {
        let (replica, chat) = try Self.store(1)
        let before = try replica.digest(of: "chat")
        let good = Self.op(2, at: 200, .edit(body: [1]))
        let records = [
            MessageRecord(message: "m1", ops: [Self.post, Self.op(3, at: 1, .delete(.live))]),
            MessageRecord(message: "m1", ops: [Self.post, Self.op(3, at: -1, .edit(body: []))]),
            MessageRecord(message: "m1", ops: [Self.post, Self.op(3, at: 1, .react(reactor: "ben", emoji: ""))]),
            MessageRecord(message: "m1", ops: [Self.post, Self.op(3, at: 1, .unreact(reactor: ""))]),
            MessageRecord(message: "m1", ops: [Self.post, Self.op(3, at: 1, .edit(body: []), message: "m2")]),
            MessageRecord(message: "m1", ops: [Self.post, good, good]),
            MessageRecord(message: "", ops: []),
        ]
        for record in records {
            #expect(throws: ReplicaError.self) { try chat.apply(record) }
        }
        #expect(try chat.ops(of: "m1").isEmpty)
        #expect(try replica.digest(of: "chat") == before)
    }

    // MARK: - Every ordering claim in every arrival order, through the store

    @Test(arguments: [DeleteScope.me, .everyone])
    func editThenDeleteAndDeleteThenEditEndDeletedWithOneDigest(scope: DeleteScope) throws {
        let edit = Self.op(2, at: 200, .edit(body: "edited".bytes))
        let delete = Self.op(3, at: 300, .delete(scope))
        let lateEdit = Self.op(4, at: 400, .edit(body: "too late".bytes))
        let row = try #require(try Self.agreedOutcome([Self.post, edit, delete, lateEdit]))
        #expect(row.scope == scope)
        #expect(row.body.isEmpty)
        #expect(row.editedAt == nil)
        // Edit-then-delete and delete-then-edit, seen by different devices, hash alike.
        let (sawEdit, _) = try Self.received([Self.post, edit, delete])
        let (sawLateEdit, _) = try Self.received([Self.post, delete, lateEdit])
        let (sawOnlyDelete, _) = try Self.received([Self.post, delete])
        #expect(try sawEdit.digest(of: "chat") == sawOnlyDelete.digest(of: "chat"))
        #expect(try sawLateEdit.digest(of: "chat") == sawOnlyDelete.digest(of: "chat"))
    }

    @Test func opsArrivingBeforeTheirMessageWaitAsOrphansAndFoldWhenItLands() throws {
        let edit = Self.op(2, at: 200, .edit(body: "edited".bytes))
        let react = Self.op(5, at: 210, .react(reactor: "ben", emoji: "👍"))
        let (replica, chat) = try Self.received([edit, react])
        #expect(try chat.message("m1") == nil)
        #expect(try chat.orphanCount() == 2)
        #expect(try chat.count() == 0)
        let empty = try Fixtures.memoryReplica(device: Fixtures.device(8))
        _ = try empty.messages("chat")
        // Orphans are not leaves: the digest is that of an empty namespace.
        #expect(try replica.digest(of: "chat") == empty.digest(of: "chat"))
        try chat.apply(MessageRecord(message: "m1", ops: [Self.post]))
        #expect(try chat.orphanCount() == 0)
        let row = try #require(try chat.message("m1"))
        #expect(row.body == "edited".bytes)
        #expect(row.shownReactions == ["ben": "👍"])
        #expect(try Self.agreedOutcome([Self.post, edit, react])?.leaf == row.leaf)
    }

    @Test func twoEditsInOneMillisecondPickTheLargerOpIDInEveryOrder() throws {
        let low = Self.op(0x10, at: 200, .edit(body: "low".bytes))
        let high = Self.op(0xF0, at: 200, .edit(body: "high".bytes))
        #expect(try Self.agreedOutcome([Self.post, low, high])?.body == "high".bytes)
    }

    @Test func aReactionTieIsWonByTheRemovalThenByTheLargerEmoji() throws {
        let react = Self.op(2, at: 300, .react(reactor: "ben", emoji: "👍"))
        let unreact = Self.op(3, at: 300, .unreact(reactor: "ben"))
        #expect(try Self.agreedOutcome([Self.post, react, unreact])?.shownReactions == [:])
        let a = Self.op(4, at: 300, .react(reactor: "cy", emoji: "A"))
        let b = Self.op(5, at: 300, .react(reactor: "cy", emoji: "B"))
        #expect(try Self.agreedOutcome([Self.post, b, a])?.shownReactions == ["cy": "B"])
    }

    // MARK: - Erasure

    @Test(arguments: [DeleteScope.me, .everyone])
    func aDeletedMessageKeepsNoTextInAnyOpEvenOneArrivingLater(scope: DeleteScope) throws {
        let edit = Self.op(2, at: 200, .edit(body: "secret edit".bytes))
        let delete = Self.op(3, at: 300, .delete(scope))
        let lateEdit = Self.op(4, at: 400, .edit(body: "arrives after".bytes))
        for order in [Self.post, edit, delete, lateEdit].permutations() {
            let (_, chat) = try Self.received(order)
            #expect(try chat.storedBodyBytes(of: "m1") == 0)
            #expect(try chat.ops(of: "m1").count == 4)
        }
    }

    @Test func aDeletedMessagesTextIsGoneFromTheFileOnDisk() throws {
        let directory = try TemporaryDirectory()
        let replica = try Fixtures.replica(in: directory)
        let chat = try replica.messages("chat")
        let secret = "the-secret-text-\(UUID().uuidString)"
        try chat.post("m1", body: Array(secret.utf8), author: "ana")
        try chat.edit("m1", body: Array((secret + "-edited").utf8))
        try replica.checkpoint()
        #expect(fileBytes(directory.file("device.stele"))?.range(of: Data(secret.utf8)) != nil)
        try chat.unsend("m1", scope: .everyone)
        try replica.checkpoint()
        for suffix in ["", "-wal"] {
            #expect(fileBytes(directory.file("device.stele" + suffix))?.range(of: Data(secret.utf8)) == nil, "the text survives in \(suffix)")
        }
    }

    /// A damaged ops table is a `corrupt` error naming the message, never a trap
    /// or a wrong fold: a delete that lost its scope, a receipt that names no op.
    @Test func damagedOpsAreReportedAsCorrupt() throws {
        let (replica, chat) = try Self.store(1)
        try chat.post("m1", body: "x".bytes, author: "ana")
        try chat.unsend("m1", scope: .me)
        try chat.post("m2", body: "y".bytes, author: "ana")
        let ops = try replica.declaration(of: "chat").table + "_ops"
        try replica.connection.execute("UPDATE \(ops) SET scope = NULL WHERE action = 2")
        #expect { try chat.message("m1") } throws: { ($0 as? ReplicaError)?.code == .corrupt }
        let receipt = MessageOp(
            id: Self.op(7, at: 0, .delete(.me)).id, message: "m2", time: 300, writer: Fixtures.device(70), account: Fixtures.account(7),
            action: .receipt(of: Self.post.id))
        try chat.apply(MessageRecord(message: "m2", ops: [receipt]))
        try replica.connection.execute("UPDATE \(ops) SET content = x'01' WHERE action = 5")
        #expect { try chat.ops(of: "m2") } throws: { ($0 as? ReplicaError)?.code == .corrupt }
    }

    // MARK: - Sync and collection

    @Test func recordsShipEveryOpAndTwoStoresConvergeWhicheverWayTheyExchange() throws {
        let (a, chatA) = try Self.store(1)
        let (b, chatB) = try Self.store(2)
        try chatA.post("m1", body: "hello".bytes, author: "ana")
        try chatB.apply(try #require(try chatA.record("m1")))
        try chatA.edit("m1", body: "from a".bytes)
        try chatB.react("m1", emoji: "👍", as: "ben")
        try chatB.unsend("m1", scope: .me)
        try chatA.react("m1", emoji: "❤️", as: "ana")
        #expect(try a.digest(of: "chat") != b.digest(of: "chat"))
        let sync = { (replica: Replica) in try NamespaceSync(replica: replica, declaration: try replica.declaration(of: "chat")) }
        let fromA = try sync(a).records(from: [], below: nil)
        let fromB = try sync(b).records(from: [], below: nil)
        #expect(fromA.count == 1)
        try sync(b).apply(fromA)
        try sync(a).apply(fromB)
        #expect(try a.digest(of: "chat") == b.digest(of: "chat"))
        #expect(try chatA.message("m1")?.scope == .me)
        #expect(try chatA.ops(of: "m1") == chatB.ops(of: "m1"))
        // Applying again changes nothing.
        #expect(try sync(a).apply(fromB) == 0)
    }

    @Test func theBarrierCollectsDeletedMessagesWithTheirOpsAndKeepsLiveOnes() throws {
        let (replica, chat) = try Self.store(1)
        try chat.post("m1", body: "gone".bytes, author: "ana")
        try chat.react("m1", emoji: "👍", as: "ben")
        try chat.post("m2", body: "kept".bytes, author: "ana")
        try chat.unsend("m1", scope: .everyone)
        #expect(try replica.tombstoneCounts()["chat"] == 1)
        let digest = try replica.contentDigest()
        try replica.recordAck(round: CollectionTests.round(1), digest: digest, generation: 1)
        #expect(try replica.commit(round: CollectionTests.round(1), digest: digest, generation: 1) == .collected(1))
        #expect(try chat.message("m1") == nil)
        #expect(try chat.ops(of: "m1").isEmpty)
        #expect(try chat.message("m2")?.body == "kept".bytes)
        #expect(try replica.tombstoneCounts()["chat"] == 0)
        // The digest lost the collected row's leaf, as a fresh store holding m2 alone computes.
        let (other, otherChat) = try Self.store(2)
        try otherChat.apply(try #require(try chat.record("m2")))
        #expect(try replica.digest(of: "chat") == other.digest(of: "chat"))
    }

    @Test func aDeleteAfterTheAckIsNotCollectedByThatRound() throws {
        let (replica, chat) = try Self.store(1)
        try chat.post("m1", body: "x".bytes, author: "ana")
        try chat.unsend("m1", scope: .me)
        let digest = try replica.contentDigest()
        try replica.recordAck(round: CollectionTests.round(1), digest: digest, generation: 1)
        // The scope grows after the ack: the row is a new tombstone the ack never vouched for.
        try chat.unsend("m1", scope: .everyone)
        #expect(try replica.commit(round: CollectionTests.round(1), digest: digest, generation: 1) != .collected(1))
        #expect(try chat.message("m1")?.scope == .everyone)
    }

    @Test func recoveryKeepsOnlyTheOpsTheFleetHadNotSeen() throws {
        let (replica, chat) = try Self.store(1)
        try chat.post("m1", body: "hello".bytes, author: "ana")
        let seen = try replica.knowledge()
        // The fleet's snapshot: m1 was deleted and collected. Locally, a reaction came after.
        try chat.react("m1", emoji: "👍", as: "ana")
        try chat.post("m2", body: "after".bytes, author: "ana")
        let snapshot = Snapshot(generation: 1, knowledge: seen, namespaces: [
            ReconcileMessage(session: 0, namespace: "chat", kind: .messages, generation: 1, records: []),
        ])
        try replica.recover(from: snapshot)
        // The collected message does not come back; the reaction waits as an orphan; m2 is kept.
        #expect(try chat.message("m1") == nil)
        #expect(try chat.orphanCount() == 1)
        #expect(try chat.message("m2")?.body == "after".bytes)
    }

    // MARK: - Conversations: the outbox and receipts

    static let bob = Fixtures.account(7)

    /// The contact's store: a conversation with our account.
    static func contactStore() throws -> (Replica, MessageNamespace) {
        let replica = try Fixtures.memoryReplica(account: bob, device: Fixtures.device(70))
        return (replica, try replica.conversation("chat", with: Fixtures.account()))
    }

    /// One of our devices, in a conversation with bob.
    static func conversation(_ seed: UInt64) throws -> (Replica, MessageNamespace) {
        let replica = try Fixtures.memoryReplica(device: Fixtures.device(seed))
        return (replica, try replica.conversation("chat", with: bob))
    }

    @Test func aConversationKeepsItsContactForLife() throws {
        let (replica, chat) = try Self.conversation(1)
        #expect(try chat.contact() == Self.bob)
        #expect(try replica.conversations().map(\.name) == ["chat"])
        #expect(try replica.conversation("chat", with: Self.bob).contact() == Self.bob)
        #expect { try replica.conversation("chat", with: Fixtures.account(8)) } throws: { ($0 as? ReplicaError)?.code == .conversationMismatch }
        #expect { try replica.conversation("self", with: replica.account) } throws: { ($0 as? ReplicaError)?.code == .conversationMismatch }
        _ = try replica.causal("notes")
        #expect { try replica.conversation("notes", with: Self.bob) } throws: { ($0 as? ReplicaError)?.code == .kindMismatch }
        // A plain messages namespace has no contact until it is declared a conversation.
        #expect(try replica.messages("drafts").contact() == nil)
        #expect(try replica.conversation("drafts", with: Self.bob).contact() == Self.bob)
        #expect(try replica.conversations().map(\.name) == ["chat", "drafts"])
    }

    /// Every record of `from`'s namespace applied to `to`'s, as reconcile would.
    static func sync(_ from: Replica, into to: Replica) throws {
        let source = try NamespaceSync(replica: from, declaration: try from.declaration(of: "chat"))
        try NamespaceSync(replica: to, declaration: try to.declaration(of: "chat")).apply(try source.records(from: [], below: nil))
    }

    @Test func aDeliveryIsReceiptedOnceAndTheReceiptEmptiesTheOutbox() throws {
        // The phone's wall clock runs an hour ahead of the contact's.
        let phone = try Fixtures.memoryReplica(device: Fixtures.device(1), clock: ManualWallClock(milliseconds: 1_700_003_600_000))
        let chat = try phone.conversation("chat", with: Self.bob)
        let (_, bob) = try Self.contactStore()
        try chat.post("m1", body: "hello".bytes, author: "ana")
        let owed = try chat.outbox()
        #expect(owed.map(\.message) == ["m1"])
        #expect(owed.first?.ops.map(\.action) == [.post(author: "ana", body: "hello".bytes)])
        let receipts = try bob.receive(try #require(owed.first), from: phone.account)
        #expect(try bob.message("m1")?.body == "hello".bytes)
        // The same delivery twice: the same receipt, nothing new stored.
        #expect(try bob.receive(try #require(owed.first), from: phone.account) == receipts)
        #expect(try bob.ops(of: "m1").count == 2)
        // The contact owes its receipt until it hears it was heard.
        #expect(try bob.outbox() == [receipts])
        // Receipts come back as records of the contact's account, and are acknowledged.
        let acknowledgements = try chat.receive(receipts, from: Self.bob, isAnswer: true)
        #expect(acknowledgements.ops.map(\.action) == receipts.ops.map { .receipt(of: $0.id) })
        #expect(try chat.outbox().isEmpty)
        #expect(try chat.outboxCount() == 0)
        #expect(try chat.message("m1")?.isDelivered == true)
        // An acknowledgement is not answered; it empties the contact's outbox.
        #expect(try bob.receive(acknowledgements, from: phone.account, isAnswer: true).ops.isEmpty)
        #expect(try bob.outbox().isEmpty)
        #expect(try bob.message("m1")?.acknowledgedReceipts == receipts.ops.map(\.id))
        // The contact's clock moved past the delivery: its reaction folds after the post,
        // even when its own wall clock is far behind the sender's.
        let reaction = try bob.react("m1", emoji: "👍", as: "ben")
        #expect(try #require(try bob.ops(of: "m1").first { $0.id == owed.first?.ops.first?.id }).precedes(reaction))
        // An edit after delivery owes just the edit.
        let edit = try chat.edit("m1", body: "edited".bytes)
        #expect(try chat.outbox().first?.ops == [edit])
    }

    /// The outbox is one read of the owing messages (an index of them, not a
    /// scan of every message) and of the ops each row keeps as owed (no fold): in
    /// posting order, each with what its fold owes, a delivered one gone. A row
    /// whose list is missing (written before format 5) is folded at the read, to
    /// the same answer; a damaged list is reported as corrupt. A store of format 4
    /// gets the column and the index when it opens.
    /// The outbox keeps its last answer only while its conversation's tables
    /// cannot have changed: it is read again after a write to them through this
    /// handle, a commit through another handle, and inside a transaction; not
    /// after a write to another namespace or another conversation; a transaction
    /// rolled back leaves nothing of itself behind.
    @Test func theOutboxIsReadAgainWheneverItsTablesMayHaveChanged() throws {
        let directory = try TemporaryDirectory()
        let replica = try Fixtures.replica(in: directory, device: Fixtures.device(1))
        let chat = try replica.conversation("chat", with: Self.bob)
        let other = try replica.conversation("other", with: Self.bob)
        try replica.declare("notes", .causal)
        _ = try chat.post("m1", body: "one".bytes, author: "ana")
        var reads = replica.outboxReads + replica.outboxPatches
        /// Whether the last call read the file (whole, or the messages changed); `reads` moves on.
        func readAgain() -> Bool {
            defer { reads = replica.outboxReads + replica.outboxPatches }
            return replica.outboxReads + replica.outboxPatches != reads
        }
        let first = try chat.outbox()
        #expect(first.map(\.message) == ["m1"])
        #expect(readAgain())
        #expect(try chat.outbox() == first)
        #expect(!readAgain())
        // A write to another namespace, or to another conversation, through this handle: the same answer, not read.
        _ = try replica.causal("notes").put("k", "v".bytes)
        _ = try other.post("o1", body: "elsewhere".bytes, author: "ana")
        #expect(try chat.outbox() == first)
        #expect(!readAgain())
        // Any change to the conversation's rows through this handle is read: a reaction (its ops table)...
        try chat.react("m1", emoji: "👍", as: "ana")
        #expect(try chat.outbox().flatMap(\.ops).count == 2)
        #expect(readAgain())
        // ...and its messages table alone (a receipt heard marks the row as owing nothing).
        let (_, bob) = try Self.contactStore()
        let receipts = try bob.receive(try #require(try chat.outbox().first), from: replica.account)
        _ = try chat.receive(receipts, from: Self.bob, isAnswer: true)
        #expect(try chat.outbox().isEmpty)
        #expect(readAgain())
        // A commit through a second handle on the same file.
        let second = try Replica.open(at: directory.file("device.stele"), options: Replica.Options(clock: ManualWallClock()))
        _ = try second.messages("chat").post("m2", body: "two".bytes, author: "ana")
        #expect(try chat.outbox().map(\.message) == ["m2"])
        #expect(readAgain())
        // Inside a transaction the outbox sees its writes, read every time; rolled back, they are gone.
        struct Undone: Error {}
        #expect(throws: Undone.self) {
            try replica.write {
                _ = try chat.post("m3", body: "three".bytes, author: "ana")
                #expect(try chat.outbox().map(\.message) == ["m2", "m3"])
                #expect(try chat.outbox().map(\.message) == ["m2", "m3"])
                throw Undone()
            }
        }
        #expect(replica.outboxReads + replica.outboxPatches - reads == 2)
        reads = replica.outboxReads + replica.outboxPatches
        #expect(try chat.outbox().map(\.message) == ["m2"])
        // Delivered and receipted through the second handle: nothing owed any more here either.
        for record in try second.messages("chat").outbox() {
            _ = try second.messages("chat").receive(try bob.receive(record, from: replica.account), from: Self.bob, isAnswer: true)
        }
        #expect(try chat.outbox().isEmpty)
        #expect(readAgain())
    }

    /// After a change through its own handle the outbox reads again only the
    /// messages the change touched, and patches them into its last answer: in
    /// every case, the same answer as a handle that reads it whole. Random posts,
    /// edits, reactions, deletes, receipts, the contact's messages (whose times
    /// tie with ours), keys SQLite and Swift order differently, a rolled-back
    /// transaction, another handle's commits and another conversation's writes.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func theOutboxPatchedAfterAChangeIsTheOutboxReadWhole(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        let clock = ManualWallClock()
        clock.set(milliseconds: 1_000_000)
        let replica = try Fixtures.replica(in: directory, device: Fixtures.device(1), clock: clock)
        let path = directory.file("device.stele")
        let chat = try replica.conversation("chat", with: Self.bob)
        let other = try replica.conversation("other", with: Self.bob)
        let bob = try Fixtures.memoryReplica(account: Self.bob, device: Fixtures.device(70))
        let bobChat = try bob.conversation("chat", with: Fixtures.account())
        // Composed and decomposed é, an emoji, upper before lower case: SQLite sorts
        // them by their UTF-8 bytes, Swift's `<` otherwise.
        let keys = ["m1", "m2", "M3", "\u{E9}", "e\u{301}", "\u{1F600}", "z", "a b", "m10"]
        var generator = SeededGenerator(seed: seed)
        var posted: [String] = []
        // By their bytes: `é` and `e` with an accent are two messages to the store.
        var used: Set<[UInt8]> = []
        var ties = 0
        struct Undone: Error {}
        for step in 0..<300 {
            var key = keys[Int.random(in: 0..<keys.count, using: &generator)]
            if used.contains(Array(key.utf8)) { key += "-\(step)" }
            used.insert(Array(key.utf8))
            switch Int.random(in: 0..<10, using: &generator) {
            case 0, 1:
                _ = try chat.post(key, body: "b\(step)".bytes, author: "ana")
                posted.append(key)
            case 2:
                if let message = posted.randomElement(using: &generator) { _ = try? chat.edit(message, body: "e\(step)".bytes) }
            case 3:
                if let message = posted.randomElement(using: &generator) { _ = try? chat.react(message, emoji: "👍", as: "ana") }
            case 4:
                if let message = posted.randomElement(using: &generator) {
                    _ = try? chat.unsend(message, scope: Bool.random(using: &generator) ? .everyone : .me)
                }
            case 5:
                // Some of the outbox delivered; the contact's receipts come back.
                for record in try chat.outbox() where Bool.random(using: &generator) {
                    _ = try chat.receive(try bobChat.receive(record, from: replica.account), from: Self.bob, isAnswer: true)
                }
            case 6:
                // The contact posts, every message at one time: they stand in the outbox by
                // their keys alone. Received, their receipts are owed.
                var id = [UInt8](repeating: 0, count: MessageOpID.byteCount)
                id[0] = 0xB0
                id[1] = UInt8(step >> 8)
                id[2] = UInt8(step & 0xFF)
                let message = MessageOp(
                    id: try MessageOpID(bytes: id), message: key, time: 1_000_000 << 16, writer: Fixtures.device(70),
                    account: Self.bob, action: .post(author: "bob", body: "hi".bytes))
                _ = try chat.receive(MessageRecord(message: key, ops: [message]), from: Self.bob)
            case 7:
                #expect(throws: Undone.self) {
                    try replica.write {
                        _ = try chat.post("undone-\(step)", body: "x".bytes, author: "ana")
                        if let message = posted.first { _ = try? chat.react(message, emoji: "❌", as: "ana") }
                        throw Undone()
                    }
                }
            case 8:
                let second = try Replica.open(at: path, options: Replica.Options(clock: clock))
                _ = try second.messages("chat").post("second-\(step)", body: "2".bytes, author: "ana")
            default:
                _ = try other.post("o-\(step)", body: "o".bytes, author: "ana")
            }
            if step % 7 == 0 { clock.advance(byMilliseconds: 1) }
            let reference = try Replica.open(at: path, options: Replica.Options(clock: clock, readOnly: true))
            let whole = try reference.messages("chat").outbox()
            let times = try whole.compactMap { try chat.message($0.message)?.postedAt }
            ties = max(ties, times.count - Set(times).count)
            let patched = try chat.outbox()
            #expect(patched == whole, "step \(step): \(patched.map(\.message)) against \(whole.map(\.message))")
            #expect(try chat.outbox() == whole, "step \(step), asked again")
        }
        // Messages whose times tie were owed, ordered by their keys' bytes.
        #expect(ties >= 2)
        // The path under test was taken, and reading whole was not.
        #expect(replica.outboxPatches > 50)
        #expect(replica.outboxReads < replica.outboxPatches)
    }

    /// Two messages whose ids Swift's `String` holds equal (`é` in one character
    /// and in two), posted at one time, stand side by side in the outbox's query:
    /// read whole, they are two records, each with its own op.
    @Test func messagesWhoseIdsAreCanonicallyEqualAreTwoInTheOutbox() throws {
        let (replica, chat) = try Self.conversation(1)
        var ids: [MessageOpID] = []
        for (index, key) in ["\u{E9}", "e\u{301}"].enumerated() {
            var id = [UInt8](repeating: 0, count: MessageOpID.byteCount)
            id[0] = 0xB1
            id[1] = UInt8(index)
            let post = MessageOp(
                id: try MessageOpID(bytes: id), message: key, time: 5_000 << 16, writer: Fixtures.device(70), account: Self.bob,
                action: .post(author: "bob", body: "hi".bytes))
            ids.append(post.id)
            _ = try chat.receive(MessageRecord(message: key, ops: [post]), from: Self.bob)
        }
        let owed = try chat.outbox()
        #expect(replica.outboxReads == 1)
        #expect(owed.count == 2)
        for record in owed { #expect(record.ops.allSatisfy { Array($0.message.utf8) == Array(record.message.utf8) }) }
    }

    /// More rows changed between two reads than are worth listing: read whole, to the same answer.
    @Test func anOutboxWithManyMessagesChangedSinceIsReadWhole() throws {
        let directory = try TemporaryDirectory()
        let replica = try Fixtures.replica(in: directory, device: Fixtures.device(1))
        let chat = try replica.conversation("chat", with: Self.bob)
        _ = try chat.post("first", body: "1".bytes, author: "ana")
        _ = try chat.outbox()
        let reads = replica.outboxReads
        try replica.write {
            for index in 0..<600 { _ = try chat.post("m\(index)", body: "b".bytes, author: "ana") }
        }
        #expect(try chat.outbox().count == 601)
        #expect(replica.outboxReads == reads + 1)
        _ = try chat.post("last", body: "b".bytes, author: "ana")
        #expect(try chat.outbox().map(\.message).last == "last")
        #expect(replica.outboxReads == reads + 1)
    }

    /// A handle whose triggers could not be made reads the outbox every time, to
    /// the right answer, and tries to make them again at the next read.
    @Test func aHandleThatCannotCountChangesReadsTheOutboxEveryTime() throws {
        let directory = try TemporaryDirectory()
        let replica = try Fixtures.replica(in: directory, device: Fixtures.device(1))
        let chat = try replica.conversation("chat", with: Self.bob)
        _ = try chat.post("m1", body: "one".bytes, author: "ana")
        let plan = SQLiteFaultPlan()
        plan.fail(.execute, with: .ioError, sqlContains: "CREATE TEMP TRIGGER", after: 1, count: 2)
        replica.faults = plan
        for _ in 0..<2 { #expect(try chat.outbox().map(\.message) == ["m1"]) }
        #expect(replica.outboxReads == 2)
        #expect(plan.fired == 2)
        // The triggers made at last, the third read is kept, and the fourth is not read.
        for _ in 0..<2 { #expect(try chat.outbox().map(\.message) == ["m1"]) }
        #expect(replica.outboxReads == 3)
        _ = try chat.post("m2", body: "two".bytes, author: "ana")
        #expect(try chat.outbox().map(\.message) == ["m1", "m2"])
    }

    @Test func theOutboxReadsTheOwingMessagesInPostingOrderAndAnOlderStoreGetsItsIndex() throws {
        let directory = try TemporaryDirectory()
        let path: String
        do {
            let replica = try Fixtures.replica(in: directory, device: Fixtures.device(1))
            let chat = try replica.conversation("chat", with: Self.bob)
            let (_, bob) = try Self.contactStore()
            for message in ["m3", "m1", "m2", "m0"] { try chat.post(message, body: Array(message.utf8), author: "ana") }
            try chat.react("m1", emoji: "👍", as: "ana")
            try chat.edit("m3", body: "again".bytes)
            // m2 is delivered and its receipt heard: it owes nothing.
            let receipts = try bob.receive(try #require(try chat.outbox().first { $0.message == "m2" }), from: replica.account)
            _ = try chat.receive(receipts, from: Self.bob, isAnswer: true)
            let owed = try chat.outbox()
            #expect(owed.map(\.message) == ["m3", "m1", "m0"])
            for record in owed {
                #expect(record.ops == MessageFold.duty(of: try chat.ops(of: record.message), for: replica.account))
            }
            #expect(try chat.outboxCount() == 3)
            let plan = try replica.connection.query(
                "EXPLAIN QUERY PLAN SELECT key FROM \(try replica.declaration(of: "chat").table) WHERE duty = 1 ORDER BY posted, key"
            ) { $0.text(3) }
            #expect(plan.contains { $0.contains("_owing") }, "\(plan)")
            let table = try replica.declaration(of: "chat").table
            #expect(try replica.connection.query("SELECT owed FROM \(table) WHERE key = 'm2'") { $0.isNull(0) } == [true])
            // Without the kept lists the read folds, to the same outbox.
            try replica.connection.execute("UPDATE \(table) SET owed = NULL")
            #expect(try chat.outbox() == owed)
            // A list that is not whole ids is damage, said as such.
            try replica.connection.execute("UPDATE \(table) SET owed = x'0102' WHERE key = 'm1'")
            #expect { try chat.outbox() } throws: { ($0 as? ReplicaError)?.code == .corrupt }
            try replica.connection.execute("UPDATE \(table) SET owed = NULL")
            path = replica.path
        }
        do {
            let connection = try Connection(path: path)
            let index = try #require(try connection.query("SELECT name FROM sqlite_master WHERE type = 'index' AND name GLOB 'messages_*_owing'") { $0.text(0) }.first)
            let table = String(index.dropLast("_owing".count))
            try connection.executeScript("DROP INDEX \(index); ALTER TABLE \(table) DROP COLUMN owed; PRAGMA user_version = 4")
        }
        let replica = try Replica.open(at: path)
        #expect(try replica.report().format == 5)
        #expect(try replica.connection.query("SELECT name FROM sqlite_master WHERE type = 'index' AND name GLOB 'messages_*_owing'") { $0.text(0) }.count == 1)
        let chat = try replica.conversation("chat", with: Self.bob)
        #expect(try chat.outbox().map(\.message) == ["m3", "m1", "m0"])
        // The next write of a row keeps its list again.
        let reaction = try chat.react("m0", emoji: "🎉", as: "ana")
        let table = try replica.declaration(of: "chat").table
        let kept = try replica.connection.query("SELECT owed FROM \(table) WHERE key = 'm0'") { $0.optionalBlob(0) }.first ?? nil
        #expect(kept == MessageNamespace.owedBytes(MessageFold.duty(of: try chat.ops(of: "m0"), for: replica.account)))
        #expect(try chat.outbox().first { $0.message == "m0" }?.ops.contains(reaction) == true)
    }

    @Test func aContactMayNotSpeakForAnotherAccountNorEditOurMessages() throws {
        let (phone, chat) = try Self.conversation(1)
        let (bobReplica, bob) = try Self.contactStore()
        try chat.post("m1", body: "hello".bytes, author: "ana")
        let owed = try #require(try chat.outbox().first)
        // Claimed to come from the contact while the ops are ours: refused, nothing stored.
        #expect { try bob.receive(owed, from: Fixtures.account(8)) } throws: { ($0 as? ReplicaError)?.code == .conversationMismatch }
        #expect { try bob.receive(owed, from: bobReplica.account) } throws: { ($0 as? ReplicaError)?.code == .conversationMismatch }
        // Our own ops claimed by another sender, and a delete for me, which never travels.
        #expect { try chat.receive(owed, from: Self.bob) } throws: { ($0 as? ReplicaError)?.code == .invalidRecord }
        let forgedDelete = MessageOp(
            id: Self.op(9, at: 900, .delete(.me)).id, message: "m1", time: 900, writer: Fixtures.device(70), account: Self.bob, action: .delete(.me))
        #expect { try chat.receive(MessageRecord(message: "m1", ops: [forgedDelete]), from: Self.bob) } throws: { ($0 as? ReplicaError)?.code == .invalidRecord }
        #expect(try chat.message("m1")?.scope == .live)
        #expect(try bob.ops(of: "m1").isEmpty)
        try bob.receive(owed, from: phone.account)
        // The contact holds our message: it may react to it or delete it for itself, not edit it or recall it.
        #expect { try bob.edit("m1", body: "forged".bytes) } throws: { ($0 as? ReplicaError)?.code == .notAuthor }
        #expect { try bob.unsend("m1", scope: .everyone) } throws: { ($0 as? ReplicaError)?.code == .notAuthor }
        try bob.react("m1", emoji: "👍", as: "ben")
        let owedByBob = try #require(try bob.outbox().first)
        #expect(owedByBob.ops.contains { $0.action == .react(reactor: "ben", emoji: "👍") })
        #expect(owedByBob.ops.contains { if case .receipt = $0.action { true } else { false } })
        // Deleted for itself: the reaction is owed no more; its receipt of our post still is.
        #expect(try bob.unsend("m1", scope: .me) != nil)
        #expect(try bob.outbox().first?.ops.map(\.action) == owedByBob.ops.filter { if case .receipt = $0.action { true } else { false } }.map(\.action))
    }

    /// The issue's claim: a message deleted for everyone before it was delivered
    /// is never delivered by any device of the account, the one that was offline
    /// at the delete included, once it has the delete. The duty is derived from
    /// the ops, so the delete arriving by reconcile is what cancels it.
    @Test func anUndeliveredMessageUnsentForEveryoneLeavesEveryOutboxEvenTheOfflineDevices() throws {
        let (phone, phoneChat) = try Self.store(1)
        let (laptop, laptopChat) = try Self.store(2)
        try phoneChat.post("m1", body: "regrettable".bytes, author: "ana")
        try Self.sync(phone, into: laptop)
        #expect(try laptopChat.outboxCount() == 1)
        // The laptop goes offline; the phone deletes for everyone.
        try phoneChat.unsend("m1", scope: .everyone)
        #expect(try phoneChat.outbox().isEmpty)
        // Still cut off, the laptop owes it (its only knowledge): the transport must
        // not deliver before it has heard its siblings (see ARCHITECTURE, "Messages").
        #expect(try laptopChat.outboxCount() == 1)
        try Self.sync(phone, into: laptop)
        #expect(try laptopChat.outbox().isEmpty)
        #expect(try laptopChat.storedBodyBytes(of: "m1") == 0)
        // Nothing brings it back: a stale copy of the post arriving later owes nothing either.
        let (oldCopy, _) = try Self.store(3)
        try oldCopy.messages("chat").apply(MessageRecord(message: "m1", ops: [try #require(try phoneChat.ops(of: "m1").first { $0.action != .delete(.everyone) })]))
        try Self.sync(oldCopy, into: laptop)
        #expect(try laptopChat.outbox().isEmpty)
        #expect(try phone.digest(of: "chat") == laptop.digest(of: "chat"))
    }

    @Test func aRecallStillOwedIsNotCollectedAndIsOnceReceipted() throws {
        let (phone, chat) = try Self.conversation(1)
        let (_, bob) = try Self.contactStore()
        try chat.post("m1", body: "hello".bytes, author: "ana")
        try chat.receive(try bob.receive(try #require(try chat.outbox().first), from: phone.account), from: Self.bob)
        try chat.unsend("m1", scope: .everyone)
        let recall = try #require(try chat.outbox().first)
        #expect(recall.ops.map(\.action) == [.delete(.everyone)])
        var digest = try phone.contentDigest()
        try phone.recordAck(round: CollectionTests.round(1), digest: digest, generation: 1)
        #expect(try phone.commit(round: CollectionTests.round(1), digest: digest, generation: 1) == .collected(0))
        #expect(try chat.message("m1")?.scope == .everyone)
        // The contact takes the recall: its copy loses the text; its receipt frees the row.
        try chat.receive(try bob.receive(recall, from: phone.account), from: Self.bob)
        #expect(try bob.message("m1")?.scope == .everyone)
        #expect(try bob.storedBodyBytes(of: "m1") == 0)
        #expect(try chat.outbox().isEmpty)
        digest = try phone.contentDigest()
        try phone.recordAck(round: CollectionTests.round(2), digest: digest, generation: 2)
        #expect(try phone.commit(round: CollectionTests.round(2), digest: digest, generation: 2) == .collected(1))
        #expect(try chat.ops(of: "m1").isEmpty)
    }

    // MARK: - The wire

    @Test func messageRecordsRoundTripThroughAFrameAndGarbageIsATypedError() throws {
        let ops = [
            Self.post, Self.op(2, at: 200, .edit(body: "e".bytes)), Self.op(3, at: 300, .react(reactor: "ben", emoji: "👍")),
            Self.op(4, at: 400, .unreact(reactor: "ben")), Self.op(5, at: 500, .delete(.everyone)),
            MessageOp(
                id: Self.op(6, at: 0, .delete(.me)).id, message: "m1", time: 600, writer: Fixtures.device(70), account: Fixtures.account(7),
                action: .receipt(of: Self.post.id)),
        ]
        let message = ReconcileMessage(
            session: 7, namespace: "chat", kind: .messages, generation: 3,
            records: [.message(MessageRecord(message: "m1", ops: ops)), .message(MessageRecord(message: "m2", ops: [Self.op(6, at: 1, .delete(.me), message: "m2")]))])
        let bytes = FrameCodec.encode(.reconcile(message))
        #expect(try FrameCodec.decode(bytes) == .reconcile(message))
        // Every cut is an error, never a trap.
        for length in 0..<bytes.count {
            #expect(throws: (any Error).self) { try FrameCodec.decode(Array(bytes.prefix(length))) }
        }
    }

    @Test func aDeliveryFrameRoundTripsAndEveryCutOrForeignRecordIsATypedError() throws {
        let ops = [Self.post, Self.op(2, at: 200, .edit(body: "e".bytes))]
        let delivery = Delivery(conversation: "chat", records: [
            MessageRecord(message: "m2", ops: [Self.op(3, at: 1, .post(author: "ana", body: "two".bytes), message: "m2")]),
            MessageRecord(message: "m1", ops: ops),
        ])
        // Records travel sorted by message id, whatever order they were given in.
        #expect(delivery.records.map(\.message) == ["m1", "m2"])
        let bytes = FrameCodec.encode(.delivery(delivery))
        #expect(try FrameCodec.decode(bytes) == .delivery(delivery))
        for length in 0..<bytes.count {
            #expect(throws: (any Error).self) { try FrameCodec.decode(Array(bytes.prefix(length))) }
        }
        // A delivery naming no conversation is refused.
        #expect { try FrameCodec.decode(FrameCodec.encode(.delivery(Delivery(conversation: "", records: [])))) } throws: {
            ($0 as? CodecError)?.code == .valueOutOfRange
        }
        // An answer keeps its flag; an unknown flag bit is refused.
        let answer = Delivery(conversation: "chat", records: [MessageRecord(message: "m1", ops: ops)], isAnswer: true)
        #expect(try FrameCodec.decode(FrameCodec.encode(.delivery(answer))) == .delivery(answer))
        var flagged = FrameCodec.encode(.delivery(answer), compress: false)
        flagged[3 + 1 + 4] = 2
        #expect { try FrameCodec.decode(flagged) } throws: { ($0 as? CodecError)?.code == .notCanonical }
        // The same device named twice in the dictionary is refused.
        var writer = ByteWriter()
        writer.append([FrameCodec.formatVersion, 32, 0])
        writer.appendString("chat")
        writer.append(0)
        writer.appendVarint(2)
        writer.append(Fixtures.device(1).bytes)
        writer.append(Fixtures.device(1).bytes)
        writer.appendVarint(0)
        #expect { try FrameCodec.decode(writer.bytes) } throws: { ($0 as? CodecError)?.code == .notCanonical }
    }

    /// A contact's deleted message is collected only once the contact has
    /// heard our receipt (its acknowledgement): until then it delivers again,
    /// and a retry that found the row gone would bring the message back.
    @Test func aContactsDeletedMessageIsCollectedOnlyOnceTheContactHeardOurReceipt() throws {
        let (replica, chat) = try Self.conversation(1)
        let (_, bob) = try Self.contactStore()
        try bob.post("b1", body: "from bob".bytes, author: "ben")
        let delivery = try #require(try bob.outbox().first)
        let receipts = try chat.receive(delivery, from: Self.bob)
        try chat.post("a1", body: "mine".bytes, author: "ana")
        try chat.unsend("b1", scope: .me)
        try chat.unsend("a1", scope: .me)
        // Our receipt is owed until Bob acknowledges it: b1's row is not collected, a1's is.
        #expect(try chat.outbox().map(\.ops) == [receipts.ops])
        func round(_ generation: UInt64) throws -> CollectionOutcome {
            let digest = try replica.contentDigest()
            try replica.recordAck(round: CollectionTests.round(generation), digest: digest, generation: generation)
            return try replica.commit(round: CollectionTests.round(generation), digest: digest, generation: generation)
        }
        #expect(try round(1) == .collected(1))
        #expect(try chat.message("a1") == nil)
        #expect(try chat.message("b1")?.scope == .me)
        // Bob never heard the receipt and delivers again: the message stays deleted, without text.
        #expect(try chat.receive(delivery, from: Self.bob) == receipts)
        #expect(try chat.message("b1")?.isDeleted == true)
        #expect(try chat.storedBodyBytes(of: "b1") == 0)
        // Bob hears the receipt and acknowledges it: nothing is owed, and the next round collects.
        let acknowledgements = try bob.receive(receipts, from: replica.account, isAnswer: true)
        #expect(!acknowledgements.ops.isEmpty)
        #expect(try bob.outbox().isEmpty)
        #expect(try chat.receive(acknowledgements, from: Self.bob, isAnswer: true).ops.isEmpty)
        #expect(try chat.outbox().isEmpty)
        #expect(try round(2) == .collected(1))
        #expect(try chat.message("b1") == nil)
        #expect(try chat.ops(of: "b1").isEmpty)
        // A receipt naming an op this store no longer holds is not kept, but acknowledged,
        // unless it came as an answer (two collected sides would answer each other forever).
        let late = try chat.receive(acknowledgements, from: Self.bob)
        #expect(late.ops.map(\.action) == acknowledgements.ops.map { .receipt(of: $0.id) })
        #expect(try chat.ops(of: "b1").isEmpty)
        #expect(try chat.receive(acknowledgements, from: Self.bob, isAnswer: true).ops.isEmpty)
        #expect(try chat.orphanCount() == 0)
    }

    /// The record codec refuses what no sender writes: a delete with scope live,
    /// an unknown action, ops out of id order.
    @Test func theRecordDecoderRefusesWhatNoSenderWrites() throws {
        func encoded(_ ops: [MessageOp]) -> (devices: [DeviceID], bytes: [UInt8]) {
            var writer = ByteWriter()
            var records = RecordWriter()
            records.append([.message(MessageRecord(message: "m1", ops: ops))], into: &writer)
            return (records.devices, writer.bytes)
        }
        func decode(_ devices: [DeviceID], _ bytes: [UInt8]) throws -> [WireRecord] {
            var reader = ByteReader(bytes)
            var records = RecordReader(devices: devices)
            let decoded = try records.records(of: .messages, &reader)
            try reader.expectEnd("records")
            return decoded
        }
        let delete = encoded([Self.op(1, at: 5, .delete(.me))])
        #expect(try decode(delete.devices, delete.bytes) == [.message(MessageRecord(message: "m1", ops: [Self.op(1, at: 5, .delete(.me))]))])
        var live = delete.bytes
        live[live.count - 1] = 0  // the scope byte
        #expect(throws: CodecError.self) { try decode(delete.devices, live) }
        var unknown = delete.bytes
        unknown[unknown.count - 2] = 9  // the action byte
        #expect(throws: CodecError.self) { try decode(delete.devices, unknown) }
        // Two ops written in id order, then swapped: not canonical.
        let first = Self.op(1, at: 5, .delete(.me))
        let second = Self.op(2, at: 5, .delete(.me))
        let pair = encoded([first, second])
        let one = encoded([first]).bytes
        let opBytes = pair.bytes.count - one.count  // both ops take as many bytes
        let prefix = one.count - opBytes  // the record count, the key and the op count
        let swapped = Array(pair.bytes[..<prefix]) + Array(pair.bytes[(prefix + opBytes)...]) + Array(pair.bytes[prefix..<(prefix + opBytes)])
        #expect(throws: CodecError.self) { try decode(pair.devices, swapped) }
    }

    /// A conversation declared in a transaction that rolls back leaves its id free;
    /// a namespace of another kind declared next takes it and must get statements
    /// of its own kind, not the conversation's cached ones (a slot past the
    /// conversation's count, or its SQL against the other kind's table).
    @Test func anIdARolledBackConversationHeldServesTheNextNamespaceWithItsOwnStatements() throws {
        let replica = try Fixtures.memoryReplica(device: Fixtures.device(1))
        struct Undo: Error {}
        var chatID: Int64?
        #expect(throws: Undo.self) {
            try replica.write {
                let chat = try replica.messages("chat")
                chatID = chat.declaration.id
                _ = try chat.post("m1", body: "hello".bytes, author: "ana")
                #expect(try chat.message("m1") != nil)
                throw Undo()
            }
        }
        let notes = try replica.causal("notes")
        #expect(notes.declaration.id == chatID, "the id comes back (else this test proves nothing)")
        _ = try notes.put("passport", "in the drawer".bytes)
        #expect(try notes.get("passport") == "in the drawer".bytes)
        // And the other way round: a conversation on the id a rolled-back causal namespace held.
        #expect(throws: Undo.self) {
            try replica.write {
                _ = try replica.causal("draft").put("k", "v".bytes)
                throw Undo()
            }
        }
        let chat = try replica.messages("chat")
        _ = try chat.post("m2", body: "again".bytes, author: "ana")
        #expect(try chat.message("m2")?.body == "again".bytes)
    }
}
