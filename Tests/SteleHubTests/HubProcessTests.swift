import Foundation
import Stele
import SteleHub
import Synchronization
import Testing
import TestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `stele-hub` as a user runs it: a real process on a real port, spoken to
/// through the library's hub client, stopped with SIGTERM or killed with SIGKILL.
@Suite(.serialized) struct HubProcessTests {
    /// The built `stele-hub` binary, beside the test bundle.
    static var binary: URL {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("stele-hub")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/stele-hub")
    }

    /// A running `stele-hub serve`.
    final class HubProcess {
        let process = Process()
        let url: URL
        let errors: Pipe
        private let collected = ByteLog()

        init(_ arguments: [String]) throws {
            process.executableURL = HubProcessTests.binary
            process.arguments = ["serve", "--listen", "127.0.0.1:0"] + arguments
            let output = Pipe()
            errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            let collected = self.collected
            errors.fileHandleForReading.readabilityHandler = { handle in
                let data = handle.availableData
                collected.append(data)
            }
            var line = ""
            let deadline = Date().addingTimeInterval(20)
            while !line.contains("\n") && Date() < deadline {
                let data = output.fileHandleForReading.availableData
                if data.isEmpty { break }
                line += String(decoding: data, as: UTF8.self)
            }
            guard let range = line.range(of: "listening on "), let end = line[range.upperBound...].firstIndex(of: " "),
                let url = URL(string: String(line[range.upperBound..<end]))
            else {
                process.terminate()
                throw HarnessError("stele-hub did not say where it listens: '\(line)'")
            }
            self.url = url
        }

        /// What it wrote to standard error so far.
        var log: String { collected.text }

        /// Sends `number` and waits for the end; -1 when the hub had not stopped 30 s
        /// later (it is then killed: a test never hangs).
        func signal(_ number: Int32) -> Int32 {
            kill(process.processIdentifier, number)
            let deadline = Date().addingTimeInterval(30)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            guard !process.isRunning else {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return -1
            }
            return process.terminationStatus
        }

        deinit { if process.isRunning { _ = signal(SIGKILL) } }
    }

    /// A SIGTERM right after the ready line (or at any moment) is never lost: the hub stops.
    @Test func aSignalRightAfterStartStopsTheHub() throws {
        let directory = try TemporaryDirectory("stele-hub-signal")
        for attempt in 0..<20 {
            let hub = try HubProcess(["--data", directory.file("data")])
            #expect(hub.signal(SIGTERM) == 0, "attempt \(attempt): \(hub.log)")
        }
    }

    /// A second hub on a port the first holds fails, says so, and makes no data
    /// directory, database or lock file for a hub that never served.
    @Test func aTakenPortIsRefusedBeforeAnyFileIsMade() throws {
        let directory = try TemporaryDirectory("stele-hub-port")
        let first = try HubProcess(["--data", directory.file("first")])
        defer { _ = first.signal(SIGTERM) }
        let port = try #require(first.url.port)
        let second = try Self.run(["serve", "--listen", "127.0.0.1:\(port)", "--data", directory.file("second")])
        #expect(second.status == 1, "\(second.error)")
        #expect(second.error.contains("could not listen on 127.0.0.1:\(port)") && second.error.contains("another process listens there"), "\(second.error)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("second")), "a data directory was made for a hub that never served")
        // The first hub still serves.
        let health = try Data(contentsOf: first.url.appendingPathComponent("v1/health"))
        #expect(String(decoding: health, as: UTF8.self).contains("ok"))
    }

    static func run(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }

    /// A founded account through `HubDirectory`, with an invite from `stele-hub invite`.
    static func found(_ hub: HubProcess, data: String, founder: DeviceIdentity) throws -> (AccountID, HubClient) {
        let invite = try run(["invite", "--data", data])
        #expect(invite.status == 0, "\(invite.error)")
        let account = AccountID.generate()
        let client = HubClient(hub: hub.url, account: account, identity: founder)
        try HubDirectory(client: client, invite: invite.output.trimmingCharacters(in: .whitespacesAndNewlines)).found(try Roster.founding(account: account, by: founder))
        return (account, client)
    }

