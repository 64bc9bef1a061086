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

    /// HKDF-SHA256 extract-then-expand: `count` bytes from `key` under `salt` and `info`.
    static func hkdf(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nil) else { throw CryptoError.last("EVP_PKEY_CTX_new_id (HKDF)") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1,
            EVP_PKEY_CTX_set_hkdf_md(context, EVP_sha256()) == 1,
            EVP_PKEY_CTX_set1_hkdf_salt(context, salt, Int32(salt.count)) == 1,
            EVP_PKEY_CTX_set1_hkdf_key(context, key, Int32(key.count)) == 1,
            EVP_PKEY_CTX_add1_hkdf_info(context, info, Int32(info.count)) == 1
        else { throw CryptoError.last("HKDF set-up") }
        var output = [UInt8](repeating: 0, count: count)
        var length = count
        guard EVP_PKEY_derive(context, &output, &length) == 1, length == count else { throw CryptoError.last("EVP_PKEY_derive (HKDF)") }
        return output
    }

    /// HMAC-SHA256 of `message` under `key` (32 bytes).
    static func hmac(key: [UInt8], _ message: [UInt8]) throws -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        guard HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &output, &length) != nil, length == 32 else {
            throw CryptoError.last("HMAC")
        }
        return output
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

extension DeviceIdentity {
    /// The Ed25519 seed this device signs roster changes with, derived from its
    /// X25519 private key so the key store keeps one secret per device.
    var signingSeed: [UInt8] {
        get throws { try KeyAgreement.hkdf(key: privateKey, salt: Array("stele".utf8), info: Array("stele roster signing key v1".utf8), count: 32) }
    }

    /// The Ed25519 public key others check this device's roster changes with.
    public func signingKey() throws -> [UInt8] { try KeyAgreement.signingPublicKey(seed: try signingSeed) }
}
