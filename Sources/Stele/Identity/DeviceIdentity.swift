/// A device's key pair: X25519 from the cryptographic backend (``CryptoBackend``). The public key is the ``DeviceID``.
///
/// The private key never enters the replica file (a restored backup must not be
/// able to impersonate anything it could not before); apps keep it in their key
/// store and rebuild the identity with ``init(privateKey:)``.
public struct DeviceIdentity: Sendable, Equatable {
    /// The public key, which is the device id.
    public let deviceID: DeviceID
    /// The 32-byte raw X25519 private key.
    public let privateKey: [UInt8]

    /// A fresh key pair from the backend's generator.
    /// - Throws: ``CryptoError`` if the backend fails.
    public static func generate() throws -> DeviceIdentity {
        try DeviceIdentity(privateKey: try Crypto.x25519GeneratePrivateKey())
    }

    /// Rebuilds an identity from its raw private key, deriving the public key.
    /// - Throws: ``CryptoError`` unless `privateKey` is 32 bytes the backend accepts.
    public init(privateKey: [UInt8]) throws {
        guard privateKey.count == 32 else {
            throw CryptoError(message: "an X25519 private key is 32 bytes, got \(privateKey.count)")
        }
        self.privateKey = privateKey
        self.deviceID = try DeviceID(bytes: try Crypto.x25519PublicKey(privateKey: privateKey))
    }
}
