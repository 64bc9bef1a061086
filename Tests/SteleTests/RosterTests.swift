import Testing
import TestSupport
@testable import Stele

@Suite struct RosterTests {
    let account: AccountID
    let phone, laptop, tablet, outsider: DeviceIdentity

    init() throws {
        var generator = SeededGenerator(seed: 11)
        account = AccountID.generate(using: &generator)
        phone = try DeviceIdentity(privateKey: [UInt8](repeating: 21, count: 32))
        laptop = try DeviceIdentity(privateKey: [UInt8](repeating: 22, count: 32))
        tablet = try DeviceIdentity(privateKey: [UInt8](repeating: 23, count: 32))
        outsider = try DeviceIdentity(privateKey: [UInt8](repeating: 24, count: 32))
    }

    func approval(of device: DeviceIdentity, by approver: DeviceIdentity, at index: Int) throws -> RosterChange {
        try RosterChange.approval(of: device.deviceID, signingKey: try device.signingKey(), by: approver, account: account, index: index)
    }

    /// phone founds the account and approves laptop.
    func twoDevices() throws -> Roster {
        var roster = try Roster.founding(account: account, by: phone)
        try roster.append(try approval(of: laptop, by: phone, at: 1))
        return roster
    }

    @Test func aMemberApprovesAndRevokesAndEveryReaderVerifiesTheSameLog() throws {
        var roster = try twoDevices()
        try roster.append(try approval(of: tablet, by: laptop, at: 2))
        #expect(roster.members == [phone.deviceID, laptop.deviceID, tablet.deviceID])
        try roster.append(try RosterChange.revocation(of: laptop.deviceID, by: tablet, account: account, index: 3))
        #expect(roster.members == [phone.deviceID, tablet.deviceID])
        #expect(roster.revoked == [laptop.deviceID])
        #expect(try Roster(account: account, changes: roster.changes) == roster)
    }

    @Test func aJoinApprovalForgedByANonMemberIsRefusedAndChangesNothing() throws {
        var roster = try twoDevices()
        let before = roster
        // The outsider approves itself, and then a tablet.
        #expect(throws: RosterError.actorNotAMember(outsider.deviceID, index: 2)) { try roster.append(try approval(of: outsider, by: outsider, at: 2)) }
        #expect(throws: RosterError.actorNotAMember(outsider.deviceID, index: 2)) { try roster.append(try approval(of: tablet, by: outsider, at: 2)) }
        // A change that names phone as its approver but is signed by the outsider.
        let signedByOutsider = try approval(of: outsider, by: outsider, at: 2)
        let posingAsPhone = RosterChange(
            action: .join, device: outsider.deviceID, signingKey: signedByOutsider.signingKey, actor: phone.deviceID, signature: signedByOutsider.signature)
        #expect(throws: RosterError.badSignature(index: 2)) { try roster.append(posingAsPhone) }
        #expect(roster == before)
        // A directory that stored the forgery anyway is caught by every reader.
        #expect(throws: RosterError.badSignature(index: 2)) { _ = try Roster(account: account, changes: before.changes + [posingAsPhone]) }
    }

    @Test func aChangeCannotBeReplayedElsewhereInTheLogOrInAnotherAccount() throws {
        var roster = try twoDevices()
        try roster.append(try approval(of: tablet, by: phone, at: 2))
        let tabletJoin = roster.changes[2]
        try roster.append(try RosterChange.revocation(of: tablet.deviceID, by: phone, account: account, index: 3))
        // The tablet's old approval appended again: signed for position 2, not 4.
        #expect(throws: RosterError.badSignature(index: 4)) { try roster.append(tabletJoin) }
        // A fresh approval does not bring a revoked identity back either.
        #expect(throws: RosterError.revokedCannotRejoin(tablet.deviceID)) { try roster.append(try approval(of: tablet, by: phone, at: 4)) }
        // The whole log under another account id: the founder's signature does not hold.
        var generator = SeededGenerator(seed: 12)
        #expect(throws: RosterError.badSignature(index: 0)) { _ = try Roster(account: AccountID.generate(using: &generator), changes: roster.changes) }
    }

