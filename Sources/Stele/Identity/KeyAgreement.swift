/// The asymmetric and key-derivation primitives the sealed channel and the
/// roster are built from, each a direct call into the cryptographic backend
/// (``CryptoBackend``: libcrypto or CryptoKit) (DESIGN §3: never a
/// home-made primitive): X25519 key agreement, HKDF-SHA256 (RFC 5869) and
/// Ed25519 signatures (RFC 8032).
enum KeyAgreement {
    /// X25519 between this private key and a peer's public key (the peer's ``DeviceID``).
    /// - Throws: ``CryptoError`` when the backend refuses, among others for a
    ///   low-order public key whose shared secret would be all zeros.
    static func sharedSecret(privateKey: [UInt8], peer: DeviceID) throws -> [UInt8] {
        try Crypto.x25519SharedSecret(privateKey: privateKey, peerPublicKey: peer.bytes)
    }

    /// HKDF-SHA256 extract-then-expand: `count` bytes from `key` under `salt` and `info`.
    static func hkdf(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        try Crypto.hkdfSHA256(key: key, salt: salt, info: info, count: count)
    }

    /// HMAC-SHA256 of `message` under `key` (32 bytes).
    static func hmac(key: [UInt8], _ message: [UInt8]) throws -> [UInt8] {
        try HMACKey(key).authenticate(message)
    }

    /// The Ed25519 public key of a 32-byte private seed.
    static func signingPublicKey(seed: [UInt8]) throws -> [UInt8] { try Crypto.ed25519PublicKey(seed: seed) }

    /// An Ed25519 signature (64 bytes) of `message` with the private seed.
    static func sign(_ message: [UInt8], seed: [UInt8]) throws -> [UInt8] { try Crypto.ed25519Sign(message, seed: seed) }

    /// Whether `signature` is a valid Ed25519 signature of `message` by `publicKey`.
    static func verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        Crypto.ed25519Verify(signature, of: message, publicKey: publicKey)
    }

    /// Whether two byte strings of equal length are equal, in time that does not depend on where they differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool { Crypto.constantTimeEqual(a, b) }
}

/// An HMAC-SHA256 key set up once, for a key that authenticates many messages
/// (a sibling pair's tag key is tried on every frame it receives).
typealias HMACKey = Crypto.MACKey

extension DeviceIdentity {
    /// The Ed25519 seed this device signs roster changes with, derived from its
    /// X25519 private key so the key store keeps one secret per device.
    var signingSeed: [UInt8] {
        get throws { try KeyAgreement.hkdf(key: privateKey, salt: Array("stele".utf8), info: Array("stele roster signing key v1".utf8), count: 32) }
    }

    /// The Ed25519 public key others check this device's roster changes with.
    public func signingKey() throws -> [UInt8] { try KeyAgreement.signingPublicKey(seed: try signingSeed) }
}
