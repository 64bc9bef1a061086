// A stand-in for Stele's Hash32, for scripts/cryptokit-typecheck only: the one Stele
// type Sources/Stele/Crypto/CryptoBackend.swift and CryptoKitBackend.swift use besides
// their own. It mirrors the declaration of `Hash32` and its initializer
// `init(unsafeBytes pointer: UnsafeRawBufferPointer)` in Sources/Stele/Digest/Hash32.swift
// (the script checks that this initializer is still there, word for word); keep the two
// the same. Never compiled into Stele.
public struct Hash32: Hashable, Sendable {
    init(unsafeBytes pointer: UnsafeRawBufferPointer) { fatalError() }
}

/// Stele's own `SHA256` (Sources/Stele/Digest/SHA256.swift) shadows CryptoKit's inside
/// the module, as it does on Apple platforms: the backend must write `CryptoKit.SHA256`,
/// and an unqualified `SHA256` fails here as it would there.
public final class SHA256 {
    public init() {}
}
