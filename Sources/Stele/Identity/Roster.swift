/// The account's roster: which devices belong to it (DESIGN G6; the barrier
/// fences on it, §6). It is an append-only log of signed changes, and every
/// device verifies the whole log it reads, so whoever stores it (the in-process
/// ``MemoryDirectory``, later the hub) cannot add a device of its own: a join is
/// valid only when signed by a device that was a member at that point of the log.
///
/// - The first change is the founder approving itself.
/// - `join D` is signed by a member (the approver) and carries D's Ed25519 key.
/// - `revoke D` is signed by a member; D stays off for good (it may come back only
///   as a new identity, approved again).
/// - Each signature covers the account and the change's position in the log, so
///   a change cannot be replayed into another account or later in the log (an
///   old approval cannot bring a revoked device back).
public struct Roster: Sendable, Equatable {
    public let account: AccountID
    public private(set) var changes: [RosterChange]
    /// The devices on the roster now.
    public private(set) var members: Set<DeviceID> = []
    /// Devices revoked from it.
    public private(set) var revoked: Set<DeviceID> = []
    private var signingKeys: [DeviceID: [UInt8]] = [:]

    /// Verifies a log read from a directory.
    /// - Throws: ``RosterError`` for the first change that does not hold.
    public init(account: AccountID, changes: [RosterChange]) throws(RosterError) {
        self.account = account
        self.changes = []
        guard !changes.isEmpty else { throw .empty }
        for change in changes { try append(change) }
    }

    /// A new account's roster, founded by one device.
    public static func founding(account: AccountID, by founder: DeviceIdentity) throws -> Roster {
        let change = try RosterChange.signed(.join, device: founder.deviceID, signingKey: try founder.signingKey(), by: founder, account: account, index: 0)
        return try Roster(account: account, changes: [change])
    }

    /// The number of changes: a new change is signed for this position.
    public var version: Int { changes.count }

    /// The newest account key epoch `device` could hold as a member: the one its
    /// own revocation replaced, one more than the revocations before it (epochs are
    /// numbered by the roster, ``Membership/revoke(_:by:in:)``); `nil` when it is
    /// not revoked.
    public func lastEpoch(ofRevoked device: DeviceID) -> UInt32? {
        var before: UInt32 = 0
        for change in changes where change.action == .revoke {
            if change.device == device { return before + 1 }
            before += 1
        }
        return nil
    }

    /// The Ed25519 key a member signs roster changes with.
    public func signingKey(of device: DeviceID) -> [UInt8]? { signingKeys[device] }

    /// The roster to adopt on reading `newer` from a directory, when this device
    /// already verified this one: `newer` must keep every change of it, in order,
    /// and add only after them. A directory cannot undo a revocation by serving an
    /// older log, nor swap in a log founded by a device of its own.
    /// - Throws: ``RosterError`` `rewritten` (this roster stays the one to use).
    public func adopting(_ newer: Roster) throws(RosterError) -> Roster {
        guard newer.account == account, newer.changes.count >= changes.count, Array(newer.changes.prefix(changes.count)) == changes else {
            throw .rewritten(kept: changes.count)
        }
        return newer
    }

    /// Bytes: the account, the number of changes, then each change.
    public var encoded: [UInt8] {
        var writer = ByteWriter(capacity: 16 + changes.count * 200)
        writer.append(account.bytes)
        writer.appendVarint(UInt64(changes.count))
        for change in changes { change.write(to: &writer) }
        return writer.bytes
    }

    /// Reads and verifies a roster ``encoded`` wrote.
    /// - Throws: ``CodecError`` when the bytes are cut or malformed, ``RosterError`` when the log does not hold.
    public init(decoding bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        let account = try AccountID(bytes: try reader.readBytes(AccountID.byteCount, "roster account"))
        let count = try reader.readVarint("roster changes")
        guard count <= 100_000 else { throw CodecError(.valueOutOfRange, "a roster of \(count) changes") }
        var changes: [RosterChange] = []
        for _ in 0..<count { changes.append(try RosterChange(reading: &reader)) }
        try reader.expectEnd("roster")
        try self.init(account: account, changes: changes)
    }

