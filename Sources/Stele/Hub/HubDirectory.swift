import Foundation

/// The library's ``Directory`` over a hub's API (HUB-API "Accounts, devices,
/// sessions"), for one device: what it reads it verifies as every directory's
/// roster is verified (``Roster/init(account:changes:)``), so a hub can
/// withhold changes but never add one.
public final class HubDirectory: Directory {
    public let client: HubClient
    /// The invite code ``found(_:)`` spends (nil on a hub started with `--open`).
    public let invite: String?

    public init(client: HubClient, invite: String? = nil) {
        self.client = client
        self.invite = invite
    }

    public func roster(of account: AccountID) throws -> Roster {
        try requireOwn(account)
        return try HubDirectorySource.roster(of: account, from: try client.send("GET", "\(client.accountPath)/roster"))
    }

    /// Creates the account on the hub from its founding roster.
    /// - Throws: ``RosterError`` `alreadyMember` when the hub has the account, ``HubClientError`` otherwise.
    public func found(_ roster: Roster) throws { try found(roster, name: nil) }

    /// Creates the account on the hub from its founding roster; `name` names the
    /// founding device in the hub's status.
    /// - Throws: ``RosterError`` `alreadyMember` when the hub has the account, ``HubClientError`` otherwise.
    public func found(_ roster: Roster, name: String?) throws {
        try requireOwn(roster.account)
        var body: [String: Any] = ["genesis": Data(roster.encoded).base64EncodedString()]
        if let invite { body["invite"] = invite }
        if let name { body["name"] = name }
        let answer = try client.send("POST", "/v1/accounts", json: body, authenticated: false)
        if answer.status == 409, let founder = roster.changes.first?.device { throw RosterError.alreadyMember(founder) }
        guard answer.status == 201 else { throw HubClientError(answer, doing: "create account \(roster.account.hex)") }
    }

    public func append(_ change: RosterChange, to account: AccountID) throws {
        try requireOwn(account)
        let answer = try client.send("POST", "\(client.accountPath)/roster", json: ["change": Data(change.encoded).base64EncodedString()])
        guard answer.status == 200 else { throw HubClientError(answer, doing: "append a roster change") }
    }

    public func publish(_ key: WrappedAccountKey) throws {
        try requireOwn(key.account)
        let answer = try client.send("PUT", "\(client.accountPath)/keys/\(key.recipient.hex)", json: ["epoch": Int(key.epoch), "sealed": Data(key.sealed).base64EncodedString()])
        guard answer.status == 200 else { throw HubClientError(answer, doing: "publish a wrapped key for \(key.recipient.hex.prefix(8))") }
    }

    /// The keys wrapped for this client's device (a hub serves each device only its own).
    public func wrappedKeys(for device: DeviceID, of account: AccountID) throws -> [WrappedAccountKey] {
        try requireOwn(account)
        guard device == client.identity.deviceID else {
            throw HubClientError(.refused, "a hub serves each device only the keys wrapped for it; this client is \(client.identity.deviceID.hex.prefix(8)), not \(device.hex.prefix(8))")
        }
        return try HubDirectorySource.keys(of: account, for: device, from: try client.send("GET", "\(client.accountPath)/keys"))
    }

    /// Asks to join the account (no session: the device is not a member yet),
    /// leaving its device id, its roster signing key and `name` for a member to approve.
    /// - Throws: ``HubClientError`` (`403 revoked`: this identity was revoked; `409`: it is a member already).
    public func requestJoin(name: String) throws {
        let answer = try client.send(
            "POST", "\(client.accountPath)/join-requests",
            json: ["device": client.identity.deviceID.hex, "publicKeys": Data(try client.identity.signingKey()).base64EncodedString(), "name": name],
            authenticated: false)
        guard answer.status == 202 else { throw HubClientError(answer, doing: "leave a join request on account \(client.account.hex)") }
    }

    /// The join requests waiting for approval, oldest first.
    public func joinRequests() throws -> [JoinRequest] {
        let answer = try client.send("GET", "\(client.accountPath)/join-requests")
        guard answer.status == 200, let requests = answer.json["requests"] as? [[String: Any]] else { throw HubClientError(answer, doing: "list the join requests") }
        return requests.compactMap { entry in
            guard let device = (entry["device"] as? String).flatMap(DeviceID.init(hex:)), let keys = (entry["publicKeys"] as? String).flatMap({ Data(base64Encoded: $0) })
            else { return nil }
            return JoinRequest(device: device, signingKey: [UInt8](keys), name: entry["name"] as? String ?? "", createdAtMilliseconds: (entry["createdAt"] as? NSNumber)?.int64Value ?? 0)
        }
    }

    private func requireOwn(_ account: AccountID) throws {
        guard account == client.account else {
            throw HubClientError(.refused, "this directory serves account \(client.account.hex), not \(account.hex)")
        }
    }
}

