/// The on-disk form of a version vector: a varint count, then per entry the
/// device's local index and its counter as varints, in index order. One entry
/// with a millisecond-scale counter takes 8 bytes instead of the 39 of the
/// canonical wire form (``VersionVector/encoded``).
///
/// Local writes bump the own entry in this form directly, without translating
/// indices to device ids and back: that is the hot path of every put and delete.
struct StoredVector {
    private(set) var entries: [(index: Int64, counter: UInt64)] = []

    init() {}

    init(entries: [(index: Int64, counter: UInt64)]) {
        self.entries = entries.sorted { $0.index < $1.index }
    }

    /// Parses a stored vector in place (the column's bytes, not copied).
    /// - Throws: ``ReplicaError`` `corrupt` as ``init(bytes:)``.
    init(raw: UnsafeRawBufferPointer) throws {
        var offset = 0
        func varint() throws -> UInt64 {
            var result: UInt64 = 0
            var shift: UInt64 = 0
            while offset < raw.count, shift < 64 {
                let byte = raw[offset]
                offset += 1
                result |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return result }
                shift += 7
            }
            throw Self.damaged
        }
        let count = try varint()
        guard count <= UInt64(VersionVector.maximumEntries) else { throw Self.damaged }
        entries.reserveCapacity(Int(count))
        for _ in 0..<count {
            let index = try varint()
            let counter = try varint()
            guard index <= UInt64(Int64.max), counter > 0, counter <= VersionVector.maximumCounter,
                entries.last.map({ $0.index < Int64(index) }) ?? true
            else { throw Self.damaged }
            entries.append((Int64(index), counter))
        }
        guard offset == raw.count else { throw Self.damaged }
    }

    private static var damaged: ReplicaError {
        ReplicaError(.corrupt, "a stored version vector is damaged; sync must stop until the store is repaired")
    }

    /// - Throws: ``ReplicaError`` `corrupt` when the bytes are not a stored vector:
    ///   damaged bookkeeping stops the caller rather than being guessed at (G5).
    init(bytes: [UInt8]) throws {
        do {
            var reader = ByteReader(bytes)
            let count = try reader.readCount("stored vector", maximum: VersionVector.maximumEntries)
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let index = try reader.readVarint("stored vector index")
                let counter = try reader.readVarint("stored vector counter")
                guard index <= UInt64(Int64.max), counter > 0, counter <= VersionVector.maximumCounter else {
                    throw CodecError(.valueOutOfRange, "stored vector entry out of range")
                }
                if let last = entries.last, last.index >= Int64(index) {
                    throw CodecError(.notCanonical, "stored vector indices out of order")
                }
                entries.append((Int64(index), counter))
            }
            try reader.expectEnd("stored vector")
        } catch let error as CodecError {
            throw ReplicaError(.corrupt, "a stored version vector is damaged; sync must stop until the store is repaired", cause: error)
        }
    }

    /// Raises the counter of the device at `index`.
    mutating func raise(_ index: Int64, to counter: UInt64) {
        if let position = entries.firstIndex(where: { $0.index >= index }) {
            if entries[position].index == index {
                entries[position].counter = max(entries[position].counter, counter)
            } else {
                entries.insert((index, counter), at: position)
            }
        } else {
            entries.append((index, counter))
        }
    }

    /// The pointwise maximum of two stored vectors.
    func merged(with other: StoredVector) -> StoredVector {
        var result = self
        for entry in other.entries { result.raise(entry.index, to: entry.counter) }
        return result
    }

    /// The counter of the device at `index` (zero when absent).
    subscript(index: Int64) -> UInt64 {
        entries.first { $0.index == index }?.counter ?? 0
    }

    static func == (lhs: StoredVector, rhs: StoredVector) -> Bool {
        lhs.entries.count == rhs.entries.count && zip(lhs.entries, rhs.entries).allSatisfy { $0.index == $1.index && $0.counter == $1.counter }
    }

    var bytes: [UInt8] {
        var writer = ByteWriter(capacity: 1 + entries.count * 8)
        writer.appendVarint(UInt64(entries.count))
        for entry in entries {
            writer.appendVarint(UInt64(entry.index))
            writer.appendVarint(entry.counter)
        }
        return writer.bytes
    }
}

extension Replica {
    func storedVector(_ vector: VersionVector) throws -> [UInt8] {
        try StoredVector(entries: vector.entries.map { (try devices.intern($0.device, connection), $0.counter) }).bytes
    }

