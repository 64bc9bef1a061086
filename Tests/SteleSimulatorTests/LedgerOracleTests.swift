import Foundation
import SteleSQL
import Testing
import TestSupport

@testable import Stele
@testable import SteleSimulator

/// The oracle's checks of ledger clients can fail: each trips on a world broken
/// on purpose (a forged tombstone, a push while halted, a store that differs from
/// the hub, a write lost without a disaster to excuse it), and passes on the same
/// world left alone.
@Suite struct LedgerOracleTests {
    /// A hub with a ledger client and a mirror client that wrote, deleted and synced.
    static func world(_ extra: String = "") throws -> Simulation {
        let simulation = try Simulation(seed: 7)
        let lines = """
            hub
            client phone ledger
            client laptop
            phone app put note a "first"
            phone app put note b "second"
            phone app put note c "third"
            phone sync
            laptop sync
            phone app delete note a
            phone sync
            laptop sync
            """ + (extra.isEmpty ? "" : "\n" + extra)
        let scenario = try ScenarioParser.parse(lines, file: "world")
        for line in scenario.lines { try simulation.apply(line.statement) }
        return simulation
    }

    static func judge(_ hub: SimulatedHub) throws -> MirrorOracle {
        try hub.oracle.check(hub)
        return hub.oracle
    }

    static func push(_ items: [(op: String, kind: String, id: String)]) -> [UInt8] {
        let mutations = items.enumerated().map { offset, item in
            #"{"mutation":"forged-\#(offset)","kind":"\#(item.kind)","id":"\#(item.id)","op":"\#(item.op)",\#(item.op == "put" ? #""payload":"eA==","# : "")"modifiedAt":1}"#
        }
        return Array(#"{"mutations":[\#(mutations.joined(separator: ","))]}"#.utf8)
    }

    @Test func aWorldLeftAlonePasses() throws {
        let simulation = try Self.world()
        let hub = try #require(simulation.hub)
        let oracle = try withExtendedLifetime(simulation) { try Self.judge(hub) }
        #expect(!oracle.failed, "\(oracle.findings)")
        #expect(try hub.value(kind: "note", id: "a") == nil)
        #expect(try hub.tombstones() == 1)
    }

    @Test func aTombstoneNeitherTheAppNorTheHubMadeIsForged() throws {
        let simulation = try Self.world()
        let hub = try #require(simulation.hub)
        let phone = try #require(hub.ledgerClient("phone"))
        // What the app deleted, and what the hub deleted, may go out as tombstones; nothing else.
        hub.oracle.observe(ledgerPush: Self.push([("delete", "note", "a")]), from: phone)
        #expect(hub.oracle.forgedTombstones == 0)
        hub.oracle.observe(ledgerPush: Self.push([("delete", "note", "b"), ("put", "note", "c")]), from: phone)
        #expect(hub.oracle.forgedTombstones == 1)
        #expect(hub.oracle.findings.contains { $0.contains("tombstone for note b") })
        withExtendedLifetime(simulation) {}
    }

    @Test func aPushWhileHaltedIsFound() throws {
        let simulation = try Self.world("phone corrupt ledger")
        let hub = try #require(simulation.hub)
        let phone = try #require(hub.ledgerClient("phone"))
        #expect(phone.halted)
        hub.oracle.observe(ledgerPush: Self.push([("put", "note", "b")]), from: phone)
        #expect(hub.oracle.haltedPushes == 1)
        #expect(hub.oracle.failed)
        withExtendedLifetime(simulation) {}
    }

    @Test func aHaltedClientPushesNothingThroughTheHub() throws {
        let simulation = try Self.world("phone corrupt ledger\nphone app put note d \"fourth\"\nphone sync")
        let hub = try #require(simulation.hub)
        #expect(hub.oracle.haltedPushes == 0)
        #expect(hub.pushesReceived["phone"] == 2)
        withExtendedLifetime(simulation) {}
    }

    @Test func anAppStoreThatDiffersFromTheHubIsAMismatch() throws {
        let simulation = try Self.world()
        let hub = try #require(simulation.hub)
        let phone = try #require(hub.ledgerClient("phone"))
        try phone.source.put(kind: "note", id: "b", payload: Array("changed behind the ledger".utf8))
        let oracle = try withExtendedLifetime(simulation) { try Self.judge(hub) }
        #expect(oracle.mismatches == 1, "\(oracle.findings)")
        #expect(oracle.findings.contains { $0.contains("phone's app store holds note unlike the hub") })
    }

    @Test func aClientStillHaltedAfterHealingIsAFailure() throws {
        let simulation = try Self.world("phone wipe\nphone sync")
        let hub = try #require(simulation.hub)
        let oracle = try withExtendedLifetime(simulation) { try Self.judge(hub) }
        #expect(oracle.failed)
        #expect(oracle.findings.contains { $0.contains("still halted") })
    }

    /// A write the hub lost to a restore is excused only when every other copy is gone
    /// too: the writer's store wiped after it, and no one else holding it.
    @Test func aWriteLostWithEveryCopyIsExcusedOnlyThen() throws {
        let story = """
            hub backup as before
            phone app put note e "only here"
            phone sync
            hub restore from before
            """
        // The writer still holds it: its replay sends it again, and the hub has it back.
        let kept = try Self.world(story + "\nphone sync\nlaptop sync")
        let keptHub = try #require(kept.hub)
        #expect(try keptHub.value(kind: "note", id: "e") == Array("only here".utf8))
        let keptOracle = try withExtendedLifetime(kept) { try Self.judge(keptHub) }
        #expect(!keptOracle.failed, "\(keptOracle.findings)")

        // The writer's store wiped before it could send it again: gone everywhere, excused.
        let wiped = try Self.world(story + "\nphone wipe\nphone reset\nphone sync\nlaptop sync")
        let wipedHub = try #require(wiped.hub)
        #expect(try wipedHub.value(kind: "note", id: "e") == nil)
        let wipedOracle = try withExtendedLifetime(wiped) { try Self.judge(wipedHub) }
        #expect(!wipedOracle.failed, "\(wipedOracle.findings)")

        // The laptop pulled it before the restore and still holds it: the same loss is not excused.
        let held = try Self.world(story.replacingOccurrences(of: "hub restore", with: "laptop sync\nhub restore") + "\nphone wipe\nphone reset\nphone sync")
        let heldHub = try #require(held.hub)
        try heldHub.oracle.check(heldHub)
        let lost = heldHub.oracle.lostIntents
        let value = try heldHub.value(kind: "note", id: "e")
        withExtendedLifetime(held) {}
        // Either a client sent it back (then nothing is lost) or the oracle reports the loss.
        #expect(value == Array("only here".utf8) || lost >= 1)
    }
}
