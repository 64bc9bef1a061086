/// The binary encoding of ``Frame``s: compact, versioned, bounded.
///
/// Envelope: a format version byte, a frame type byte, a flags byte (bit 0: the
/// body is deflated, and its inflated length follows as a varint), then the body.
/// Types 1 and 2 are the advertisement and the reconcile step; 3 is a greeting
/// (an advertisement asking for one back, as a device starts); 16–18 are the
/// barrier's `gc_propose`, `gc_ack` and `gc_commit`: a 16-byte nonce, a 32-byte
/// digest, (propose, commit) the generation as a varint and (ack, commit) the
/// ``Knowledge``; 19–21 are the snapshot request, the snapshot and `gc_request`;
/// 22 is `gc_abort`, the 16-byte nonce of a round the leader gave up;
/// 32 is a delivery to a contact: the conversation name, a flags byte (bit 0:
/// an answer), the frame's device dictionary, then message records as a
/// reconcile carries them.
///
/// A decoder never traps on input: short, oversized or malformed bytes throw
/// ``CodecError`` and nothing else happens.
public enum FrameCodec {
    /// 2: causal versions carry their causal context (issue 14). A device of an
    /// older format refuses these frames, and its own are refused here: every
    /// device of an account updates together.
    public static let formatVersion: UInt8 = 2

    enum FrameType: UInt8 {
        case advertisement = 1
        case reconcile = 2
        case greeting = 3
        // The convergence barrier (001 §4), and recovery from a sibling (DESIGN §6).
        case gcPropose = 16, gcAck = 17, gcCommit = 18, snapshotRequest = 19, snapshot = 20, gcRequest = 21, gcAbort = 22
        // Between accounts: a conversation's ops or receipts.
        case delivery = 32
    }

    /// Bodies at least this long are deflated if that saves a tenth or more.
    static let compressionThreshold = 512

    /// Encodes a frame, deflating its body when that pays (and `compress` allows).
    public static func encode(_ frame: Frame, compress: Bool = true) -> [UInt8] {
        var body = ByteWriter()
        let type: FrameType
        switch frame {
        case .advertisement(let advertisement):
            type = .advertisement
            encode(advertisement, into: &body)
        case .greeting(let advertisement):
            type = .greeting
            encode(advertisement, into: &body)
        case .reconcile(let message):
            type = .reconcile
            ReconcileCodec.encode(message, into: &body)
        case .gcPropose(let proposal):
            type = .gcPropose
            encode(proposal, into: &body)
        case .gcAck(let answer):
            type = .gcAck
            body.append(answer.round.bytes)
            body.append(answer.digest.bytes)
            answer.knowledge.encode(into: &body)
        case .gcCommit(let commit):
            type = .gcCommit
            encode(commit.proposal, into: &body)
            commit.knowledge.encode(into: &body)
        case .gcRequest:
            type = .gcRequest
        case .gcAbort(let round):
            type = .gcAbort
            body.append(round.bytes)
        case .snapshotRequest(let generation):
            type = .snapshotRequest
            body.appendVarint(generation)
        case .snapshot(let snapshot):
            type = .snapshot
            body.appendVarint(snapshot.generation)
            body.append(snapshot.sealed)
        case .delivery(let delivery):
            type = .delivery
            body.appendString(delivery.conversation)
            body.append(delivery.isAnswer ? 1 : 0)
            var records = RecordWriter()
            var list = ByteWriter()
            records.append(delivery.records.map { .message($0) }, into: &list)
            body.appendVarint(UInt64(records.devices.count))
            for device in records.devices { body.append(device.bytes) }
            body.append(list.bytes)
        }
        var output = ByteWriter(capacity: body.bytes.count + 8)
        output.append(formatVersion)
        output.append(type.rawValue)
        if compress, body.bytes.count >= compressionThreshold, let deflated = Compression.deflate(body.bytes),
            deflated.count + 8 < body.bytes.count - body.bytes.count / 10
        {
            output.append(1)
            output.appendVarint(UInt64(body.bytes.count))
            output.append(deflated)
        } else {
            output.append(0)
            output.append(body.bytes)
        }
        return output.bytes
    }

