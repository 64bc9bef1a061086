import Testing
import TestSupport
@testable import Stele

/// The node's sub-machines (Fleet/Machines/, ARCHITECTURE "The node's
/// sub-machines") tested on their own: each row of their tables, and each
/// event in a state where it must change nothing.
@Suite struct FleetMachineTests {
    static let devices = Fixtures.devices(3)
    static var leader: DeviceID { devices[0] }
    static var members: Set<DeviceID> { Set(devices) }

    static func nonce(_ seed: UInt64) -> RoundNonce {
        var generator = SeededGenerator(seed: seed)
        return RoundNonce.generate(using: &generator)
    }

    static func digest(_ word: UInt64) -> Hash32 { Hash32(words: (word, 0, 0, 0)) }

    static func opened(epoch: UInt64 = 1) -> BarrierLeader {
        var leading = BarrierLeader()
        leading.onOpen(proposal: BarrierProposal(round: nonce(1), digest: digest(1), generation: 1), members: members, acks: [leader: digest(1)], knowledge: Knowledge(), epoch: epoch)
        return leading
    }

    // MARK: - BarrierLeader

    @Test func aRoundCollectsEveryAckThenAnchorsThenLands() {
        var leading = Self.opened()
        #expect(leading.completeRound == nil)
        let step2 = leading.onAck(BarrierAnswer(round: Self.nonce(1), digest: Self.digest(1)), from: Self.devices[1])
        #expect(step2 == .counted)
        #expect(leading.completeRound == nil)
        let step3 = leading.onAck(BarrierAnswer(round: Self.nonce(1), digest: Self.digest(1)), from: Self.devices[2])
        #expect(step3 == .counted)
        #expect(leading.completeRound?.isComplete == true)
        leading.onAgreed(on: Self.digest(1))
        guard case .anchoring(_, let agreed) = leading.state else {
            Issue.record("expected anchoring, got \(leading.state)")
            return
        }
        #expect(agreed == Self.digest(1))
        // An ack while anchoring, or for another round, is not counted.
        let step4 = leading.onAck(BarrierAnswer(round: Self.nonce(1), digest: Self.digest(1)), from: Self.devices[1])
        #expect(step4 == .notOpen)
        guard case .abandoned = leading.onAnchorWritten(round: Self.nonce(2), succeeded: true) else {
            Issue.record("another round's anchor must not land this one")
            return
        }
        guard case .landed(let round, let digest) = leading.onAnchorWritten(round: Self.nonce(1), succeeded: true) else {
            Issue.record("expected the round to land")
            return
        }
        #expect(round.proposal.round == Self.nonce(1) && digest == Self.digest(1))
        #expect(leading.isIdle && leading.failures == 0 && !leading.requested)
    }

    @Test func acksFromOutsideTheRoundOrForAnotherRoundAreNotCounted() {
        var leading = Self.opened()
        let step5 = leading.onAck(BarrierAnswer(round: Self.nonce(1), digest: Self.digest(1)), from: Fixtures.device(99))
        #expect(step5 == .notOpen)
        let step6 = leading.onAck(BarrierAnswer(round: Self.nonce(2), digest: Self.digest(1)), from: Self.devices[1])
        #expect(step6 == .notOpen)
        let step7 = leading.onAck(.decline(Self.nonce(1)), from: Self.devices[1])
        #expect(step7 == .declined)
        #expect(leading.round?.acks.count == 1)
        var idle = BarrierLeader()
        let step8 = idle.onAck(BarrierAnswer(round: Self.nonce(1), digest: Self.digest(1)), from: Self.devices[1])
        #expect(step8 == .notOpen)
    }

    @Test func aFailedRoundBacksOffDoublingUpToTheCap() {
        var leading = BarrierLeader()
        var pauses: [Int64] = []
        for attempt in 0..<5 {
            leading.onOpen(
                proposal: BarrierProposal(round: Self.nonce(UInt64(attempt)), digest: Self.digest(1), generation: 1), members: Self.members,
                acks: [Self.leader: Self.digest(1)], knowledge: Knowledge(), epoch: UInt64(attempt + 1))
            let failed = leading.onRoundFailed(missing: [Self.devices[2]], backoff: 1_000, maximum: 5_000)
            #expect(failed?.roundEpoch == UInt64(attempt + 1))
            pauses.append(failed?.pause ?? -1)
            #expect(leading.state == .backingOff(waitingFor: [Self.devices[2]]))
            leading.onBackoffTimer()
        }
        #expect(pauses == [1_000, 2_000, 4_000, 5_000, 5_000])
        #expect(leading.failures == 5)
        // Failing with no round open changes nothing.
        let step9 = leading.onRoundFailed(missing: [], backoff: 1_000, maximum: 5_000)
        #expect(step9 == nil)
        #expect(leading.failures == 5)
    }

