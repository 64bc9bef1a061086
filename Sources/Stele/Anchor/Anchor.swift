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

    /// Whether an anchor with this header may replace `stored`, what the substrate
    /// holds (`nil`: nothing, or bytes that are not an anchor). A generation is
    /// written by one round only: this one may replace an anchor of a lower
    /// generation, or its own round's again (a retried write), never another
    /// round's of the same generation or a higher one.
    ///
    /// Seed 001 §8 lets the next round overwrite the anchor of a round abandoned
    /// after its write landed ("a floor nobody stands on"). But a slow write that
    /// outlives its round may land after the next round's, at the same generation,
    /// and put back a snapshot taken before that round's deletes: a device that
    /// then recovers from it brings back what the fleet collected (seed 370010 of
    /// `--devices 3 --steps 1000 --faults join,revoke,restore,crash,anchor,offline`).
    /// So a round that finds its generation taken does not write over it: it reads
    /// the anchor and catches up with it (DESIGN §6, "One round per generation").
    public func mayReplace(_ stored: AnchorHeader?) -> Bool {
        guard let stored else { return true }
        return generation > stored.generation || (generation == stored.generation && round == stored.round)
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

/// The request header a client sends with `PUT /v1/accounts/{a}/anchor` so the
/// hub refuses another round's anchor of the same generation (`409
/// generation_taken`, ``AnchorHeader/mayReplace(_:)``). Without it, an equal
/// generation overwrites, as HUB-API "Anchor" has it.
public enum AnchorRule {
    public static let header = "Stele-Anchor-Rule"
    public static let oneRoundPerGeneration = "one-round-per-generation"
    /// The request headers that ask for it.
    public static let asked = [header: oneRoundPerGeneration]
}
