import Foundation
import Testing
import TestSupport
@testable import Stele

/// The barrier as the nodes run it (001 §4-8, DESIGN §6), each in the driver
/// apps run, in the in-memory environment (``MemoryFleet``): frames delivered in
/// order, timers fired on a virtual clock, anchors landing, failing or hanging
/// on demand.
@Suite struct BarrierTests {
    final class Harness {
        let fleet: TestFleet
        /// The in-memory environment: frames arrive in the order sent, before any timer of the same moment.
        let world = MemoryFleet()
        var anchors: MemoryAnchorStore { world.anchors }
        let key = AccountKey.generate()
        let drivers: [FleetDriver]
        var nodes: [FleetNode] { drivers.map(\.node) }
        var events: [(device: Int, event: FleetEvent)] = []
        /// Every frame sent: to replay one later.
        var sent: [(from: Int, to: Int, bytes: [UInt8])] {
            world.sent.map { (index(of: $0.from), index(of: $0.to), $0.bytes) }
        }
        var anchorWrites: Int { world.anchorWrites }
        var anchorPolicy: MemoryFleet.AnchorPolicy {
            get { world.anchorPolicy }
            set { world.anchorPolicy = newValue }
        }
        var asleep: Set<Int> = [] {
            didSet { world.asleep = Set(asleep.map { fleet.devices[$0] }) }
        }
        /// While set, acks on their way to the leader are held back here instead.
        var holdAcks = false
        var heldAcks: [(from: DeviceID, to: DeviceID, bytes: [UInt8])] = []

        init(devices: Int, collects: [Bool]? = nil, seed: UInt64 = 3) throws {
            world.frameLatencyMilliseconds = 0
            world.anchorLatencyMilliseconds = 0
            fleet = try TestFleet(count: devices, seed: seed)
            let (fleet, key, world) = (self.fleet, self.key, self.world)
            drivers = try fleet.replicas.enumerated().map { index, replica in
                try RandomWorkload.declare(on: replica)
                let driver = FleetDriver(
                    unsealed: replica, roster: Set(fleet.devices), accountKeys: [key], environment: world.environment(for: replica.device),
                    configuration: FleetConfiguration(collects: collects?[index] ?? true), random: SeededGenerator(seed: seed + UInt64(index)))
                // The tests hand local changes in themselves.
                driver.deliversLocalChanges = false
                world.attach(driver)
                return driver
            }
            for (index, driver) in drivers.enumerated() { driver.onEvent = { [unowned self] in self.events.append((index, $0)) } }
            world.intercept = { [unowned self] from, to, bytes in
                guard self.holdAcks, case .gcAck = try? FrameCodec.decode(bytes) else { return true }
                self.heldAcks.append((from, to, bytes))
                return false
            }
        }

        func index(of device: DeviceID) -> Int { fleet.devices.firstIndex(of: device)! }

        func handle(_ input: FleetInput, at device: Int) {
            guard !asleep.contains(device) else { return }
            drivers[device].handle(input)
        }

        /// Hands a frame held back (or sent before) to its recipient, after what is on the wire now.
        func release(_ frame: (from: DeviceID, to: DeviceID, bytes: [UInt8])) { world.deliver(frame.bytes, from: frame.from, to: frame.to) }

        func releaseHeldAcks() {
            for ack in heldAcks { release(ack) }
            heldAcks = []
        }

        func start() { for device in drivers.indices where !asleep.contains(device) { drivers[device].start() } }

        /// Delivers everything and fires every timer due within `milliseconds`.
        func run(for milliseconds: Int64 = 120_000) { world.run(forMilliseconds: milliseconds) }

        func count(_ kind: FleetEvent.Kind, at device: Int? = nil) -> Int {
            events.filter { $0.event.kind == kind && (device == nil || $0.device == device) }.count
        }

        func tombstones(_ device: Int) throws -> Int { try fleet[device].tombstoneCounts().values.reduce(0, +) }

