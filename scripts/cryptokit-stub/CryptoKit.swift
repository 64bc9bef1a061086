// A stub of Apple's CryptoKit, for TYPE-CHECKING ONLY: scripts/cryptokit-typecheck
// compiles it as a module named `CryptoKit`, so that on Linux (no Apple SDK)
// Sources/Stele/Crypto/CryptoKitBackend.swift is type-checked against CryptoKit's
// public API: argument labels, types, `throws`, generic constraints and Sendable
// conformances. Nothing here is ever run; every body is `fatalError()`.
//
// It declares exactly the part of CryptoKit that CryptoKitBackend.swift uses, and
// the protocols that part is generic over (HashFunction, Digest,
// MessageAuthenticationCode), nothing more. Each declaration copies CryptoKit's
// public signature; where CryptoKit's comes from a protocol extension
// (HashFunction.hash(data:), .update(data:)), so does the stub's.
//
// THIS FILE FOLLOWS CRYPTOKIT, NEVER THE OTHER WAY ROUND. If the type-check fails,
// fix CryptoKitBackend.swift; change this stub only to match CryptoKit's real API
// more closely, with the source that shows it. Anything the backend starts using
// must be added here from CryptoKit's documentation, not from what the backend
// happens to call.
//
// Where each signature was checked (2026):
// - Apple's documentation pages, developer.apple.com/documentation/cryptokit/...:
//   symmetrickey/init(data:); hashfunction (`@preconcurrency protocol HashFunction:
//   Sendable`), hashfunction/hash(data:), hashfunction/update(data:),
//   hashfunction/finalize(), hashfunction/digest; insecure/sha1/update(bufferpointer:)
//   (the same HashFunction requirement SHA256 meets); digest (`@preconcurrency
//   protocol Digest: ContiguousBytes, CustomStringConvertible, Hashable, Sendable,
//   Sequence where Self.Element == UInt8`); sha256digest (Digest, Hashable,
//   ContiguousBytes, Sendable); hmac (`struct HMAC<H> where H: HashFunction`),
//   hmac/authenticationcode(for:using:) (its DataProtocol overload), hmac/mac
//   (`typealias MAC = HashedAuthenticationCode<H>`), hashedauthenticationcode
//   (ContiguousBytes, Hashable, Sequence, Sendable, MessageAuthenticationCode);
//   hkdf, hkdf/derivekey(inputkeymaterial:salt:info:outputbytecount:);
//   curve25519/keyagreement (Sendable), curve25519/keyagreement/privatekey (init(),
//   init(rawRepresentation:), rawRepresentation, publicKey),
//   .../privatekey/sharedsecretfromkeyagreement(with:), .../privatekey/rawrepresentation,
//   .../keyagreement/publickey, .../publickey/init(rawrepresentation:);
//   curve25519/signing (Sendable), .../signing/privatekey,
//   .../privatekey/init(rawrepresentation:), .../privatekey/signature(for:),
//   .../signing/publickey (Sendable), .../publickey/isvalidsignature(_:for:);
//   aes/gcm, aes/gcm/seal(_:using:nonce:authenticating:), aes/gcm/sealedbox,
//   aes/gcm/sealedbox/ciphertext, aes/gcm/sealedbox/tag.
// - A reference listing of the iOS SDK's declarations (onestack.dev/ios-reference/
//   CryptoKit/...), for AES.GCM.open(_:using:authenticating:), AES.GCM.Nonce's
//   init(data:) and withUnsafeBytes, AES.GCM.SealedBox.init(nonce:ciphertext:tag:)
//   (Apple's own pages found were ChaChaPoly's, with the same signatures), and
//   SymmetricKey.withUnsafeBytes.
// - apple/swift-crypto 4.5.0 (commit 1b6b2e27), which mirrors CryptoKit's API, for
//   everything above and for what those pages leave out (exact generic constraints,
//   conformances, withUnsafeBytes overloads): Sources/Crypto/Keys/Symmetric/
//   SymmetricKeys.swift, Digests/HashFunctions.swift, Digests/Digest.swift,
//   Digests/Digests.swift, Digests/HashFunctions_SHA2.swift, Message Authentication
//   Codes/HMAC/HMAC.swift, Message Authentication Codes/MessageAuthenticationCode.swift,
//   Key Derivation/HKDF.swift, Keys/EC/Curve25519.swift, Keys/EC/X25519Keys.swift,
//   Keys/EC/Ed25519Keys.swift, Signatures/Ed25519.swift, Key Agreement/DH.swift,
//   PRF/AES.swift, AEADs/AES/GCM/AES-GCM.swift, AEADs/Nonces.swift. swift-crypto
//   writes `throws(CryptoKitMetaError)`, which is `throws(any Error)` (plain
//   `throws`) outside Embedded Swift; Apple's pages say `throws`.
//   Confirmed from swift-crypto only (Apple's pages for them came back cut short):
//   SymmetricKey's Sendable and ContiguousBytes conformances, SharedSecret's
//   withUnsafeBytes and its Sendable and ContiguousBytes conformances, the
//   Sendable conformance of Curve25519.KeyAgreement.PrivateKey/PublicKey,
//   Curve25519.Signing.PrivateKey, AES, AES.GCM, Nonce and SealedBox.
//
// Left out on purpose: `@available` (Stele's floor, macOS 15 / iOS 18, is above
// every CryptoKit version involved, and availability is not checked on Linux
// anyway); the members and overloads the backend does not call (among them the
// RawSpan overloads of the 2026 SDKs, which no [UInt8] argument can select).

import Foundation

// MARK: Keys

