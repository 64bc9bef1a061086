/// Records on the wire, compactly: every device named once per frame (a
/// dictionary of 32-byte ids, then small indexes), keys front-coded in sorted
/// order, counters and timestamps as zigzag differences from the previous one.
/// A run of tombstones written by one device for neighbouring keys costs a few
/// bytes each (`sync.delete_batch.wire_bytes_per_deleted_key`).
struct RecordWriter {
    private(set) var devices: [DeviceID] = []
    private var deviceIndex: [DeviceID: Int] = [:]
    /// The device last looked up: runs of records by one writer skip the hash.
    private var lastDevice: (id: DeviceID, index: Int)?
    /// The last counter written per device index.
    private var lastCounter: [UInt64] = []
    private var lastTimestamp: UInt64 = 0
    private var lastKey: [UInt8] = []

    private mutating func index(of device: DeviceID) -> Int {
        if let last = lastDevice, last.id == device { return last.index }
        let index: Int
        if let known = deviceIndex[device] {
            index = known
        } else {
            devices.append(device)
            lastCounter.append(0)
            index = devices.count - 1
            deviceIndex[device] = index
        }
        lastDevice = (device, index)
        return index
    }

    private mutating func appendCounter(_ counter: UInt64, of device: Int, _ writer: inout ByteWriter) {
        writer.appendZigzag(Int64(bitPattern: counter &- lastCounter[device]))
        lastCounter[device] = counter
    }

    private mutating func appendStamp(_ stamp: WriteStamp, _ writer: inout ByteWriter) {
        writer.appendZigzag(Int64(bitPattern: stamp.timestamp.rawValue &- lastTimestamp))
        lastTimestamp = stamp.timestamp.rawValue
        writer.appendVarint(UInt64(index(of: stamp.writer)))
    }

    /// Appends `records` (sorted here by key) as a counted list. Keys are
    /// front-coded within the list; counters and timestamps continue from the
    /// frame's earlier lists.
    mutating func append(_ records: [WireRecord], into writer: inout ByteWriter) {
        lastKey = []
        writer.appendVarint(UInt64(records.count))
        // Each key computed once; lists read from a table arrive sorted already.
        let keys = records.map(\.sortKey)
        let sorted = zip(keys, keys.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) }
        let order = sorted ? Array(records.indices) : records.indices.sorted { keys[$0].lexicographicallyPrecedes(keys[$1]) }
        for index in order { append(records[index], into: &writer) }
    }

    private mutating func append(_ record: WireRecord, into writer: inout ByteWriter) {
        switch record {
        case .causal(let record):
            appendKey(Array(record.key.utf8), &writer)
            writer.appendVarint(UInt64(record.vector.entries.count))
            for entry in record.vector.entries {
                let device = index(of: entry.device)
                writer.appendVarint(UInt64(device))
                appendCounter(entry.counter, of: device, &writer)
            }
            writer.appendVarint(UInt64(record.versions.count))
            for version in record.versions {
                // A version's dot is always covered by its vector: its counter is
                // sent as the distance below the vector's entry (usually zero).
                let device = index(of: version.dot.device)
                writer.appendVarint(UInt64(device))
                writer.appendVarint(record.vector[version.dot.device] - version.dot.counter)
                appendStamp(WriteStamp(timestamp: version.timestamp, writer: version.dot.device), &writer)
                writer.appendBytes(version.value)
                // The version's context, as the vector's entries it lies below (frame
                // format 2): a count (usually zero), then per entry its position in the
                // vector and how far below it the context is (the whole counter: absent).
                let lowered = version.context.map { context in
                    record.vector.entries.enumerated().compactMap { position, entry in
                        context[entry.device] < entry.counter ? (position, entry.counter - context[entry.device]) : nil
                    }
                } ?? []
                writer.appendVarint(UInt64(lowered.count))
                for (position, distance) in lowered {
                    writer.appendVarint(UInt64(position))
                    writer.appendVarint(distance)
                }
            }
        case .lww(let record):
            appendKey(Array(record.key.utf8), &writer)
            if let value = record.value {
                writer.append(0)
                writer.appendBytes(value)
            } else {
                writer.append(1)
            }
            appendStamp(record.stamp, &writer)
        case .event(let event):
            writer.append(event.id.bytes)
            writer.appendString(event.group)
            if event.isMarker {
                writer.append(1)
            } else {
                writer.append(0)
                writer.appendBytes(event.body)
            }
            appendStamp(event.stamp, &writer)
        case .appendOnly(let record):
            appendKey(Array(record.key.utf8), &writer)
            writer.appendBytes(record.value ?? [])
            appendStamp(record.stamp, &writer)
        case .message(let record):
            // The accounts the ops name (one or two), then the ops in id order; each:
            // id, stamp (time and writer), account index, action and its fields.
            appendKey(Array(record.message.utf8), &writer)
            var accounts: [AccountID] = []
            for op in record.ops where !accounts.contains(op.account) { accounts.append(op.account) }
            writer.appendVarint(UInt64(accounts.count))
            for account in accounts { writer.append(account.bytes) }
            writer.appendVarint(UInt64(record.ops.count))
            for op in record.ops {
                writer.append(op.id.bytes)
                appendStamp(WriteStamp(timestamp: HybridTimestamp(rawValue: UInt64(op.time)), writer: op.writer), &writer)
                writer.appendVarint(UInt64(accounts.firstIndex(of: op.account) ?? 0))
                writer.append(op.action.code.rawValue)
                switch op.action {
                case let .post(author, body):
                    writer.appendString(author)
                    writer.appendBytes(body)
                case .edit(let body):
                    writer.appendBytes(body)
                case .delete(let scope):
                    writer.append(scope.rawValue)
                case let .react(reactor, emoji):
                    writer.appendString(reactor)
                    writer.appendString(emoji)
                case .unreact(let reactor):
                    writer.appendString(reactor)
                case .receipt(let received):
                    writer.append(received.bytes)
                }
            }
        }
    }

    private mutating func appendKey(_ key: [UInt8], _ writer: inout ByteWriter) {
        writer.appendFrontCoded(key, after: lastKey)
        lastKey = key
    }
}

