import Synchronization

/// A device's key pair: X25519 from the cryptographic backend (``CryptoBackend``). The public key is the ``DeviceID``.
///
/// The private key never enters the replica file (a restored backup must not be
/// able to impersonate anything it could not before); apps keep it in their key
/// store and rebuild the identity with ``init(privateKey:)``.
public struct DeviceIdentity: Sendable, Equatable {
    /// The public key, which is the device id.
    public let deviceID: DeviceID
    /// The 32-byte raw X25519 private key.
    public let privateKey: [UInt8]
    /// X25519 results with peers already met, shared by every copy of this value: every
    /// channel sealed with the identity (siblings, contacts, wrapped account keys) derives
    /// its pair keys from one agreement per peer instead of one per channel it builds.
    private let agreements = SharedSecrets()

    /// A fresh key pair from the backend's generator.
    /// - Throws: ``CryptoError`` if the backend fails.
    public static func generate() throws -> DeviceIdentity {
        try DeviceIdentity(privateKey: try Crypto.x25519GeneratePrivateKey())
    }

    /// Rebuilds an identity from its raw private key, deriving the public key.
    /// - Throws: ``CryptoError`` unless `privateKey` is 32 bytes the backend accepts.
    public init(privateKey: [UInt8]) throws {
        guard privateKey.count == 32 else {
            throw CryptoError(message: "an X25519 private key is 32 bytes, got \(privateKey.count)")
        }
        self.privateKey = privateKey
        self.deviceID = try DeviceID(bytes: try Crypto.x25519PublicKey(privateKey: privateKey))
    }

    public static func == (lhs: DeviceIdentity, rhs: DeviceIdentity) -> Bool {
        lhs.deviceID == rhs.deviceID && lhs.privateKey == rhs.privateKey
    }

    /// X25519 between this identity and `peer`, computed once per peer.
    /// - Throws: ``CryptoError`` when the backend refuses (a low-order public key among others);
    ///   a refusal is not remembered.
    func sharedSecret(with peer: DeviceID) throws -> [UInt8] {
        if let known = agreements.secret(with: peer) { return known }
        let secret = try KeyAgreement.sharedSecret(privateKey: privateKey, peer: peer)
        agreements.remember(secret, with: peer)
        return secret
    }

    /// Keys derived from the agreement with `peer` (``sharedSecret(with:)``) for one
    /// use, named by `salt` and `info`: `derive` runs once per use, and every copy of
    /// this identity reuses its result (a channel rebuilt at each roster refresh and
    /// each restart derived its pair keys again: 2.5 % of a simulated run, issue 22).
    /// - Throws: what ``sharedSecret(with:)`` or `derive` throws; nothing is remembered then.
    func derived(with peer: DeviceID, salt: [UInt8], info: [UInt8], _ derive: ([UInt8]) throws -> [UInt8]) throws -> [UInt8] {
        let use = SharedSecrets.Use(peer: peer, salt: salt, info: info)
        if let known = agreements.derived(use) { return known }
        let keys = try derive(try sharedSecret(with: peer))
        agreements.remember(keys, for: use)
        return keys
    }
}

/// The shared secrets one identity agreed with its peers. Bounded: past
/// ``capacity`` peers it starts again empty (a device meets its roster and its
/// contacts' rosters, far fewer).
private final class SharedSecrets: Sendable {
    static let capacity = 1_024
    private let secrets = Mutex<[DeviceID: [UInt8]]>([:])
    /// Keys derived from the secrets (``DeviceIdentity/derived(with:salt:info:_:)``), bounded alike.
    private let derivations = Mutex<[Use: [UInt8]]>([:])

    /// One use of a peer's secret: the salt and info of the derivation.
    struct Use: Hashable {
        let peer: DeviceID
        let salt: [UInt8]
        let info: [UInt8]
    }

    func secret(with peer: DeviceID) -> [UInt8]? { secrets.withLock { $0[peer] } }

    func remember(_ secret: [UInt8], with peer: DeviceID) {
        secrets.withLock { known in
            if known.count >= Self.capacity { known.removeAll() }
            known[peer] = secret
        }
    }

    func derived(_ use: Use) -> [UInt8]? { derivations.withLock { $0[use] } }

    func remember(_ keys: [UInt8], for use: Use) {
        derivations.withLock { known in
            if known.count >= 4 * Self.capacity { known.removeAll() }
            known[use] = keys
        }
    }
}
