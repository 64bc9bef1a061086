import Foundation
import Stele
import SteleHub
import SteleSQL
import Testing
import TestSupport

/// Mirror clients (DESIGN §8.2, seeds 003 and 004) syncing through the hub's
/// real request handling on both backends: the overlay retires on echo, one bad
/// mutation never blocks the rest, a crash at each point of a flush resumes, a
/// lost answer applies nothing twice, deletes are confirmed, and a hub whose
/// history was rewound gets back what it lost.
@Suite(.serialized) struct MirrorClientTests {
    /// Carries a client's requests into `HubService`, with the faults SCENARIOS names.
    final class ServiceTransport: MirrorTransport {
        enum Fault { case status(Int), timeout }
        let hub: HubHarness
        let account: AccountID
        let token: String
        var down = false
        var faults: [Fault] = []
        private(set) var pushes = 0

        init(hub: HubHarness, account: AccountID, token: String) {
            self.hub = hub
            self.account = account
            self.token = token
        }

        func exchange(_ request: MirrorRequest) -> MirrorReply {
            guard !down else { return .unreachable("the hub is down") }
            if case .push = request.purpose {
                pushes += 1
                if !faults.isEmpty {
                    switch faults.removeFirst() {
                    case .status(let status):
                        return .answer(HubAnswer(status: status, body: Array(#"{"error":{"code":"injected","message":"an injected failure"}}"#.utf8)))
                    case .timeout:
                        _ = call(request)
                        return .lost("the answer never arrived")
                    }
                }
            }
            return .answer(call(request))
        }

        private func call(_ request: MirrorRequest) -> HubAnswer {
            let response = hub.call(request.method, "/v1/accounts/\(account.hex)/\(request.path)", body: request.body, token: token)
            return HubAnswer(status: response.status, headers: response.headers, body: response.body)
        }
    }

    /// A hub, its account, and clients with their own stores and clocks.
    final class World {
        let hub: HubHarness
        let account: AccountID
        let token: String
        let directory: TemporaryDirectory
        var clients: [String: Client] = [:]

        final class Client {
            let name: String
            let clock: ManualWallClock
            let transport: ServiceTransport
            var store: MirrorStore
            var driver: MirrorDriver

            init(name: String, path: String, clock: ManualWallClock, transport: ServiceTransport) throws {
                self.name = name
                self.clock = clock
                self.transport = transport
                store = try Self.open(path, clock)
                driver = Self.driver(store, transport, clock)
            }

            static func open(_ path: String, _ clock: ManualWallClock) throws -> MirrorStore {
                var configuration = MirrorStore.Configuration()
                configuration.clock = clock
                return try MirrorStore(path: path, configuration: configuration)
            }

            static func driver(_ store: MirrorStore, _ transport: ServiceTransport, _ clock: ManualWallClock) -> MirrorDriver {
                MirrorDriver(sync: MirrorSync(store: store), transport: transport) { target in
                    let now = clock.nowMilliseconds()
                    if target > now { clock.advance(byMilliseconds: target - now) }
                }
            }

            /// The process restarts: a new instance on the same file (a new claim owner).
            func restart() throws {
                store = try Self.open(store.path, clock)
                driver = Self.driver(store, transport, clock)
            }

            @discardableResult
            func sync() throws -> MirrorDriver.Report { try driver.syncUntilQuiet() }

            func value(_ kind: String, _ id: String) throws -> String? {
                try store.value(kind: kind, id: id).map { String(decoding: $0, as: UTF8.self) }
            }
        }

        init(_ backend: Backend) throws {
            hub = try HubHarness(backend)
            account = try hub.found(Fixtures.identity(1))
            token = try hub.session(Fixtures.identity(1), account)
            directory = try TemporaryDirectory("stele-mirror")
        }

        @discardableResult
        func client(_ name: String, skewMilliseconds: Int64 = 0) throws -> Client {
            let clock = ManualWallClock(milliseconds: hub.now + skewMilliseconds)
            let client = try Client(
                name: name, path: directory.file("\(name).sqlite"), clock: clock, transport: ServiceTransport(hub: hub, account: account, token: token))
            clients[name] = client
            return client
        }

        /// The hub's live records of `kind` as id → payload text.
        func hubRecords(_ kind: String) throws -> [String: String] {
            let rows = try hub.storage.transaction { sql in
                try sql.query("SELECT id, payload FROM records WHERE account = $1 AND kind = $2 AND payload IS NOT NULL", [.text(account.hex), .text(kind)])
            }
            var records: [String: String] = [:]
            for row in rows {
                if case .text(let id) = row[0], case .blob(let bytes) = row[1] { records[id] = String(decoding: bytes, as: UTF8.self) }
            }
            return records
        }

        func hubMembers(_ kind: String, _ id: String) throws -> [String] {
            try hub.storage.transaction { sql in
                try sql.query(
                    "SELECT member FROM record_members WHERE account = $1 AND kind = $2 AND id = $3 ORDER BY member", [.text(account.hex), .text(kind), .text(id)])
            }.compactMap { if case .text(let member) = $0[0] { member } else { nil } }
        }

        func hubHistory() throws -> Int64 {
            try hub.storage.transaction { sql in try sql.query("SELECT history FROM accounts WHERE id = $1", [.text(account.hex)]) }
                .first.flatMap { if case .integer(let value) = $0[0] { value } else { nil } } ?? -1
        }

        /// Every client's effective reads of `kind` equal the hub's truth.
        func expectReadsEqualTheHub(_ kind: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let truth = try hubRecords(kind)
            for (name, client) in clients {
                let reads = Dictionary(uniqueKeysWithValues: try client.store.records(kind: kind).map { ($0.id, String(decoding: $0.payload, as: UTF8.self)) })
                #expect(reads == truth, "\(name)", sourceLocation: sourceLocation)
            }
        }

        // A copy of the account's records, members, mutation ids and history: `hub backup` for records.
        struct Backup {
            var tables: [String: [[SQLValue]]] = [:]
            var history: Int64 = 0
        }

        static let recordTables = [
            ("records", "kind, id, payload, modified_ms, grp, seq"), ("record_members", "kind, id, set_name, member"), ("mutations", "mutation, result, created_ms"),
        ]

        func backup() throws -> Backup {
            var copy = Backup()
            try hub.storage.transaction { sql in
                for (table, columns) in Self.recordTables {
                    copy.tables[table] = try sql.query("SELECT \(columns) FROM \(table) WHERE account = $1", [.text(account.hex)])
                }
            }
            copy.history = try hubHistory()
            return copy
        }

        /// `hub restore from`: the copy comes back and the history's epoch changes.
        func restore(_ copy: Backup) throws {
            try hub.storage.transaction { sql in
                for (table, columns) in Self.recordTables {
                    _ = try sql.execute("DELETE FROM \(table) WHERE account = $1", [.text(account.hex)])
                    let count = columns.split(separator: ",").count
                    let placeholders = (0..<count).map { "$\($0 + 2)" }.joined(separator: ", ")
                    for row in copy.tables[table] ?? [] {
                        _ = try sql.execute("INSERT INTO \(table) (account, \(columns)) VALUES ($1, \(placeholders))", [.text(account.hex)] + row)
                    }
                }
                _ = try sql.execute("UPDATE accounts SET history = $2 WHERE id = $1", [.text(account.hex), .integer(copy.history)])
                _ = try sql.execute("UPDATE hub_meta SET value = 'restored-\(UUID().uuidString.prefix(8))' WHERE name = 'epoch'", [])
            }
        }
    }

    // MARK: - Through the hub

    @Test(arguments: Backend.allCases) func twoClientsSyncPutsSetsAndDeletesThroughTheHub(_ backend: Backend) throws {
        let world = try World(backend)
        let phone = try world.client("phone")
        let laptop = try world.client("laptop")
        try phone.store.put(kind: "mail", id: "m1", payload: Array("hello".utf8), group: "t1")
        try phone.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        try phone.store.put(kind: "mail", id: "m2", payload: Array("bye".utf8))
        try phone.sync()
        #expect(try phone.store.queue().isEmpty)
        try laptop.sync()
        #expect(try laptop.value("mail", "m1") == "hello")
        #expect(try laptop.store.members(kind: "mail", id: "m1", set: "labels") == ["INBOX"])
        try laptop.store.delete(kind: "mail", id: "m2")
        try laptop.store.remove(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        try laptop.sync()
        try phone.sync()
        #expect(try phone.value("mail", "m2") == nil)
        #expect(try phone.store.members(kind: "mail", id: "m1", set: "labels") == [])
        #expect(try world.hubMembers("mail", "m1") == [])
        try world.expectReadsEqualTheHub("mail")
    }

    @Test(arguments: Backend.allCases) func aStaleMutationAtTheHeadOfAThousandRetiresAloneAndTheRestRetireInTheSameFlush(_ backend: Backend) throws {
        let world = try World(backend)
        let ahead = try world.client("ahead", skewMilliseconds: 60_000)
        let client = try world.client("client")
        try ahead.store.put(kind: "note", id: "x", payload: Array("newer".utf8))
        try ahead.sync()
        try client.store.put(kind: "note", id: "x", payload: Array("older".utf8))
        for index in 1..<1_000 { try client.store.put(kind: "note", id: "y\(index)", payload: Array("v\(index)".utf8)) }
        let report = try client.sync()
        #expect(report.pushes == 1)
        #expect(try client.store.queue().isEmpty)
        let conflicts = try client.store.conflicts()
        #expect(conflicts.count == 1 && conflicts.first?.id == "x" && conflicts.first?.losingPayload == Array("older".utf8))
        #expect(try client.value("note", "x") == "newer")
        #expect(try world.hubRecords("note").count == 1_000)
        try ahead.sync()
        try world.expectReadsEqualTheHub("note")
    }

    @Test(arguments: MirrorDriver.CrashPoint.allCases) func aCrashAtEachPointOfAFlushResumesAndAppliesNothingTwice(_ point: MirrorDriver.CrashPoint) throws {
        let world = try World(.sqlite)
        let client = try world.client("c")
        try client.store.declareRollup(kind: "mail", set: "labels", member: "INBOX")
        try client.store.put(kind: "mail", id: "m1", payload: Array("a".utf8), group: "t")
        try client.store.put(kind: "mail", id: "m2", payload: Array("b".utf8), group: "t")
        try client.store.add(kind: "mail", id: "m1", set: "labels", member: "INBOX")
        try client.sync()
        try client.store.removeFromGroup(kind: "mail", group: "t", set: "labels", member: "INBOX")
        try client.store.put(kind: "mail", id: "m3", payload: Array("c".utf8), group: "t")
        let before = try world.hubHistory()
        client.driver.crashPoint = point
        #expect(throws: MirrorDriver.Crashed(point: point)) { try client.sync() }
        let afterCrash = try world.hubHistory()
        #expect(afterCrash == (point == .beforeSend ? before : before + 2))
        try client.restart()
        // The overlay survived the crash: the thread is still out of the inbox.
        #expect(try client.store.rollup(kind: "mail", group: "t", set: "labels", member: "INBOX") == false)
        try client.sync()
        #expect(try client.store.queue().isEmpty)
        #expect(try world.hubHistory() == before + 2)
        #expect(try world.hubMembers("mail", "m1") == [])
        #expect(try client.store.rollup(kind: "mail", group: "t", set: "labels", member: "INBOX") == false)
        try world.expectReadsEqualTheHub("mail")
    }

    @Test func aLostAnswerIsSentAgainAndAppliedOnce() throws {
        let world = try World(.sqlite)
        let client = try world.client("c")
        try client.store.put(kind: "note", id: "n", payload: Array("one".utf8))
        client.transport.faults = [.timeout]
        try client.sync()
        #expect(client.transport.pushes == 2)
        #expect(try world.hubHistory() == 1)
        #expect(try client.store.queue().isEmpty)
        #expect(try client.value("note", "n") == "one")
    }

    @Test func aDeleteIsConfirmedAndNotFoundIsSuccess() throws {
        let world = try World(.sqlite)
        let phone = try world.client("phone")
        let tablet = try world.client("tablet")
        try phone.store.put(kind: "entry", id: "d", payload: Array("diary".utf8))
        try phone.sync()
        try tablet.sync()
        try phone.store.delete(kind: "entry", id: "d")
        try tablet.store.delete(kind: "entry", id: "d")
        try phone.sync()
        try tablet.sync()
        #expect(try tablet.store.queue().isEmpty)
        #expect(try tablet.store.conflicts().isEmpty)
        #expect(try tablet.value("entry", "d") == nil)
        try world.expectReadsEqualTheHub("entry")
    }

    @Test func failuresBackOffUntilFailedTheOverlayHoldsAndRetrySucceeds() throws {
        let world = try World(.sqlite)
        let phone = try world.client("phone")
        try phone.store.put(kind: "entry", id: "d", payload: Array("diary".utf8))
        try phone.sync()
        try phone.store.delete(kind: "entry", id: "d")
        phone.transport.faults = Array(repeating: .status(500), count: 5)
        try phone.sync()
        #expect(phone.transport.pushes == 6)
        #expect(try phone.store.queue().map(\.state) == [.failed])
        #expect(try phone.value("entry", "d") == nil)
        try phone.sync()
        #expect(try phone.value("entry", "d") == nil)
        try phone.store.retryFailed()
        try phone.sync()
        #expect(try phone.store.queue().isEmpty)
        #expect(try world.hubRecords("entry").isEmpty)
    }

    @Test func anUnreachableHubCostsNoAttemptAndEndsTheSyncAtOnce() throws {
        let world = try World(.sqlite)
        let client = try world.client("c")
        try client.store.put(kind: "note", id: "n", payload: [1])
        client.transport.down = true
        let report = try client.sync()
        #expect(report.unreachable)
        #expect(try client.store.queue().map { "\($0.state) \($0.attempts)" } == ["pending 0"])
        client.transport.down = false
        try client.sync()
        #expect(try client.store.queue().isEmpty)
    }

    @Test(arguments: Backend.allCases) func aRewoundHubGetsBackWhatItLostAndNoDeleteComesBack(_ backend: Backend) throws {
        let world = try World(backend)
        let phone = try world.client("phone")
        let laptop = try world.client("laptop")
        try phone.store.put(kind: "note", id: "kept", payload: Array("kept".utf8))
        try phone.store.put(kind: "note", id: "doomed", payload: Array("doomed".utf8))
        try phone.sync()
        let copy = try world.backup()
        try phone.store.delete(kind: "note", id: "doomed")
        try phone.store.put(kind: "note", id: "late", payload: Array("late".utf8))
        try phone.store.add(kind: "note", id: "kept", set: "labels", member: "STARRED")
        try phone.sync()
        try laptop.sync()
        try world.restore(copy)
        #expect(try world.hubRecords("note") == ["kept": "kept", "doomed": "doomed"])
        try laptop.sync()
        try phone.sync()
        try laptop.sync()
        #expect(try world.hubRecords("note") == ["kept": "kept", "late": "late"])
        #expect(try world.hubMembers("note", "kept") == ["STARRED"])
        #expect(try phone.value("note", "doomed") == nil && laptop.value("note", "doomed") == nil)
        try world.expectReadsEqualTheHub("note")
    }

    /// A restored hub lost two members whose names Swift's `String` holds equal
    /// (`é` as one character and as `e` + U+0301): the replay sends both back.
    @Test(arguments: Backend.allCases) func aRewoundHubGetsBackMembersWhoseNamesAreCanonicallyEqual(_ backend: Backend) throws {
        let world = try World(backend)
        let phone = try world.client("phone")
        let (composed, decomposed) = ("\u{E9}", "e\u{301}")
        try phone.store.put(kind: "note", id: "n", payload: Array("v".utf8))
        try phone.sync()
        let copy = try world.backup()
        try phone.store.add(kind: "note", id: "n", set: "labels", member: decomposed)
        try phone.store.add(kind: "note", id: "n", set: "labels", member: composed)
        try phone.sync()
        #expect(try world.hubMembers("note", "n").count == 2)
        try world.restore(copy)
        #expect(try world.hubMembers("note", "n").isEmpty)
        try phone.sync()
        try phone.sync()
        let members = try world.hubMembers("note", "n").map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        #expect(members == [Array(decomposed.utf8), Array(composed.utf8)])
        #expect(try phone.store.members(kind: "note", id: "n", set: "labels").count == 2)
    }

    @Test func aWipedClientDownloadsAgain() throws {
        let world = try World(.sqlite)
        let phone = try world.client("phone")
        try phone.store.put(kind: "note", id: "n", payload: Array("v".utf8))
        try phone.sync()
        let wiped = try Connection(path: phone.store.path)
        try wiped.execute("DELETE FROM mirror_records")
        try wiped.execute("DELETE FROM mirror_members")
        #expect(try phone.value("note", "n") == nil)
        try phone.sync()
        #expect(try phone.value("note", "n") == "v")
    }
}
