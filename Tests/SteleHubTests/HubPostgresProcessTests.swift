import Foundation
import Stele
import SteleHub
import Synchronization
import Testing
import TestSupport

/// Two `stele-hub` processes on one PostgreSQL database serve one account
/// together: a poll on one wakes for a frame posted through the other, and
/// roster appends raced through both never corrupt the log.
@Suite(.serialized) struct HubPostgresProcessTests {
    /// A hub process on PostgreSQL whose database is put back from a copy
    /// (`CREATE DATABASE … TEMPLATE`) while mirror clients keep working: the
    /// operator runs `stele-hub restored`, and the clients push again the delete
    /// and the write the copy lacks; a hub later started on a database that is
    /// another cluster's tells the change itself (another system identifier).
    @Test func aDatabasePutBackFromACopyWhileMirrorClientsRun() throws {
        let url = try PostgresTestCluster.url()
        let name = String(url.split(separator: "/").last ?? "")
        let maintenance = PostgresTestCluster.maintenanceURL(url)
        var hub = try HubProcessTests.HubProcess(["--postgres", url, "--open"])
        let founder = Fixtures.identity(1)
        let account = AccountID.generate()
        try HubDirectory(client: HubClient(hub: hub.url, account: account, identity: founder)).found(try Roster.founding(account: account, by: founder))
        let folder = try TemporaryDirectory("stele-hub-pg-restore")
        var configuration = MirrorStore.Configuration()
        configuration.initialBackoffMilliseconds = 20
        let phone = try MirrorStore(path: folder.file("phone.mirror"), configuration: configuration)
        let laptop = try MirrorStore(path: folder.file("laptop.mirror"), configuration: configuration)
        @discardableResult func sync(_ store: MirrorStore) throws -> MirrorDriver.Report {
            try MirrorDriver(sync: MirrorSync(store: store), transport: HubMirrorTransport(client: HubClient(hub: hub.url, account: account, identity: founder))).syncUntilQuiet()
        }
        try phone.put(kind: "note", id: "kept", payload: Array("kept".utf8))
        try phone.put(kind: "note", id: "doomed", payload: Array("doomed".utf8))
        try sync(phone)
        try sync(laptop)
        #expect(hub.signal(SIGTERM) == 0)
        try PostgresTestCluster.psql(maintenance, "CREATE DATABASE \(name)_copy TEMPLATE \(name)")
        hub = try HubProcessTests.HubProcess(["--postgres", url, "--open"])
        try phone.delete(kind: "note", id: "doomed")
        try phone.put(kind: "note", id: "late", payload: Array("late".utf8))
        try sync(phone)
        try sync(laptop)
        #expect(try laptop.value(kind: "note", id: "doomed") == nil)

        #expect(hub.signal(SIGKILL) == SIGKILL)
        try PostgresTestCluster.psql(maintenance, "DROP DATABASE \(name) WITH (FORCE)")
        try PostgresTestCluster.psql(maintenance, "ALTER DATABASE \(name)_copy RENAME TO \(name)")
        let restored = try HubProcessTests.run(["restored", "--postgres", url])
        #expect(restored.status == 0, "\(restored.error)")
        hub = try HubProcessTests.HubProcess(["--postgres", url, "--open"])
        let fresh = HubClient(hub: hub.url, account: account, identity: founder)
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/note/doomed").status == 200, "the copy has the deleted note back")
        try sync(laptop)
        try sync(phone)
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/note/doomed").status == 404, "the delete the copy lost is pushed again")
        #expect(try fresh.send("GET", "\(fresh.accountPath)/records/note/late").status == 200, "the write the copy lost is pushed again")
        for store in [phone, laptop] { #expect(try store.records(kind: "note").map(\.id) == ["kept", "late"]) }
        #expect(hub.signal(SIGTERM) == 0)

        // The same database moved into another cluster (a dump restored elsewhere): told without `restored`.
        let other = try PostgresTestCluster.start()
        defer { PostgresTestCluster.remove(other) }
        let moved = "postgresql://postgres@127.0.0.1:\(other.port)/postgres"
        let dump = Process()
        dump.executableURL = URL(fileURLWithPath: "/bin/sh")
        dump.arguments = ["-c", "pg_dump --no-owner '\(url)' | psql -q -v ON_ERROR_STOP=1 '\(moved)' >/dev/null"]
        try dump.run()
        dump.waitUntilExit()
        #expect(dump.terminationStatus == 0)
        hub = try HubProcessTests.HubProcess(["--postgres", moved, "--open"])
        let deadline = Date().addingTimeInterval(5)
        while !hub.log.contains("rewound"), Date() < deadline { usleep(20_000) }
        #expect(hub.log.contains("the record history was rewound: the database is another physical copy"), "\(hub.log)")
        #expect(hub.signal(SIGTERM) == 0)
    }

    @Test func aPollOnOneHubWakesForAFramePostedThroughTheOther() throws {
        let url = try PostgresTestCluster.url()
        let first = try HubProcessTests.HubProcess(["--postgres", url, "--open"])
        let second = try HubProcessTests.HubProcess(["--postgres", url, "--open"])
        let founder = Fixtures.identity(1)
        let account = AccountID.generate()
        try HubDirectory(client: HubClient(hub: first.url, account: account, identity: founder)).found(try Roster.founding(account: account, by: founder))
        let poster = HubClient(hub: first.url, account: account, identity: founder)
        let poller = HubClient(hub: second.url, account: account, identity: founder, timeoutSeconds: 40)
        #expect(try poller.send("GET", "\(poller.accountPath)/relay?wait=0").status == 200)
        let answer = Mutex<HubClient.Answer?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            // Sent outside the lock: the test reads `answer` while the poll is parked.
            let polled = try? poller.send("GET", "\(poller.accountPath)/relay?wait=30")
            answer.withLock { $0 = polled }
            done.signal()
        }.start()
        usleep(500_000)
        #expect(answer.withLock { $0 } == nil, "the poll must park while the mailbox is empty")
        #expect(try poster.send("POST", "\(poster.accountPath)/relay/\(founder.deviceID.hex)", body: [7, 7]).status == 202)
        #expect(done.wait(timeout: .now() + 10) == .success)
        let body = try #require(answer.withLock { $0 })
        #expect(body.status == 200)
        #expect(try RelayBody(body.body).frames.map(\.1) == [[7, 7]])
        #expect(second.log.contains("path=/v1/accounts/{a}/relay status=200"))
        // Both processes live to here (a process is killed when its handle goes).
        #expect(first.signal(SIGTERM) == 0)
        #expect(second.signal(SIGTERM) == 0)
    }

