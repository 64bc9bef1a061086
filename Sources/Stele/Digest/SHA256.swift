import CCrypto

/// SHA-256 from libcrypto, reusing one context: digests are computed for many
/// small messages (a leaf per write), where setting up a context would dominate.
/// Not `Sendable`: one hasher per replica, used from its owner.
final class SHA256 {
    // Fetched once: EVP_MD_fetch resolves the algorithm through the provider
    // machinery, which is too slow to repeat per message.
    nonisolated(unsafe) private static let algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    private let context: OpaquePointer

    init() {
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

    func hash(_ bytes: [UInt8]) -> Hash32 {
        bytes.withUnsafeBytes { hash($0) }
    }
}
