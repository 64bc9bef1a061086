/// The fleet's generation on a second substrate (001 §7): a value a restore of
/// the device cannot roll back. Its cleartext header says which barrier round
/// wrote it (generation, round nonce, the digest the round agreed on), so
/// checking it needs no key; its body is a full snapshot of the account's
/// content, sealed with the ``AccountKey``, from which a rolled-back device
/// recovers.
public struct Anchor: Sendable, Equatable {
    public let header: AnchorHeader
    /// The snapshot, in the clear (sealed only on the substrate).
    public let snapshot: [UInt8]

    public init(header: AnchorHeader, snapshot: [UInt8]) {
        self.header = header
        self.snapshot = snapshot
    }
}

/// What anyone may read of an anchor without the key.
public struct AnchorHeader: Sendable, Equatable {
    /// The account the anchor belongs to: an anchor of another account is refused.
    public let account: AccountID
    /// The fleet generation the round moved to.
    public let generation: UInt64
    /// The nonce of the barrier round that wrote it (001 §5).
    public let round: RoundNonce
    /// The digest the round's acks agreed on.
    public let digest: Hash32

    public init(account: AccountID, generation: UInt64, round: RoundNonce, digest: Hash32) {
        self.account = account
        self.generation = generation
        self.round = round
        self.digest = digest
    }
}

/// The fresh random 16 bytes that name a barrier round (001 §4-5).
public struct RoundNonce: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 16

    public let bytes: [UInt8]

    /// - Throws: ``CodecError`` unless `bytes` holds exactly 16 bytes.
    public init(bytes: some Collection<UInt8>) throws {
        guard bytes.count == Self.byteCount else {
            throw CodecError(.valueOutOfRange, "a round nonce is \(Self.byteCount) bytes, got \(bytes.count)")
        }
        self.bytes = Array(bytes)
    }

    /// A nonce drawn from `generator` (the simulator injects a seeded one).
    public static func generate<Generator: RandomNumberGenerator>(using generator: inout Generator) -> RoundNonce {
        let bytes = generator.bytes(byteCount)
        return RoundNonce(unchecked: bytes)
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    public var description: String { Hex.encode(bytes) }
}

/// What a device concludes from its own generation and the anchor's (001 §7).
/// The generation advances only at a barrier, and a barrier commits only with
/// every roster member's ack, so an anchor ahead of the device means the device
/// was there and has since un-seen it: it was restored, not left behind.
public enum AnchorDecision: Sendable, Equatable {
    /// No anchor has been written (or it cannot be reached): nothing to compare.
    case noAnchor
    /// The device stands at or above the anchor's generation.
    case current
    /// The device was rolled back below the anchor: recover from its snapshot.
    case rolledBack(to: UInt64)

    public static func decide(local: UInt64, anchor: UInt64?) -> AnchorDecision {
        guard let anchor else { return .noAnchor }
        return anchor > local ? .rolledBack(to: anchor) : .current
    }
}
