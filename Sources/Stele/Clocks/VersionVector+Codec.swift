extension VersionVector {
    /// The most entries a decoded vector may hold: far above any real fleet, low
    /// enough that a hostile count cannot make a decoder allocate much.
    public static let maximumEntries = 4_096

    /// The compact canonical encoding: a varint count, then per entry (sorted by
    /// device id) the 32-byte id and a varint counter. One vector has exactly one
    /// encoding, so encodings can be hashed into digests.
    public var encoded: [UInt8] {
        var writer = ByteWriter(capacity: 1 + entries.count * 38)
        encode(into: &writer)
        return writer.bytes
    }

    func encode(into writer: inout ByteWriter) {
        writer.appendVarint(UInt64(entries.count))
        for entry in entries {
            writer.append(entry.device.bytes)
            writer.appendVarint(entry.counter)
        }
    }

    /// Decodes ``encoded``; anything but the canonical form is rejected.
    /// - Throws: ``CodecError`` on truncated, oversized, unsorted, duplicated or zero entries, or trailing bytes.
    public init(encoded bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        try self.init(from: &reader)
        try reader.expectEnd("version vector")
    }

    init(from reader: inout ByteReader) throws {
        let count = try reader.readCount("version vector entry count", maximum: Self.maximumEntries)
        var entries: [Entry] = []
        entries.reserveCapacity(min(count, reader.remaining / 33))
        for index in 0..<count {
            let device = try DeviceID(bytes: reader.readBytes(DeviceID.byteCount, "version vector entry \(index) device"))
            let counter = try reader.readVarint("version vector entry \(index) counter")
            guard counter > 0, counter <= Self.maximumCounter else {
                throw CodecError(counter == 0 ? .notCanonical : .valueOutOfRange, "version vector entry \(index) has counter \(counter)")
            }
            if let last = entries.last, !(last.device < device) {
                throw CodecError(.notCanonical, "version vector entries are not in strictly increasing device order")
            }
            entries.append(Entry(device: device, counter: counter))
        }
        self.init(sortedEntries: entries)
    }
}
