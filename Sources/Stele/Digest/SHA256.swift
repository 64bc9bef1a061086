import CCrypto

/// SHA-256 from libcrypto, reusing one context: digests are computed for many
/// small messages (a leaf per write, a fingerprint per entity of a ledger pass),
/// where setting up a context would dominate. Public for the ledger benchmark's
/// baseline (hashing what a pass hashes, the same way).
/// Not `Sendable`: one hasher per replica, used from its owner.
public final class SHA256 {
    // Fetched once: EVP_MD_fetch resolves the algorithm through the provider
    // machinery, which is too slow to repeat per message.
    nonisolated(unsafe) static let algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    private let context: OpaquePointer

    public init() {
        guard let context = EVP_MD_CTX_new(), Self.algorithm != nil else {
            preconditionFailure("libcrypto could not provide SHA-256")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// The SHA-256 digest of `bytes`.
    func hash(_ bytes: UnsafeRawBufferPointer) -> Hash32 {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { output in
            var length: UInt32 = 0
            // With a valid context and algorithm these calls cannot fail short of memory corruption.
            let ok =
                EVP_DigestInit_ex(context, Self.algorithm, nil) == 1
                && EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1
                && EVP_DigestFinal_ex(context, output.baseAddress, &length) == 1
            precondition(ok && length == 32, "SHA-256 failed in libcrypto")
            return Hash32(unsafeBytes: UnsafeRawBufferPointer(output))
        }
    }

    public func hash(_ bytes: [UInt8]) -> Hash32 {
        bytes.withUnsafeBytes { hash($0) }
    }
}

/// One SHA-256 over a sequence of byte strings, each prefixed with its length
/// (so two sequences that concatenate alike still differ): a fingerprint of
/// every frame a run delivered, in order (`stele simulate --json`'s `wireDigest`).
public final class RunningDigest {
    private let context: OpaquePointer

    public init() {
        guard let context = EVP_MD_CTX_new(), SHA256.algorithm != nil, EVP_DigestInit_ex(context, SHA256.algorithm, nil) == 1 else {
            preconditionFailure("libcrypto could not provide SHA-256")
        }
        self.context = context
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds one byte string.
    public func add(_ bytes: [UInt8]) {
        let length = withUnsafeBytes(of: UInt64(bytes.count).bigEndian) { Array($0) }
        let ok = EVP_DigestUpdate(context, length, length.count) == 1 && bytes.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, $0.count) } == 1
        precondition(ok, "SHA-256 failed in libcrypto")
    }

    /// The digest of everything added so far (more may be added after).
    public var value: Hash32 {
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
