/// The account key (001 §7's BackupKey): 32 random bytes the account's devices
/// share, which seal the anchor's snapshot and sibling-served snapshots with
/// AES-256-GCM. It lives outside the replica file, in the device's ``KeyRing``
/// (``KeyStore``), so restoring a replica from a backup does not lose it; a
/// revoke rotates it (``WrappedAccountKey``).
public struct AccountKey: Sendable, Equatable {
    public static let byteCount = 32

    public let bytes: [UInt8]

    /// - Throws: ``CodecError`` unless `bytes` holds exactly 32 bytes.
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw CodecError(.valueOutOfRange, "an account key is \(Self.byteCount) bytes, got \(bytes.count)")
        }
        self.bytes = Array(bytes)
    }

    /// A fresh key from the backend's cryptographic generator.
    public static func generate() -> AccountKey {
        AccountKey(unchecked: Crypto.randomBytes(byteCount))
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }
}
