/// A full snapshot of a replica's live content: the body of an anchor (001 §7),
/// and what a sibling serves (sealed, ``SealedSnapshot``) a device that cannot
/// reach the anchor or has just joined.
///
/// Bytes: "STELESNP", a format byte, the generation it was taken for (varint),
/// the ``Knowledge`` it reflects (what the fleet had seen when it agreed), the
/// number of namespaces, then per namespace one length-prefixed reconcile
/// step (``ReconcileCodec``) carrying every live record with its bookkeeping
/// (vectors, stamps): the rows recovery imports, with their clocks (001 §7:
/// recovered rows' clocks come from the snapshot). An anchor's holds no `lww` or
/// `causal` tombstones: it is written for a round that collects them. A sibling's
/// holds those it keeps (``take(of:generation:knowledge:tombstones:)``).
public struct Snapshot: Sendable, Equatable {
    public let generation: UInt64
    /// What the fleet had seen when this content was agreed: recovery keeps the
    /// local records it does not cover.
    public let knowledge: Knowledge
    /// One step per replicated namespace, in name order, `records` holding its live rows
    /// (and, in a sibling's, the `lww` and `causal` tombstones it keeps).
    public let namespaces: [ReconcileMessage]

    static let magic = Array("STELESNP".utf8)
    /// 2: causal versions carry their contexts. Format 1 (an anchor written by an
    /// older build) still reads, its versions without contexts.
    static let format: UInt8 = 2

    /// Reads every live record of every replicated namespace, and with `tombstones`
    /// every `lww` and `causal` tombstone too: a sibling serves those it still keeps.
    /// Without them, a device that recovered from the snapshot held no trace of a
    /// delete no round had collected, nor did the server's digest, equal to its own,
    /// ever bring it back; once every holder had recovered so, the deleted value came
    /// back from an older anchor (G1; seed 295073 of --devices 3 --steps 1000; DESIGN §6:
    /// only a committed round drops a tombstone). Recovery drops those the snapshot's
    /// knowledge covers, as a commit would have (``Replica/recover(from:)``).
    static func take(of replica: Replica, generation: UInt64, knowledge: Knowledge, tombstones: Bool = false) throws -> Snapshot {
        var namespaces: [ReconcileMessage] = []
        for declaration in replica.namespaces where declaration.kind.isReplicated {
            let sync = try NamespaceSync(replica: replica, declaration: declaration)
            var records = try sync.records(from: [], below: nil)
            if tombstones, declaration.kind == .causal || declaration.kind == .lww {
                records = (records + (try sync.tombstones())).sorted { $0.sortKey.lexicographicallyPrecedes($1.sortKey) }
            }
            namespaces.append(ReconcileMessage(session: 0, namespace: declaration.name, kind: declaration.kind, generation: generation, records: records))
        }
        return Snapshot(generation: generation, knowledge: knowledge, namespaces: namespaces)
    }

    public var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.append(Self.magic)
        writer.append(Self.format)
        writer.appendVarint(generation)
        knowledge.encode(into: &writer)
        writer.appendVarint(UInt64(namespaces.count))
        for namespace in namespaces {
            var body = ByteWriter()
            ReconcileCodec.encode(namespace, into: &body)
            writer.appendBytes(body.bytes)
        }
        return writer.bytes
    }

    /// - Throws: ``CodecError`` for bytes that are not a snapshot this build reads.
    public init(decoding bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        guard Array(try reader.readBytes(Self.magic.count, "snapshot magic")) == Self.magic else {
            throw CodecError(.valueOutOfRange, "the bytes are not a Stele snapshot")
        }
        let format = try reader.readByte("snapshot format")
        guard (1...Self.format).contains(format) else { throw CodecError(.unknownVersion, "snapshot format \(format) is not known to this build") }
        generation = try reader.readVarint("snapshot generation")
        knowledge = try Knowledge(from: &reader)
        let count = try reader.readItemCount("snapshot namespaces", maximum: WireLimits.maximumNamespaces)
        var namespaces: [ReconcileMessage] = []
        for index in 0..<count {
            var body = ByteReader(try reader.readByteArray("snapshot namespace \(index)", maximumBytes: AnchorFile.maximumCount))
            let message = try ReconcileCodec.decode(&body, readsContexts: format >= 2)
            try body.expectEnd("snapshot namespace \(index)")
            namespaces.append(message)
        }
        try reader.expectEnd("snapshot")
        self.namespaces = namespaces
    }

    init(generation: UInt64, knowledge: Knowledge, namespaces: [ReconcileMessage]) {
        self.generation = generation
        self.knowledge = knowledge
        self.namespaces = namespaces
    }
}