    @Test func aDeviceTheFailedRoundWaitedForEndsTheBackOffButAnEarlyRetryThatFailsWaitsItOut() {
        var leading = Self.opened()
        _ = leading.onRoundFailed(missing: [Self.devices[2]], backoff: 1_000, maximum: 60_000)
        let step10 = leading.onHeard(from: Self.devices[1])
        #expect(!step10)
        #expect(leading.isBackingOff)
        let step11 = leading.onHeard(from: Self.devices[2])
        #expect(step11)
        #expect(leading.state == .idle(earlyRetry: true))
        // The retry fails too: no device ends that pause early.
        leading.onOpen(proposal: BarrierProposal(round: Self.nonce(3), digest: Self.digest(1), generation: 1), members: Self.members, acks: [Self.leader: Self.digest(1)], knowledge: Knowledge(), epoch: 2)
        #expect(leading.round?.isEarlyRetry == true)
        _ = leading.onRoundFailed(missing: [Self.devices[2]], backoff: 1_000, maximum: 60_000)
        #expect(leading.state == .backingOff(waitingFor: []))
        let step12 = leading.onHeard(from: Self.devices[2])
        #expect(!step12)
        // A back-off timer when none is under way changes nothing.
        var idle = BarrierLeader()
        idle.onBackoffTimer()
        #expect(idle.state == .idle(earlyRetry: false))
    }

    @Test func theRoundTimerExpiresOnlyItsOwnRound() {
        var leading = Self.opened(epoch: 4)
        #expect(leading.expired(epoch: 3) == nil)
        #expect(leading.expired(epoch: 4)?.missing == Set(Self.devices.dropFirst()))
        #expect(leading.expired(epoch: 4)?.anchoring == false)
        _ = leading.onAck(BarrierAnswer(round: Self.nonce(1), digest: Self.digest(1)), from: Self.devices[1])
        _ = leading.onAck(BarrierAnswer(round: Self.nonce(1), digest: Self.digest(1)), from: Self.devices[2])
        leading.onAgreed(on: Self.digest(1))
        #expect(leading.expired(epoch: 4)?.anchoring == true)
        #expect(leading.expired(epoch: 4)?.missing == [])
    }

    @Test func aRequestIsForgottenWhenTheRoundLandsOrTheDeviceStopsLeading() {
        var leading = BarrierLeader()
        leading.onRequest()
        #expect(leading.requested)
        leading.onStoppedLeading()
        #expect(!leading.requested)
    }

    @Test func theDebounceArmsOnceAndAnOvertakingRoundCancelsIt() {
        var debounce = Debounce()
        let step13 = debounce.onWanted()
        #expect(step13)
        let step14 = debounce.onWanted()
        #expect(!step14)
        let step15 = debounce.onOvertaken()
        #expect(step15)
        let step16 = debounce.onOvertaken()
        #expect(!step16)
        let step17 = debounce.onWanted()
        #expect(step17)
        debounce.onFired()
        #expect(!debounce.isArmed)
    }

    // MARK: - BarrierMember

    @Test func anAckHoldsUntilItsCommit() {
        var acking = BarrierMember()
        acking.onAckRecorded(Self.nonce(1), answering: true)
        #expect(acking.state == .acked(Self.nonce(1)))
        let step18 = acking.onHolding(for: Self.nonce(1), epoch: 7)
        #expect(step18 == nil)
        #expect(acking.isHoldingRecords && acking.hasAnswered(Self.nonce(1)))
        // Another round's commit, or a stale hold timer, ends nothing.
        let step19 = acking.onCommit(of: Self.nonce(2))
        #expect(step19 == nil)
        let step20 = acking.onHoldTimer(epoch: 6)
        #expect(step20 == nil)
        #expect(acking.state == .holding(BarrierMember.Hold(round: Self.nonce(1), epoch: 7), outstanding: Self.nonce(1)))
    }

    @Test func theCommitOfTheHeldRoundEndsTheHoldAndTheAck() {
        var acking = BarrierMember()
        acking.onAckRecorded(Self.nonce(1), answering: true)
        _ = acking.onHolding(for: Self.nonce(1), epoch: 7)
        let step21 = acking.onCommit(of: Self.nonce(1))
        #expect(step21 == BarrierMember.Hold(round: Self.nonce(1), epoch: 7))
        #expect(acking.state == .free)
    }

