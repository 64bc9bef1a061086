import SteleSQL
import Testing
import TestSupport
@testable import Stele

/// A read of the node's own store that fails where the answer decides what is
/// safe stops the step with a typed, logged failure and decides nothing on a
/// guess (G5, issue 14 §4). Each case forces the failure on the very read.
@Suite struct NodeStorageFailureTests {
    struct Pair {
        let fleet: TestFleet
        var node: FleetNode
        var peer: FleetNode
        var a: Replica { fleet[0] }
        var b: Replica { fleet[1] }
    }

    static func pair() throws -> Pair {
        let fleet = try TestFleet(count: 2, seed: 7)
        for replica in fleet.replicas { _ = try replica.causal("notes") }
        try fleet[0].causal("notes").put("k", [1])
        return Pair(
            fleet: fleet,
            node: FleetNode(unsealed: fleet[0], roster: Set(fleet.devices), random: SeededGenerator(seed: 1)),
            peer: FleetNode(unsealed: fleet[1], roster: Set(fleet.devices), random: SeededGenerator(seed: 2)))
    }

    static func failing(_ replica: Replica, where sql: String, count: Int = 1) {
        let plan = replica.faults ?? SQLiteFaultPlan()
        plan.fail(.step, with: .ioError, sqlContains: sql, count: count)
        replica.faults = plan
    }

    static func logs(_ outputs: [FleetOutput], _ kind: FleetEvent.Kind) -> [FleetEvent] {
        outputs.compactMap { if case .log(let event) = $0, event.kind == kind { return event } else { return nil } }
    }

    static func sends(_ outputs: [FleetOutput]) -> [(DeviceID, Frame)] {
        outputs.compactMap { output in
            guard case .send(let to, let bytes) = output, let frame = try? FrameCodec.decode(bytes) else { return nil }
            return (to, frame)
        }
    }

    /// The ack recorded before a restart cannot be read: the device may be in a
    /// hold, so it takes no sibling's records in (a reconcile step is answered
    /// with an empty one) until a later advertisement reads it.
    @Test func anUnreadableAckAtStartHoldsRecordsUntilItCanBeRead() throws {
        var pair = try Self.pair()
        Self.failing(pair.a, where: "acked_round")
        let started = pair.node.handle(.start)
        #expect(Self.logs(started, .storageFailed).count == 1)
        #expect(pair.a.storageFaultsFired == 1)
        // The peer's reconcile waits.
        let opening = Self.sends(pair.peer.handle(.frame(from: pair.a.device, bytes: FrameCodec.encode(.advertisement(try pair.node.advertisement())))))
        let reconcile = try #require(opening.first { if case .reconcile = $0.1 { true } else { false } })
        let answer = pair.node.handle(.frame(from: pair.b.device, bytes: FrameCodec.encode(reconcile.1)))
        #expect(!Self.logs(answer, .reconcileHeld).isEmpty)
        #expect(pair.node.isHoldingRecords)
        // The next advertisement reads the ack (nothing recorded) and the hold is over.
        _ = pair.node.handle(.timer(.advertise))
        #expect(!pair.node.isHoldingRecords)
    }

    /// Without the failure the same start holds nothing: the check above is the failure's doing.
    @Test func aReadableAckAtStartHoldsNothing() throws {
        var pair = try Self.pair()
        let started = pair.node.handle(.start)
        #expect(Self.logs(started, .storageFailed).isEmpty)
        #expect(!pair.node.isHoldingRecords)
    }

    /// A proposal arrives and the recorded ack cannot be read: it might be this
    /// very round's, so nothing is acked.
    @Test func anUnreadableAckAcksNoProposal() throws {
        var pair = try Self.pair()
        _ = pair.peer.handle(.start)
        var generator = SeededGenerator(seed: 3)
        let proposal = BarrierProposal(round: RoundNonce.generate(using: &generator), digest: try pair.b.contentDigest(), generation: 1)
        // The proposal is the lower id's: make the node the one proposed to.
        let (receiver, proposer) = pair.a.device < pair.b.device ? (pair.b, pair.a) : (pair.a, pair.b)
        var node = receiver === pair.a ? pair.node : pair.peer
        Self.failing(receiver, where: "acked_round")
        let outputs = node.handle(.frame(from: proposer.device, bytes: FrameCodec.encode(.gcPropose(proposal))))
        #expect(Self.logs(outputs, .storageFailed).count == 1)
        #expect(!Self.sends(outputs).contains { if case .gcAck = $0.1 { true } else { false } })
        #expect(try receiver.lastAck() == nil)
        // Readable again, the same proposal is acked.
        let again = node.handle(.frame(from: proposer.device, bytes: FrameCodec.encode(.gcPropose(proposal))))
        #expect(Self.sends(again).contains { if case .gcAck = $0.1 { true } else { false } })
    }