/// A ``Snapshot`` a sibling serves, sealed with the account key (AES-256-GCM,
/// 001 §7's BackupKey) on top of the sibling channel's own sealing: a device
/// that holds a channel key but not the current account key (one revoked since)
/// cannot read it. The generation travels in the clear inside the frame so a
/// receiver can refuse a snapshot it did not ask for before opening anything; it
/// is bound to the body as associated data.
public struct SealedSnapshot: Sendable, Equatable {
    public let generation: UInt64
    /// nonce ‖ ciphertext ‖ tag of the encoded snapshot.
    public let sealed: [UInt8]

    public init(generation: UInt64, sealed: [UInt8]) {
        self.generation = generation
        self.sealed = sealed
    }

    /// Seals `snapshot` for `account` with `key`.
    /// The snapshot is deflated before it is sealed (ciphertext does not
    /// compress, so the frame codec's own compression cannot help it).
    public init(_ snapshot: Snapshot, account: AccountID, key: AccountKey) {
        var system = SystemRandomNumberGenerator()
        self.init(snapshot, account: account, key: key, using: &system)
    }

    /// With the nonce drawn from `generator` (a node's own, so a seeded
    /// simulation replays the same bytes; cryptographically secure elsewhere).
    public init(_ snapshot: Snapshot, account: AccountID, key: AccountKey, using generator: inout some RandomNumberGenerator) {
        generation = snapshot.generation
        let encoded = snapshot.encoded
        var body = ByteWriter(capacity: encoded.count / 2 + 16)
        if let deflated = Compression.deflate(encoded), deflated.count < encoded.count {
            body.append(1)
            body.appendVarint(UInt64(encoded.count))
            body.append(deflated)
        } else {
            body.append(0)
            body.append(encoded)
        }
        sealed = Sealing.seal(body.bytes, key: key, associated: Self.associated(account: account, generation: snapshot.generation), using: &generator)
    }

    /// Opens the body with the first of `keys` that authenticates it (the newest first).
    /// - Throws: ``AnchorError`` when no key opens it or the snapshot inside is
    ///   malformed or for another generation.
    public func open(account: AccountID, keys: [AccountKey]) throws -> Snapshot {
        let associated = Self.associated(account: account, generation: generation)
        for key in keys.reversed() {
            guard let body = Sealing.open(sealed[...], key: key, associated: associated) else { continue }
            let snapshot: Snapshot
            do {
                var reader = ByteReader(body)
                let compressed = try reader.readBytes(1, "snapshot compression flag").first ?? 0
                switch compressed {
                case 0: snapshot = try Snapshot(decoding: Array(body.dropFirst()))
                case 1:
                    let count = try reader.readVarint("snapshot length")
                    guard count <= UInt64(AnchorFile.maximumCount) else { throw CodecError(.countTooLarge, "a snapshot of \(count) bytes") }
                    let bytes = try Compression.inflate(try reader.readBytes(reader.remaining, "snapshot"), expectedCount: Int(count), limit: AnchorFile.maximumCount)
                    snapshot = try Snapshot(decoding: bytes)
                default: throw CodecError(.valueOutOfRange, "snapshot compression flag \(compressed)")
                }
            } catch let error as AnchorError {
                throw error
            } catch {
                throw AnchorError(.damaged, "the sibling's snapshot opened but does not decode: \(error)")
            }
            guard snapshot.generation == generation else {
                throw AnchorError(.damaged, "the sealed snapshot holds generation \(snapshot.generation), its frame says \(generation)")
            }
            return snapshot
        }
        throw AnchorError(.notAuthentic, "no account key this device holds opens the snapshot (the key was rotated without this device, or the bytes changed)")
    }

    private static func associated(account: AccountID, generation: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: 48)
        writer.append(Array("stele sibling snapshot v1".utf8))
        writer.append(account.bytes)
        writer.appendVarint(generation)
        return writer.bytes
    }
}
