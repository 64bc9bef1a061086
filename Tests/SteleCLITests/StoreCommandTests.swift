import Foundation
import Stele
import SteleSimulator
import Testing
import TestSupport
@testable import Stele

/// `stele namespace|put|get|delete|ls`, run as subprocesses; and a write made by
/// another process reaching the fleet through the node that owns the store
/// (issue 14 §3: every write, through any handle and from any process, is
/// advertised within one advertisement interval).
@Suite struct StoreCommandTests {
    static func stele(_ arguments: String...) throws -> CLITests.Run { try CLITests.stele(arguments) }

    static func store(_ directory: TemporaryDirectory) throws -> (path: String, replica: Replica) {
        let path = directory.file("phone.stele")
        let replica = try Replica.create(
            at: path, account: Fixtures.account(), device: Fixtures.device(1), options: Replica.Options(stampFloor: FileKeyStore(path: path + ".keys")))
        return (path, replica)
    }

    @Test func putGetDeleteAndListAStoreInTurn() throws {
        let directory = try TemporaryDirectory()
        let (path, _) = try Self.store(directory)
        #expect(try Self.stele("namespace", path, "notes", "causal").status == 0)
        #expect(try Self.stele("namespace", path, "flags", "lww").status == 0)
        #expect(try Self.stele("put", path, "notes", "groceries", "milk and eggs").status == 0)
        #expect(try Self.stele("put", path, "flags", "dark", "on").status == 0)
        let got = try Self.stele("get", path, "notes", "groceries")
        #expect(got.status == 0)
        #expect(got.output == "milk and eggs\n")
        let listed = try Self.stele("ls", path, "notes", "--json")
        #expect(listed.status == 0)
        #expect(try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [String: String] == ["groceries": "milk and eggs"])
        #expect(try Self.stele("delete", path, "notes", "groceries").status == 0)
        let absent = try Self.stele("get", path, "notes", "groceries")
        #expect(absent.status == 1)
        #expect(absent.output.isEmpty && absent.error.isEmpty)
        // The stamp floor went to the key store beside the store.
        #expect(FileManager.default.fileExists(atPath: path + ".keys-floor"))
        let replica = try Replica.open(at: path)
        #expect(try replica.tombstoneCounts() == ["notes": 1, "flags": 0])
        #expect(try replica.lww("flags").get("dark") == "on".bytes)
    }

