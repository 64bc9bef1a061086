import Testing
import TestSupport
@testable import Stele

/// Deliveries between accounts, node against node: what goes at once, what
/// waits for an agreement with a sibling (the gate), receipts, and every frame
/// a contact's device may not send.
@Suite struct DeliveryTests {
    static let ana = Fixtures.account(1)
    static let bob = Fixtures.account(2)

    /// Ana's phone and laptop, and Bob's phone; each with a conversation "chat".
    struct World {
        /// The phone's wall clock: the settling moment after an agreement passes on it.
        let clock: ManualWallClock
        let phone: Replica
        let laptop: Replica
        let bobPhone: Replica
        var phoneNode: FleetNode
        var bobNode: FleetNode
        var chat: MessageNamespace { get throws { try phone.messages("chat") } }
        var laptopChat: MessageNamespace { get throws { try laptop.messages("chat") } }
    }

    /// - Parameter siblings: whether the phone has the laptop as a sibling.
    static func world(siblings: Bool = true) throws -> World {
        let clock = ManualWallClock()
        let phone = try Fixtures.memoryReplica(account: ana, device: Fixtures.device(11), clock: clock)
        let laptop = try Fixtures.memoryReplica(account: ana, device: Fixtures.device(12))
        let bobPhone = try Fixtures.memoryReplica(account: bob, device: Fixtures.device(21))
        for replica in [phone, laptop] { _ = try replica.conversation("chat", with: bob) }
        _ = try bobPhone.conversation("chat", with: ana)
        var phoneNode = FleetNode(unsealed: phone, roster: siblings ? [phone.device, laptop.device] : [phone.device], random: SeededGenerator(seed: 1))
        var bobNode = FleetNode(unsealed: bobPhone, roster: [bobPhone.device], random: SeededGenerator(seed: 2))
        _ = phoneNode.handle(.contactsChanged([ContactRoster(account: bob, members: [bobPhone.device])]))
        _ = bobNode.handle(.contactsChanged([ContactRoster(account: ana, members: [phone.device, laptop.device])]))
        return World(clock: clock, phone: phone, laptop: laptop, bobPhone: bobPhone, phoneNode: phoneNode, bobNode: bobNode)
    }

    /// The laptop posts m1, the phone takes it in by reconcile (both hold it) and
    /// tries to deliver after the change: in the laptop's turn it neither sends
    /// m1 nor waits on it; the outputs of its try once that turn is over.
    static func laptopPostsAndThePhoneTries(_ world: inout World, text: String = "x") throws -> [FleetOutput] {
        try world.laptopChat.post("m1", body: text.bytes, author: "ana")
        try sync(world.laptop, into: world.phone)
        _ = world.phoneNode.handle(.localChange)
        let inTurn = world.phoneNode.handle(.timer(.changeDebounce))
        #expect(deliveries(inTurn).isEmpty)
        #expect(!kinds(inTurn).contains(.deliveryWaits))
        #expect(world.phoneNode.hasDeliveryWaitingOutATurn)
        return world.phoneNode.handle(.timer(.outbox), at: world.phoneNode.monotonicNow + FleetConfiguration().deliveryRetryMilliseconds)
    }

    /// The laptop's advertisement reaches the phone; the settling moment passes; the phone tries again.
    static func agreeAndSettle(_ world: inout World) throws -> [FleetOutput] {
        let agreed = world.phoneNode.handle(try advertisement(of: world.laptop))
        let settle = FleetConfiguration().deliverySettleMilliseconds
        #expect(agreed.contains(.arm(.outbox, afterMilliseconds: settle)))
        #expect(deliveries(agreed).isEmpty)
        // Before the moment has passed, nothing goes.
        #expect(deliveries(world.phoneNode.handle(.timer(.outbox))).isEmpty)
        return world.phoneNode.handle(.timer(.outbox), at: world.phoneNode.monotonicNow + settle)
    }

    /// The deliveries among `outputs`, by recipient.
    static func deliveries(_ outputs: [FleetOutput]) -> [(to: DeviceID, delivery: Delivery)] {
        outputs.compactMap { output in
            guard case let .send(to, bytes) = output, case .delivery(let delivery)? = try? FrameCodec.decode(bytes) else { return nil }
            return (to, delivery)
        }
    }

    static func kinds(_ outputs: [FleetOutput]) -> [FleetEvent.Kind] {
        FleetNodeTests.logs(outputs).map(\.kind)
    }

    /// The laptop's advertisement, as the phone receives it.
    static func advertisement(of replica: Replica) throws -> FleetInput {
        let node = FleetNode(unsealed: replica, roster: [replica.device], random: SeededGenerator(seed: 9))
        return .frame(from: replica.device, bytes: FrameCodec.encode(.advertisement(try node.advertisement())))
    }

