/// Everything devices of one account say to each other (DESIGN §5), and the one
/// thing they say to a contact's devices (``delivery(_:)``). Frames are encoded
/// by ``FrameCodec``; ``SiblingChannel`` seals the encoded bytes.
public enum Frame: Sendable, Equatable {
    /// Every namespace root, then the fleet generation (001 §7).
    case advertisement(Advertisement)
    /// An advertisement that asks for the recipient's own back: a device sends it
    /// when it starts, so it learns at once where each sibling stands instead of
    /// waiting for their next periodic advertisement. The answer is a plain
    /// ``advertisement(_:)``, so two devices never greet each other in a loop.
    case greeting(Advertisement)
    /// One step of a range reconcile of one namespace.
    case reconcile(ReconcileMessage)
    /// The barrier's leader opens a round (001 §4).
    case gcPropose(BarrierProposal)
    /// A device answers a round with its freshly computed digest (001 §4-5).
    case gcAck(BarrierAnswer)
    /// The leader commits a round: the anchor has landed (001 §4, §8).
    case gcCommit(BarrierCommit)
    /// A sibling that holds tombstones and finds the fleet in sync asks the leader
    /// for a round: the leader may hold none itself, and the advertisement carries
    /// live content only.
    case gcRequest
    /// The leader gave a round up (or was acked for one it no longer runs): a
    /// member holding for that round stops holding at once instead of at its hold
    /// timer, as if the timer had fired (beyond the seed: a failed round no longer
    /// keeps its members from syncing for the round's whole length).
    case gcAbort(RoundNonce)
    /// "I am behind at this generation and cannot use the anchor: send me your snapshot" (DESIGN §6).
    case snapshotRequest(generation: UInt64)
    /// A sibling's full snapshot at its generation, answering a request, its body
    /// sealed with the account key (``SealedSnapshot``).
    case snapshot(SealedSnapshot)
    /// Ops of a conversation delivered to a contact's device, or the receipts
    /// it answers with: the only frame that crosses accounts, sealed with the
    /// contact channel (``SiblingChannel/contact(identity:account:contact:members:revoked:)``).
    case delivery(Delivery)
}

/// Ops of one conversation between two accounts: what one side owes the other
/// (``MessageNamespace/outbox()``), or the receipts for what it took in.
public struct Delivery: Sendable, Equatable {
    /// The conversation's name, the same on both sides (the app's conversation id).
    public let conversation: String
    /// Per message, the ops delivered (or the receipts), by message id.
    public let records: [MessageRecord]
    /// Whether it answers a delivery (the receipts for it) rather than comes
    /// from an outbox: receipts in an answer that name an op the receiver no
    /// longer holds are not answered again (``MessageNamespace/receive(_:from:isAnswer:)``).
    public let isAnswer: Bool

    public init(conversation: String, records: [MessageRecord], isAnswer: Bool = false) {
        self.conversation = conversation
        self.isAnswer = isAnswer
        self.records = records.sorted { Array($0.message.utf8).lexicographicallyPrecedes(Array($1.message.utf8)) }
    }
}

/// A barrier round as the leader names it: `gc_propose` and `gc_commit` carry this.
public struct BarrierProposal: Sendable, Equatable {
    /// The round's fresh random nonce (001 §5).
    public let round: RoundNonce
    /// The content digest: the leader's at propose, the agreed one at commit.
    public let digest: Hash32
    /// The generation the round moves the fleet to (one above the leader's).
    public let generation: UInt64

    public init(round: RoundNonce, digest: Hash32, generation: UInt64) {
        self.round = round
        self.digest = digest
        self.generation = generation
    }
}

/// `gc_commit`: the round, the agreed digest and generation, and the union of
/// what every member had seen when it acked (``Knowledge``).
public struct BarrierCommit: Sendable, Equatable {
    public let proposal: BarrierProposal
    public let knowledge: Knowledge

    public init(proposal: BarrierProposal, knowledge: Knowledge) {
        self.proposal = proposal
        self.knowledge = knowledge
    }
}

/// `gc_ack`: "when you asked, in this round, I was at this digest, having seen
/// this much" (001 §5). An all-zero digest (never a SHA-256 output in practice)
/// declines: the device has collection off and will not ack.
public struct BarrierAnswer: Sendable, Equatable {
    public let round: RoundNonce
    public let digest: Hash32
    public let knowledge: Knowledge

    public init(round: RoundNonce, digest: Hash32, knowledge: Knowledge = Knowledge()) {
        self.round = round
        self.digest = digest
        self.knowledge = knowledge
    }

    public static func decline(_ round: RoundNonce) -> BarrierAnswer { BarrierAnswer(round: round, digest: .zero) }

    public var isDecline: Bool { digest == .zero }
}

/// A device's digest: what it holds, in 32 bytes per namespace.
public struct Advertisement: Sendable, Equatable {
    public struct Root: Sendable, Equatable {
        public let namespace: String
        public let digest: Hash32

