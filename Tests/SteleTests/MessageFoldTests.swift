import Testing
import TestSupport
@testable import Stele

/// The fold of 000 §6, each ordering claim in every arrival order.
@Suite struct MessageFoldTests {
    static func id(_ byte: UInt8) -> MessageOpID {
        // 16 bytes, the first one varying.
        guard let id = try? MessageOpID(bytes: [byte] + [UInt8](repeating: 0, count: 15)) else { preconditionFailure() }
        return id
    }

    static func op(_ byte: UInt8, at time: Int64, _ action: MessageOp.Action, message: String = "m1") -> MessageOp {
        MessageOp(id: id(byte), message: message, time: time, writer: try! DeviceID(bytes: Array(repeating: byte, count: DeviceID.byteCount)),
            account: Fixtures.account(), action: action)
    }

    static let post = op(1, at: 100, .post(author: "ana", body: Array("hello".utf8)))

    /// Every arrival order of `ops` through a ``MessageHistory``: the rows seen
    /// once everything arrived, and whether each order agreed with the first.
    static func everyArrivalOrder(_ ops: [MessageOp]) -> [MessageRow?] {
        ops.permutations().map { order in
            var history = MessageHistory(message: "m1")
            for op in order { history.insert(op) }
            return history.row
        }
    }

    /// `é` as one character and as `e` + U+0301 are two messages (the store and
    /// the wire tell ids by their bytes): a record refuses an op of the other,
    /// a history keeps it out, and a fold applies none of its edits.
    @Test func anOpOfACanonicallyEqualIdIsAnotherMessages() throws {
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        let post = Self.op(1, at: 100, .post(author: "ana", body: Array("hello".utf8)), message: composed)
        let foreign = Self.op(2, at: 200, .edit(body: Array("other".utf8)), message: decomposed)
        let refused = #expect(throws: ReplicaError.self) { try MessageRecord(message: composed, ops: [post, foreign]).validate() }
        #expect(refused?.code == .invalidRecord)
        var history = MessageHistory(message: composed)
        let stored = history.insert(post)
        let storedForeign = history.insert(foreign)
        #expect(stored && !storedForeign)
        #expect(history.row?.body == Array("hello".utf8))
        #expect(MessageFold.fold([post, foreign])?.body == Array("hello".utf8))
    }

    @Test func anEditAppliesAndTheLaterOfTwoEditsWins() throws {
        let first = Self.op(2, at: 200, .edit(body: Array("hello, world".utf8)))
        let second = Self.op(3, at: 300, .edit(body: Array("hi".utf8)))
        for row in Self.everyArrivalOrder([Self.post, first, second]) {
            #expect(row?.body == Array("hi".utf8))
            #expect(row?.editedAt == 300)
            #expect(row?.editOp == Self.id(3))
        }
    }

    @Test func twoEditsInTheSameMillisecondGoToTheLargerOpID() throws {
        let low = Self.op(0x10, at: 200, .edit(body: Array("low".utf8)))
        let high = Self.op(0xF0, at: 200, .edit(body: Array("high".utf8)))
        for row in Self.everyArrivalOrder([Self.post, high, low]) {
            #expect(row?.body == Array("high".utf8))
            #expect(row?.editOp == Self.id(0xF0))
        }
        // Byte order, not numeric or string order of something else: 0x80 beats 0x7F.
        let a = Self.op(0x7F, at: 200, .edit(body: Array("7f".utf8)))
        let b = Self.op(0x80, at: 200, .edit(body: Array("80".utf8)))
        #expect(MessageFold.fold([Self.post, b, a])?.body == Array("80".utf8))
    }

    @Test func anyDeleteIsAbsorbingWhetherTheEditCameFirstOrLater() throws {
        for scope in [DeleteScope.me, .everyone] {
            let edit = Self.op(2, at: 200, .edit(body: Array("edited".utf8)))
            let delete = Self.op(3, at: 300, .delete(scope))
            let lateEdit = Self.op(4, at: 400, .edit(body: Array("too late".utf8)))
            // Edit then delete, and delete then a later edit: deleted, every arrival order.
            for ops in [[Self.post, edit, delete], [Self.post, delete, lateEdit], [Self.post, edit, delete, lateEdit]] {
                for row in Self.everyArrivalOrder(ops) {
                    #expect(row?.scope == scope)
                    #expect(row?.editedAt == nil)
                    #expect(row?.editOp == nil)
                    #expect(row?.body != Array("too late".utf8))
                }
            }
        }
    }

