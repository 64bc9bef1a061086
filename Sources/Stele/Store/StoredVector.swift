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
                        dot: Dot(device: try devices.id(at: Int64(index)), counter: counter),
                        timestamp: HybridTimestamp(rawValue: timestamp), value: value))
            }
            try reader.expectEnd("stored versions")
            return versions
        } catch let error as CodecError {
            throw ReplicaError(.corrupt, "a row's stored concurrent versions are damaged; sync must stop until the store is repaired", cause: error)
        }
    }
}
