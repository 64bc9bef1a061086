/// The sealed, self-account-gated sibling channel (001 §4: "the relay sees
/// ciphertext it cannot attribute"; DESIGN G6). Every frame between two devices
/// of an account is sealed so that whatever carries it learns the recipient and
/// the size, nothing else: the sender, the frame's kind and its content are
/// inside the ciphertext. SECURITY.md gives the threat model and the argument.
///
/// Construction, from the backend's primitives only (``CryptoBackend``):
/// - each ordered pair of devices (A → B) shares a directional key
///   `K = HKDF-SHA256(X25519(a, B), salt: account id, info: label ‖ A ‖ B)`;
///   only A and B can compute it, the account id binds it to one account and the
///   order keeps a frame B sent to A from being reflected back to B as A's; a
///   tag key `T = HKDF-SHA256(K, salt: 32 zero bytes, info: "stele frame tag v1")`
///   is derived from it once;
/// - a frame draws a fresh 16-byte salt; its sender tag is the first 16 bytes of
///   `HMAC-SHA256(T, version ‖ recipient ‖ salt)`, and `HKDF-SHA256(K, salt,
///   "stele frame v1")` gives the 32-byte AES-256-GCM key of this frame alone
///   (so the zero nonce is never reused under one key);
/// - the receiver finds the sender by recomputing the tag with each roster
///   member's tag key (one HMAC each, no public-key operation once a pair's keys
///   are cached), then derives that member's frame key and opens the body.
///
/// Wire form: version (1) ‖ recipient id (32) ‖ salt (16) ‖ sender tag (16) ‖
/// ciphertext ‖ GCM tag (16); the first 65 bytes are the associated data.
///
/// The same construction carries a conversation with a contact (another
/// account, ``contact(identity:account:contact:members:revoked:)``): the label
/// is "stele contact channel v1" and the salt the two account ids in byte
/// order, so both sides derive the same pair keys and no frame of one channel
/// opens on the other.
public struct SiblingChannel: Sendable {
    /// The fixed bytes sealing adds to a frame.
    public static let overhead = headerCount + Sealing.tagCount
    static let version: UInt8 = 1
    static let saltCount = 16
    static let senderTagCount = 16
    static let headerCount = 1 + DeviceID.byteCount + saltCount + senderTagCount
    private static let siblingLabel = Array("stele sibling channel v1".utf8)
    private static let contactLabel = Array("stele contact channel v1".utf8)
    private static let frameLabel = Array("stele frame v1".utf8)
    private static let tagLabel = Array("stele frame tag v1".utf8)
    private static let zeroSalt = [UInt8](repeating: 0, count: 32)

    /// A pair's directional key and the tag key derived from it.
    private struct PairKeys: Sendable {
        let frame: [UInt8]
        /// The tag key, keyed once for every frame of the pair.
        let tag: HMACKey
    }
    private static let zeroNonce = [UInt8](repeating: 0, count: Sealing.nonceCount)

    public let identity: DeviceIdentity
    public let account: AccountID
    /// The other account, on a contact channel; `nil` between siblings.
    public let contact: AccountID?
    /// What the pair keys are bound to: the label and the salt (the account id,
    /// or both account ids in byte order).
    private let pairLabel: [UInt8]
    private let pairSalt: [UInt8]
    /// The devices whose frames are accepted: the account's roster, this device aside.
    public var members: Set<DeviceID> { Set(orderedMembers) }
    /// Devices taken off the roster: their frames are refused by name.
    public var revoked: Set<DeviceID> { Set(orderedRevoked) }
    /// The same, in id order: the order senders are tried in, sorted once per roster change.
    private var orderedMembers: [DeviceID]
    private var orderedRevoked: [DeviceID]
    /// Directional pair keys, computed on first use (from the identity's X25519 with the peer).
    private var outgoing: [DeviceID: PairKeys] = [:]
    private var incoming: [DeviceID: PairKeys] = [:]

    public init(identity: DeviceIdentity, account: AccountID, members: Set<DeviceID> = [], revoked: Set<DeviceID> = []) {
        self.init(identity: identity, account: account, contact: nil, members: members, revoked: revoked)
    }

    /// The channel between this device and the devices of `contact`, another
    /// account: `members` and `revoked` are the contact's roster, read from the
    /// directory and verified like this account's own.
    public static func contact(
        identity: DeviceIdentity, account: AccountID, contact: AccountID, members: Set<DeviceID>, revoked: Set<DeviceID> = []
    ) -> SiblingChannel {
        SiblingChannel(identity: identity, account: account, contact: contact, members: members, revoked: revoked)
    }