    @Test func rosterAppendsRacedThroughTwoHubsKeepOneValidLog() throws {
        let url = try PostgresTestCluster.url()
        let hubs = [try HubProcessTests.HubProcess(["--postgres", url, "--open"]), try HubProcessTests.HubProcess(["--postgres", url, "--open"])]
        let founder = Fixtures.identity(1)
        let account = AccountID.generate()
        try HubDirectory(client: HubClient(hub: hubs[0].url, account: account, identity: founder)).found(try Roster.founding(account: account, by: founder))
        let clients = hubs.map { HubClient(hub: $0.url, account: account, identity: founder) }
        // Each round, both hubs get an approval signed for the same position at the same moment.
        let outcomes = Mutex<[Int]>([])
        for round in 0..<12 {
            let roster = try HubDirectory(client: clients[0]).roster(of: account)
            let changes = try (0..<2).map { side -> RosterChange in
                let joiner = Fixtures.identity(UInt64(100 + round * 2 + side))
                return try RosterChange.approval(of: joiner.deviceID, signingKey: try joiner.signingKey(), by: founder, account: account, index: roster.version)
            }
            DispatchQueue.concurrentPerform(iterations: 2) { side in
                let status = (try? clients[side].send("POST", "\(clients[side].accountPath)/roster", json: ["change": Data(changes[side].encoded).base64EncodedString()]))?.status ?? -1
                outcomes.withLock { $0.append(status) }
            }
        }
        let statuses = outcomes.withLock { $0 }
        #expect(statuses.filter { $0 == 200 }.count == 12, "exactly one approval per position lands: \(statuses)")
        #expect(statuses.filter { $0 == 409 }.count == 12, "the other is a conflict: \(statuses)")
        for client in clients {
            let roster = try HubDirectory(client: client).roster(of: account)
            #expect(roster.version == 13)
            #expect(roster.members.count == 13)
        }
        for hub in hubs { #expect(hub.signal(SIGTERM) == 0) }
    }

    @Test func concurrentFramesThroughTwoHubsGetDistinctSequenceNumbers() throws {
        let url = try PostgresTestCluster.url()
        let hubs = [try HubProcessTests.HubProcess(["--postgres", url, "--open"]), try HubProcessTests.HubProcess(["--postgres", url, "--open"])]
        let founder = Fixtures.identity(1)
        let account = AccountID.generate()
        try HubDirectory(client: HubClient(hub: hubs[0].url, account: account, identity: founder)).found(try Roster.founding(account: account, by: founder))
        let clients = hubs.map { HubClient(hub: $0.url, account: account, identity: founder) }
        DispatchQueue.concurrentPerform(iterations: 40) { index in
            let client = clients[index % 2]
            _ = try? client.send("POST", "\(client.accountPath)/relay/\(founder.deviceID.hex)", body: [UInt8(index)])
        }
        let read = try clients[0].send("GET", "\(clients[0].accountPath)/relay?wait=0")
        let frames = try RelayBody(read.body).frames
        #expect(frames.count == 40)
        #expect(Set(frames.map(\.0)).count == 40)
        #expect(Set(frames.map(\.1)) == Set((0..<40).map { [UInt8($0)] }))
        for hub in hubs { #expect(hub.signal(SIGTERM) == 0) }
    }

    /// The change feed has no gap (HUB-API "changes"): pushers on two hub processes
    /// race one pager. Each record is written once, so a change the pager skipped
    /// (one that committed after the pager read past its position) is a record it
    /// never sees.
    @Test func aPagerNeverSkipsAChangeWhilePushersRaceThroughTwoHubs() throws {
        let url = try PostgresTestCluster.url()
        let hubs = [try HubProcessTests.HubProcess(["--postgres", url, "--open"]), try HubProcessTests.HubProcess(["--postgres", url, "--open"])]
        let founder = Fixtures.identity(1)
        let account = AccountID.generate()
        try HubDirectory(client: HubClient(hub: hubs[0].url, account: account, identity: founder)).found(try Roster.founding(account: account, by: founder))
        let clients = hubs.map { HubClient(hub: $0.url, account: account, identity: founder) }
        let pushers = 4
        let pushesEach = 30
        let recordsPerPush = 5
        let finished = Atomic<Int>(0)
        let seen = Mutex<(ids: Set<String>, seqs: [Int64], pages: Int)>(([], [], 0))
        let pagerDone = DispatchSemaphore(value: 0)
        Thread {
            var cursor: Int64 = 0
            while true {
                let pushersDone = finished.load(ordering: .acquiring) == pushers
                guard let page = try? clients[1].send("GET", "\(clients[1].accountPath)/records/changes?since=\(cursor)&limit=7"), page.status == 200 else { break }
                let changes = page.json["changes"] as? [[String: Any]] ?? []
                seen.withLock { state in
                    state.ids.formUnion(changes.compactMap { $0["id"] as? String })
                    state.seqs += changes.compactMap { ($0["seq"] as? NSNumber)?.int64Value }
                    state.pages += 1
                }
                cursor = (page.json["next"] as? NSNumber)?.int64Value ?? cursor
                // Done once the pushers were done before this read and it reached the end.
                if pushersDone && page.json["more"] as? Bool == false { break }
            }
            pagerDone.signal()
        }.start()
        DispatchQueue.concurrentPerform(iterations: pushers) { pusher in
            let client = clients[pusher % 2]
            for push in 0..<pushesEach {
                let mutations: [[String: Any]] = (0..<recordsPerPush).map { index in
                    let id = "p\(pusher)-\(push)-\(index)"
                    return ["mutation": id, "kind": "note", "id": id, "op": "put", "payload": "AA==", "modifiedAt": 1]
                }
                _ = try? client.send("POST", "\(client.accountPath)/records/push", json: ["mutations": mutations])
            }
            finished.add(1, ordering: .releasing)
        }
        #expect(pagerDone.wait(timeout: .now() + 120) == .success)
        let result = seen.withLock { $0 }
        #expect(result.ids.count == pushers * pushesEach * recordsPerPush, "the pager missed \(pushers * pushesEach * recordsPerPush - result.ids.count) changes")
        #expect(result.seqs == result.seqs.sorted() && Set(result.seqs).count == result.seqs.count, "positions come once each, in order")
        #expect(result.pages > 10, "the pager read while the pushers pushed")
        for hub in hubs { #expect(hub.signal(SIGTERM) == 0) }
    }
}
