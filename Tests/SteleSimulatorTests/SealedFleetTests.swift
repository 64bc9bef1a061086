import SteleSimulator
import Testing
import TestSupport
@testable import Stele

/// Fleet nodes as apps build them: every frame sealed (``SiblingChannel``).
@Suite struct SealedFleetTests {
    /// Two sealed drivers of one account in the in-memory environment, whose
    /// frames arrive at once and whose timers never fire unless a test fires one.
    final class Pair {
        let identities: [DeviceIdentity]
        let replicas: [Replica]
        let world = MemoryFleet()
        let drivers: [FleetDriver]
        /// Every sealed frame sent, as (recipient index, bytes).
        var wire: [(to: Int, bytes: [UInt8])] { world.sent.map { (index(of: $0.to), $0.bytes) } }
        var events: [FleetEvent] = []

        init() throws {
            let account = Fixtures.account(61)
            identities = [Fixtures.identity(61), Fixtures.identity(62)]
            replicas = try identities.map { try Fixtures.memoryReplica(account: account, device: $0.deviceID, clock: ManualWallClock()) }
            for replica in replicas { try replica.declare("notes", .causal) }
            var roster = try Roster.founding(account: account, by: identities[0])
            try roster.append(
                try RosterChange.approval(of: identities[1].deviceID, signingKey: try identities[1].signingKey(), by: identities[0], account: account, index: roster.version))
            let key = AccountKey.generate()
            world.frameLatencyMilliseconds = 0
            let world = self.world
            drivers = try zip(identities, replicas).enumerated().map { index, pair in
                let keys = MemoryKeyStore(KeyRing(identity: pair.0, accountKeys: [1: key], roster: roster))
                let driver = try FleetDriver(
                    replica: pair.1, identity: pair.0, keyStore: keys, environment: world.environment(for: pair.0.deviceID),
                    configuration: FleetConfiguration(collects: false), random: SeededGenerator(seed: UInt64(index)))
                driver.deliversLocalChanges = false
                world.attach(driver)
                return driver
            }
            for driver in drivers { driver.onEvent = { [unowned self] in self.events.append($0) } }
        }

        /// A copy of a node, for a test that hands it inputs itself and reads what it returns.
        func node(_ index: Int) -> FleetNode { drivers[index].node }

        func index(of device: DeviceID) -> Int { identities.firstIndex { $0.deviceID == device }! }

        /// Hands `input` to driver `index`, then every frame it causes, until none is left.
        func run(_ input: FleetInput, at index: Int) {
            drivers[index].handle(input)
            world.run(forMilliseconds: 0)
        }

        /// Node 0 advertises to node 1 and the two reconcile.
        func exchange() { run(.timer(.changeDebounce), at: 0) }

        var digests: [Hash32?] { replicas.map { try? $0.digest(of: "notes") } }
    }

    @Test func sealedNodesConvergeAndTheWireCarriesNoPlaintext() throws {
        let pair = try Pair()
        try pair.replicas[0].causal("notes").put("greeting", Array("meet at noon".utf8))
        pair.exchange()
        #expect(pair.digests[0] == pair.digests[1])
        #expect(try pair.replicas[1].causal("notes").get("greeting") == Array("meet at noon".utf8))
        #expect(!pair.wire.isEmpty)
        for frame in pair.wire {
            #expect(!contains(frame.bytes, Array("noon".utf8)))
            #expect(!contains(frame.bytes, pair.identities[0].deviceID.bytes) || frame.to == 0)
            #expect(!contains(frame.bytes, Array("notes".utf8)))
        }
    }

    @Test func aSealedNodeRefusesUnsealedFramesAndAnUnsealedNodeRefusesSealedBytes() throws {
        let pair = try Pair()
        try pair.replicas[0].causal("notes").put("k", [1])
        let before = pair.digests[1]
        let plain = FrameCodec.encode(.advertisement(try pair.node(0).advertisement()))
        var receiver = pair.node(1)
        let outputs = receiver.handle(.frame(from: pair.identities[0].deviceID, bytes: plain))
        #expect(outputs.allSatisfy { if case .log(let event) = $0 { event.kind == .rejectedSeal } else { false } })
        #expect(!outputs.isEmpty)
        var unsealed = FleetNode(unsealed: pair.replicas[1], roster: Set(pair.identities.map(\.deviceID)), random: SeededGenerator(seed: 9))
        let refused = unsealed.handle(.sealed(plain))
        #expect(refused.count == 1)
        #expect(pair.digests[1] == before)
    }