    private init(identity: DeviceIdentity, account: AccountID, contact: AccountID?, members: Set<DeviceID>, revoked: Set<DeviceID>) {
        self.identity = identity
        self.account = account
        self.contact = contact
        if let contact {
            pairLabel = Self.contactLabel
            let (low, high) = account.bytes.lexicographicallyPrecedes(contact.bytes) ? (account, contact) : (contact, account)
            pairSalt = low.bytes + high.bytes
        } else {
            pairLabel = Self.siblingLabel
            pairSalt = account.bytes
        }
        orderedMembers = []
        orderedRevoked = []
        update(members: members, revoked: revoked)
    }

    /// Replaces the roster the channel accepts frames from. A device that left it
    /// is refused from now on, frames already in flight included.
    public mutating func update(members: Set<DeviceID>, revoked: Set<DeviceID>) {
        let others = members.subtracting([identity.deviceID])
        orderedMembers = others.sorted()
        orderedRevoked = revoked.subtracting(others).sorted()
    }

    /// Seals `frame` for `recipient`, with a salt from the system's
    /// cryptographically secure generator.
    /// - Throws: ``CryptoError`` when the cryptographic backend fails or the recipient's id is not a usable public key.
    public mutating func seal(_ frame: [UInt8], to recipient: DeviceID) throws -> [UInt8] {
        var system = SystemRandomNumberGenerator()
        return try seal(frame, to: recipient, using: &system)
    }

    /// Seals `frame` for `recipient` with a salt drawn from `generator`: the
    /// node's own, so that a seeded simulation replays the very same bytes.
    /// The salt is what makes each frame's key fresh: outside a simulation the
    /// generator must be cryptographically secure (`SystemRandomNumberGenerator`).
    public mutating func seal(_ frame: [UInt8], to recipient: DeviceID, using generator: inout some RandomNumberGenerator) throws -> [UInt8] {
        try seal(frame, to: recipient, salt: generator.bytes(Self.saltCount))
    }

    /// With a given salt: for tests that need fixed output.
    mutating func seal(_ frame: [UInt8], to recipient: DeviceID, salt: [UInt8]) throws -> [UInt8] {
        let pair = try outgoingKeys(to: recipient)
        var header: [UInt8] = [Self.version]
        header.reserveCapacity(Self.headerCount + frame.count + Sealing.tagCount)
        header += recipient.bytes
        header += salt
        header += try pair.tag.authenticate(header).prefix(Self.senderTagCount)
        let key = try KeyAgreement.hkdf(key: pair.frame, salt: salt, info: Self.frameLabel, count: 32)
        return header + Sealing.seal(frame, keyBytes: key, associated: header, nonce: Self.zeroNonce)
    }

    /// Opens a sealed frame addressed to this device.
    /// - Returns: the sender, authenticated as a member of the roster, and the frame.
    /// - Throws: ``SealError`` saying why the bytes were refused; nothing is learnt from them.
    public mutating func open(_ sealed: [UInt8]) throws(SealError) -> (sender: DeviceID, frame: [UInt8]) {
        let header = try header(of: sealed)
        for candidate in orderedMembers {
            guard let pair = try? incomingKeys(from: candidate), Self.tagMatches(header, pair) else { continue }
            guard let frame = Self.openBody(sealed, header, pair) else { throw .tampered(sender: candidate) }
            return (candidate, frame)
        }
        for candidate in orderedRevoked {
            if let pair = try? incomingKeys(from: candidate), Self.tagMatches(header, pair) { throw .revokedSender(candidate) }
        }
        throw .unknownSender
    }

    /// Opens bytes this device sealed for itself (a key it keeps a copy of in the
    /// directory, ``WrappedAccountKey``): frames from siblings never come this way.
    /// - Throws: ``SealError`` when this device did not seal them for itself.
    mutating func openOwn(_ sealed: [UInt8]) throws(SealError) -> [UInt8] {
        let header = try header(of: sealed)
        guard let pair = try? outgoingKeys(to: identity.deviceID), Self.tagMatches(header, pair) else { throw .unknownSender }
        guard let frame = Self.openBody(sealed, header, pair) else { throw .tampered(sender: identity.deviceID) }
        return frame
    }

