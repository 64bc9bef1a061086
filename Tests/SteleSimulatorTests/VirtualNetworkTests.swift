import Testing
import TestSupport
@testable import Stele
@testable import SteleSimulator

/// The simulated network on its own (``VirtualNetwork``), and the simulation's
/// network entry points refusing bad input instead of trapping.
@Suite struct VirtualNetworkTests {
    static let devices = Fixtures.devices(4)

    @Test func conditionsOutOfRangeAreRefused() {
        #expect(throws: SimulationInputError.self) { try VirtualNetwork.Conditions(lossPercent: 101) }
        #expect(throws: SimulationInputError.self) { try VirtualNetwork.Conditions(duplicatePercent: -1) }
        #expect(throws: SimulationInputError.self) { try VirtualNetwork.Conditions(delayMilliseconds: -5...10) }
        #expect(throws: Never.self) { try VirtualNetwork.Conditions(delayMilliseconds: 0...0, lossPercent: 100, duplicatePercent: 0) }
    }

    @Test func aPartitionSeparatesItsGroupsAndLeavesTheRestTogether() {
        var network = VirtualNetwork()
        let (a, b, c, d) = (Self.devices[0], Self.devices[1], Self.devices[2], Self.devices[3])
        #expect(network.canReach(a, b))
        network.split(into: [[a], [b, c]])
        #expect(!network.canReach(a, b))
        #expect(network.canReach(b, c))
        #expect(!network.canReach(a, d))
        #expect(!network.canReach(b, d))
        // Two devices in no group reach each other.
        #expect(network.canReach(d, d))
        network.heal()
        #expect(network.canReach(a, b) && network.partition == nil)
    }

    @Test func healRestoresPerfectConditions() throws {
        var network = VirtualNetwork()
        network.conditions = try VirtualNetwork.Conditions(delayMilliseconds: 100...200, lossPercent: 50, duplicatePercent: 50)
        network.heal()
        #expect(network.conditions == VirtualNetwork.Conditions())
    }

    @Test func aFramesFateIsDrawnFromTheSeedAlone() throws {
        var network = VirtualNetwork()
        network.conditions = try VirtualNetwork.Conditions(delayMilliseconds: 10...500, lossPercent: 30, duplicatePercent: 30)
        func fates(_ seed: UInt64) -> [VirtualNetwork.Fate] {
            var random = SplitMix64(seed: seed)
            return (0..<200).map { _ in network.fate(using: &random) }
        }
        let first = fates(7)
        #expect(first == fates(7))
        #expect(first != fates(8))
        #expect(first.contains(.lost))
        #expect(first.contains { if case .delivered(let delays) = $0 { delays.count == 2 } else { false } })
        #expect(first.allSatisfy { if case .delivered(let delays) = $0 { delays.allSatisfy { (10...500).contains($0) } } else { true } })
        // A perfect network delivers every frame once.
        let perfect = VirtualNetwork()
        var random = SplitMix64(seed: 1)
        #expect((0..<100).allSatisfy { _ in if case .delivered(let delays) = perfect.fate(using: &random) { delays.count == 1 } else { false } })
    }

    @Test func reachabilityKeepsItsStartUntilABreak() {
        var network = VirtualNetwork()
        let (a, b, c) = (Self.devices[0], Self.devices[1], Self.devices[2])
        network.noteReachability(of: [a, b, c], online: [a, b, c], at: 10)
        network.split(into: [[a], [b, c]])
        network.noteReachability(of: [a, b, c], online: [a, b, c], at: 20)
        #expect(network.reachable(a, b) == nil)
        #expect(network.reachable(c, b) == 10)
        network.heal()
        network.noteReachability(of: [a, b, c], online: [a, b, c], at: 30)
        #expect(network.reachable(b, a) == 30)
        #expect(network.reachable(b, c) == 10)
        // A device offline breaks its pairs.
        network.noteReachability(of: [a, b, c], online: [a, b], at: 40)
        #expect(network.reachable(b, c) == nil)
        #expect(network.reachable(a, b) == 30)
    }

    @Test func theSimulationRefusesUnknownDevicesAndBadConditionsAndChangesNothing() throws {
        let simulation = try Simulation(seed: 3)
        try simulation.addDevice("phone")
        #expect(throws: SimulationInputError.self) { try simulation.setOnline("fone", false) }
        #expect(throws: SimulationInputError.self) { try simulation.partition([["phone"], ["tablet"]]) }
        #expect(simulation.partition == nil)
        #expect(throws: SimulationInputError.self) { try simulation.apply(.networkDelay(min: 50, max: 10)) }
        #expect(throws: SimulationInputError.self) { try simulation.apply(.networkLoss(150)) }
        #expect(simulation.network == VirtualNetwork.Conditions())
        try simulation.apply(.networkLoss(20))
        #expect(simulation.network.lossPercent == 20)
    }
}

/// The leak rule on its own (``OracleTap``): a text that first reached a
/// contact after its delete for everyone is a leak only when the deleting
/// device held the delete and had been within the deliverer's reach long enough.
@Suite struct OracleTapTests {
    static let reach = OracleTap.leakReachMilliseconds

    @Test func aTextWithNoDeleteOrThatReachedBeforeTheDeleteIsFine() {
        var tap = OracleTap()
        let first = tap.textReached("chat", "m1", at: 100, deletedAt: nil, reachableSince: 0, deleterHoldsIt: true)
        #expect(first == .fine)
        // It reached the contact at 100, before a delete at 200: a later copy is no leak.
        let later = tap.textReached("chat", "m1", at: 10 * Self.reach, deletedAt: 200, reachableSince: 0, deleterHoldsIt: true)
        #expect(later == .fine)
    }

    @Test func aTextFirstReachingAfterTheDeleteIsALeakOnlyWithinReachLongEnough() {
        var tap = OracleTap()
        let leak = tap.textReached("chat", "m1", at: 300 + Self.reach, deletedAt: 300, reachableSince: 0, deleterHoldsIt: true)
        #expect(leak == .leak)
        var short = OracleTap()
        let tooSoon = short.textReached("chat", "m2", at: 300 + Self.reach - 1, deletedAt: 300, reachableSince: 0, deleterHoldsIt: true)
        #expect(tooSoon == .atTheLimit)
        var apart = OracleTap()
        let unreachable = apart.textReached("chat", "m3", at: 10 * Self.reach, deletedAt: 300, reachableSince: nil, deleterHoldsIt: true)
        #expect(unreachable == .atTheLimit)
        var lost = OracleTap()
        let notHeld = lost.textReached("chat", "m4", at: 10 * Self.reach, deletedAt: 300, reachableSince: 0, deleterHoldsIt: false)
        #expect(notHeld == .atTheLimit)
        // Reach counts from the later of the delete and the last break.
        var rejoined = OracleTap()
        let sinceBreak = rejoined.textReached("chat", "m5", at: 5_000 + Self.reach - 1, deletedAt: 300, reachableSince: 5_000, deleterHoldsIt: true)
        #expect(sinceBreak == .atTheLimit)
    }
}
