import Testing
import TestSupport
@testable import Stele

/// The state machine tested directly: inputs in, outputs out, no network.
@Suite struct FleetNodeTests {
    struct Pair {
        let fleet: TestFleet
        var node: FleetNode
        var a: Replica { fleet[0] }
        var b: Replica { fleet[1] }
    }

    static func pair() throws -> Pair {
        let fleet = try TestFleet(count: 2, seed: 5)
        for replica in fleet.replicas { try RandomWorkload.declare(on: replica) }
        try fleet[0].causal("notes").put("k", [1])
        let node = FleetNode(unsealed: fleet[0], roster: Set(fleet.devices), random: SeededGenerator(seed: 1))
        return Pair(fleet: fleet, node: node)
    }

    static func logs(_ outputs: [FleetOutput]) -> [FleetEvent] {
        outputs.compactMap { if case .log(let event) = $0 { return event } else { return nil } }
    }

    static func sends(_ outputs: [FleetOutput]) -> Int {
        outputs.filter { if case .send = $0 { return true } else { return false } }.count
    }

    @Test func startGreetsEveryPeerAndArmsThePeriodicTimer() throws {
        var pair = try Self.pair()
        let outputs = pair.node.handle(.start)
        #expect(Self.sends(outputs) == 1)
        #expect(outputs.contains(.arm(.advertise, afterMilliseconds: FleetConfiguration().advertiseIntervalMilliseconds)))
        guard case .send(let to, let bytes) = outputs.first(where: { if case .send = $0 { return true } else { return false } }),
            case .greeting(let advertisement) = try FrameCodec.decode(bytes)
        else {
            Issue.record("expected a greeting")
            return
        }
        #expect(to == pair.b.device)
        #expect(advertisement.roots.map(\.namespace) == ["flags", "memory", "notes", "sealed"])
        #expect(advertisement.generation == 0)
    }

    @Test func localChangesInABurstAdvertiseOnceAfterTheDebounce() throws {
        var pair = try Self.pair()
        let first = pair.node.handle(.localChange)
        #expect(first == [.arm(.changeDebounce, afterMilliseconds: FleetConfiguration().changeDebounceMilliseconds)])
        #expect(pair.node.handle(.localChange).isEmpty)
        #expect(Self.sends(pair.node.handle(.timer(.changeDebounce))) == 1)
        #expect(!pair.node.handle(.localChange).isEmpty)
    }

