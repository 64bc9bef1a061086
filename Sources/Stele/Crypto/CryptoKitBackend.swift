#if canImport(CryptoKit)
import CryptoKit
import Foundation

/// The primitives from Apple's CryptoKit, for macOS, iOS and the other Apple
/// platforms, which have no libcrypto. It mirrors ``LibcryptoBackend`` call for
/// call (``CryptoBackend`` says what each promises) and answers the same
/// known-answer tests, with one stated difference: CryptoKit's Ed25519
/// signatures carry randomness, so they verify everywhere but are not the bytes
/// RFC 8032 lists (``signsDeterministically`` is false).
///
/// No machine of this project can build this file (Linux only):
/// `scripts/cryptokit-typecheck` type-checks it against a stub of CryptoKit's
/// API. Keep it as small as the libcrypto backend and change the two together.
enum CryptoKitBackend: CryptoBackend {
    typealias Hasher = CryptoKitSHA256
    typealias Running = CryptoKitRunningSHA256
    typealias MACKey = CryptoKitHMACKey

    static let name = "CryptoKit"

    // MARK: Random bytes

    static func randomBytes(_ count: Int) -> [UInt8] {
        // On Apple platforms the system generator is the kernel's cryptographic one.
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    // MARK: X25519 (RFC 7748)

    static func x25519GeneratePrivateKey() throws -> [UInt8] {
        Array(Curve25519.KeyAgreement.PrivateKey().rawRepresentation)
    }

    static func x25519PublicKey(privateKey: [UInt8]) throws -> [UInt8] {
        do {
            return Array(try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKey).publicKey.rawRepresentation)
        } catch {
            throw CryptoError(message: "Curve25519.KeyAgreement.PrivateKey failed: \(error)")
        }
    }

    static func x25519SharedSecret(privateKey: [UInt8], peerPublicKey: [UInt8]) throws -> [UInt8] {
        let secret: [UInt8]
        do {
            let mine = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKey)
            let theirs = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: peerPublicKey)
            secret = try mine.sharedSecretFromKeyAgreement(with: theirs).withUnsafeBytes { Array($0) }
        } catch {
            throw CryptoError(message: "X25519 key agreement failed: \(error)")
        }
        // libcrypto refuses a low-order peer key; refuse it here the same way.
        guard secret.count == 32, secret.contains(where: { $0 != 0 }) else {
            throw CryptoError(message: "X25519 key agreement failed: a low-order public key gives an all-zero secret")
        }
        return secret
    }

    // MARK: HKDF-SHA256 (RFC 5869)

    static func hkdfSHA256(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        HKDF<CryptoKit.SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: key), salt: salt, info: info, outputByteCount: count)
            .withUnsafeBytes { Array($0) }
    }

    // MARK: Ed25519 (RFC 8032)

    static let signsDeterministically = false

    static func ed25519PublicKey(seed: [UInt8]) throws -> [UInt8] {
        do {
            return Array(try Curve25519.Signing.PrivateKey(rawRepresentation: seed).publicKey.rawRepresentation)
        } catch {
            throw CryptoError(message: "Curve25519.Signing.PrivateKey failed: \(error)")
        }
    }

    static func ed25519Sign(_ message: [UInt8], seed: [UInt8]) throws -> [UInt8] {
        do {
            return Array(try Curve25519.Signing.PrivateKey(rawRepresentation: seed).signature(for: message))
        } catch {
            throw CryptoError(message: "Ed25519 signing failed: \(error)")
        }
    }

    static func ed25519Verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == 64, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    // MARK: AES-256-GCM

    static func aesGCMSeal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], associated: [UInt8]) -> [UInt8] {
        precondition(nonce.count == 12 && key.count == 32)
        do {
            let box = try AES.GCM.seal(plaintext, using: SymmetricKey(data: key), nonce: try AES.GCM.Nonce(data: nonce), authenticating: associated)
            return Array(box.ciphertext) + Array(box.tag)
        } catch {
            preconditionFailure("AES-256-GCM sealing failed in CryptoKit: \(error)")
        }
    }

    static func aesGCMOpen(_ sealed: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8], associated: [UInt8]) -> [UInt8]? {
        guard sealed.count >= 16, key.count == 32, nonce.count == 12 else { return nil }
        guard let nonce = try? AES.GCM.Nonce(data: nonce),
            let box = try? AES.GCM.SealedBox(nonce: nonce, ciphertext: sealed.dropLast(16), tag: sealed.suffix(16)),
            let plaintext = try? AES.GCM.open(box, using: SymmetricKey(data: key), authenticating: associated)
        else { return nil }
        return Array(plaintext)
    }

    // MARK: Comparison

    static func constantTimeEqual(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        // CryptoKit has no public byte comparison: every byte is read, whatever differs.
        var difference: UInt8 = 0
        for (left, right) in zip(a, b) { difference |= left ^ right }
        return difference == 0
    }
}

/// SHA-256 through CryptoKit (its hashing takes no setup worth reusing).
final class CryptoKitSHA256: SHA256Hashing {
    init() {}

    func hash(_ bytes: UnsafeRawBufferPointer) -> Hash32 {
        CryptoKit.SHA256.hash(data: bytes).withUnsafeBytes { Hash32(unsafeBytes: $0) }
    }
}

/// SHA-256 over bytes added in turn; the value is read from a copy of the state.
final class CryptoKitRunningSHA256: SHA256Running {
    private var state = CryptoKit.SHA256()

    init() {}

    func add(_ bytes: UnsafeRawBufferPointer) { state.update(bufferPointer: bytes) }

    var value: Hash32 {
        let copy = state
        return copy.finalize().withUnsafeBytes { Hash32(unsafeBytes: $0) }
    }
}

/// An HMAC-SHA256 key: CryptoKit's `SymmetricKey` is an immutable value, safe from any thread.
final class CryptoKitHMACKey: HMACSHA256Keyed {
    private let key: SymmetricKey

    init(_ key: [UInt8]) throws { self.key = SymmetricKey(data: key) }

    func authenticate(_ message: [UInt8]) throws -> [UInt8] {
        Array(HMAC<CryptoKit.SHA256>.authenticationCode(for: message, using: key))
    }
}
#endif