    /// Every record of the laptop's conversation applied to the phone's, as a reconcile would.
    static func sync(_ from: Replica, into to: Replica) throws {
        let source = try NamespaceSync(replica: from, declaration: try from.declaration(of: "chat"))
        try NamespaceSync(replica: to, declaration: try to.declaration(of: "chat")).apply(try source.records(from: [], below: nil))
    }

    @Test func aMessagePostedSinceTheLastShareGoesAtOnceAndTheReceiptEmptiesTheOutbox() throws {
        var world = try Self.world()
        _ = world.phoneNode.handle(.start)
        _ = world.bobNode.handle(.start)
        try world.chat.post("m1", body: "hello".bytes, author: "ana")
        _ = world.phoneNode.handle(.localChange)
        let sent = world.phoneNode.handle(.timer(.changeDebounce))
        let deliveries = Self.deliveries(sent)
        #expect(deliveries.map(\.to) == [world.bobPhone.device])
        #expect(deliveries.first?.delivery.records.map(\.message) == ["m1"])
        #expect(Self.kinds(sent).contains(.delivered))
        // The retry is armed while anything is owed.
        #expect(sent.contains(.arm(.outbox, afterMilliseconds: FleetConfiguration().deliveryRetryMilliseconds)))

        let bytes = try #require(sent.compactMap { if case let .send(to, bytes) = $0, to == world.bobPhone.device { bytes } else { nil } }.first)
        let answered = world.bobNode.handle(.frame(from: world.phone.device, bytes: bytes))
        #expect(try world.bobPhone.messages("chat").message("m1")?.body == "hello".bytes)
        #expect(Self.kinds(answered).contains(.deliveryReceived))
        let receipts = Self.deliveries(answered)
        #expect(receipts.map(\.to) == [world.phone.device])
        #expect(receipts.first?.delivery.records.first?.ops.allSatisfy { if case .receipt = $0.action { true } else { false } } == true)

        let receiptBytes = try #require(answered.compactMap { if case let .send(_, bytes) = $0 { bytes } else { nil } }.first)
        let settled = world.phoneNode.handle(.frame(from: world.bobPhone.device, bytes: receiptBytes))
        #expect(try world.chat.message("m1")?.isDelivered == true)
        #expect(try world.chat.outboxCount() == 0)
        // A receipt is acknowledged (an answer), and the acknowledgement is not answered:
        // it empties Bob's outbox, which held his receipt until then.
        let acknowledgements = Self.deliveries(settled)
        #expect(acknowledgements.map(\.to) == [world.bobPhone.device])
        #expect(acknowledgements.first?.delivery.isAnswer == true)
        #expect(try world.bobPhone.messages("chat").outboxCount() == 1)
        let last = world.bobNode.handle(.frame(from: world.phone.device, bytes: FrameCodec.encode(.delivery(try #require(acknowledgements.first?.delivery)))))
        #expect(Self.deliveries(last).isEmpty)
        #expect(try world.bobPhone.messages("chat").outboxCount() == 0)
        // Nothing owed: the retry finds nothing to send and is not armed again.
        let retry = world.phoneNode.handle(.timer(.outbox))
        #expect(Self.deliveries(retry).isEmpty)
        #expect(!retry.contains(.arm(.outbox, afterMilliseconds: FleetConfiguration().deliveryRetryMilliseconds)))
    }

    @Test func aDeliveryThatCameTwiceIsReceiptedOnceAndAnsweredWithTheSameReceipts() throws {
        var world = try Self.world(siblings: false)
        try world.chat.post("m1", body: "hello".bytes, author: "ana")
        _ = world.phoneNode.handle(.start)
        let bytes = FrameCodec.encode(.delivery(Delivery(conversation: "chat", records: try world.chat.outbox())))
        let first = Self.deliveries(world.bobNode.handle(.frame(from: world.phone.device, bytes: bytes)))
        let second = Self.deliveries(world.bobNode.handle(.frame(from: world.phone.device, bytes: bytes)))
        #expect(first.map(\.delivery) == second.map(\.delivery))
        #expect(try world.bobPhone.messages("chat").ops(of: "m1").count == 2)
    }

    @Test func aDeviceWithNoSiblingDeliversEverythingAtOnce() throws {
        var world = try Self.world(siblings: false)
        // Written before the node started: with a sibling it would wait.
        try world.chat.post("m1", body: "hello".bytes, author: "ana")
        let started = world.phoneNode.handle(.start)
        #expect(Self.deliveries(started).first?.delivery.records.map(\.message) == ["m1"])
        #expect(!Self.kinds(started).contains(.deliveryWaits))
    }

    /// The gate in both orders: the laptop's delete reaches the phone before
    /// the agreement (nothing is delivered), or the agreement comes first with
    /// no delete anywhere (the message goes then, and not before).
    @Test(arguments: [true, false])
    func aMessageASiblingHoldsWaitsForAnAgreementAndADeleteThatArrivesFirstCancelsIt(deleteFirst: Bool) throws {
        var world = try Self.world()
        _ = world.phoneNode.handle(.start)
        let waiting = try Self.laptopPostsAndThePhoneTries(&world, text: "meet at nine")
        #expect(Self.deliveries(waiting).isEmpty)
        #expect(Self.kinds(waiting).contains(.deliveryWaits))
        #expect(try world.chat.outboxCount() == 1)
        // An advertisement that differs is no agreement.
        try world.laptopChat.edit("m1", body: "meet at ten".bytes)
        #expect(Self.deliveries(world.phoneNode.handle(try Self.advertisement(of: world.laptop))).isEmpty)
        try Self.sync(world.laptop, into: world.phone)

        if deleteFirst {
            try world.laptopChat.unsend("m1", scope: .everyone)
            try Self.sync(world.laptop, into: world.phone)
            #expect(try world.chat.outboxCount() == 0)
            #expect(Self.deliveries(try Self.agreeAndSettle(&world)).isEmpty)
        } else {
            let sent = Self.deliveries(try Self.agreeAndSettle(&world))
            #expect(sent.map(\.to) == [world.bobPhone.device])
            // The post; the edit, first found here just now, waits out the laptop's turn.
            #expect(sent.first?.delivery.records.first?.ops.map(\.action) == [.post(author: "ana", body: "meet at nine".bytes)])
            // A try right after sends nothing and waits for nothing: the post went just
            // now (again only a retry interval later), the edit's turn is not over.
            let sentAt = world.phoneNode.monotonicNow
            let soon = world.phoneNode.handle(.timer(.outbox), at: sentAt + 1)
            #expect(Self.deliveries(soon).isEmpty)
            #expect(!Self.kinds(soon).contains(.deliveryWaits))
            // The next retry waits for an agreement of its own.
            let retry = world.phoneNode.handle(.timer(.outbox), at: sentAt + FleetConfiguration().deliveryRetryMilliseconds)
            #expect(Self.deliveries(retry).isEmpty)
            #expect(Self.kinds(retry).contains(.deliveryWaits))
        }
    }

    @Test func aMessageThatLeftForASiblingByReconcileWaitsLikeOneASiblingWrote() throws {
        var world = try Self.world()
        var laptopNode = FleetNode(unsealed: world.laptop, roster: [world.phone.device, world.laptop.device], random: SeededGenerator(seed: 3))
        _ = world.phoneNode.handle(.start)
        _ = laptopNode.handle(.start)
        try world.chat.post("m1", body: "x".bytes, author: "ana")
        // The phone's advertisement starts a reconcile on the laptop; frames go back
        // and forth until neither has anything to say.
        var inFlight: [(to: DeviceID, bytes: [UInt8])] = [(world.laptop.device, FrameCodec.encode(.advertisement(try world.phoneNode.advertisement())))]
        while !inFlight.isEmpty {
            let (to, bytes) = inFlight.removeFirst()
            let outputs = to == world.laptop.device
                ? laptopNode.handle(.frame(from: world.phone.device, bytes: bytes)) : world.phoneNode.handle(.frame(from: world.laptop.device, bytes: bytes))
            for case let .send(recipient, frame) in outputs where recipient == world.phone.device || recipient == world.laptop.device {
                inFlight.append((recipient, frame))
            }
        }
        #expect(try world.laptopChat.message("m1")?.body == "x".bytes)
        _ = world.phoneNode.handle(.localChange)
        let outputs = world.phoneNode.handle(.timer(.changeDebounce))
        #expect(Self.deliveries(outputs).isEmpty)
        #expect(Self.kinds(outputs).contains(.deliveryWaits))
    }

    @Test func anAgreementBeforeTheWaitBeganDoesNotReleaseIt() throws {
        var world = try Self.world()
        _ = world.phoneNode.handle(.start)
        // Agreed while nothing was owed.
        _ = world.phoneNode.handle(try Self.advertisement(of: world.laptop))
        #expect(Self.deliveries(try Self.laptopPostsAndThePhoneTries(&world)).isEmpty)
        #expect(Self.deliveries(world.phoneNode.handle(.timer(.outbox))).isEmpty)
        #expect(!Self.deliveries(try Self.agreeAndSettle(&world)).isEmpty)
    }

    /// The settling moment is measured on the monotonic clock inputs carry: the
    /// wall clock set forward releases nothing early, set back holds nothing longer.
    @Test(arguments: [Int64(3_600_000), -3_600_000]) func theWallClockDoesNotMeasureTheSettlingMoment(wallClockJump: Int64) throws {
        var world = try Self.world()
        _ = world.phoneNode.handle(.start)
        _ = try Self.laptopPostsAndThePhoneTries(&world)
        _ = world.phoneNode.handle(try Self.advertisement(of: world.laptop))
        world.clock.advance(byMilliseconds: wallClockJump)
        #expect(Self.deliveries(world.phoneNode.handle(.timer(.outbox))).isEmpty)
        let settled = world.phoneNode.monotonicNow + FleetConfiguration().deliverySettleMilliseconds
        #expect(!Self.deliveries(world.phoneNode.handle(.timer(.outbox), at: settled)).isEmpty)
    }

    /// An agreement with one sibling does not release the wait while another
    /// sibling heard from lately holds something else: it may be bringing the delete.
    @Test func aSiblingHeardFromLatelyThatDiffersHoldsTheWait() throws {
        var world = try Self.world()
        let tablet = try Fixtures.memoryReplica(account: Self.ana, device: Fixtures.device(13))
        _ = try tablet.conversation("chat", with: Self.bob)
        _ = world.phoneNode.handle(.rosterChanged(members: [world.phone.device, world.laptop.device, tablet.device], revoked: []))
        _ = world.phoneNode.handle(.start)
        _ = try Self.laptopPostsAndThePhoneTries(&world)
        try Self.sync(world.laptop, into: tablet)
        // The tablet deleted it; its advertisement arrives, then the laptop's (equal).
        try tablet.messages("chat").unsend("m1", scope: .everyone)
        _ = world.phoneNode.handle(try Self.advertisement(of: tablet))
        #expect(Self.deliveries(try Self.agreeAndSettle(&world)).isEmpty)
        // The tablet's delete arrives: nothing is owed any more.
        try Self.sync(tablet, into: world.phone)
        #expect(try world.chat.outboxCount() == 0)
    }

    // MARK: - Whose turn it is

    /// Bob's second device, beside his phone, on the phone node's contact roster.
    static func withBobsTablet(_ world: inout World) -> DeviceID {
        let tablet = Fixtures.device(22)
        _ = world.phoneNode.handle(.contactsChanged([ContactRoster(account: bob, members: [world.bobPhone.device, tablet])]))
        return tablet
    }

    /// The ops of `outputs`' deliveries, by recipient.
    static func ops(_ outputs: [FleetOutput]) -> [DeviceID: [MessageOp]] {
        Dictionary(deliveries(outputs).map { ($0.to, $0.delivery.records.flatMap(\.ops)) }, uniquingKeysWith: +)
    }

    @Test func inItsTurnAnOpGoesFromItsWriterToTheContactsDeviceHeardLastAndAfterItToEveryEveryRetryInterval() throws {
        var world = try Self.world()
        let tablet = Self.withBobsTablet(&world)
        let everyone = Set([world.bobPhone.device, tablet])
        _ = world.phoneNode.handle(.start)
        // Nobody heard from yet: the lowest id.
        let m1 = try world.chat.post("m1", body: "one".bytes, author: "ana")
        _ = world.phoneNode.handle(.localChange)
        let first = Self.ops(world.phoneNode.handle(.timer(.changeDebounce)))
        #expect(first == [everyone.min()!: [m1]])
        #expect(world.phoneNode.hasDeliveryWaitingOutATurn)

        // Bob's tablet delivers; the receipt goes back at once as the answer, to it alone.
        let b1 = MessageOp(
            id: try MessageOpID(bytes: [UInt8](repeating: 7, count: 16)), message: "b1", time: 1, writer: tablet, account: Self.bob,
            action: .post(author: "ben", body: "hi".bytes))
        let received = world.phoneNode.handle(
            .frame(from: tablet, bytes: FrameCodec.encode(.delivery(Delivery(conversation: "chat", records: [MessageRecord(message: "b1", ops: [b1])])))),
            at: 1_000)
        let answer = Self.ops(received)
        #expect(Array(answer.keys) == [tablet])
        #expect(answer[tablet]?.map(\.action) == [.receipt(of: b1.id)])

        // The next post goes to the tablet, heard from last; the receipt, owed until
        // Bob acknowledges it, is not sent again in its turn; m1 is not sent again in its.
        let m2 = try world.chat.post("m2", body: "two".bytes, author: "ana")
        _ = world.phoneNode.handle(.localChange, at: 2_000)
        let second = Self.ops(world.phoneNode.handle(.timer(.changeDebounce), at: 2_250))
        #expect(second == [tablet: [m2]])

        // Their turns over, whatever is still owed goes to every device of the contact.
        let retry = world.phoneNode.handle(.timer(.outbox), at: 2_250 + FleetConfiguration().deliveryRetryMilliseconds)
        let late = Self.ops(retry)
        #expect(Set(late.keys) == everyone)
        let owed = Set([m1.id, m2.id, answer[tablet]![0].id])
        for device in everyone {
            #expect(Set((late[device] ?? []).map(\.id)) == owed)
        }
        #expect(!world.phoneNode.hasDeliveryWaitingOutATurn)

        // Again every retry interval, not at every try: a change here just before the
        // interval is over sends nothing; the try at its end sends it all again.
        let sentAt = world.phoneNode.monotonicNow
        let retryInterval = FleetConfiguration().deliveryRetryMilliseconds
        try world.phone.causal("notes").put("theme", "dark".bytes)
        _ = world.phoneNode.handle(.localChange, at: sentAt + retryInterval - 251)
        #expect(Self.ops(world.phoneNode.handle(.timer(.changeDebounce), at: sentAt + retryInterval - 1)).isEmpty)
        let again = Self.ops(world.phoneNode.handle(.timer(.outbox), at: sentAt + retryInterval))
        #expect(Set(again.keys) == everyone)
        for device in everyone {
            #expect(Set((again[device] ?? []).map(\.id)) == owed)
        }
        #expect(Self.ops(world.phoneNode.handle(.timer(.outbox), at: sentAt + retryInterval + 1)).isEmpty)

        // A device new on Bob's roster does not wait out the interval: everything goes
        // again at once, to every device.
        let laptop = Fixtures.device(23)
        let joined = Self.ops(
            world.phoneNode.handle(.contactsChanged([ContactRoster(account: Self.bob, members: everyone.union([laptop]))]), at: sentAt + retryInterval + 2))
        #expect(Set(joined.keys) == everyone.union([laptop]))
        #expect(Set((joined[laptop] ?? []).map(\.id)) == owed)
        #expect(!world.phoneNode.hasDeliveryWaitingOutATurn)
        // A roster that only shrinks sends nothing again.
        #expect(
            Self.ops(world.phoneNode.handle(.contactsChanged([ContactRoster(account: Self.bob, members: everyone)]), at: sentAt + retryInterval + 3))
                .isEmpty)
    }

    /// The other order of a device joining Bob's roster: during the op's turn (it
    /// went to one device), not after it went to every device. The op does not go
    /// again in its turn; at the turn's end it goes to every device, the new one too.
    @Test func aDeviceJoiningTheContactsRosterInAnOpsTurnGetsItWhenTheTurnEnds() throws {
        var world = try Self.world()
        _ = world.phoneNode.handle(.start)
        let m1 = try world.chat.post("m1", body: "one".bytes, author: "ana")
        _ = world.phoneNode.handle(.localChange)
        #expect(Self.ops(world.phoneNode.handle(.timer(.changeDebounce))) == [world.bobPhone.device: [m1]])
        let tablet = Fixtures.device(22)
        let joined = world.phoneNode.handle(
            .contactsChanged([ContactRoster(account: Self.bob, members: [world.bobPhone.device, tablet])]), at: 1_000)
        #expect(Self.ops(joined).isEmpty)
        #expect(world.phoneNode.hasDeliveryWaitingOutATurn)
        let late = Self.ops(world.phoneNode.handle(.timer(.outbox), at: FleetConfiguration().deliveryRetryMilliseconds))
        #expect(late == [world.bobPhone.device: [m1], tablet: [m1]])
        #expect(!world.phoneNode.hasDeliveryWaitingOutATurn)
    }

    /// A device new on one contact's roster gets at once what went to every device
    /// of that contact, and nothing of another contact's conversation goes again.
    @Test func aDeviceJoiningOneContactsRosterSendsAgainOnlyThatContactsConversation() throws {
        var world = try Self.world(siblings: false)
        let carol = Fixtures.account(3)
        let carolPhone = Fixtures.device(31)
        let talk = try world.phone.conversation("talk", with: carol)
        let bobRoster = ContactRoster(account: Self.bob, members: [world.bobPhone.device])
        _ = world.phoneNode.handle(.contactsChanged([bobRoster, ContactRoster(account: carol, members: [carolPhone])]))
        _ = world.phoneNode.handle(.start)
        let m1 = try world.chat.post("m1", body: "to bob".bytes, author: "ana")
        let t1 = try talk.post("t1", body: "to carol".bytes, author: "ana")
        _ = world.phoneNode.handle(.localChange)
        #expect(Self.ops(world.phoneNode.handle(.timer(.changeDebounce))) == [world.bobPhone.device: [m1], carolPhone: [t1]])
        let retry = FleetConfiguration().deliveryRetryMilliseconds
        #expect(Self.ops(world.phoneNode.handle(.timer(.outbox), at: retry)) == [world.bobPhone.device: [m1], carolPhone: [t1]])
        // Carol's tablet joins: t1 goes to both her devices at once; m1 waits out its interval.
        let carolTablet = Fixtures.device(32)
        let joined = world.phoneNode.handle(
            .contactsChanged([bobRoster, ContactRoster(account: carol, members: [carolPhone, carolTablet])]), at: retry + 1)
        #expect(Self.ops(joined) == [carolPhone: [t1], carolTablet: [t1]])
        // At the interval's end both go again, each to its contact's devices.
        #expect(Self.ops(world.phoneNode.handle(.timer(.outbox), at: 2 * retry)) == [world.bobPhone.device: [m1]])
        #expect(Self.ops(world.phoneNode.handle(.timer(.outbox), at: 2 * retry + 1)) == [carolPhone: [t1], carolTablet: [t1]])
    }

    /// Both orders: Bob's acknowledgement of the laptop's receipt reaches the
    /// phone (through the laptop) within the laptop's turn, and the phone never
    /// sends the receipt; or it does not, and the receipt goes from the phone to
    /// every device of Bob's once the turn is over.
    @Test(arguments: [true, false]) func aSiblingsReceiptWaitsOutItsWritersTurnHere(acknowledgedInTurn: Bool) throws {
        var world = try Self.world()
        let tablet = Self.withBobsTablet(&world)
        _ = world.phoneNode.handle(.start)
        // Bob's message reached the laptop, which receipted it; the phone learns both by reconcile.
        let b1 = try world.bobPhone.messages("chat").post("b1", body: "hi".bytes, author: "ben")
        let receipt = try world.laptopChat.receive(MessageRecord(message: "b1", ops: [b1]), from: Self.bob)
        try Self.sync(world.laptop, into: world.phone)
        #expect(try world.chat.outboxCount() == 1)
        _ = world.phoneNode.handle(.localChange)
        let inTurn = world.phoneNode.handle(.timer(.changeDebounce))
        #expect(Self.deliveries(inTurn).isEmpty)
        #expect(world.phoneNode.hasDeliveryWaitingOutATurn)
        #expect(inTurn.contains(.arm(.outbox, afterMilliseconds: FleetConfiguration().deliveryRetryMilliseconds)))
        // A try before the turn is over sends nothing either.
        #expect(Self.deliveries(world.phoneNode.handle(.timer(.outbox), at: FleetConfiguration().deliveryRetryMilliseconds - 1)).isEmpty)
        if acknowledgedInTurn {
            // The laptop's answer reached Bob, whose acknowledgement came back to the laptop.
            let acknowledgement = try world.bobPhone.messages("chat").receive(receipt, from: Self.ana, isAnswer: true)
            #expect(!acknowledgement.ops.isEmpty)
            _ = try world.laptopChat.receive(acknowledgement, from: Self.bob, isAnswer: true)
            try Self.sync(world.laptop, into: world.phone)
            #expect(try world.chat.outboxCount() == 0)
        }
        let late = Self.ops(world.phoneNode.handle(.timer(.outbox), at: FleetConfiguration().deliveryRetryMilliseconds))
        #expect(late == (acknowledgedInTurn ? [:] : [world.bobPhone.device: receipt.ops, tablet: receipt.ops]))
        #expect(!world.phoneNode.hasDeliveryWaitingOutATurn)
    }

    // MARK: - With a hub: a drain of the relay mailbox, not a moment of hoping

    /// The phone as a hub runtime runs it (``FleetConfiguration/confirmsByRelayDrain``).
    static func hubWorld() throws -> World {
        var world = try Self.world()
        _ = world.phoneNode.handle(.configurationChanged(FleetConfiguration(confirmsByRelayDrain: true)))
        _ = world.phoneNode.handle(.start)
        return world
    }

    @Test func withAHubTheFirstDrainAfterTheAgreementReleasesTheWait() throws {
        var world = try Self.hubWorld()
        #expect(Self.deliveries(try Self.laptopPostsAndThePhoneTries(&world)).isEmpty)
        _ = world.phoneNode.handle(try Self.advertisement(of: world.laptop))
        #expect(world.phoneNode.hasDeliverySettling, "the runtime is asked to drain")
        // The settling moment alone releases nothing: only a drain does.
        let later = world.phoneNode.monotonicNow + 10 * FleetConfiguration().deliverySettleMilliseconds
        #expect(Self.deliveries(world.phoneNode.handle(.timer(.outbox), at: later)).isEmpty)
        let drained = world.phoneNode.handle(.relayDrained)
        #expect(Self.deliveries(drained).map(\.to) == [world.bobPhone.device])
        #expect(!world.phoneNode.hasDeliverySettling)
    }

    @Test func withAHubADrainBeforeTheAgreementDoesNotReleaseIt() throws {
        var world = try Self.hubWorld()
        #expect(Self.deliveries(try Self.laptopPostsAndThePhoneTries(&world)).isEmpty)
        // Drained, then nothing agreed: the wait goes on, however long.
        #expect(Self.deliveries(world.phoneNode.handle(.relayDrained)).isEmpty)
        #expect(Self.deliveries(world.phoneNode.handle(.timer(.outbox), at: world.phoneNode.monotonicNow + 60_000)).isEmpty)
        // A drain that came before the agreement proves nothing about frames after it.
        _ = world.phoneNode.handle(try Self.advertisement(of: world.laptop), at: world.phoneNode.monotonicNow + 1)
        #expect(Self.deliveries(world.phoneNode.handle(.timer(.outbox), at: world.phoneNode.monotonicNow + 60_000)).isEmpty)
        #expect(!Self.deliveries(world.phoneNode.handle(.relayDrained)).isEmpty)
    }

    /// The recall a sibling made reached the hub before the delivery could go: the
    /// drain hands it in first (as its advertisement), and the wait holds.
    @Test func withAHubARecallWaitingAtTheHubIsTakenInBeforeTheDelivery() throws {
        var world = try Self.hubWorld()
        let tablet = try Fixtures.memoryReplica(account: Self.ana, device: Fixtures.device(13))
        _ = try tablet.conversation("chat", with: Self.bob)
        _ = world.phoneNode.handle(.rosterChanged(members: [world.phone.device, world.laptop.device, tablet.device], revoked: []))
        _ = try Self.laptopPostsAndThePhoneTries(&world)
        try Self.sync(world.laptop, into: tablet)
        _ = world.phoneNode.handle(try Self.advertisement(of: world.laptop))
        try tablet.messages("chat").unsend("m1", scope: .everyone)
        // The drain brings the tablet's advertisement (its recall) before the proof.
        _ = world.phoneNode.handle(try Self.advertisement(of: tablet))
        #expect(Self.deliveries(world.phoneNode.handle(.relayDrained)).isEmpty)
        try Self.sync(tablet, into: world.phone)
        #expect(try world.chat.outboxCount() == 0)
    }

    @Test func aRecallOfADeliveredMessageGoesAtOnce() throws {
        var world = try Self.world()
        _ = world.phoneNode.handle(.start)
        _ = try Self.laptopPostsAndThePhoneTries(&world)
        let delivered = Self.deliveries(try Self.agreeAndSettle(&world))
        let bytes = FrameCodec.encode(.delivery(try #require(delivered.first?.delivery)))
        let receipts = try #require(Self.deliveries(world.bobNode.handle(.frame(from: world.phone.device, bytes: bytes))).first)
        _ = world.phoneNode.handle(.frame(from: world.bobPhone.device, bytes: FrameCodec.encode(.delivery(receipts.delivery))))
        #expect(try world.chat.message("m1")?.isDelivered == true)

        try world.chat.unsend("m1", scope: .everyone)
        _ = world.phoneNode.handle(.localChange)
        let recall = Self.deliveries(world.phoneNode.handle(.timer(.changeDebounce)))
        #expect(recall.first?.delivery.records.first?.ops.map(\.action) == [.delete(.everyone)])
        _ = world.bobNode.handle(.frame(from: world.phone.device, bytes: FrameCodec.encode(.delivery(try #require(recall.first?.delivery)))))
        #expect(try world.bobPhone.messages("chat").message("m1")?.scope == .everyone)
        #expect(try world.bobPhone.messages("chat").storedBodyBytes(of: "m1") == 0)
    }

    /// Sealed nodes: a delivery opens with the contact channel only; a contact's
    /// device taken off its roster is refused by name; a stranger's frame does not open.
    @Test func sealedDeliveriesOpenOnTheContactChannelAndARevokedContactDeviceIsRefused() throws {
        let phone = try Fixtures.memoryReplica(account: Self.ana, device: Fixtures.device(11))
        let bobPhone = try Fixtures.memoryReplica(account: Self.bob, device: Fixtures.device(21))
        _ = try phone.conversation("chat", with: Self.bob)
        _ = try bobPhone.conversation("chat", with: Self.ana)
        var phoneNode = try FleetNode(replica: phone, identity: Fixtures.identity(11), roster: [phone.device], accountKeys: [], random: SeededGenerator(seed: 1))
        var bobNode = try FleetNode(replica: bobPhone, identity: Fixtures.identity(21), roster: [bobPhone.device], accountKeys: [], random: SeededGenerator(seed: 2))
        _ = phoneNode.handle(.start)
        _ = bobNode.handle(.start)
        _ = bobNode.handle(.contactsChanged([ContactRoster(account: Self.ana, members: [phone.device])]))
        try bobPhone.messages("chat").post("b1", body: "hi".bytes, author: "ben")
        _ = bobNode.handle(.localChange)
        let sealed = try #require(bobNode.handle(.timer(.changeDebounce)).compactMap { output -> [UInt8]? in
            if case let .send(to, bytes) = output, to == phone.device { bytes } else { nil }
        }.first)
        // Sealed: the delivery does not decode as a plain frame.
        #expect(throws: (any Error).self) { try FrameCodec.decode(sealed) }
        // Bob is no contact of the phone yet: the frame opens on no channel.
        #expect(Self.kinds(phoneNode.handle(.sealed(sealed))) == [.rejectedSeal])
        #expect(try phone.messages("chat").message("b1") == nil)
        _ = phoneNode.handle(.contactsChanged([ContactRoster(account: Self.bob, members: [bobPhone.device])]))
        let taken = phoneNode.handle(.sealed(sealed))
        #expect(Self.kinds(taken).contains(.deliveryReceived))
        #expect(try phone.messages("chat").message("b1")?.body == "hi".bytes)
        // The receipt goes back sealed, and opens on Bob's node.
        let receipt = try #require(taken.compactMap { output -> [UInt8]? in if case let .send(_, bytes) = output { bytes } else { nil } }.first)
        _ = bobNode.handle(.sealed(receipt))
        #expect(try bobPhone.messages("chat").message("b1")?.isDelivered == true)
        // Bob's phone is revoked from Bob's roster: its frames are refused by name.
        _ = phoneNode.handle(.contactsChanged([ContactRoster(account: Self.bob, members: [], revoked: [bobPhone.device])]))
        let refused = phoneNode.handle(.sealed(sealed))
        #expect(FleetNodeTests.logs(refused).map(\.kind) == [.unknownDevice])
        #expect(FleetNodeTests.logs(refused).first?.peer == bobPhone.device)
    }

    @Test func everyFrameAContactMayNotSendIsRefusedAndChangesNothing() throws {
        var world = try Self.world()
        _ = world.bobNode.handle(.start)
        let phone = world.phone.device
        let before = try world.bobPhone.digest(of: "chat")
        let stranger = try Fixtures.memoryReplica(account: Fixtures.account(3), device: Fixtures.device(31))
        let post = MessageOp(
            id: try MessageOpID(bytes: [UInt8](repeating: 5, count: 16)), message: "m1", time: 1, writer: phone, account: Self.ana,
            action: .post(author: "ana", body: "x".bytes))
        let forged = MessageOp(id: post.id, message: "m1", time: 1, writer: phone, account: Self.bob, action: post.action)
        let cases: [(input: FleetInput, kind: FleetEvent.Kind, why: String)] = [
            (.frame(from: phone, bytes: [1, 2, 3]), .rejectedFrame, "garbage"),
            (.frame(from: phone, bytes: FrameCodec.encode(.gcRequest)), .rejectedFrame, "not a delivery"),
            (.frame(from: phone, bytes: FrameCodec.encode(.delivery(Delivery(conversation: "other", records: [MessageRecord(message: "m1", ops: [post])])))),
             .undeclaredNamespace, "no such conversation"),
            (.frame(from: phone, bytes: FrameCodec.encode(.delivery(Delivery(conversation: "chat", records: [MessageRecord(message: "m1", ops: [forged])])))),
             .rejectedRecords, "an op claiming the receiver's account"),
            (.frame(from: stranger.device, bytes: FrameCodec.encode(.delivery(Delivery(conversation: "chat", records: [MessageRecord(message: "m1", ops: [post])])))),
             .unknownDevice, "a device of no contact"),
        ]
        for (input, kind, why) in cases {
            let outputs = world.bobNode.handle(input)
            #expect(Self.kinds(outputs) == [kind], "\(why)")
            #expect(Self.deliveries(outputs).isEmpty, "\(why)")
        }
        #expect(try world.bobPhone.digest(of: "chat") == before)
        // A delivery from a sibling is refused too: deliveries cross accounts only.
        let delivery = FrameCodec.encode(.delivery(Delivery(conversation: "chat", records: [MessageRecord(message: "m1", ops: [post])])))
        #expect(Self.kinds(world.phoneNode.handle(.frame(from: world.laptop.device, bytes: delivery))) == [.rejectedFrame])
        #expect(try world.chat.message("m1") == nil)
    }
}
