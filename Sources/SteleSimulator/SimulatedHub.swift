import Foundation
import Stele
import SteleHub
import SteleSQL
import Synchronization

/// The hub of a scenario (SCENARIOS.md "Hub statements"): the request handling
/// `stele-hub` ships (`HubService` over SQLite), reached through a simulated
/// network (`hub down`, pushes failed on purpose, answers lost), on the
/// simulation's virtual clock; and its mirror clients, each with its own store
/// file and clock, running the shipped ``MirrorSync`` and ``MirrorDriver``.
public final class SimulatedHub {
    /// The hub's wall clock: the simulation's virtual time after a fixed start.
    final class Clock: Sendable {
        private let value = Mutex<Int64>(0)
        var milliseconds: Int64 { value.withLock { $0 } }
        func set(_ milliseconds: Int64) { value.withLock { $0 = milliseconds } }
    }

    /// Milliseconds since 1970 at virtual time zero.
    static let epochStart: Int64 = 1_800_000_000_000

    unowned let simulation: Simulation
    let folder: String
    let clock = Clock()
    private(set) var storage: SQLiteHubStorage
    private(set) var service: HubService
    let founder: DeviceIdentity
    let account: AccountID
    private var token = ""
    /// Each client is a device of the account, approved by the founder, with its own
    /// session: the hub keeps a records cursor per device, and compaction waits on each.
    private var clientDevices: [String: DeviceIdentity] = [:]
    private var clientTokens: [String: String] = [:]
    /// Clients whose device the founder revoked (`hub revoke C`).
    public private(set) var revokedClients: Set<String> = []
    public private(set) var isDown = false
    private var pushFaults: [HubStatement.PushFault] = []
    /// Push requests the hub received, by client.
    public private(set) var pushesReceived: [String: Int] = [:]
    private(set) var rollups: [(kind: String, set: String, member: String)] = []
    public private(set) var clients: [SimulatedClient] = []
    /// The ledger clients (`client C ledger`).
    public private(set) var ledgerClients: [SimulatedLedgerClient] = []
    /// The hub's latest backup, for a random restore.
    public private(set) var lastBackup: String?
    /// Every push the hub answered, for the judgement after healing.
    public let oracle = MirrorOracle()

    var hubPath: String { folder + "/hub.sqlite" }

    init(simulation: Simulation) throws {
        self.simulation = simulation
        folder = simulation.folder + "/hub"
        try FileManager.default.createDirectory(atPath: folder + "/backups", withIntermediateDirectories: true)
        storage = try SQLiteHubStorage(path: folder + "/hub.sqlite")
        service = Self.service(storage, clock)
        founder = try DeviceIdentity.generate()
        account = AccountID.generate()
        tick()
        let roster = try Roster.founding(account: account, by: founder)
        let founded = call("POST", "/v1/accounts", json: ["genesis": Data(roster.encoded).base64EncodedString()], token: nil)
        guard founded.status == 201 else { throw SimulationInputError(message: "the simulated hub refused the account: \(founded.status)") }
        try openSession()
    }

    deinit { storage.close() }

    private static func service(_ storage: SQLiteHubStorage, _ clock: Clock) -> HubService {
        var configuration = HubService.Configuration()
        configuration.open = true
        return HubService(storage: storage, configuration: configuration, clock: { clock.milliseconds + 0 })
    }

    /// The hub's clock follows the simulation's.
    func tick() { clock.set(Self.epochStart + simulation.now) }

    private func openSession() throws {
        token = try session(for: founder)
    }

