import Foundation
import Stele
import Testing
import TestSupport

/// `stele init|join|approve|revoke|sync|status` given what users get wrong:
/// usage mistakes exit 2 with one line and the usage, failed operations exit 1
/// with one line saying why, and neither leaves a half-made device behind.
@Suite(.serialized) struct DeviceCommandLineTests {
    @Test func usageMistakesExitTwoAndSayWhat() throws {
        let world = try DeviceWorld()
        let store = world.path("x")
        let cases: [([String], String)] = [
            (["init"], "expected one store path"),
            (["init", store], "--hub URL is required"),
            (["init", store, "--hub", "not a url"], "is not a hub URL"),
            (["init", store, "--hub", world.hub() + "/v1"], "has a path"),
            (["init", store, "--hub", world.hub(), "--nmae", "x"], "did you mean '--name'"),
            (["join", store, "--hub", world.hub()], "--account ID is required"),
            (["join", store, "--hub", world.hub(), "--account", "zz"], "is not an account id"),
            (["approve", store], "expected a store and the device to approve"),
            (["revoke"], "expected a store and the device to revoke"),
            (["sync"], "expected one store path"),
            (["sync", store, "--timeout", "soon"], "--timeout takes a duration"),
            (["sync", store, "--wach"], "did you mean '--watch'"),
            (["sync", store, "--timeout", "2s", "--timeout", "3s"], "--timeout is given twice ('2s' and '3s'); give it once"),
            (["sync", store, "--watch", "--timeout", "2s"], "--timeout 2s ends a one-pass sync; --watch keeps going"),
            (["status", store, store], "expected one store path"),
        ]
        for (arguments, message) in cases {
            let run = try ChildProcess.run("stele", arguments)
            #expect(run.status == 2, "\(arguments): \(run)")
            #expect(run.error.contains(message), "\(arguments): \(run)")
        }
        #expect(!FileManager.default.fileExists(atPath: store))
    }

