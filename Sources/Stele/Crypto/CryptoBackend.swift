/// Every cryptographic primitive Stele uses, behind one seam with two backends
/// (never a home-made primitive, DESIGN §3):
/// - ``LibcryptoBackend``: OpenSSL's libcrypto, on Linux and wherever CryptoKit
///   is missing; built and tested on this project's machines;
/// - ``CryptoKitBackend``: Apple's CryptoKit, on macOS, iOS and the other Apple
///   platforms, where apps cannot link libcrypto. It mirrors the libcrypto
///   backend call for call and must pass the same known-answer tests
///   (`CryptoBackendTests`: RFC 7748, RFC 5869, RFC 4231, RFC 8032, NIST GCM,
///   FIPS 180-2), but no machine of this project can build it: it is
///   type-checked against a stub of CryptoKit's API (`scripts/cryptokit-typecheck`;
///   README, "Platforms").
///
/// The rest of the library never imports either library: it calls
/// ``Crypto`` (the backend this platform builds), through the types built on
/// it (``SHA256``, ``RunningDigest``, `KeyAgreement`, `HMACKey`, `Sealing`,
/// ``DeviceIdentity``, ``AccountKey``).
protocol CryptoBackend {
    /// SHA-256 of many small messages, one reusable state per owner.
    associatedtype Hasher: SHA256Hashing
    /// One SHA-256 over bytes added in turn, readable at any point.
    associatedtype Running: SHA256Running
    /// An HMAC-SHA256 key set up once, for many messages.
    associatedtype MACKey: HMACSHA256Keyed

    /// The backend's name, for `stele bench` and error messages.
    static var name: String { get }

    /// `count` bytes from the operating system's cryptographic generator.
    static func randomBytes(_ count: Int) -> [UInt8]

    /// A fresh X25519 private key (32 bytes).
    static func x25519GeneratePrivateKey() throws -> [UInt8]
    /// The X25519 public key of a 32-byte private key.
    static func x25519PublicKey(privateKey: [UInt8]) throws -> [UInt8]
    /// X25519 between a private key and a peer's public key. Throws for a
    /// low-order public key, whose shared secret would be all zeros.
    static func x25519SharedSecret(privateKey: [UInt8], peerPublicKey: [UInt8]) throws -> [UInt8]

    /// HKDF-SHA256 extract-then-expand (RFC 5869): `count` bytes.
    static func hkdfSHA256(key: [UInt8], salt: [UInt8], info: [UInt8], count: Int) throws -> [UInt8]

    /// The Ed25519 public key of a 32-byte private seed (RFC 8032).
    static func ed25519PublicKey(seed: [UInt8]) throws -> [UInt8]
    /// An Ed25519 signature (64 bytes). libcrypto signs deterministically, as
    /// RFC 8032 specifies; CryptoKit adds randomness, so its signatures verify
    /// everywhere but differ from run to run (``signsDeterministically``).
    static func ed25519Sign(_ message: [UInt8], seed: [UInt8]) throws -> [UInt8]
    /// Whether `signature` is a valid Ed25519 signature of `message` by `publicKey`.
    static func ed25519Verify(_ signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool
    /// Whether the same seed and message always give the same signature bytes.
    static var signsDeterministically: Bool { get }

    /// AES-256-GCM: ciphertext ‖ 16-byte tag, under a 32-byte key and a 12-byte nonce.
    static func aesGCMSeal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], associated: [UInt8]) -> [UInt8]
    /// The plaintext of ciphertext ‖ tag, or `nil` when it does not authenticate.
    static func aesGCMOpen(_ sealed: ArraySlice<UInt8>, key: [UInt8], nonce: [UInt8], associated: [UInt8]) -> [UInt8]?

    /// Whether two byte strings are equal, in time that does not depend on where they differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: ArraySlice<UInt8>) -> Bool
}

/// A reusable SHA-256 state: one per owner, never shared between threads.
protocol SHA256Hashing: AnyObject {
    init()
    func hash(_ bytes: UnsafeRawBufferPointer) -> Hash32
}

/// SHA-256 over byte strings added in turn.
protocol SHA256Running: AnyObject {
    init()
    func add(_ bytes: UnsafeRawBufferPointer)
    /// The digest of everything added so far; more may be added after.
    var value: Hash32 { get }
}

/// An HMAC-SHA256 key, safe to use from several threads at once.
protocol HMACSHA256Keyed: AnyObject, Sendable {
    init(_ key: [UInt8]) throws
    /// The 32-byte HMAC of `message`.
    func authenticate(_ message: [UInt8]) throws -> [UInt8]
}

#if canImport(CryptoKit)
/// The backend this platform builds: CryptoKit on Apple platforms.
typealias Crypto = CryptoKitBackend
#else
/// The backend this platform builds: libcrypto.
typealias Crypto = LibcryptoBackend
#endif

/// The name of the cryptographic backend this build uses ("libcrypto" or "CryptoKit").
public var cryptoBackendName: String { Crypto.name }

/// A failure inside the cryptographic backend, with its own error text when it left one.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    public let message: String

    public init(message: String) { self.message = message }

    public var description: String { "crypto: \(message)" }
}