    /// Checks `change` against the log so far and appends it.
    /// - Throws: ``RosterError`` and leaves the roster unchanged when it does not hold.
    public mutating func append(_ change: RosterChange) throws(RosterError) {
        let index = changes.count
        let founding = index == 0
        if founding {
            guard change.action == .join, change.actor == change.device else { throw .founderNotSelfApproved }
        } else {
            guard members.contains(change.actor) else { throw .actorNotAMember(change.actor, index: index) }
        }
        let actorKey = founding ? change.signingKey : signingKeys[change.actor] ?? []
        guard KeyAgreement.verify(change.signature, of: change.statement(account: account, index: index), publicKey: actorKey) else {
            throw .badSignature(index: index)
        }
        switch change.action {
        case .join:
            guard !members.contains(change.device) else { throw .alreadyMember(change.device) }
            guard !revoked.contains(change.device) else { throw .revokedCannotRejoin(change.device) }
            guard change.signingKey.count == 32 else { throw .badSignature(index: index) }
            members.insert(change.device)
            signingKeys[change.device] = change.signingKey
        case .revoke:
            guard members.contains(change.device) else { throw .notAMember(change.device) }
            guard members.count > 1 else { throw .lastMember(change.device) }
            members.remove(change.device)
            revoked.insert(change.device)
        }
        changes.append(change)
    }
}

/// One signed change to a ``Roster``.
public struct RosterChange: Sendable, Equatable {
    public enum Action: UInt8, Sendable {
        case join = 1
        case revoke = 2
    }

    public let action: Action
    /// The device joining or revoked.
    public let device: DeviceID
    /// A joining device's Ed25519 key (empty for a revoke).
    public let signingKey: [UInt8]
    /// The member that approved or revoked (the founder approves itself).
    public let actor: DeviceID
    /// The actor's Ed25519 signature of ``statement(account:index:)``.
    public let signature: [UInt8]

    public init(action: Action, device: DeviceID, signingKey: [UInt8], actor: DeviceID, signature: [UInt8]) {
        self.action = action
        self.device = device
        self.signingKey = signingKey
        self.actor = actor
        self.signature = signature
    }

    /// An approval of `device` by `approver`, for position `index` of `account`'s roster.
    public static func approval(of device: DeviceID, signingKey: [UInt8], by approver: DeviceIdentity, account: AccountID, index: Int) throws -> RosterChange {
        try signed(.join, device: device, signingKey: signingKey, by: approver, account: account, index: index)
    }

    /// A revocation of `device` by `revoker`, for position `index` of `account`'s roster.
    public static func revocation(of device: DeviceID, by revoker: DeviceIdentity, account: AccountID, index: Int) throws -> RosterChange {
        try signed(.revoke, device: device, signingKey: [], by: revoker, account: account, index: index)
    }

    static func signed(_ action: Action, device: DeviceID, signingKey: [UInt8], by actor: DeviceIdentity, account: AccountID, index: Int) throws -> RosterChange {
        let unsigned = RosterChange(action: action, device: device, signingKey: signingKey, actor: actor.deviceID, signature: [])
        let signature = try KeyAgreement.sign(unsigned.statement(account: account, index: index), seed: try actor.signingSeed)
        return RosterChange(action: action, device: device, signingKey: signingKey, actor: actor.deviceID, signature: signature)
    }

    /// One change's bytes, as ``Roster/encoded`` writes each (a hub carries changes one by one).
    public var encoded: [UInt8] {
        var writer = ByteWriter(capacity: 140)
        write(to: &writer)
        return writer.bytes
    }

    /// Reads one change ``encoded`` wrote. Nothing is verified: a change holds only against a roster (``Roster/append(_:)``).
    /// - Throws: ``CodecError`` when the bytes are cut, malformed or followed by more.
    public init(decoding bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        self = try RosterChange(reading: &reader)
        try reader.expectEnd("roster change")
    }

