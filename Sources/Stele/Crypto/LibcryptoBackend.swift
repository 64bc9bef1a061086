#if !canImport(CryptoKit)
import CCrypto

/// The primitives from OpenSSL's libcrypto (3.x), through its provider API
/// (``CryptoBackend`` says what each call promises). Algorithms are fetched
/// once: resolving one by name per call cost more than the work itself.
enum LibcryptoBackend: CryptoBackend {
    typealias Hasher = LibcryptoSHA256
    typealias Running = LibcryptoRunningSHA256
    typealias MACKey = LibcryptoHMACKey

    static let name = "libcrypto"

    // Fetched algorithms are immutable and reference-counted: libcrypto allows
    // them to be used from any thread.
    nonisolated(unsafe) static let sha256Algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)
    nonisolated(unsafe) private static let hkdfAlgorithm: OpaquePointer? = stele_hkdf_fetch()
    nonisolated(unsafe) static let hmacAlgorithm: OpaquePointer? = stele_hmac_fetch()
    nonisolated(unsafe) private static let aesGCM: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    // MARK: Random bytes

    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBytes { RAND_bytes($0.baseAddress, Int32($0.count)) }
        precondition(ok == 1, "libcrypto could not produce random bytes")
        return bytes
    }

    // MARK: X25519 (RFC 7748)

    static func x25519GeneratePrivateKey() throws -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nil) else { throw error("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw error("EVP_PKEY_keygen_init") }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen(context, &key) == 1, let key else { throw error("EVP_PKEY_keygen") }
        defer { EVP_PKEY_free(key) }
        var privateKey = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_private_key(key, &privateKey, &length) == 1, length == 32 else {
            throw error("EVP_PKEY_get_raw_private_key")
        }
        return privateKey
    }

    static func x25519PublicKey(privateKey: [UInt8]) throws -> [UInt8] {
        try rawPublicKey(EVP_PKEY_X25519, privateKey: privateKey, named: "X25519")
    }

    /// The 32-byte public key of a raw 32-byte private key of `type` (X25519, Ed25519).
    private static func rawPublicKey(_ type: Int32, privateKey: [UInt8], named name: String) throws -> [UInt8] {
        guard let key = EVP_PKEY_new_raw_private_key(type, nil, privateKey, privateKey.count) else {
            throw error("EVP_PKEY_new_raw_private_key (\(name))")
        }
        defer { EVP_PKEY_free(key) }
        var publicKey = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key, &publicKey, &length) == 1, length == 32 else {
            throw error("EVP_PKEY_get_raw_public_key (\(name))")
        }
        return publicKey
    }

    static func x25519SharedSecret(privateKey: [UInt8], peerPublicKey: [UInt8]) throws -> [UInt8] {
        guard let mine = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, privateKey.count) else {
            throw error("EVP_PKEY_new_raw_private_key")
        }
        defer { EVP_PKEY_free(mine) }
        guard let theirs = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, peerPublicKey, peerPublicKey.count) else {
            throw error("EVP_PKEY_new_raw_public_key")
        }
        defer { EVP_PKEY_free(theirs) }
        guard let context = EVP_PKEY_CTX_new(mine, nil) else { throw error("EVP_PKEY_CTX_new") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, theirs) == 1 else {
            throw error("EVP_PKEY_derive_set_peer")
        }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = 32
        // libcrypto refuses a low-order peer key here (an all-zero secret).
        guard EVP_PKEY_derive(context, &secret, &length) == 1, length == 32 else { throw error("EVP_PKEY_derive (X25519)") }
        return secret
    }

    // MARK: HKDF-SHA256 (RFC 5869)

    static func hkdfSHA256(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        guard let algorithm = hkdfAlgorithm else { throw error("EVP_KDF_fetch (HKDF)") }
        var output = [UInt8](repeating: 0, count: count)
        guard stele_hkdf_sha256(algorithm, key, key.count, salt, salt.count, info, info.count, &output, count) == 1 else {
            throw error("EVP_KDF_derive (HKDF)")
        }
        return output
    }

    // MARK: Ed25519 (RFC 8032)

    static let signsDeterministically = true

    static func ed25519PublicKey(seed: [UInt8]) throws -> [UInt8] {
        try rawPublicKey(EVP_PKEY_ED25519, privateKey: seed, named: "Ed25519")
    }

    static func ed25519Sign(_ message: [UInt8], seed: [UInt8]) throws -> [UInt8] {
        guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, seed.count) else {
            throw error("EVP_PKEY_new_raw_private_key (Ed25519)")
        }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { throw error("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1 else { throw error("EVP_DigestSignInit") }
        var signature = [UInt8](repeating: 0, count: 64)
        var length = 64
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == 64 else { throw error("EVP_DigestSign") }
        return signature
    }

    static func ed25519Verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == 64, publicKey.count == 32,
            let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count)
        else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }

    // MARK: AES-256-GCM

    static func aesGCMSeal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], associated: [UInt8]) -> [UInt8] {
        precondition(nonce.count == 12 && key.count == 32)
        let context = cipherContext()
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + 16)
        var ok = key.withUnsafeBufferPointer { key in
            nonce.withUnsafeBufferPointer { nonce in
                EVP_EncryptInit_ex2(context, aesGCM, key.baseAddress, nonce.baseAddress, nil) == 1
            }
        }
        var length: Int32 = 0
        ok = ok && updateAssociated(context, associated, encrypting: true)
        ok = ok && output.withUnsafeMutableBufferPointer { out in
            plaintext.withUnsafeBufferPointer { input in
                // A zero-length update is legal; libcrypto wants a non-null pointer.
                EVP_EncryptUpdate(context, out.baseAddress, &length, input.baseAddress ?? UnsafePointer(out.baseAddress!), Int32(input.count)) == 1
            }
        }
        var final: Int32 = 0
        ok = ok && output.withUnsafeMutableBufferPointer { out in EVP_EncryptFinal_ex(context, out.baseAddress! + Int(length), &final) == 1 }
        ok = ok && output.withUnsafeMutableBufferPointer { out in
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, out.baseAddress! + plaintext.count) == 1
        }
        precondition(ok && Int(length + final) == plaintext.count, "AES-256-GCM sealing failed in libcrypto")
        return output
    }

    static func aesGCMOpen(_ sealed: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8], associated: [UInt8]) -> [UInt8]? {
        guard sealed.count >= 16, key.count == 32, nonce.count == 12 else { return nil }
        let ciphertext = Array(sealed.dropLast(16))
        var tag = Array(sealed.suffix(16))
        let context = cipherContext()
        defer { EVP_CIPHER_CTX_free(context) }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count + 1)
        var length: Int32 = 0
        var ok = key.withUnsafeBufferPointer { key in
            nonce.withUnsafeBufferPointer { nonce in EVP_DecryptInit_ex2(context, aesGCM, key.baseAddress, nonce.baseAddress, nil) == 1 }
        }
        ok = ok && updateAssociated(context, associated, encrypting: false)
        ok = ok && plaintext.withUnsafeMutableBufferPointer { out in
            ciphertext.withUnsafeBufferPointer { input in
                EVP_DecryptUpdate(context, out.baseAddress, &length, input.baseAddress ?? UnsafePointer(out.baseAddress!), Int32(input.count)) == 1
            }
        }
        ok = ok && tag.withUnsafeMutableBufferPointer { EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, $0.baseAddress) == 1 }
        var final: Int32 = 0
        // The tag is checked here: a mismatch is the one failure expected in use.
        ok = ok && plaintext.withUnsafeMutableBufferPointer { out in EVP_DecryptFinal_ex(context, out.baseAddress! + Int(length), &final) == 1 }
        guard ok else { return nil }
        return Array(plaintext.prefix(Int(length + final)))
    }

    private static func cipherContext() -> OpaquePointer {
        guard let context = EVP_CIPHER_CTX_new(), aesGCM != nil else { preconditionFailure("libcrypto could not provide AES-256-GCM") }
        return context
    }

    private static func updateAssociated(_ context: OpaquePointer, _ associated: [UInt8], encrypting: Bool) -> Bool {
        guard !associated.isEmpty else { return true }
        var ignored: Int32 = 0
        return associated.withUnsafeBufferPointer { data in
            encrypting
                ? EVP_EncryptUpdate(context, nil, &ignored, data.baseAddress, Int32(data.count)) == 1
                : EVP_DecryptUpdate(context, nil, &ignored, data.baseAddress, Int32(data.count)) == 1
        }
    }

    // MARK: Comparison

    static func constantTimeEqual(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { left in Array(b).withUnsafeBytes { right in CRYPTO_memcmp(left.baseAddress, right.baseAddress, a.count) == 0 } }
    }

    // MARK: Errors

    /// The error for a failed call, draining OpenSSL's error queue into its text.
    static func error(_ function: String) -> CryptoError {
        var text = ""
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            text += text.isEmpty ? line : "; " + line
        }
        return CryptoError(message: "\(function) failed" + (text.isEmpty ? "" : ": \(text)"))
    }
}

