import Foundation
import Stele
import SteleHub
import Synchronization
import Testing
import TestSupport

/// ``FleetRuntime`` against a real hub over loopback: writes and deletes each
/// way, a device that waits for its approval, the barrier collecting through the
/// relay with the anchor on the hub, a revoked device stopping, the hub lost and
/// back, and answers the runtime must not be fooled by.
@Suite(.serialized) struct FleetRuntimeTests {
    @Test(arguments: Backend.allCases) func writesAndDeletesGoEachWay(_ backend: Backend) throws {
        let rig = try RuntimeRig(backend)
        let (phone, laptop) = try rig.startedPair()
        defer {
            phone.stop()
            laptop.stop()
        }
        try phone.with { _ = try $0.causal("notes").put("groceries", Array("milk".utf8)) }
        #expect(try eventually { try laptop.value("notes", "groceries") == "milk" })
        try laptop.with { _ = try $0.causal("notes").delete("groceries") }
        #expect(try eventually { try phone.value("notes", "groceries") == nil })
        try laptop.with { _ = try $0.causal("notes").put("todo", Array("call".utf8)) }
        #expect(try eventually { try phone.value("notes", "todo") == "call" })
        try phone.with { _ = try $0.causal("notes").delete("todo") }
        #expect(try eventually { try laptop.value("notes", "todo") == nil })
        // And the delete stays: both agree, and neither brings a value back.
        #expect(try eventually { phone.runtime?.status.inSync == true && laptop.runtime?.status.inSync == true })
        #expect(try phone.value("notes", "groceries") == nil && laptop.value("notes", "groceries") == nil)
    }

    @Test func writesOfAnotherProcessOnTheSameFileReachTheNode() throws {
        let rig = try RuntimeRig()
        let (phone, laptop) = try rig.startedPair()
        defer {
            phone.stop()
            laptop.stop()
        }
        // A second handle on the phone's file, as `stele put` in another process is.
        let other = try Replica.open(at: phone.path, options: Replica.Options(stampFloor: phone.keys))
        _ = try other.causal("notes").put("from-elsewhere", Array("yes".utf8))
        #expect(try eventually { try laptop.value("notes", "from-elsewhere") == "yes" })
    }

    @Test func aDeviceWaitsForItsApprovalThenSyncs() throws {
        let rig = try RuntimeRig()
        let phone = try rig.found("phone")
        try phone.start()
        defer { phone.stop() }
        try phone.with { _ = try $0.causal("notes").put("k", Array("v".utf8)) }
        let tablet = try rig.ask("tablet", toJoin: phone.account)
        let runtime = try tablet.start()
        defer { tablet.stop() }
        #expect(try eventually(10) { runtime.status.error?.code == .awaitingApproval })
        #expect(runtime.status.connection != .stopped, "waiting is not stopping")
        try rig.approve(tablet, by: phone)
        #expect(try eventually { try tablet.value("notes", "k") == "v" })
        #expect(try eventually { runtime.status.inSync && runtime.status.error == nil })
    }

