/// What a fleet had agreed on when a barrier round committed: for each member,
/// its own counter and its hybrid clock when it acked. Every member acked with
/// the same content, so every write a member had made by then was in that
/// content: the snapshot holds it, or holds what superseded it, or the fleet
/// deleted it and collected the tombstone. The anchor's snapshot carries the
/// union of the members' reports (and of earlier rounds'), and recovery keeps
/// exactly the local records it does not cover: written after their author's
/// ack, or by a device that was no member (one that joined later, say), whoever
/// holds them (DESIGN §6 "Recovery keeps post-restore edits", generalised: a
/// device that wrote while cut off from the anchor, or took such a device's
/// writes, must not lose them either).
///
/// Only each member's own counter and clock are evidence: seeing device X's
/// write on one key says nothing about X's writes on other keys, which a
/// reconcile may not have delivered yet (seed 90472).
public struct Knowledge: Sendable, Equatable {
    public private(set) var counters = VersionVector()
    public private(set) var stamps: [DeviceID: HybridTimestamp] = [:]

    public init() {}

    public mutating func merge(_ other: Knowledge) {
        counters = counters.merged(with: other.counters)
        for (device, stamp) in other.stamps { note(stamp, by: device) }
    }

    /// A member's own report: its counter and clock when it acked.
    mutating func note(member: DeviceID, counter: UInt64, clock: HybridTimestamp) {
        if counter > 0 { counters = counters.merged(with: VersionVector([member: counter])) }
        note(clock, by: member)
    }

    /// Devices revoked before the round: every write of theirs the fleet will
    /// ever take is in the agreed content, or was superseded or collected. Their
    /// frames are refused since the revocation, and the members, who alone can
    /// carry their records, all acked the same content; a record of theirs a
    /// member brings back later (from an old backup) is one the fleet had and
    /// let go. Without this, recovery kept a revoked device's post as never
    /// seen and brought back a message the account had deleted and collected
    /// (stele simulate seed 250028 of --devices 3 --steps 2000).
    mutating func noteRevoked(_ devices: Set<DeviceID>) {
        let all = HybridTimestamp(milliseconds: HybridTimestamp.maximumMilliseconds, logical: .max)
        for device in devices { note(member: device, counter: VersionVector.maximumCounter, clock: all) }
    }

    mutating func note(_ stamp: HybridTimestamp, by writer: DeviceID) {
        if stamp > stamps[writer] ?? .zero { stamps[writer] = stamp }
    }

    /// Whether the fleet had seen `record` (every write in it) when it agreed.
    func covers(_ record: WireRecord) -> Bool {
        switch record {
        case .causal(let record):
            // A delete or edit beyond what was seen shows in the vector itself.
            return covers(vector: record.vector)
        case .lww(let record): return covers(record.stamp)
        case .event(let event): return covers(event.stamp)
        case .appendOnly(let record): return covers(record.stamp)
        case .message(let record): return record.ops.allSatisfy(covers)
        }
    }

    /// Whether the fleet had seen every write a causal record with this vector holds.
    public func covers(vector: VersionVector) -> Bool {
        vector.entries.allSatisfy { counters[$0.device] >= $0.counter }
    }

    /// Whether the fleet had seen this message op when it agreed.
    public func covers(_ op: MessageOp) -> Bool {
        covers(WriteStamp(timestamp: HybridTimestamp(rawValue: UInt64(op.time)), writer: op.writer))
    }