    @Test func anAdvertisementWithEqualRootsStartsNothing() throws {
        var pair = try Self.pair()
        var peerNode = FleetNode(unsealed: pair.b, roster: Set(pair.fleet.devices), random: SeededGenerator(seed: 2))
        try pair.b.causal("notes").apply(try #require(try pair.a.causal("notes").record("k")))
        let advert = FrameCodec.encode(.advertisement(try peerNode.advertisement()))
        let outputs = pair.node.handle(.frame(from: pair.b.device, bytes: advert))
        #expect(Self.sends(outputs) == 0)
        #expect(Self.logs(outputs).map(\.kind) == [.inSync])
        _ = peerNode.handle(.start)
    }

    @Test func aGreetingIsAnsweredWithAPlainAdvertisementAndAnAdvertisementIsNot() throws {
        var pair = try Self.pair()
        var peerNode = FleetNode(unsealed: pair.b, roster: Set(pair.fleet.devices), random: SeededGenerator(seed: 2))
        try pair.b.causal("notes").apply(try #require(try pair.a.causal("notes").record("k")))
        let mine = try pair.node.advertisement()
        // Equal roots: a greeting gets this device's advertisement back, and nothing else.
        let greeted = pair.node.handle(.frame(from: pair.b.device, bytes: FrameCodec.encode(.greeting(try peerNode.advertisement()))))
        let answers = greeted.compactMap { output -> Frame? in
            guard case .send(let to, let bytes) = output, to == pair.b.device else { return nil }
            return try? FrameCodec.decode(bytes)
        }
        #expect(answers == [.advertisement(mine)])
        // The answer, an advertisement, is not answered in turn: two devices never greet in a loop.
        let answered = peerNode.handle(.frame(from: pair.a.device, bytes: FrameCodec.encode(.advertisement(mine))))
        #expect(Self.sends(answered) == 0)
    }

    @Test func ackingTheLeadersRoundCancelsTheWaitToAskForOne() throws {
        let fleet = try TestFleet(count: 2, seed: 5)
        for replica in fleet.replicas { try RandomWorkload.declare(on: replica) }
        let leaderIndex = fleet.devices[0] < fleet.devices[1] ? 0 : 1
        let (leader, member) = (fleet[leaderIndex], fleet[1 - leaderIndex])
        try member.causal("notes").put("k", [1])
        _ = try member.causal("notes").delete("k")
        try leader.causal("notes").apply(try #require(try member.causal("notes").record("k")))
        var node = FleetNode(unsealed: member, roster: Set(fleet.devices), random: SeededGenerator(seed: 1))
        let leaderNode = FleetNode(unsealed: leader, roster: Set(fleet.devices), random: SeededGenerator(seed: 2))
        _ = node.handle(.start, at: 0)
        // In sync and holding a tombstone: the member waits to ask the leader for a round.
        let heard = node.handle(.frame(from: leader.device, bytes: FrameCodec.encode(.advertisement(try leaderNode.advertisement()))), at: 10)
        #expect(heard.contains(.arm(.barrierDebounce, afterMilliseconds: FleetConfiguration().barrierDebounceMilliseconds)))
        // The leader's round comes first: the member acks it and stops waiting (no futile second round).
        var random = SeededGenerator(seed: 3)
        let proposal = BarrierProposal(round: RoundNonce.generate(using: &random), digest: try leader.contentDigest(), generation: 1)
        let acked = node.handle(.frame(from: leader.device, bytes: FrameCodec.encode(.gcPropose(proposal))), at: 20)
        #expect(acked.contains(.cancel(.barrierDebounce)))
        #expect(acked.contains { if case .send(_, let bytes) = $0, case .gcAck = try? FrameCodec.decode(bytes) { return true } else { return false } })
    }

    /// Bad input: a typed event, logged once, no reply, no state change.
    @Test func badFramesAreLoggedOnceAndChangeNothing() throws {
        var pair = try Self.pair()
        let stranger = Fixtures.device(4_242)
        let before = try RandomWorkload.snapshot(pair.a)
        let hostileCount: [UInt8] = [FrameCodec.formatVersion, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10]
        let truncated = Array(FrameCodec.encode(.advertisement(try pair.node.advertisement())).dropLast(3))
        let undeclared = FrameCodec.encode(.reconcile(ReconcileMessage(session: 1, namespace: "nowhere", kind: .causal, generation: 0)))
        let wrongKind = FrameCodec.encode(.reconcile(ReconcileMessage(session: 1, namespace: "notes", kind: .lww, generation: 0)))
        let cases: [(bytes: [UInt8], from: DeviceID, kind: FleetEvent.Kind)] = [
            ([0xFF, 0x00, 0x13, 0x37], pair.b.device, .rejectedFrame),
            (hostileCount, pair.b.device, .rejectedFrame),
            (truncated, pair.b.device, .rejectedFrame),
            (undeclared, pair.b.device, .undeclaredNamespace),
            (wrongKind, pair.b.device, .undeclaredNamespace),
            (FrameCodec.encode(.advertisement(try pair.node.advertisement())), stranger, .unknownDevice),
        ]
        for item in cases {
            let outputs = pair.node.handle(.frame(from: item.from, bytes: item.bytes))
            #expect(Self.logs(outputs).map(\.kind) == [item.kind])
            #expect(Self.sends(outputs) == 0)
            // The same bad frame again is not logged again.
            #expect(pair.node.handle(.frame(from: item.from, bytes: item.bytes)).isEmpty)
        }
        #expect(try RandomWorkload.snapshot(pair.a) == before)
        #expect(pair.node.openSessions == 0)
    }

    @Test func aReconcileCarryingAMalformedRecordAppliesNothing() throws {
        var pair = try Self.pair()
        let before = try RandomWorkload.snapshot(pair.a)
        let good = CausalRecord(
            key: "fine", vector: VersionVector([pair.b.device: 1]),
            versions: [CausalVersion(dot: Dot(device: pair.b.device, counter: 1), timestamp: HybridTimestamp(milliseconds: 1, logical: 0), value: [1])])
        // A live version whose writer's counter exceeds its vector: refused by validation.
        let bad = CausalRecord(key: "zzz", vector: VersionVector(), versions: [])
        let message = ReconcileMessage(session: 9, namespace: "notes", kind: .causal, generation: 0, records: [.causal(good), .causal(bad)])
        let outputs = pair.node.handle(.frame(from: pair.b.device, bytes: FrameCodec.encode(.reconcile(message))))
        #expect(Self.logs(outputs).map(\.kind) == [.rejectedRecords])
        #expect(try RandomWorkload.snapshot(pair.a) == before)
    }

    @Test func aStaleSessionTimerDoesNothingAndACurrentOneDropsTheSession() throws {
        var pair = try Self.pair()
        let advert = FrameCodec.encode(.advertisement(Advertisement(
            roots: try pair.node.advertisement().roots.map { .init(namespace: $0.namespace, digest: $0.namespace == "notes" ? .zero : $0.digest) },
            generation: 0)))
        let outputs = pair.node.handle(.frame(from: pair.b.device, bytes: advert))
        #expect(pair.node.openSessions == 1)
        guard case .arm(let timer, _) = outputs.first(where: { if case .arm = $0 { return true } else { return false } }),
            case .session(let peer, let namespace, let epoch) = timer
        else {
            Issue.record("expected a session timer")
            return
        }
        #expect(pair.node.handle(.timer(.session(peer: peer, namespace: namespace, epoch: epoch + 100))).isEmpty)
        #expect(pair.node.openSessions == 1)
        #expect(Self.logs(pair.node.handle(.timer(timer))).map(\.kind) == [.sessionTimedOut])
        #expect(pair.node.openSessions == 0)
    }

    /// The invariant check can fail: a round open on a device that does not lead,
    /// across a roster change, with an ack from outside it and without the
    /// leader's own, a stranger's advertisement kept and a session with a
    /// stranger, are each named.
    @Test func theInvariantCheckNamesWhatIsBroken() throws {
        let fleet = try TestFleet(count: 3, seed: 5)
        let devices = fleet.devices.sorted()
        let follower = try #require(fleet.replicas.first { $0.device == devices[1] })
        var node = FleetNode(unsealed: follower, roster: Set(devices), random: SeededGenerator(seed: 1))
        #expect(node.invariantViolations().isEmpty)
        var generator = SeededGenerator(seed: 2)
        let proposal = BarrierProposal(round: RoundNonce.generate(using: &generator), digest: .zero, generation: 1)
        node.leading.onOpen(proposal: proposal, members: Set(devices.prefix(2)), acks: [Fixtures.device(99): .zero], knowledge: Knowledge(), epoch: 1)
        node.siblings.onAdvertisement(Advertisement(roots: [], generation: 0), from: Fixtures.device(98), agreeing: false, at: 0)
        node.sync.onAwaitingReply(ContentSync.Key(peer: Fixtures.device(97), namespace: "notes"), ContentSync.Session(id: 1, initiator: follower.device, epoch: 1))
        let broken = node.invariantViolations()
        #expect(broken.contains("a round open on a device that does not lead"))
        #expect(broken.contains("a round open across a roster change"))
        #expect(broken.contains("an ack counted from a device outside the round"))
        #expect(broken.contains("a round open without the leader's own ack"))
        #expect(broken.contains { $0.hasPrefix("an advertisement kept from") })
        #expect(broken.contains { $0.hasPrefix("a session with") && $0.hasSuffix("who is not a sibling") })
    }
}
