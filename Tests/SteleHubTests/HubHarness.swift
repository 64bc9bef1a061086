import Foundation
import Stele
import SteleHub
import SteleHubPostgres
import SteleSQL
import Synchronization
import TestSupport

/// The storages the handler's tests run on: every test of ``HubServiceTests`` runs on each.
enum Backend: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite
    case postgresql

    var description: String { rawValue }

    /// A new, empty storage of this kind, kept alive by `keep`.
    func makeStorage(_ keep: inout [AnyObject]) throws -> any HubStorage {
        switch self {
        case .sqlite:
            let directory = try TemporaryDirectory("stele-hub")
            keep.append(directory)
            return try SQLiteHubStorage(path: directory.file("hub.sqlite"))
        case .postgresql:
            return try PostgresHubStorage(url: try PostgresTestCluster.url())
        }
    }
}

/// A hub service on a fresh storage, a clock the test moves, and helpers that
/// speak HUB-API as a client would.
final class HubHarness {
    let storage: any HubStorage
    let service: HubService
    let clock = ManualClock()
    private var keep: [AnyObject] = []

    init(_ backend: Backend, configure: (inout HubService.Configuration) -> Void = { _ in }) throws {
        var keep: [AnyObject] = []
        storage = try backend.makeStorage(&keep)
        self.keep = keep
        let clock = self.clock
        var configuration = HubService.Configuration()
        configure(&configuration)
        service = HubService(storage: storage, configuration: configuration, clock: { clock.milliseconds })
    }

    /// A hub service on `storage`, which the harness closes when it goes.
    init(storage: any HubStorage) {
        self.storage = storage
        let clock = self.clock
        service = HubService(storage: storage, clock: { clock.milliseconds })
    }

    deinit { storage.close() }

    var now: Int64 { clock.milliseconds }

    func advance(seconds: Int64) { clock.advance(milliseconds: seconds * 1000) }

    /// A request answered at once (a test of a long poll uses ``service`` directly).
    @discardableResult
    func call(_ method: String, _ target: String, json: [String: Any]? = nil, body: [UInt8] = [], token: String? = nil, headers more: [String: String] = [:]) -> HubResponse {
        var headers = Dictionary(uniqueKeysWithValues: more.map { ($0.key.lowercased(), $0.value) })
        if let token { headers["authorization"] = "Bearer \(token)" }
        let bytes = json.map { Array(HubJSON.encode($0).utf8) } ?? body
        switch service.handle(HubRequest(method: method, target: target, headers: headers, body: bytes)) {
        case .respond(let response): return response
        case .wait(let wait): return wait.poll() ?? wait.expire()
        }
    }

    /// An account founded by `founder` through an invite; returns its id.
    func found(_ founder: DeviceIdentity, account: AccountID = AccountID.generate()) throws -> AccountID {
        let invite = try service.createInvite()
        let roster = try Roster.founding(account: account, by: founder)
        let response = call("POST", "/v1/accounts", json: ["invite": invite, "genesis": Data(roster.encoded).base64EncodedString()])
        guard response.status == 201 else { throw HarnessError("founding failed: \(response.status) \(response.text)") }
        return account
    }

    /// A session token for `device`.
    func session(_ device: DeviceIdentity, _ account: AccountID) throws -> String {
        let time = now
        let signature = try HubSessionProof.sign(by: device, account: account, timeMilliseconds: time)
        let response = call("POST", "/v1/accounts/\(account.hex)/sessions", json: ["device": device.deviceID.hex, "time": time, "signature": Data(signature).base64EncodedString()])
        guard response.status == 200, let token = response.json["token"] as? String else { throw HarnessError("session failed: \(response.status) \(response.text)") }
        return token
    }

    /// The roster as the hub serves it.
    func roster(_ account: AccountID, token: String) throws -> Roster {
        let response = call("GET", "/v1/accounts/\(account.hex)/roster", token: token)
        guard response.status == 200, let changes = response.json["changes"] as? [String] else { throw HarnessError("roster read failed: \(response.status) \(response.text)") }
        return try Roster(account: account, changes: changes.map { try RosterChange(decoding: [UInt8](Data(base64Encoded: $0) ?? Data())) })
    }

    /// Approves `joiner` by `approver` through the roster endpoint.
    func approve(_ joiner: DeviceIdentity, by approver: DeviceIdentity, _ account: AccountID, token: String) throws {
        let roster = try roster(account, token: token)
        let change = try RosterChange.approval(of: joiner.deviceID, signingKey: try joiner.signingKey(), by: approver, account: account, index: roster.version)
        let response = call("POST", "/v1/accounts/\(account.hex)/roster", json: ["change": Data(change.encoded).base64EncodedString()], token: token)
        guard response.status == 200 else { throw HarnessError("approval failed: \(response.status) \(response.text)") }
    }

    /// Every row of every hub table, in a stable order: what a refused request must leave as it was.
    func snapshot() throws -> [String] {
        let tables: [(String, String)] = [
            ("invites", "code_hash"), ("accounts", "id"), ("roster_changes", "account, idx"), ("devices", "account, device"),
            ("sessions", "token_hash"), ("join_requests", "account, device"), ("wrapped_keys", "account, device, epoch"),
            ("mailbox", "account, device, seq"), ("anchors", "account"),
            ("records", "account, kind, id"), ("record_members", "account, kind, id, set_name, member"), ("record_kinds", "account, kind"),
            ("mutations", "account, mutation"),
        ]
        return try storage.transaction { sql in
            try tables.flatMap { table, order in
                try sql.query("SELECT * FROM \(table) ORDER BY \(order)", []).map { "\(table): \($0)" }
            }
        }
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension HubResponse {
    var text: String { String(decoding: body, as: UTF8.self) }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// The HUB-API error code, when the body is an error.
    var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
    var errorMessage: String? { (json["error"] as? [String: Any])?["message"] as? String }
}

/// The hub's wall clock in a test: it moves only when told.
final class ManualClock: Sendable {
    private let value = Mutex<Int64>(1_800_000_000_000)
    var milliseconds: Int64 { value.withLock { $0 } }
    func advance(milliseconds: Int64) { value.withLock { $0 += milliseconds } }
}