    /// A store in a folder nothing can be written in (a mounted snapshot, a
    /// backup's read-only copy): SQLite cannot make the `-wal` and `-shm` files it
    /// keeps beside a store. Reads read it as it is; a write says the folder is
    /// not writable and what to do, exit 2, and leaves the store as it was.
    @Test func aStoreInAFolderThatTakesNoFileIsReadAndAWriteSaysWhy() throws {
        let directory = try TemporaryDirectory()
        // A name SQLite's URI reader would misread unescaped: a space, `#`, `?`, `%`, a non-ASCII letter.
        let folder = directory.file("read only #1 ?50% é")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let path = folder + "/phone.stele"
        do {
            let replica = try Replica.create(at: path, account: Fixtures.account(), device: Fixtures.device(1))
            try replica.declare("notes", .causal)
            try replica.causal("notes").put("groceries", "milk".bytes)
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"), "the last handle closed: no WAL beside the store")
        // root writes through a folder's mode bits: the immutable attribute stops root too.
        func setWritable(_ writable: Bool) throws {
            if getuid() == 0 {
                let chattr = Process()
                chattr.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
                chattr.arguments = [writable ? "-i" : "+i", folder]
                try chattr.run()
                chattr.waitUntilExit()
            } else {
                try FileManager.default.setAttributes([.posixPermissions: writable ? 0o755 : 0o555], ofItemAtPath: folder)
            }
        }
        try setWritable(false)
        defer {
            // Writable again before the folder is removed (`directory` kept alive until then).
            try? setWritable(true)
            withExtendedLifetime(directory) {}
        }
        try #require(access(folder, W_OK) != 0, "the test could not make \(folder) unwritable, so it checks nothing")
        let got = try Self.stele("get", path, "notes", "groceries")
        #expect(got.status == 0 && got.output == "milk\n", "\(got.error)")
        let inspected = try Self.stele("inspect", path)
        #expect(inspected.status == 0 && inspected.output.contains("notes"), "\(inspected.error)")
        for write in [["put", path, "notes", "k", "v", "--keys", directory.file("keys")], ["namespace", path, "flags", "lww", "--keys", directory.file("keys")]] {
            let refused = try CLITests.stele(write)
            #expect(refused.status == 2, "\(write[0]): \(refused.error)")
            #expect(refused.error.contains("its folder \(folder) is not writable") && refused.error.contains("make the folder writable"), "\(refused.error)")
            #expect(!refused.error.contains("SQLite step failed"), "\(refused.error)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["phone.stele"], "nothing was made beside the store")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the store is as it was")
    }

    @Test func mistakesAreOneLineWithStatus2AndChangeNothing() throws {
        let directory = try TemporaryDirectory()
        let (path, replica) = try Self.store(directory)
        try replica.causal("notes").put("k", "v".bytes)
        try replica.log("memory").append(group: "g", body: "x".bytes)
        let before = try replica.digest(of: "notes")
        let cases: [([String], String)] = [
            (["put", path, "notez", "k", "v"], "namespace notez is not declared"),
            (["put", path, "memory", "k", "v"], "is a log namespace"),
            (["put", path, "notes", "k"], "usage: stele put"),
            (["namespace", path, "x", "causl"], "did you mean 'causal'?"),
            (["namespace", path, "notes", "lww"], "declared as causal"),
            (["get", directory.file("missing.stele"), "notes", "k"], "no Stele store at"),
            (["put", path, "notes", "k", "v", "--kyes", "f"], "did you mean '--keys'?"),
            (["put", path, "notes", "k", "v", "--keys", directory.path], "is a folder"),
            (["delete", path, "notes", ""], "a key is 1 to 1,024 UTF-8 bytes"),
            (["delete", path, "notes", String(repeating: "k", count: 1_025)], "a key is 1 to 1,024 UTF-8 bytes"),
        ]
        for (arguments, message) in cases {
            let run = try CLITests.stele(arguments)
            #expect(run.status == 2, "\(arguments)")
            #expect(run.error.contains(message), "\(arguments): \(run.error)")
        }
        #expect(try replica.digest(of: "notes") == before)
        #expect(try replica.causal("notes").get("k") == "v".bytes)
    }

    /// `ls` keeps one row a line: a tab, a line break or a terminal escape in a
    /// key or value is written escaped; `--json` holds two keys that differ only
    /// in their Unicode spelling as two keys (a dictionary would have trapped).
    @Test func lsWritesEveryRowOnItsOwnLineAndEveryKeyInItsJSON() throws {
        let directory = try TemporaryDirectory()
        let (path, replica) = try Self.store(directory)
        try replica.causal("notes").put("a\tb", "line\nbreak \u{1B}[31mred".bytes)
        try replica.causal("notes").put("\u{e9}", "composed".bytes)
        try replica.causal("notes").put("e\u{301}", "decomposed".bytes)
        let text = try Self.stele("ls", path, "notes")
        #expect(text.status == 0)
        #expect(text.output.split(separator: "\n").count == 3, "\(text.output)")
        #expect(text.output.contains("a\\tb\tline\\nbreak \\u{1B}[31mred"), "\(text.output)")
        let json = try Self.stele("ls", path, "notes", "--json")
        #expect(json.status == 0, "\(json.error)")
        #expect(json.output.contains("\"composed\"") && json.output.contains("\"decomposed\""), "\(json.output)")
        #expect(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) is [String: String])
    }

    /// A damaged store is said to be damaged, with the way on, by every command,
    /// and `inspect` finds damage in pages no other command of the moment reads.
    @Test func aDamagedStoreIsSaidToBeDamaged() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("phone.stele")
        let replica = try CLITests.makeStore(path)
        for index in 0..<400 { try replica.causal("notes").put("k\(index)", Array(repeating: 7, count: 300)) }
        try replica.checkpoint()
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        for offset in stride(from: size / 2, to: size - 4_096, by: 4_096) {
            try handle.seek(toOffset: UInt64(offset))
            try handle.write(contentsOf: Data(repeating: 0xA5, count: 512))
        }
        try handle.close()
        let inspect = try Self.stele("inspect", path)
        #expect(inspect.status != 0, "\(inspect.output)")
        #expect(inspect.error.contains("damaged") && inspect.error.contains("backup"), "\(inspect.error)")
        let listed = try Self.stele("ls", path, "notes")
        #expect(listed.status != 0 && listed.error.contains("damaged"), "\(listed)")
    }

    /// The node owning the store runs here; `stele put` writes from another
    /// process. The node's next periodic advertisement carries the write, and the
    /// sibling takes it in, with nobody telling the node anything.
    @Test func aWriteFromAnotherProcessReachesTheSiblingAtTheNextAdvertisement() throws {
        let directory = try TemporaryDirectory()
        let (path, phone) = try Self.store(directory)
        try phone.causal("notes").put("a", "1".bytes)
        let laptop = try Fixtures.memoryReplica(device: Fixtures.device(2))
        _ = try laptop.causal("notes")
        let roster: Set<DeviceID> = [phone.device, laptop.device]
        // Both run in the driver apps run, in the in-memory environment; frames arrive at once.
        let world = MemoryFleet()
        world.frameLatencyMilliseconds = 0
        let drivers = [(phone, UInt64(1)), (laptop, 2)].map { replica, seed in
            FleetDriver(
                unsealed: replica, roster: roster, accountKeys: [], environment: world.environment(for: replica.device), configuration: FleetConfiguration(),
                random: SeededGenerator(seed: seed))
        }
        for driver in drivers {
            world.attach(driver)
            driver.start()
        }
        world.run(forMilliseconds: 0)
        #expect(try laptop.causal("notes").get("a") == "1".bytes)

        let run = try Self.stele("put", path, "notes", "b", "from another process")
        #expect(run.status == 0, "\(run.error)")
        let deleted = try Self.stele("delete", path, "notes", "a")
        #expect(deleted.status == 0, "\(deleted.error)")
        drivers[0].handle(.timer(.advertise))
        world.run(forMilliseconds: 0)
        #expect(try laptop.causal("notes").get("b") == "from another process".bytes)
        #expect(try laptop.causal("notes").get("a") == nil)
        #expect(try laptop.digest(of: "notes") == phone.digest(of: "notes"))
        // This process writes on top without reusing the other process's counter.
        let theirs = try #require(try phone.causal("notes").record("b")?.versions.first?.dot)
        #expect(try phone.causal("notes").put("c", "3".bytes).counter > theirs.counter)
    }
}