    @Test func aDamagedFrameIsLoggedAndChangesNothing() throws {
        let pair = try Pair()
        try pair.replicas[0].causal("notes").put("k", [1])
        // Let node 1 answer the advertisement, then damage every frame node 0 sends back.
        var (sender, receiver) = (pair.node(0), pair.node(1))
        let advert = sender.handle(.timer(.changeDebounce)).compactMap { if case .send(_, let bytes) = $0 { bytes } else { nil } }
        let replies = receiver.handle(.sealed(try #require(advert.first))).compactMap { if case .send(_, let bytes) = $0 { bytes } else { nil } }
        let frames = sender.handle(.sealed(try #require(replies.first))).compactMap { if case .send(_, let bytes) = $0 { bytes } else { nil } }
        let before = pair.digests[1]
        #expect(!frames.isEmpty)
        for frame in frames {
            for position in [0, 5, 40, 60, frame.count - 1] {
                var damaged = frame
                damaged[position] ^= 0x20
                let outputs = receiver.handle(.sealed(damaged))
                #expect(outputs.allSatisfy { if case .log(let event) = $0 { event.kind == .rejectedSeal } else { false } })
            }
        }
        #expect(pair.digests[1] == before)
    }

    @Test func replayedOldFramesBringNothingBack() throws {
        let pair = try Pair()
        let notes = try pair.replicas[0].causal("notes")
        try notes.put("plan", Array("v1".utf8))
        pair.exchange()
        let captured = pair.wire.filter { $0.to == 1 }.map(\.bytes)
        #expect(!captured.isEmpty)
        try notes.delete("plan")
        pair.exchange()
        #expect(try pair.replicas[1].causal("notes").get("plan") == nil)
        let settled = pair.digests
        // Every frame node 0 sent while "plan" was live, replayed, twice, in both orders.
        for frames in [captured, captured.reversed()] {
            for bytes in frames { pair.run(.sealed(bytes), at: 1) }
        }
        #expect(try pair.replicas[1].causal("notes").get("plan") == nil)
        #expect(pair.digests == settled)
        #expect(settled[0] == settled[1])
    }

    @Test func aRevokedDevicesFramesAreRefusedByNameAndChangeNothing() throws {
        let pair = try Pair()
        try pair.replicas[0].causal("notes").put("planted", [6])
        var (sender, receiver) = (pair.node(0), pair.node(1))
        let advert = sender.handle(.timer(.changeDebounce)).compactMap { if case .send(_, let bytes) = $0 { bytes } else { nil } }
        _ = receiver.handle(.rosterChanged(members: [pair.identities[1].deviceID], revoked: [pair.identities[0].deviceID]))
        let outputs = receiver.handle(.sealed(try #require(advert.first)))
        #expect(outputs.count == 1)
        guard case .log(let event) = outputs.first else {
            Issue.record("expected a log")
            return
        }
        #expect(event.kind == .unknownDevice)
        #expect(event.peer == pair.identities[0].deviceID)
        #expect(try pair.replicas[1].causal("notes").get("planted") == nil)
    }

    // MARK: - In the simulator

    @Test func aStolenOldBackupOfARevokedDeviceCannotReadANewAnchor() throws {
        let simulation = try Simulation(seed: 4)
        try simulation.declare("notes", .causal)
        for name in ["phone", "laptop", "tablet"] { try simulation.addDevice(name) }
        simulation.perform("phone", .put(namespace: "notes", key: "a", value: "1"))
        simulation.perform("phone", .delete(namespace: "notes", key: "a"))
        #expect(simulation.sync() == nil)
        let laptop = try #require(simulation.device("laptop"))
        // What a thief copies from the laptop: its key ring (and a replica backup).
        let stolen = try #require(try laptop.keys.load())
        #expect(try simulation.anchors.read(simulation.account, key: try #require(stolen.accountKeys[1])) != nil)
        try simulation.revoke("laptop")
        simulation.perform("phone", .put(namespace: "notes", key: "b", value: "2"))
        simulation.perform("phone", .delete(namespace: "notes", key: "b"))
        #expect(simulation.sync() == nil)
        let phoneRing = try #require(try simulation.device("phone")?.keys.load())
        #expect(phoneRing.newestEpoch == 2)
        #expect(try simulation.device("tablet")?.keys.load()?.newestEpoch == 2)
        #expect(try laptop.keys.load()?.newestEpoch == 1)
        let header = try #require(try simulation.anchors.header(of: simulation.account))
        #expect(header.generation == 2)
        #expect(throws: AnchorError.self) { _ = try simulation.anchors.read(simulation.account, key: try #require(stolen.accountKeys[1])) }
        #expect(try simulation.anchors.read(simulation.account, key: try #require(phoneRing.accountKeys[2]))?.header.generation == 2)
    }

    @Test func theKeyRingSurvivesARestoreOfTheReplica() throws {
        let simulation = try Simulation(seed: 5)
        try simulation.declare("notes", .causal)
        for name in ["phone", "laptop", "tablet"] { try simulation.addDevice(name) }
        try simulation.backup("laptop", as: "old")
        try simulation.revoke("tablet")
        let laptop = try #require(simulation.device("laptop"))
        let rotated = try #require(try laptop.keys.load())
        try simulation.restore("laptop", from: "old")
        #expect(try laptop.keys.load() == rotated)
        #expect(laptop.node.accountKeys.count == 2)
        #expect(laptop.node.channel?.revoked == [try #require(simulation.device("tablet")).id])
    }

    @Test func theLastDeviceCannotBeRevoked() throws {
        let simulation = try Simulation(seed: 6)
        try simulation.declare("notes", .causal)
        let phone = try simulation.addDevice("phone")
        #expect(throws: RosterError.lastMember(phone.id)) { try simulation.revoke("phone") }
        #expect(simulation.devices.map(\.name) == ["phone"])
        // A device revoked already stays so, quietly.
        try simulation.addDevice("laptop")
        try simulation.revoke("laptop")
        try simulation.revoke("laptop")
        #expect(simulation.devices.map(\.name) == ["phone"])
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