    /// What recovery keeps of a local record: all of it unless the fleet had seen
    /// it, and of a message only the ops it had not seen (an op it had seen is in
    /// the snapshot, or was collected with its message: keeping it could bring a
    /// collected message back).
    ///
    /// A causal record the fleet had not wholly seen keeps its vector, but of its
    /// versions only those written after the agreement (their dot is not covered)
    /// and those the agreed record `agreed` returns still holds. A version the fleet
    /// had seen and the agreed content lacks was deleted or superseded there, and the
    /// tombstone collected: a delete made after a restore, merged into its record's
    /// vector, used to carry it back into every store (G1; stele simulate seed 274002
    /// of --devices 3 --clients 1 --ledger-clients 1 --steps 3000). A version the
    /// agreed record holds stays, so that the kept vector deletes nothing the fleet
    /// still shows (G2).
    func uncovered(of record: WireRecord, agreed: (String) -> CausalRecord? = { _ in nil }) -> WireRecord? {
        switch record {
        case .message(let message):
            let ops = message.ops.filter { !covers($0) }
            return ops.isEmpty ? nil : .message(MessageRecord(message: message.message, ops: ops))
        case .causal(let causal):
            guard !covers(record) else { return nil }
            let held = agreed(causal.key)
            let versions = causal.versions.filter { version in
                counters[version.dot.device] < version.dot.counter || held?.versions.contains { $0.dot == version.dot } == true
            }
            return versions.count == causal.versions.count ? record : .causal(CausalRecord(key: causal.key, vector: causal.vector, versions: versions))
        case .lww, .event, .appendOnly:
            return covers(record) ? nil : record
        }
    }

    /// Whether the fleet had seen the write of this stamp (`lww`, `log`, `appendOnly`).
    public func covers(_ stamp: WriteStamp) -> Bool { stamp.timestamp <= stamps[stamp.writer] ?? .zero }

    // MARK: - Encoding

    func encode(into writer: inout ByteWriter) {
        counters.encode(into: &writer)
        writer.appendVarint(UInt64(stamps.count))
        for (device, stamp) in stamps.sorted(by: { $0.key < $1.key }) {
            writer.append(device.bytes)
            writer.appendVarint(stamp.rawValue)
        }
    }

    init(from reader: inout ByteReader) throws {
        counters = try VersionVector(from: &reader)
        let count = try reader.readCount("knowledge stamps", maximum: VersionVector.maximumEntries)
        var previous: DeviceID?
        for index in 0..<count {
            let device = try DeviceID(bytes: reader.readBytes(DeviceID.byteCount, "knowledge stamp \(index) device"))
            if let previous, !(previous < device) { throw CodecError(.notCanonical, "knowledge stamps are not in strictly increasing device order") }
            stamps[device] = HybridTimestamp(rawValue: try reader.readVarint("knowledge stamp \(index)"))
            previous = device
        }
    }

    public var encoded: [UInt8] {
        var writer = ByteWriter()
        encode(into: &writer)
        return writer.bytes
    }

    public init(encoded bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        try self.init(from: &reader)
        try reader.expectEnd("knowledge")
    }
}

extension Replica {
    /// What this device vouches for when it acks: its own counter and hybrid
    /// clock now, with what the rounds it collected or recovered from had agreed.
    public func knowledge() throws -> Knowledge {
        var knowledge = try collectedKnowledge()
        knowledge.note(member: device, counter: ownCounter, clock: hybridClock.last)
        return knowledge
    }

    /// The union of what the fleet had seen at the rounds this device committed or recovered from.
    func collectedKnowledge() throws -> Knowledge {
        guard let bytes = try connection.queryFirst("SELECT knowledge FROM barrier WHERE id = 1", [], { $0.optionalBlob(0) }) ?? nil else {
            return Knowledge()
        }
        do {
            return try Knowledge(encoded: bytes)
        } catch {
            throw ReplicaError(.corrupt, "the store's record of what collected rounds had seen is damaged; the file is damaged", cause: error)
        }
    }

    /// Adds to what collected rounds had seen (inside the caller's transaction).
    func recordCollectedKnowledge(_ knowledge: Knowledge) throws {
        var merged = try collectedKnowledge()
        merged.merge(knowledge)
        try connection.execute("UPDATE barrier SET knowledge = ? WHERE id = 1", [.blob(merged.encoded)])
    }
}
