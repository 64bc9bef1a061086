import Foundation
import SteleSQL
@testable import SteleSimulator
import Testing
import TestSupport
@testable import Stele

/// Issue 14: the oracle's fixes each accept the right outcome and still catch
/// the real failure; the stamp floor's limit is counted apart; a check that
/// cannot run, or a store that cannot be read, fails instead of passing.
@Suite struct OracleHonestyTests {
    static let scenarios = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Scenarios").standardized

    static func runner(_ text: String, seed: UInt64 = 0) throws -> ScenarioRunner {
        try ScenarioRunner(scenario: try ScenarioParser.parse(text), seed: seed)
    }

    static func shipped(_ file: String) throws -> String {
        try String(contentsOf: scenarios.appendingPathComponent(file), encoding: .utf8)
    }

    // MARK: - The stamp floor and its limit

    /// The two floor scenarios fail on devices that keep no floor: they test what
    /// the floor prevents, not something that holds anyway.
    @Test(arguments: ["014-restore-behind-its-ack-clock.scenario", "014-append-only-first-write-after-a-restore.scenario"])
    func withoutTheFloorTheScenarioFails(file: String) throws {
        let runner = try ScenarioRunner(scenario: try ScenarioParser.parse(try Self.shipped(file), file: file))
        runner.simulation.usesStampFloors = false
        #expect(throws: ScenarioFailure.self) { try runner.run() }
    }

    static let restoredBehindItsAckClock = """
        fleet d1 d3
        namespace settings lww
        skew d1 6h
        d1 put settings theme "dark"
        sync
        backup d3 as before
        d1 put settings gone "x"
        sync
        d1 delete settings gone
        sync
        advance 10m
        # A second round: its anchor knows d3's clock well past the backup's floor.
        d1 put settings gone "x2"
        sync
        d1 delete settings gone
        sync
        advance 10m
        sync
        restore d3 from before%@
        d3 put settings font "serif"
        sync
        """

    /// The replica and its key store rolled back together: the post-restore write
    /// is dropped by recovery (the stated limit), and the oracle counts the finding
    /// apart instead of as a lost write.
    @Test func aKeyStoreRolledBackWithTheReplicaIsCountedApart() throws {
        let runner = try Self.runner(String(format: Self.restoredBehindItsAckClock, " with keys"))
        try runner.run()
        try runner.simulation.checkOracle()
        let oracle = runner.simulation.oracle
        #expect(oracle.reissuesAtTheLimit == 1, "\(oracle.findings)")
        #expect(oracle.lostWrites == 0, "\(oracle.findings)")
        #expect(oracle.findings.contains { $0.contains("at the limit") && $0.contains("settings font") })
    }

    /// The same loss on devices that keep no floor at all is no limit: a lost write.
    @Test func theSameLossWithoutAFloorIsALostWrite() throws {
        let runner = try Self.runner(String(format: Self.restoredBehindItsAckClock, ""))
        runner.simulation.usesStampFloors = false
        try runner.run()
        try runner.simulation.checkOracle()
        #expect(runner.simulation.oracle.lostWrites == 1, "\(runner.simulation.oracle.findings)")
        #expect(runner.simulation.oracle.reissuesAtTheLimit == 0)
    }

    // MARK: - Accepting the right outcome, catching the real failure