    @Test func theStrongerDeleteScopeWinsAndAnyDeletePurgesTheBody() throws {
        let me = Self.op(2, at: 200, .delete(.me))
        let everyone = Self.op(3, at: 150, .delete(.everyone))
        for row in Self.everyArrivalOrder([Self.post, me, everyone]) {
            #expect(row?.scope == .everyone)
            #expect(row?.body == [])
        }
        for row in Self.everyArrivalOrder([Self.post, me]) {
            #expect(row?.scope == .me)
            #expect(row?.isDeleted == true)
            #expect(row?.body == [])
        }
    }

    @Test func aDeletedRowsLeafIsTheSameWhateverHistoryLedThere() throws {
        let edit = Self.op(2, at: 200, .edit(body: Array("edited".utf8)))
        let react = Self.op(5, at: 210, .react(reactor: "ben", emoji: "👍"))
        let delete = Self.op(3, at: 300, .delete(.me))
        let sawEverything = try #require(MessageFold.fold([Self.post, edit, react, delete]))
        let sawOnlyTheDelete = try #require(MessageFold.fold([Self.post, delete]))
        #expect(sawEverything.leaf == sawOnlyTheDelete.leaf)
        // Live, the same two histories differ, as they must.
        let live = try #require(MessageFold.fold([Self.post, edit]))
        #expect(live.leaf != MessageFold.fold([Self.post])?.leaf)
        // Deleted for everyone, too: the purged body does not split them either.
        let everyone = Self.op(3, at: 300, .delete(.everyone))
        #expect(MessageFold.fold([Self.post, edit, react, everyone])?.leaf == MessageFold.fold([Self.post, everyone])?.leaf)
    }

    @Test func opsThatArriveBeforeTheirMessageWaitAndFoldWhenItLands() throws {
        let edit = Self.op(2, at: 200, .edit(body: Array("edited".utf8)))
        let react = Self.op(4, at: 220, .react(reactor: "ben", emoji: "🎉"))
        var history = MessageHistory(message: "m1")
        history.insert(react)
        history.insert(edit)
        #expect(history.row == nil)
        history.insert(Self.post)
        let row = try #require(history.row)
        #expect(row.body == Array("edited".utf8))
        #expect(row.shownReactions == ["ben": "🎉"])
        // Inserting again changes nothing; another message's op is not this history's.
        let again = history.insert(edit)
        let foreign = history.insert(Self.op(9, at: 500, .delete(.everyone), message: "m2"))
        #expect(!again)
        #expect(!foreign)
        #expect(history.row == row)
    }

    @Test func reactionsAreARegisterPerReactor() throws {
        let react = Self.op(2, at: 200, .react(reactor: "ben", emoji: "👍"))
        let newer = Self.op(3, at: 300, .react(reactor: "ben", emoji: "❤️"))
        let removal = Self.op(4, at: 250, .unreact(reactor: "ben"))
        let other = Self.op(5, at: 200, .react(reactor: "cy", emoji: "😮"))
        for row in Self.everyArrivalOrder([Self.post, react, newer, removal, other]) {
            #expect(row?.shownReactions == ["ben": "❤️", "cy": "😮"])
        }
    }

    @Test func onATieARemovalBeatsAReactionThenTheLargerEmojiWins() throws {
        let react = Self.op(2, at: 200, .react(reactor: "ben", emoji: "👍"))
        let removal = Self.op(3, at: 200, .unreact(reactor: "ben"))
        for row in Self.everyArrivalOrder([Self.post, react, removal]) {
            #expect(row?.shownReactions == [:])
        }
        // Same time, two emoji: the larger (by UTF-8 bytes) wins, whatever the op ids.
        let smaller = Self.op(0xF0, at: 200, .react(reactor: "ben", emoji: "A"))
        let larger = Self.op(0x02, at: 200, .react(reactor: "ben", emoji: "B"))
        for row in Self.everyArrivalOrder([Self.post, smaller, larger]) {
            #expect(row?.shownReactions == ["ben": "B"])
        }
        #expect(Reaction(emoji: nil, time: 5).beats(Reaction(emoji: "Z", time: 5)))
        #expect(!Reaction(emoji: "Z", time: 5).beats(Reaction(emoji: nil, time: 5)))
        #expect(Reaction(emoji: "A", time: 6).beats(Reaction(emoji: nil, time: 5)))
        #expect(!Reaction(emoji: "A", time: 5).beats(Reaction(emoji: "A", time: 5)))
    }

