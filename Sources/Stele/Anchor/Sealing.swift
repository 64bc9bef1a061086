import CCrypto

/// AES-256-GCM from libcrypto (never a home-made primitive): a fresh random
/// 96-bit nonce per message, the 128-bit tag appended, and associated data that
/// is authenticated but not encrypted (the anchor's cleartext header).
///
/// Sealed form: nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes).
package enum Sealing {
    package static let nonceCount = 12
    package static let tagCount = 16
    static var overhead: Int { nonceCount + tagCount }

    nonisolated(unsafe) private static let cipher: OpaquePointer? = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)

    static func seal(_ plaintext: [UInt8], key: AccountKey, associated: [UInt8]) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: nonceCount)
        let random = nonce.withUnsafeMutableBytes { RAND_bytes($0.baseAddress, Int32(nonceCount)) }
        precondition(random == 1, "libcrypto could not produce random bytes")
        return seal(plaintext, key: key, associated: associated, nonce: nonce)
    }

    /// With a nonce drawn from `generator` (a node's own: see ``SiblingChannel/seal(_:to:using:)``).
    static func seal(_ plaintext: [UInt8], key: AccountKey, associated: [UInt8], using generator: inout some RandomNumberGenerator) -> [UInt8] {
        seal(plaintext, key: key, associated: associated, nonce: generator.bytes(nonceCount))
    }

    /// With a given nonce: only for tests, which need fixed output.
    static func seal(_ plaintext: [UInt8], key: AccountKey, associated: [UInt8], nonce: [UInt8]) -> [UInt8] {
        nonce + seal(plaintext, keyBytes: key.bytes, associated: associated, nonce: nonce)
    }

    /// Ciphertext ‖ tag under a raw 32-byte key and a 12-byte nonce, without the
    /// nonce in front (the sibling channel derives a fresh key per frame and uses
    /// the zero nonce).
    package static func seal(_ plaintext: [UInt8], keyBytes: [UInt8], associated: [UInt8], nonce: [UInt8]) -> [UInt8] {
        precondition(nonce.count == nonceCount && keyBytes.count == 32)
        let context = newContext()
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + tagCount)
        var ok = keyBytes.withUnsafeBufferPointer { key in
            nonce.withUnsafeBufferPointer { nonce in
                EVP_EncryptInit_ex2(context, cipher, key.baseAddress, nonce.baseAddress, nil) == 1
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
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagCount), out.baseAddress! + plaintext.count) == 1
        }
        precondition(ok && Int(length + final) == plaintext.count, "AES-256-GCM sealing failed in libcrypto")
        return output
    }

    /// - Returns: the plaintext, or `nil` when the bytes do not authenticate under
    ///   `key` and `associated` (another key, a flipped bit, a cut message).
    static func open(_ sealed: ArraySlice<UInt8>, key: AccountKey, associated: [UInt8]) -> [UInt8]? {
        guard sealed.count >= overhead else { return nil }
        return open(sealed.dropFirst(nonceCount), keyBytes: key.bytes, associated: associated, nonce: Array(sealed.prefix(nonceCount)))
    }

    /// Opens ciphertext ‖ tag under a raw key and a nonce carried elsewhere.
    package static func open(_ sealed: ArraySlice<UInt8>, keyBytes: [UInt8], associated: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        guard sealed.count >= tagCount, keyBytes.count == 32, nonce.count == nonceCount else { return nil }
        let ciphertext = Array(sealed.dropLast(tagCount))
        var tag = Array(sealed.suffix(tagCount))
        let context = newContext()
        defer { EVP_CIPHER_CTX_free(context) }
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count + 1)
        var length: Int32 = 0
        var ok = keyBytes.withUnsafeBufferPointer { key in
            nonce.withUnsafeBufferPointer { nonce in EVP_DecryptInit_ex2(context, cipher, key.baseAddress, nonce.baseAddress, nil) == 1 }
        }
        ok = ok && updateAssociated(context, associated, encrypting: false)
        ok = ok && plaintext.withUnsafeMutableBufferPointer { out in
            ciphertext.withUnsafeBufferPointer { input in
                EVP_DecryptUpdate(context, out.baseAddress, &length, input.baseAddress ?? UnsafePointer(out.baseAddress!), Int32(input.count)) == 1
            }
        }
        ok = ok && tag.withUnsafeMutableBufferPointer { EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagCount), $0.baseAddress) == 1 }
        var final: Int32 = 0
        // The tag is checked here: a mismatch is the one failure expected in use.
        ok = ok && plaintext.withUnsafeMutableBufferPointer { out in EVP_DecryptFinal_ex(context, out.baseAddress! + Int(length), &final) == 1 }
        guard ok else { return nil }
        return Array(plaintext.prefix(Int(length + final)))
    }

    private static func newContext() -> OpaquePointer {
        guard let context = EVP_CIPHER_CTX_new(), cipher != nil else { preconditionFailure("libcrypto could not provide AES-256-GCM") }
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
}
