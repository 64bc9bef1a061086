import Foundation
import Stele
import SteleHub
import SteleHubPostgres
import SteleSQL
import Testing
import TestSupport

/// Schema version 2 on both backends: a store written by version 1 opens with
/// everything in it, device names reach status, join requests age out, and the
/// sweep deletes what no request can use.
@Suite(.serialized) struct HubHousekeepingTests {
    // MARK: migrations from every earlier version

    /// Rows as schema version 1 wrote them: an account with a founder (session,
    /// parked frame, anchor) and a device waiting to join.
    static func writeVersionOne(_ storage: any HubStorage, account: AccountID, founder: DeviceIdentity, joiner: DeviceIdentity, now: Int64) throws {
        let roster = try Roster.founding(account: account, by: founder)
        let a = SQLValue.text(account.hex)
        try storage.transaction { sql in
            try sql.execute("INSERT INTO accounts (id, created_ms, roster_version) VALUES ($1, $2, 1)", [a, .integer(now)])
            try sql.execute("INSERT INTO roster_changes (account, idx, change) VALUES ($1, 0, $2)", [a, .blob(roster.changes[0].encoded)])
            try sql.execute(
                "INSERT INTO devices (account, device, signing_key, state, mailbox_next, mailbox_bytes) VALUES ($1, $2, $3, 'member', 1, 3)",
                [a, .text(founder.deviceID.hex), .blob(try founder.signingKey())])
            try sql.execute("INSERT INTO mailbox (account, device, seq, frame, created_ms) VALUES ($1, $2, 1, $3, $4)", [a, .text(founder.deviceID.hex), .blob([7, 8, 9]), .integer(now)])
            try sql.execute(
                "INSERT INTO join_requests (account, device, public_keys, name, created_ms) VALUES ($1, $2, $3, 'old laptop', $4)",
                [a, .text(joiner.deviceID.hex), .blob([1, 2]), .integer(now)])
        }
    }

    /// Opens a version-1 store with this build, then uses it through the service.
    static func checkUpgrade(_ storage: any HubStorage, account: AccountID, founder: DeviceIdentity, joiner: DeviceIdentity, clock: ManualClock) throws {
        let version = try storage.transaction { sql in try sql.query("SELECT max(version) FROM hub_schema", []) }
        #expect(version == [[.integer(Int64(HubSchema.latestVersion))]])
        let service = HubService(storage: storage, clock: { clock.milliseconds })
        func call(_ method: String, _ path: String, json: [String: Any]? = nil, token: String? = nil) -> HubResponse {
            let headers = token.map { ["authorization": "Bearer \($0)"] } ?? [:]
            return service.handle(HubRequest(method: method, target: path, headers: headers, body: json.map { Array(HubJSON.encode($0).utf8) } ?? [])).response
                ?? HubResponse(status: 0)
        }
        let time = clock.milliseconds
        let signature = try HubSessionProof.sign(by: founder, account: account, timeMilliseconds: time)
        let opened = call("POST", "/v1/accounts/\(account.hex)/sessions", json: ["device": founder.deviceID.hex, "time": time, "signature": Data(signature).base64EncodedString()])
        let token = try #require(opened.json["token"] as? String)
        // The frame version 1 accepted is still there.
        let relay = try RelayBody(call("GET", "/v1/accounts/\(account.hex)/relay?wait=0", token: token).body)
        #expect(relay == RelayBody(next: 1, frames: [(1, [7, 8, 9])]))
        // The join request version 1 stored is listed and its name follows the approval.
        let requests = call("GET", "/v1/accounts/\(account.hex)/join-requests", token: token).json["requests"] as? [[String: Any]] ?? []
        #expect(requests.map { $0["name"] as? String } == ["old laptop"])
        let approval = try RosterChange.approval(of: joiner.deviceID, signingKey: try joiner.signingKey(), by: founder, account: account, index: 1)
        #expect(call("POST", "/v1/accounts/\(account.hex)/roster", json: ["change": Data(approval.encoded).base64EncodedString()], token: token).status == 200)
        let devices = call("GET", "/v1/accounts/\(account.hex)/status", token: token).json["devices"] as? [[String: Any]] ?? []
        let names = Dictionary(uniqueKeysWithValues: devices.map { ($0["device"] as? String ?? "", $0["name"]) })
        #expect(names[founder.deviceID.hex] is NSNull, "a device version 1 stored has no name")
        #expect(names[joiner.deviceID.hex] as? String == "old laptop")
    }