/// The library's ``AnchorStore`` over a hub's anchor object (HUB-API "Anchor"):
/// the hub checks the header, refuses a lower generation and, asked with
/// `Stele-Anchor-Rule: one-round-per-generation` as this store always does,
/// another round's anchor of the same generation (``AnchorHeader/mayReplace(_:)``),
/// and replaces the anchor in one write, so a reader never sees half an anchor.
public final class HubAnchorStore: AnchorStore {
    public let client: HubClient

    public init(client: HubClient) {
        self.client = client
    }

    public func header(of account: AccountID) throws -> AnchorHeader? {
        guard let bytes = try fetch(account) else { return nil }
        return try checked(AnchorFile.header(bytes), account)
    }

    public func read(_ account: AccountID, key: AccountKey) throws -> Anchor? {
        guard let bytes = try fetch(account) else { return nil }
        _ = try checked(AnchorFile.header(bytes), account)
        return try AnchorFile.decode(bytes, key: key)
    }

    public func write(_ anchor: Anchor, key: AccountKey) throws {
        guard anchor.header.account == client.account else {
            throw AnchorError(.accountMismatch, "this store holds account \(client.account.hex)'s anchor, not \(anchor.header.account.hex)'s")
        }
        let answer: HubClient.Answer
        do {
            answer = try client.send("PUT", "\(client.accountPath)/anchor", body: AnchorFile.encode(anchor, key: key), headers: AnchorRule.asked)
        } catch {
            throw AnchorError(.unavailable, "cannot reach the hub to write the anchor: \(error); the previous anchor is unchanged")
        }
        if let superseded = Self.superseded(answer) { throw superseded }
        guard answer.status == 200 else {
            throw AnchorError(.unavailable, "the hub did not take the anchor (\(answer.status) \(answer.refusal?.code ?? "")): \(answer.refusal?.message ?? ""); the previous anchor is unchanged")
        }
    }

    /// A `409` for a later anchor the hub holds (`stale_generation`, `generation_taken`)
    /// as ``AnchorError`` `superseded`; `nil` for any other answer.
    static func superseded(_ answer: HubClient.Answer) -> AnchorError? {
        guard answer.status == 409, let code = answer.refusal?.code, ["stale_generation", "generation_taken"].contains(code) else { return nil }
        return AnchorError(.superseded, "the hub holds a later anchor (\(code)): \(answer.refusal?.message ?? ""); the stored anchor is unchanged")
    }

    private func fetch(_ account: AccountID) throws -> [UInt8]? {
        guard account == client.account else {
            throw AnchorError(.accountMismatch, "this store holds account \(client.account.hex)'s anchor, not \(account.hex)'s")
        }
        let answer: HubClient.Answer
        do {
            answer = try client.send("GET", "\(client.accountPath)/anchor")
        } catch {
            throw AnchorError(.unavailable, "cannot reach the hub to read the anchor: \(error)")
        }
        // The session just opened, so the account exists: a 404 is "no anchor yet".
        if answer.status == 404 { return nil }
        guard answer.status == 200 else {
            throw AnchorError(.unavailable, "the hub did not serve the anchor (\(answer.status) \(answer.refusal?.code ?? "")): \(answer.refusal?.message ?? "")")
        }
        return answer.body
    }

    private func checked(_ header: AnchorHeader, _ account: AccountID) throws -> AnchorHeader {
        guard header.account == account else {
            throw AnchorError(.accountMismatch, "the hub's anchor belongs to account \(header.account.hex), not \(account.hex)")
        }
        return header
    }
}

/// A device asking to join an account (HUB-API `join-requests`): what a member
/// sees before approving it.
public struct JoinRequest: Sendable, Equatable {
    public let device: DeviceID
    /// The Ed25519 key the device will sign roster changes and sessions with.
    public let signingKey: [UInt8]
    public let name: String
    public let createdAtMilliseconds: Int64

    public init(device: DeviceID, signingKey: [UInt8], name: String, createdAtMilliseconds: Int64) {
        self.device = device
        self.signingKey = signingKey
        self.name = name
        self.createdAtMilliseconds = createdAtMilliseconds
    }

    /// The fingerprint a person compares on both screens (``DeviceFingerprint``).
    public var fingerprint: String { DeviceFingerprint.of(device: device, signingKey: signingKey) }
}

/// A short text both the joining device and the approving one print, so a
/// person can check that the request a member approves is the device in their
/// hand and not one a hub or an eavesdropper slipped in: the first 48 bits of
/// SHA-256 over the device id and its signing key, as three groups of four hex digits.
public enum DeviceFingerprint {
    public static func of(device: DeviceID, signingKey: [UInt8]) -> String {
        let digest = Hash32.sha256(of: Array("stele device fingerprint v1".utf8) + device.bytes + signingKey).bytes
        let hex = Hex.encode(digest.prefix(6))
        return stride(from: 0, to: 12, by: 4).map { start in
            String(hex[hex.index(hex.startIndex, offsetBy: start)..<hex.index(hex.startIndex, offsetBy: start + 4)])
        }.joined(separator: "-")
    }

    /// This device's own fingerprint.
    public static func of(_ identity: DeviceIdentity) throws -> String { of(device: identity.deviceID, signingKey: try identity.signingKey()) }
}