    @Test func setUpFailuresLeaveNoHalfMadeDevice() throws {
        let world = try DeviceWorld(open: false)
        let store = world.path("phone")
        // An unreachable hub.
        let unreachable = try world.stele("init", store, "--hub", "http://127.0.0.1:\(try ChildProcess.freePort())")
        #expect(unreachable.status == 1)
        #expect(unreachable.error.contains("cannot reach the hub"), "\(unreachable)")
        // A hub that wants an invite.
        let uninvited = try world.stele("init", store, "--hub", world.hub())
        #expect(uninvited.status == 1)
        #expect(uninvited.error.contains("invite code"), "\(uninvited)")
        #expect(!FileManager.default.fileExists(atPath: store) && !FileManager.default.fileExists(atPath: store + ".keys"))
        // With an invite it works; a second init over it is refused and changes nothing.
        let invite = try world.hubCommand(["invite"]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        // A store in a folder that is not there: refused before the hub hears of it, so the invite is not spent.
        let nowhere = try world.stele("init", world.path("missing") + "/phone", "--hub", world.hub(), "--invite", invite)
        #expect(nowhere.status == 2)
        #expect(nowhere.error.contains("does not exist") && nowhere.error.contains("the hub was not contacted"), "\(nowhere)")
        try world.must("init", store, "--hub", world.hub(), "--invite", invite)
        let before = try Data(contentsOf: URL(fileURLWithPath: store + ".keys"))
        let again = try world.stele("init", store, "--hub", world.hub(), "--invite", invite)
        #expect(again.status == 2)
        #expect(again.error.contains("exists already"), "\(again)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: store + ".keys")) == before)
        // The invite is spent: the hub says so, and the message does not ask for a code already given.
        let spent = try world.stele("init", world.path("tablet"), "--hub", world.hub(), "--invite", invite)
        #expect(spent.status == 1)
        #expect(spent.error.contains("already spent"), "\(spent)")
        #expect(!FileManager.default.fileExists(atPath: world.path("tablet")))
        // Joining an account the hub does not have.
        let lost = try world.stele("join", world.path("laptop"), "--hub", world.hub(), "--account", AccountID.generate().hex)
        #expect(lost.status == 1, "\(lost)")
        #expect(!FileManager.default.fileExists(atPath: world.path("laptop")))
    }

    @Test func aMissingOrForeignKeyRingIsSaidAtOnce() throws {
        let world = try DeviceWorld()
        try world.pair()
        try FileManager.default.moveItem(atPath: world.path("laptop") + ".keys", toPath: world.path("aside.keys"))
        let missing = try world.stele("sync", world.path("laptop"))
        #expect(missing.status == 2)
        #expect(missing.error.contains("no key ring"), "\(missing)")
        let foreign = try world.stele("sync", world.path("laptop"), "--keys", world.path("phone") + ".keys")
        #expect(foreign.status == 2)
        #expect(foreign.error.contains("key ring"), "\(foreign)")
        let approve = try world.stele("approve", world.path("phone"), "00000000")
        #expect(approve.status == 1)
        #expect(approve.error.contains("asked to join"), "\(approve)")
        let member = try world.stele("approve", world.path("phone"), try world.deviceID("phone"))
        #expect(member.status == 1)
        #expect(member.error.contains("already a member"), "\(member)")
        // A saved hub address that is no URL: the file is named.
        let hubFile = world.path("phone") + ".keys-hub"
        let saved = try String(contentsOfFile: hubFile, encoding: .utf8)
        try "not a url\n".write(toFile: hubFile, atomically: true, encoding: .utf8)
        let broken = try world.stele("sync", world.path("phone"), "--timeout", "2s")
        #expect(broken.status == 2, "\(broken)")
        #expect(broken.error.contains(hubFile), "\(broken)")
        try saved.write(toFile: hubFile, atomically: true, encoding: .utf8)
        let revokeSelf = try world.stele("revoke", world.path("phone"), try world.deviceID("phone"))
        #expect(revokeSelf.status == 2)
        #expect(revokeSelf.error.contains("cannot revoke itself"), "\(revokeSelf)")
    }

    /// A device alone on its account (its joiner not approved yet, say) is in sync
    /// as soon as the hub answers: a one-pass sync ends at once, exit 0. (Its first
    /// poll was held a whole wait, 60 s, the device "connecting" all along: every
    /// such sync failed at its timeout.) A timeout of any size is taken, none traps.
    @Test func aDeviceAloneOnItsAccountIsInSyncInOnePass() throws {
        let world = try DeviceWorld()
        let founded = try world.must("init", world.path("phone"), "--hub", world.hub())
        let account = try #require(DeviceWorld.field("account", in: founded.output))
        try world.must("namespace", world.path("phone"), "notes", "causal")
        let alone = try world.stele("sync", world.path("phone"), "--timeout", "20s")
        #expect(alone.status == 0, "\(alone)")
        #expect(alone.output.contains("in sync (no other device yet)"), "\(alone)")
        try world.must("join", world.path("laptop"), "--hub", world.hub(), "--account", account)
        let waiting = try world.stele("sync", world.path("phone"), "--timeout", "20s")
        #expect(waiting.status == 0 && waiting.output.contains("in sync (no other device yet)"), "a joiner not approved is no sibling yet: \(waiting)")
        for huge in ["100000000000h", "9223372036854775807ms", "99999999999999999999s"] {
            let long = try world.stele("sync", world.path("phone"), "--timeout", huge)
            #expect(long.status == 0, "--timeout \(huge): \(long)")
        }
    }

    @Test func aSyncWithTheHubDownFailsAfterItsTimeoutSayingWhy() throws {
        let world = try DeviceWorld()
        try world.pair()
        world.killHub(0)
        let started = Date()
        let run = try world.stele("sync", world.path("laptop"), "--timeout", "2s")
        #expect(run.status == 1)
        #expect(Date().timeIntervalSince(started) < 15)
        #expect(run.error.contains("not in sync after 2s"), "\(run)")
        #expect(run.error.contains("did not answer") || run.error.contains("reconnecting"), "\(run)")
    }

    /// A namespace declared on one device only: the sync that cannot agree says
    /// what the sibling's frames told it, not only that it did not hear agreement.
    @Test func aNamespaceDeclaredOnOneDeviceIsNamedWhenTheSyncTimesOut() throws {
        let world = try DeviceWorld()
        try world.pair()
        try world.must("namespace", world.path("laptop"), "extra", "lww")
        let phone = try world.background("sync", world.path("phone"), "--watch")
        defer {
            kill(phone.process.processIdentifier, SIGTERM)
            _ = phone.finish(timeoutSeconds: 10)
        }
        let run = try world.stele("sync", world.path("laptop"), "--timeout", "5s")
        #expect(run.status == 1)
        #expect(run.error.contains("heard:") && run.error.contains("extra") && run.error.contains("declare it on every device"), "\(run)")
    }

    @Test func aStoreWhoseAccountTheHubDoesNotKnowIsToldSo() throws {
        let world = try DeviceWorld()
        try world.pair()
        let other = try DeviceWorld()
        let run = try world.stele("sync", world.path("laptop"), "--hub", other.hub(), "--timeout", "10s")
        #expect(run.status == 1)
        #expect(run.error.contains("not on the hub") || run.error.contains("not on this hub"), "\(run)")
    }

    @Test func statusPrintsWhatHubAPIPromises() throws {
        let world = try DeviceWorld()
        try world.pair()
        try world.must("put", world.path("phone"), "notes", "k", "v")
        try world.must("delete", world.path("phone"), "notes", "k")
        let status = try world.status("phone")
        for field in ["account", "device", "hub", "generation", "tombstones", "state", "blockedBy"] {
            #expect(status[field] != nil, "\(field) missing from \(status)")
        }
        #expect(status["tombstones"] as? Int == 1)
        #expect(status["state"] as? String == "current")
        #expect(status["blockedBy"] as? [String] == [try world.deviceID("laptop")], "never heard agreeing: it blocks")
        #expect(status["hub"] as? String == world.hub())
        // The account as the hub sees it: the record history and who holds its tombstone horizon.
        let hubStatus = try #require(status["hubStatus"] as? [String: Any], "\(status)")
        for field in ["epoch", "historyId", "horizon", "horizonHeldBy", "tombstones", "warnings"] {
            #expect(hubStatus[field] != nil, "\(field) missing from \(hubStatus)")
        }
        let holder = try #require(hubStatus["horizonHeldBy"] as? [String: Any])
        #expect([try world.deviceID("phone"), try world.deviceID("laptop")].contains(holder["device"] as? String ?? ""))
        let text = try world.must("status", world.path("phone"))
        #expect(text.output.contains("blocked by"))
        #expect(text.output.contains("hub history  epoch "))
        #expect(text.output.contains("hub horizon  0, held by "))
    }

    /// A signal is never lost, whenever it comes: a SIGTERM in the first
    /// milliseconds of a watch stops it cleanly (or, before its first line ran,
    /// ends it as SIGTERM does any process), and it never crashes on the way out.
    @Test func aSignalAtAnyMomentStopsAWatch() throws {
        let world = try DeviceWorld()
        try world.pair()
        for attempt in 0..<20 {
            let watch = try world.background("sync", world.path("laptop"), "--watch")
            usleep(useconds_t(attempt % 5) * 20_000)
            kill(watch.process.processIdentifier, SIGTERM)
            let run = watch.finish(timeoutSeconds: 10)
            #expect(run.killedBySignal ? run.status == SIGTERM : run.status == 0, "attempt \(attempt): \(run)")
        }
        // And a one-pass sync interrupted says so, exit 1.
        let once = try world.background("sync", world.path("laptop"), "--timeout", "60s")
        usleep(200_000)
        kill(once.process.processIdentifier, SIGINT)
        let run = once.finish(timeoutSeconds: 10)
        #expect(run.status == 1 && run.error.contains("interrupted"), "\(run)")
    }

    /// Ctrl-C (or a SIGTERM) during `stele demo --hub` stops the hub and the device
    /// processes it started and removes its folder, as its end does: early (a
    /// one-shot `stele init` may be running) and halfway (the hub and the phone's
    /// watch are running, a `stele sync` may be starting).
    @Test(arguments: [(SIGTERM, "The phone founds an account"), (SIGINT, "stele put laptop.stele")])
    func anInterruptedHubDemoLeavesNothingRunningOrBehind(_ signal: Int32, after line: String) throws {
        let demo = try ChildProcess.Background("stele", ["demo", "--hub"])
        #expect(demo.waitFor(line, timeoutSeconds: 60), "\(demo.outputText)")
        let folder = demo.outputText.split(separator: "\n").first { $0.contains(" in ") && $0.contains("removed at the end") }
            .flatMap { $0.components(separatedBy: " in ").last?.components(separatedBy: " (removed").first }
        let directory = try #require(folder, "the demo names its folder: \(demo.outputText)")
        // Whatever fails below, nothing the demo started outlives the test.
        defer {
            for process in Self.processes(mentioning: directory) {
                if let pid = Int32(process.prefix { $0 != ":" }) { kill(pid, SIGKILL) }
            }
            try? FileManager.default.removeItem(atPath: directory)
        }
        #expect(FileManager.default.fileExists(atPath: directory))
        #expect(!Self.processes(mentioning: directory).isEmpty, "the demo's processes name its folder")
        kill(demo.process.processIdentifier, signal)
        let run = demo.finish(timeoutSeconds: 20)
        #expect(run.status == 128 + signal && !run.killedBySignal, "\(run)")
        #expect(run.error.contains("interrupted"), "\(run)")
        #expect(!FileManager.default.fileExists(atPath: directory), "the folder is left: \(directory)")
        #expect(Self.processes(mentioning: directory).isEmpty, "still running: \(Self.processes(mentioning: directory))")
    }

    /// The command lines of the processes running now that contain `text`.
    static func processes(mentioning text: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.filter { Int($0) != nil }.compactMap { pid -> String? in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let line = String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            // A zombie (ended, not yet reaped) has no command line.
            return line.contains(text) ? "\(pid): \(line)" : nil
        }
    }

    @Test func theHubDemoTellsItsStoryWithRealProcesses() throws {
        let run = try ChildProcess.run("stele", ["demo", "--hub"], timeoutSeconds: 120)
        #expect(run.status == 0, "\(run)")
        #expect(run.output.contains("did not bring it back"), "\(run)")
    }
}