    @Test func aVersionOneFileOpensWithEverythingInIt() throws {
        let directory = try TemporaryDirectory("stele-hub-migrate")
        let path = directory.file("hub.sqlite")
        let (account, founder, joiner, clock) = (AccountID.generate(), Fixtures.identity(1), Fixtures.identity(2), ManualClock())
        do {
            let old = try SQLiteHubStorage(path: path, migrations: Array(HubSchema.migrations.prefix(1)))
            try Self.writeVersionOne(old, account: account, founder: founder, joiner: joiner, now: clock.milliseconds)
            old.close()
        }
        let storage = try SQLiteHubStorage(path: path)
        defer { storage.close() }
        try Self.checkUpgrade(storage, account: account, founder: founder, joiner: joiner, clock: clock)
        // The file is at the newest version: opening it again runs nothing.
        storage.close()
        let again = try SQLiteHubStorage(path: path)
        again.close()
    }

    @Test func aVersionOneDatabaseOpensWithEverythingInIt() throws {
        let url = try PostgresTestCluster.url()
        let (account, founder, joiner, clock) = (AccountID.generate(), Fixtures.identity(1), Fixtures.identity(2), ManualClock())
        do {
            let old = try PostgresHubStorage(url: url, migrations: Array(HubSchema.migrations.prefix(1)))
            try Self.writeVersionOne(old, account: account, founder: founder, joiner: joiner, now: clock.milliseconds)
            old.close()
        }
        let storage = try PostgresHubStorage(url: url)
        defer { storage.close() }
        try Self.checkUpgrade(storage, account: account, founder: founder, joiner: joiner, clock: clock)
    }

    @Test(arguments: Backend.allCases) func aNewerStoreIsRefusedByAnOlderBuild(_ backend: Backend) throws {
        // A build that knows only version 1 meets a version-2 store: refused, untouched.
        switch backend {
        case .sqlite:
            let directory = try TemporaryDirectory("stele-hub-migrate")
            let path = directory.file("hub.sqlite")
            try SQLiteHubStorage(path: path).close()
            let error = #expect(throws: HubStorageError.self) { _ = try SQLiteHubStorage(path: path, migrations: Array(HubSchema.migrations.prefix(1))) }
            #expect(error?.code == .newerSchema)
            let storage = try SQLiteHubStorage(path: path)
            defer { storage.close() }
            #expect(try storage.transaction { sql in try sql.query("SELECT max(version) FROM hub_schema", []) } == [[.integer(Int64(HubSchema.latestVersion))]])
        case .postgresql:
            let url = try PostgresTestCluster.url()
            try PostgresHubStorage(url: url).close()
            let error = #expect(throws: HubStorageError.self) { _ = try PostgresHubStorage(url: url, migrations: Array(HubSchema.migrations.prefix(1))) }
            #expect(error?.code == .newerSchema)
        }
    }

    // MARK: names, aging and the sweep