    @Test func aHoldTimerLeavesTheAckOutstandingAndTheFirstRecordWithdrawsIt() {
        var acking = BarrierMember()
        acking.onAckRecorded(Self.nonce(1), answering: true)
        _ = acking.onHolding(for: Self.nonce(1), epoch: 7)
        let step22 = acking.onHoldTimer(epoch: 7)
        #expect(step22 == Self.nonce(1))
        #expect(acking.state == .acked(Self.nonce(1)))
        #expect(!acking.isHoldingRecords)
        // A late commit of the acked round still ends it.
        var late = acking
        let step23 = late.onCommit(of: Self.nonce(1))
        #expect(step23 == nil)
        #expect(late.state == .free)
        // Otherwise the first sibling record withdraws it, once.
        let step24 = acking.onRecordsComing()
        #expect(step24 == Self.nonce(1))
        let step25 = acking.onRecordsComing()
        #expect(step25 == nil)
        #expect(acking.state == .free)
    }

    @Test func aNewAckReplacesTheHoldItFollows() {
        var acking = BarrierMember()
        acking.onAckRecorded(Self.nonce(1), answering: true)
        _ = acking.onHolding(for: Self.nonce(1), epoch: 7)
        acking.onAckRecorded(Self.nonce(2), answering: true)
        let step26 = acking.onHolding(for: Self.nonce(2), epoch: 8)
        #expect(step26 == BarrierMember.Hold(round: Self.nonce(1), epoch: 7))
        #expect(acking.hold == BarrierMember.Hold(round: Self.nonce(2), epoch: 8))
    }

    @Test func aLeaderHoldingForAnotherRoundKeepsItsHoldThroughItsOwnCommit() {
        var acking = BarrierMember()
        acking.onAckRecorded(Self.nonce(1), answering: true)
        _ = acking.onHolding(for: Self.nonce(1), epoch: 7)
        acking.onAckRecorded(Self.nonce(2), answering: false)
        #expect(acking.state == .holding(BarrierMember.Hold(round: Self.nonce(1), epoch: 7), outstanding: Self.nonce(2)))
        let step27 = acking.onCommit(of: Self.nonce(2))
        #expect(step27 == nil)
        #expect(acking.state == .holding(BarrierMember.Hold(round: Self.nonce(1), epoch: 7), outstanding: nil))
        let step28 = acking.onHoldTimer(epoch: 7)
        #expect(step28 == Self.nonce(1))
        #expect(acking.state == .free)
    }

    @Test func anUnreadableAckHoldsRecordsUntilItReads() {
        var acking = BarrierMember()
        let step29 = acking.onRecordedAckUnreadable("disk I/O error")
        #expect(step29)
        let step30 = acking.onRecordedAckUnreadable("disk I/O error")
        #expect(!step30)
        #expect(acking.isHoldingRecords && acking.unreadable == "disk I/O error")
        // Catching up does not read it.
        let step31 = acking.onCaughtUp()
        #expect(step31 == nil)
        #expect(acking.unreadable != nil)
        let step32 = acking.onRecordedAckRead(pending: nil, epoch: 0)
        #expect(step32)
        #expect(acking.state == .free)
        let step33 = acking.onRecordedAckRead(pending: Self.nonce(3), epoch: 5)
        #expect(!step33)
        #expect(acking.state == .holding(BarrierMember.Hold(round: Self.nonce(3), epoch: 5), outstanding: Self.nonce(3)))
        #expect(acking.hasAnswered(Self.nonce(3)))
        let step34 = acking.onCaughtUp()
        #expect(step34 == BarrierMember.Hold(round: Self.nonce(3), epoch: 5))
        #expect(acking.state == .free)
    }

    // MARK: - RecoveryMachine