    @Test func servesLogsAndStopsCleanlyOnSIGTERM() throws {
        let data = try TemporaryDirectory("stele-hub")
        let hub = try HubProcess(["--data", data.path])
        let founder = Fixtures.identity(1)
        let (account, client) = try Self.found(hub, data: data.path, founder: founder)
        let directory = HubDirectory(client: client)
        #expect(try directory.roster(of: account).members == [founder.deviceID])
        #expect(hub.signal(SIGTERM) == 0)
        let log = hub.log
        #expect(log.contains("method=POST path=/v1/accounts status=201"))
        #expect(log.contains("method=GET path=/v1/accounts/{a}/roster status=200"))
        #expect(!log.contains(account.hex))
        #expect(log.contains("stele-hub stopped"))
    }

    @Test func theDirectoryAndAnchorStoreWorkThroughTheHub() throws {
        let data = try TemporaryDirectory("stele-hub")
        let hub = try HubProcess(["--data", data.path])
        let founder = Fixtures.identity(1)
        let laptop = Fixtures.identity(2)
        let (account, client) = try Self.found(hub, data: data.path, founder: founder)
        let directory = HubDirectory(client: client)
        #expect(throws: RosterError.self) { try directory.found(try Roster.founding(account: account, by: founder)) }
        try directory.append(try RosterChange.approval(of: laptop.deviceID, signingKey: try laptop.signingKey(), by: founder, account: account, index: 1), to: account)
        #expect(throws: HubClientError.self) {
            try directory.append(try RosterChange.approval(of: laptop.deviceID, signingKey: try laptop.signingKey(), by: founder, account: account, index: 1), to: account)
        }
        let key = AccountKey.generate()
        try directory.publish(try WrappedAccountKey.wrap(key, epoch: 1, for: laptop.deviceID, by: founder, account: account))
        let laptopDirectory = HubDirectory(client: HubClient(hub: hub.url, account: account, identity: laptop))
        let roster = try laptopDirectory.roster(of: account)
        #expect(roster.members == [founder.deviceID, laptop.deviceID])
        let keys = try laptopDirectory.wrappedKeys(for: laptop.deviceID, of: account)
        #expect(try keys.map { try $0.open(with: laptop, roster: roster) } == [key])