    @Test(arguments: Backend.allCases) func devicesKeepTheNamesTheyFoundedOrAskedWith(_ backend: Backend) throws {
        let hub = try HubHarness(backend)
        let founder = Fixtures.identity(1)
        let laptop = Fixtures.identity(2)
        let account = AccountID.generate()
        let genesis = Data(try Roster.founding(account: account, by: founder).encoded).base64EncodedString()
        let tooLong = String(repeating: "n", count: 201)
        let before = try hub.snapshot()
        let refused = hub.call("POST", "/v1/accounts", json: ["genesis": genesis, "invite": try hub.service.createInvite(), "name": tooLong])
        #expect(refused.status == 400)
        #expect(hub.call("POST", "/v1/accounts", json: ["genesis": genesis, "invite": "x", "name": 5]).status == 400)
        #expect(try hub.snapshot().filter { !$0.hasPrefix("invites") } == before)
        #expect(hub.call("POST", "/v1/accounts", json: ["genesis": genesis, "invite": try hub.service.createInvite(), "name": "phone"]).status == 201)
        let token = try hub.session(founder, account)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/join-requests", json: ["device": laptop.deviceID.hex, "publicKeys": "AQI=", "name": tooLong]).status == 400)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/join-requests", json: ["device": laptop.deviceID.hex, "publicKeys": "AQI=", "name": "laptop"]).status == 202)
        try hub.approve(laptop, by: founder, account, token: token)
        let devices = hub.call("GET", "/v1/accounts/\(account.hex)/status", token: token).json["devices"] as? [[String: Any]] ?? []
        let names = Dictionary(uniqueKeysWithValues: devices.map { ($0["device"] as? String ?? "", $0["name"] as? String) })
        #expect(names == [founder.deviceID.hex: "phone", laptop.deviceID.hex: "laptop"])
    }

    @Test(arguments: Backend.allCases) func joinRequestsAgeOutAndMakeRoom(_ backend: Backend) throws {
        let hub = try HubHarness(backend) {
            $0.maximumJoinRequests = 1
            $0.joinRequestLifetimeSeconds = 3_600
            $0.sessionLifetimeSeconds = 86_400
        }
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let token = try hub.session(founder, account)
        let path = "/v1/accounts/\(account.hex)/join-requests"
        func ask(_ seed: UInt64) -> Int {
            hub.call("POST", path, json: ["device": Fixtures.identity(seed).deviceID.hex, "publicKeys": "AQI=", "name": "device \(seed)"]).status
        }
        func listed() throws -> [String] {
            let answer = hub.call("GET", path, token: token)
            guard answer.status == 200, let requests = answer.json["requests"] as? [[String: Any]] else { throw HarnessError("listing failed: \(answer.status) \(answer.text)") }
            return requests.compactMap { $0["device"] as? String }
        }
        #expect(ask(2) == 202)
        #expect(ask(3) == 429)
        hub.advance(seconds: 3_599)
        #expect(try listed() == [Fixtures.identity(2).deviceID.hex], "a request one second short of its lifetime is still listed")
        #expect(ask(3) == 429)
        hub.advance(seconds: 1)
        #expect(try listed() == [], "a request at its lifetime is no longer listed")
        #expect(ask(3) == 202, "an aged request makes room for a new one")
        #expect(try listed() == [Fixtures.identity(3).deviceID.hex])
    }

    @Test(arguments: Backend.allCases) func theSweepDeletesExpiredSessionsAndAgedRequestsOnly(_ backend: Backend) throws {
        let hub = try HubHarness(backend) {
            $0.sessionLifetimeSeconds = 100
            $0.joinRequestLifetimeSeconds = 200
        }
        let founder = Fixtures.identity(1)
        let account = try hub.found(founder)
        let old = try hub.session(founder, account)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/join-requests", json: ["device": Fixtures.identity(2).deviceID.hex, "publicKeys": "AQI=", "name": "a"]).status == 202)
        hub.advance(seconds: 60)
        let fresh = try hub.session(founder, account)
        #expect(hub.call("POST", "/v1/accounts/\(account.hex)/join-requests", json: ["device": Fixtures.identity(3).deviceID.hex, "publicKeys": "AQI=", "name": "b"]).status == 202)
        let none = try hub.service.sweep()
        #expect(none.sessions == 0 && none.joinRequests == 0)
        hub.advance(seconds: 40)  // the first session is at its expiry
        let first = try hub.service.sweep()
        #expect(first.sessions == 1 && first.joinRequests == 0)
        #expect(hub.call("GET", "/v1/accounts/\(account.hex)/status", token: old).status == 401)
        #expect(hub.call("GET", "/v1/accounts/\(account.hex)/status", token: fresh).status == 200)
        hub.advance(seconds: 100)  // the first request is at its lifetime
        let second = try hub.service.sweep()
        #expect(second.sessions == 1 && second.joinRequests == 1)
        let left = try hub.storage.transaction { sql in try sql.query("SELECT device FROM join_requests", []) }
        #expect(left == [[.text(Fixtures.identity(3).deviceID.hex)]])
    }
}
