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
        let answer = try client.send("GET", "\(client.accountPath)/roster")
        if answer.status == 404 { throw RosterError.unknownAccount(account) }
        guard answer.status == 200, let changes = answer.json["changes"] as? [String] else { throw HubClientError(answer, doing: "read the roster") }
        let decoded = try changes.map { text -> RosterChange in
            guard let bytes = Data(base64Encoded: text) else { throw HubClientError(.refused, "the hub sent a roster change that is not base64", status: 200) }
            return try RosterChange(decoding: [UInt8](bytes))
        }
        return try Roster(account: account, changes: decoded)
    }

    /// Creates the account on the hub from its founding roster.
    /// - Throws: ``RosterError`` `alreadyMember` when the hub has the account, ``HubClientError`` otherwise.
    public func found(_ roster: Roster) throws {
        try requireOwn(roster.account)
        var body: [String: Any] = ["genesis": Data(roster.encoded).base64EncodedString()]
        if let invite { body["invite"] = invite }
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
        let answer = try client.send("GET", "\(client.accountPath)/keys")
        guard answer.status == 200, let keys = answer.json["keys"] as? [[String: Any]] else { throw HubClientError(answer, doing: "read the wrapped keys") }
        return try keys.map { entry in
            guard let epoch = (entry["epoch"] as? NSNumber)?.uint32Value, let text = entry["sealed"] as? String, let sealed = Data(base64Encoded: text) else {
                throw HubClientError(.refused, "the hub sent a wrapped key without an epoch or sealed bytes", status: 200)
            }
            return WrappedAccountKey(account: account, epoch: epoch, recipient: device, sealed: [UInt8](sealed))
        }
    }

    private func requireOwn(_ account: AccountID) throws {
        guard account == client.account else {
            throw HubClientError(.refused, "this directory serves account \(client.account.hex), not \(account.hex)")
        }
    }
}

/// The library's ``AnchorStore`` over a hub's anchor object (HUB-API "Anchor"):
/// the hub checks the header, refuses a lower generation and replaces the
/// anchor in one write, so a reader never sees half an anchor.
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
            answer = try client.send("PUT", "\(client.accountPath)/anchor", body: AnchorFile.encode(anchor, key: key))
        } catch {
            throw AnchorError(.unavailable, "cannot reach the hub to write the anchor: \(error); the previous anchor is unchanged")
        }
        guard answer.status == 200 else {
            throw AnchorError(.unavailable, "the hub did not take the anchor (\(answer.status) \(answer.refusal?.code ?? "")): \(answer.refusal?.message ?? ""); the previous anchor is unchanged")
        }
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