        let anchors = HubAnchorStore(client: client)
        #expect(try anchors.header(of: account) == nil)
        var generator = SeededGenerator(seed: 3)
        let anchor = Anchor(header: AnchorHeader(account: account, generation: 4, round: RoundNonce.generate(using: &generator), digest: try Hash32(bytes: [UInt8](repeating: 4, count: 32))), snapshot: [1, 2, 3])
        try anchors.write(anchor, key: key)
        #expect(try anchors.header(of: account)?.generation == 4)
        #expect(try HubAnchorStore(client: HubClient(hub: hub.url, account: account, identity: laptop)).read(account, key: key) == anchor)
        let lower = Anchor(header: AnchorHeader(account: account, generation: 3, round: anchor.header.round, digest: anchor.header.digest), snapshot: [])
        #expect(throws: AnchorError.self) { try anchors.write(lower, key: key) }
        #expect(try anchors.header(of: account)?.generation == 4)
        #expect(hub.signal(SIGTERM) == 0)
    }

    @Test func anAcceptedFrameSurvivesKillMinusNine() throws {
        let data = try TemporaryDirectory("stele-hub")
        var hub = try HubProcess(["--data", data.path])
        let founder = Fixtures.identity(1)
        let (account, client) = try Self.found(hub, data: data.path, founder: founder)
        for frame: [UInt8] in [[1], [2, 2]] {
            let sent = try client.send("POST", "\(client.accountPath)/relay/\(founder.deviceID.hex)", body: frame)
            #expect(sent.status == 202)
        }
        #expect(hub.signal(SIGKILL) == SIGKILL)
        hub = try HubProcess(["--data", data.path])
        let again = HubClient(hub: hub.url, account: account, identity: founder)
        let read = try again.send("GET", "\(again.accountPath)/relay?wait=0")
        #expect(read.status == 200)
        #expect(try RelayBody(read.body).frames.map(\.1) == [[1], [2, 2]])
        #expect(hub.signal(SIGTERM) == 0)
    }

    /// Copies the hub's SQLite files (the database and its write-ahead log) from one folder to another.
    static func copyHubFiles(from source: String, to target: String) throws {
        let manager = FileManager.default
        try manager.createDirectory(atPath: target, withIntermediateDirectories: true)
        for suffix in ["", "-wal", "-shm"] {
            let to = "\(target)/hub.sqlite\(suffix)"
            if manager.fileExists(atPath: to) { try manager.removeItem(atPath: to) }
            if manager.fileExists(atPath: "\(source)/hub.sqlite\(suffix)") { try manager.copyItem(atPath: "\(source)/hub.sqlite\(suffix)", toPath: to) }
        }
    }

    /// A hub process killed with SIGKILL and started again on a copy of its file
    /// taken earlier, with no `stele-hub restored`: it tells the restore itself (the
    /// file is another copy than the one it ran on), starts a new epoch, and the
    /// clients push again what the copy lacks; then its tombstones are collected
    /// once both clients have pulled past them, and a client put back below the
    /// horizon replays (410) without bringing the deleted record back.
    @Test func aHubProcessToldItsFileWasPutBackAndCollectedItsTombstones() throws {
        let folder = try TemporaryDirectory("stele-hub-told")
        let data = folder.file("data")
        var hub = try HubProcess(["--data", data])
        let founder = Fixtures.identity(1)
        let (account, _) = try Self.found(hub, data: data, founder: founder)
        var configuration = MirrorStore.Configuration()
        configuration.initialBackoffMilliseconds = 20
        let phone = try MirrorStore(path: folder.file("phone.mirror"), configuration: configuration)
        let laptop = try MirrorStore(path: folder.file("laptop.mirror"), configuration: configuration)
        @discardableResult func sync(_ store: MirrorStore) throws -> MirrorDriver.Report {
            let client = HubClient(hub: hub.url, account: account, identity: founder)
            return try MirrorDriver(sync: MirrorSync(store: store), transport: HubMirrorTransport(client: client)).syncUntilQuiet()
        }
        try phone.put(kind: "note", id: "kept", payload: Array("kept".utf8))
        try phone.put(kind: "note", id: "doomed", payload: Array("doomed".utf8))
        try sync(phone)
        try sync(laptop)
        #expect(hub.signal(SIGKILL) == SIGKILL)
        try Self.copyHubFiles(from: data, to: folder.file("backup"))
        hub = try HubProcess(["--data", data])
        try phone.delete(kind: "note", id: "doomed")
        try phone.put(kind: "note", id: "late", payload: Array("late".utf8))
        try sync(phone)
        try sync(laptop)
        try FileManager.default.copyItem(atPath: folder.file("laptop.mirror"), toPath: folder.file("laptop-backup.mirror"))

        // Put back, and only started again.
        #expect(hub.signal(SIGKILL) == SIGKILL)
        try Self.copyHubFiles(from: folder.file("backup"), to: data)
        hub = try HubProcess(["--data", data])
        // The log is read from the process's standard error as it comes.
        let deadline = Date().addingTimeInterval(5)
        while !hub.log.contains("rewound"), Date() < deadline { usleep(20_000) }
        #expect(hub.log.contains("the record history was rewound: the database is not the one the hub last ran on"), "\(hub.log)")
        let fresh = HubClient(hub: hub.url, account: account, identity: founder)
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/note/doomed").status == 200, "the copy has the deleted note back")
        try sync(laptop)
        try sync(phone)
        try sync(laptop)
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/note/doomed").status == 404, "the delete the copy lost is pushed again")
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/note/late").status == 200, "the write the copy lost is pushed again")

        // Both clients pull as the founding device: its cursor is at the end, so the tombstone goes.
        let compacted = try Self.run(["compact", "--data", data])
        #expect(compacted.status == 0, "\(compacted.error)")
        #expect(compacted.output.contains("collected 1 tombstones on 1 accounts"), "\(compacted.output)")
        let status = try JSONSerialization.jsonObject(with: Data(try fresh.send("GET", "\(fresh.accountPath)/status").body)) as? [String: Any]
        #expect((status?["tombstones"] as? NSNumber)?.intValue == 0)

        // The laptop's copy from before the compaction is below the horizon: it replays.
        let old = try MirrorStore(path: folder.file("laptop-backup.mirror"), configuration: configuration)
        #expect(try old.value(kind: "note", id: "doomed") == nil)
        try sync(old)
        #expect(try old.records(kind: "note").map(\.id) == ["kept", "late"])
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/note/doomed").status == 404)
        #expect(hub.signal(SIGTERM) == 0)
        // A clean stop writes the history total down; the next start finds nothing rewound.
        hub = try HubProcess(["--data", data])
        #expect(!hub.log.contains("rewound"))
        #expect(hub.signal(SIGTERM) == 0)
    }

    /// Two mirror clients against a real `stele-hub` process that is killed with
    /// SIGKILL twice, the second time to put its database back from a copy taken
    /// after the first kill (the operator's restore, then `stele-hub restored`).
    /// Nothing acknowledged is lost to a kill; what the restore lost, the clients
    /// push again; the delete made after the backup stays deleted; both clients
    /// and a third that downloads from nothing read what the hub holds.
    @Test func mirrorClientsThroughKillsAndARestoreOfTheHubProcess() throws {
        let folder = try TemporaryDirectory("stele-hub-mirror")
        let data = folder.file("data")
        var hub = try HubProcess(["--data", data])
        let founder = Fixtures.identity(1)
        let (account, _) = try Self.found(hub, data: data, founder: founder)
        var configuration = MirrorStore.Configuration()
        configuration.initialBackoffMilliseconds = 20
        let phone = try MirrorStore(path: folder.file("phone.mirror"), configuration: configuration)
        let laptop = try MirrorStore(path: folder.file("laptop.mirror"), configuration: configuration)
        @discardableResult func sync(_ store: MirrorStore) throws -> MirrorDriver.Report {
            let client = HubClient(hub: hub.url, account: account, identity: founder)
            return try MirrorDriver(sync: MirrorSync(store: store), transport: HubMirrorTransport(client: client)).syncUntilQuiet()
        }

        try phone.put(kind: "mail", id: "m1", payload: Array("hello".utf8), group: "t1")
        try phone.add(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        try phone.put(kind: "mail", id: "m2", payload: Array("doomed".utf8), group: "t1")
        #expect(try sync(phone).unreachable == false)
        #expect(try phone.queue().isEmpty)

        // Killed: what it acknowledged is on disk. The copy taken now is the backup.
        #expect(hub.signal(SIGKILL) == SIGKILL)
        try Self.copyHubFiles(from: data, to: folder.file("backup"))
        #expect(try sync(laptop).unreachable, "a hub that is not running costs nothing")
        #expect(try laptop.queue().isEmpty)
        hub = try HubProcess(["--data", data])
        try sync(laptop)
        #expect(try laptop.value(kind: "mail", id: "m1") == Array("hello".utf8))
        #expect(try laptop.holds(kind: "mail", id: "m1", set: "labels", member: "INBOX"))

        // After the backup: a delete, a label, a record; the laptop sees them all.
        try phone.delete(kind: "mail", id: "m2")
        try phone.add(kind: "mail", id: "m1", set: "labels", member: "STARRED")
        try phone.put(kind: "mail", id: "m3", payload: Array("later".utf8))
        try sync(phone)
        try sync(laptop)
        #expect(try laptop.value(kind: "mail", id: "m2") == nil)
        #expect(try laptop.holds(kind: "mail", id: "m1", set: "labels", member: "STARRED"))

        // The restore: killed, its files put back from the backup, told so, started again.
        #expect(hub.signal(SIGKILL) == SIGKILL)
        try Self.copyHubFiles(from: folder.file("backup"), to: data)
        let restored = try Self.run(["restored", "--data", data])
        #expect(restored.status == 0, "\(restored.error)")
        #expect(restored.output.contains("record history: epoch "))
        hub = try HubProcess(["--data", data])
        let fresh = HubClient(hub: hub.url, account: account, identity: founder)
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/mail/m2").status == 200, "the restored copy has the deleted record back")

        // Writes made after the restore carry the history past both clients' cursors: only
        // the new epoch tells them that the history they saw is not this one.
        let tablet = try MirrorStore(path: folder.file("tablet.mirror"), configuration: configuration)
        for index in 0..<5 { try tablet.put(kind: "note", id: "n\(index)", payload: Array("note".utf8)) }
        try sync(tablet)
        // Then everyone syncs: the laptop first, with a write of its own.
        try laptop.put(kind: "mail", id: "m4", payload: Array("after the restore".utf8))
        try sync(laptop)
        try sync(phone)
        try sync(laptop)
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/mail/m2").status == 404, "the delete the restore lost is pushed again")
        let m1 = try JSONSerialization.jsonObject(with: Data(try fresh.send("GET", "\(fresh.accountPath)/records/mail/m1").body)) as? [String: Any]
        #expect(Set((m1?["sets"] as? [String: [String]])?["labels"] ?? []) == ["INBOX", "STARRED"])
        let newcomer = try MirrorStore(path: folder.file("newcomer.mirror"), configuration: configuration)
        try sync(newcomer)
        for store in [phone, laptop, newcomer] {
            #expect(try store.records(kind: "mail").map(\.id) == ["m1", "m3", "m4"])
            #expect(try store.records(kind: "note").count == 5)
            #expect(try store.holds(kind: "mail", id: "m1", set: "labels", member: "STARRED"))
            #expect(try store.queue().isEmpty)
        }
        #expect(hub.signal(SIGTERM) == 0)
    }

    @Test func aRevocationEndsAPollParkedOverHTTP() throws {
        let data = try TemporaryDirectory("stele-hub")
        let hub = try HubProcess(["--data", data.path])
        let founder = Fixtures.identity(1)
        let laptop = Fixtures.identity(2)
        let (account, client) = try Self.found(hub, data: data.path, founder: founder)
        let directory = HubDirectory(client: client)
        try directory.append(try RosterChange.approval(of: laptop.deviceID, signingKey: try laptop.signingKey(), by: founder, account: account, index: 1), to: account)
        let laptopClient = HubClient(hub: hub.url, account: account, identity: laptop, timeoutSeconds: 40)
        // Opens the session before parking.
        #expect(try laptopClient.send("GET", "\(laptopClient.accountPath)/relay?wait=0").status == 200)
        let answer = Mutex<HubClient.Answer?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            let polled = try? laptopClient.send("GET", "\(laptopClient.accountPath)/relay?wait=30")
            answer.withLock { $0 = polled }
            done.signal()
        }.start()
        usleep(500_000)
        #expect(answer.withLock { $0 } == nil)
        try directory.append(try RosterChange.revocation(of: laptop.deviceID, by: founder, account: account, index: 2), to: account)
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(answer.withLock { $0 }?.status == 403)
        #expect(hub.signal(SIGTERM) == 0)
    }

    @Test func steleLinksNeitherLibpqNorLibmicrohttpdButTheHubDoes() throws {
        func linked(_ binary: URL) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/ldd")
            process.arguments = [binary.path]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return text
        }
        let stele = Self.binary.deletingLastPathComponent().appendingPathComponent("stele")
        let steleLibraries = try linked(stele)
        #expect(steleLibraries.contains("libsqlite3"), "ldd must have read \(stele.path)")
        #expect(!steleLibraries.contains("libpq"))
        #expect(!steleLibraries.contains("libmicrohttpd"))
        let hubLibraries = try linked(Self.binary)
        #expect(hubLibraries.contains("libpq") && hubLibraries.contains("libmicrohttpd"))
    }

    /// `restored` under a serving hub would have the hub write its own run over the
    /// note `restored` wrote, and rewind every client a second time at its next
    /// start: it is refused until the hub stops, and changes nothing.
    @Test func restoredIsRefusedWhileTheHubServesItsDirectory() throws {
        let folder = try TemporaryDirectory("stele-hub-restored-live")
        let data = folder.file("hub")
        let hub = try HubProcess(["--data", data])
        let note = "\(data)/hub.sqlite.announced"
        let before = try String(contentsOfFile: note, encoding: .utf8)
        let refused = try Self.run(["restored", "--data", data])
        #expect(refused.status == 1)
        #expect(refused.error.contains("a stele-hub serve is running on \(data)"), "\(refused.error)")
        #expect(refused.error.contains("stop it first"), "\(refused.error)")
        #expect(try String(contentsOfFile: note, encoding: .utf8) == before, "a refused restored writes nothing")
        #expect(hub.signal(SIGKILL) == SIGKILL)
        let done = try Self.run(["restored", "--data", data])
        #expect(done.status == 0, "\(done.error)")
        #expect(done.output.contains("record history: epoch "))
        // The next start takes the restored history as it is: no second rewind.
        let restarted = try HubProcess(["--data", data])
        #expect(restarted.signal(SIGTERM) == 0)
        // Its last line read means every line before it was (the same pipe, in order).
        let deadline = Date().addingTimeInterval(10)
        while !restarted.log.contains("stele-hub stopped"), Date() < deadline { usleep(20_000) }
        #expect(restarted.log.contains("stele-hub stopped"), "\(restarted.log)")
        #expect(!restarted.log.contains("was rewound"), "\(restarted.log)")
    }

    @Test func usageErrorsExitTwoAndSayWhatToDo() throws {
        let typo = try Self.run(["serve", "--dta", "x"])
        #expect(typo.status == 2)
        #expect(typo.error.contains("unknown option '--dta'; did you mean '--data'?"))
        let command = try Self.run(["serv"])
        #expect(command.status == 2)
        #expect(command.error.contains("did you mean 'serve'?"))
        #expect(try Self.run(["serve", "--listen", "nowhere"]).status == 2)
        let twice = try Self.run(["serve", "--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2"])
        #expect(twice.status == 2)
        #expect(twice.error.contains("--listen is given twice ('127.0.0.1:1' and '127.0.0.1:2'); give it once"), "\(twice.error)")
        let empty = try Self.run(["serve", "--data", ""])
        #expect(empty.status == 2)
        #expect(empty.error.contains("--data needs a value, not an empty one"), "\(empty.error)")
        for command in ["serve", "restored", "invite", "compact"] {
            let help = try Self.run([command, "--help"])
            #expect(help.status == 0, "\(command) --help")
            #expect(help.output.contains("usage: stele-hub COMMAND"), "\(command) --help")
        }
        #expect(try Self.run(["serve", "--tls-cert", "/nonexistent"]).status == 2)
        for spelling in ["--version", "version"] {
            let version = try Self.run([spelling])
            #expect(version.status == 0 && version.output == "stele-hub \(SteleVersion.current)\n", "\(spelling): \(version.output)")
        }
        // Every limit is a flag; a value that is no positive whole number is a usage error.
        for flag in ["--max-mutations-per-push", "--max-changes-per-page", "--max-clock-ahead"] {
            let bad = try Self.run(["serve", flag, "0"])
            #expect(bad.status == 2)
            #expect(bad.error.contains("\(flag) takes a positive whole number, not '0'"), "\(bad.error)")
        }
        // Each has a largest: past it the hub's arithmetic on it overflowed, and the first request
        // that used it trapped (a session of 2^53 seconds at the first login).
        let largest = [
            ("--max-body-bytes", 1 << 30), ("--max-frame-bytes", 1 << 30), ("--max-mailbox-bytes", 1 << 40), ("--max-mutations-per-push", 1_000_000),
            ("--max-changes-per-page", 1_000_000), ("--max-clock-ahead", 315_360_000), ("--session-seconds", 315_360_000),
            ("--join-request-seconds", 315_360_000), ("--threads", 1_024),
        ]
        for (flag, maximum) in largest {
            for value in [String(maximum + 1), "9223372036854775807"] {
                let huge = try Self.run(["serve", flag, value, "--data", "/nonexistent/never-made"])
                #expect(huge.status == 2, "\(flag) \(value): \(huge.error)")
                #expect(huge.error.contains("\(flag) takes a whole number from 1 to \(maximum), not \(value)"), "\(huge.error)")
            }
        }
        let limitsFolder = try TemporaryDirectory("stele-hub-limits")
        let limited = try HubProcess(["--data", limitsFolder.file("hub"), "--max-mutations-per-push", "2", "--max-changes-per-page", "5", "--max-clock-ahead", "60"])
        #expect(limited.url.port != nil, "a hub starts with every limit given")
        limited.process.terminate()
        limited.process.waitUntilExit()
        #expect(try Self.run([]).status == 2)
        let both = try Self.run(["invite", "--data", "/tmp/x", "--postgres", "postgresql://nowhere"])
        #expect(both.status == 2)
        #expect(try Self.run(["restored", "--dat", "x"]).status == 2)
        let folder = try TemporaryDirectory("stele-hub-restored")
        let nothing = try Self.run(["restored", "--data", folder.file("none")])
        #expect(nothing.status == 1)
        #expect(nothing.error.contains("there is no hub database at"))
        #expect(!FileManager.default.fileExists(atPath: folder.file("none")), "nothing is created where no hub was")
        #expect(try Self.run(["compact", "--dta", "x"]).status == 2)
        let noHub = try Self.run(["compact", "--data", folder.file("none")])
        #expect(noHub.status == 1)
        #expect(noHub.error.contains("there is no hub database at"))
        #expect(!FileManager.default.fileExists(atPath: folder.file("none")), "compact creates no hub either")
        #expect(try Self.run(["compcat"]).error.contains("did you mean 'compact'?"))
        // On a hub with nothing to collect, it says so.
        let data = folder.file("hub")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try SQLiteHubStorage(path: data + "/hub.sqlite").close()
        let compacted = try Self.run(["compact", "--data", data])
        #expect(compacted.status == 0)
        #expect(compacted.output.contains("collected 0 tombstones on 0 accounts"))
    }
}