    /// - Throws: ``ReplicaError`` `corrupt` for damaged bytes or an unknown device index.
    func loadVector(_ bytes: [UInt8]) throws -> VersionVector {
        let stored = try StoredVector(bytes: bytes)
        let entries = try stored.entries.map { VersionVector.Entry(device: try deviceID(at: $0.index), counter: $0.counter) }
        // Local indexes follow first sight, not id order; most vectors have one entry.
        let inOrder = zip(entries, entries.dropFirst()).allSatisfy { $0.device < $1.device }
        return VersionVector(sortedEntries: inOrder ? entries : entries.sorted { $0.device < $1.device })
    }
}

/// The on-disk form of the concurrent versions kept beside the one a row shows:
/// a varint count, then per version the writer's local index, the counter, the
/// timestamp, the value's length and the value.
extension Replica {
    func storedVersions(_ versions: [CausalVersion]) throws -> [UInt8] {
        var writer = ByteWriter()
        writer.appendVarint(UInt64(versions.count))
        for version in versions {
            writer.appendVarint(UInt64(try devices.intern(version.dot.device, connection)))
            writer.appendVarint(version.dot.counter)
            writer.appendVarint(version.timestamp.rawValue)
            writer.appendVarint(UInt64(version.value.count))
            writer.append(version.value)
        }
        return writer.bytes
    }

    func loadVersions(_ bytes: [UInt8]) throws -> [CausalVersion] {
        do {
            var reader = ByteReader(bytes)
            let count = try reader.readCount("stored versions", maximum: CausalRecord.maximumVersions)
            var versions: [CausalVersion] = []
            for _ in 0..<count {
                let index = try reader.readVarint("stored version writer")
                let counter = try reader.readVarint("stored version counter")
                let timestamp = try reader.readVarint("stored version timestamp")
                let length = try reader.readCount("stored version length", maximum: Limits.maximumValueBytes)
                let value = Array(try reader.readBytes(length, "stored version value"))
                guard index <= UInt64(Int64.max) else { throw CodecError(.valueOutOfRange, "stored version writer out of range") }
                versions.append(
                    CausalVersion(
                        dot: Dot(device: try deviceID(at: Int64(index)), counter: counter),
                        timestamp: HybridTimestamp(rawValue: timestamp), value: value))
            }
            try reader.expectEnd("stored versions")
            return versions
        } catch let error as CodecError {
            throw ReplicaError(.corrupt, "a row's stored concurrent versions are damaged; sync must stop until the store is repaired", cause: error)
        }
    }
}

/// The on-disk form of the versions' causal contexts (``CausalVersion/context``),
/// for the versions whose context is less than the row's vector: a varint
/// count, then per version its dot (the writer's local index and the counter)
/// and the context as a length-prefixed stored vector.
extension Replica {
    func storedContexts(_ versions: [CausalVersion]) throws -> [UInt8]? {
        let withContext = versions.compactMap { version in version.context.map { (version.dot, $0) } }
        guard !withContext.isEmpty else { return nil }
        var writer = ByteWriter()
        writer.appendVarint(UInt64(withContext.count))
        for (dot, context) in withContext {
            writer.appendVarint(UInt64(try devices.intern(dot.device, connection)))
            writer.appendVarint(dot.counter)
            writer.appendBytes(try storedVector(context))
        }
        return writer.bytes
    }

    func loadContexts(_ bytes: [UInt8]) throws -> [Dot: VersionVector] {
        do {
            var reader = ByteReader(bytes)
            let count = try reader.readCount("stored contexts", maximum: CausalRecord.maximumVersions)
            var contexts: [Dot: VersionVector] = [:]
            for _ in 0..<count {
                let index = try reader.readVarint("stored context writer")
                let counter = try reader.readVarint("stored context counter")
                guard index <= UInt64(Int64.max) else { throw CodecError(.valueOutOfRange, "stored context writer out of range") }
                let vector = try reader.readByteArray("stored context", maximumBytes: 1 << 20)
                contexts[Dot(device: try deviceID(at: Int64(index)), counter: counter)] = try loadVector(vector)
            }
            try reader.expectEnd("stored contexts")
            return contexts
        } catch let error as CodecError {
            throw ReplicaError(.corrupt, "a row's stored causal contexts are damaged; sync must stop until the store is repaired", cause: error)
        }
    }
}
