import Foundation
import Synchronization
import Stele
import SteleHub
import SteleSQL
import Testing
import TestSupport

/// The handler on both backends: every path of HUB-API's directory, relay and
/// anchor, with each refusal's status and code, and refusals that change nothing.
@Suite(.serialized) struct HubServiceTests {
    // MARK: health, routing, limits

    @Test(arguments: Backend.allCases) func healthNamesTheStorage(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let response = hub.call("GET", "/v1/health")
        #expect(response.status == 200)
        #expect(response.json["status"] as? String == "ok")
        #expect(response.json["storage"] as? String == backend.rawValue)
    }

    @Test(arguments: Backend.allCases) func unknownPathsAndWrongMethodsAnswerAsHubAPISays(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let account = AccountID.generate().hex
        #expect(hub.call("GET", "/v2/health").status == 404)
        #expect(hub.call("GET", "/v1/nothing").errorCode == "not_found")
        #expect(hub.call("GET", "/v1/accounts/\(account)/nothing").status == 404)
        let wrongMethod = hub.call("DELETE", "/v1/health")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.errorCode == "method_not_allowed")
        #expect(wrongMethod.headers["Allow"] == "GET, HEAD")
        // HEAD wherever GET is, answered as GET (the server drops the body); nowhere else.
        let head = hub.call("HEAD", "/v1/health")
        #expect(head.status == 200)
        #expect(head.json["status"] as? String == "ok")
        let headOnPush = hub.call("HEAD", "/v1/accounts/\(account)/records/push")
        #expect(headOnPush.status == 405)
        #expect(headOnPush.headers["Allow"] == "POST")
        let statusByGet = hub.call("GET", "/v1/accounts/\(account)/status")
        #expect(statusByGet.status != 405)
        #expect(hub.call("HEAD", "/v1/accounts/\(account)/status").status == statusByGet.status, "a HEAD is refused as its GET is")
        #expect(hub.call("DELETE", "/v1/accounts/\(account)/roster").headers["Allow"] == "GET, HEAD, POST")
        // Not where a GET writes: a relay poll acknowledges (deletes) frames, a changes page notes a cursor.
        for path in ["relay?after=5", "records/changes?since=0"] {
            let headThatWouldWrite = hub.call("HEAD", "/v1/accounts/\(account)/\(path)")
            #expect(headThatWouldWrite.status == 405, "\(path)")
            #expect(headThatWouldWrite.headers["Allow"] == "GET", "\(path)")
        }
        #expect(hub.call("GET", "/v1/accounts").status == 405)
        #expect(hub.call("GET", "/v1/accounts/\(account)/records/push").status == 405)
        #expect(hub.call("POST", "/v1/accounts/\(account)/records/changes").status == 405)
        #expect(hub.call("POST", "/v1/accounts/\(account)/records/k/i").status == 405)
        #expect(hub.call("GET", "/v1/accounts/\(account)/records/k/i/x").status == 404)
        #expect(hub.call("POST", "/v1/accounts/\(account)/records/push", json: ["mutations": []]).status == 404, "no such account")
    }

    @Test(arguments: Backend.allCases) func aBodyOverTheLimitIsTooLarge(_ backend: Backend) throws {
        let hub = try HubHarness(backend) { $0.maximumBodyBytes = 1_000 }
        let response = hub.call("POST", "/v1/accounts", body: [UInt8](repeating: 0x20, count: 1_001))
        #expect(response.status == 413)
        #expect(response.errorCode == "too_large")
    }

    // MARK: accounts

    @Test(arguments: Backend.allCases) func anAccountNeedsAnUnspentInvite(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let account = AccountID.generate()
        let genesis = Data(try Roster.founding(account: account, by: founder).encoded).base64EncodedString()
        let without = hub.call("POST", "/v1/accounts", json: ["genesis": genesis])
        #expect(without.status == 403)
        #expect(without.errorCode == "invite_required")
        #expect(hub.call("POST", "/v1/accounts", json: ["genesis": genesis, "invite": "nope"]).errorCode == "invite_required")
        let invite = try hub.service.createInvite()
        let created = hub.call("POST", "/v1/accounts", json: ["genesis": genesis, "invite": invite])
        #expect(created.status == 201)
        #expect(created.json["account"] as? String == account.hex)
        let other = Data(try Roster.founding(account: AccountID.generate(), by: founder).encoded).base64EncodedString()
        let spent = hub.call("POST", "/v1/accounts", json: ["genesis": other, "invite": invite])
        #expect(spent.status == 403)
        #expect(spent.errorCode == "invite_required")
        let again = hub.call("POST", "/v1/accounts", json: ["genesis": genesis, "invite": try hub.service.createInvite()])
        #expect(again.status == 409)
    }

    @Test(arguments: Backend.allCases) func anOpenHubFoundsWithoutAnInvite(_ backend: Backend) throws {
        let hub = try HubHarness(backend) { $0.open = true }
        let genesis = Data(try Roster.founding(account: AccountID.generate(), by: Fixtures.identity(1)).encoded).base64EncodedString()
        #expect(hub.call("POST", "/v1/accounts", json: ["genesis": genesis]).status == 201)
    }

    @Test(arguments: Backend.allCases) func malformedAccountBodiesAreRefusedNamingTheField(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let before = try hub.snapshot()
        let notJSON = hub.call("POST", "/v1/accounts", body: Array("{not json".utf8))
        #expect(notJSON.status == 400)
        #expect(notJSON.errorCode == "bad_request")
        let missing = hub.call("POST", "/v1/accounts", json: ["invite": "x"])
        #expect(missing.status == 400)
        #expect((missing.json["error"] as? [String: Any])?["message"] as? String == "the field \"genesis\" is missing")
        #expect(hub.call("POST", "/v1/accounts", json: ["genesis": 12]).status == 400)
        #expect(hub.call("POST", "/v1/accounts", json: ["genesis": "***"]).status == 400)
        #expect(hub.call("POST", "/v1/accounts", body: Array("[1, 2]".utf8)).status == 400)
        let garbage = hub.call("POST", "/v1/accounts", json: ["genesis": Data([1, 2, 3]).base64EncodedString(), "invite": try hub.service.createInvite()])
        #expect(garbage.status == 422)
        #expect(garbage.errorCode == "invalid_change")
        // A founding entry whose signature was tampered with does not verify.
        var bytes = try Roster.founding(account: AccountID.generate(), by: Fixtures.identity(1)).encoded
        bytes[bytes.count - 1] ^= 1
        #expect(hub.call("POST", "/v1/accounts", json: ["genesis": Data(bytes).base64EncodedString(), "invite": try hub.service.createInvite()]).status == 422)
        // Only the invites the test created changed.
        #expect(try hub.snapshot().filter { !$0.hasPrefix("invites") } == before.filter { !$0.hasPrefix("invites") })
    }

    // MARK: sessions

    @Test(arguments: Backend.allCases) func aSessionNeedsTheRosterKeysSignatureWithinFiveMinutes(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let path = "/v1/accounts/\(account.hex)/sessions"
        func proof(_ identity: DeviceIdentity, time: Int64, signer: DeviceIdentity? = nil) throws -> [String: Any] {
            let signature = try HubSessionProof.sign(by: signer ?? identity, account: account, timeMilliseconds: time)
            return ["device": identity.deviceID.hex, "time": time, "signature": Data(signature).base64EncodedString()]
        }
        let good = hub.call("POST", path, json: try proof(founder, time: hub.now))
        #expect(good.status == 200)
        #expect((good.json["token"] as? String)?.count == 64)
        #expect(good.json["expiresAt"] as? Int64 == hub.now + 3_600_000)
        let forged = hub.call("POST", path, json: try proof(founder, time: hub.now, signer: Fixtures.identity(2)))
        #expect(forged.status == 403)
        #expect(forged.errorCode == "bad_signature")
        let late = hub.call("POST", path, json: try proof(founder, time: hub.now - 301_000))
        #expect(late.errorCode == "clock_skew")
        #expect(hub.call("POST", path, json: try proof(founder, time: hub.now + 299_000)).status == 200)
        let stranger = hub.call("POST", path, json: try proof(Fixtures.identity(3), time: hub.now))
        #expect(stranger.status == 403)
        #expect(stranger.errorCode == "not_a_member")
        #expect(hub.call("POST", "/v1/accounts/\(AccountID.generate().hex)/sessions", json: try proof(founder, time: hub.now)).status == 404)
        #expect(hub.call("POST", path, json: ["device": "xyz", "time": 1, "signature": ""]).status == 400)
        #expect(hub.call("POST", path, json: ["device": founder.deviceID.hex, "time": "now", "signature": ""]).status == 400)
        #expect(hub.call("POST", path, json: ["device": founder.deviceID.hex, "time": true, "signature": ""]).status == 400)
        #expect(hub.call("POST", path, json: ["device": founder.deviceID.hex, "time": 1.5, "signature": ""]).status == 400)
    }

    @Test(arguments: Backend.allCases) func tokensAreCheckedOnEveryMemberPath(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        let outsider = Fixtures.identity(9)
        let otherAccount = try hub.found(outsider)
        let otherToken = try hub.session(outsider, otherAccount)
        let paths = ["roster", "join-requests", "keys", "relay?wait=0", "anchor", "status"]
        for path in paths {
            let target = "/v1/accounts/\(account.hex)/\(path)"
            #expect(hub.call("GET", target).status == 401, "\(path) without a token")
            #expect(hub.call("GET", target, token: "not-a-token").status == 401, "\(path) with an unknown token")
            #expect(hub.call("GET", target, token: otherToken).status == 403, "\(path) with another account's token")
            #expect(hub.call("GET", "/v1/accounts/\(AccountID.generate().hex)/\(path)", token: token).status == 404, "\(path) of no account")
            #expect([200, 404].contains(hub.call("GET", target, token: token).status), "\(path) with the member's token")
        }
        hub.advance(seconds: 3_601)
        let expired = hub.call("GET", "/v1/accounts/\(account.hex)/roster", token: token)
        #expect(expired.status == 401)
    }

    // MARK: roster

    @Test(arguments: Backend.allCases) func theRosterGrowsOnlyBySignedChangesThatExtendIt(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let joiner = Fixtures.identity(2)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        let path = "/v1/accounts/\(account.hex)/roster"
        let approval = try RosterChange.approval(of: joiner.deviceID, signingKey: try joiner.signingKey(), by: founder, account: account, index: 1)
        let appended = hub.call("POST", path, json: ["change": Data(approval.encoded).base64EncodedString()], token: token)
        #expect(appended.status == 200)
        #expect(appended.json["version"] as? Int == 2)
        let before = try hub.snapshot()
        // The same change again: its position is taken.
        let replayed = hub.call("POST", path, json: ["change": Data(approval.encoded).base64EncodedString()], token: token)
        #expect(replayed.status == 409)
        #expect(replayed.errorCode == "conflict")
        // A change signed for a stale position, and one claiming a taken index.
        let third = Fixtures.identity(3)
        let stale = try RosterChange.approval(of: third.deviceID, signingKey: try third.signingKey(), by: founder, account: account, index: 1)
        #expect(hub.call("POST", path, json: ["change": Data(stale.encoded).base64EncodedString()], token: token).status == 409)
        let current = try RosterChange.approval(of: third.deviceID, signingKey: try third.signingKey(), by: founder, account: account, index: 2)
        #expect(hub.call("POST", path, json: ["change": Data(current.encoded).base64EncodedString(), "index": 1], token: token).status == 409)
        // A forgery: signed by a device that is not a member.
        let forged = try RosterChange.approval(of: third.deviceID, signingKey: try third.signingKey(), by: third, account: account, index: 2)
        let refused = hub.call("POST", path, json: ["change": Data(forged.encoded).base64EncodedString()], token: token)
        #expect(refused.status == 422)
        #expect(refused.errorCode == "invalid_change")
        // A bad signature by a member.
        var tampered = current.encoded
        tampered[tampered.count - 1] ^= 0x40
        #expect(hub.call("POST", path, json: ["change": Data(tampered).base64EncodedString()], token: token).status == 422)
        #expect(hub.call("POST", path, json: ["change": Data([7, 7]).base64EncodedString()], token: token).status == 400)
        #expect(hub.call("POST", path, json: ["change": 5], token: token).status == 400)
        #expect(try hub.snapshot() == before)
        let roster = try hub.roster(account, token: token)
        #expect(roster.members == [founder.deviceID, joiner.deviceID])
    }

    @Test(arguments: Backend.allCases) func aRevocationEndsTheDevicesSessionsAndMailbox(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let (founder, laptop, account, token, laptopToken) = try Self.founderAndLaptop(hub)
        let relay = "/v1/accounts/\(account.hex)/relay"
        #expect(hub.call("POST", "\(relay)/\(laptop.deviceID.hex)", body: [1, 2, 3], token: token).status == 202)
        // The laptop parks a poll for frames after the one it has.
        guard case .wait(let parked) = hub.service.handle(HubRequest(method: "GET", target: "\(relay)?after=1&wait=30", headers: ["authorization": "Bearer \(laptopToken)"])) else {
            Issue.record("a poll with nothing new must park")
            return
        }
        #expect(parked.poll() == nil)
        let revocation = try RosterChange.revocation(of: laptop.deviceID, by: founder, account: account, index: 2)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/roster", json: ["change": Data(revocation.encoded).base64EncodedString()], token: token).status == 200)
        #expect(parked.poll()?.status == 403)
        #expect(hub.call("GET", "\(relay)?wait=0", token: laptopToken).status == 403)
        let sent = hub.call("POST", "\(relay)/\(laptop.deviceID.hex)", body: [4], token: token)
        #expect(sent.status == 410)
        #expect(sent.errorCode == "revoked")
        let session = hub.call("POST", "/v1/accounts/\(account.hex)/sessions", json: [
            "device": laptop.deviceID.hex, "time": hub.now,
            "signature": Data(try HubSessionProof.sign(by: laptop, account: account, timeMilliseconds: hub.now)).base64EncodedString(),
        ])
        #expect(session.errorCode == "revoked")
        #expect(try hub.snapshot().filter { $0.hasPrefix("mailbox") }.isEmpty)
    }

    // MARK: join requests and keys

    @Test(arguments: Backend.allCases) func joinRequestsAreOpenToAskButReadOnlyByMembers(_ backend: Backend) throws {
        let hub = try HubHarness(backend) { $0.maximumJoinRequests = 2 }
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        let path = "/v1/accounts/\(account.hex)/join-requests"
        func ask(_ seed: UInt64) -> HubResponse {
            hub.call("POST", path, json: ["device": Fixtures.identity(seed).deviceID.hex, "publicKeys": Data([1, 2]).base64EncodedString(), "name": "phone \(seed)"])
        }
        #expect(ask(2).status == 202)
        #expect(ask(2).status == 202)
        #expect(ask(3).status == 202)
        let full = ask(4)
        #expect(full.status == 429)
        #expect(full.headers["Retry-After"] != nil)
        #expect(hub.call("GET", path).status == 401)
        let listed = hub.call("GET", path, token: token)
        let requests = listed.json["requests"] as? [[String: Any]] ?? []
        #expect(Set(requests.compactMap { $0["device"] as? String }) == [Fixtures.identity(2).deviceID.hex, Fixtures.identity(3).deviceID.hex])
        #expect(hub.call("POST", path, json: ["device": founder.deviceID.hex, "publicKeys": "AQI=", "name": "x"]).status == 409)
        let noKeys = hub.call("POST", path, json: ["device": Fixtures.identity(5).deviceID.hex, "publicKeys": "", "name": "x"])
        #expect(noKeys.status == 400)
        #expect(noKeys.errorMessage?.contains("publicKeys") == true)
        #expect(hub.call("POST", path, json: ["device": "abc", "publicKeys": "", "name": "x"]).status == 400)
        // Approval clears the request.
        try hub.approve(Fixtures.identity(2), by: founder, account, token: token)
        #expect((hub.call("GET", path, token: token).json["requests"] as? [[String: Any]])?.count == 1)
    }

    @Test(arguments: Backend.allCases) func wrappedKeysReachOnlyTheirDevice(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let laptop = Fixtures.identity(2)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        try hub.approve(laptop, by: founder, account, token: token)
        let key = try WrappedAccountKey.wrap(AccountKey.generate(), epoch: 1, for: laptop.deviceID, by: founder, account: account)
        let keys = "/v1/accounts/\(account.hex)/keys"
        #expect(hub.call("PUT", "\(keys)/\(laptop.deviceID.hex)", json: ["epoch": 1, "sealed": Data(key.sealed).base64EncodedString()], token: token).status == 200)
        #expect(hub.call("PUT", "\(keys)/\(Fixtures.identity(5).deviceID.hex)", json: ["epoch": 1, "sealed": "AA=="], token: token).status == 404)
        #expect(hub.call("PUT", "\(keys)/\(laptop.deviceID.hex)", json: ["epoch": 0, "sealed": "AA=="], token: token).status == 400)
        #expect((hub.call("GET", keys, token: token).json["keys"] as? [Any])?.isEmpty == true)
        let read = hub.call("GET", keys, token: try hub.session(laptop, account)).json["keys"] as? [[String: Any]] ?? []
        #expect(read.count == 1)
        #expect(read.first?["sealed"] as? String == Data(key.sealed).base64EncodedString())
    }

    // MARK: relay

    /// An account founded by device 1, with device 2 (the laptop) approved, and a session for each.
    static func founderAndLaptop(_ hub: HubHarness) throws -> (
        founder: DeviceIdentity, laptop: DeviceIdentity, account: AccountID, token: String, laptopToken: String
    ) {
        let founder = Fixtures.identity(1)
        let laptop = Fixtures.identity(2)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        try hub.approve(laptop, by: founder, account, token: token)
        return (founder, laptop, account, token, try hub.session(laptop, account))
    }


    @Test(arguments: Backend.allCases) func framesArriveInOrderAndLeaveOnlyWhenAcknowledged(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let (_, laptop, account, token, laptopToken) = try Self.founderAndLaptop(hub)
        let relay = "/v1/accounts/\(account.hex)/relay"
        for frame: [UInt8] in [[1], [2, 2], [0, 3, 0]] {
            #expect(hub.call("POST", "\(relay)/\(laptop.deviceID.hex)", body: frame, token: token).status == 202)
        }
        let first = hub.call("GET", "\(relay)?wait=0", token: laptopToken)
        #expect(first.headers["Content-Type"] == "application/octet-stream")
        #expect(try RelayBody(first.body) == RelayBody(next: 3, frames: [(1, [1]), (2, [2, 2]), (3, [0, 3, 0])]))
        // A dropped answer loses nothing: the same cursor gets the same frames.
        #expect(try RelayBody(hub.call("GET", "\(relay)?after=0&wait=0", token: laptopToken).body).frames.count == 3)
        #expect(try RelayBody(hub.call("GET", "\(relay)?after=2&wait=0", token: laptopToken).body) == RelayBody(next: 3, frames: [(3, [0, 3, 0])]))
        // Frames up to the cursor are deleted.
        #expect(try RelayBody(hub.call("GET", "\(relay)?after=0&wait=0", token: laptopToken).body) == RelayBody(next: 3, frames: [(3, [0, 3, 0])]))
        #expect(try RelayBody(hub.call("GET", "\(relay)?after=3&wait=0", token: laptopToken).body) == RelayBody(next: 3, frames: []))
        // The sender's own mailbox is apart.
        #expect(try RelayBody(hub.call("GET", "\(relay)?wait=0", token: token).body).frames.isEmpty)
    }

    /// A cursor past every number the mailbox handed out (the hub's database put
    /// back from a backup while the device kept its cursor) deletes no frame unseen:
    /// the frames held, and every later one, are numbered past it.
    @Test(arguments: Backend.allCases) func aCursorPastTheMailboxLosesNoFrame(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let (_, laptop, account, token, laptopToken) = try Self.founderAndLaptop(hub)
        let relay = "/v1/accounts/\(account.hex)/relay"
        func send(_ frame: [UInt8]) -> String { hub.call("POST", "\(relay)/\(laptop.deviceID.hex)", body: frame, token: token).text }
        func read(after: Int64) throws -> RelayBody { try RelayBody(hub.call("GET", "\(relay)?after=\(after)&wait=0", token: laptopToken).body) }
        #expect(send([1]) == #"{"seq":1}"#)
        #expect(try read(after: 1) == RelayBody(next: 1, frames: []))
        // Two frames land; the laptop comes back with cursor 7, of a history the mailbox lost.
        #expect(send([2]) == #"{"seq":2}"#)
        #expect(send([3, 3]) == #"{"seq":3}"#)
        #expect(try read(after: 7) == RelayBody(next: 9, frames: [(8, [2]), (9, [3, 3])]))
        #expect(send([4]) == #"{"seq":10}"#)
        #expect(try read(after: 9) == RelayBody(next: 10, frames: [(10, [4])]))
        // An empty mailbox: the next frame is numbered past the cursor.
        #expect(try read(after: 10) == RelayBody(next: 10, frames: []))
        #expect(try read(after: 30) == RelayBody(next: 30, frames: []))
        #expect(send([5]) == #"{"seq":31}"#)
        #expect(try read(after: 30) == RelayBody(next: 31, frames: [(31, [5])]))
        // A cursor too far to number after is refused, and loses nothing.
        #expect(send([6]) == #"{"seq":32}"#)
        let refused = hub.call("GET", "\(relay)?after=\(Int64.max)&wait=0", token: laptopToken)
        #expect(refused.status == 400)
        #expect(refused.errorCode == "bad_request")
        #expect(try read(after: 31) == RelayBody(next: 32, frames: [(32, [6])]))
        #expect(try read(after: 32) == RelayBody(next: 32, frames: []))
        // Nor over an empty mailbox: a cursor there past the largest would leave no number
        // for the next frame, and every frame was refused as if the mailbox were full.
        for cursor in [Int64.max, Int64.max - 1, HubService.largestRelayCursor + 1] {
            let past = hub.call("GET", "\(relay)?after=\(cursor)&wait=0", token: laptopToken)
            #expect(past.status == 400 && past.errorCode == "bad_request", "\(cursor): \(past.text)")
            #expect(past.errorMessage?.contains("from 0 to \(HubService.largestRelayCursor)") == true, "\(past.text)")
        }
        #expect(send([7]) == #"{"seq":33}"#)
        #expect(try read(after: 32) == RelayBody(next: 33, frames: [(33, [7])]))
        #expect(try read(after: 33) == RelayBody(next: 33, frames: []))
        // The largest cursor is taken, and the frames after it are numbered past it.
        let largest = UInt64(HubService.largestRelayCursor)
        #expect(try read(after: Int64(largest)) == RelayBody(next: largest, frames: []))
        #expect(send([8]) == "{\"seq\":\(largest + 1)}")
        #expect(try read(after: Int64(largest)) == RelayBody(next: largest + 1, frames: [(largest + 1, [8])]))
    }

    @Test(arguments: Backend.allCases) func aParkedPollAnswersWhenAFrameLands(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        let relay = "/v1/accounts/\(account.hex)/relay"
        guard case .wait(let parked) = hub.service.handle(HubRequest(method: "GET", target: "\(relay)?wait=20", headers: ["authorization": "Bearer \(token)"])) else {
            Issue.record("an empty mailbox must park the poll")
            return
        }
        #expect(parked.waitSeconds == 20)
        #expect(parked.poll() == nil)
        #expect(try RelayBody(parked.expire().body) == RelayBody(next: 0, frames: []))
        let woken = WakeCounter()
        _ = hub.service.wakeups.subscribe(parked.key) { woken.add() }
        #expect(hub.call("POST", "\(relay)/\(founder.deviceID.hex)", body: [9], token: token).status == 202)
        // On SQLite the wake is immediate; on PostgreSQL it comes back through NOTIFY.
        let deadline = Date().addingTimeInterval(5)
        while woken.count == 0 && Date() < deadline { usleep(5_000) }
        #expect(woken.count == 1)
        #expect(try RelayBody(#require(parked.poll()).body) == RelayBody(next: 1, frames: [(1, [9])]))
    }

    @Test(arguments: Backend.allCases) func relayRefusalsNameTheirCause(_ backend: Backend) throws {
        let hub = try HubHarness(backend) { $0.maximumFrameBytes = 100; $0.maximumMailboxBytes = 250 }
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        let mailbox = "/v1/accounts/\(account.hex)/relay/\(founder.deviceID.hex)"
        let tooBig = hub.call("POST", mailbox, body: [UInt8](repeating: 1, count: 101), token: token)
        #expect(tooBig.status == 413)
        #expect(tooBig.errorCode == "too_large")
        #expect(hub.call("POST", mailbox, body: [], token: token).status == 400)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/relay/\(Fixtures.identity(7).deviceID.hex)", body: [1], token: token).status == 404)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/relay/nothex", body: [1], token: token).status == 404)
        #expect(hub.call("POST", mailbox, body: [UInt8](repeating: 1, count: 100), token: token).status == 202)
        #expect(hub.call("POST", mailbox, body: [UInt8](repeating: 1, count: 100), token: token).status == 202)
        let before = try hub.snapshot()
        let full = hub.call("POST", mailbox, body: [UInt8](repeating: 1, count: 51), token: token)
        #expect(full.status == 429)
        #expect(full.errorCode == "mailbox_full")
        #expect(full.headers["Retry-After"] == "5")
        #expect(try hub.snapshot() == before)
        // Reading frees the space.
        _ = hub.call("GET", "/v1/accounts/\(account.hex)/relay?after=2&wait=0", token: token)
        #expect(hub.call("POST", mailbox, body: [UInt8](repeating: 1, count: 51), token: token).status == 202)
        for query in ["after=-1", "after=x", "wait=61", "wait=-1"] {
            #expect(hub.call("GET", "/v1/accounts/\(account.hex)/relay?\(query)", token: token).status == 400, "\(query)")
        }
    }

    @Test(arguments: Backend.allCases) func aContactDeliversWithoutASessionButNotToTheRevoked(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        let delivered = hub.call("POST", "/v1/accounts/\(account.hex)/contact-relay/\(founder.deviceID.hex)", body: [5, 5])
        #expect(delivered.status == 202)
        #expect(try RelayBody(hub.call("GET", "/v1/accounts/\(account.hex)/relay?wait=0", token: token).body).frames.map(\.1) == [[5, 5]])
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/contact-relay/\(Fixtures.identity(4).deviceID.hex)", body: [1]).status == 404)
        #expect(hub.call("POST", "/v1/accounts/\(AccountID.generate().hex)/contact-relay/\(founder.deviceID.hex)", body: [1]).status == 404)
    }

    @Test(arguments: Backend.allCases) func aContactReadsTheRosterWithoutASession(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let laptop = Fixtures.identity(2)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        try hub.approve(laptop, by: founder, account, token: token)
        let answer = hub.call("GET", "/v1/accounts/\(account.hex)/contact-roster")
        #expect(answer.status == 200)
        let changes = try (answer.json["changes"] as? [String] ?? []).map { try RosterChange(decoding: [UInt8](Data(base64Encoded: $0) ?? Data())) }
        let roster = try Roster(account: account, changes: changes)
        #expect(roster.members == [founder.deviceID, laptop.deviceID])
        #expect(answer.body == hub.call("GET", "/v1/accounts/\(account.hex)/roster", token: token).body, "the same log members read")
        #expect(hub.call("GET", "/v1/accounts/\(AccountID.generate().hex)/contact-roster").status == 404)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/contact-roster", json: [:]).status == 405)
        #expect(hub.call("GET", "/v1/accounts/\(account.hex)/roster").status == 401, "the members' path still needs a token")
    }

    @Test func framesSurviveReopeningTheFile() throws {
        let directory = try TemporaryDirectory("stele-hub")
        let founder = Fixtures.identity(1)
        let account: AccountID
        let token: String
        do {
            let storage = try SQLiteHubStorage(path: directory.file("hub.sqlite"))
            let service = HubService(storage: storage)
            let invite = try service.createInvite()
            account = AccountID.generate()
            let genesis = Data(try Roster.founding(account: account, by: founder).encoded).base64EncodedString()
            #expect(service.handle(HubRequest(method: "POST", target: "/v1/accounts", body: Array(HubJSON.encode(["invite": invite, "genesis": genesis]).utf8))).response?.status == 201)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let proof = HubJSON.encode(["device": founder.deviceID.hex, "time": now, "signature": Data(try HubSessionProof.sign(by: founder, account: account, timeMilliseconds: now)).base64EncodedString()])
            token = try #require(service.handle(HubRequest(method: "POST", target: "/v1/accounts/\(account.hex)/sessions", body: Array(proof.utf8))).response?.json["token"] as? String)
            let sent = service.handle(HubRequest(method: "POST", target: "/v1/accounts/\(account.hex)/relay/\(founder.deviceID.hex)", headers: ["authorization": "Bearer \(token)"], body: [1, 2, 3]))
            #expect(sent.response?.status == 202)
            storage.close()
        }
        let reopened = HubService(storage: try SQLiteHubStorage(path: directory.file("hub.sqlite")))
        let read = reopened.handle(HubRequest(method: "GET", target: "/v1/accounts/\(account.hex)/relay?wait=0", headers: ["authorization": "Bearer \(token)"]))
        #expect(try RelayBody(#require(read.response).body).frames.map(\.1) == [[1, 2, 3]])
    }

    // MARK: anchor

    /// A founded account with a session on a hub, its anchor's path, and anchors sealed with one key.
    struct AnchorRig {
        let hub: HubHarness
        let account: AccountID
        let token: String
        let path: String
        let key = AccountKey.generate()

        init(_ backend: Backend) throws {
            hub = try HubHarness(backend)
            let founder = Fixtures.identity(1)
            account = try hub.found(founder)
            token = try hub.session(founder, account)
            path = "/v1/accounts/\(account.hex)/anchor"
        }

        /// A sealed anchor of `generation`, its round nonce drawn from seed `round` (the generation when nil).
        func anchor(_ generation: UInt64, round: UInt64? = nil, of owner: AccountID? = nil, snapshot: [UInt8] = [1, 2, 3]) throws -> [UInt8] {
            var generator = SeededGenerator(seed: round ?? generation)
            let header = AnchorHeader(
                account: owner ?? account, generation: generation, round: RoundNonce.generate(using: &generator),
                digest: try Hash32(bytes: [UInt8](repeating: UInt8(truncatingIfNeeded: generation), count: 32)))
            return AnchorFile.encode(Anchor(header: header, snapshot: snapshot), key: key)
        }
    }

    @Test(arguments: Backend.allCases) func theAnchorsGenerationNeverGoesDownAndAnEqualOneOverwrites(_ backend: Backend) throws {
        let rig = try AnchorRig(backend)
        let (hub, token, path, key) = (rig.hub, rig.token, rig.path, rig.key)
        let none = hub.call("GET", path, token: token)
        #expect(none.status == 404)
        let five = try rig.anchor(5)
        #expect(hub.call("PUT", path, body: five, token: token).status == 200)
        let read = hub.call("GET", path, token: token)
        #expect(read.status == 200)
        #expect(read.body == five)
        #expect(read.headers["Stele-Generation"] == "5")
        let before = try hub.snapshot()
        let lower = hub.call("PUT", path, body: try rig.anchor(4), token: token)
        #expect(lower.status == 409)
        #expect(lower.errorCode == "stale_generation")
        #expect(hub.call("PUT", path, body: Array(five.prefix(40)), token: token).status == 400)
        #expect(hub.call("PUT", path, body: try rig.anchor(6, of: AccountID.generate()), token: token).status == 400)
        #expect(hub.call("PUT", path, body: Array("STELEANC but not really an anchor file at all, just words to fill".utf8) + [UInt8](repeating: 0, count: 60), token: token).status == 400)
        #expect(try hub.snapshot() == before)
        let equal = try rig.anchor(5, snapshot: [9, 9])
        #expect(hub.call("PUT", path, body: equal, token: token).status == 200)
        #expect(hub.call("GET", path, token: token).body == equal)
        #expect(try AnchorFile.decode(hub.call("GET", path, token: token).body, key: key).snapshot == [9, 9])
    }

    /// Added: with `Stele-Anchor-Rule: one-round-per-generation` the hub takes no
    /// other round's anchor of the generation it holds (seed 370010: a slow write of
    /// an abandoned round landed over the anchor a later round had committed).
    @Test(arguments: Backend.allCases) func askedForOneRoundPerGenerationTheHubRefusesAnotherRoundsAnchorOfItsGeneration(_ backend: Backend) throws {
        let rig = try AnchorRig(backend)
        let (hub, token, path) = (rig.hub, rig.token, rig.path)
        let rule = AnchorRule.asked
        let committed = try rig.anchor(5, round: 1)
        #expect(hub.call("PUT", path, body: committed, token: token, headers: rule).status == 200)
        let before = try hub.snapshot()
        // Another round's anchor of generation 5: refused, and the stored one stays.
        let late = hub.call("PUT", path, body: try rig.anchor(5, round: 2), token: token, headers: rule)
        #expect(late.status == 409)
        #expect(late.errorCode == "generation_taken")
        #expect(try hub.snapshot() == before)
        #expect(hub.call("GET", path, token: token).body == committed)
        // A lower generation stays stale_generation, rule or not.
        #expect(hub.call("PUT", path, body: try rig.anchor(4, round: 3), token: token, headers: rule).errorCode == "stale_generation")
        // The same round again (a retried write) and a higher generation land.
        let retried = try rig.anchor(5, round: 1, snapshot: [2])
        #expect(hub.call("PUT", path, body: retried, token: token, headers: rule).status == 200)
        #expect(hub.call("GET", path, token: token).body == retried)
        let next = try rig.anchor(6, round: 4)
        #expect(hub.call("PUT", path, body: next, token: token, headers: rule).status == 200)
        // Without the header an equal generation overwrites, as HUB-API "Anchor" has it.
        let overwriting = try rig.anchor(6, round: 5)
        #expect(hub.call("PUT", path, body: overwriting, token: token).status == 200)
        #expect(hub.call("GET", path, token: token).body == overwriting)
        // A rule the hub does not know is a bad request that changes nothing.
        let unknown = hub.call("PUT", path, body: try rig.anchor(7, round: 6), token: token, headers: [AnchorRule.header: "last-writer-wins"])
        #expect(unknown.status == 400)
        #expect(unknown.errorCode == "bad_request")
        #expect(hub.call("GET", path, token: token).body == overwriting)
    }

    // MARK: status

    @Test(arguments: Backend.allCases) func statusShowsEachDevicesMailbox(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/relay/\(founder.deviceID.hex)", body: [1, 2], token: token).status == 202)
        let status = hub.call("GET", "/v1/accounts/\(account.hex)/status", token: token)
        #expect(status.status == 200)
        #expect(status.json["historyId"] as? Int == 0)
        #expect((status.json["epoch"] as? String)?.isEmpty == false)
        let devices = status.json["devices"] as? [[String: Any]] ?? []
        #expect(devices.count == 1)
        #expect(devices.first?["pendingFrames"] as? Int == 1)
        #expect(devices.first?["oldestPendingFrame"] as? Int64 == hub.now)
        #expect(devices.first?["lastSeen"] as? Int64 == hub.now)
    }
}