    /// Whether the change carries `publicKey`'s signature for position `index` of `account`'s roster
    /// (a hub tells a change signed for a position already taken from a forged one).
    public func isSigned(forIndex index: Int, of account: AccountID, by publicKey: [UInt8]) -> Bool {
        KeyAgreement.verify(signature, of: statement(account: account, index: index), publicKey: publicKey)
    }

    func write(to writer: inout ByteWriter) {
        writer.append(action.rawValue)
        writer.append(device.bytes)
        writer.appendVarint(UInt64(signingKey.count))
        writer.append(signingKey)
        writer.append(actor.bytes)
        writer.appendVarint(UInt64(signature.count))
        writer.append(signature)
    }

    init(reading reader: inout ByteReader) throws {
        let raw = try reader.readBytes(1, "roster action").first ?? 0
        guard let action = Action(rawValue: raw) else { throw CodecError(.valueOutOfRange, "unknown roster action \(raw)") }
        let device = try DeviceID(bytes: try reader.readBytes(DeviceID.byteCount, "roster device"))
        let keyCount = try reader.readVarint("signing key length")
        guard keyCount <= 32 else { throw CodecError(.valueOutOfRange, "a signing key of \(keyCount) bytes") }
        let signingKey = Array(try reader.readBytes(Int(keyCount), "signing key"))
        let actor = try DeviceID(bytes: try reader.readBytes(DeviceID.byteCount, "roster actor"))
        let signatureCount = try reader.readVarint("signature length")
        guard signatureCount <= 64 else { throw CodecError(.valueOutOfRange, "a signature of \(signatureCount) bytes") }
        let signature = Array(try reader.readBytes(Int(signatureCount), "signature"))
        self.init(action: action, device: device, signingKey: signingKey, actor: actor, signature: signature)
    }

    /// The bytes signed: a label, the account, the position, then the change.
    func statement(account: AccountID, index: Int) -> [UInt8] {
        var writer = ByteWriter(capacity: 160)
        writer.append(Array("stele roster change v1".utf8))
        writer.append(account.bytes)
        writer.appendVarint(UInt64(index))
        writer.append(action.rawValue)
        writer.append(device.bytes)
        writer.appendVarint(UInt64(signingKey.count))
        writer.append(signingKey)
        writer.append(actor.bytes)
        return writer.bytes
    }
}

/// Why a roster change, or a roster read from a directory, was refused.
public enum RosterError: Error, Sendable, Equatable, CustomStringConvertible {
    case empty
    case founderNotSelfApproved
    /// The change is signed by a device that was not a member at that point: a forged approval.
    case actorNotAMember(DeviceID, index: Int)
    case badSignature(index: Int)
    case alreadyMember(DeviceID)
    case notAMember(DeviceID)
    case revokedCannotRejoin(DeviceID)
    case lastMember(DeviceID)
    case unknownAccount(AccountID)
    /// A directory served a log that does not extend the one this device verified.
    case rewritten(kept: Int)

    public var description: String {
        switch self {
        case .empty: "the roster has no changes; an account starts with its founder"
        case .founderNotSelfApproved: "the roster's first change must be its founding device approving itself"
        case let .actorNotAMember(device, index): "change \(index) is signed by \(device), which was not on the roster then: a forged approval"
        case .badSignature(let index): "change \(index) does not carry a valid signature of its approver"
        case .alreadyMember(let device): "\(device) is on the roster already"
        case .notAMember(let device): "\(device) is not on the roster"
        case .revokedCannotRejoin(let device): "\(device) was revoked; it can come back only as a new device, approved again"
        case .lastMember(let device): "\(device) is the roster's last device; an account keeps at least one"
        case .unknownAccount(let account): "the directory holds no roster for account \(account)"
        case .rewritten(let kept):
            "the directory served a roster that does not extend the \(kept) changes this device already verified (a revocation undone, or another founder); "
                + "refused: this device keeps the roster it holds. Check the directory: it was rolled back or tampered with"
        }
    }
}
