import SteleSimulator
import Testing
import TestSupport
@testable import Stele

/// Fleet nodes as apps build them: every frame sealed (``SiblingChannel``).
@Suite struct SealedFleetTests {
    /// Two sealed nodes of one account that hand each other's frames over at once.
    final class Pair {
        let identities: [DeviceIdentity]
        let replicas: [Replica]
        var nodes: [FleetNode]
        /// Every sealed frame delivered, as (recipient index, bytes).
        var wire: [(to: Int, bytes: [UInt8])] = []
        var events: [FleetEvent] = []

        init() throws {
            let account = Fixtures.account(61)
            identities = [Fixtures.identity(61), Fixtures.identity(62)]
            replicas = try identities.map { try Fixtures.memoryReplica(account: account, device: $0.deviceID, clock: ManualWallClock()) }
            for replica in replicas { try replica.declare("notes", .causal) }
            let roster = Set(identities.map(\.deviceID))
            let key = AccountKey.generate()
            nodes = try zip(identities, replicas).enumerated().map { index, pair in
                try FleetNode(
                    replica: pair.1, identity: pair.0, roster: roster, accountKeys: [key], configuration: FleetConfiguration(collects: false),
                    random: SeededGenerator(seed: UInt64(index)))
            }
        }

        func index(of device: DeviceID) -> Int { identities.firstIndex { $0.deviceID == device }! }

        /// Hands `input` to node `index`, then every frame it causes, until none is left.
        func run(_ input: FleetInput, at index: Int) {
            var pending = [(index, input)]
            while !pending.isEmpty {
                let (target, input) = pending.removeFirst()
                for output in nodes[target].handle(input) {
                    switch output {
                    case let .send(to, bytes):
                        wire.append((self.index(of: to), bytes))
                        pending.append((self.index(of: to), .sealed(bytes)))
                    case .log(let event): events.append(event)
                    default: break
                    }
                }
            }
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
        let plain = FrameCodec.encode(.advertisement(try pair.nodes[0].advertisement()))
        let outputs = pair.nodes[1].handle(.frame(from: pair.identities[0].deviceID, bytes: plain))
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
        let advert = pair.nodes[0].handle(.timer(.changeDebounce)).compactMap { if case .send(_, let bytes) = $0 { bytes } else { nil } }
        let replies = pair.nodes[1].handle(.sealed(try #require(advert.first))).compactMap { if case .send(_, let bytes) = $0 { bytes } else { nil } }
        let frames = pair.nodes[0].handle(.sealed(try #require(replies.first))).compactMap { if case .send(_, let bytes) = $0 { bytes } else { nil } }
        let before = pair.digests[1]
        #expect(!frames.isEmpty)
        for frame in frames {
            for position in [0, 5, 40, 60, frame.count - 1] {
                var damaged = frame
                damaged[position] ^= 0x20
                let outputs = pair.nodes[1].handle(.sealed(damaged))
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
        let advert = pair.nodes[0].handle(.timer(.changeDebounce)).compactMap { if case .send(_, let bytes) = $0 { bytes } else { nil } }
        pair.nodes[1].updateRoster([pair.identities[1].deviceID], revoked: [pair.identities[0].deviceID])
        let outputs = pair.nodes[1].handle(.sealed(try #require(advert.first)))
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
