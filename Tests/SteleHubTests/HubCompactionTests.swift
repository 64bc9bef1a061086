import Foundation
import Stele
import SteleHub
import SteleSQL
import Testing
import TestSupport

/// Tombstone compaction (HubService+Compaction, HUB-API `410 history_compacted`
/// and status) on both backends: a tombstone goes only once every member device
/// has pulled past it, a device that joins holds back only what follows its join,
/// a revoked one holds nothing, a cursor below the horizon is refused, and the
/// status names who holds the horizon and every stuck condition.
@Suite(.serialized) struct HubCompactionTests {
    typealias Account = HubRecordsTests.Account

    /// Asks the feed after `since` with `token`, paging to the end; returns the status of the first answer.
    @discardableResult
    static func pull(_ account: Account, since: Int64, token: String) -> (status: Int, json: [String: Any]) {
        var cursor = since
        while true {
            let page = account.hub.call("GET", "\(account.base)/records/changes?since=\(cursor)", token: token)
            guard page.status == 200 else { return (page.status, page.json) }
            let next = (page.json["next"] as? NSNumber)?.int64Value ?? cursor
            if next == cursor { return (200, page.json) }
            cursor = next
        }
    }

    /// The first column of the first row, as an integer (-1 when it is not one).
    static func integer(_ rows: [[SQLValue]]) -> Int64 {
        if case .integer(let value)? = rows.first?.first { return value }
        return -1
    }

    static func status(_ account: Account) -> [String: Any] {
        account.hub.call("GET", "\(account.base)/status", token: account.token).json
    }

    static func holder(_ account: Account) -> String? {
        (status(account)["horizonHeldBy"] as? [String: Any])?["device"] as? String
    }

    static func warnings(_ account: Account) -> [String] {
        status(account)["warnings"] as? [String] ?? []
    }

    @Test(arguments: Backend.allCases) func tombstonesGoOnceEveryMemberDeviceHasPulledPastThem(_ backend: Backend) throws {
        let account = try Account(backend)
        let laptop = Fixtures.identity(2)
        try account.hub.approve(laptop, by: Fixtures.identity(1), account.account, token: account.token)
        let laptopToken = try account.hub.session(laptop, account.account)
        #expect(account.statuses([HubRecordsTests.put("a", "1", at: 10), HubRecordsTests.put("b", "2", at: 10), HubRecordsTests.put("c", "3", at: 10)]) == ["applied", "applied", "applied"])
        #expect(account.statuses([HubRecordsTests.delete("a", at: 20), HubRecordsTests.delete("b", at: 20)]) == ["applied", "applied"])

        // The founder has pulled to the end; the laptop has not pulled at all.
        #expect(Self.pull(account, since: 0, token: account.token).status == 200)
        #expect(try account.hub.service.compact() == .init(accounts: 0, collected: 0))
        #expect(Self.holder(account) == laptop.deviceID.hex)
        let waiting = try #require(Self.status(account)["horizonHeldBy"] as? [String: Any])
        #expect((waiting["tombstonesWaiting"] as? NSNumber)?.intValue == 2)
        #expect(Self.warnings(account).contains { $0.hasPrefix("compaction blocked: 2 tombstones wait for device \(laptop.deviceID.hex.prefix(16))") })
        #expect((Self.status(account)["tombstones"] as? NSNumber)?.intValue == 2)

        // The laptop pulls: both tombstones go, and its old cursor is refused from then on.
        #expect(Self.pull(account, since: 0, token: laptopToken).status == 200)
        #expect(try account.hub.service.compact() == .init(accounts: 1, collected: 2))
        let after = Self.status(account)
        #expect((after["tombstones"] as? NSNumber)?.intValue == 0)
        #expect((after["tombstonesCollected"] as? NSNumber)?.intValue == 2)
        #expect((after["horizon"] as? NSNumber)?.int64Value == 5)
        #expect(!Self.warnings(account).contains { $0.hasPrefix("compaction blocked") })
        let refused = Self.pull(account, since: 3, token: laptopToken)
        #expect(refused.status == 410)
        #expect((refused.json["error"] as? [String: Any])?["code"] as? String == "history_compacted")
        #expect((refused.json["horizon"] as? NSNumber)?.int64Value == 5)
        #expect((refused.json["historyId"] as? NSNumber)?.int64Value == 5)
        #expect((refused.json["commonHistoryId"] as? NSNumber)?.int64Value == 5)
        #expect(refused.json["epoch"] as? String != nil)
        #expect(Self.pull(account, since: 5, token: laptopToken).status == 200, "a cursor at the horizon misses nothing")
        #expect(account.payload("note", "c") == "3", "a live record is never collected")
        #expect(try account.hub.service.compact() == .init(accounts: 0, collected: 0), "nothing new to collect")

        // A device that joins now holds back what follows its join, not what came before.
        let tablet = Fixtures.identity(3)
        try account.hub.approve(tablet, by: Fixtures.identity(1), account.account, token: account.token)
        let tabletToken = try account.hub.session(tablet, account.account)
        #expect(account.statuses([HubRecordsTests.delete("c", at: 30)]) == ["applied"])
        Self.pull(account, since: 5, token: account.token)
        Self.pull(account, since: 5, token: laptopToken)
        #expect(try account.hub.service.compact().collected == 0)
        #expect(Self.holder(account) == tablet.deviceID.hex)
        #expect(Self.pull(account, since: 0, token: tabletToken).status == 410, "a newcomer replays")
        #expect(Self.pull(account, since: 6, token: tabletToken).status == 200)
        #expect(try account.hub.service.compact().collected == 1)
    }