    @Test(arguments: [DeleteScope.me, .everyone])
    func aDeleteLeavesNoBodyInAnyStoredOp(scope: DeleteScope) throws {
        let edit = Self.op(2, at: 200, .edit(body: Array("secret edit".utf8)))
        let delete = Self.op(3, at: 300, .delete(scope))
        let lateEdit = Self.op(4, at: 400, .edit(body: Array("arrives after".utf8)))
        for order in [Self.post, edit, delete, lateEdit].permutations() {
            var history = MessageHistory(message: "m1")
            for op in order { history.insert(op) }
            for op in history.ops.values {
                switch op.action {
                case .post(_, let body), .edit(let body): #expect(body.isEmpty)
                default: break
                }
            }
            #expect(history.row?.scope == scope)
        }
    }

    @Test func theFirstPostIsTheMessage() throws {
        let again = Self.op(7, at: 500, .post(author: "eve", body: Array("replaced?".utf8)))
        for row in Self.everyArrivalOrder([Self.post, again]) {
            #expect(row?.author == "ana")
            #expect(row?.body == Array("hello".utf8))
        }
    }

    /// The arrival-order check can fail: a double that lets the newest arrival
    /// win (the error 000 §6 rules out) gives one outcome per order; the fold, one.
    @Test func aFoldInArrivalOrderIsCaught() throws {
        let late = Self.op(2, at: 300, .edit(body: Array("late".utf8)))
        let early = Self.op(3, at: 200, .edit(body: Array("early".utf8)))
        func newestArrivalWins(_ ops: [MessageOp]) -> [UInt8] {
            ops.compactMap { op in if case .edit(let body) = op.action { body } else { nil } }.last ?? []
        }
        let broken = [Self.post, late, early].permutations().map(newestArrivalWins)
        #expect(Set(broken).count == 2)
        let folded = Self.everyArrivalOrder([Self.post, late, early]).map { $0?.body ?? [] }
        #expect(Set(folded) == [Array("late".utf8)])
    }

    @Test func opIDsAreSixteenBytes() throws {
        #expect(throws: CodecError.self) { _ = try MessageOpID(bytes: [1, 2, 3]) }
        var generator = SeededGenerator(seed: 4)
        #expect(MessageOpID.generate(using: &generator) != MessageOpID.generate(using: &generator))
        // An array, a slice of one and any other collection read alike, and refuse alike.
        let bytes = (0..<UInt8(18)).map { $0 &* 37 }
        let fromArray = try MessageOpID(bytes: Array(bytes[1..<17]))
        #expect(try MessageOpID(bytes: bytes[1..<17]) == fromArray)
        #expect(try MessageOpID(bytes: AnyCollection(bytes[1..<17])) == fromArray)
        #expect(fromArray.bytes == Array(bytes[1..<17]))
        for count in [15, 17] {
            #expect(throws: CodecError.self) { _ = try MessageOpID(bytes: Array(bytes.prefix(count))) }
            #expect(throws: CodecError.self) { _ = try MessageOpID(bytes: bytes.prefix(count)) }
            #expect(throws: CodecError.self) { _ = try MessageOpID(bytes: bytes.prefix(count).reversed()) }
        }
        // Ids order by their bytes, the first byte first.
        let low = try MessageOpID(bytes: [0x01] + [UInt8](repeating: 0xFF, count: 15))
        let high = try MessageOpID(bytes: [0x02] + [UInt8](repeating: 0x00, count: 15))
        #expect(low < high && !(high < low))
        let tail = try MessageOpID(bytes: [UInt8](repeating: 0, count: 15) + [0x01])
        #expect(tail < low)
    }
}

/// The outbox duty (000 §6 "reconcileOutboxDuty"): what this account still owes
/// the other side, a pure function of the ops, the same in every arrival order.
@Suite struct MessageDutyTests {
    static let me = Fixtures.account(1)
    static let contact = Fixtures.account(2)

    static func op(_ byte: UInt8, at time: Int64, _ action: MessageOp.Action, account: AccountID = me) -> MessageOp {
        MessageOp(
            id: MessageFoldTests.id(byte), message: "m1", time: time, writer: Fixtures.device(UInt64(byte)), account: account, action: action)
    }

    static let post = op(1, at: 100, .post(author: "ana", body: "hello".bytes))
    static func receipt(of op: MessageOp, _ byte: UInt8, at time: Int64 = 150) -> MessageOp {
        Self.op(byte, at: time, .receipt(of: op.id), account: contact)
    }