    @Test func recoveryReadsTheAnchorThenAsksTheSiblingFurthestAhead() {
        var recovery = RecoveryMachine()
        #expect(recovery.status(at: 0) == .current)
        recovery.onHeard(Self.devices[1], ahead: 2)
        recovery.onHeard(Self.devices[2], ahead: 3)
        #expect(recovery.status(at: 0) == .behind)
        let step35 = recovery.onCheckAnchor()
        #expect(step35)
        let step36 = recovery.onCheckAnchor()
        #expect(!step36)
        #expect(recovery.status(at: 0) == .recovering)
        recovery.onAnchorRead()
        #expect(recovery.furthestAhead(of: 0) == Self.devices[2])
        recovery.onAskedForSnapshot(from: Self.devices[2], because: "no anchor has been written")
        #expect(recovery.status(at: 0) == .recovering)
        let step37 = recovery.onCheckAnchor()
        #expect(!step37)
        // A snapshot from anyone else is not the one asked for.
        let step38 = recovery.onSnapshot(from: Self.devices[1])
        #expect(!step38)
        recovery.onSnapshotWaitExpired()
        #expect(recovery.status(at: 0) == .stuck("no anchor has been written"))
        let step39 = recovery.onSnapshot(from: Self.devices[2])
        #expect(!step39)
        recovery.onCaughtUp(to: 3)
        #expect(recovery.status(at: 3) == .current)
        #expect(recovery.ahead.isEmpty)
    }

    /// Seed 111020: a sibling taken off the roster is no longer ahead, nor awaited;
    /// the next ask goes to one still on it.
    @Test func aSiblingRevokedIsNoLongerAskedForASnapshot() {
        var recovery = RecoveryMachine()
        recovery.onHeard(Self.devices[1], ahead: 1)
        recovery.onHeard(Self.devices[2], ahead: 1)
        #expect(recovery.furthestAhead(of: 0) == Self.devices[1])
        recovery.onAskedForSnapshot(from: Self.devices[1], because: "the anchor does not open")
        // A change that keeps it waits on.
        recovery.onRosterChanged([Self.devices[0], Self.devices[1], Self.devices[2]])
        #expect(recovery.phase == .awaitingSnapshot(from: Self.devices[1]))
        recovery.onRosterChanged([Self.devices[0], Self.devices[2]])
        #expect(recovery.phase == .idle)
        #expect(recovery.furthestAhead(of: 0) == Self.devices[2])
        #expect(recovery.status(at: 0) == .stuck("the anchor does not open"))
        // Its late snapshot is not the one asked for.
        let lateSnapshot = recovery.onSnapshot(from: Self.devices[1])
        #expect(!lateSnapshot)
        recovery.onRosterChanged([Self.devices[0]])
        #expect(recovery.furthestAhead(of: 0) == nil)
        #expect(recovery.status(at: 0) == .current)
    }

    @Test func rolledBackOutranksALaterFailureAndNobodyToAskClearsOnlyAFailure() {
        var recovery = RecoveryMachine()
        recovery.onHeard(Self.devices[1], ahead: 2)
        recovery.onRolledBack()
        recovery.onFailed("the snapshot could not be imported")
        #expect(recovery.status(at: 0) == .rolledBack)
        recovery.onNobodyToAsk()
        #expect(recovery.status(at: 0) == .rolledBack)
        var failed = RecoveryMachine()
        failed.onHeard(Self.devices[1], ahead: 2)
        failed.onFailed("unreachable")
        #expect(failed.status(at: 0) == .stuck("unreachable"))
        failed.onNobodyToAsk()
        #expect(failed.status(at: 0) == .behind)
        // A sibling no longer ahead leaves the device current.
        failed.onHeard(Self.devices[1], ahead: nil)
        #expect(failed.status(at: 0) == .current)
    }

    /// Seed 7052: a check that could not tell where the anchor stands stays
    /// unsettled (checked again at each advertisement, no round over it) until a
    /// read settles it or the device catches up from the anchor itself; catching
    /// up from a sibling's snapshot does not settle it (the anchor may be ahead of both).
    @Test func anUnreadAnchorStaysUnsettledUntilAReadSettlesItOrItIsCaughtUpFrom() {
        var recovery = RecoveryMachine()
        #expect(!recovery.anchorUnsettled)
        let step40 = recovery.onCheckAnchor()
        #expect(step40)
        recovery.onAnchorRead()
        #expect(recovery.anchorUnsettled)
        #expect(recovery.phase == .idle)
        recovery.onCaughtUp(to: 2)
        #expect(recovery.anchorUnsettled)
        let step41 = recovery.onCheckAnchor()
        #expect(step41)
        recovery.onAnchorRead(settled: true)
        #expect(!recovery.anchorUnsettled)
        let step42 = recovery.onCheckAnchor()
        #expect(step42)
        recovery.onAnchorRead()
        #expect(recovery.anchorUnsettled)
        recovery.onCaughtUp(to: 3, fromAnchor: true)
        #expect(!recovery.anchorUnsettled)
        #expect(recovery.status(at: 3) == .current)
    }

