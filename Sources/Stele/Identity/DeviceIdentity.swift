import CCrypto

/// A device's key pair: X25519 from libcrypto. The public key is the ``DeviceID``.
///
/// The private key never enters the replica file (a restored backup must not be
/// able to impersonate anything it could not before); apps keep it in their key
/// store and rebuild the identity with ``init(privateKey:)``.
public struct DeviceIdentity: Sendable, Equatable {
    /// The public key, which is the device id.
    public let deviceID: DeviceID
    /// The 32-byte raw X25519 private key.
    public let privateKey: [UInt8]

    /// A fresh key pair from libcrypto's generator.
    /// - Throws: ``CryptoError`` if libcrypto fails.
    public static func generate() throws -> DeviceIdentity {
        guard let context = EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nil) else { throw CryptoError.last("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw CryptoError.last("EVP_PKEY_keygen_init") }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen(context, &key) == 1, let key else { throw CryptoError.last("EVP_PKEY_keygen") }
        defer { EVP_PKEY_free(key) }
        var privateKey = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_private_key(key, &privateKey, &length) == 1, length == 32 else {
            throw CryptoError.last("EVP_PKEY_get_raw_private_key")
        }
        return try DeviceIdentity(privateKey: privateKey)
    }

    /// Rebuilds an identity from its raw private key, deriving the public key.
    /// - Throws: ``CryptoError`` unless `privateKey` is 32 bytes libcrypto accepts.
    public init(privateKey: [UInt8]) throws {
        guard privateKey.count == 32 else {
            throw CryptoError(message: "an X25519 private key is 32 bytes, got \(privateKey.count)")
        }
        guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, privateKey, privateKey.count) else {
            throw CryptoError.last("EVP_PKEY_new_raw_private_key")
        }
        defer { EVP_PKEY_free(key) }
        var publicKey = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key, &publicKey, &length) == 1, length == 32 else {
            throw CryptoError.last("EVP_PKEY_get_raw_public_key")
        }
        self.privateKey = privateKey
        self.deviceID = try DeviceID(bytes: publicKey)
    }
}

/// A failure inside libcrypto, with OpenSSL's own error text when it left one.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    public let message: String

    public init(message: String) { self.message = message }

    /// The error for a failed call, draining OpenSSL's error queue.
    static func last(_ function: String) -> CryptoError {
        var text = ""
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            text += text.isEmpty ? line : "; " + line
        }
        return CryptoError(message: "\(function) failed" + (text.isEmpty ? "" : ": \(text)"))
    }

    public var description: String { "crypto: \(message)" }
}