public struct SymmetricKey: ContiguousBytes, Sendable {
    public init<D: ContiguousBytes>(data: D) { fatalError() }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { fatalError() }
}

// MARK: Hashing

@preconcurrency
public protocol Digest: Hashable, Sendable, ContiguousBytes, CustomStringConvertible, Sequence where Element == UInt8 {
    static var byteCount: Int { get }
}

extension Digest {
    public func makeIterator() -> Array<UInt8>.Iterator { fatalError() }

    public static func == (lhs: Self, rhs: Self) -> Bool { fatalError() }

    public var description: String { fatalError() }
}

@preconcurrency
public protocol HashFunction: Sendable {
    static var blockByteCount: Int { get }
    associatedtype Digest: CryptoKit.Digest

    init()
    mutating func update(bufferPointer: UnsafeRawBufferPointer)
    func finalize() -> Digest
}

extension HashFunction {
    public static func hash<D: DataProtocol>(data: D) -> Self.Digest { fatalError() }

    public mutating func update<D: DataProtocol>(data: D) { fatalError() }
}

public struct SHA256: HashFunction, Sendable {
    public static let blockByteCount: Int = 64
    public typealias Digest = SHA256Digest

    public init() { fatalError() }

    public mutating func update(bufferPointer: UnsafeRawBufferPointer) { fatalError() }

    public func finalize() -> Self.Digest { fatalError() }
}

public struct SHA256Digest: Digest {
    public static var byteCount: Int { 32 }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { fatalError() }

    public func hash(into hasher: inout Hasher) { fatalError() }
}

// MARK: Message authentication

@preconcurrency
public protocol MessageAuthenticationCode: Hashable, ContiguousBytes, Sendable, CustomStringConvertible, Sequence
where Element == UInt8 {
    var byteCount: Int { get }
}

extension MessageAuthenticationCode {
    public static func == (lhs: Self, rhs: Self) -> Bool { fatalError() }

    public func makeIterator() -> Array<UInt8>.Iterator { fatalError() }

    public var description: String { fatalError() }
}

public struct HMAC<H: HashFunction>: Sendable {
    public typealias MAC = HashedAuthenticationCode<H>

    public static func authenticationCode<D: DataProtocol>(for data: D, using key: SymmetricKey) -> MAC { fatalError() }
}

public struct HashedAuthenticationCode<H: HashFunction>: MessageAuthenticationCode, Sendable {
    public var byteCount: Int { fatalError() }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { fatalError() }

    public func hash(into hasher: inout Hasher) { fatalError() }
}

// MARK: Key derivation

public struct HKDF<H: HashFunction>: Sendable {
    public static func deriveKey<Salt: DataProtocol, Info: DataProtocol>(
        inputKeyMaterial: SymmetricKey, salt: Salt, info: Info, outputByteCount: Int
    ) -> SymmetricKey { fatalError() }
}

// MARK: Curve25519 (X25519, Ed25519)

public enum Curve25519: Sendable {}

extension Curve25519 {
    public enum KeyAgreement: Sendable {
        public struct PublicKey: Sendable {
            public init<D: ContiguousBytes>(rawRepresentation: D) throws { fatalError() }

            public var rawRepresentation: Data { fatalError() }
        }

        public struct PrivateKey: Sendable {
            public init() { fatalError() }

            public init<D: ContiguousBytes>(rawRepresentation: D) throws { fatalError() }

            public var publicKey: Curve25519.KeyAgreement.PublicKey { fatalError() }

            public var rawRepresentation: Data { fatalError() }

            public func sharedSecretFromKeyAgreement(with publicKeyShare: Curve25519.KeyAgreement.PublicKey) throws -> SharedSecret {
                fatalError()
            }
        }
    }

    public enum Signing: Sendable {
        public struct PrivateKey: Sendable {
            public init<D: ContiguousBytes>(rawRepresentation data: D) throws { fatalError() }

            public var publicKey: Curve25519.Signing.PublicKey { fatalError() }

            public func signature<D: DataProtocol>(for data: D) throws -> Data { fatalError() }
        }

        public struct PublicKey: Sendable {
            public init<D: ContiguousBytes>(rawRepresentation: D) throws { fatalError() }

            public var rawRepresentation: Data { fatalError() }

            public func isValidSignature<S: DataProtocol, D: DataProtocol>(_ signature: S, for data: D) -> Bool { fatalError() }
        }
    }
}

public struct SharedSecret: ContiguousBytes, Sendable {
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { fatalError() }
}

// MARK: AES-GCM

public enum AES: Sendable {}

extension AES {
    public enum GCM: Sendable {
        public static func seal<Plaintext: DataProtocol, AuthenticatedData: DataProtocol>(
            _ message: Plaintext, using key: SymmetricKey, nonce: Nonce? = nil, authenticating authenticatedData: AuthenticatedData
        ) throws -> SealedBox { fatalError() }

        public static func open<AuthenticatedData: DataProtocol>(
            _ sealedBox: SealedBox, using key: SymmetricKey, authenticating authenticatedData: AuthenticatedData
        ) throws -> Data { fatalError() }
    }
}

extension AES.GCM {
    public struct Nonce: ContiguousBytes, Sequence, Sendable {
        public init<D: DataProtocol>(data: D) throws { fatalError() }

        public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { fatalError() }

        public func makeIterator() -> Array<UInt8>.Iterator { fatalError() }
    }

    public struct SealedBox: Sendable {
        public init<C: DataProtocol, T: DataProtocol>(nonce: AES.GCM.Nonce, ciphertext: C, tag: T) throws { fatalError() }

        public var ciphertext: Data { fatalError() }

        public var tag: Data { fatalError() }
    }
}
