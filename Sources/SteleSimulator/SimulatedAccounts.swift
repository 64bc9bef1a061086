import Stele

/// The accounts of a simulation and the directory they share (``MemoryDirectory``):
/// the own account and each contact, each key derived from the seed, and the
/// roster changes and wrapped keys their devices sign, exactly as an app's
/// devices would (issue 6): the first device founds an account, the
/// longest-standing member approves each later one and wraps every key it holds
/// for it, and a revocation is signed by another member, who rotates the key and
/// wraps it for everyone left. Which devices exist, and their stores, are the
/// simulation's; this type holds who belongs to which account.
public struct SimulatedAccounts {
    /// Another account the scenario talks to (`contact NAME D1 D2`): its own
    /// devices, roster and key, in the same directory and on the same network.
    public struct Contact: Sendable {
        public let name: String
        public let account: AccountID
        let key: AccountKey
    }

    let seed: UInt64
    /// The own account.
    public let account: AccountID
    /// The own account's first key (derived from the seed); a revoke rotates to a new one.
    public let accountKey: AccountKey
    /// The accounts' rosters and wrapped keys, in process.
    public let directory = MemoryDirectory()
    /// The contact accounts, in the order they were added.
    public private(set) var contacts: [Contact] = []
    /// Conversations (`conversation NS with NAME`): a messages namespace of the
    /// own account bound to a contact, and the same name on the contact's side.
    public private(set) var conversations: [(namespace: String, contact: String)] = []

    init(seed: UInt64) throws {
        self.seed = seed
        var keyRandom = SplitMix64(seed: seed ^ 0x00BA_C0E7)
        accountKey = try AccountKey(bytes: (0..<4).flatMap { _ in withUnsafeBytes(of: keyRandom.next()) { Array($0) } })
        var accountRandom = SplitMix64(seed: seed ^ 0xACC0_0000)
        account = AccountID.generate(using: &accountRandom)
    }

    /// The contact of that name.
    /// - Throws: ``UnknownContact``.
    func contact(_ name: String) throws -> Contact {
        guard let found = contacts.first(where: { $0.name == name }) else { throw UnknownContact(name: name) }
        return found
    }

    /// Every account: the own first, then the contacts'.
    var every: [AccountID] { [account] + contacts.map(\.account) }

    /// The identity of the device of that name: derived from the seed and the name.
    func identity(of name: String) throws -> DeviceIdentity {
        var keyRandom = SplitMix64(seed: seed ^ UInt64(truncatingIfNeeded: name.hashValueStable))
        return try DeviceIdentity(privateKey: (0..<4).flatMap { _ in withUnsafeBytes(of: keyRandom.next()) { Array($0) } })
    }

    // MARK: - Changes

    /// Adds a contact account, its id and key derived from the seed and the name.
    /// - Throws: ``SimulationInputError`` when the name is taken; nothing changes then.
    mutating func addContact(_ name: String) throws -> Contact {
        guard !contacts.contains(where: { $0.name == name }) else {
            throw SimulationInputError(message: "a contact named \(name) exists already; give each contact its own name")
        }
        var accountRandom = SplitMix64(seed: seed ^ 0xC0_0000 ^ UInt64(truncatingIfNeeded: name.hashValueStable))
        let account = AccountID.generate(using: &accountRandom)
        let key = try AccountKey(bytes: (0..<4).flatMap { _ in withUnsafeBytes(of: accountRandom.next()) { Array($0) } })
        let contact = Contact(name: name, account: account, key: key)
        contacts.append(contact)
        return contact
    }

    /// Binds `namespace` of the own account to `contact`.
    mutating func addConversation(_ namespace: String, with contact: String) throws {
        _ = try self.contact(contact)
        conversations.append((namespace, contact))
    }

    /// Founds `account` with its first device; returns the key ring that device starts with.
    func found(_ account: AccountID, by identity: DeviceIdentity) throws -> KeyRing {
        try directory.found(try Roster.founding(account: account, by: identity))
        let key = contacts.first { $0.account == account }?.key ?? accountKey
        return KeyRing(identity: identity, accountKeys: [1: key])
    }

    /// `approver` approves `identity` into `account` and wraps every key of its
    /// `ring` for it (``KeyRing/wrappedKeys(for:account:)``; none: the device waits for a key).
    func approve(_ identity: DeviceIdentity, into account: AccountID, by approver: DeviceIdentity, ring: KeyRing?) throws {
        let current = try directory.roster(of: account)
        try directory.append(
            try RosterChange.approval(of: identity.deviceID, signingKey: try identity.signingKey(), by: approver, account: account, index: current.version),
            to: account)
        for wrapped in try ring?.wrappedKeys(for: identity.deviceID, account: account) ?? [] { try directory.publish(wrapped) }
    }

    /// `revoker` revokes `device` from `account` and rotates the account key:
    /// the new key and its epoch, numbered by the roster, not by the revoker's
    /// key ring (a keychain restored from an old backup must not number a new key
    /// as one the fleet already has). Wrap it with ``publish(_:epoch:for:by:account:)``.
    func revoke(_ device: DeviceID, from account: AccountID, by revoker: DeviceIdentity) throws -> (key: AccountKey, epoch: UInt32) {
        let current = try directory.roster(of: account)
        try directory.append(try RosterChange.revocation(of: device, by: revoker, account: account, index: current.version), to: account)
        let epoch = UInt32(try directory.roster(of: account).revoked.count + 1)
        var keyRandom = SplitMix64(seed: seed ^ 0x0E0C_0000 ^ UInt64(epoch))
        let key = try AccountKey(bytes: (0..<4).flatMap { _ in withUnsafeBytes(of: keyRandom.next()) { Array($0) } })
        return (key, epoch)
    }

    /// Wraps `key` for each of `members`, signed by `signer`.
    func publish(_ key: AccountKey, epoch: UInt32, for members: [DeviceID], by signer: DeviceIdentity, account: AccountID) throws {
        for member in members {
            try directory.publish(try WrappedAccountKey.wrap(key, epoch: epoch, for: member, by: signer, account: account))
        }
    }
}