    /// Decodes a frame.
    /// - Throws: ``CodecError``: an unknown version or type, a truncated or
    ///   oversized frame, a count above its bound, or malformed content.
    public static func decode(_ bytes: [UInt8]) throws -> Frame {
        guard bytes.count <= maximumEncodedBytes else {
            throw CodecError(.countTooLarge, "a frame of \(bytes.count) bytes is above the limit of \(maximumEncodedBytes)")
        }
        var header = ByteReader(bytes)
        let version = try header.readByte("frame version")
        guard version == formatVersion else {
            throw CodecError(.unknownVersion, "frame format \(version) is not known to this build (it speaks \(formatVersion)); update Stele on every device")
        }
        let rawType = try header.readByte("frame type")
        let flags = try header.readByte("frame flags")
        guard flags & ~1 == 0 else { throw CodecError(.notCanonical, "frame flags \(flags) has unknown bits") }
        let body: [UInt8]
        if flags & 1 == 1 {
            let length = try header.readCount("inflated frame length", maximum: WireLimits.maximumFrameBytes)
            body = try Compression.inflate(bytes[header.offset...], expectedCount: length, limit: WireLimits.maximumFrameBytes)
        } else {
            body = Array(bytes[header.offset...])
        }
        var reader = ByteReader(body)
        let frame: Frame
        switch FrameType(rawValue: rawType) {
        case .advertisement: frame = .advertisement(try decodeAdvertisement(&reader))
        case .greeting: frame = .greeting(try decodeAdvertisement(&reader))
        case .reconcile: frame = .reconcile(try ReconcileCodec.decode(&reader))
        case .gcPropose: frame = .gcPropose(try decodeProposal(&reader))
        case .gcAck:
            let round = try RoundNonce(bytes: try reader.readBytes(RoundNonce.byteCount, "gc_ack nonce"))
            let digest = try Hash32(bytes: try reader.readBytes(Hash32.byteCount, "gc_ack digest"))
            frame = .gcAck(BarrierAnswer(round: round, digest: digest, knowledge: try Knowledge(from: &reader)))
        case .gcCommit:
            let proposal = try decodeProposal(&reader)
            frame = .gcCommit(BarrierCommit(proposal: proposal, knowledge: try Knowledge(from: &reader)))
        case .snapshotRequest: frame = .snapshotRequest(generation: try reader.readVarint("requester generation"))
        case .gcRequest: frame = .gcRequest
        case .gcAbort: frame = .gcAbort(try RoundNonce(bytes: try reader.readBytes(RoundNonce.byteCount, "gc_abort nonce")))
        case .snapshot:
            let generation = try reader.readVarint("snapshot generation")
            frame = .snapshot(SealedSnapshot(generation: generation, sealed: Array(try reader.readBytes(reader.remaining, "sealed snapshot"))))
        case .delivery: frame = .delivery(try decodeDelivery(&reader))
        case nil:
            throw CodecError(.valueOutOfRange, "unknown frame type \(rawType)")
        }
        try reader.expectEnd("frame")
        return frame
    }

    /// The largest encoded frame accepted (a deflated body is checked again once inflated).
    static let maximumEncodedBytes = WireLimits.maximumFrameBytes + 64

    // MARK: - Barrier

    static func encode(_ proposal: BarrierProposal, into writer: inout ByteWriter) {
        writer.append(proposal.round.bytes)
        writer.append(proposal.digest.bytes)
        writer.appendVarint(proposal.generation)
    }

    static func decodeProposal(_ reader: inout ByteReader) throws -> BarrierProposal {
        let round = try RoundNonce(bytes: try reader.readBytes(RoundNonce.byteCount, "barrier nonce"))
        let digest = try Hash32(bytes: try reader.readBytes(Hash32.byteCount, "barrier digest"))
        let generation = try reader.readVarint("barrier generation")
        guard generation > 0 else { throw CodecError(.valueOutOfRange, "a barrier round moves to generation 1 or above, not 0") }
        return BarrierProposal(round: round, digest: digest, generation: generation)
    }

    // MARK: - Delivery

    static func decodeDelivery(_ reader: inout ByteReader) throws -> Delivery {
        let conversation = try reader.readString("conversation", maximumBytes: Limits.maximumNamespaceNameLength)
        guard !conversation.isEmpty else { throw CodecError(.valueOutOfRange, "a delivery names no conversation") }
        let flags = try reader.readByte("delivery flags")
        guard flags & ~1 == 0 else { throw CodecError(.notCanonical, "delivery flags \(flags) has unknown bits") }
        let deviceCount = try reader.readItemCount("devices", maximum: WireLimits.maximumDevices)
        var devices: [DeviceID] = []
        for index in 0..<deviceCount {
            devices.append(try DeviceID(bytes: try reader.readBytes(DeviceID.byteCount, "device \(index)")))
        }
        guard Set(devices).count == devices.count else { throw CodecError(.notCanonical, "a device is named twice in one frame") }
        var records = RecordReader(devices: devices)
        let messages = try records.records(of: .messages, &reader).map { record in
            guard case .message(let message) = record else { throw CodecError(.valueOutOfRange, "a delivery carries message records only") }
            return message
        }
        return Delivery(conversation: conversation, records: messages, isAnswer: flags == 1)
    }