        /// The same content on every device, written on the first and applied on
        /// the others, with a tombstone in a `causal` and an `lww` namespace.
        func seedTombstones() throws {
            let first = fleet[0]
            try first.causal("notes").put("kept", "live".bytes)
            try first.causal("notes").put("gone", "doomed".bytes)
            try first.causal("notes").delete("gone")
            try first.lww("flags").put("dark", "on".bytes)
            try first.lww("flags").delete("dark")
            for other in fleet.replicas.dropFirst() {
                for record in try first.causal("notes").records() { try other.causal("notes").apply(record) }
                for record in try first.lww("flags").records() { try other.lww("flags").apply(record) }
            }
        }

        static func isProposal(_ bytes: [UInt8]) -> Bool {
            if case .gcPropose = try? FrameCodec.decode(bytes) { return true }
            return false
        }

        static func isCommit(_ bytes: [UInt8]) -> Bool {
            if case .gcCommit = try? FrameCodec.decode(bytes) { return true }
            return false
        }
    }

    @Test func aConvergedFleetCollectsAfterTheAnchorLands() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        let digest = try harness.fleet[0].contentDigest()
        harness.start()
        harness.run()
        #expect(harness.count(.roundOpened, at: 0) == 1)
        #expect(harness.count(.roundOpened) == 1, "only the leader opens rounds")
        #expect(harness.anchorWrites == 1)
        for device in 0..<3 {
            #expect(harness.fleet[device].generation == 1)
            #expect(try harness.tombstones(device) == 0)
            #expect(try harness.fleet[device].causal("notes").get("kept") == "live".bytes)
        }
        let header = try #require(try harness.anchors.header(of: harness.fleet.account))
        #expect(header.generation == 1)
        #expect(header.digest == digest)
        // The anchor's body is a snapshot of the live rows, sealed with the account key.
        let anchor = try #require(try harness.anchors.read(harness.fleet.account, key: harness.key))
        let snapshot = try Snapshot(decoding: anchor.snapshot)
        #expect(snapshot.generation == 1)
        #expect(snapshot.namespaces.first { $0.namespace == "notes" }?.records.count == 1)
        // Quiet afterwards: nothing left to collect, no further round.
        harness.run(for: 3_600_000)
        #expect(harness.count(.roundOpened) == 1)
    }

    @Test func aSleepingDeviceBlocksCollectionQuietly() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.asleep = [2]
        harness.start()
        harness.run(for: 3_600_000)
        // Never heard from, so never in sync: no round opens, nothing is dropped,
        // and every device says who it waits for.
        #expect(harness.count(.roundOpened) == 0)
        let status = harness.nodes[0].collectionStatus
        #expect(status.blockedBy.map(\.device) == [harness.fleet.devices[2]])
        #expect(status.blockedBy.first?.lastAgreedMilliseconds == nil)
        #expect(status.tombstones == ["notes": 1, "flags": 1, "memory": 0])
        #expect(status.state == .current)
        #expect(status.lastCollection == nil)
        #expect(harness.anchorWrites == 0)
        for device in 0..<3 { #expect(try harness.tombstones(device) == 2) }
        // It wakes: the next advertisements find the fleet in sync, and it collects.
        harness.asleep = []
        harness.handle(.start, at: 2)
        harness.run()
        for device in 0..<3 {
            #expect(try harness.tombstones(device) == 0)
            #expect(harness.fleet[device].generation == 1)
        }
        let after = harness.nodes[1].collectionStatus
        #expect(after.blockedBy.isEmpty)
        #expect(after.lastCollection?.count == 2)
        #expect(after.generation == 1)
    }

    @Test func aFailedAnchorWriteKeepsEveryTombstoneAndTheNextRoundSucceeds() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.anchorPolicy = .fail
        harness.start()
        harness.run()
        #expect(harness.count(.roundFailed) == 1)
        for device in 0..<3 {
            #expect(harness.fleet[device].generation == 0)
            #expect(try harness.tombstones(device) == 2)
        }
        #expect(try harness.anchors.header(of: harness.fleet.account) == nil)
        // Backing off: no futile retry within the ten-minute pause...
        harness.anchorPolicy = .land
        harness.run(for: 7 * 60_000)
        #expect(harness.count(.roundOpened) == 1)
        // ...and the round after it collects.
        harness.run(for: 3 * 60_000)
        #expect(harness.count(.roundOpened) == 2)
        for device in 0..<3 { #expect(try harness.tombstones(device) == 0) }
    }

    @Test func anAnchorThatLandsAfterTheRoundDiedIsHarmless() throws {
        let harness = try Harness(devices: 2)
        try harness.seedTombstones()
        harness.anchorPolicy = .hang
        harness.start()
        harness.run(for: 30_000)
        #expect(harness.count(.roundFailed) == 1)
        // The slow write finally lands: nothing is committed or dropped for it.
        let round = try #require(try harness.fleet[0].lastAck()).round
        harness.handle(.anchorWritten(round: round, succeeded: true), at: 0)
        harness.run(for: 1_000)
        #expect(harness.count(.roundCommitted) == 0)
        for device in 0..<2 {
            #expect(harness.fleet[device].generation == 0)
            #expect(try harness.tombstones(device) == 2)
        }
    }

    /// One round per generation (seed 370010): a round whose anchor would land
    /// over another round's of its generation is refused by the substrate. Nothing
    /// is written over it and nothing collected for the refused round; the leader
    /// reads the anchor and catches up with it, and its sibling, hearing it ahead,
    /// does the same.
    @Test func aRoundThatFindsItsGenerationTakenWritesNothingOverItAndCatchesUp() throws {
        let harness = try Harness(devices: 2)
        harness.world.anchorLatencyMilliseconds = 1_000
        try harness.seedTombstones()
        harness.start()
        while harness.anchorWrites == 0 { harness.run(for: 100) }
        #expect(harness.count(.roundOpened, at: 0) == 1)
        // While the leader's write is on its way, another round's anchor of generation 1 lands first.
        var generator = SeededGenerator(seed: 77)
        let other = RoundNonce.generate(using: &generator)
        let snapshot = try Snapshot.take(of: harness.fleet[1], generation: 1, knowledge: try harness.fleet[1].knowledge())
        let header = AnchorHeader(account: harness.fleet.account, generation: 1, round: other, digest: try harness.fleet[1].contentDigest())
        try harness.anchors.write(Anchor(header: header, snapshot: snapshot.encoded), key: harness.key)
        harness.run(for: 60_000)
        #expect(harness.events.contains { $0.device == 0 && $0.event.kind == .roundFailed && $0.event.message.contains("refused") })
        #expect(harness.count(.roundCommitted) == 0)
        #expect(try harness.anchors.header(of: harness.fleet.account)?.round == other)
        for device in 0..<2 {
            #expect(harness.fleet[device].generation == 1)
            #expect(harness.count(.recovered, at: device) == 1)
        }
    }

    @Test func aStaleAckFromAnEarlierRoundDoesNotCountAndAFreshOneDoes() throws {
        let harness = try Harness(devices: 2)
        try harness.seedTombstones()
        harness.holdAcks = true
        harness.start()
        // Round one opens at 5 s; its ack is held back, and it dies waiting at 20 s.
        harness.run(for: 21_000)
        #expect(harness.count(.roundOpened) == 1)
        #expect(harness.count(.roundFailed) == 1)
        let staleAck = try #require(harness.heldAcks.first)
        harness.heldAcks.removeAll()
        // The sibling's next advertisement (30 s) ends the back-off early; round two opens.
        harness.run(for: 16_000)
        #expect(harness.count(.roundOpened) == 2)
        #expect(harness.heldAcks.count == 1)
        // Round one's ack arrives during round two: the nonce is not this round's.
        harness.holdAcks = false
        harness.release(staleAck)
        harness.run(for: 100)
        #expect(harness.count(.barrierIgnored, at: 0) == 1)
        #expect(harness.count(.roundCommitted) == 0)
        #expect(try harness.tombstones(0) == 2)
        // Round two's own ack commits it.
        harness.release(harness.heldAcks.removeFirst())
        harness.run(for: 100)
        #expect(harness.count(.roundCommitted) == 2)
        for device in 0..<2 { #expect(try harness.tombstones(device) == 0) }
    }

    @Test func replayedAndForeignBarrierFramesChangeNothing() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.start()
        harness.run()
        #expect(harness.fleet[1].generation == 1)
        // Replay the leader's commit to device 1: its round is done, the generation does not move.
        let commit = try #require(harness.sent.last { $0.from == 0 && $0.to == 1 && Harness.isCommit($0.bytes) })
        try harness.fleet[1].causal("notes").delete("kept")
        harness.handle(.frame(from: harness.fleet.devices[0], bytes: commit.bytes), at: 1)
        #expect(harness.fleet[1].generation == 1)
        #expect(try harness.tombstones(1) == 1)
        // A proposal or a commit from a device that does not lead is refused.
        var generator = SeededGenerator(seed: 99)
        let forged = BarrierProposal(round: RoundNonce.generate(using: &generator), digest: try harness.fleet[1].contentDigest(), generation: 2)
        let ignoredBefore = harness.count(.barrierIgnored, at: 1)
        harness.handle(.frame(from: harness.fleet.devices[2], bytes: FrameCodec.encode(.gcPropose(forged))), at: 1)
        harness.handle(.frame(from: harness.fleet.devices[2], bytes: FrameCodec.encode(.gcCommit(BarrierCommit(proposal: forged, knowledge: Knowledge())))), at: 1)
        #expect(harness.count(.barrierIgnored, at: 1) == ignoredBefore + 2)
        #expect(try harness.fleet[1].lastAck()?.round != forged.round)
        #expect(harness.fleet[1].generation == 1)
        #expect(try harness.tombstones(1) == 1)
    }

    @Test func aProposalSeenAgainIsNotAckedAgain() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.start()
        // Everyone advertises the same content; device 2 then sleeps through round one.
        harness.run(for: 1_000)
        harness.asleep = [2]
        harness.run(for: 60_000)
        #expect(harness.count(.roundFailed) == 1)
        let first = try #require(harness.sent.first { $0.from == 0 && $0.to == 1 && Harness.isProposal($0.bytes) })
        // Device 2 wakes; the leader retries at once; the acks of round two are held back.
        harness.asleep = []
        harness.holdAcks = true
        harness.handle(.timer(.advertise), at: 2)
        harness.run(for: 10_000)
        #expect(harness.count(.roundOpened) == 2)
        let second = try #require(harness.sent.last { $0.from == 0 && $0.to == 1 && Harness.isProposal($0.bytes) })
        let acked = try #require(try harness.fleet[1].lastAck())
        // The old round's proposal replayed, and the current one duplicated: neither is acked again.
        let ignoredBefore = harness.count(.barrierIgnored, at: 1)
        let sentBefore = harness.sent.count
        // A row made and deleted after the ack: its tombstone is not the ack's to vouch for.
        try harness.fleet[1].lww("flags").put("late", "x".bytes)
        try harness.fleet[1].lww("flags").delete("late")
        for bytes in [first.bytes, second.bytes] { harness.handle(.frame(from: harness.fleet.devices[0], bytes: bytes), at: 1) }
        #expect(harness.count(.barrierIgnored, at: 1) == ignoredBefore + 2)
        #expect(harness.sent.count == sentBefore)
        #expect(try harness.fleet[1].lastAck() == acked)
        // Round two commits, and device 1 collects what its one ack vouched for.
        harness.holdAcks = false
        harness.releaseHeldAcks()
        harness.run(for: 2_000)
        #expect(harness.fleet[1].generation == 1)
        #expect(try harness.tombstones(1) == 1)
        // The late tombstone goes with the next round.
        harness.run(for: 60_000)
        #expect(harness.fleet[1].generation == 2)
        #expect(try harness.tombstones(1) == 0)
    }

    /// A row made on one device, synced to a sibling that had already acked, and
    /// deleted before its maker acks: the maker's ack has the agreed digest again,
    /// the sibling's content moved. Whatever the commit drops, the row must not
    /// come back once the sibling reconciles.
    @Test func aRowMadeAndDeletedBetweenTwoAcksStaysDeleted() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.start()
        harness.run(for: 1_000)
        // The round opens while device 2 hears nothing; device 1's ack is held back.
        harness.holdAcks = true
        harness.asleep = [2]
        harness.run(for: 6_000)
        #expect(harness.count(.roundOpened) == 1)
        let proposal = try #require(harness.sent.last { $0.from == 0 && $0.to == 2 && Harness.isProposal($0.bytes) })
        #expect(try harness.fleet[1].lastAck() != nil)
        harness.asleep = []
        // Device 2 makes a row; device 1's advertisement prompts it to offer the row to
        // device 1 alone (the leader hears of nothing). Then 2 deletes it; only then does 2 ack.
        let made = try harness.fleet[2].causal("notes")
        try made.put("ghost", "boo".bytes)
        harness.handle(.timer(.advertise), at: 1)
        harness.run(for: 100)
        // Device 1 acked before the row existed: it does not take it in while the round is open.
        #expect(try harness.fleet[1].causal("notes").get("ghost") == nil)
        #expect(harness.count(.reconcileHeld) > 0)
        try made.delete("ghost")
        harness.release((harness.fleet.devices[0], harness.fleet.devices[2], proposal.bytes))
        harness.run(for: 100)
        harness.holdAcks = false
        harness.releaseHeldAcks()
        harness.run(for: 100)
        // Everyone talks again until the fleet settles.
        for device in 0..<3 { harness.handle(.localChange, at: device) }
        harness.run(for: 10 * 60_000)
        for device in 0..<3 { #expect(try harness.fleet[device].causal("notes").get("ghost") == nil, "device \(device)") }
    }

    /// The hold ends with the round's deadline. A commit that comes later still
    /// counts while the device has taken in no sibling's record; the first such
    /// record withdraws the ack, and a commit after that is ignored.
    @Test(arguments: [false, true]) func aHoldWithNoCommitEndsAndTheFirstSiblingRecordWithdrawsTheAck(recordsComeIn: Bool) throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.start()
        harness.run(for: 1_000)
        // The leader's acks are held back and the leader falls silent: no commit comes.
        harness.holdAcks = true
        harness.run(for: 6_000)
        let acked = try #require(try harness.fleet[1].lastAck())
        let commitOfRound = BarrierCommit(
            proposal: BarrierProposal(round: acked.round, digest: acked.digest, generation: acked.generation), knowledge: Knowledge())
        harness.asleep = [0]
        harness.heldAcks = []
        harness.run(for: FleetConfiguration().barrierRoundMilliseconds + 1_000)
        #expect(harness.events.contains { $0.device == 1 && $0.event.message.contains("siblings' records are taken again") })
        #expect(try harness.fleet[1].lastAck() == acked)
        if recordsComeIn {
            // Device 2 writes; device 1 reconciles with it and withdraws its ack first.
            try harness.fleet[2].causal("notes").put("after", "x".bytes)
            harness.handle(.timer(.changeDebounce), at: 2)
            harness.run(for: 2_000)
            #expect(try harness.fleet[1].causal("notes").get("after") == "x".bytes)
            #expect(try harness.fleet[1].lastAck() == nil)
        }
        harness.asleep = []
        harness.handle(.frame(from: harness.fleet.devices[0], bytes: FrameCodec.encode(.gcCommit(commitOfRound))), at: 1)
        #expect(harness.fleet[1].generation == (recordsComeIn ? 0 : 1))
        #expect(try harness.tombstones(1) == (recordsComeIn ? 2 : 0))
    }

    // MARK: - gc_abort: a failed round keeps nobody holding

    /// Long enough for the fleet to find itself in sync and the leader's debounce to open a round.
    static let untilProposed: Int64 = FleetConfiguration().barrierDebounceMilliseconds + 1_000

    @Test func membersHoldingForARoundThatFailedStopAtTheAbort() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.anchorPolicy = .fail
        harness.start()
        harness.run(for: Self.untilProposed)
        #expect(harness.count(.roundFailed, at: 0) == 1)
        // Well before their hold timers: both members took the abort and hold no more.
        for member in 1...2 {
            #expect(harness.nodes[member].acking.hold == nil, "device \(member) still holds")
            #expect(harness.events.contains { $0.device == member && $0.event.message.contains("the leader gave round") })
        }
        // Sync goes on at once: a write on a member reaches the others.
        try harness.fleet[2].causal("notes").put("after", "x".bytes)
        harness.handle(.timer(.changeDebounce), at: 2)
        harness.run(for: 2_000)
        #expect(try harness.fleet[1].causal("notes").get("after") == "x".bytes)
    }

    @Test func aLateAckIsAnsweredWithAnAbortThatEndsItsHold() throws {
        let harness = try Harness(devices: 2)
        try harness.seedTombstones()
        harness.holdAcks = true
        harness.start()
        harness.run(for: Self.untilProposed + FleetConfiguration().barrierRoundMilliseconds)
        #expect(harness.count(.roundFailed, at: 0) == 1, "the round timed out without the ack")
        #expect(harness.nodes[1].acking.hold == nil, "the member's own hold timer ended it meanwhile")
        // The member acks again after a restart-free hold (a fresh proposal would do the
        // same): here the held ack arrives late, and the leader answers it with an abort.
        let late = try #require(harness.heldAcks.first)
        harness.holdAcks = false
        harness.heldAcks = []
        let before = harness.sent.count
        harness.release(late)
        harness.run(for: 100)
        let answers = harness.sent[before...].filter { $0.from == 0 && $0.to == 1 }
        #expect(answers.contains { if case .gcAbort = try? FrameCodec.decode($0.bytes) { return true } else { return false } })
    }

    @Test func anAbortFromAnotherDeviceOrForAnotherRoundChangesNothing() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.holdAcks = true
        harness.start()
        harness.run(for: Self.untilProposed)
        let hold = try #require(harness.nodes[1].acking.hold)
        var random = SeededGenerator(seed: 77)
        harness.handle(.frame(from: harness.fleet.devices[2], bytes: FrameCodec.encode(.gcAbort(hold.round))), at: 1)
        harness.handle(.frame(from: harness.fleet.devices[0], bytes: FrameCodec.encode(.gcAbort(RoundNonce.generate(using: &random)))), at: 1)
        #expect(harness.nodes[1].acking.hold == hold)
        // The leader's abort of that very round ends it.
        harness.handle(.frame(from: harness.fleet.devices[0], bytes: FrameCodec.encode(.gcAbort(hold.round))), at: 1)
        #expect(harness.nodes[1].acking.hold == nil)
    }

    /// A member that starts again mid-round never acks the proposal it had (a node
    /// keeps none across a start; a hub runtime does not ack one that waited in its
    /// mailbox): its greeting fails the round at once, and the next one collects
    /// without waiting out the leader's ten-minute pause.
    @Test func aMemberStartingAgainMidRoundFailsItAtOnceAndTheNextRoundCollects() throws {
        let harness = try Harness(devices: 2)
        try harness.seedTombstones()
        harness.holdAcks = true
        harness.start()
        harness.run(for: Self.untilProposed)
        #expect(harness.count(.roundOpened, at: 0) == 1)
        harness.holdAcks = false
        harness.heldAcks = []
        harness.handle(.start, at: 1)
        harness.run(for: 100)
        let failure = try #require(harness.events.first { $0.device == 0 && $0.event.kind == .roundFailed })
        #expect(failure.event.message.contains("started again during the round"))
        harness.run(for: 60_000)
        for device in 0..<2 {
            #expect(harness.fleet[device].generation == 1)
            #expect(try harness.tombstones(device) == 0)
        }
    }

    @Test func aDeviceWithCollectionOffDeclinesAndTheRoundNamesIt() throws {
        let harness = try Harness(devices: 3, collects: [true, true, false])
        try harness.seedTombstones()
        harness.start()
        // It declines at once, and the leader does not retry until its pause is over.
        harness.run(for: 9 * 60_000)
        #expect(harness.count(.roundOpened) == 1)
        #expect(harness.count(.roundFailed) == 1)
        let failure = try #require(harness.events.first { $0.event.kind == .roundFailed })
        #expect(failure.event.message.contains(harness.fleet.devices[2].description))
        for device in 0..<3 { #expect(try harness.tombstones(device) == 2) }
    }

    @Test func aSingleDeviceCollectsOnItsOwn() throws {
        let harness = try Harness(devices: 1)
        let notes = try harness.fleet[0].causal("notes")
        try notes.put("a", "1".bytes)
        try notes.delete("a")
        harness.start()
        harness.run()
        #expect(try harness.tombstones(0) == 0)
        #expect(harness.fleet[0].generation == 1)
        #expect(try harness.anchors.header(of: harness.fleet.account)?.generation == 1)
        // A later delete triggers the next round through the local change.
        try notes.put("b", "2".bytes)
        try notes.delete("b")
        harness.handle(.localChange, at: 0)
        harness.run()
        #expect(try harness.tombstones(0) == 0)
        #expect(harness.fleet[0].generation == 2)
    }

    @Test func aDeleteDuringTheUploadKeepsItsTombstoneOnTheLeader() throws {
        let harness = try Harness(devices: 2)
        try harness.seedTombstones()
        harness.anchorPolicy = .hang
        harness.start()
        while harness.anchorWrites == 0 { harness.run(for: 500) }
        // The leader deletes while its anchor uploads.
        try harness.fleet[0].causal("notes").delete("kept")
        let round = try #require(try harness.fleet[0].lastAck()).round
        harness.anchorPolicy = .land
        harness.handle(.anchorWritten(round: round, succeeded: true), at: 0)
        harness.run(for: 0)
        // Both adopt the generation; the sibling collects what was agreed, the
        // leader keeps every tombstone (its content moved).
        #expect(harness.fleet[0].generation == 1)
        #expect(harness.fleet[1].generation == 1)
        #expect(try harness.tombstones(1) == 0)
        #expect(try harness.fleet[0].causal("notes").record("gone")?.isTombstone == true)
        #expect(try harness.tombstones(0) == 3)
        // Reconcile carries the new delete to the sibling (with the leader's whole
        // set, which is harmless), and the next round collects everything.
        harness.run(for: 1_000)
        #expect(try harness.fleet[1].causal("notes").record("kept")?.isTombstone == true)
        harness.run(for: 60_000)
        for device in 0..<2 {
            #expect(try harness.tombstones(device) == 0)
            #expect(harness.fleet[device].generation == 2)
        }
    }

    @Test func theRosterChangingMidRoundAbortsIt() throws {
        let harness = try Harness(devices: 3)
        try harness.seedTombstones()
        harness.holdAcks = true
        harness.start()
        harness.run(for: 6_000)
        #expect(harness.count(.roundOpened) == 1)
        harness.handle(.rosterChanged(members: Set(harness.fleet.devices.prefix(2)), revoked: []), at: 0)
        harness.holdAcks = false
        harness.releaseHeldAcks()
        harness.run(for: 1_000)
        #expect(harness.count(.roundFailed, at: 0) == 1)
        #expect(harness.count(.roundCommitted) == 0)
        #expect(harness.fleet[0].generation == 0)
    }
}