    // MARK: - ContentSync and DeliveryGate

    @Test func aChangeArmsTheDebounceOnceAndASessionEndsByItsOwnTimerOnly() {
        var sync = ContentSync()
        let step40 = sync.onChange()
        #expect(step40)
        let step41 = sync.onChange()
        #expect(!step41)
        sync.onChangeDebounceFired()
        let step42 = sync.onChange()
        #expect(step42)
        let key = ContentSync.Key(peer: Self.devices[1], namespace: "notes")
        sync.onAwaitingReply(key, ContentSync.Session(id: 1, initiator: Self.leader, epoch: 3))
        let step43 = sync.onTimer(key, epoch: 2)
        #expect(!step43)
        #expect(sync.openSessions == 1)
        let step44 = sync.onTimer(key, epoch: 3)
        #expect(step44)
        #expect(sync.openSessions == 0)
        sync.onAwaitingReply(key, ContentSync.Session(id: 2, initiator: Self.leader, epoch: 4))
        sync.onRosterChanged([Self.leader, Self.devices[2]])
        #expect(sync.openSessions == 0)
        sync.onStart()
        let step45 = sync.onChange()
        #expect(step45)
    }

    @Test func theGateWaitsForAnAgreementAfterTheWaitBegan() {
        var gate = DeliveryGate()
        let step46 = gate.onAgreement(on: "chat", at: 10)
        #expect(!step46)
        let step47 = gate.onHeldBack("chat")
        #expect(step47)
        let step48 = gate.onHeldBack("chat")
        #expect(!step48)
        // The agreement before the wait began does not count.
        #expect(gate.agreedSinceWaitBegan("chat") == nil)
        let step49 = gate.onAgreement(on: "chat", at: 20)
        #expect(step49)
        #expect(gate.agreedSinceWaitBegan("chat") == 20)
        gate.onOpened("chat")
        #expect(gate.agreedSinceWaitBegan("chat") == nil)
        let step50 = gate.onHeldBack("chat")
        #expect(step50)
    }