    @Test(arguments: Backend.allCases) func aRevokedDeviceHoldsNothingBack(_ backend: Backend) throws {
        let account = try Account(backend)
        let lost = Fixtures.identity(4)
        try account.hub.approve(lost, by: Fixtures.identity(1), account.account, token: account.token)
        #expect(account.statuses([HubRecordsTests.put("a", "1", at: 10), HubRecordsTests.delete("a", at: 20)]) == ["applied", "applied"])
        Self.pull(account, since: 0, token: account.token)
        #expect(try account.hub.service.compact().collected == 0)
        #expect(Self.holder(account) == lost.deviceID.hex)
        let roster = try account.hub.roster(account.account, token: account.token)
        let revocation = try RosterChange.revocation(of: lost.deviceID, by: Fixtures.identity(1), account: account.account, index: roster.version)
        let revoked = account.hub.call("POST", "\(account.base)/roster", json: ["change": Data(revocation.encoded).base64EncodedString()], token: account.token)
        #expect(revoked.status == 200)
        #expect(try account.hub.service.compact() == .init(accounts: 1, collected: 1))
        #expect(Self.holder(account) == Fixtures.identity(1).deviceID.hex)
    }

    @Test(arguments: Backend.allCases) func aLargeBacklogIsCollectedInBatches(_ backend: Backend) throws {
        let account = try Account(backend)
        let puts = (0..<120).map { HubRecordsTests.put("n\($0)", "v", at: 10) }
        let deletes = (0..<120).map { HubRecordsTests.delete("n\($0)", at: 20) }
        #expect(Set(account.statuses(puts)) == ["applied"])
        #expect(Set(account.statuses(deletes)) == ["applied"])
        Self.pull(account, since: 0, token: account.token)
        #expect(try account.hub.service.compact(batch: 50) == .init(accounts: 1, collected: 120))
        #expect((Self.status(account)["horizon"] as? NSNumber)?.int64Value == 240)
        #expect((Self.status(account)["tombstones"] as? NSNumber)?.intValue == 0)
    }

