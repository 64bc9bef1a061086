import Testing
import TestSupport
@testable import Stele

/// The known-answer tests every cryptographic backend must pass (README
/// "Platforms"): the libcrypto backend here, the CryptoKit one on Apple
/// platforms, through the same generic check. A deliberately broken backend
/// proves the check sees each primitive go wrong.
@Suite struct CryptoBackendTests {
    @Test func thisPlatformsBackendAnswersEveryPublishedVector() {
        #expect(KnownAnswers.failures(Crypto.self) == [])
        #if canImport(CryptoKit)
        #expect(cryptoBackendName == "CryptoKit")
        #else
        #expect(cryptoBackendName == "libcrypto")
        #endif
    }

    @Test(arguments: BrokenBackend.Primitive.allCases)
    func aBackendWithOnePrimitiveWrongFailsTheCheckForThatPrimitive(_ primitive: BrokenBackend.Primitive) {
        let failures = BrokenBackend.$broken.withValue(primitive) { KnownAnswers.failures(BrokenBackend.self) }
        #expect(!failures.isEmpty, "breaking \(primitive) went unnoticed")
        #expect(failures.allSatisfy { $0.hasPrefix(primitive.rawValue) }, "\(failures)")
        // Unbroken, the double is the real backend and passes.
        #expect(KnownAnswers.failures(BrokenBackend.self) == [])
    }
}

