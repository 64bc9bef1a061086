import Foundation
import Stele
import SteleHub
import SteleHubPostgres
import SteleSQL
import Testing
import TestSupport

/// Accounts sharded over two PostgreSQL clusters (`stele-hub serve --postgres A
/// --postgres B`): each account lives whole in the shard its id picks, every
/// request about it runs there, invites live in the first, and a hub started
/// with the shards in another order refuses to start.
@Suite(.serialized) struct ShardedHubTests {
    /// The first shard's rows of `table` for `account` (and the second's).
    static func count(_ table: String, _ account: String, in storage: any HubStorage) throws -> Int64 {
        try storage.transaction { sql in
            let column = table == "accounts" ? "id" : "account"
            if case .integer(let count)? = try sql.query("SELECT CAST(count(*) AS BIGINT) FROM \(table) WHERE \(column) = $1", [.text(account)]).first?.first { return count }
            return -1
        }
    }

    @Test func accountsLiveWholeInTheShardTheirIDPicks() throws {
        let second = try PostgresTestCluster.start()
        defer { PostgresTestCluster.remove(second) }
        let urls = [try PostgresTestCluster.url(), "postgresql://postgres@127.0.0.1:\(second.port)/postgres"]
        let shards: [any HubStorage] = try urls.map { try PostgresHubStorage(url: $0) }
        let storage = try ShardedHubStorage(shards: shards)
        let clock = ManualClock()
        let service = HubService(storage: storage, clock: { clock.milliseconds })
        func call(_ method: String, _ target: String, json: [String: Any], token: String? = nil) -> HubResponse {
            var headers: [String: String] = [:]
            if let token { headers["authorization"] = "Bearer \(token)" }
            switch service.handle(HubRequest(method: method, target: target, headers: headers, body: Array(HubJSON.encode(json).utf8))) {
            case .respond(let response): return response
            case .wait(let wait): return wait.poll() ?? wait.expire()
            }
        }

        // Accounts until each shard holds two; every one made with an invite from the first shard.
        var placed: [[AccountID]] = [[], []]
        var seed: UInt64 = 10
        while placed.contains(where: { $0.count < 2 }) {
            seed += 1
            let founder = Fixtures.identity(seed)
            let account = AccountID.generate()
            let index = ShardedHubStorage.index(of: account.hex, among: 2)
            guard placed[index].count < 2 else { continue }
            let invite = try service.createInvite()
            let roster = try Roster.founding(account: account, by: founder)
            let created = call("POST", "/v1/accounts", json: ["invite": invite, "genesis": Data(roster.encoded).base64EncodedString()])
            #expect(created.status == 201, "\(String(decoding: created.body, as: UTF8.self))")
            // The invite is spent: a second account cannot use it.
            let again = try Roster.founding(account: AccountID.generate(), by: founder)
            #expect(call("POST", "/v1/accounts", json: ["invite": invite, "genesis": Data(again.encoded).base64EncodedString()]).status == 403)
            placed[index].append(account)

            let time = clock.milliseconds
            let signature = try HubSessionProof.sign(by: founder, account: account, timeMilliseconds: time)
            let session = call("POST", "/v1/accounts/\(account.hex)/sessions", json: ["device": founder.deviceID.hex, "time": time, "signature": Data(signature).base64EncodedString()])
            let answer = (try? JSONSerialization.jsonObject(with: Data(session.body))) as? [String: Any]
            let token = try #require(answer?["token"] as? String)
            let pushed = call(
                "POST", "/v1/accounts/\(account.hex)/records/push",
                json: ["mutations": [["mutation": "m1", "kind": "note", "id": "a", "op": "put", "payload": "YQ==", "modifiedAt": 1], ["mutation": "m2", "kind": "note", "id": "a", "op": "delete", "modifiedAt": 2]]],
                token: token)
            #expect(pushed.status == 200)
            #expect(call("GET", "/v1/accounts/\(account.hex)/records/changes?since=2", json: [:], token: token).status == 200)
            #expect(try service.compact(only: account).collected == 1)
            #expect(call("GET", "/v1/accounts/\(account.hex)/records/changes?since=0", json: [:], token: token).status == 410)
            #expect(call("GET", "/v1/accounts/\(account.hex)/status", json: [:], token: token).status == 200)
        }
        for (index, accounts) in placed.enumerated() {
            for account in accounts {
                for table in ["accounts", "devices", "sessions", "roster_changes", "mutations"] {
                    #expect(try Self.count(table, account.hex, in: shards[index]) > 0, "\(table) of \(account.hex.prefix(8)) is in shard \(index + 1)")
                    #expect(try Self.count(table, account.hex, in: shards[1 - index]) == 0, "\(table) of \(account.hex.prefix(8)) is not in shard \(2 - index)")
                }
            }
        }
        // Invites live in the first shard only.
        let invites = try shards.map { shard in
            try shard.transaction { sql -> Int64 in
                if case .integer(let count)? = try sql.query("SELECT CAST(count(*) AS BIGINT) FROM invites", []).first?.first { return count }
                return -1
            }
        }
        #expect(invites == [4, 0])
        #expect(try service.sweep().sessions == 0)
        storage.close()

        // The same databases in another order, or one of them alone, are refused.
        let reversed = try urls.reversed().map { try PostgresHubStorage(url: $0) as any HubStorage }
        #expect {
            _ = try ShardedHubStorage(shards: reversed)
        } throws: { ($0 as? HubStorageError)?.code == .shardLayout }
        for shard in reversed { shard.close() }
        let alone = try PostgresHubStorage(url: urls[1])
        defer { alone.close() }
        #expect {
            _ = try ShardedHubStorage(shards: [alone])
        } throws: { ($0 as? HubStorageError)?.code == .shardLayout }
    }

    @Test func anAccountThatExistsGivesItsInviteBack() throws {
        let second = try PostgresTestCluster.start()
        defer { PostgresTestCluster.remove(second) }
        let storage = try ShardedHubStorage(shards: [try PostgresHubStorage(url: try PostgresTestCluster.url()), try PostgresHubStorage(url: "postgresql://postgres@127.0.0.1:\(second.port)/postgres")])
        defer { storage.close() }
        let service = HubService(storage: storage)
        // An account in the second shard, made twice with one invite each time.
        var account = AccountID.generate()
        while ShardedHubStorage.index(of: account.hex, among: 2) != 1 { account = AccountID.generate() }
        let roster = try Roster.founding(account: account, by: Fixtures.identity(1))
        func create(_ invite: String) -> Int {
            let body = Array(HubJSON.encode(["invite": invite, "genesis": Data(roster.encoded).base64EncodedString()]).utf8)
            return service.handle(HubRequest(method: "POST", target: "/v1/accounts", headers: [:], body: body)).response?.status ?? 0
        }
        #expect(create(try service.createInvite()) == 201)
        let spare = try service.createInvite()
        #expect(create(spare) == 409)
        // The refused creation spent nothing: the invite still makes another account.
        let other = try Roster.founding(account: AccountID.generate(), by: Fixtures.identity(2))
        let body = Array(HubJSON.encode(["invite": spare, "genesis": Data(other.encoded).base64EncodedString()]).utf8)
        #expect(service.handle(HubRequest(method: "POST", target: "/v1/accounts", headers: [:], body: body)).response?.status == 201)
    }

    @Test func enginesThatLackWhatTheHubNeedsAreNamed() {
        let cockroach = PostgresHubStorage.engineProblem(version: "CockroachDB CCL v23.1.11 (x86_64-pc-linux-gnu, built 2023/09/27 01:53:43, go1.19.10)")
        #expect(cockroach?.contains("CockroachDB") == true)
        #expect(cockroach?.contains("LISTEN/NOTIFY") == true)
        #expect(cockroach?.contains("--postgres more than once") == true)
        let yugabyte = PostgresHubStorage.engineProblem(version: "PostgreSQL 11.2-YB-2.18.1.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 15.0.3, 64-bit")
        #expect(yugabyte?.contains("YugabyteDB") == true)
        #expect(PostgresHubStorage.engineProblem(version: "Redshift 1.0.52931")?.contains("not PostgreSQL") == true)
        #expect(PostgresHubStorage.engineProblem(version: "PostgreSQL 15.8 (Debian 15.8-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit") == nil)
        #expect(PostgresHubStorage.engineProblem(version: "PostgreSQL 16.4 on aarch64-unknown-linux-gnu") == nil)
    }
}