    // MARK: - Advertisement

    static func encode(_ advertisement: Advertisement, into writer: inout ByteWriter) {
        writer.appendVarint(UInt64(advertisement.roots.count))
        for root in advertisement.roots {
            writer.appendString(root.namespace)
            writer.append(root.digest.bytes)
        }
        // 001 §7: the generation rides after the roots, 8 bytes big-endian.
        writer.appendBigEndian(advertisement.generation)
    }

    static func decodeAdvertisement(_ reader: inout ByteReader) throws -> Advertisement {
        let count = try reader.readCount("advertised namespaces", maximum: WireLimits.maximumNamespaces)
        var roots: [Advertisement.Root] = []
        for index in 0..<count {
            let name = try reader.readString("advertised namespace \(index)", maximumBytes: Limits.maximumNamespaceNameLength)
            let digest = try Hash32(bytes: try reader.readBytes(Hash32.byteCount, "root of \(name)"))
            if let last = roots.last, !(last.namespace < name) {
                throw CodecError(.notCanonical, "advertised namespaces are not in strictly increasing order")
            }
            roots.append(Advertisement.Root(namespace: name, digest: digest))
        }
        let generation = try reader.readBigEndianUInt64("generation")
        return Advertisement(roots: roots, generation: generation)
    }
}

extension ByteWriter {
    mutating func appendString(_ string: String) {
        appendVarint(UInt64(string.utf8.count))
        append(string.utf8)
    }

    mutating func appendBytes(_ bytes: [UInt8]) {
        appendVarint(UInt64(bytes.count))
        append(bytes)
    }

    /// A signed difference, zigzag-encoded so small magnitudes take one byte.
    mutating func appendZigzag(_ value: Int64) {
        appendVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// `bytes` as the length of the prefix it shares with `previous`, then the rest:
    /// sorted keys mostly share long prefixes.
    mutating func appendFrontCoded(_ bytes: [UInt8], after previous: [UInt8]) {
        var shared = 0
        let limit = min(bytes.count, previous.count)
        while shared < limit && bytes[shared] == previous[shared] { shared += 1 }
        appendVarint(UInt64(shared))
        appendVarint(UInt64(bytes.count - shared))
        append(bytes[shared...])
    }
}

extension ByteReader {
    mutating func readString(_ what: @autoclosure () -> String, maximumBytes: Int) throws -> String {
        let length = try readCount(what(), maximum: maximumBytes)
        let bytes = try readBytes(length, what())
        guard let string = String(validating: bytes, as: UTF8.self) else {
            throw CodecError(.notCanonical, "\(what()) is not valid UTF-8")
        }
        return string
    }

    mutating func readByteArray(_ what: @autoclosure () -> String, maximumBytes: Int) throws -> [UInt8] {
        let length = try readCount(what(), maximum: maximumBytes)
        return Array(try readBytes(length, what()))
    }

    mutating func readZigzag(_ what: @autoclosure () -> String) throws -> Int64 {
        let raw = try readVarint(what())
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    mutating func readFrontCoded(after previous: [UInt8], _ what: @autoclosure () -> String, maximumBytes: Int) throws -> [UInt8] {
        let shared = try readCount(what(), maximum: previous.count)
        let rest = try readCount(what(), maximum: maximumBytes)
        guard shared + rest <= maximumBytes else {
            throw CodecError(.countTooLarge, "\(what()) is \(shared + rest) bytes, above \(maximumBytes)")
        }
        var key: [UInt8] = []
        key.reserveCapacity(shared + rest)
        key.append(contentsOf: previous[..<shared])
        key.append(contentsOf: try readBytes(rest, what()))
        return key
    }

    /// A count that also cannot exceed the bytes left (each item takes at least one),
    /// so a hostile count cannot make the decoder reserve memory for nothing.
    mutating func readItemCount(_ what: @autoclosure () -> String, maximum: Int) throws -> Int {
        let count = try readCount(what(), maximum: maximum)
        guard count <= remaining else {
            throw CodecError(.truncated, "\(what()): \(count) items announced, only \(remaining) bytes left")
        }
        return count
    }
}