    /// What goes in a try, found in one pass (``DeliveryGate/due(_:in:at:turn:retry:writer:)``),
    /// is what asking of each op alone says (its turn, its reach, whether it is due
    /// for everyone), whatever the gate has seen: ops owed since different moments,
    /// sent to one device or to every one at different moments, receipts, ops of
    /// this device's and of others, ops the gate never noted, a contact's roster
    /// widened. And noting the very ops again keeps when they were first owed.
    @Test func whatGoesInATryIsWhatEachOpAloneSays() throws {
        var generator = SeededGenerator(seed: 22)
        let me = Self.devices[0]
        let turn: Int64 = 20_000
        var differences = 0
        var sentToEveryone = 0
        for _ in 0..<200 {
            var gate = DeliveryGate()
            var records: [MessageRecord] = []
            var now: Int64 = 0
            for message in 0..<Int.random(in: 1...6, using: &generator) {
                var ops: [MessageOp] = []
                for index in 0..<Int.random(in: 1...4, using: &generator) {
                    var id = [UInt8](repeating: 0, count: MessageOpID.byteCount)
                    id[0] = UInt8(message)
                    id[1] = UInt8(index)
                    let action: MessageOp.Action = switch Int.random(in: 0..<4, using: &generator) {
                    case 0: .post(author: "ana", body: [1])
                    case 1: .react(reactor: "ana", emoji: "👍")
                    case 2: .receipt(of: try MessageOpID(bytes: [UInt8](repeating: 9, count: MessageOpID.byteCount)))
                    default: .edit(body: [2])
                    }
                    ops.append(MessageOp(
                        id: try MessageOpID(bytes: id), message: "m\(message)", time: Int64(index),
                        writer: Bool.random(using: &generator) ? me : Self.devices[1], account: Fixtures.account(), action: action))
                }
                records.append(MessageRecord(message: "m\(message)", ops: ops))
                // Owed from different moments on: some ops noted a try later, some never.
                if Bool.random(using: &generator) || message == 0 {
                    gate.onOwed("chat", records: records, at: now)
                    now += Int64.random(in: 0...3, using: &generator) * 10_000
                }
            }
            let ids = records.flatMap { $0.ops.map(\.id) }
            for id in ids where Int.random(in: 0..<3, using: &generator) == 0 {
                let reach: DeliveryGate.Reach = Bool.random(using: &generator) ? .one : .everyone(at: now - Int64.random(in: 0...4, using: &generator) * 10_000)
                gate.onSent("chat", [id], reach: reach)
                if reach.isEveryone { sentToEveryone += 1 }
            }
            if Int.random(in: 0..<5, using: &generator) == 0 { gate.onContactsChanged([Self.devices[2]], widened: ["chat"]) }
            // On a grid of 10 s: many ops sit exactly at the end of their turn or retry.
            now += Int64.random(in: 0...3, using: &generator) * 10_000
            let found = gate.due(records, in: "chat", at: now, turn: turn, retry: turn, writer: me)
            var everyone: Set<MessageOpID> = []
            var first: Set<MessageOpID> = []
            for op in records.flatMap(\.ops) {
                if gate.isTurnOver(op.id, in: "chat", at: now, turn: turn) {
                    if gate.isDueForEveryone(op.id, in: "chat", at: now, retry: turn) { everyone.insert(op.id) }
                } else if case .receipt = op.action {
                    continue
                } else if op.writer == me, gate.reach(of: op.id, in: "chat") == .noted {
                    first.insert(op.id)
                }
            }
            if found.everyone != everyone || found.first != first { differences += 1 }
            #expect(found.everyone == everyone && found.first == first)
            // Owed again, the very ops: nothing about them changes.
            let before = ids.map { gate.reach(of: $0, in: "chat") }
            let turnsOver = ids.map { gate.isTurnOver($0, in: "chat", at: now, turn: turn) }
            gate.onOwed("chat", records: records, at: now + 1)
            #expect(ids.map { gate.reach(of: $0, in: "chat") } == before)
            #expect(ids.map { gate.isTurnOver($0, in: "chat", at: now, turn: turn) } == turnsOver)
        }
        #expect(differences == 0)
        #expect(sentToEveryone > 50)
        // Owed no more: forgotten.
        var gate = DeliveryGate()
        let op = MessageOp(
            id: try MessageOpID(bytes: [UInt8](repeating: 3, count: MessageOpID.byteCount)), message: "m", time: 1, writer: me,
            account: Fixtures.account(), action: .post(author: "ana", body: [1]))
        gate.onOwed("chat", records: [MessageRecord(message: "m", ops: [op])], at: 0)
        gate.onSent("chat", [op.id], reach: .one)
        gate.onOwed("chat", records: [], at: 5)
        #expect(gate.reach(of: op.id, in: "chat") == .noted)
        #expect(!gate.isTurnOver(op.id, in: "chat", at: 100_000, turn: turn))
    }

    /// What may go at once and what was held back join per message, by the
    /// message id's bytes: `é` as one character and as `e` with a combining accent
    /// are two messages (Swift's `String` holds them equal), each keeping its own
    /// ops, in id order, the records in the ids' byte order.
    @Test func heldBackOpsJoinTheirOwnMessageByItsIdsBytes() throws {
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        func op(_ byte: UInt8, _ message: String) throws -> MessageOp {
            MessageOp(
                id: try MessageOpID(bytes: [UInt8](repeating: byte, count: MessageOpID.byteCount)), message: message, time: Int64(byte),
                writer: Self.devices[0], account: Fixtures.account(), action: .react(reactor: "ana", emoji: "👍"))
        }
        let (a, b, c, d) = (try op(3, composed), try op(1, decomposed), try op(2, composed), try op(4, "z"))
        let merged = FleetNode.merge(
            [MessageRecord(message: composed, ops: [a]), MessageRecord(message: decomposed, ops: [b])],
            [MessageRecord(message: composed, ops: [c]), MessageRecord(message: "z", ops: [d])])
        #expect(merged.count == 3)
        #expect(merged.map { Array($0.message.utf8) } == [Array(decomposed.utf8), Array("z".utf8), Array(composed.utf8)])
        #expect(merged.map { $0.ops.map(\.id) } == [[b.id], [d.id], [c.id, a.id]])
        for record in merged { #expect(record.ops.allSatisfy { Array($0.message.utf8) == Array(record.message.utf8) }) }
    }

    @Test func whatCountsAsSharedRisesPerConversationAndForAll() {
        var gate = DeliveryGate()
        #expect(gate.shared("chat") == .max)
        gate.onShared(nil, at: 100)
        #expect(gate.shared("chat") == 100)
        gate.onShared("chat", at: 150)
        #expect(gate.shared("chat") == 150 && gate.shared("other") == 100)
        gate.onShared(nil, at: 200)
        #expect(gate.shared("chat") == 200)
    }
}