    /// A group name used again after its marker was collected starts a new group
    /// (``Oracle/reusedFrom``): no resurrection. The oracle still catches the
    /// failure the leniency could hide: the collected marker held again (what a
    /// recovery from the anchor did before it dropped the round's tombstones)
    /// buries the new group, a lost write.
    @Test func aCollectedMarkerHeldAgainBuriesTheNewGroupAndIsALostWrite() throws {
        let simulation = try Simulation(seed: 0)
        try simulation.apply(.namespace("memory", .log))
        try simulation.apply(.fleet(["phone", "laptop"]))
        let phone = try #require(simulation.device("phone"))
        #expect(simulation.perform("phone", .append(namespace: "memory", group: "c1", value: "old")))
        #expect(simulation.sync() == nil)
        #expect(simulation.perform("phone", .bury(namespace: "memory", group: "c1")))
        let marker = try #require(try phone.replica.log("memory").events().first { $0.kind == .marker })
        #expect(simulation.sync() == nil)
        #expect(try phone.replica.tombstoneCounts()["memory"] == 0)
        #expect(simulation.perform("laptop", .append(namespace: "memory", group: "c1", value: "new")))
        #expect(simulation.sync() == nil)
        try simulation.checkOracle()
        #expect(simulation.oracle.resurrections == 0 && simulation.oracle.lostWrites == 0, "\(simulation.oracle.findings)")

        // The broken double: the phone holds the collected marker again.
        try phone.replica.log("memory").apply(marker)
        phone.driver.nudge()
        #expect(simulation.sync() == nil)
        #expect(try phone.replica.log("memory").live().isEmpty)
        try simulation.checkOracle()
        #expect(simulation.oracle.lostWrites > 0, "\(simulation.oracle.findings)")
    }

    /// Backups count as holders: the right outcome passes (the shipped scenario),
    /// and a store that loses the write the backup brought back is still caught.
    @Test func aWriteABackupBroughtBackIsStillJudged() throws {
        let text = """
            fleet d1 d2
            namespace records appendOnly
            offline d2
            backup d2 as empty
            d2 put records k1 "from d2"
            backup d2 as withFirst
            restore d2 from empty
            restore d2 from withFirst
            online d2
            sync
            """
        let runner = try Self.runner(text)
        try runner.run()
        // A broken double: the records vanish from both stores behind the fleet's back.
        for name in ["d1", "d2"] {
            let device = try #require(runner.simulation.device(name))
            try device.replica.connection.execute("DELETE FROM \(try device.replica.declaration(of: "records").table)")
        }
        try runner.simulation.checkOracle()
        #expect(runner.simulation.oracle.lostWrites == 1, "\(runner.simulation.oracle.findings)")
    }

    /// An anchor of this account still makes its writes permanent: an append the
    /// anchor holds, lost by a device afterwards, is a lost write.
    @Test func thisAccountsAnchorStillCountsAsEvidence() throws {
        let text = """
            fleet d0
            namespace memory log
            namespace notes causal
            backup d0 as before
            d0 append memory c1 "anchored"
            d0 put notes k "x"
            d0 delete notes k
            sync
            advance 10m
            sync
            expect d0 tombstones 0
            restore d0 from before
            sync
            expect d0 memory count 1
            """
        let runner = try Self.runner(text)
        try runner.run()
        let d0 = try #require(runner.simulation.device("d0"))
        try d0.replica.connection.execute("DELETE FROM \(try d0.replica.declaration(of: "memory").table)")
        try runner.simulation.checkOracle()
        #expect(runner.simulation.oracle.lostWrites == 1, "\(runner.simulation.oracle.findings)")
    }

    /// Ties as README states them: one writer, one stamp, two values (a stamp
    /// issued twice) goes to the larger value, and the oracle agrees.
    @Test func anLWWTieIsJudgedByTheDocumentedRule() {
        let writer = Fixtures.device(1)
        let stamp = WriteStamp(timestamp: HybridTimestamp(milliseconds: 10, logical: 0), writer: writer)
        let small: (value: [UInt8]?, stamp: WriteStamp) = ("a".bytes, stamp)
        let large: (value: [UInt8]?, stamp: WriteStamp) = ("b".bytes, stamp)
        let delete: (value: [UInt8]?, stamp: WriteStamp) = (nil, stamp)
        #expect(Oracle.lwwPrecedes(small, large))
        #expect(!Oracle.lwwPrecedes(large, small))
        #expect(Oracle.lwwPrecedes(large, delete))
        let merged = LWWMerge.merge(local: LWWRecord(key: "k", value: "a".bytes, stamp: stamp), remote: LWWRecord(key: "k", value: "b".bytes, stamp: stamp))
        #expect(merged.store?.value == "b".bytes)
    }

