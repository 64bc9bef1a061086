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
}
