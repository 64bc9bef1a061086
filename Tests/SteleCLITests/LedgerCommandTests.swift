import Foundation
import Stele
import SteleSQL
import Testing
import TestSupport

/// `stele ledger PATH [--json] [--stamps N]`, run as a subprocess on ledgers the
/// test fills through the library (a plain SQLite table as the app's store, the
/// hub's answers given by hand), halted ones included, and on paths that are no ledger.
@Suite struct LedgerCommandTests {
    static func stele(_ arguments: String...) throws -> CLITests.Run { try CLITests.stele(arguments) }

    struct TestFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// An app store with two notes, and its ledger after one pass and a push the hub applied for `a` only.
    static func ledger(_ directory: TemporaryDirectory) throws -> (store: String, ledger: Ledger, source: SQLiteTableSource) {
        let store = directory.file("notes.sqlite")
        let source = try SQLiteTableSource(path: store)
        try source.put(kind: "note", id: "a", payload: Array("first".utf8))
        try source.put(kind: "note", id: "b", payload: Array("second".utf8))
        var configuration = Ledger.Configuration()
        configuration.clock = ManualWallClock(milliseconds: 1_800_000_000_000)
        let ledger = try Ledger(path: store + ".ledger", source: source, account: "acct-1", hub: "https://hub.example", configuration: configuration)
        try ledger.pass()
        let sync = LedgerSync(ledger: ledger)
        let push = try #require(try sync.nextPush())
        guard case .push(let ids) = push.purpose, ids.count == 2 else { throw TestFailure("the pass did not queue both notes") }
        let answer = #"{"historyId":7,"results":[{"mutation":"\#(ids[0])","status":"applied","seq":7},{"mutation":"\#(ids[1])","status":"refused","reason":"too_large"}]}"#
        _ = try sync.handle(.answer(HubAnswer(status: 200, body: Array(answer.utf8))), to: push)
        return (store, ledger, source)
    }

    @Test func theLedgerBesideAStoreIsShownWithItsStampsAndOutbox() throws {
        let directory = try TemporaryDirectory()
        let (store, ledger, _) = try Self.ledger(directory)
        let identity = try #require(try ledger.status().storeIdentity)
        for path in [store, store + ".ledger"] {
            let run = try Self.stele("ledger", path)
            #expect(run.status == 0, "\(run.error)")
            #expect(run.output.contains("ledger      \(store).ledger"), "\(run.output)")
            #expect(run.output.contains("account     acct-1"))
            #expect(run.output.contains("sync        running"))
            #expect(run.output.contains("identity \(identity), 2 entities"))
            #expect(run.output.contains("stamps      2 live, 0 tombstones"))
            #expect(run.output.contains("outbox      0 pending, 1 failed"))
            #expect(run.output.contains("the hub refused it: too_large"))
        }
    }

    @Test func jsonIsOneObject() throws {
        let directory = try TemporaryDirectory()
        let (store, _, _) = try Self.ledger(directory)
        let run = try Self.stele("ledger", store, "--json", "--stamps", "1")
        #expect(run.status == 0, "\(run.error)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
        #expect(object["halted"] as? Bool == false)
        #expect(object["liveStamps"] as? Int == 2 && object["failed"] as? Int == 1 && object["pending"] as? Int == 0)
        let stamps = try #require(object["stamps"] as? [[String: Any]])
        #expect(stamps.count == 1)
        #expect(stamps[0]["kind"] as? String == "note" && stamps[0]["id"] as? String == "a" && stamps[0]["seq"] as? Int == 7)
        #expect((stamps[0]["fingerprint"] as? String)?.count == 64)
    }

    @Test func aRefusedWipeIsShownAsHaltedWithItsReason() throws {
        let directory = try TemporaryDirectory()
        let (store, ledger, source) = try Self.ledger(directory)
        try source.wipe()
        #expect(throws: LedgerError.self) { try ledger.pass() }
        let run = try Self.stele("ledger", store)
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.contains("HALTED (store_replaced)"), "\(run.output)")
        let json = try Self.stele("ledger", store, "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        #expect(object["halted"] as? Bool == true)
        #expect((object["halt"] as? [String: Any])?["code"] as? String == "store_replaced")
    }

    @Test func aCorruptLedgerIsShownHaltedAndLeftAsItIs() throws {
        let directory = try TemporaryDirectory()
        let (store, ledger, _) = try Self.ledger(directory)
        let path = store + ".ledger"
        ledger.close()
        let reader = try Connection(path: path, mode: .readWrite, configuration: nil)
        try reader.checkpoint()
        let page = Int(try reader.scalarInt("PRAGMA page_size") ?? 4096)
        let root = Int(try reader.scalarInt("SELECT rootpage FROM sqlite_master WHERE name = 'ledger_stamps'") ?? 2)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64((root - 1) * page))
        handle.write(Data(repeating: 0x5A, count: page))
        try handle.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let run = try Self.stele("ledger", path)
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.contains("HALTED (corrupt)"), "\(run.output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        // Looking writes no note: only the app's own open halts it.
        #expect(!FileManager.default.fileExists(atPath: path + ".halted"))
    }

    @Test func whatIsNoLedgerIsAnInputError() throws {
        let directory = try TemporaryDirectory()
        let missing = try Self.stele("ledger", directory.file("nothing-here"))
        #expect(missing.status == 2)
        #expect(missing.error.contains("no ledger at"), "\(missing.error)")
        let other = directory.file("other.sqlite")
        let connection = try Connection(path: other)
        try connection.execute("CREATE TABLE t (x)")
        let run = try Self.stele("ledger", other)
        #expect(run.status == 2)
        #expect(run.error.contains("another program"), "\(run.error)")
        let empty = directory.file("empty")
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        let emptyRun = try Self.stele("ledger", empty)
        #expect(emptyRun.status == 2, "\(emptyRun.output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: empty)).isEmpty)
        // Bytes that are no SQLite database: not shown as a halted ledger, refused.
        let garbage = directory.file("garbage.ledger")
        #expect(FileManager.default.createFile(atPath: garbage, contents: Data((0..<4_096).map { UInt8(truncatingIfNeeded: $0 &* 31) })))
        let garbageRun = try Self.stele("ledger", garbage)
        #expect(garbageRun.status == 2, "\(garbageRun.output)")
        #expect(garbageRun.error.contains("no SQLite database"), "\(garbageRun.error)")
        let usage = try Self.stele("ledger")
        #expect(usage.status == 2)
        let badFlag = try Self.stele("ledger", other, "--stamps", "many")
        #expect(badFlag.status == 2)
        #expect(badFlag.error.contains("--stamps needs a whole number"))
    }
}
