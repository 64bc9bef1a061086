/// How a runtime carries a sealed frame through the hub's relay, whose frames are
/// bounded (HUB-API: 1 MiB by default) while a reconcile answer or a snapshot may
/// be larger (up to ``WireLimits/maximumFrameBytes``): a frame that fits travels
/// whole; a larger one travels as numbered pieces the receiver puts back
/// together. The hub sees the pieces' sizes, which the sealed frame's size
/// already told.
///
/// Bytes: `"SR"`, a version byte (1), then a kind byte: `0` and the sealed frame;
/// or `1`, a 16-byte message id, the piece's index and the piece count (each a
/// u32, big-endian), and the piece.
enum RelayEnvelope: Equatable {
    case whole([UInt8])
    case piece(message: [UInt8], index: Int, count: Int, bytes: [UInt8])

    static let magic: [UInt8] = [0x53, 0x52, 1]
    /// Pieces of one frame, at most (a frame is at most 64 MiB, a piece at least 4 KiB).
    static let maximumPieces = 1 << 14

    /// The envelopes that carry `frame` in pieces of at most `pieceBytes`.
    static func wrap(_ frame: [UInt8], pieceBytes: Int, using random: inout some RandomNumberGenerator) -> [[UInt8]] {
        precondition(pieceBytes >= 4_096, "relay pieces of under 4 KiB make too many requests")
        if frame.count <= pieceBytes { return [magic + [0] + frame] }
        let message = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        let count = (frame.count + pieceBytes - 1) / pieceBytes
        return (0..<count).map { index in
            var writer = ByteWriter(capacity: 28 + pieceBytes)
            writer.append(magic + [1])
            writer.append(message)
            writer.appendBigEndian32(UInt32(index))
            writer.appendBigEndian32(UInt32(count))
            writer.append(Array(frame[(index * pieceBytes)..<min(frame.count, (index + 1) * pieceBytes)]))
            return writer.bytes
        }
    }

    /// - Throws: ``CodecError`` when the bytes are not an envelope.
    init(decoding bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        guard Array(try reader.readBytes(3, "relay envelope magic")) == Self.magic else {
            throw CodecError(.unknownVersion, "a relay frame that is not a Stele relay envelope (no SR1 magic)")
        }
        switch try reader.readBytes(1, "relay envelope kind").first {
        case 0:
            self = .whole(Array(try reader.readBytes(reader.remaining, "sealed frame")))
        case 1:
            let message = Array(try reader.readBytes(16, "relay message id"))
            let index = Int(try reader.readBigEndianUInt32("piece index"))
            let count = Int(try reader.readBigEndianUInt32("piece count"))
            guard count >= 2, count <= Self.maximumPieces, index < count else {
                throw CodecError(.valueOutOfRange, "relay piece \(index) of \(count): out of range")
            }
            self = .piece(message: message, index: index, count: count, bytes: Array(try reader.readBytes(reader.remaining, "relay piece")))
        default:
            throw CodecError(.unknownVersion, "a relay envelope of an unknown kind")
        }
    }
}

/// Puts pieces back together (``RelayEnvelope``). Bounded: at most
/// ``maximumBufferedBytes`` wait, and a frame whose pieces stop coming is
/// forgotten after ``maximumAgeMilliseconds`` (the protocol resends what it
/// needs; a frame lost here costs time, not data).
struct RelayReassembly {
    static let maximumBufferedBytes = 128 << 20
    static let maximumAgeMilliseconds: Int64 = 120_000

    private struct Partial {
        var pieces: [Int: [UInt8]]
        let count: Int
        let startedAt: Int64
    }

    private var partials: [[UInt8]: Partial] = [:]
    private var bufferedBytes = 0

    /// Pieces of frames still waiting.
    var waiting: Int { partials.values.reduce(0) { $0 + $1.pieces.count } }

    /// Takes one envelope in at `now`; returns the sealed frame when it is complete.
    /// - Throws: ``CodecError`` for bytes that are not an envelope, or a piece at odds with its siblings.
    mutating func take(_ bytes: [UInt8], at now: Int64) throws -> [UInt8]? {
        partials = partials.filter { now - $0.value.startedAt <= Self.maximumAgeMilliseconds }
        bufferedBytes = partials.values.reduce(0) { $0 + $1.pieces.values.reduce(0) { $0 + $1.count } }
        switch try RelayEnvelope(decoding: bytes) {
        case .whole(let frame):
            return frame
        case let .piece(message, index, count, piece):
            var partial = partials[message] ?? Partial(pieces: [:], count: count, startedAt: now)
            guard partial.count == count else { throw CodecError(.notCanonical, "relay pieces of one frame disagree on their count") }
            guard bufferedBytes + piece.count <= Self.maximumBufferedBytes else {
                throw CodecError(.countTooLarge, "more than \(Self.maximumBufferedBytes) bytes of relay pieces wait to be put together; this piece is dropped")
            }
            if partial.pieces[index] == nil { bufferedBytes += piece.count }
            partial.pieces[index] = piece
            guard partial.pieces.count == count else {
                partials[message] = partial
                return nil
            }
            partials[message] = nil
            bufferedBytes -= partial.pieces.values.reduce(0) { $0 + $1.count }
            return (0..<count).flatMap { partial.pieces[$0] ?? [] }
        }
    }
}
