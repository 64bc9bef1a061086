import Foundation
import Testing
import TestSupport
@testable import Stele
@testable import SteleSimulator

/// `Statement.description` prints a line the parser reads back as the same
/// statement: over every scenario file, and over statements drawn at random.
@Suite struct StatementPrintingTests {
    /// Every statement of every scenario file, printed and parsed again, is itself.
    @Test func everyScenarioFileRoundTrips() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: ScenarioTests.directory.path).filter { $0.hasSuffix(".scenario") }.sorted()
        #expect(files.count > 20)
        var statements = 0
        for file in files {
            let text = try String(contentsOf: ScenarioTests.directory.appendingPathComponent(file), encoding: .utf8)
            let parsed = try ScenarioParser.parse(text, file: file)
            let printed = parsed.lines.map(\.statement.description).joined(separator: "\n")
            let again = try ScenarioParser.parse(printed, file: file + " (printed)")
            #expect(again.lines.map(\.statement) == parsed.lines.map(\.statement), "\(file)")
            statements += parsed.lines.count
        }
        #expect(statements > 500)
    }

    /// The context every drawn statement is parsed in.
    static let preamble = """
        fleet a b c
        namespace notes causal
        namespace flags lww
        namespace memory log
        namespace chat messages
        namespace firsts appendOnly
        namespace prefs local
        contact ben bd1 bd2
        conversation talk with ben
        backup a as old
        anchor backup as kept
        """

    static func draw(_ random: inout SplitMix64) -> Statement {
        func pick<T>(_ items: [T]) -> T { items[Int(random.next() % UInt64(items.count))] }
        let devices = ["a", "b", "c"]
        let names = ["k", "k-2", "x.y", "Z_9"]
        let values = ["v", "", "two words", "a \"quoted\" \\ one", "ünïcödé 👍"]
        let device = pick(devices)
        let milliseconds = Int64(random.next() % 100_000_000)
        let operation: WorkloadOperation = pick([
            .put(namespace: pick(["notes", "flags", "firsts", "prefs"]), key: pick(names), value: pick(values)),
            .delete(namespace: pick(["notes", "flags", "prefs"]), key: pick(names)),
            .append(namespace: "memory", group: pick(names), value: pick(values)),
            .bury(namespace: "memory", group: pick(names)),
            .post(namespace: "chat", message: pick(names), text: pick(values)),
            .edit(namespace: "chat", message: pick(names), text: pick(values)),
            .unsend(namespace: "chat", message: pick(names), scope: pick([.me, .everyone])),
            .react(namespace: "chat", message: pick(names), emoji: pick(["👍", "ok"])),
            .unreact(namespace: "chat", message: pick(names), emoji: pick(["👍", "ok"])),
        ])
        let target: SteleSimulator.Expectation.Target = pick([.device(device), .all])
        let value: String? = pick([nil, pick(values)])
        let small = Int(random.next() % 9)
        let key = pick(names)
        let state: SteleSimulator.Expectation.MessageState = pick([.text(pick(values)), .deleted, .absent])
        let tombstoneNamespace: String? = pick([nil, "notes", "memory"])
        let statuses = SteleSimulator.Expectation.Status.allCases
        let blocking = Array(devices.prefix(1 + Int(random.next() % 3)))
        let expectations: [SteleSimulator.Expectation] = [
            .value(target, namespace: pick(["notes", "flags"]), key: key, value: value),
            .groupEmpty(target, namespace: "memory", group: key),
            .count(device: device, namespace: pick(["notes", "memory", "chat"]), count: small),
            .stored(device: device, namespace: "memory", group: key, count: small),
            .message(device: device, namespace: "chat", message: key, state),
            .tombstones(device: device, namespace: tombstoneNamespace, count: small),
            .generation(device: device, generation: UInt64(small)),
            .status(device: device, state: pick(statuses)),
            .gcBlockedBy(device: device, devices: blocking),
            .conflict(device: device, namespace: pick(["notes", "flags"]), key: key, raised: pick([true, false])),
            .refused(device: device, sender: pick(devices)),
            .anchorReadable(device: device, readable: pick([true, false])),
            .storageFailed(device: device, count: small),
            .delivered(device: device, namespace: "talk", message: key),
            .outbox(device: device, namespace: "talk", count: small),
            .converged, .resurrections(small), .lostWrites(small),
        ]
        let expectation = pick(expectations)
        let anchor: Statement.AnchorAction = pick([.down, .up, .failNextWrite, .delayNextWrite(milliseconds)])
        let loss: Double = pick([0, 12, 37.5, 100])
        let duplicate: Double = pick([5, 99.25])
        let after = pick([0, Int(random.next() % 50)])
        let skew = pick([milliseconds, -milliseconds])
        let fault = pick(StorageFault.allCases)
        let withKeys = pick([true, false])
        let on = pick([true, false])
        let contactPost = WorkloadOperation.post(namespace: "talk", message: key, text: pick(values))
        let statements: [Statement] = [
            .join(pick(["d", "e"])), .revoke(device), .operation(device: device, operation),
            .operation(device: pick(["bd1", "bd2"]), contactPost),
            .offline(blocking), .online([device, "bd1"]), .partition(["a"], ["b", "c"]), .heal,
            .networkLoss(loss), .networkDuplicate(duplicate),
            .networkDelay(min: milliseconds / 3, max: milliseconds), .sync, .advance(milliseconds), .gc(on),
            .backup(device: device, label: pick(["old", "new-1"])), .restore(device: "a", label: "old", withKeys: withKeys),
            .crash(device), .anchor(anchor), .skew(device: device, milliseconds: skew),
            .storageFault(device: device, fault, afterSteps: after), .expect(expectation),
        ]
        return pick(statements)
    }

    @Test(arguments: [UInt64(1), 2, 3, 4]) func drawnStatementsRoundTrip(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        for _ in 0..<500 {
            let statement = Self.draw(&random)
            let parsed = try ScenarioParser.parse(Self.preamble + "\n" + statement.description, file: "drawn")
            #expect(parsed.lines.last?.statement == statement, "\(statement.description)")
        }
    }

    /// The check can fail: a printer that dropped `with keys` would be caught.
    @Test func aLossyPrintIsCaught() throws {
        let statement = Statement.restore(device: "a", label: "old", withKeys: true)
        let lossy = statement.description.replacingOccurrences(of: " with keys", with: "")
        let parsed = try ScenarioParser.parse(Self.preamble + "\n" + lossy, file: "lossy")
        #expect(parsed.lines.last?.statement != statement)
    }
}
