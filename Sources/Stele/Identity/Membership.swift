/// The roster changes a person makes, written once for every directory (the
/// hub's ``HubDirectory``, the in-process ``MemoryDirectory``): found an account,
/// approve a device that asked to join and wrap the account key for it, revoke
/// a device and rotate the key. Each returns the key ring the acting device
/// keeps afterwards (save it in its ``KeyStore``).
public enum Membership {
    /// Founds `account` with `identity` as its first device and a fresh account
    /// key; a hub keeps `name` for its status.
    /// - Throws: ``RosterError`` `alreadyMember` when the account exists; the directory's errors.
    public static func found(_ account: AccountID, by identity: DeviceIdentity, in directory: any Directory, name: String? = nil) throws -> KeyRing {
        let roster = try Roster.founding(account: account, by: identity)
        if let hub = directory as? HubDirectory { try hub.found(roster, name: name) } else { try directory.found(roster) }
        return KeyRing(identity: identity, accountKeys: [1: AccountKey.generate()], roster: roster)
    }

    /// Approves `device` (with the roster signing key its join request carried)
    /// and wraps every account key of `ring` for it (``KeyRing/wrappedKeys(for:account:)``). A change another member
    /// made at the same moment is read and the approval signed again (three tries).
    /// - Throws: ``RosterError`` (`alreadyMember`, `revokedCannotRejoin`), ``MembershipError``
    ///   when `ring` holds no account key, the directory's errors.
    public static func approve(_ device: DeviceID, signingKey: [UInt8], by ring: KeyRing, in directory: any Directory) throws -> KeyRing {
        guard ring.newestEpoch != nil else {
            throw MembershipError("this device holds no account key to wrap for \(device.hex.prefix(8)); sync it first")
        }
        let account = try account(of: ring)
        let roster = try appending(to: account, in: directory, pinned: ring.roster) { roster in
            if roster.members.contains(device) { throw RosterError.alreadyMember(device) }
            return try RosterChange.approval(of: device, signingKey: signingKey, by: ring.identity, account: account, index: roster.version)
        }
        for wrapped in try ring.wrappedKeys(for: device, account: account) { try directory.publish(wrapped) }
        var updated = ring
        updated.roster = roster
        return updated
    }

    /// Revokes `device`, then rotates the account key: a new key, numbered by the
    /// roster (one more than the revocations on it, never by this ring's count, so
    /// a key ring restored from an old backup cannot reuse a number), wrapped for
    /// every member left. The revoked device never gets it.
    /// - Throws: ``RosterError`` (`notAMember`, `lastMember`), the directory's errors.
    public static func revoke(_ device: DeviceID, by ring: KeyRing, in directory: any Directory) throws -> (ring: KeyRing, epoch: UInt32) {
        let account = try account(of: ring)
        let roster = try appending(to: account, in: directory, pinned: ring.roster) { roster in
            guard roster.members.contains(device) else { throw RosterError.notAMember(device) }
            return try RosterChange.revocation(of: device, by: ring.identity, account: account, index: roster.version)
        }
        let epoch = UInt32(roster.revoked.count + 1)
        let key = AccountKey.generate()
        for member in roster.members.sorted() {
            try directory.publish(try WrappedAccountKey.wrap(key, epoch: epoch, for: member, by: ring.identity, account: account))
        }
        var updated = ring
        updated.roster = roster
        updated.insert(key, epoch: epoch)
        return (updated, epoch)
    }

    private static func account(of ring: KeyRing) throws -> AccountID {
        guard let account = ring.roster?.account else { throw MembershipError("this device's key ring holds no roster: it is not a member yet") }
        return account
    }

    /// Reads the roster (it must extend the one `pinned`), signs `change` for its
    /// next position and appends it; tries again when another change took the position.
    private static func appending(to account: AccountID, in directory: any Directory, pinned: Roster?, _ change: (Roster) throws -> RosterChange) throws -> Roster {
        var attempt = 0
        while true {
            attempt += 1
            let read = try directory.roster(of: account)
            let roster = try pinned?.adopting(read) ?? read
            let signed = try change(roster)
            do {
                try directory.append(signed, to: account)
                var appended = roster
                try appended.append(signed)
                return appended
            } catch let error as HubClientError where error.status == 409 && attempt < 3 {
                continue
            }
        }
    }
}

/// A membership change that cannot be made from this device.
public struct MembershipError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}