/// Reads what ``RecordWriter`` writes, checking every bound and rule a record
/// must satisfy before it reaches a merge function.
struct RecordReader {
    let devices: [DeviceID]
    /// Whether causal versions carry their contexts (frame and snapshot format 2;
    /// a snapshot of format 1, in an anchor written before, has none).
    let readsContexts: Bool
    /// The last counter read per device index.
    private var lastCounter: [UInt64]
    private var lastTimestamp: UInt64 = 0
    private var lastKey: [UInt8] = []

    init(devices: [DeviceID], readsContexts: Bool = true) {
        self.devices = devices
        self.readsContexts = readsContexts
        lastCounter = Array(repeating: 0, count: devices.count)
    }

    /// A version's context: `vector` lowered at the entries listed.
    private func context(below vector: VersionVector, _ reader: inout ByteReader) throws -> VersionVector? {
        let count = try reader.readItemCount("context entries", maximum: vector.entries.count)
        guard count > 0 else { return nil }
        var counters = Dictionary(uniqueKeysWithValues: vector.entries.map { ($0.device, $0.counter) })
        var previous = -1
        for _ in 0..<count {
            let position = try reader.readVarint("context entry")
            guard position < UInt64(vector.entries.count), Int(position) > previous else {
                throw CodecError(.notCanonical, "context entries are outside the vector or not in increasing order")
            }
            previous = Int(position)
            let entry = vector.entries[Int(position)]
            let distance = try reader.readVarint("context distance")
            guard distance >= 1, distance <= entry.counter else { throw CodecError(.valueOutOfRange, "a context lies outside its vector") }
            counters[entry.device] = entry.counter - distance
        }
        return VersionVector(counters.filter { $0.value > 0 })
    }

    private func device(_ reader: inout ByteReader) throws -> (Int, DeviceID) {
        let index = try reader.readVarint("device index")
        guard index < UInt64(devices.count) else {
            throw CodecError(.valueOutOfRange, "device index \(index) is outside the frame's \(devices.count) devices")
        }
        return (Int(index), devices[Int(index)])
    }