    @Test func aTombstoneIsCollectedThroughTheRelayWithTheAnchorOnTheHub() throws {
        let rig = try RuntimeRig()
        let (phone, laptop) = try rig.startedPair()
        defer {
            phone.stop()
            laptop.stop()
        }
        let phoneRuntime = try #require(phone.runtime)
        let laptopRuntime = try #require(laptop.runtime)
        try phone.with { _ = try $0.causal("notes").put("secret", Array("x".utf8)) }
        #expect(try eventually { try laptop.value("notes", "secret") == "x" })
        try phone.with { _ = try $0.causal("notes").delete("secret") }
        #expect(try eventually(30) {
            let (p, l) = (phoneRuntime.status.collection, laptopRuntime.status.collection)
            return p.generation >= 1 && l.generation >= 1 && p.tombstones.values.reduce(0, +) == 0 && l.tombstones.values.reduce(0, +) == 0
        })
        // The anchor the round wrote is on the hub, at the fleet's generation.
        let anchor = try phone.client.send("GET", "\(phone.client.accountPath)/anchor")
        #expect(anchor.status == 200)
        #expect(Int(anchor.headers["stele-generation"] ?? "") == Int(phoneRuntime.status.collection.generation))
        #expect(try phone.value("notes", "secret") == nil && laptop.value("notes", "secret") == nil)
    }

    @Test func aRevokedDeviceStopsAndSaysSo() throws {
        let rig = try RuntimeRig()
        let (phone, laptop) = try rig.startedPair()
        defer {
            phone.stop()
            laptop.stop()
        }
        let laptopRuntime = try #require(laptop.runtime)
        #expect(try eventually { laptopRuntime.status.inSync })
        guard let ring = try phone.keys.load() else { throw HarnessError("no ring") }
        try phone.keys.save(try Membership.revoke(laptop.identity.deviceID, by: ring, in: phone.directory).ring)
        #expect(try eventually { laptopRuntime.status.connection == .stopped })
        #expect(laptopRuntime.status.error?.code == .revoked)
        #expect(laptopRuntime.status.error?.message.contains("revoked") == true)
        // The phone goes on alone: a write after the revocation never reaches the laptop.
        try phone.with { _ = try $0.causal("notes").put("after", Array("1".utf8)) }
        usleep(500_000)
        #expect(try laptop.value("notes", "after") == nil)
    }

    @Test func theHubLostAndBackCostsNothing() throws {
        let rig = try RuntimeRig()
        let (phone, laptop) = try rig.startedPair()
        defer {
            phone.stop()
            laptop.stop()
        }
        let phoneRuntime = try #require(phone.runtime)
        #expect(try eventually { phoneRuntime.status.inSync })
        rig.takeDown()
        try phone.with { _ = try $0.causal("notes").put("offline", Array("edit".utf8)) }
        #expect(try eventually {
            if case .reconnecting = phoneRuntime.status.connection { return true }
            return false
        })
        #expect(phoneRuntime.status.error?.code == .unreachable)
        try rig.bringBack()
        // Generous: in a full suite beside the sweeps this machine runs several times slower.
        #expect(try eventually(60) { try laptop.value("notes", "offline") == "edit" })
        #expect(try eventually { phoneRuntime.status.connection == .connected && phoneRuntime.status.error == nil })
    }

    @Test func garbageFromTheHubIsAnErrorThatPassesAndLosesNothing() throws {
        let rig = try RuntimeRig()
        let http = ScriptedHTTP()
        // The phone's long polls get garbage for a while.
        http.answer { request in
            request.url.path.hasSuffix("/relay") ? .success(HubAnswer(status: 200, body: [1, 2, 3])) : nil
        }
        let (phone, laptop) = try rig.startedPair(phoneHTTP: http)
        defer {
            phone.stop()
            laptop.stop()
        }
        let phoneRuntime = try #require(phone.runtime)
        try laptop.with { _ = try $0.causal("notes").put("k", Array("v".utf8)) }
        #expect(try eventually { phoneRuntime.status.error?.code == .malformed })
        #expect(phoneRuntime.status.connection != .stopped)
        http.answer(with: nil)
        #expect(try eventually(30) { try phone.value("notes", "k") == "v" })
    }

    @Test func serverErrorsAndAForgottenTokenAreRetriedAndLoseNothing() throws {
        let rig = try RuntimeRig()
        let http = ScriptedHTTP()
        // For a while every relay request of the phone's gets a 500, then one 401 (the hub forgot the token).
        let failures = Mutex(0)
        http.answer { request in
            guard request.url.path.contains("/relay") else { return nil }
            return failures.withLock { count in
                count += 1
                switch count {
                case ..<6: return .success(HubAnswer(status: 500, body: Array(#"{"error":{"code":"internal","message":"boom"}}"#.utf8)))
                case 6: return .success(HubAnswer(status: 401, body: Array(#"{"error":{"code":"unauthorized","message":"who?"}}"#.utf8)))
                default: return nil
                }
            }
        }
        let (phone, laptop) = try rig.startedPair(phoneHTTP: http)
        defer {
            phone.stop()
            laptop.stop()
        }
        let phoneRuntime = try #require(phone.runtime)
        try phone.with { _ = try $0.causal("notes").put("k", Array("v".utf8)) }
        try laptop.with { _ = try $0.causal("notes").put("j", Array("w".utf8)) }
        #expect(try eventually { phoneRuntime.status.error?.code == .refused })
        #expect(try eventually(30) { try laptop.value("notes", "k") == "v" && phone.value("notes", "j") == "w" })
        #expect(try eventually { phoneRuntime.status.inSync && phoneRuntime.status.error == nil })
        // The 401 opened a new session rather than failing.
        #expect(http.count("POST", containing: "/sessions") >= 2)
    }

    @Test func aFullMailboxIsWaitedOutAsTheHubSays() throws {
        let rig = try RuntimeRig()
        let http = ScriptedHTTP()
        // The hub says the laptop's mailbox is full, retry after 1 s, for the first two posts.
        let refused = Mutex(0)
        http.answer { request in
            guard request.method == "POST", request.url.path.contains("/relay/") else { return nil }
            return refused.withLock { count in
                guard count < 2 else { return nil }
                count += 1
                return .success(HubAnswer(status: 429, headers: ["retry-after": "1"], body: Array(#"{"error":{"code":"mailbox_full","message":"full"}}"#.utf8)))
            }
        }
        let (phone, laptop) = try rig.startedPair(phoneHTTP: http)
        defer {
            phone.stop()
            laptop.stop()
        }
        try phone.with { _ = try $0.causal("notes").put("k", Array("v".utf8)) }
        #expect(try eventually { try laptop.value("notes", "k") == "v" })
        let posts = http.requests.filter { $0.method == "POST" && $0.path.contains("/relay/") }
        #expect(posts.count >= 3)
        // The third try came no sooner than the Retry-After after the second.
        if posts.count >= 3 { #expect(posts[2].time.timeIntervalSince(posts[1].time) >= 0.95) }
    }

    @Test func aFrameOverTheRelaysLimitTravelsInPieces() throws {
        let rig = try RuntimeRig { $0.maximumFrameBytes = 8_192 }
        let phone = try rig.found("phone")
        let laptop = try rig.join("laptop", approvedBy: phone)
        var configuration = RuntimeRig.fast
        configuration.relayPieceBytes = 4_096
        try phone.start(configuration)
        try laptop.start(configuration)
        defer {
            phone.stop()
            laptop.stop()
        }
        let value = [UInt8]((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) })
        try phone.with { _ = try $0.causal("notes").put("big", value) }
        #expect(try eventually(30) { try laptop.with { try $0.causal("notes").get("big") } == value })
    }

    @Test func aConversationWithAContactAccountOnTheSameHub() throws {
        let rig = try RuntimeRig()
        let ana = try rig.found("ana")
        let anaLaptop = try rig.join("ana-laptop", approvedBy: ana)
        let bob = try rig.found("bob")
        for device in [ana, anaLaptop, bob] { try device.start() }
        defer { for device in [ana, anaLaptop, bob] { device.stop() } }
        // Conversations declared while the runtimes run: each reads its contact's roster then.
        try ana.with { _ = try $0.conversation("chat", with: bob.account) }
        try anaLaptop.with { _ = try $0.conversation("chat", with: bob.account) }
        try bob.with { _ = try $0.conversation("chat", with: ana.account) }
        func body(_ device: RuntimeRig.Device, _ contact: AccountID, _ message: String) throws -> String? {
            try device.with { try $0.conversation("chat", with: contact).message(message) }.map { row in row.isDeleted ? "deleted" : String(decoding: row.body, as: UTF8.self) }
        }
        try ana.with { _ = try $0.conversation("chat", with: bob.account).post("m1", body: Array("hello bob".utf8), author: "ana") }
        #expect(try eventually { try body(bob, ana.account, "m1") == "hello bob" })
        // Bob's receipt cancels the duty on both of Ana's devices.
        #expect(try eventually { try ana.with { try $0.conversation("chat", with: bob.account).outboxCount() } == 0 })
        #expect(try eventually { try anaLaptop.with { try $0.conversation("chat", with: bob.account).outboxCount() } == 0 })
        try bob.with { _ = try $0.conversation("chat", with: ana.account).post("b1", body: Array("hi ana".utf8), author: "bob") }
        #expect(try eventually { try body(ana, bob.account, "b1") == "hi ana" })
        #expect(try eventually { try body(anaLaptop, bob.account, "b1") == "hi ana" })
        // A recall for everyone reaches every device of Ana's.
        try bob.with { _ = try $0.conversation("chat", with: ana.account).unsend("b1", scope: .everyone) }
        #expect(try eventually { try body(ana, bob.account, "b1").map { $0 == "deleted" } ?? true })
        #expect(try eventually { try body(anaLaptop, bob.account, "b1").map { $0 == "deleted" } ?? true })
    }

    @Test func aSecondRuntimeOnOneStoreIsRefused() throws {
        let rig = try RuntimeRig()
        let phone = try rig.found("phone")
        let first = try phone.start()
        defer { phone.stop() }
        // `start()` takes the lock on the runtime's own queue: the first must hold it
        // before the second starts, or (a loaded machine ran the second's queue first)
        // the first is the one refused.
        #expect(try eventually { first.status.connection == .connected })
        let replica = try Replica.open(at: phone.path, options: Replica.Options(stampFloor: phone.keys))
        let second = try FleetRuntime(replica: replica, keyStore: phone.keys, client: phone.client, configuration: RuntimeRig.fast)
        second.start()
        #expect(try eventually { second.status.connection == .stopped })
        #expect(second.status.error?.code == .storeInUse)
        #expect(first.status.connection != .stopped)
    }

    @Test func aMissingOrForeignKeyRingIsRefusedAtOnce() throws {
        let rig = try RuntimeRig()
        let phone = try rig.found("phone")
        let other = try rig.found("other")
        let replica = try Replica.open(at: phone.path)
        let missing = #expect(throws: FleetRuntimeError.self) {
            _ = try FleetRuntime(replica: replica, keyStore: FileKeyStore(path: rig.files.file("none.keys")), client: phone.client)
        }
        #expect(missing?.code == .keyRing)
        let foreign = #expect(throws: FleetRuntimeError.self) { _ = try FleetRuntime(replica: replica, keyStore: other.keys, client: phone.client) }
        #expect(foreign?.code == .keyRing)
    }

    @Test func sessionsAreRenewedBeforeTheyExpire() throws {
        let rig = try RuntimeRig { $0.sessionLifetimeSeconds = 2 }
        let http = ScriptedHTTP()
        let phone = try rig.found("phone", http: http)
        let laptop = try rig.join("laptop", approvedBy: phone)
        var configuration = RuntimeRig.fast
        configuration.pollWaitSeconds = 1
        try phone.start(configuration)
        try laptop.start(configuration)
        defer {
            phone.stop()
            laptop.stop()
        }
        Thread.sleep(forTimeInterval: 5)
        try laptop.with { _ = try $0.causal("notes").put("late", Array("ok".utf8)) }
        #expect(try eventually { try phone.value("notes", "late") == "ok" })
        // A new session every ~1.6 s, and not one request turned away for an expired token first.
        #expect(http.count("POST", containing: "/sessions") >= 3)
        #expect(!http.statuses.contains(401), "a token was renewed only after the hub had refused it")
        #expect(phone.runtime?.status.error == nil)
    }
}