/// HUB-API's relay answer, decoded independently of the hub's encoder.
struct RelayBody: Equatable {
    let next: UInt64
    let frames: [(UInt64, [UInt8])]

    init(next: UInt64, frames: [(UInt64, [UInt8])]) {
        self.next = next
        self.frames = frames
    }

    init(_ body: [UInt8]) throws {
        func read(_ offset: inout Int, _ count: Int) throws -> UInt64 {
            guard offset + count <= body.count else { throw HarnessError("relay body cut at \(offset)") }
            defer { offset += count }
            return body[offset..<offset + count].reduce(0) { $0 << 8 | UInt64($1) }
        }
        var offset = 0
        next = try read(&offset, 8)
        var frames: [(UInt64, [UInt8])] = []
        while offset < body.count {
            let seq = try read(&offset, 8)
            let length = Int(try read(&offset, 4))
            guard offset + length <= body.count else { throw HarnessError("relay frame cut") }
            frames.append((seq, Array(body[offset..<offset + length])))
            offset += length
        }
        self.frames = frames
    }

    static func == (lhs: RelayBody, rhs: RelayBody) -> Bool {
        lhs.next == rhs.next && lhs.frames.count == rhs.frames.count && zip(lhs.frames, rhs.frames).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}

final class WakeCounter: Sendable {
    private let value = Mutex(0)
    func add() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
}