        public init(namespace: String, digest: Hash32) {
            self.namespace = namespace
            self.digest = digest
        }
    }

    /// The roots of every replicated namespace, sorted by name.
    public let roots: [Root]
    /// The sender's fleet generation, carried after the roots (001 §7).
    public let generation: UInt64

    public init(roots: [Root], generation: UInt64) {
        self.roots = roots.sorted { $0.namespace < $1.namespace }
        self.generation = generation
    }
}

/// The fingerprint of a set of leaves on the wire: the low 64 bits of their sum
/// and their count. Short, because a false match at worst delays a repair to the
/// next reconcile (the 32-byte roots still differ).
public struct Fingerprint: Sendable, Hashable {
    public let sum64: UInt64
    public let count: UInt64

    public init(sum64: UInt64, count: UInt64) {
        self.sum64 = sum64
        self.count = count
    }

    init(sum: Hash32, count: Int) {
        self.init(sum64: sum.low64, count: UInt64(count))
    }
}

/// One range of a reconcile message. Ranges are contiguous: each starts where
/// the previous one ended (the first at the smallest key) and the last is unbounded.
public struct RangeItem: Sendable, Equatable {
    public enum Mode: Sendable, Equatable {
        /// Nothing to do here.
        case skip
        /// The sender's fingerprint of its leaves in the range.
        case fingerprint(Fingerprint)
        /// The sender's every leaf in the range (it is small).
        case leaves([LeafEntry])
    }

    /// The exclusive upper bound (key bytes), or `nil` for the last range.
    public let upperBound: [UInt8]?
    public let mode: Mode

    public init(upperBound: [UInt8]?, mode: Mode) {
        self.upperBound = upperBound
        self.mode = mode
    }
}

/// A leaf of a range: a key and its 16-byte leaf hash.
public struct LeafEntry: Sendable, Equatable {
    public let key: [UInt8]
    let leaf: Leaf

    init(key: [UInt8], leaf: Leaf) {
        self.key = key
        self.leaf = leaf
    }
}

/// A row of any replicated kind, as reconcile ships it.
public enum WireRecord: Sendable, Equatable {
    case causal(CausalRecord)
    case lww(LWWRecord)
    case event(LogEvent)
    case appendOnly(AppendOnlyRecord)
    /// Every op one device holds of one message.
    case message(MessageRecord)

    /// The record's key bytes (a log event's id), the order records are sent in.
    var sortKey: [UInt8] {
        switch self {
        case .causal(let record): Array(record.key.utf8)
        case .lww(let record): Array(record.key.utf8)
        case .event(let event): event.id.bytes
        case .appendOnly(let record): Array(record.key.utf8)
        case .message(let record): Array(record.message.utf8)
        }
    }
}

/// One step of reconciling one namespace between two devices (DESIGN §5).
public struct ReconcileMessage: Sendable, Equatable {
    /// Which exchange this step belongs to (chosen by the device that started it).
    public var session: UInt64
    public var namespace: String
    /// The namespace's kind, so the records decode without outside knowledge;
    /// checked against the receiver's declaration.
    public var kind: NamespaceKind
    /// The sender's fleet generation: a gap stops content reconcile (001 §7).
    public var generation: UInt64
    /// The sender's tombstone-set fingerprint: "compare, and send me your set if it differs".
    public var tombstoneFingerprint: Fingerprint?
    /// Tombstones shipped: the sender's whole set (`tombstonesComplete`) or those the receiver lacks.
    public var tombstones: [WireRecord]?
    public var tombstonesComplete: Bool
    /// "Apply my tombstones, send back what I lack, then start the ranges again."
    public var restart: Bool
    /// The ranges still to compare, covering all keys (empty: nothing left to compare).
    public var ranges: [RangeItem]
    /// Rows the receiver lacks or holds differently.
    public var records: [WireRecord]
    /// Keys whose rows the sender asks for.
    public var wants: [[UInt8]]

    public init(
        session: UInt64, namespace: String, kind: NamespaceKind, generation: UInt64,
        tombstoneFingerprint: Fingerprint? = nil, tombstones: [WireRecord]? = nil, tombstonesComplete: Bool = false,
        restart: Bool = false, ranges: [RangeItem] = [], records: [WireRecord] = [], wants: [[UInt8]] = []
    ) {
        self.session = session
        self.namespace = namespace
        self.kind = kind
        self.generation = generation
        self.tombstoneFingerprint = tombstoneFingerprint
        self.tombstones = tombstones
        self.tombstonesComplete = tombstonesComplete
        self.restart = restart
        self.ranges = ranges
        self.records = records
        self.wants = wants
    }

    /// Whether the message asks anything of its receiver.
    var needsReply: Bool {
        restart || tombstoneFingerprint != nil || !wants.isEmpty
            || ranges.contains { if case .skip = $0.mode { return false } else { return true } }
    }
}