    private mutating func counter(of device: Int, _ reader: inout ByteReader) throws -> UInt64 {
        let counter = lastCounter[device] &+ UInt64(bitPattern: try reader.readZigzag("counter"))
        guard counter > 0, counter <= VersionVector.maximumCounter else {
            throw CodecError(.valueOutOfRange, "counter \(counter) is out of range")
        }
        lastCounter[device] = counter
        return counter
    }

    private mutating func stamp(_ reader: inout ByteReader) throws -> WriteStamp {
        let timestamp = lastTimestamp &+ UInt64(bitPattern: try reader.readZigzag("timestamp"))
        guard timestamp <= UInt64(Int64.max) else { throw CodecError(.valueOutOfRange, "timestamp \(timestamp) is out of range") }
        lastTimestamp = timestamp
        return WriteStamp(timestamp: HybridTimestamp(rawValue: timestamp), writer: try device(&reader).1)
    }

    private mutating func key(_ reader: inout ByteReader) throws -> String {
        let bytes = try reader.readFrontCoded(after: lastKey, "key", maximumBytes: Limits.maximumKeyBytes)
        guard !bytes.isEmpty, lastKey.isEmpty || lastKey.lexicographicallyPrecedes(bytes) else {
            throw CodecError(.notCanonical, "record keys are empty or not in strictly increasing order")
        }
        lastKey = bytes
        // ASCII is valid UTF-8 as it stands (and the usual key): skip the validator.
        if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
        guard let key = String(validating: bytes, as: UTF8.self) else { throw CodecError(.notCanonical, "a key is not valid UTF-8") }
        return key
    }

    mutating func records(of kind: NamespaceKind, _ reader: inout ByteReader) throws -> [WireRecord] {
        lastKey = []
        let count = try reader.readItemCount("records", maximum: WireLimits.maximumRecords)
        var records: [WireRecord] = []
        records.reserveCapacity(count)
        for _ in 0..<count { records.append(try record(of: kind, &reader)) }
        return records
    }