/// The published vectors, checked against a backend; each failure is named by its primitive.
enum KnownAnswers {
    static func failures<B: CryptoBackend>(_ backend: B.Type) -> [String] {
        var failures: [String] = []
        func check(_ primitive: BrokenBackend.Primitive, _ what: String, _ ok: Bool) {
            if !ok { failures.append("\(primitive.rawValue): \(what)") }
        }
        func hex(_ text: String) -> [UInt8] { Hex.decode(text)! }

        // SHA-256 (FIPS 180-2 examples): "abc" and the empty string, on one reused state.
        let hasher = B.Hasher()
        check(.sha256, "abc", Array("abc".utf8).withUnsafeBytes { hasher.hash($0) }.bytes == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        check(.sha256, "empty", [UInt8]().withUnsafeBytes { hasher.hash($0) }.bytes == hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
        // The running form: "a" then "bc" is "abc", read midway without disturbing it.
        let running = B.Running()
        Array("a".utf8).withUnsafeBytes { running.add($0) }
        check(.runningSHA256, "a", running.value.bytes == hex("ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"))
        Array("bc".utf8).withUnsafeBytes { running.add($0) }
        check(.runningSHA256, "abc", running.value.bytes == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))

        // X25519 (RFC 7748 §6.1).
        let alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
        let bob = hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        check(.x25519, "public key", (try? B.x25519PublicKey(privateKey: alice)) == hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        check(.x25519, "shared secret", (try? B.x25519SharedSecret(privateKey: alice, peerPublicKey: bob)) == hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"))
        check(.x25519, "low-order key refused", (try? B.x25519SharedSecret(privateKey: alice, peerPublicKey: [UInt8](repeating: 0, count: 32))) == nil)
        let generated = try? B.x25519GeneratePrivateKey()
        check(.x25519, "a generated key agrees", generated.map { mine in
            (try? B.x25519SharedSecret(privateKey: mine, peerPublicKey: hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")))
                == (try? B.x25519SharedSecret(privateKey: alice, peerPublicKey: (try? B.x25519PublicKey(privateKey: mine)) ?? []))
        } ?? false)

        // HKDF-SHA256 (RFC 5869 A.1).
        check(.hkdf, "A.1", (try? B.hkdfSHA256(key: [UInt8](repeating: 0x0b, count: 22), salt: hex("000102030405060708090a0b0c"), info: hex("f0f1f2f3f4f5f6f7f8f9"), count: 42))
            == hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))

        // HMAC-SHA256 (RFC 4231 test case 2), twice on one key.
        let mac = try? B.MACKey(Array("Jefe".utf8))
        for round in 1...2 {
            check(.hmac, "case 2, use \(round)", (try? mac?.authenticate(Array("what do ya want for nothing?".utf8)))
                == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
        }

        // Ed25519 (RFC 8032 §7.1 test 1). CryptoKit's signatures carry randomness:
        // they must verify, and be the listed bytes where the backend signs deterministically.
        let seed = hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
        let publicKey = hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
        let listed = hex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
        check(.ed25519, "public key", (try? B.ed25519PublicKey(seed: seed)) == publicKey)
        check(.ed25519, "the listed signature verifies", B.ed25519Verify(listed, of: [], publicKey: publicKey))
        var forged = listed
        forged[10] ^= 1
        check(.ed25519, "a forged signature fails", !B.ed25519Verify(forged, of: [], publicKey: publicKey))
        check(.ed25519, "another message fails", !B.ed25519Verify(listed, of: [0], publicKey: publicKey))
        let signature = try? B.ed25519Sign([], seed: seed)
        check(.ed25519, "its signature verifies", signature.map { B.ed25519Verify($0, of: [], publicKey: publicKey) } ?? false)
        if B.signsDeterministically { check(.ed25519, "its signature is the listed one", signature == listed) }

        // AES-256-GCM (the GCM specification's test cases 15 and 16: without and with associated data).
        let key = hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
        let nonce = hex("cafebabefacedbaddecaf888")
        let plaintext = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255")
        let sealed15 = hex(
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad"
                + "b094dac5d93471bdec1a502270e3cc6c")
        check(.aesGCM, "case 15 seals", B.aesGCMSeal(plaintext, key: key, nonce: nonce, associated: []) == sealed15)
        check(.aesGCM, "case 15 opens", B.aesGCMOpen(sealed15[...], key: key, nonce: nonce, associated: []) == plaintext)
        let associated = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
        let sealed16 = hex(
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662"
                + "76fc6ece0f4e1768cddf8853bb2d551b")
        let plaintext16 = Array(plaintext.prefix(60))
        check(.aesGCM, "case 16 seals", B.aesGCMSeal(plaintext16, key: key, nonce: nonce, associated: associated) == sealed16)
        check(.aesGCM, "case 16 opens", B.aesGCMOpen(sealed16[...], key: key, nonce: nonce, associated: associated) == plaintext16)
        var flipped = sealed16
        flipped[flipped.count - 1] ^= 1
        check(.aesGCM, "a flipped tag is refused", B.aesGCMOpen(flipped[...], key: key, nonce: nonce, associated: associated) == nil)
        check(.aesGCM, "other associated data is refused", B.aesGCMOpen(sealed16[...], key: key, nonce: nonce, associated: []) == nil)
        check(.aesGCM, "an empty message", B.aesGCMOpen(B.aesGCMSeal([], key: key, nonce: nonce, associated: [])[...], key: key, nonce: nonce, associated: []) == [])

        // Comparison and randomness (no published vector: their defining properties).
        check(.constantTimeEqual, "equal", B.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        check(.constantTimeEqual, "last byte differs", !B.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        check(.constantTimeEqual, "first byte differs", !B.constantTimeEqual([0, 2, 3], [1, 2, 3]))
        check(.constantTimeEqual, "lengths differ", !B.constantTimeEqual([1, 2], [1, 2, 3]))
        let draws = (0..<4).map { _ in B.randomBytes(32) }
        check(.randomBytes, "32 bytes each", draws.allSatisfy { $0.count == 32 })
        check(.randomBytes, "four draws differ", Set(draws).count == 4)
        return failures
    }
}

/// The real backend with one primitive made wrong at a time (``broken``): the
/// double that proves ``KnownAnswers`` can fail.
enum BrokenBackend: CryptoBackend {
    enum Primitive: String, CaseIterable, Sendable {
        case sha256, runningSHA256, x25519, hkdf, hmac, ed25519, aesGCM, constantTimeEqual, randomBytes
    }

    @TaskLocal static var broken: Primitive?

    static func spoil(_ bytes: [UInt8], _ primitive: Primitive) -> [UInt8] {
        guard broken == primitive, !bytes.isEmpty else { return bytes }
        var bytes = bytes
        bytes[bytes.count - 1] ^= 0x01
        return bytes
    }

    final class Hasher: SHA256Hashing {
        let real = Crypto.Hasher()
        init() {}
        func hash(_ bytes: UnsafeRawBufferPointer) -> Hash32 {
            spoil(real.hash(bytes).bytes, .sha256).withUnsafeBytes { Hash32(unsafeBytes: $0) }
        }
    }

    final class Running: SHA256Running {
        let real = Crypto.Running()
        init() {}
        func add(_ bytes: UnsafeRawBufferPointer) {
            real.add(bytes)
            // Broken: every byte string is taken in twice.
            if broken == .runningSHA256 { real.add(bytes) }
        }
        var value: Hash32 { real.value }
    }

    final class MACKey: HMACSHA256Keyed {
        let real: Crypto.MACKey
        init(_ key: [UInt8]) throws { real = try Crypto.MACKey(key) }
        func authenticate(_ message: [UInt8]) throws -> [UInt8] { spoil(try real.authenticate(message), .hmac) }
    }

    static let name = "broken"
    static var signsDeterministically: Bool { Crypto.signsDeterministically }

    static func randomBytes(_ count: Int) -> [UInt8] {
        broken == .randomBytes ? [UInt8](repeating: 7, count: count) : Crypto.randomBytes(count)
    }
    static func x25519GeneratePrivateKey() throws -> [UInt8] { try Crypto.x25519GeneratePrivateKey() }
    static func x25519PublicKey(privateKey: [UInt8]) throws -> [UInt8] { spoil(try Crypto.x25519PublicKey(privateKey: privateKey), .x25519) }
    static func x25519SharedSecret(privateKey: [UInt8], peerPublicKey: [UInt8]) throws -> [UInt8] {
        spoil(try Crypto.x25519SharedSecret(privateKey: privateKey, peerPublicKey: peerPublicKey), .x25519)
    }
    static func hkdfSHA256(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8] {
        spoil(try Crypto.hkdfSHA256(key: key, salt: salt, info: info, count: count), .hkdf)
    }
    static func ed25519PublicKey(seed: [UInt8]) throws -> [UInt8] { spoil(try Crypto.ed25519PublicKey(seed: seed), .ed25519) }
    static func ed25519Sign(_ message: [UInt8], seed: [UInt8]) throws -> [UInt8] { spoil(try Crypto.ed25519Sign(message, seed: seed), .ed25519) }
    static func ed25519Verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        broken == .ed25519 ? true : Crypto.ed25519Verify(signature, of: message, publicKey: publicKey)
    }
    static func aesGCMSeal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], associated: [UInt8]) -> [UInt8] {
        spoil(Crypto.aesGCMSeal(plaintext, key: key, nonce: nonce, associated: associated), .aesGCM)
    }
    static func aesGCMOpen(_ sealed: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8], associated: [UInt8]) -> [UInt8]? {
        Crypto.aesGCMOpen(sealed, key: key, nonce: nonce, associated: associated)
    }
    static func constantTimeEqual(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool {
        broken == .constantTimeEqual ? a.first == b.first : Crypto.constantTimeEqual(a, b)
    }
}