    // MARK: - Checks that cannot run, stores that cannot be read

    @Test(arguments: ["expect resurrections 0", "expect lost-writes 0"])
    func anExpectationTheOracleCannotCheckFails(claim: String) throws {
        let text = """
            fleet a b
            namespace notes causal
            a put notes k "1"
            sync
            offline b
            \(claim)
            """
        let runner = try Self.runner(text)
        #expect {
            try runner.run()
        } throws: { error in
            "\(error)".contains("the oracle could not check: b is offline")
        }
    }

    /// A store the oracle cannot read is a finding that fails the run, never a skip.
    @Test func aStoreTheOracleCannotReadIsAFinding() throws {
        let runner = try Self.runner("""
            fleet a b
            namespace notes causal
            a put notes k "1"
            sync
            """)
        try runner.run()
        let b = try #require(runner.simulation.device("b"))
        try b.replica.connection.execute("DROP TABLE \(try b.replica.declaration(of: "notes").table)")
        try runner.simulation.checkOracle()
        #expect(runner.simulation.oracle.unreadable >= 1)
        #expect(runner.simulation.oracle.findings.contains { $0.hasPrefix("unreadable: b could not read") })
    }

    // MARK: - The independent message model

    static func ops(_ generator: inout SeededGenerator) -> [MessageOp] {
        let me = Fixtures.account(1)
        let them = Fixtures.account(2)
        let writer = Fixtures.device(1)
        func op(_ time: Int64, _ account: AccountID, _ action: MessageOp.Action) -> MessageOp {
            MessageOp(id: MessageOpID.generate(using: &generator), message: "m", time: time, writer: writer, account: account, action: action)
        }
        let post = op(10, me, .post(author: "ana", body: "one".bytes))
        return [
            post, op(20, me, .edit(body: "two".bytes)), op(20, me, .edit(body: "two-b".bytes)), op(15, them, .edit(body: "forged".bytes)),
            op(30, me, .react(reactor: "ben", emoji: "👍")), op(30, me, .unreact(reactor: "ben")), op(31, me, .react(reactor: "cy", emoji: "a")),
            op(31, me, .react(reactor: "cy", emoji: "b")), op(5, them, .delete(.everyone)), op(40, them, .receipt(of: post.id)),
        ]
    }

    /// The model and the replica's fold agree in every arrival order, for ops
    /// that exercise each rule (an edit tie, a contact's forged edit and recall, a
    /// reaction tie, a removal tie), with and without a delete.
    @Test func theModelAgreesWithTheFoldInEveryOrder() throws {
        var generator = SeededGenerator(seed: 14)
        let ops = Self.ops(&generator)
        let withDelete = ops + [MessageOp(id: MessageOpID.generate(using: &generator), message: "m", time: 25, writer: Fixtures.device(1), account: Fixtures.account(1), action: .delete(.me))]
        for set in [ops, withDelete] {
            for _ in 0..<50 {
                let order = set.shuffled(using: &generator)
                let row = try #require(MessageFold.fold(order))
                let model = try #require(MessageModel(order))
                #expect(model.difference(from: row) == nil, "\(model.difference(from: row) ?? "")")
            }
        }
    }

    /// A broken double of the fold, which loses the ops that arrive before their
    /// post (orphans), is caught by the model in some arrival order.
    @Test func theModelCatchesAFoldThatLosesOrphans() throws {
        var generator = SeededGenerator(seed: 15)
        let ops = Array(Self.ops(&generator).prefix(2))
        let losesOrphans = { (order: [MessageOp]) in
            MessageFold.fold(order.drop { if case .post = $0.action { false } else { true } })
        }
        let caught = ops.permutations().filter { order in
            guard let row = losesOrphans(order), let model = MessageModel(order) else { return false }
            return model.difference(from: row) != nil
        }
        #expect(caught.count == 1)
    }
}
