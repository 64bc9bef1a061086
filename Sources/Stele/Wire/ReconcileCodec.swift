/// The body of a reconcile frame (``ReconcileMessage``).
///
/// Layout: session (varint), namespace name, kind code, generation (varint), a
/// flags byte, the tombstone fingerprint if flagged, the frame's device
/// dictionary, the tombstones if flagged, the ranges, the records, the wanted keys.
enum ReconcileCodec {
    private enum Flag: UInt8 {
        case tombstoneFingerprint = 1, tombstones = 2, tombstonesComplete = 4, restart = 8
    }

    private static let kindCodes: [NamespaceKind: UInt8] = [.causal: 1, .lww: 2, .log: 3, .appendOnly: 4, .messages: 5]

    static func encode(_ message: ReconcileMessage, into writer: inout ByteWriter) {
        writer.appendVarint(message.session)
        writer.appendString(message.namespace)
        writer.append(kindCodes[message.kind] ?? 0)
        writer.appendVarint(message.generation)
        var flags: UInt8 = 0
        if message.tombstoneFingerprint != nil { flags |= Flag.tombstoneFingerprint.rawValue }
        if message.tombstones != nil { flags |= Flag.tombstones.rawValue }
        if message.tombstonesComplete { flags |= Flag.tombstonesComplete.rawValue }
        if message.restart { flags |= Flag.restart.rawValue }
        writer.append(flags)
        if let fingerprint = message.tombstoneFingerprint { appendFingerprint(fingerprint, &writer) }

        // Records first into their own buffer: the device dictionary they build precedes them.
        var records = RecordWriter()
        var body = ByteWriter()
        if let tombstones = message.tombstones { records.append(tombstones, into: &body) }
        appendRanges(message.ranges, &body)
        var recordsWriter = records
        recordsWriter.append(message.records, into: &body)
        writer.appendVarint(UInt64(recordsWriter.devices.count))
        for device in recordsWriter.devices { writer.append(device.bytes) }
        writer.append(body.bytes)
        writer.appendVarint(UInt64(message.wants.count))
        var previous: [UInt8] = []
        for key in message.wants.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            writer.appendFrontCoded(key, after: previous)
            previous = key
        }
    }

    /// - Parameter readsContexts: whether causal versions carry their contexts
    ///   (frame and snapshot format 2; `false` for a format 1 snapshot).
    static func decode(_ reader: inout ByteReader, readsContexts: Bool = true) throws -> ReconcileMessage {
        let session = try reader.readVarint("session")
        let namespace = try reader.readString("namespace", maximumBytes: Limits.maximumNamespaceNameLength)
        let code = try reader.readByte("namespace kind")
        guard let kind = kindCodes.first(where: { $0.value == code })?.key else {
            throw CodecError(.valueOutOfRange, "namespace kind code \(code) is not a replicated kind")
        }
        let generation = try reader.readVarint("generation")
        let flags = try reader.readByte("reconcile flags")
        guard flags & ~0x0F == 0 else { throw CodecError(.notCanonical, "reconcile flags \(flags) has unknown bits") }
        let fingerprint = flags & Flag.tombstoneFingerprint.rawValue != 0 ? try readFingerprint(&reader) : nil
        let deviceCount = try reader.readItemCount("devices", maximum: WireLimits.maximumDevices)
        var devices: [DeviceID] = []
        devices.reserveCapacity(deviceCount)
        for index in 0..<deviceCount {
            devices.append(try DeviceID(bytes: try reader.readBytes(DeviceID.byteCount, "device \(index)")))
        }
        guard Set(devices).count == devices.count else { throw CodecError(.notCanonical, "a device is named twice in one frame") }
        var records = RecordReader(devices: devices, readsContexts: readsContexts)
        let tombstones = flags & Flag.tombstones.rawValue != 0 ? try records.records(of: kind, &reader) : nil
        let ranges = try readRanges(&reader)
        // Records continue the tombstones' delta state, as they were written.
        var recordsReader = records
        let rows = try recordsReader.records(of: kind, &reader)
        let wantCount = try reader.readItemCount("wanted keys", maximum: WireLimits.maximumLeaves)
        var wants: [[UInt8]] = []
        var previous: [UInt8] = []
        for _ in 0..<wantCount {
            let key = try reader.readFrontCoded(after: previous, "wanted key", maximumBytes: Limits.maximumKeyBytes)
            previous = key
            wants.append(key)
        }
        return ReconcileMessage(
            session: session, namespace: namespace, kind: kind, generation: generation, tombstoneFingerprint: fingerprint,
            tombstones: tombstones, tombstonesComplete: flags & Flag.tombstonesComplete.rawValue != 0,
            restart: flags & Flag.restart.rawValue != 0, ranges: ranges, records: rows, wants: wants)
    }

    private static func appendFingerprint(_ fingerprint: Fingerprint, _ writer: inout ByteWriter) {
        writer.appendBigEndian(fingerprint.sum64)
        writer.appendVarint(fingerprint.count)
    }

    private static func readFingerprint(_ reader: inout ByteReader) throws -> Fingerprint {
        Fingerprint(sum64: try reader.readBigEndianUInt64("fingerprint"), count: try reader.readVarint("fingerprint count"))
    }

    /// Ranges: a count, then per range a mode byte (0 skip, 1 fingerprint, 2 leaves;
    /// +4 when it is the unbounded last range), its upper bound front-coded against
    /// the previous one, and its payload.
    private static func appendRanges(_ ranges: [RangeItem], _ writer: inout ByteWriter) {
        writer.appendVarint(UInt64(ranges.count))
        var previousBound: [UInt8] = []
        for range in ranges {
            var mode: UInt8
            switch range.mode {
            case .skip: mode = 0
            case .fingerprint: mode = 1
            case .leaves: mode = 2
            }
            if range.upperBound == nil { mode |= 4 }
            writer.append(mode)
            if let bound = range.upperBound {
                writer.appendFrontCoded(bound, after: previousBound)
                previousBound = bound
            }
            switch range.mode {
            case .skip: break
            case .fingerprint(let fingerprint): appendFingerprint(fingerprint, &writer)
            case .leaves(let leaves):
                writer.appendVarint(UInt64(leaves.count))
                var previousKey: [UInt8] = []
                for entry in leaves {
                    writer.appendFrontCoded(entry.key, after: previousKey)
                    previousKey = entry.key
                    entry.leaf.withBytes { writer.append($0) }
                }
            }
        }
    }

    private static func readRanges(_ reader: inout ByteReader) throws -> [RangeItem] {
        let count = try reader.readItemCount("ranges", maximum: WireLimits.maximumRanges)
        var ranges: [RangeItem] = []
        ranges.reserveCapacity(count)
        var previousBound: [UInt8] = []
        for index in 0..<count {
            let mode = try reader.readByte("range mode")
            guard mode & ~4 <= 2 else { throw CodecError(.valueOutOfRange, "range mode \(mode)") }
            let unbounded = mode & 4 != 0
            guard unbounded == (index == count - 1) else {
                throw CodecError(.notCanonical, "only the last range is unbounded, and it must be")
            }
            var bound: [UInt8]?
            if !unbounded {
                let next = try reader.readFrontCoded(after: previousBound, "range bound", maximumBytes: Limits.maximumKeyBytes)
                guard index == 0 || previousBound.lexicographicallyPrecedes(next) else {
                    throw CodecError(.notCanonical, "range bounds are not increasing")
                }
                previousBound = next
                bound = next
            }
            let item: RangeItem.Mode
            switch mode & ~4 {
            case 0: item = .skip
            case 1: item = .fingerprint(try readFingerprint(&reader))
            default:
                let leafCount = try reader.readItemCount("leaves", maximum: WireLimits.maximumLeaves)
                var leaves: [LeafEntry] = []
                var previousKey: [UInt8] = []
                for _ in 0..<leafCount {
                    let key = try reader.readFrontCoded(after: previousKey, "leaf key", maximumBytes: Limits.maximumKeyBytes)
                    guard leaves.isEmpty || previousKey.lexicographicallyPrecedes(key) else {
                        throw CodecError(.notCanonical, "leaves are not in strictly increasing key order")
                    }
                    previousKey = key
                    leaves.append(LeafEntry(key: key, leaf: try Leaf(bytes: Array(try reader.readBytes(Leaf.byteCount, "leaf")))))
                }
                item = .leaves(leaves)
            }
            ranges.append(RangeItem(upperBound: bound, mode: item))
        }
        return ranges
    }
}
