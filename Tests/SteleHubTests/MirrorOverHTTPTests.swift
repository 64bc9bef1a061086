import Foundation
import Stele
import SteleHub
import SteleSQL
import Testing
import TestSupport

/// Mirror clients over real sockets: ``HubMirrorTransport`` and ``HubClient``
/// (URLSession) against the hub served by libmicrohttpd on loopback, on both
/// backends, with the hub taken down and brought back under them.
@Suite(.serialized) struct MirrorOverHTTPTests {
    static func driver(_ store: MirrorStore, _ client: HubClient) -> MirrorDriver {
        MirrorDriver(sync: MirrorSync(store: store), transport: HubMirrorTransport(client: client))
    }

    @Test(arguments: Backend.allCases) func twoMirrorClientsSyncOverLoopbackAndAHubThatGoesAwayCostsNothing(_ backend: Backend) throws {
        let rig = try RuntimeRig(backend)
        let phone = try rig.found("phone")
        var configuration = MirrorStore.Configuration()
        configuration.initialBackoffMilliseconds = 20
        let first = try MirrorStore(path: rig.files.file("first.mirror"), configuration: configuration)
        let second = try MirrorStore(path: rig.files.file("second.mirror"), configuration: configuration)
        let one = Self.driver(first, phone.client)
        let other = Self.driver(second, HubClient(hub: rig.url, account: phone.account, identity: phone.identity))
        try first.declareRollup(kind: "mail", set: "labels", member: "INBOX")
        try second.declareRollup(kind: "mail", set: "labels", member: "INBOX")

        try first.put(kind: "mail", id: "m1", payload: Array("hello".utf8), group: "t1")
        try first.add(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        try first.put(kind: "mail", id: "m2", payload: Array("bye".utf8), group: "t1")
        #expect(try one.syncUntilQuiet().unreachable == false)
        #expect(try first.queue().isEmpty)
        try other.syncUntilQuiet()
        #expect(try second.value(kind: "mail", id: "m1") == Array("hello".utf8))
        #expect(try second.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == true)

        // The hub goes away: the archive is instant, costs no attempt, and waits.
        rig.takeDown()
        try second.removeFromGroup(kind: "mail", group: "t1", set: "labels", member: "INBOX")
        try second.delete(kind: "mail", id: "m2")
        #expect(try second.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == false)
        #expect(try other.syncUntilQuiet().unreachable)
        #expect(try second.queue().map(\.attempts) == [0, 0])

        try rig.bringBack()
        try other.syncUntilQuiet()
        #expect(try second.queue().isEmpty)
        try one.syncUntilQuiet()
        #expect(try first.value(kind: "mail", id: "m2") == nil)
        #expect(try first.holds(kind: "mail", id: "m1", set: "labels", member: "INBOX") == false)
        #expect(try first.rollup(kind: "mail", group: "t1", set: "labels", member: "INBOX") == false)
        #expect(try first.records(kind: "mail").map(\.id) == ["m1"])
    }

    /// A hub run with smaller limits (`--max-mutations-per-push 2`,
    /// `--max-changes-per-page 2`): a mirror client and a ledger client that send
    /// and ask for more learn the limit from the refusal and send less, losing no
    /// attempt, and a reader pages through everything.
    @Test func clientsSendSmallerPushesToAHubWithSmallerLimitsAndLoseNothing() throws {
        let rig = try RuntimeRig(.sqlite) {
            $0.maximumMutationsPerPush = 2
            $0.maximumChangesPerPage = 2
        }
        let phone = try rig.found("phone")
        let first = try MirrorStore(path: rig.files.file("first.mirror"))
        for index in 1...5 { try first.put(kind: "mail", id: "m\(index)", payload: Array("v\(index)".utf8)) }
        let counting = LedgerOverHTTPTests.Counting(HubMirrorTransport(client: phone.client))
        let one = MirrorDriver(sync: MirrorSync(store: first), transport: counting)
        #expect(try one.syncUntilQuiet().unreachable == false)
        #expect(try first.queue().isEmpty)
        #expect(first.hubMutationsPerPush == 2)
        #expect(counting.pushes == 4, "one refused push of 5, then 2 + 2 + 1")

        // A reader asking for pages of 1,000 gets pages of 2, and every record.
        let second = try MirrorStore(path: rig.files.file("second.mirror"))
        try Self.driver(second, HubClient(hub: rig.url, account: phone.account, identity: phone.identity)).syncUntilQuiet()
        #expect(try second.records(kind: "mail").map(\.id) == ["m1", "m2", "m3", "m4", "m5"])

        // A ledger client the same way.
        let source = try SQLiteTableSource(path: rig.files.file("notes.sqlite"))
        for index in 1...3 { try source.put(kind: "note", id: "n\(index)", payload: Array("n\(index)".utf8)) }
        let ledger = try Ledger(path: rig.files.file("notes.sqlite.ledger"), source: source, account: phone.account.hex, hub: rig.url.absoluteString)
        let app = LedgerOverHTTPTests.driver(ledger, phone.client)
        #expect(try app.syncUntilQuiet().unreachable == false)
        #expect(ledger.hubMutationsPerPush == 2)
        let status = try ledger.status()
        #expect(status.pending == 0 && status.failed == 0)
        try Self.driver(second, HubClient(hub: rig.url, account: phone.account, identity: phone.identity)).syncUntilQuiet()
        #expect(try second.records(kind: "note").map(\.id) == ["n1", "n2", "n3"])
    }
}
