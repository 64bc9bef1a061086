/// The canonical bytes hashed into a namespace's digest: one layout per kind,
/// with every device named by its full 32-byte id and every list in a fixed
/// order, so two devices holding the same row compute the same leaf (DESIGN §4:
/// a `causal` leaf commits to key, value and version vector).
///
/// Tombstones are not leaves; their hashes (over the same layouts) make up the
/// namespace's tombstone fingerprint, which reconcile compares before shipping
/// the tombstone set.
enum LeafEncoding {
    private enum Tag: UInt8 {
        case causal = 1, causalTombstone, lwwLive, lwwDeleted, logEvent, logMarker, appendOnly, message
        case root = 0x10, content
    }

    static func causal(_ record: CausalRecord) -> [UInt8] {
        var writer = ByteWriter(capacity: 64 + record.key.utf8.count + (record.value?.count ?? 0))
        if record.isTombstone {
            writer.append(Tag.causalTombstone.rawValue)
            appendKey(record.key, &writer)
            record.vector.encode(into: &writer)
            return writer.bytes
        }
        writer.append(Tag.causal.rawValue)
        appendKey(record.key, &writer)
        record.vector.encode(into: &writer)
        writer.appendVarint(UInt64(record.versions.count))
        for version in record.versions {
            writer.append(version.dot.device.bytes)
            writer.appendVarint(version.dot.counter)
            writer.appendVarint(version.timestamp.rawValue)
            appendBytes(version.value, &writer)
        }
        return writer.bytes
    }

    /// The leaf of a row written once by one device (a fresh local put): the same
    /// bytes as ``causal(_:)`` for that record, built without the record.
    static func freshCausal(key: String, device: [UInt8], counter: UInt64, timestamp: HybridTimestamp, value: [UInt8]) -> [UInt8] {
        var writer = ByteWriter(capacity: 100 + key.utf8.count + value.count)
        freshCausal(key: key, device: device, counter: counter, timestamp: timestamp, value: value, into: &writer)
        return writer.bytes
    }

    /// ``freshCausal(key:device:counter:timestamp:value:)`` into a reused writer (the put hot path).
    static func freshCausal(key: String, device: [UInt8], counter: UInt64, timestamp: HybridTimestamp, value: [UInt8], into writer: inout ByteWriter) {
        writer.append(Tag.causal.rawValue)
        appendKey(key, &writer)
        writer.appendVarint(1)
        writer.append(device)
        writer.appendVarint(counter)
        writer.appendVarint(1)
        writer.append(device)
        writer.appendVarint(counter)
        writer.appendVarint(timestamp.rawValue)
        appendBytes(value, &writer)
    }

    static func lww(_ record: LWWRecord) -> [UInt8] {
        var writer = ByteWriter(capacity: 56 + record.key.utf8.count + (record.value?.count ?? 0))
        writer.append((record.isDeleted ? Tag.lwwDeleted : Tag.lwwLive).rawValue)
        appendKey(record.key, &writer)
        if let value = record.value { appendBytes(value, &writer) }
        writer.appendVarint(record.stamp.timestamp.rawValue)
        writer.append(record.stamp.writer.bytes)
        return writer.bytes
    }

    static func event(_ event: LogEvent) -> [UInt8] {
        var writer = ByteWriter(capacity: 72 + event.group.utf8.count + event.body.count)
        writer.append((event.isMarker ? Tag.logMarker : Tag.logEvent).rawValue)
        writer.append(event.id.bytes)
        appendKey(event.group, &writer)
        if !event.isMarker { appendBytes(event.body, &writer) }
        writer.appendVarint(event.stamp.timestamp.rawValue)
        writer.append(event.stamp.writer.bytes)
        return writer.bytes
    }

    static func appendOnly(_ record: AppendOnlyRecord) -> [UInt8] {
        var writer = ByteWriter(capacity: 56 + record.key.utf8.count + (record.value?.count ?? 0))
        writer.append(Tag.appendOnly.rawValue)
        appendKey(record.key, &writer)
        appendBytes(record.value ?? [], &writer)
        writer.appendVarint(record.stamp.timestamp.rawValue)
        writer.append(record.stamp.writer.bytes)
        return writer.bytes
    }

    /// A message's folded canonical row (000 §6: a deleted row is identity and scope only).
    static func message(_ row: MessageRow) -> [UInt8] {
        let canonical = row.leaf
        var writer = ByteWriter(capacity: 1 + canonical.count)
        writer.append(Tag.message.rawValue)
        writer.append(canonical)
        return writer.bytes
    }

    /// What the root digest hashes: the leaf count and the root sum.
    static func root(count: Int, sum: Hash32) -> [UInt8] {
        var writer = ByteWriter(capacity: 42)
        writer.append(Tag.root.rawValue)
        writer.appendVarint(UInt64(count))
        writer.append(sum.bytes)
        return writer.bytes
    }

    /// What a barrier's content digest hashes: each replicated namespace's name
    /// and root, in name order (``Replica/contentDigest()``).
    static func content(_ roots: [(name: String, root: Hash32)]) -> [UInt8] {
        var writer = ByteWriter(capacity: 1 + roots.count * 48)
        writer.append(Tag.content.rawValue)
        for (name, root) in roots {
            appendKey(name, &writer)
            writer.append(root.bytes)
        }
        return writer.bytes
    }

    private static func appendKey(_ key: String, _ writer: inout ByteWriter) {
        writer.appendVarint(UInt64(key.utf8.count))
        writer.append(key.utf8)
    }

    private static func appendBytes(_ bytes: [UInt8], _ writer: inout ByteWriter) {
        writer.appendVarint(UInt64(bytes.count))
        writer.append(bytes)
    }
}