    private mutating func record(of kind: NamespaceKind, _ reader: inout ByteReader) throws -> WireRecord {
        switch kind {
        case .causal:
            let key = try key(&reader)
            let entryCount = try reader.readItemCount("vector entries", maximum: VersionVector.maximumEntries)
            var entries: [VersionVector.Entry] = []
            entries.reserveCapacity(entryCount)
            for _ in 0..<entryCount {
                let (index, id) = try device(&reader)
                entries.append(VersionVector.Entry(device: id, counter: try counter(of: index, &reader)))
            }
            for position in entries.indices.dropFirst() where !(entries[position - 1].device < entries[position].device) {
                throw CodecError(.notCanonical, "vector entries are not in strictly increasing device order")
            }
            let vector = VersionVector(sortedEntries: entries)
            let versionCount = try reader.readItemCount("versions", maximum: CausalRecord.maximumVersions)
            var versions: [CausalVersion] = []
            for _ in 0..<versionCount {
                let (_, id) = try device(&reader)
                let below = try reader.readVarint("version counter")
                guard below < vector[id] else { throw CodecError(.valueOutOfRange, "a version's dot is outside its vector") }
                let stamp = try stamp(&reader)
                let value = try reader.readByteArray("value", maximumBytes: Limits.maximumValueBytes)
                guard stamp.writer == id else { throw CodecError(.notCanonical, "a version's writer differs from its dot") }
                let context = readsContexts ? try context(below: vector, &reader) : nil
                versions.append(CausalVersion(dot: Dot(device: id, counter: vector[id] - below), timestamp: stamp.timestamp, value: value, context: context))
            }
            return .causal(CausalRecord(key: key, vector: vector, versions: versions))
        case .lww:
            let key = try key(&reader)
            let deleted = try reader.readByte("deleted flag")
            guard deleted <= 1 else { throw CodecError(.valueOutOfRange, "deleted flag \(deleted)") }
            let value = deleted == 0 ? try reader.readByteArray("value", maximumBytes: Limits.maximumValueBytes) : nil
            return .lww(LWWRecord(key: key, value: value, stamp: try stamp(&reader)))
        case .log:
            let id = try EventID(bytes: try reader.readBytes(EventID.byteCount, "event id"))
            if !lastKey.isEmpty && !lastKey.lexicographicallyPrecedes(id.bytes) {
                throw CodecError(.notCanonical, "events are not in strictly increasing id order")
            }
            lastKey = id.bytes
            let group = try reader.readString("group", maximumBytes: Limits.maximumKeyBytes)
            let marker = try reader.readByte("marker flag")
            guard marker <= 1 else { throw CodecError(.valueOutOfRange, "marker flag \(marker)") }
            let kind: LogEvent.Kind = marker == 1 ? .marker : .event(body: try reader.readByteArray("body", maximumBytes: Limits.maximumValueBytes))
            return .event(LogEvent(id: id, group: group, kind: kind, stamp: try stamp(&reader)))
        case .appendOnly:
            let key = try key(&reader)
            let value = try reader.readByteArray("value", maximumBytes: Limits.maximumValueBytes)
            return .appendOnly(AppendOnlyRecord(key: key, value: value, stamp: try stamp(&reader)))
        case .messages:
            let message = try key(&reader)
            let accountCount = try reader.readItemCount("message accounts", maximum: MessageRecord.maximumAccounts)
            var accounts: [AccountID] = []
            for _ in 0..<accountCount {
                let account = try AccountID(bytes: try reader.readBytes(AccountID.byteCount, "account"))
                guard !accounts.contains(account) else { throw CodecError(.notCanonical, "a message record names one account twice") }
                accounts.append(account)
            }
            let count = try reader.readItemCount("message ops", maximum: MessageRecord.maximumOps)
            var ops: [MessageOp] = []
            ops.reserveCapacity(count)
            for _ in 0..<count {
                let id = try MessageOpID(bytes: try reader.readBytes(MessageOpID.byteCount, "message op id"))
                if let last = ops.last, !(last.id < id) { throw CodecError(.notCanonical, "message ops are not in strictly increasing id order") }
                let stamp = try stamp(&reader)
                let accountIndex = try reader.readVarint("account index")
                guard accountIndex < UInt64(accounts.count) else {
                    throw CodecError(.valueOutOfRange, "account index \(accountIndex) is outside the record's \(accounts.count) accounts")
                }
                let action: MessageOp.Action
                let raw = try reader.readByte("message op action")
                guard let code = MessageOp.Action.Code(rawValue: raw) else { throw CodecError(.valueOutOfRange, "message op action \(raw)") }
                switch code {
                case .post:
                    action = .post(
                        author: try reader.readString("author", maximumBytes: Limits.maximumKeyBytes),
                        body: try reader.readByteArray("body", maximumBytes: Limits.maximumValueBytes))
                case .edit: action = .edit(body: try reader.readByteArray("body", maximumBytes: Limits.maximumValueBytes))
                case .delete:
                    let raw = try reader.readByte("delete scope")
                    guard let scope = DeleteScope(rawValue: raw), scope != .live else {
                        throw CodecError(.valueOutOfRange, "delete scope \(raw)")
                    }
                    action = .delete(scope)
                case .react:
                    action = .react(
                        reactor: try reader.readString("reactor", maximumBytes: Limits.maximumKeyBytes),
                        emoji: try reader.readString("emoji", maximumBytes: MessageRecord.maximumEmojiBytes))
                case .unreact: action = .unreact(reactor: try reader.readString("reactor", maximumBytes: Limits.maximumKeyBytes))
                case .receipt: action = .receipt(of: try MessageOpID(bytes: try reader.readBytes(MessageOpID.byteCount, "receipted op id")))
                }
                ops.append(
                    MessageOp(
                        id: id, message: message, time: Int64(stamp.timestamp.rawValue), writer: stamp.writer,
                        account: accounts[Int(accountIndex)], action: action))
            }
            return .message(MessageRecord(message: message, ops: ops))
        case .local:
            throw CodecError(.valueOutOfRange, "local namespaces are never replicated")
        }
    }
}