/// SHA-256 on one reused libcrypto context: digests are computed for many small
/// messages (a leaf per write, a fingerprint per entity of a ledger pass), where
/// setting up a context would dominate.
final class LibcryptoSHA256: SHA256Hashing {
    private let context: OpaquePointer

    init() {
        guard let context = EVP_MD_CTX_new(), LibcryptoBackend.sha256Algorithm != nil else {
            preconditionFailure("libcrypto could not provide SHA-256")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    func hash(_ bytes: UnsafeRawBufferPointer) -> Hash32 {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { output in
            var length: UInt32 = 0
            // With a valid context and algorithm these calls cannot fail short of memory corruption.
            let ok =
                EVP_DigestInit_ex(context, LibcryptoBackend.sha256Algorithm, nil) == 1
                && EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1
                && EVP_DigestFinal_ex(context, output.baseAddress, &length) == 1
            precondition(ok && length == 32, "SHA-256 failed in libcrypto")
            return Hash32(unsafeBytes: UnsafeRawBufferPointer(output))
        }
    }
}

/// SHA-256 over bytes added in turn; the value is read from a copy of the context.
final class LibcryptoRunningSHA256: SHA256Running {
    private let context: OpaquePointer

    init() {
        guard let context = EVP_MD_CTX_new(), LibcryptoBackend.sha256Algorithm != nil,
            EVP_DigestInit_ex(context, LibcryptoBackend.sha256Algorithm, nil) == 1
        else { preconditionFailure("libcrypto could not provide SHA-256") }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    func add(_ bytes: UnsafeRawBufferPointer) {
        precondition(EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1, "SHA-256 failed in libcrypto")
    }

    var value: Hash32 {
        guard let copy = EVP_MD_CTX_new() else { preconditionFailure("libcrypto is out of memory") }
        defer { EVP_MD_CTX_free(copy) }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { output in
            var length: UInt32 = 0
            let ok = EVP_MD_CTX_copy_ex(copy, context) == 1 && EVP_DigestFinal_ex(copy, output.baseAddress, &length) == 1
            precondition(ok && length == 32, "SHA-256 failed in libcrypto")
            return Hash32(unsafeBytes: UnsafeRawBufferPointer(output))
        }
    }
}

/// An HMAC-SHA256 key set up once in libcrypto, for a key that authenticates
/// many messages (a sibling pair's tag key is tried on every frame it receives).
// @unchecked Sendable is safe: the keyed context is never changed after `init`;
// each message is authenticated on a duplicate of it (EVP_MAC_CTX_dup), and
// duplicating only reads it, which libcrypto allows from several threads at once.
final class LibcryptoHMACKey: HMACSHA256Keyed, @unchecked Sendable {  // safe: the keyed context is never changed after init; each use duplicates it (above)
    private let context: OpaquePointer

    /// - Throws: ``CryptoError`` when libcrypto cannot provide HMAC-SHA256.
    init(_ key: [UInt8]) throws {
        guard let algorithm = LibcryptoBackend.hmacAlgorithm, let context = stele_hmac_sha256_keyed(algorithm, key, key.count) else {
            throw LibcryptoBackend.error("EVP_MAC_init (HMAC-SHA256)")
        }
        self.context = context
    }

    deinit { EVP_MAC_CTX_free(context) }

    func authenticate(_ message: [UInt8]) throws -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        guard stele_hmac_keyed(context, message, message.count, &output) == 1 else { throw LibcryptoBackend.error("HMAC-SHA256") }
        return output
    }
}
#endif