    /// The duty of `ops`, checked to be the same for every arrival order.
    static func duty(_ ops: [MessageOp], sourceLocation: SourceLocation = #_sourceLocation) -> [MessageOpID] {
        let duties = Set(ops.permutations().map { MessageFold.duty(of: $0, for: me).map(\.id) })
        #expect(duties.count == 1, "arrival orders owe different ops", sourceLocation: sourceLocation)
        return duties.first ?? []
    }

    @Test func aLiveMessageOwesItsUnreceiptedOpsAndAReceiptCancelsThem() {
        let edit = Self.op(2, at: 200, .edit(body: "edited".bytes))
        let react = Self.op(3, at: 210, .react(reactor: "ana", emoji: "👍"))
        #expect(Self.duty([Self.post]) == [Self.post.id])
        #expect(Self.duty([Self.post, edit, react]) == [Self.post.id, edit.id, react.id])
        #expect(Self.duty([Self.post, Self.receipt(of: Self.post, 9), edit]) == [edit.id])
        #expect(Self.duty([Self.post, Self.receipt(of: Self.post, 9), edit, Self.receipt(of: edit, 10, at: 250)]).isEmpty)
        // A receipt that arrives before the op it names cancels it all the same.
        #expect(MessageFold.duty(of: [Self.receipt(of: Self.post, 9), Self.post], for: Self.me).isEmpty)
    }

    @Test func aContactsOpsAndReceiptsAreNeverOwed() {
        let theirs = Self.op(1, at: 100, .post(author: "ben", body: "hi".bytes), account: Self.contact)
        let myReaction = Self.op(2, at: 200, .react(reactor: "ana", emoji: "👍"))
        #expect(Self.duty([theirs]).isEmpty)
        #expect(Self.duty([theirs, myReaction]) == [myReaction.id])
        #expect(MessageFold.duty(of: [theirs, myReaction], for: Self.contact) == [theirs])
    }

    @Test(arguments: [DeleteScope.me, .everyone])
    func anUndeliveredMessageThatIsDeletedOwesNothingInAnyOrder(scope: DeleteScope) {
        let edit = Self.op(2, at: 200, .edit(body: "edited".bytes))
        let delete = Self.op(3, at: 300, .delete(scope))
        #expect(Self.duty([Self.post, edit, delete]).isEmpty)
    }

    @Test func aDeliveredMessageDeletedForEveryoneOwesItsRecallUntilThatIsReceipted() {
        let edit = Self.op(2, at: 200, .edit(body: "edited".bytes))
        let recall = Self.op(3, at: 300, .delete(.everyone))
        let delivered = Self.receipt(of: Self.post, 9)
        #expect(Self.duty([Self.post, delivered, edit, recall]) == [recall.id])
        let recalled = Self.receipt(of: recall, 10, at: 350)
        #expect(Self.duty([Self.post, delivered, edit, recall, recalled]).isEmpty)
        // Deleted for me after delivery: nothing more travels.
        #expect(Self.duty([Self.post, delivered, edit, Self.op(4, at: 300, .delete(.me))]).isEmpty)
    }

    /// A contact holds a copy of our message: its edit or its delete for everyone
    /// of it changes nothing, in any arrival order; its delete for me is its own.
    @Test func onlyTheAuthorsAccountEditsOrRecallsAMessage() throws {
        let forgedEdit = Self.op(2, at: 200, .edit(body: "forged".bytes), account: Self.contact)
        let forgedRecall = Self.op(3, at: 300, .delete(.everyone), account: Self.contact)
        for order in [Self.post, forgedEdit, forgedRecall].permutations() {
            let row = try #require(MessageFold.fold(order))
            #expect(row.scope == .live)
            #expect(row.body == "hello".bytes)
            #expect(row.recalls.isEmpty)
        }
        let realEdit = Self.op(4, at: 250, .edit(body: "mine".bytes))
        #expect(MessageFold.fold([Self.post, forgedEdit, realEdit])?.body == "mine".bytes)
    }

    @Test func devicesThatDisagreeOnADeliveryHoldDifferentLeavesUntilTheReceiptArrives() throws {
        let recall = Self.op(3, at: 300, .delete(.everyone))
        let delivered = Self.receipt(of: Self.post, 9)
        let knowsDelivery = try #require(MessageFold.fold([Self.post, delivered, recall]))
        let doesNot = try #require(MessageFold.fold([Self.post, recall]))
        #expect(knowsDelivery.leaf != doesNot.leaf)
        let live = try #require(MessageFold.fold([Self.post, delivered]))
        #expect(live.leaf != MessageFold.fold([Self.post])?.leaf)
        #expect(live.isDelivered)
    }
}
