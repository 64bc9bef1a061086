/// What a fleet had seen when a barrier round agreed: from each device, the
/// highest counter (causal dots and vectors) and the latest write stamp (every
/// kind), tombstones included. The anchor's snapshot carries the union of every
/// member's knowledge at its ack, and recovery keeps exactly the local records
/// the knowledge does not cover: they are newer than the snapshot, whoever wrote
/// them. A record it covers was seen by the fleet when it agreed, so the
/// snapshot holds it, or holds what superseded it, or the fleet deleted it and
/// collected the tombstone (DESIGN §6 "Recovery keeps post-restore edits",
/// generalised: a device that wrote while cut off from the anchor, or took a
/// sibling's writes then, must not lose them either).
public struct Knowledge: Sendable, Equatable {
    public private(set) var counters = VersionVector()
    public private(set) var stamps: [DeviceID: HybridTimestamp] = [:]

    public init() {}

    public mutating func merge(_ other: Knowledge) {
        counters = counters.merged(with: other.counters)
        for (device, stamp) in other.stamps { note(stamp, by: device) }
    }

    mutating func note(_ stamp: HybridTimestamp, by writer: DeviceID) {
        if stamp > stamps[writer] ?? .zero { stamps[writer] = stamp }
    }

    mutating func note(_ record: WireRecord) {
        switch record {
        case .causal(let record):
            counters = counters.merged(with: record.vector)
            for version in record.versions { note(version.timestamp, by: version.dot.device) }
        case .lww(let record): note(record.stamp.timestamp, by: record.stamp.writer)
        case .event(let event): note(event.stamp.timestamp, by: event.stamp.writer)
        case .appendOnly(let record): note(record.stamp.timestamp, by: record.stamp.writer)
        }
    }

    /// Whether the fleet had seen `record` (every write in it) when it agreed.
    func covers(_ record: WireRecord) -> Bool {
        switch record {
        case .causal(let record):
            // A delete or edit beyond what was seen shows in the vector itself.
            return record.vector.entries.allSatisfy { counters[$0.device] >= $0.counter }
        case .lww(let record): return covers(record.stamp)
        case .event(let event): return covers(event.stamp)
        case .appendOnly(let record): return covers(record.stamp)
        }
    }

    private func covers(_ stamp: WriteStamp) -> Bool { stamp.timestamp <= stamps[stamp.writer] ?? .zero }

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
    /// Everything this store has seen: every record of every replicated namespace,
    /// tombstones included, and what the rounds it took part in had seen.
    public func knowledge() throws -> Knowledge {
        var knowledge = try collectedKnowledge()
        for declaration in namespaces where declaration.kind.isReplicated {
            switch declaration.kind {
            case .causal: for record in try causal(declaration.name).records() { knowledge.note(.causal(record)) }
            case .lww: for record in try lww(declaration.name).records() { knowledge.note(.lww(record)) }
            case .log: for event in try log(declaration.name).events() { knowledge.note(.event(event)) }
            case .appendOnly: for record in try appendOnly(declaration.name).records() { knowledge.note(.appendOnly(record)) }
            case .local: break
            }
        }
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
