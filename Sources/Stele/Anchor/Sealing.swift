/// AES-256-GCM from the cryptographic backend (``CryptoBackend``) (never a home-made primitive): a fresh random
/// 96-bit nonce per message, the 128-bit tag appended, and associated data that
/// is authenticated but not encrypted (the anchor's cleartext header).
///
/// Sealed form: nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes).
package enum Sealing {
    package static let nonceCount = 12
    package static let tagCount = 16
    static var overhead: Int { nonceCount + tagCount }

    static func seal(_ plaintext: [UInt8], key: AccountKey, associated: [UInt8]) -> [UInt8] {
        seal(plaintext, key: key, associated: associated, nonce: Crypto.randomBytes(nonceCount))
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
        return Crypto.aesGCMSeal(plaintext, key: keyBytes, nonce: nonce, associated: associated)
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
        return Crypto.aesGCMOpen(sealed, key: keyBytes, nonce: nonce, associated: associated)
    }
}