    @Test func sqliteGivesTheFreedPagesBack() throws {
        let account = try Account(.sqlite)
        let payload = String(repeating: "x", count: 2_000)
        for start in stride(from: 0, to: 2_000, by: 500) {
            #expect(Set(account.statuses((start..<start + 500).map { HubRecordsTests.put("n\($0)", payload, at: 10, mutation: "p\($0)") })) == ["applied"])
            #expect(Set(account.statuses((start..<start + 500).map { HubRecordsTests.delete("n\($0)", at: 20) })) == ["applied"])
        }
        func pages() throws -> Int64 {
            try account.hub.storage.transaction { sql in Self.integer(try sql.query("PRAGMA page_count", [])) }
        }
        // The tombstones keep the rows; their payloads' pages were freed by the deletes already.
        let before = try pages()
        Self.pull(account, since: 0, token: account.token)
        #expect(try account.hub.service.compact().collected == 2_000)
        let after = try pages()
        #expect(after < before, "page count \(before) -> \(after)")
        let free = try account.hub.storage.transaction { sql in Self.integer(try sql.query("PRAGMA freelist_count", [])) }
        #expect(free == 0)
    }

    @Test(arguments: Backend.allCases) func statusNamesADeviceWhosePushesAreAllRefused(_ backend: Backend) throws {
        let account = try Account(backend)
        let future = account.hub.now + 10 * 365 * 86_400_000
        #expect(account.statuses([HubRecordsTests.put("a", "1", at: future)]) == ["refused"])
        #expect(account.statuses([HubRecordsTests.put("b", "1", at: future, mutation: "again")]) == ["refused"])
        let founder = Fixtures.identity(1).deviceID.hex
        #expect(Self.warnings(account).contains { $0.hasPrefix("cannot make progress: every push of device \(founder.prefix(16))") && $0.contains("(clock_skew)") })
        let device = try #require((Self.status(account)["devices"] as? [[String: Any]])?.first)
        #expect(device["pushesRefusedSince"] as? NSNumber != nil)
        // A push that lands clears it; one answered as before (a retried id) changes nothing.
        #expect(account.statuses([HubRecordsTests.put("a", "1", at: 10)]) == ["applied"])
        #expect(!Self.warnings(account).contains { $0.hasPrefix("cannot make progress") })
        #expect(account.statuses([HubRecordsTests.put("b", "1", at: future, mutation: "again")]) == ["refused"])
        #expect(!Self.warnings(account).contains { $0.hasPrefix("cannot make progress") }, "an answer repeated for a retried id is no new refusal")
    }

    @Test(arguments: Backend.allCases) func statusNamesAStalledCursorAndAFullMailbox(_ backend: Backend) throws {
        let account = try Account(backend) { configuration in
            configuration.maximumMailboxBytes = 100
            configuration.stalledCursorSeconds = 60
        }
        #expect(account.statuses([HubRecordsTests.put("a", "1", at: 10)]) == ["applied"])
        Self.pull(account, since: 0, token: account.token)
        #expect(Self.warnings(account).isEmpty)
        #expect(account.statuses([HubRecordsTests.put("b", "2", at: 10)]) == ["applied"])
        #expect(Self.warnings(account).isEmpty, "a cursor behind for less than the bound is not stalled")
        account.hub.advance(seconds: 61)
        let founder = Fixtures.identity(1).deviceID.hex
        #expect(Self.warnings(account).contains { $0.hasPrefix("stalled cursor: device \(founder.prefix(16))") && $0.hasSuffix("1 changes behind") })
        let device = try #require((Self.status(account)["devices"] as? [[String: Any]])?.first)
        #expect((device["recordsLag"] as? NSNumber)?.intValue == 1)
        #expect((device["recordsCursor"] as? NSNumber)?.intValue == 1)
        Self.pull(account, since: 1, token: account.token)
        #expect(!Self.warnings(account).contains { $0.hasPrefix("stalled cursor") })

        let mailbox = "\(account.base)/relay/\(founder)"
        #expect(account.hub.call("POST", mailbox, body: [UInt8](repeating: 1, count: 95), token: account.token).status == 202)
        #expect(Self.warnings(account).contains { $0.hasPrefix("full mailbox: device \(founder.prefix(16))") })
        #expect(Self.status(account)["oldestPendingFrame"] as? NSNumber != nil)
    }
}