    /// A sealed frame's header, checked to be addressed to this device: its salt,
    /// the bytes the sender tag covers, and the tag.
    private func header(of sealed: [UInt8]) throws(SealError) -> (salt: [UInt8], tagged: [UInt8], tag: [UInt8]) {
        guard sealed.count >= Self.overhead else { throw .truncated(count: sealed.count, minimum: Self.overhead) }
        guard sealed[0] == Self.version else { throw .unsupportedVersion(sealed[0]) }
        // The recipient's 32 bytes parse as a device id whatever they hold.
        guard let recipient = try? DeviceID(bytes: sealed[1..<(1 + DeviceID.byteCount)]) else { throw .truncated(count: sealed.count, minimum: Self.overhead) }
        guard recipient == identity.deviceID else { throw .wrongRecipient(recipient) }
        let saltEnd = 1 + DeviceID.byteCount + Self.saltCount
        return (Array(sealed[(saltEnd - Self.saltCount)..<saltEnd]), Array(sealed[..<saltEnd]), Array(sealed[saltEnd..<Self.headerCount]))
    }

    /// Whether the sender whose pair keys these are made the header's tag.
    private static func tagMatches(_ header: (salt: [UInt8], tagged: [UInt8], tag: [UInt8]), _ pair: PairKeys) -> Bool {
        guard let mine = try? pair.tag.authenticate(header.tagged) else { return false }
        return KeyAgreement.constantTimeEqual(Array(mine.prefix(senderTagCount)), header.tag[...])
    }

    /// The frame, or `nil` when the body does not open under the pair's frame key.
    private static func openBody(_ sealed: [UInt8], _ header: (salt: [UInt8], tagged: [UInt8], tag: [UInt8]), _ pair: PairKeys) -> [UInt8]? {
        guard let key = try? KeyAgreement.hkdf(key: pair.frame, salt: header.salt, info: frameLabel, count: 32) else { return nil }
        return Sealing.open(sealed[headerCount...], keyBytes: key, associated: Array(sealed[..<headerCount]), nonce: zeroNonce)
    }

    private mutating func outgoingKeys(to recipient: DeviceID) throws -> PairKeys {
        if let keys = outgoing[recipient] { return keys }
        let keys = try pairKeys(secretWith: recipient, from: identity.deviceID, to: recipient)
        outgoing[recipient] = keys
        return keys
    }

    private mutating func incomingKeys(from sender: DeviceID) throws -> PairKeys {
        if let keys = incoming[sender] { return keys }
        let keys = try pairKeys(secretWith: sender, from: sender, to: identity.deviceID)
        // Bounded by the roster and the revoked list, which are the only senders tried.
        incoming[sender] = keys
        return keys
    }

    private func pairKeys(secretWith peer: DeviceID, from sender: DeviceID, to recipient: DeviceID) throws -> PairKeys {
        // The frame key, then the tag key derived from it: 64 bytes, derived once per identity.
        let info = pairLabel + sender.bytes + recipient.bytes
        let keys = try identity.derived(with: peer, salt: pairSalt, info: info) { secret in
            let frame = try KeyAgreement.hkdf(key: secret, salt: pairSalt, info: info, count: 32)
            return frame + (try KeyAgreement.hkdf(key: frame, salt: Self.zeroSalt, info: Self.tagLabel, count: 32))
        }
        return PairKeys(frame: Array(keys[..<32]), tag: try HMACKey(Array(keys[32...])))
    }
}

/// Why a sealed frame was refused. Whatever the reason, nothing changed.
public enum SealError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Shorter than the fixed part of every sealed frame.
    case truncated(count: Int, minimum: Int)
    /// A version of the sealed form this build does not know.
    case unsupportedVersion(UInt8)
    /// Sealed for another device: the carrier delivered it to the wrong one.
    case wrongRecipient(DeviceID)
    /// No device on this account's roster sealed it: another account's device,
    /// one that never joined, or a header damaged in transit.
    case unknownSender
    /// Sealed by a device that has been revoked from the roster.
    case revokedSender(DeviceID)
    /// The header names a roster member but the body does not authenticate: changed in transit.
    case tampered(sender: DeviceID)

    public var description: String {
        switch self {
        case let .truncated(count, minimum): "a sealed frame of \(count) bytes is shorter than the \(minimum) every sealed frame has"
        case .unsupportedVersion(let version): "sealed-frame version \(version) is not one this build reads; update Stele on this device"
        case .wrongRecipient(let device): "the frame was sealed for device \(device), not this one"
        case .unknownSender: "no device on this account's roster sealed this frame (another account, an unknown device, or a damaged header)"
        case .revokedSender(let device): "the frame comes from device \(device), which was revoked from the roster"
        case .tampered(let sender): "the frame from \(sender) does not authenticate: it was changed or cut in transit"
        }
    }
}
