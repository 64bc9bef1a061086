import Dispatch
import Foundation

/// ``AnchorSubstrate`` over the hub's anchor object (HUB-API "Anchor"): the
/// hub checks the header, refuses a lower generation (`409 stale_generation`)
/// and, asked with `Stele-Anchor-Rule: one-round-per-generation`, another
/// round's anchor of the same generation (`409 generation_taken`,
/// ``AnchorHeader/mayReplace(_:)``), and replaces the anchor in one write.
/// Completions run on the runtime's queue.
final class HubAnchorSubstrate: AnchorSubstrate {
    private let client: HubClient
    private let queue: DispatchQueue
    /// A `403` on this device's session: revoked, perhaps (the runtime checks).
    var onForbidden: () -> Void = {}

    init(client: HubClient, queue: DispatchQueue) {
        self.client = client
        self.queue = queue
    }

    func writeAnchor(_ sealed: [UInt8], of account: AccountID, completion: @escaping (Result<Void, AnchorError>) -> Void) {
        let done = QueueConfined((completion, self), on: queue)
        client.request("PUT", "\(client.accountPath)/anchor", body: sealed, headers: AnchorRule.asked) { result in
            done.async { completion, substrate in
                switch result {
                case .success(let answer) where answer.status == 200:
                    completion(.success(()))
                case .success(let answer):
                    if let superseded = HubAnchorStore.superseded(answer) { return completion(.failure(superseded)) }
                    if answer.status == 403 { substrate.onForbidden() }
                    completion(.failure(AnchorError(.unavailable, "the hub did not take the anchor (\(answer.status) \(answer.refusal?.code ?? "")): \(answer.refusal?.message ?? ""); the previous anchor is unchanged")))
                case .failure(let error):
                    completion(.failure(AnchorError(.unavailable, "cannot reach the hub to write the anchor: \(error.message); the previous anchor is unchanged")))
                }
            }
        }
    }

    func readAnchor(of account: AccountID, completion: @escaping (Result<[UInt8]?, AnchorError>) -> Void) {
        let done = QueueConfined((completion, self), on: queue)
        client.request("GET", "\(client.accountPath)/anchor") { result in
            done.async { completion, substrate in
                switch result {
                case .success(let answer) where answer.status == 200:
                    completion(.success(answer.body))
                case .success(let answer) where answer.status == 404 && answer.refusal?.code == "not_found":
                    // The session just opened, so the account exists: a 404 is "no anchor yet".
                    completion(.success(nil))
                case .success(let answer):
                    if answer.status == 403 { substrate.onForbidden() }
                    completion(.failure(AnchorError(.unavailable, "the hub did not serve the anchor (\(answer.status) \(answer.refusal?.code ?? "")): \(answer.refusal?.message ?? "")")))
                case .failure(let error):
                    completion(.failure(AnchorError(.unavailable, "cannot reach the hub to read the anchor: \(error.message)")))
                }
            }
        }
    }
}

/// ``DirectorySource`` over the hub (HUB-API "Accounts, devices, sessions"):
/// the own account's roster and this device's wrapped keys with its session;
/// a contact's roster through `contact-roster`, without one. Nothing read is
/// trusted: the driver verifies and pins the roster and opens each key.
/// Completions run on the runtime's queue.
final class HubDirectorySource: DirectorySource {
    private let client: HubClient
    private let queue: DispatchQueue
    /// What the last read of a contact's roster found: its devices, for the relay's `contact-relay` path.
    private(set) var contactDevices: [DeviceID: AccountID] = [:]
    /// A `403` on this device's session: revoked, perhaps (the runtime checks).
    var onForbidden: () -> Void = {}

    init(client: HubClient, queue: DispatchQueue) {
        self.client = client
        self.queue = queue
    }

    func read(_ account: AccountID, keysFor device: DeviceID?, completion: @escaping (Result<DirectoryReading, any Error>) -> Void) {
        let own = account == client.account
        let done = QueueConfined((completion, self), on: queue)
        let path = own ? "\(client.accountPath)/roster" : "/v1/accounts/\(account.hex)/contact-roster"
        client.request("GET", path, authenticated: own) { [client] result in
            let roster = Result { () throws -> Roster in try Self.roster(of: account, from: try result.get()) }
            guard own, device != nil, case .success = roster else {
                return done.async { completion, source in source.finish(account, roster.map { DirectoryReading(roster: $0, wrappedKeys: []) }, completion) }
            }
            client.request("GET", "\(client.accountPath)/keys") { keys in
                let reading = Result { () throws -> DirectoryReading in
                    DirectoryReading(roster: try roster.get(), wrappedKeys: try Self.keys(of: account, for: client.identity.deviceID, from: try keys.get()))
                }
                done.async { completion, source in source.finish(account, reading, completion) }
            }
        }
    }

    private func finish(_ account: AccountID, _ reading: Result<DirectoryReading, any Error>, _ completion: (Result<DirectoryReading, any Error>) -> Void) {
        if case .failure(let error as HubClientError) = reading, error.status == 403, account == client.account { onForbidden() }
        if case .success(let found) = reading, account != client.account {
            contactDevices = contactDevices.filter { $0.value != account }
            for member in found.roster.members { contactDevices[member] = account }
        }
        completion(reading)
    }

    /// The verified roster in a `roster` answer.
    static func roster(of account: AccountID, from answer: HubAnswer) throws -> Roster {
        if answer.status == 404 { throw RosterError.unknownAccount(account) }
        guard answer.status == 200 else { throw HubClientError(answer, doing: "read account \(account.hex.prefix(8))'s roster") }
        guard let changes = answer.json["changes"] as? [String] else {
            throw HubClientError(.malformed, "the hub's roster answer has no \"changes\" list", status: answer.status)
        }
        let decoded = try changes.map { text -> RosterChange in
            guard let bytes = Data(base64Encoded: text) else { throw HubClientError(.malformed, "the hub sent a roster change that is not base64", status: 200) }
            return try RosterChange(decoding: [UInt8](bytes))
        }
        return try Roster(account: account, changes: decoded)
    }

    /// The wrapped keys in a `keys` answer.
    static func keys(of account: AccountID, for device: DeviceID, from answer: HubAnswer) throws -> [WrappedAccountKey] {
        guard answer.status == 200 else { throw HubClientError(answer, doing: "read the wrapped keys") }
        guard let keys = answer.json["keys"] as? [[String: Any]] else { throw HubClientError(.malformed, "the hub's keys answer has no \"keys\" list", status: 200) }
        return try keys.map { entry in
            guard let epoch = (entry["epoch"] as? NSNumber)?.uint32Value, let text = entry["sealed"] as? String, let sealed = Data(base64Encoded: text) else {
                throw HubClientError(.malformed, "the hub sent a wrapped key without an epoch or sealed bytes", status: 200)
            }
            return WrappedAccountKey(account: account, epoch: epoch, recipient: device, sealed: [UInt8](sealed))
        }.sorted { $0.epoch < $1.epoch }
    }
}
