/// What a device signs to open a session on a hub (HUB-API "sessions"): Ed25519
/// with its roster signing key over `"stele hub session v1" ‖ account ‖ device ‖
/// time`, the time as eight big-endian bytes of milliseconds since 1970. The hub
/// checks the signature against the key the roster log gives the device and the
/// time against its own clock, so a proof cannot be replayed into another
/// account, for another device, or much later.
public enum HubSessionProof {
    /// The signed bytes.
    public static func statement(account: AccountID, device: DeviceID, timeMilliseconds: Int64) -> [UInt8] {
        var writer = ByteWriter(capacity: 64)
        writer.append(Array("stele hub session v1".utf8))
        writer.append(account.bytes)
        writer.append(device.bytes)
        writer.appendBigEndian(UInt64(bitPattern: timeMilliseconds))
        return writer.bytes
    }

    /// The device's signature for a session at `timeMilliseconds`.
    /// - Throws: ``CryptoError`` when the cryptographic backend fails.
    public static func sign(by identity: DeviceIdentity, account: AccountID, timeMilliseconds: Int64) throws -> [UInt8] {
        try KeyAgreement.sign(statement(account: account, device: identity.deviceID, timeMilliseconds: timeMilliseconds), seed: try identity.signingSeed)
    }

    /// Whether `signature` is `publicKey`'s proof for `device` in `account` at `timeMilliseconds`.
    public static func verify(_ signature: [UInt8], account: AccountID, device: DeviceID, timeMilliseconds: Int64, publicKey: [UInt8]) -> Bool {
        KeyAgreement.verify(signature, of: statement(account: account, device: device, timeMilliseconds: timeMilliseconds), publicKey: publicKey)
    }
}

extension Hash32 {
    /// The SHA-256 of `bytes`, for callers outside the library (the hub keeps
    /// session tokens and invite codes only as their digests).
    public static func sha256(of bytes: [UInt8]) -> Hash32 { SHA256().hash(bytes) }
}
