/// An account: the set of devices that sync with each other. 16 random bytes.
public struct AccountID: Hashable, Sendable, CustomStringConvertible {
    /// The number of bytes in an account id.
    public static let byteCount = 16

    /// The 16 bytes.
    public let bytes: [UInt8]

    /// - Throws: ``CodecError`` unless `bytes` holds exactly 16 bytes.
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw CodecError(.valueOutOfRange, "an account id is \(Self.byteCount) bytes, got \(bytes.count)")
        }
        self.bytes = Array(bytes)
    }

    /// Parses 32 hexadecimal digits.
    public init?(hex: String) {
        guard let bytes = Hex.decode(hex), let id = try? AccountID(bytes: bytes) else { return nil }
        self = id
    }

    /// A fresh random account id.
    public static func generate<Generator: RandomNumberGenerator>(using generator: inout Generator) -> AccountID {
        let bytes = generator.bytes(byteCount)
        // Exactly 16 bytes by construction.
        return AccountID(uncheckedBytes: bytes)
    }

    /// A fresh random account id from the system generator.
    public static func generate() -> AccountID {
        var generator = SystemRandomNumberGenerator()
        return generate(using: &generator)
    }

    private init(uncheckedBytes: [UInt8]) { bytes = uncheckedBytes }

    /// All 32 hexadecimal digits.
    public var hex: String { Hex.encode(bytes) }

    public var description: String { hex }
}
