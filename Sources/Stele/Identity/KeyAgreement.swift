import CCrypto

/// The asymmetric and key-derivation primitives the sealed channel and the
/// roster are built from, each a direct call into libcrypto (DESIGN §3: never a
/// home-made primitive): X25519 key agreement, HKDF-SHA256 (RFC 5869) and
/// Ed25519 signatures (RFC 8032).
enum KeyAgreement {
    /// X25519 between this private key and a peer's public key (the peer's ``DeviceID``).
    /// - Throws: ``CryptoError`` when libcrypto refuses, among others for a
    ///   low-order public key whose shared secret would be all zeros.
    static func sharedSecret(privateKey: [UInt8], peer: DeviceID) throws -> [UInt8] {
        guard let mine = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, privateKey.count) else {
            throw CryptoError.last("EVP_PKEY_new_raw_private_key")
        }
        defer { EVP_PKEY_free(mine) }
        let peerBytes = peer.bytes
        guard let theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, peerBytes, peerBytes.count) else {
            throw CryptoError.last("EVP_PKEY_new_raw_public_key")
        }
        defer { EVP_PKEY_free(theirs) }
        guard let context = EVP_PKEY_CTX_new(mine, nil) else { throw CryptoError.last("EVP_PKEY_CTX_new") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, theirs) == 1 else {
            throw CryptoError.last("EVP_PKEY_derive_set_peer")
        }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else { throw CryptoError.last("EVP_PKEY_derive (X25519)") }
        return secret
    }

    // Fetched once (see shim.h): resolving an algorithm by name per call cost more
    // than the derivation itself. Fetched algorithms are immutable and
    // reference-counted: libcrypto allows them to be used from any thread.
    nonisolated(unsafe) private static let hkdfAlgorithm: OpaquePointer? = stele_hkdf_fetch()
    nonisolated(unsafe) static let hmacAlgorithm: OpaquePointer? = stele_hmac_fetch()

    /// HKDF-SHA256 extract-then-expand: `count` bytes from `key` under `salt` and `info`.
    static func hkdf(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        guard let algorithm = hkdfAlgorithm else { throw CryptoError.last("EVP_KDF_fetch (HKDF)") }
        var output = [UInt8](repeating: 0, count: count)
        guard stele_hkdf_sha256(algorithm, key, key.count, salt, salt.count, info, info.count, &output, count) == 1 else {
            throw CryptoError.last("EVP_KDF_derive (HKDF)")
        }
        return output
    }

    /// HMAC-SHA256 of `message` under `key` (32 bytes).
    static func hmac(key: [UInt8], _ message: [UInt8]) throws -> [UInt8] {
        try HMACKey(key).authenticate(message)
    }

    /// The Ed25519 public key of a 32-byte private seed.
    static func signingPublicKey(seed: [UInt8]) throws -> [UInt8] {
        guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, seed.count) else {
            throw CryptoError.last("EVP_PKEY_new_raw_private_key (Ed25519)")
        }
        defer { EVP_PKEY_free(key) }
        var publicKey = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key, &publicKey, &length) == 1, length == 32 else { throw CryptoError.last("EVP_PKEY_get_raw_public_key (Ed25519)") }
        return publicKey
    }

    /// An Ed25519 signature (64 bytes) of `message` with the private seed.
    static func sign(_ message: [UInt8], seed: [UInt8]) throws -> [UInt8] {
        guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, seed.count) else {
            throw CryptoError.last("EVP_PKEY_new_raw_private_key (Ed25519)")
        }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.last("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1 else { throw CryptoError.last("EVP_DigestSignInit") }
        var signature = [UInt8](repeating: 0, count: 64)
        var length = 64
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == 64 else { throw CryptoError.last("EVP_DigestSign") }
        return signature
    }

    /// Whether `signature` is a valid Ed25519 signature of `message` by `publicKey`.
    static func verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == 64, publicKey.count == 32,
            let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count)
        else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }

    /// Whether two byte strings of equal length are equal, in time that does not depend on where they differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { left in Array(b).withUnsafeBytes { right in CRYPTO_memcmp(left.baseAddress, right.baseAddress, a.count) == 0 } }
    }
}

/// An HMAC-SHA256 key set up once in libcrypto, for a key that authenticates
/// many messages (a sibling pair's tag key is tried on every frame it receives).
// @unchecked Sendable is safe: the keyed context is never changed after `init`;
// each message is authenticated on a duplicate of it (EVP_MAC_CTX_dup), and
// duplicating only reads it, which libcrypto allows from several threads at once.
final class HMACKey: @unchecked Sendable {  // safe: the keyed context is never changed after init; each use duplicates it (above)
    private let context: OpaquePointer

    /// - Throws: ``CryptoError`` when libcrypto cannot provide HMAC-SHA256.
    init(_ key: [UInt8]) throws {
        guard let algorithm = KeyAgreement.hmacAlgorithm, let context = stele_hmac_sha256_keyed(algorithm, key, key.count) else {
            throw CryptoError.last("EVP_MAC_init (HMAC-SHA256)")
        }
        self.context = context
    }

    deinit { EVP_MAC_CTX_free(context) }

    /// The 32-byte HMAC of `message`.
    func authenticate(_ message: [UInt8]) throws -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        guard stele_hmac_keyed(context, message, message.count, &output) == 1 else { throw CryptoError.last("HMAC-SHA256") }
        return output
    }
}

extension DeviceIdentity {
    /// The Ed25519 seed this device signs roster changes with, derived from its
    /// X25519 private key so the key store keeps one secret per device.
    var signingSeed: [UInt8] {
        get throws { try KeyAgreement.hkdf(key: privateKey, salt: Array("stele".utf8), info: Array("stele roster signing key v1".utf8), count: 32) }
    }

    /// The Ed25519 public key others check this device's roster changes with.
    public func signingKey() throws -> [UInt8] { try KeyAgreement.signingPublicKey(seed: try signingSeed) }
}
