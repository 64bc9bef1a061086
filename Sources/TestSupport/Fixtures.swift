import Stele

/// Deterministic identities, accounts and replicas for tests.
public enum Fixtures {
    /// A device identity derived from `seed` (the same seed, the same key pair).
    public static func identity(_ seed: UInt64) -> DeviceIdentity {
        var generator = SeededGenerator(seed: seed &* 7919 &+ 1)
        // X25519 accepts any 32 bytes as a private key (it clamps them).
        guard let identity = try? DeviceIdentity(privateKey: generator.bytes(32)) else {
            preconditionFailure("libcrypto refused a 32-byte X25519 private key")
        }
        return identity
    }

    /// A device id derived from `seed`.
    public static func device(_ seed: UInt64) -> DeviceID { identity(seed).deviceID }

    /// Device ids for `count` devices, sorted by id (so index 0 is the lowest).
    public static func devices(_ count: Int, seed: UInt64 = 1) -> [DeviceID] {
        (0..<count).map { device(seed &+ UInt64($0)) }.sorted()
    }

    /// An account id derived from `seed`.
    public static func account(_ seed: UInt64 = 42) -> AccountID {
        var generator = SeededGenerator(seed: seed)
        return AccountID.generate(using: &generator)
    }

    /// A replica on disk in `directory`, with a manual clock and seeded randomness.
    public static func replica(
        in directory: TemporaryDirectory, name: String = "device.stele", account: AccountID = account(),
        device: DeviceID = device(1), clock: ManualWallClock = ManualWallClock(), seed: UInt64? = nil
    ) throws -> Replica {
        try Replica.create(
            at: directory.file(name), account: account, device: device,
            options: Replica.Options(clock: clock, random: SeededGenerator(seed: seed ?? seedOf(device))))
    }

    /// An in-memory replica, for merge-rule tests that need no file.
    public static func memoryReplica(
        account: AccountID = account(), device: DeviceID = device(1), clock: ManualWallClock = ManualWallClock(), seed: UInt64? = nil
    ) throws -> Replica {
        try Replica.create(
            at: ":memory:", account: account, device: device,
            options: Replica.Options(clock: clock, random: SeededGenerator(seed: seed ?? seedOf(device))))
    }

    /// A generator seed of its own for each device, so two devices never mint the same event ids.
    private static func seedOf(_ device: DeviceID) -> UInt64 {
        device.bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }
}

extension String {
    /// The UTF-8 bytes of the string, for values in tests.
    public var bytes: [UInt8] { Array(utf8) }
}

extension Array where Element == UInt8 {
    /// The bytes as UTF-8 text, for messages in tests.
    public var text: String { String(decoding: self, as: UTF8.self) }
}
