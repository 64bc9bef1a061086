import Foundation
import Stele
import SteleSQL
import Testing
import TestSupport

/// `stele pending STORE [--json]`, run as a subprocess on mirror stores the test
/// fills through the library (the hub's answers given by hand to the sans-I/O
/// ``MirrorSync``), and on paths that are not mirror stores.
@Suite struct PendingCommandTests {
    static func stele(_ arguments: String...) throws -> CLITests.Run { try CLITests.stele(arguments) }

    /// A queue with one mutation in each state: `note/a` in flight (the hub
    /// applied it at seq 5, not yet echoed), `note/b` failed (the hub answered
    /// 500 and one attempt is all it gets), and an INBOX label pending.
    static func store(_ directory: TemporaryDirectory) throws -> (path: String, queue: [MirrorStore.QueuedMutation]) {
        let path = directory.file("mail.mirror")
        var configuration = MirrorStore.Configuration()
        configuration.clock = ManualWallClock(milliseconds: 1_800_000_000_000)
        configuration.maximumAttempts = 1
        let store = try MirrorStore(path: path, configuration: configuration)
        let sync = MirrorSync(store: store)
        try store.put(kind: "note", id: "a", payload: Array("first".utf8))
        let first = try #require(try sync.nextPush())
        guard case .push(let ids) = first.purpose else { throw TestFailure("the first request is not a push") }
        let applied = #"{"historyId":5,"results":[{"mutation":"\#(ids[0])","status":"applied","seq":5}]}"#
        _ = try sync.handle(.answer(HubAnswer(status: 200, body: Array(applied.utf8))), to: first)
        try store.put(kind: "note", id: "b", payload: Array("second".utf8))
        let second = try #require(try sync.nextPush())
        _ = try sync.handle(.answer(HubAnswer(status: 500, body: Array(#"{"error":{"code":"internal","message":"the disk is full"}}"#.utf8))), to: second)
        try store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        return (path, try store.queue())
    }

    struct TestFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    @Test func theQueueIsListedInIntentOrderWithItsCounts() throws {
        let directory = try TemporaryDirectory()
        let (path, queue) = try Self.store(directory)
        #expect(queue.map(\.state) == [.inFlight, .failed, .pending])
        let run = try Self.stele("pending", path)
        #expect(run.status == 0, "\(run.error)")
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("mutation") == true)
        let rows = lines.dropFirst().prefix(3)
        #expect(rows.count == 3)
        for (row, item) in zip(rows, queue) { #expect(row.hasPrefix(item.mutation), "\(row)") }
        let inFlight = try #require(rows.first)
        #expect(inFlight.contains("in_flight") && inFlight.contains("put") && inFlight.contains(" 5"))
        let failed = try #require(rows.dropFirst().first)
        #expect(failed.contains("failed") && failed.contains("500"), "\(failed)")
        #expect(rows.last?.contains("labels/INBOX") == true)
        #expect(run.output.contains("3 mutations: 1 pending, 1 in flight, 1 failed"))
    }

    @Test func jsonIsOneObjectWithEveryMutationAndTheCounts() throws {
        let directory = try TemporaryDirectory()
        let (path, queue) = try Self.store(directory)
        let run = try Self.stele("pending", path, "--json")
        #expect(run.status == 0, "\(run.error)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any])
        #expect(object["store"] as? String == path)
        let counts = try #require(object["counts"] as? [String: Int])
        #expect(counts == ["total": 3, "pending": 1, "inFlight": 1, "failed": 1])
        let mutations = try #require(object["mutations"] as? [[String: Any]])
        #expect(mutations.compactMap { $0["mutation"] as? String } == queue.map(\.mutation))
        #expect(mutations.compactMap { $0["state"] as? String } == ["in_flight", "failed", "pending"])
        #expect(mutations[0]["expectedHistoryId"] as? Int == 5)
        #expect(mutations[1]["attempts"] as? Int == 1)
        #expect((mutations[1]["lastError"] as? String)?.contains("the disk is full") == true)
        #expect(mutations[2]["set"] as? String == "labels" && mutations[2]["member"] as? String == "INBOX")
        #expect(mutations[2]["expectedHistoryId"] is NSNull)
        #expect(mutations[2]["op"] as? String == "add" && mutations[2]["kind"] as? String == "mail" && mutations[2]["id"] as? String == "m1")
    }

    /// Listing writes nothing: the file keeps every byte (SQLite's change counter
    /// included) and no `-wal` or `-shm` file appears beside it.
    @Test func listingWritesNothing() throws {
        let directory = try TemporaryDirectory()
        let (path, _) = try Self.store(directory)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        #expect(try Self.stele("pending", path).status == 0)
        #expect(try Self.stele("pending", path, "--json").status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == files)
    }

    @Test func anEmptyQueueSaysSo() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("empty.mirror")
        _ = try MirrorStore(path: path)
        let run = try Self.stele("pending", path)
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.contains("the queue is empty"))
        let json = try Self.stele("pending", path, "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        #expect((object["mutations"] as? [Any])?.isEmpty == true)
    }

    @Test func aMissingStoreIsOneLineWithStatus2AndNoFileIsCreated() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("nope.mirror")
        let run = try Self.stele("pending", path)
        #expect(run.status == 2, "as stele inspect and stele status exit for a missing store")
        #expect(run.error.contains("no mirror store at \(path)"), "\(run.error)")
        #expect(run.error.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func whatIsNotAMirrorStoreIsRefusedAndLeftAsItIs() throws {
        let directory = try TemporaryDirectory()
        let replicaPath = directory.file("phone.stele")
        do {
            _ = try CLITests.makeStore(replicaPath)
            // Everything in the file itself, so that a later checkpoint cannot change its bytes.
            try Connection(path: replicaPath).checkpoint()
        }
        let textPath = directory.file("notes.txt")
        try Data("hello, this is not a database\n".utf8).write(to: URL(fileURLWithPath: textPath))
        let emptyPath = directory.file("empty.db")
        #expect(FileManager.default.createFile(atPath: emptyPath, contents: Data()))
        // Another program's database, in rollback-journal mode: opening it as a store would switch it to WAL.
        let otherDatabase = directory.file("other.db")
        do {
            let connection = try Connection(path: otherDatabase, configuration: Connection.Configuration(journalMode: "DELETE"))
            try connection.executeScript("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
        }
        for path in [replicaPath, textPath, emptyPath, otherDatabase] {
            let before = Self.significantBytes(path)
            let run = try Self.stele("pending", path)
            #expect(run.status == 2, "\(path): a path that names no mirror store is an input error, as for stele inspect")
            #expect(run.error.hasPrefix("stele pending: "), "\(run.error)")
            #expect(run.error.contains("not") && run.error.contains(path), "\(run.error)")
            #expect(run.error.split(separator: "\n").count == 1)
            #expect(Self.significantBytes(path) == before, "\(path)")
        }
        #expect(try Self.stele("pending", replicaPath).error.contains("is not a Stele mirror store"))
    }

    /// A file's bytes, with an SQLite header's change counters (bytes 24-27 and
    /// 92-95) zeroed: opening any store sets `auto_vacuum` again, which SQLite
    /// commits as a header write that counts a change and changes nothing else.
    static func significantBytes(_ path: String) -> [UInt8]? {
        guard var bytes = FileManager.default.contents(atPath: path).map(Array.init) else { return nil }
        if bytes.count >= 100 && bytes.starts(with: Array("SQLite format 3\0".utf8)) {
            for index in Array(24..<28) + Array(92..<96) { bytes[index] = 0 }
        }
        return bytes
    }

    @Test func usageErrorsExitWith2() throws {
        let none = try Self.stele("pending")
        #expect(none.status == 2)
        #expect(none.error.contains("usage: stele pending STORE [--json]"))
        let two = try Self.stele("pending", "a", "b")
        #expect(two.status == 2)
        let typo = try Self.stele("pending", "x.mirror", "--jsn")
        #expect(typo.status == 2)
        #expect(typo.error.contains("did you mean '--json'?"))
        #expect(!FileManager.default.fileExists(atPath: "x.mirror"))
    }
}