    @Test func malformedLogsAreNamed() throws {
        #expect(throws: RosterError.empty) { _ = try Roster(account: account, changes: []) }
        let joinedByPhone = try approval(of: laptop, by: phone, at: 0)
        #expect(throws: RosterError.founderNotSelfApproved) { _ = try Roster(account: account, changes: [joinedByPhone]) }
        var roster = try twoDevices()
        #expect(throws: RosterError.alreadyMember(laptop.deviceID)) { try roster.append(try approval(of: laptop, by: phone, at: 2)) }
        #expect(throws: RosterError.notAMember(tablet.deviceID)) {
            try roster.append(try RosterChange.revocation(of: tablet.deviceID, by: phone, account: account, index: 2))
        }
        try roster.append(try RosterChange.revocation(of: laptop.deviceID, by: phone, account: account, index: 2))
        // A revoked device can no longer approve anyone.
        #expect(throws: RosterError.actorNotAMember(laptop.deviceID, index: 3)) { try roster.append(try approval(of: tablet, by: laptop, at: 3)) }
        #expect(throws: RosterError.lastMember(phone.deviceID)) {
            try roster.append(try RosterChange.revocation(of: phone.deviceID, by: phone, account: account, index: 3))
        }
        #expect("\(RosterError.actorNotAMember(outsider.deviceID, index: 3))".contains("forged"))
    }

    @Test func aDeviceAdoptsOnlyARosterThatExtendsTheOneItVerified() throws {
        var roster = try twoDevices()
        try roster.append(try approval(of: tablet, by: phone, at: 2))
        let pinned = roster
        try roster.append(try RosterChange.revocation(of: laptop.deviceID, by: phone, account: account, index: 3))
        #expect(try pinned.adopting(roster) == roster)
        #expect(try roster.adopting(roster) == roster)
        // An older log (the revocation undone) is refused.
        #expect(throws: RosterError.rewritten(kept: 4)) { _ = try roster.adopting(pinned) }
        // So is a log founded by another device, valid as it is.
        var foreign = try Roster.founding(account: account, by: outsider)
        try foreign.append(try approval(of: phone, by: outsider, at: 1))
        try foreign.append(try approval(of: laptop, by: outsider, at: 2))
        try foreign.append(try approval(of: tablet, by: outsider, at: 3))
        #expect(throws: RosterError.rewritten(kept: 3)) { _ = try pinned.adopting(foreign) }
        #expect("\(RosterError.rewritten(kept: 3))".contains("keeps the roster it holds"))
    }

    @Test func aRosterRoundTripsThroughItsBytesAndDamageIsAnError() throws {
        var roster = try twoDevices()
        try roster.append(try RosterChange.revocation(of: laptop.deviceID, by: phone, account: account, index: 2))
        #expect(try Roster(decoding: roster.encoded) == roster)
        let bytes = roster.encoded
        for length in [0, 10, 17, bytes.count - 1] {
            #expect(throws: (any Error).self) { _ = try Roster(decoding: Array(bytes.prefix(length))) }
        }
        var flipped = bytes
        flipped[bytes.count - 5] ^= 1
        #expect(throws: RosterError.badSignature(index: 2)) { _ = try Roster(decoding: flipped) }
    }

    @Test func theDirectoryRefusesWhatTheRosterRefusesAndKeepsWhatItHad() throws {
        let directory = MemoryDirectory()
        #expect(throws: RosterError.unknownAccount(account)) { _ = try directory.roster(of: account) }
        try directory.found(try Roster.founding(account: account, by: phone))
        #expect(throws: RosterError.alreadyMember(phone.deviceID)) { try directory.found(try Roster.founding(account: account, by: laptop)) }
        try directory.append(try approval(of: laptop, by: phone, at: 1), to: account)
        #expect(throws: RosterError.actorNotAMember(outsider.deviceID, index: 2)) { try directory.append(try approval(of: outsider, by: outsider, at: 2), to: account) }
        #expect(try directory.roster(of: account).members == [phone.deviceID, laptop.deviceID])
    }

    // MARK: - Wrapped account keys

    @Test func anAccountKeyWrappedByAMemberOpensOnlyForItsRecipient() throws {
        var roster = try twoDevices()
        try roster.append(try approval(of: tablet, by: phone, at: 2))
        let key = AccountKey.generate()
        let wrapped = try WrappedAccountKey.wrap(key, epoch: 2, for: tablet.deviceID, by: laptop, account: account)
        #expect(try wrapped.open(with: tablet, roster: roster) == key)
        #expect(!wrapped.sealed.contains(subsequence: key.bytes))
        // Another device cannot open it, even a member.
        #expect(throws: SealError.wrongRecipient(tablet.deviceID)) { _ = try wrapped.open(with: phone, roster: roster) }
        // A key wrapped by a non-member is refused: the directory cannot slip one in.
        let planted = try WrappedAccountKey.wrap(AccountKey.generate(), epoch: 2, for: tablet.deviceID, by: outsider, account: account)
        #expect(throws: SealError.unknownSender) { _ = try planted.open(with: tablet, roster: roster) }
        // Nor by a member since revoked.
        try roster.append(try RosterChange.revocation(of: laptop.deviceID, by: phone, account: account, index: 3))
        #expect(throws: SealError.revokedSender(laptop.deviceID)) { _ = try wrapped.open(with: tablet, roster: roster) }
        // The epoch is bound to the key inside.
        let relabelled = WrappedAccountKey(account: account, epoch: 3, recipient: tablet.deviceID, sealed: try WrappedAccountKey.wrap(key, epoch: 2, for: tablet.deviceID, by: phone, account: account).sealed)
        #expect(throws: CodecError.self) { _ = try relabelled.open(with: tablet, roster: roster) }
    }

    /// A device revoked since still counts as the sender of the keys of the epochs
    /// it held as a member (a keychain restored from before it wrapped them must
    /// get them back), never of a later epoch.
    @Test func aKeyWrappedByADeviceRevokedSinceOpensOnlyForAnEpochItHeldAsAMember() throws {
        var roster = try twoDevices()
        try roster.append(try approval(of: tablet, by: laptop, at: 2))
        try roster.append(try approval(of: outsider, by: laptop, at: 3))
        let first = AccountKey.generate(), second = AccountKey.generate()
        let byLaptop1 = try WrappedAccountKey.wrap(first, epoch: 1, for: tablet.deviceID, by: laptop, account: account)
        let byLaptop2 = try WrappedAccountKey.wrap(second, epoch: 2, for: tablet.deviceID, by: laptop, account: account)
        let byLaptop3 = try WrappedAccountKey.wrap(second, epoch: 3, for: tablet.deviceID, by: laptop, account: account)
        // The outsider's revocation makes epoch 2; the laptop's, epoch 3.
        try roster.append(try RosterChange.revocation(of: outsider.deviceID, by: phone, account: account, index: 4))
        #expect(roster.lastEpoch(ofRevoked: outsider.deviceID) == 1)
        try roster.append(try RosterChange.revocation(of: laptop.deviceID, by: phone, account: account, index: 5))
        #expect(roster.lastEpoch(ofRevoked: laptop.deviceID) == 2)
        #expect(roster.lastEpoch(ofRevoked: phone.deviceID) == nil)
        #expect(try byLaptop1.open(with: tablet, roster: roster) == first)
        #expect(try byLaptop2.open(with: tablet, roster: roster) == second)
        // Epoch 3 came of the laptop's own revocation: it never held that key.
        #expect(throws: SealError.revokedSender(laptop.deviceID)) { _ = try byLaptop3.open(with: tablet, roster: roster) }
        // The outsider, revoked at epoch 1, wraps nothing of epoch 2 that opens.
        let byOutsider2 = try WrappedAccountKey.wrap(second, epoch: 2, for: tablet.deviceID, by: outsider, account: account)
        #expect(throws: SealError.revokedSender(outsider.deviceID)) { _ = try byOutsider2.open(with: tablet, roster: roster) }
    }

    /// An approver wraps every key it holds for the joiner, not only the newest:
    /// an anchor sealed before a rotation (its upload outlived its round and
    /// landed afterwards, above the fleet) opens on the joiner too (seed 114004).
    @Test func aJoinerGetsEveryKeyItsApproverHoldsAndOpensAnAnchorSealedBeforeItJoined() throws {
        let directory = MemoryDirectory()
        var phoneRing = try Membership.found(account, by: phone, in: directory)
        phoneRing = try Membership.approve(laptop.deviceID, signingKey: try laptop.signingKey(), by: phoneRing, in: directory)
        let old = try #require(phoneRing.accountKeys[1])
        let anchor = Anchor(header: AnchorHeader(account: account, generation: 5, round: try RoundNonce(bytes: [UInt8](repeating: 7, count: 16)), digest: .zero), snapshot: [1, 2, 3])
        let sealedBeforeTheRotation = AnchorFile.encode(anchor, key: old)
        let rotation = try Membership.revoke(laptop.deviceID, by: phoneRing, in: directory)
        phoneRing = rotation.ring
        #expect(rotation.epoch == 2)
        phoneRing = try Membership.approve(tablet.deviceID, signingKey: try tablet.signingKey(), by: phoneRing, in: directory)

        let roster = try directory.roster(of: account)
        let wrapped = try directory.wrappedKeys(for: tablet.deviceID, of: account)
        #expect(wrapped.map(\.epoch) == [1, 2])
        var tabletRing = KeyRing(identity: tablet, roster: roster)
        for key in wrapped { tabletRing.insert(try key.open(with: tablet, roster: roster), epoch: key.epoch) }
        #expect(tabletRing.accountKeys == phoneRing.accountKeys)
        // The anchor sealed under epoch 1 opens with the joiner's keys, as a driver reads it.
        let reading = FleetDriver.opening(.success(sealedBeforeTheRotation), account: account, keys: tabletRing.orderedAccountKeys)
        guard case .found(let opened) = reading else {
            Issue.record("the joiner could not open the anchor: \(reading)")
            return
        }
        #expect(opened.header == anchor.header)
        // Given only the newest key (as approvals did before), it could not.
        guard case .unopened = FleetDriver.opening(.success(sealedBeforeTheRotation), account: account, keys: [try #require(phoneRing.accountKeys[2])]) else {
            Issue.record("an anchor sealed with epoch 1 opened with epoch 2's key alone")
            return
        }
        // The revoked laptop still never gets the rotated key.
        #expect(try directory.wrappedKeys(for: laptop.deviceID, of: account).map(\.epoch) == [1])
        // An approver that holds no key approves nobody, and the roster is left as it was.
        let versionBefore = try directory.roster(of: account).version
        #expect(throws: MembershipError.self) {
            _ = try Membership.approve(outsider.deviceID, signingKey: try outsider.signingKey(), by: KeyRing(identity: phone, roster: roster), in: directory)
        }
        #expect(try directory.roster(of: account).version == versionBefore)
    }

    /// A device that rotates the key keeps a copy wrapped for itself in the
    /// directory: its keychain, restored from an old backup, gets the key back.
    @Test func aKeyWrappedByAMemberForItselfOpensOnlyForItWhileItIsAMember() throws {
        var roster = try twoDevices()
        let key = AccountKey.generate()
        let own = try WrappedAccountKey.wrap(key, epoch: 2, for: phone.deviceID, by: phone, account: account)
        #expect(try own.open(with: phone, roster: roster) == key)
        #expect(!own.sealed.contains(subsequence: key.bytes))
        #expect(throws: SealError.wrongRecipient(phone.deviceID)) { _ = try own.open(with: laptop, roster: roster) }
        // One an outsider sealed for itself is not a member's.
        let outsiders = try WrappedAccountKey.wrap(key, epoch: 2, for: outsider.deviceID, by: outsider, account: account)
        #expect(throws: SealError.unknownSender) { _ = try outsiders.open(with: outsider, roster: roster) }
        // Changed bytes do not open.
        var damaged = own.sealed
        damaged[damaged.count - 1] ^= 1
        #expect(throws: SealError.tampered(sender: phone.deviceID)) {
            _ = try WrappedAccountKey(account: account, epoch: 2, recipient: phone.deviceID, sealed: damaged).open(with: phone, roster: roster)
        }
        // Revoked, the device no longer opens its own copy: it is refused by name, of an
        // epoch it held as a member too (a revoked wrapper counts for others, never for itself).
        let ownFirst = try WrappedAccountKey.wrap(key, epoch: 1, for: phone.deviceID, by: phone, account: account)
        try roster.append(try RosterChange.revocation(of: phone.deviceID, by: laptop, account: account, index: 2))
        #expect(throws: SealError.revokedSender(phone.deviceID)) { _ = try own.open(with: phone, roster: roster) }
        #expect(throws: SealError.revokedSender(phone.deviceID)) { _ = try ownFirst.open(with: phone, roster: roster) }
    }
}

extension Array where Element == UInt8 {
    fileprivate func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<($0 + subsequence.count)]) == subsequence }
    }
}