    /// A digest that cannot be read is no agreement: the advertisement that would
    /// have shown every root equal logs the failure and opens no round.
    @Test func anUnreadableDigestIsNoAgreement() throws {
        var pair = try Self.pair()
        try pair.b.causal("notes").apply(try #require(try pair.a.causal("notes").record("k")))
        try pair.a.causal("notes").delete("k")
        try pair.b.causal("notes").apply(try #require(try pair.a.causal("notes").record("k")))
        let advertisement = FrameCodec.encode(.advertisement(try pair.peer.advertisement()))
        // With the digest readable, the equal advertisement arms the barrier's debounce.
        var control = pair.node
        let agreed = control.handle(.frame(from: pair.b.device, bytes: advertisement))
        #expect(!Self.logs(agreed, .inSync).isEmpty)
        // Every read of data_version fails from now on: no digest can be read.
        Self.failing(pair.a, where: "data_version", count: 100)
        let outputs = pair.node.handle(.frame(from: pair.b.device, bytes: advertisement))
        #expect(!Self.logs(outputs, .storageFailed).isEmpty)
        #expect(Self.logs(outputs, .inSync).isEmpty)
        #expect(!outputs.contains(.arm(.barrierDebounce, afterMilliseconds: FleetConfiguration().barrierDebounceMilliseconds)))
    }

    /// An anchor naming the round this device acked, whose snapshot does not
    /// decode: adopting it would record that the fleet had seen nothing, so it is
    /// not adopted (before, it was, with an empty ``Knowledge``).
    @Test func anAnchorWhoseSnapshotDoesNotDecodeIsNotAdopted() throws {
        var pair = try Self.pair()
        var generator = SeededGenerator(seed: 4)
        let round = RoundNonce.generate(using: &generator)
        let digest = try pair.a.contentDigest()
        try pair.a.recordAck(round: round, digest: digest, generation: 1)
        let anchor = Anchor(header: AnchorHeader(account: pair.a.account, generation: 1, round: round, digest: digest), snapshot: [1, 2, 3])
        _ = pair.node.handle(.anchorRead(.found(anchor)))
        #expect(pair.a.generation == 0)
        #expect(try pair.a.lastAck()?.round == round)
        // The same anchor with a snapshot that decodes is adopted.
        let good = Anchor(header: anchor.header, snapshot: try Snapshot.take(of: pair.a, generation: 1, knowledge: try pair.a.knowledge()).encoded)
        _ = pair.node.handle(.anchorRead(.found(good)))
        #expect(pair.a.generation == 1)
    }

    // MARK: - Typed failures (issue 15 §4)

    /// The same refused step under a full disk and under an I/O error: both are
    /// storage failures carrying SQLite's code, and only the first is a full disk;
    /// a garbage frame is a codec failure, never a storage one.
    @Test(arguments: [SQLiteResultCode.full, .ioError]) func aStorageFailureCarriesSQLitesCode(code: SQLiteResultCode) throws {
        var pair = try Self.pair()
        let advertisement = FrameCodec.encode(.advertisement(try pair.peer.advertisement()))
        let plan = SQLiteFaultPlan()
        plan.fail(.step, with: code, sqlContains: "data_version", count: 100)
        pair.a.faults = plan
        let failed = Self.logs(pair.node.handle(.frame(from: pair.b.device, bytes: advertisement)), .storageFailed)
        let failure = try #require(failed.first?.failure)
        #expect(failure.cause == .storage(sqliteCode: code.primary.rawValue))
        #expect(failure.isDiskFull == (code == .full))
        pair.a.faults = nil
        let garbage = pair.node.handle(.frame(from: pair.b.device, bytes: [0xFF, 0x00, 0x13]))
        #expect(Self.logs(garbage, .rejectedFrame).first?.failure?.cause == .codec)
        #expect(Self.logs(garbage, .storageFailed).isEmpty)
    }

    @Test func errorsAreClassifiedByWhatFailed() {
        #expect(FleetFailure(SQLiteError(code: .full, message: "full", operation: .step)).isDiskFull)
        #expect(FleetFailure(ReplicaError(.corrupt, "damaged")).cause == .storage(sqliteCode: nil))
        #expect(FleetFailure(ReplicaError(.readOnly, "read-only")).cause == .storage(sqliteCode: nil))
        #expect(FleetFailure(SealError.unknownSender).cause == .crypto)
        #expect(FleetFailure(AnchorError(.notAuthentic, "wrong key")).cause == .crypto)
        #expect(FleetFailure(AnchorError(.unavailable, "offline")).cause == .storage(sqliteCode: nil))
        #expect(FleetFailure(RosterError.unknownAccount(Fixtures.account(3))).cause == .protocol)
        #expect(!FleetFailure(SQLiteError(code: .ioError, message: "io", operation: .step)).isDiskFull)
    }
}