    /// A new session of `device` (HUB-API "Authentication").
    private func session(for device: DeviceIdentity) throws -> String {
        tick()
        let time = clock.milliseconds
        let signature = try HubSessionProof.sign(by: device, account: account, timeMilliseconds: time)
        let answer = call(
            "POST", "/v1/accounts/\(account.hex)/sessions", json: ["device": device.deviceID.hex, "time": time, "signature": Data(signature).base64EncodedString()],
            token: nil)
        guard answer.status == 200, let token = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any], let text = token["token"] as? String else {
            throw SimulationInputError(message: "the simulated hub refused a session: \(answer.status)")
        }
        return text
    }

    /// The founder signs `change` at the roster's end and posts it.
    private func postRosterChange(_ make: (Int) throws -> RosterChange) throws {
        let version = try storage.transaction { sql -> Int64 in
            if case .integer(let version)? = try sql.query("SELECT roster_version FROM accounts WHERE id = $1", [.text(account.hex)]).first?.first { return version }
            return 0
        }
        let change = try make(Int(version))
        var answer = call("POST", "/v1/accounts/\(account.hex)/roster", json: ["change": Data(change.encoded).base64EncodedString(), "index": version], token: token)
        if answer.status == 401 {
            try openSession()
            answer = call("POST", "/v1/accounts/\(account.hex)/roster", json: ["change": Data(change.encoded).base64EncodedString(), "index": version], token: token)
        }
        guard answer.status == 200 else { throw SimulationInputError(message: "the simulated hub refused a roster change: \(answer.status)") }
    }

    /// Makes `client` a device of the account (again, after a restore put the
    /// roster back before its approval) and opens its session.
    /// The first client is the founding device itself (an account's first device
    /// founds it), so no device stands outside the clients holding compaction back.
    private func enroll(_ client: String) throws {
        let identity = try clientDevices[client] ?? (clientDevices.isEmpty ? founder : DeviceIdentity.generate())
        clientDevices[client] = identity
        let known = try storage.transaction { sql in
            try !sql.query("SELECT 1 FROM devices WHERE account = $1 AND device = $2", [.text(account.hex), .text(identity.deviceID.hex)]).isEmpty
        }
        if !known {
            try postRosterChange { index in
                try RosterChange.approval(of: identity.deviceID, signingKey: try identity.signingKey(), by: founder, account: account, index: index)
            }
        }
        clientTokens[client] = try session(for: identity)
    }

    /// `hub revoke C`: the founder revokes the client's device; its sessions end, it
    /// holds tombstone compaction back no more.
    private func revoke(_ client: String) throws {
        guard let identity = clientDevices[client] else { throw SimulationInputError(message: "no such client \(client)") }
        guard identity != founder else {
            throw SimulationInputError(message: "\(client) is the account's founding device, which signs every roster change here; revoke another client")
        }
        try postRosterChange { index in try RosterChange.revocation(of: identity.deviceID, by: founder, account: account, index: index) }
        revokedClients.insert(client)
    }

    /// One request into the hub's handler, answered at once (a long poll that finds nothing expires at once).
    func call(_ method: String, _ target: String, json: [String: Any]? = nil, body: [UInt8] = [], token: String?, clientTime: Int64? = nil) -> HubResponse {
        tick()
        var headers: [String: String] = [:]
        if let token { headers["authorization"] = "Bearer \(token)" }
        if let clientTime { headers["stele-client-time"] = String(clientTime) }
        var bytes = body
        if let json, let data = try? JSONSerialization.data(withJSONObject: json) { bytes = [UInt8](data) }
        switch service.handle(HubRequest(method: method, target: target, headers: headers, body: bytes)) {
        case .respond(let response): return response
        case .wait(let wait): return wait.poll() ?? wait.expire()
        }
    }

    /// A client's request through the simulated network.
    func exchange(_ request: MirrorRequest, from client: String) -> MirrorReply {
        guard !isDown else { return .unreachable("the hub is down") }
        if case .push = request.purpose {
            pushesReceived[client, default: 0] += 1
            if let ledger = ledgerClient(client) { oracle.observe(ledgerPush: request.body, from: ledger) }
            if !pushFaults.isEmpty {
                let fault = pushFaults.removeFirst()
                switch fault {
                case .timeout:
                    let response = authenticatedCall(request, from: client)
                    traceExchange(request, from: client, response, lost: true)
                    oracle.observe(push: request.body, status: response.status, answer: response.body, from: client)
                    return .lost("the hub applied the push; its answer never arrived")
                case .internalError, .unavailable, .notFound:
                    let status = Int(fault.rawValue) ?? 500
                    return .answer(HubAnswer(status: status, body: Array(#"{"error":{"code":"injected","message":"a failure the scenario asked for"}}"#.utf8)))
                }
            }
        }
        let response = authenticatedCall(request, from: client)
        traceExchange(request, from: client, response, lost: false)
        if case .push = request.purpose {
            oracle.observe(push: request.body, status: response.status, answer: response.body, from: client)
        } else if response.status == 200 {
            if ledgerClient(client) != nil {
                oracle.hold(received: response.body, by: client)
            } else {
                oracle.observe(received: response.body, by: client)
            }
        }
        var headers: [String: String] = [:]
        for (name, value) in response.headers { headers[name.lowercased()] = value }
        return .answer(HubAnswer(status: response.status, headers: headers, body: response.body))
    }

    /// `stele scenario --trace`: each request a client made and the hub's answer, bodies cut at 100,000 bytes.
    private func traceExchange(_ request: MirrorRequest, from client: String, _ response: HubResponse, lost: Bool) {
        guard let trace = simulation.trace else { return }
        let body = String(decoding: request.body.prefix(100_000), as: UTF8.self)
        let answer = String(decoding: response.body.prefix(100_000), as: UTF8.self)
        trace(
            String(format: "%10.3f s  %@  %@", Double(simulation.now) / 1_000, client, "\(request.method) \(request.path) \(body) -> \(response.status)\(lost ? " (lost)" : "") \(answer)"))
    }

    /// A request with the client's session token; a new session once when the hub
    /// forgot it (a restore; the device is approved again when the restored roster lacks it).
    private func authenticatedCall(_ request: MirrorRequest, from client: String) -> HubResponse {
        let target = "/v1/accounts/\(account.hex)/\(request.path)"
        if clientTokens[client] == nil, !revokedClients.contains(client) { try? enroll(client) }
        // The client's own clock, as HubClient sends it.
        let time = self.client(client)?.clock.nowMilliseconds() ?? ledgerClient(client)?.clock.nowMilliseconds()
        let first = call(request.method, target, body: request.body, token: clientTokens[client], clientTime: time)
        guard first.status == 401, !revokedClients.contains(client), (try? enroll(client)) != nil else { return first }
        return call(request.method, target, body: request.body, token: clientTokens[client], clientTime: time)
    }

    // MARK: - Statements

    /// Carries out a hub statement; a client's user write counts as an operation
    /// of the run (``Simulation/Statistics/clientOperations``).
    func apply(_ statement: HubStatement) throws {
        try carryOut(statement)
        if let write = statement.userWrite {
            simulation.statistics.operations += 1
            simulation.statistics.clientOperations += 1
            if write == .delete { simulation.statistics.deletes += 1 }
        }
    }

    private func carryOut(_ statement: HubStatement) throws {
        switch statement {
        case .start:
            break
        case .appendOnly(let kind):
            let answer = call("PUT", "/v1/accounts/\(account.hex)/kinds/\(kind)", json: ["appendOnly": true], token: token)
            guard answer.status == 200 else { throw SimulationInputError(message: "the hub refused kind \(kind): \(answer.status)") }
        case .client(let name):
            guard client(name) == nil else { throw SimulationInputError(message: "client \(name) exists") }
            try enroll(name)
            let client = try SimulatedClient(name: name, path: folder + "/client-\(name).sqlite", hub: self)
            for rule in rollups { try client.store.declareRollup(kind: rule.kind, set: rule.set, member: rule.member) }
            clients.append(client)
        case .ledgerClient(let name):
            guard client(name) == nil, ledgerClient(name) == nil else { throw SimulationInputError(message: "client \(name) exists") }
            try enroll(name)
            ledgerClients.append(try SimulatedLedgerClient(name: name, hub: self))
        case let .rollup(kind, set, member):
            rollups.append((kind, set, member))
            for client in clients { try client.store.declareRollup(kind: kind, set: set, member: member) }
        case let .failPushes(count, fault):
            pushFaults += Array(repeating: fault, count: count)
        case .down:
            isDown = true
        case .up:
            isDown = false
        case .heal:
            // The faults end: pushes the scenario asked to fail while none reached the hub fail no more.
            isDown = false
            pushFaults.removeAll()
        case .backup(let label):
            simulation.trace?(String(format: "%10.3f s  hub  backup as %@", Double(simulation.now) / 1_000, label))
            lastBackup = label
            storage.close()
            try Self.copyDatabase(from: hubPath, to: folder + "/backups/\(label).sqlite")
            try reopen()
        case .restore(let label):
            simulation.trace?(String(format: "%10.3f s  hub  restore from %@", Double(simulation.now) / 1_000, label))
            storage.close()
            try Self.copyDatabase(from: folder + "/backups/\(label).sqlite", to: hubPath)
            try reopen()
            oracle.epoch += 1
            // The operator's restore gives the history a new epoch (`stele-hub restored`), so every cursor of the old one is refused and replays.
            let fork = try storage.transaction { sql in
                _ = try HubService.startNewEpoch(now: SimulatedHub.epochStart + simulation.now, name: "restored-\(label)-\(simulation.now)", sql)
                let rows = try sql.query("SELECT history FROM accounts WHERE id = $1", [.text(account.hex)])
                if case .integer(let history)? = rows.first?.first { return history }
                return 0
            }
            oracle.forks[oracle.epoch] = fork
            oracle.noteRestore(live: Set(try allRecords().filter { $0.value.payload != nil }.keys))
        case .compact:
            let compaction = try service.compact()
            simulation.trace?(String(format: "%10.3f s  hub  compact: %d tombstones collected", Double(simulation.now) / 1_000, compaction.collected))
        case .revoke(let name):
            try revoke(name)
            simulation.trace?(String(format: "%10.3f s  hub  revoke %@", Double(simulation.now) / 1_000, name))
        default:
            guard let name = statement.client else { throw SimulationInputError(message: "no such client") }
            if let ledger = ledgerClient(name) { return try ledger.apply(statement) }
            guard let client = client(name) else { throw SimulationInputError(message: "no such client \(name)") }
            try client.apply(statement)
        }
    }

    private func reopen() throws {
        storage = try SQLiteHubStorage(path: hubPath)
        service = Self.service(storage, clock)
    }

    /// Copies an SQLite database with the files beside it, the source closed.
    static func copyDatabase(from source: String, to target: String) throws {
        let manager = FileManager.default
        for suffix in ["", "-wal", "-shm"] {
            if manager.fileExists(atPath: target + suffix) { try manager.removeItem(atPath: target + suffix) }
            if manager.fileExists(atPath: source + suffix) { try manager.copyItem(atPath: source + suffix, toPath: target + suffix) }
        }
    }

    public func client(_ name: String) -> SimulatedClient? { clients.first { $0.name == name } }

    public func ledgerClient(_ name: String) -> SimulatedLedgerClient? { ledgerClients.first { $0.name == name } }

    // MARK: - The hub's truth

    /// The hub's canonical record: its payload, `nil` for a tombstone or an unknown record.
    public func value(kind: String, id: String) throws -> [UInt8]? {
        let rows = try storage.transaction { sql in
            try sql.query("SELECT payload FROM records WHERE account = $1 AND kind = $2 AND id = $3", [.text(account.hex), .text(kind), .text(id)])
        }
        if case .blob(let bytes)? = rows.first?.first { return bytes }
        return nil
    }

    public func holds(kind: String, id: String, set: String, member: String) throws -> Bool {
        try !storage.transaction { sql in
            try sql.query(
                "SELECT 1 FROM record_members WHERE account = $1 AND kind = $2 AND id = $3 AND set_name = $4 AND member = $5",
                [.text(account.hex), .text(kind), .text(id), .text(set), .text(member)])
        }.isEmpty
    }

    /// Every record the hub holds, tombstones included, by "kind id".
    public func allRecords() throws -> [String: (payload: [UInt8]?, modifiedAt: Int64)] {
        var records: [String: (payload: [UInt8]?, modifiedAt: Int64)] = [:]
        try storage.transaction { sql in
            for row in try sql.query("SELECT kind, id, payload, modified_ms FROM records WHERE account = $1", [.text(account.hex)]) {
                guard case .text(let kind) = row[0], case .text(let id) = row[1], case .integer(let modified) = row[3] else { continue }
                if case .blob(let payload) = row[2] { records["\(kind) \(id)"] = (payload, modified) } else { records["\(kind) \(id)"] = (nil, modified) }
            }
        }
        return records
    }

    /// The client whose device the hub's status names as holding the tombstone
    /// horizon back (`horizonHeldBy`), read through the status endpoint as an operator would.
    public func horizonHolder() throws -> String? {
        let status = try status()
        guard let holder = status["horizonHeldBy"] as? [String: Any], let device = holder["device"] as? String else { return nil }
        return clientDevices.first { $0.value.deviceID.hex == device }?.key
    }

    /// The status endpoint's warnings (HUB-API "Health and status").
    public func statusWarnings() throws -> [String] {
        try status()["warnings"] as? [String] ?? []
    }

    /// `GET /v1/accounts/{a}/status` as the founder.
    private func status() throws -> [String: Any] {
        var answer = call("GET", "/v1/accounts/\(account.hex)/status", token: token)
        if answer.status == 401 {
            try openSession()
            answer = call("GET", "/v1/accounts/\(account.hex)/status", token: token)
        }
        guard answer.status == 200, let status = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any] else {
            throw SimulationInputError(message: "the simulated hub's status answered \(answer.status)")
        }
        return status
    }

    public func tombstones() throws -> Int {
        let rows = try storage.transaction { sql in try sql.query("SELECT count(*) FROM records WHERE account = $1 AND payload IS NULL", [.text(account.hex)]) }
        if case .integer(let count)? = rows.first?.first { return Int(count) }
        return 0
    }

    /// Every live record of the hub: kind → id → payload, and the member sets.
    public func truth() throws -> (records: [String: [String: [UInt8]]], members: Set<[String]>) {
        var records: [String: [String: [UInt8]]] = [:]
        var members: Set<[String]> = []
        try storage.transaction { sql in
            for row in try sql.query("SELECT kind, id, payload FROM records WHERE account = $1 AND payload IS NOT NULL", [.text(account.hex)]) {
                if case .text(let kind) = row[0], case .text(let id) = row[1], case .blob(let payload) = row[2] { records[kind, default: [:]][id] = payload }
            }
            for row in try sql.query("SELECT kind, id, set_name, member FROM record_members WHERE account = $1", [.text(account.hex)]) {
                let words = row.compactMap { if case .text(let text) = $0 { text } else { nil } }
                if words.count == 4 { members.insert(words) }
            }
        }
        return (records, members)
    }
}

extension HubStatement {
    /// What a client's user wrote, if the statement is a write: the simulation
    /// counts it as an operation (``Simulation/Statistics/clientOperations``).
    enum UserWrite { case write, delete }

    var userWrite: UserWrite? {
        switch self {
        case .put, .member, .groupMember, .appWrite(_, _, _, .some): .write
        case .delete, .appWrite(_, _, _, nil): .delete
        default: nil
        }
    }

    /// The client a statement is about, if any.
    var client: String? {
        switch self {
        case .put(let client, _, _, _, _), .delete(let client, _, _), .member(let client, _, _, _, _, _), .groupMember(let client, _, _, _, _, _),
            .step(let client, _), .crashAt(let client, _), .crash(let client), .skew(let client, _), .backupClient(let client, _),
            .restoreClient(let client, _), .appWrite(let client, _, _, _), .corruptLedger(let client), .wipeKeepingIdentity(let client):
            client
        case .start, .appendOnly, .client, .ledgerClient, .rollup, .failPushes, .down, .up, .heal, .backup, .restore, .compact, .revoke:
            nil
        }
    }
}

/// A mirror client of the simulated hub: its own store file and clock, the
/// shipped sync machine and driver, and the crash points of SCENARIOS.md.
public final class SimulatedClient {
    public let name: String
    let path: String
    unowned let hub: SimulatedHub
    let clock: ManualWallClock
    /// How far this client's clock runs ahead of the simulation (`skew C`).
    private(set) var skew: Int64 = 0
    public private(set) var store: MirrorStore
    private(set) var driver: MirrorDriver
    private var pendingCrash: MirrorDriver.CrashPoint?
    /// How many times the client's process restarted (a crash, a restore).
    public private(set) var restarts = 0

    init(name: String, path: String, hub: SimulatedHub) throws {
        self.name = name
        self.path = path
        self.hub = hub
        clock = ManualWallClock(milliseconds: SimulatedHub.epochStart + hub.simulation.now)
        store = try Self.open(path, clock, name: name, incarnation: 0)
        driver = MirrorDriver(sync: MirrorSync(store: store), transport: Transport(), sleepUntil: { _ in })
        driver = makeDriver()
    }

    private static func open(_ path: String, _ clock: ManualWallClock, name: String, incarnation: Int) throws -> MirrorStore {
        var configuration = MirrorStore.Configuration()
        configuration.clock = clock
        configuration.owner = "\(name)#\(incarnation)"
        return try MirrorStore(path: path, configuration: configuration)
    }

    /// Carries the client's requests into the simulated hub.
    final class Transport: MirrorTransport {
        weak var client: SimulatedClient?
        func exchange(_ request: MirrorRequest) -> MirrorReply {
            guard let client else { return .unreachable("the client is gone") }
            return client.hub.exchange(request, from: client.name)
        }
    }

    private func makeDriver() -> MirrorDriver {
        let transport = Transport()
        transport.client = self
        return MirrorDriver(sync: MirrorSync(store: store), transport: transport) { [unowned self] target in
            // Back-off and leases wait in virtual time.
            let wait = target - clock.nowMilliseconds()
            if wait > 0 { hub.simulation.advance(byMilliseconds: wait) }
            tick()
        }
    }

    /// The client's clock follows the simulation's, with its skew.
    func tick() { clock.set(milliseconds: SimulatedHub.epochStart + hub.simulation.now + skew) }

    /// The process restarts from its store: a new instance on the same file, a new claim owner.
    func restart() throws {
        restarts += 1
        store = try Self.open(path, clock, name: name, incarnation: restarts)
        let rules = hub.rollups
        for rule in rules { try store.declareRollup(kind: rule.kind, set: rule.set, member: rule.member) }
        driver = makeDriver()
    }

    /// What the client's last write aimed at, for the oracle when it is undone.
    private var lastTargets: [MirrorOracle.Target] = []

    /// Tells the oracle what the user just asked for; a write the store remembered for
    /// undo (one that changed the queue) becomes what the next undo aims at, as in the store.
    private func intend(_ targets: [MirrorOracle.Target], _ result: MirrorStore.Enqueued) {
        if result != .unchanged { lastTargets = targets }
        hub.oracle.noteIntent(targets)
    }

    func apply(_ statement: HubStatement) throws {
        tick()
        switch statement {
        case let .put(_, kind, id, value, group):
            intend([MirrorOracle.Target(kind: kind, id: id)], try store.put(kind: kind, id: id, payload: Array(value.utf8), group: group))
        case let .delete(_, kind, id):
            intend([MirrorOracle.Target(kind: kind, id: id)], try store.delete(kind: kind, id: id))
        case let .member(_, add, kind, id, set, member):
            let result = add ? try store.add(kind: kind, id: id, set: set, member: member) : try store.remove(kind: kind, id: id, set: set, member: member)
            intend([MirrorOracle.Target(kind: kind, id: id, set: set, member: member)], result)
        case let .groupMember(_, add, kind, group, set, member):
            let results =
                add
                ? try store.addToGroup(kind: kind, group: group, set: set, member: member)
                : try store.removeFromGroup(kind: kind, group: group, set: set, member: member)
            if !results.isEmpty { intend(results.keys.sorted().map { MirrorOracle.Target(kind: kind, id: $0, set: set, member: member) }, .inserted) }
        case .step(_, .undo):
            if try store.undo() { hub.oracle.noteIntent(lastTargets) }
            lastTargets = []
        case .step(_, let step):
            try run(step)
        case .crashAt(_, let point):
            pendingCrash = point
        case .crash:
            try restart()
        case .skew(_, let milliseconds):
            skew = milliseconds
            tick()
        case .backupClient(_, let label):
            try Connection(path: path).backup(to: hub.folder + "/backups/client-\(label).sqlite")
        case .restoreClient(_, let label):
            try Connection(path: path).restore(from: hub.folder + "/backups/client-\(label).sqlite")
            try restart()
        default:
            break
        }
    }

    private func run(_ step: HubStatement.ClientStep) throws {
        driver.crashPoint = pendingCrash
        defer { driver.crashPoint = nil }
        do {
            switch step {
            case .undo: break
            case .flush: _ = try driver.flush()
            case .pull: _ = try driver.pull()
            case .sync: try driver.syncUntilQuiet()
            case .retry: try store.retryFailed()
            case .replay: _ = try driver.replay()
            case .wipe: try wipe()
            case .reset: try store.resetSyncState()
            }
            if step == .flush || step == .sync { pendingCrash = nil }
        } catch is MirrorDriver.Crashed {
            // The flush died where the scenario said; the process restarts from its store.
            pendingCrash = nil
            try restart()
        }
    }

    /// The app's data goes (the canonical tables and their rollups); the sync bookkeeping (cursor, queue) stays.
    private func wipe() throws {
        let connection = try Connection(path: path)
        try connection.transaction {
            try connection.execute("DELETE FROM mirror_records")
            try connection.execute("DELETE FROM mirror_members")
            try connection.execute("DELETE FROM mirror_rollups")
        }
    }
}

extension Simulation {
    /// Starts the scenario's hub (`hub`).
    public func startHub() throws {
        guard hub == nil else { throw SimulationInputError(message: "the hub is already running") }
        hub = try SimulatedHub(simulation: self)
    }
}
