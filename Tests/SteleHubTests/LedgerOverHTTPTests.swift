import Foundation
import Stele
import SteleHub
import SteleSQL
import Testing
import TestSupport

/// Ledger clients (DESIGN §8.3, seed 002) over real sockets: ``LedgerDriver``
/// through ``HubMirrorTransport`` and ``HubClient`` (URLSession) against the hub
/// served by libmicrohttpd on loopback, on both backends, beside a mirror client:
/// an app's hard delete reaches the mirror as a tombstone, a wiped store is
/// refused and pushes nothing, a reset downloads everything and sends only what
/// the hub lacks, and a hub that goes away costs nothing.
@Suite(.serialized) struct LedgerOverHTTPTests {
    static func driver(_ ledger: Ledger, _ client: HubClient) -> LedgerDriver {
        LedgerDriver(sync: LedgerSync(ledger: ledger), transport: HubMirrorTransport(client: client))
    }

    /// Counts the pushes a transport carries.
    final class Counting: MirrorTransport {
        let inner: any MirrorTransport
        private(set) var pushes = 0
        init(_ inner: any MirrorTransport) { self.inner = inner }
        func exchange(_ request: MirrorRequest) -> MirrorReply {
            if case .push = request.purpose { pushes += 1 }
            return inner.exchange(request)
        }
    }

    @Test(arguments: Backend.allCases) func aLedgerClientAndAMirrorClientSyncOverLoopback(_ backend: Backend) throws {
        let rig = try RuntimeRig(backend)
        let phone = try rig.found("phone")
        let source = try SQLiteTableSource(path: rig.files.file("notes.sqlite"))
        var settings = Ledger.Configuration()
        settings.initialBackoffMilliseconds = 20
        let ledger = try Ledger(path: rig.files.file("notes.sqlite.ledger"), source: source, account: phone.account.hex, hub: rig.url.absoluteString, configuration: settings)
        let counting = Counting(HubMirrorTransport(client: phone.client))
        let app = LedgerDriver(sync: LedgerSync(ledger: ledger), transport: counting)
        let mirror = try MirrorStore(path: rig.files.file("laptop.mirror"))
        let laptop = MirrorDriver(sync: MirrorSync(store: mirror), transport: HubMirrorTransport(client: HubClient(hub: rig.url, account: phone.account, identity: phone.identity)))

        // The app writes its own table; the pass finds it, the push carries it.
        try source.put(kind: "note", id: "n1", payload: Array("groceries".utf8))
        try source.put(kind: "note", id: "n2", payload: Array("call mum".utf8))
        let first = try app.syncUntilQuiet()
        #expect(!first.unreachable && first.pass.upserts == 2)
        #expect(try ledger.outbox().isEmpty)
        try laptop.syncUntilQuiet()
        #expect(try mirror.value(kind: "note", id: "n1") == Array("groceries".utf8))

        // A hard delete in the app's table becomes a tombstone; the mirror's edit comes back into the table.
        try source.delete(kind: "note", id: "n1")
        try mirror.put(kind: "note", id: "n2", payload: Array("call dad".utf8))
        try laptop.syncUntilQuiet()
        let second = try app.syncUntilQuiet()
        #expect(second.pass.tombstones == 1)
        try laptop.syncUntilQuiet()
        #expect(try mirror.value(kind: "note", id: "n1") == nil)
        #expect(try source.payload(kind: "note", id: "n2") == Array("call dad".utf8))
        #expect(try ledger.stamp(kind: "note", id: "n1")?.isTombstone == true)

        // The hub goes away: the pass records what it found and nothing costs an attempt.
        rig.takeDown()
        try source.put(kind: "note", id: "n3", payload: Array("dentist".utf8))
        #expect(try app.syncUntilQuiet().unreachable)
        #expect(try ledger.outbox().map(\.attempts) == [0])
        try rig.bringBack()
        try app.syncUntilQuiet()
        #expect(try ledger.outbox().isEmpty)

        // A wipe: refused, nothing pushed; a reset downloads everything and sends only what the hub lacks.
        let pushesBefore = counting.pushes
        try source.wipe()
        try source.put(kind: "note", id: "n4", payload: Array("after the wipe".utf8))
        #expect(throws: LedgerError.self) { try app.syncUntilQuiet() }
        #expect(ledger.halt?.code == .storeReplaced)
        #expect(counting.pushes == pushesBefore)
        try ledger.reset()
        let third = try app.syncUntilQuiet()
        #expect(third.pass.upserts == 1 && third.pass.tombstones == 0)
        #expect(try source.all().map(\.id) == ["n2", "n3", "n4"])
        try laptop.syncUntilQuiet()
        #expect(try mirror.records(kind: "note").map(\.id) == ["n2", "n3", "n4"])
    }
}
