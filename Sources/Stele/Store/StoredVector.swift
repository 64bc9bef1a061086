/// The on-disk form of a version vector: a varint count, then per entry the
/// device's local index and its counter as varints, in index order. One entry
/// with a millisecond-scale counter takes 8 bytes instead of the 38 of the
/// canonical wire form (``VersionVector/encoded``).
extension Replica {
    func storedVector(_ vector: VersionVector) throws -> [UInt8] {
        var pairs: [(Int64, UInt64)] = []
        pairs.reserveCapacity(vector.entries.count)
        for entry in vector.entries {
            pairs.append((try devices.intern(entry.device, connection), entry.counter))
        }
        pairs.sort { $0.0 < $1.0 }
        var writer = ByteWriter(capacity: 1 + pairs.count * 8)
        writer.appendVarint(UInt64(pairs.count))
        for (index, counter) in pairs {
            writer.appendVarint(UInt64(index))
            writer.appendVarint(counter)
        }
        return writer.bytes
    }

    /// - Throws: ``ReplicaError`` `corrupt` when the bytes are not a stored vector:
    ///   damaged bookkeeping stops the caller rather than being guessed at (G5).
    func loadVector(_ bytes: [UInt8]) throws -> VersionVector {
        do {
            var reader = ByteReader(bytes)
            let count = try reader.readCount("stored vector", maximum: VersionVector.maximumEntries)
            var entries: [VersionVector.Entry] = []
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let index = try reader.readVarint("stored vector index")
                let counter = try reader.readVarint("stored vector counter")
                guard index <= UInt64(Int64.max), counter > 0, counter <= VersionVector.maximumCounter else {
                    throw CodecError(.valueOutOfRange, "stored vector entry out of range")
                }
                entries.append(VersionVector.Entry(device: try devices.id(at: Int64(index)), counter: counter))
            }
            try reader.expectEnd("stored vector")
            entries.sort { $0.device < $1.device }
            for position in entries.indices.dropFirst() where entries[position - 1].device == entries[position].device {
                throw CodecError(.notCanonical, "stored vector names a device twice")
            }
            return VersionVector(sortedEntries: entries)
        } catch let error as CodecError {
            throw ReplicaError(.corrupt, "a stored version vector is damaged; sync must stop until the store is repaired", cause: error)
        }
    }
}
