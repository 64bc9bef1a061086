import Synchronization

/// Where an account's roster and its wrapped account keys are kept and read
/// (the in-process ``MemoryDirectory`` for the simulator and tests; the hub's
/// implementation comes with the hub). A directory is trusted with neither: the
/// roster is a signed log every device verifies (``Roster``) and each account
/// key is sealed to one device by a member (``WrappedAccountKey``). A
/// ``FleetDriver`` reads it (``DirectorySource``), pins and verifies what it
/// reads, and hands changes to its ``FleetNode`` as inputs
/// (``FleetInput/rosterChanged(members:revoked:)``, ``FleetInput/accountKeysChanged(_:)``).
public protocol Directory: AnyObject, Sendable {
    /// The account's roster, verified.
    /// - Throws: ``RosterError`` (`unknownAccount` when there is none, or the first change that does not hold).
    func roster(of account: AccountID) throws -> Roster
    /// Starts an account's roster. - Throws: ``RosterError`` `alreadyMember` when the account exists.
    func found(_ roster: Roster) throws
    /// Appends a signed change. - Throws: ``RosterError`` when it does not hold against the roster; nothing changes.
    func append(_ change: RosterChange, to account: AccountID) throws
    /// Stores an account key wrapped for one device (one per device and epoch; the same again replaces it).
    func publish(_ key: WrappedAccountKey) throws
    /// The account keys wrapped for `device`, oldest first.
    func wrappedKeys(for device: DeviceID, of account: AccountID) throws -> [WrappedAccountKey]
}

/// A ``Directory`` held in memory.
public final class MemoryDirectory: Directory {
    private struct State {
        var rosters: [AccountID: Roster] = [:]
        var keys: [AccountID: [DeviceID: [UInt32: WrappedAccountKey]]] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    public func roster(of account: AccountID) throws -> Roster {
        guard let roster = state.withLock({ $0.rosters[account] }) else { throw RosterError.unknownAccount(account) }
        return roster
    }

    public func found(_ roster: Roster) throws {
        try state.withLock { state in
            if let existing = state.rosters[roster.account], let founder = existing.changes.first?.device { throw RosterError.alreadyMember(founder) }
            state.rosters[roster.account] = try Roster(account: roster.account, changes: roster.changes)
        }
    }

    public func append(_ change: RosterChange, to account: AccountID) throws {
        try state.withLock { state in
            guard var roster = state.rosters[account] else { throw RosterError.unknownAccount(account) }
            try roster.append(change)
            state.rosters[account] = roster
        }
    }

    public func publish(_ key: WrappedAccountKey) throws {
        state.withLock { $0.keys[key.account, default: [:]][key.recipient, default: [:]][key.epoch] = key }
    }

    public func wrappedKeys(for device: DeviceID, of account: AccountID) throws -> [WrappedAccountKey] {
        state.withLock { state in (state.keys[account]?[device] ?? [:]).sorted { $0.key < $1.key }.map(\.value) }
    }
}

extension KeyRing {
    /// Every account key this ring holds, oldest first, wrapped by its device for
    /// `device`: what an approver publishes for a device it approves. Every key,
    /// not only the newest, so the joiner opens any anchor the account wrote
    /// before it joined: one sealed before a rotation and landed late (a slow
    /// write of a round already given up) is ahead of the fleet, and a device
    /// that cannot open it cannot tell whether it holds what the whole fleet lost
    /// (seed 114004: a joiner that became the leader never opened a round again).
    /// A revoked device still never gets a key rotated after its revocation.
    public func wrappedKeys(for device: DeviceID, account: AccountID) throws -> [WrappedAccountKey] {
        try accountKeys.sorted { $0.key < $1.key }.map { epoch, key in
            try WrappedAccountKey.wrap(key, epoch: epoch, for: device, by: identity, account: account)
        }
    }
}

/// An account key sealed to one device by a roster member, through the same
/// construction as frames (``SiblingChannel``): the directory that stores it
/// cannot read it, and the recipient knows a member sent it. Only members get a
/// rotated key, so a revoked device never holds it.
public struct WrappedAccountKey: Sendable, Equatable {
    public let account: AccountID
    /// Keys are numbered from 1; a revoke rotates to the next number.
    public let epoch: UInt32
    public let recipient: DeviceID
    public let sealed: [UInt8]

    private static let label = Array("stele account key v1".utf8)

    /// Seals `key` for `recipient`; `sender` must be on the roster the recipient reads.
    public static func wrap(_ key: AccountKey, epoch: UInt32, for recipient: DeviceID, by sender: DeviceIdentity, account: AccountID) throws -> WrappedAccountKey {
        var channel = SiblingChannel(identity: sender, account: account, members: [recipient])
        var plaintext = ByteWriter(capacity: 64)
        plaintext.append(label)
        plaintext.appendVarint(UInt64(epoch))
        plaintext.append(key.bytes)
        return WrappedAccountKey(account: account, epoch: epoch, recipient: recipient, sealed: try channel.seal(plaintext.bytes, to: recipient))
    }

    public init(account: AccountID, epoch: UInt32, recipient: DeviceID, sealed: [UInt8]) {
        self.account = account
        self.epoch = epoch
        self.recipient = recipient
        self.sealed = sealed
    }

    /// Opens the key with this device's identity, accepting it only from a member
    /// of `roster`, or from this device itself: a device that rotates the key
    /// keeps a copy wrapped for itself, so a keychain restored from an old backup
    /// gets back the keys it made (``wrap(_:epoch:for:by:account:)`` with itself as recipient).
    ///
    /// A device revoked since still counts as the sender of a key of an epoch it
    /// held as a member (``Roster/lastEpoch(ofRevoked:)``): its approver wrapped
    /// them for a joiner, and a keychain restored from before then must get them
    /// back (refused, the whole directory entry was refused with them, forever).
    /// It knows those keys already; a key of a later epoch from it is refused.
    /// - Throws: ``SealError`` when it was not sealed for this device by a member, or
    ///   ``CodecError`` when what is inside is not an account key of this epoch.
    public func open(with identity: DeviceIdentity, roster: Roster) throws -> AccountKey {
        // Never the opening device itself: once revoked, its own copy is refused by name.
        let formerMembers = roster.revoked.filter { $0 != identity.deviceID && (roster.lastEpoch(ofRevoked: $0).map { $0 >= epoch } ?? false) }
        var channel = SiblingChannel(
            identity: identity, account: account, members: roster.members.union(formerMembers), revoked: roster.revoked.subtracting(formerMembers))
        let frame = try openFrame(&channel, isMember: roster.members.contains(identity.deviceID))
        var reader = ByteReader(frame)
        guard Array(try reader.readBytes(Self.label.count, "account key label")) == Self.label else {
            throw CodecError(.valueOutOfRange, "the sealed bytes are not an account key")
        }
        guard try reader.readVarint("account key epoch") == UInt64(epoch) else {
            throw CodecError(.valueOutOfRange, "the sealed account key is not for epoch \(epoch)")
        }
        let key = try AccountKey(bytes: try reader.readBytes(AccountKey.byteCount, "account key"))
        try reader.expectEnd("account key")
        return key
    }

    /// The sealed bytes opened as a member's, or, for a member, as its own copy.
    private func openFrame(_ channel: inout SiblingChannel, isMember: Bool) throws(SealError) -> [UInt8] {
        do {
            return try channel.open(sealed).frame
        } catch {
            guard error == .unknownSender, isMember else { throw error }
            return try channel.openOwn(sealed)
        }
    }
}
