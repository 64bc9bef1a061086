import Foundation
import Testing
import TestSupport
@testable import Stele

@Suite struct FrameCodecTests {
    static let devices = Fixtures.devices(3)

    static func stamp(_ milliseconds: Int64, _ device: Int) -> WriteStamp {
        WriteStamp(timestamp: HybridTimestamp(milliseconds: milliseconds, logical: 0), writer: devices[device])
    }

    static var sampleMessage: ReconcileMessage {
        var generator = SeededGenerator(seed: 4)
        let (a, b) = (devices[0], devices[1])
        let causal = CausalRecord(
            key: "note-1", vector: VersionVector([a: 1_700_000_000_005, b: 3]),
            versions: [
                CausalVersion(dot: Dot(device: a, counter: 1_700_000_000_005), timestamp: HybridTimestamp(milliseconds: 1_700_000_000_005, logical: 0), value: "hi".bytes),
                CausalVersion(
                    dot: Dot(device: b, counter: 3), timestamp: HybridTimestamp(milliseconds: 1_700_000_000_001, logical: 2), value: [0, 255],
                    context: VersionVector([b: 3])),
            ])
        let tombstone = CausalRecord.tombstone(key: "note-0", vector: VersionVector([a: 1_700_000_000_009]))
        _ = generator.next()
        return ReconcileMessage(
            session: 99, namespace: "notes", kind: .causal, generation: 7,
            tombstoneFingerprint: Fingerprint(sum64: 0xDEAD_BEEF, count: 12), tombstones: [.causal(tombstone)], tombstonesComplete: true,
            restart: true,
            ranges: [
                RangeItem(upperBound: Array("b".utf8), mode: .skip),
                RangeItem(upperBound: Array("bz".utf8), mode: .fingerprint(Fingerprint(sum64: 1, count: 2))),
                RangeItem(
                    upperBound: nil,
                    mode: .leaves([
                        LeafEntry(key: Array("c".utf8), leaf: Leaf(digest: SHA256().hash("c".bytes))),
                        LeafEntry(key: Array("cd".utf8), leaf: Leaf(digest: SHA256().hash("d".bytes))),
                    ])),
            ],
            records: [.causal(causal)], wants: [Array("x".utf8), Array("xy".utf8)])
    }

    /// The fuzzers' seed corpus (`Fuzz/frames`) holds frames of this build's
    /// format: a seed the decoder refuses at its first byte would fuzz nothing.
    @Test func theFuzzSeedsAreFramesOfThisFormat() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/frames").standardized
        let seeds = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(seeds.count >= 5)
        for seed in seeds {
            let bytes = [UInt8](try Data(contentsOf: folder.appendingPathComponent(seed)))
            #expect(throws: Never.self, "\(seed)") { try FrameCodec.decode(bytes) }
        }
    }

    @Test func anAdvertisementRoundTripsWithTheGenerationLastAsEightBigEndianBytes() throws {
        let advertisement = Advertisement(
            roots: [.init(namespace: "notes", digest: SHA256().hash([1])), .init(namespace: "memory", digest: SHA256().hash([2]))],
            generation: 0x0102_0304_0506_0708)
        let bytes = FrameCodec.encode(.advertisement(advertisement))
        #expect(Array(bytes.suffix(8)) == [1, 2, 3, 4, 5, 6, 7, 8])
        #expect(try FrameCodec.decode(bytes) == .advertisement(advertisement))
        #expect(advertisement.roots.map(\.namespace) == ["memory", "notes"])
        // A greeting is the same advertisement under its own type.
        let greeting = FrameCodec.encode(.greeting(advertisement))
        #expect(greeting[1] == 3 && Array(greeting.dropFirst(3)) == Array(bytes.dropFirst(3)))
        #expect(try FrameCodec.decode(greeting) == .greeting(advertisement))
    }

    @Test func aReconcileMessageRoundTripsWithEverySection() throws {
        let message = Self.sampleMessage
        #expect(try FrameCodec.decode(FrameCodec.encode(.reconcile(message))) == .reconcile(message))
    }

    @Test func recordsOfEveryKindRoundTrip() throws {
        var generator = SeededGenerator(seed: 9)
        let lww = ReconcileMessage(
            session: 1, namespace: "flags", kind: .lww, generation: 0,
            tombstones: [.lww(LWWRecord(key: "gone", value: nil, stamp: Self.stamp(5, 1)))],
            records: [.lww(LWWRecord(key: "on", value: [1], stamp: Self.stamp(9, 0)))])
        let log = ReconcileMessage(
            session: 2, namespace: "memory", kind: .log, generation: 3,
            records: [
                .event(LogEvent(id: EventID.random(using: &generator), group: "c1", kind: .event(body: "hi".bytes), stamp: Self.stamp(3, 2))),
                .event(LogEvent(id: EventID.random(using: &generator), group: "c1", kind: .marker, stamp: Self.stamp(4, 0))),
            ])
        let sealed = ReconcileMessage(
            session: 3, namespace: "sealed", kind: .appendOnly, generation: 0,
            records: [.appendOnly(AppendOnlyRecord(key: "run", value: [7], stamp: Self.stamp(1, 1)))])
        for message in [lww, log, sealed] {
            guard case .reconcile(let decoded) = try FrameCodec.decode(FrameCodec.encode(.reconcile(message))) else {
                Issue.record("not a reconcile frame")
                continue
            }
            // Records travel sorted by key; compare as sets.
            #expect(Set(decoded.records.map { "\($0)" }) == Set(message.records.map { "\($0)" }))
            #expect(decoded.tombstones == message.tombstones)
        }
    }

    @Test func largeBodiesAreDeflatedAndStillRoundTrip() throws {
        let tombstones = (0..<5_000).map { index in
            WireRecord.causal(.tombstone(key: "key-\(100_000 + index)", vector: VersionVector([Self.devices[0]: 1_700_000_000_000 + UInt64(index)])))
        }
        let message = ReconcileMessage(session: 1, namespace: "notes", kind: .causal, generation: 0, tombstones: tombstones, tombstonesComplete: true)
        let bytes = FrameCodec.encode(.reconcile(message))
        #expect(bytes[2] == 1, "expected a deflated body")
        // Front-coded keys and delta counters: a few bytes per tombstone, before deflate.
        #expect(bytes.count < tombstones.count * 4)
        guard case .reconcile(let decoded) = try FrameCodec.decode(bytes) else {
            Issue.record("not a reconcile frame")
            return
        }
        #expect(decoded.tombstones == tombstones)
    }

    @Test func everyTruncationOfAValidFrameIsATypedError() throws {
        let bytes = FrameCodec.encode(.reconcile(Self.sampleMessage))
        for length in 0..<bytes.count {
            #expect(throws: CodecError.self) { _ = try FrameCodec.decode(Array(bytes.prefix(length))) }
        }
        #expect { _ = try FrameCodec.decode(bytes + [0]) } throws: { ($0 as? CodecError)?.code == .trailingBytes }
    }

    @Test func aFrameClaiming2To32RowsIsRefusedBeforeAllocating() throws {
        // Advertisement body: a namespace count of 2^32.
        let hostile: [UInt8] = [FrameCodec.formatVersion, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10]
        #expect { _ = try FrameCodec.decode(hostile) } throws: { ($0 as? CodecError)?.code == .countTooLarge }
        // A reconcile whose records count claims 2^32.
        var writer = ByteWriter()
        writer.append([FrameCodec.formatVersion, 2, 0])
        writer.appendVarint(1)
        writer.appendString("notes")
        writer.append(1)
        writer.appendVarint(0)
        writer.append(0)
        writer.appendVarint(0)  // devices
        writer.appendVarint(0)  // ranges
        writer.appendVarint(1 << 32)  // records
        #expect { _ = try FrameCodec.decode(writer.bytes) } throws: { ($0 as? CodecError)?.code == .countTooLarge }
    }

    @Test func unknownVersionsTypesAndFlagsAreRefused() throws {
        let valid = FrameCodec.encode(.advertisement(Advertisement(roots: [], generation: 0)))
        var version = valid
        version[0] = 9
        #expect { _ = try FrameCodec.decode(version) } throws: { ($0 as? CodecError)?.code == .unknownVersion }
        var type = valid
        type[1] = 200
        #expect { _ = try FrameCodec.decode(type) } throws: { ($0 as? CodecError)?.code == .valueOutOfRange }
        // An advertisement's body under a barrier frame's type is too short for one.
        var barrier = valid
        barrier[1] = 16
        #expect { _ = try FrameCodec.decode(barrier) } throws: { ($0 as? CodecError)?.code == .truncated }
        var flags = valid
        flags[2] = 6
        #expect { _ = try FrameCodec.decode(flags) } throws: { ($0 as? CodecError)?.code == .notCanonical }
    }

    static var barrierFrames: [Frame] {
        var generator = SeededGenerator(seed: 8)
        let round = RoundNonce.generate(using: &generator)
        let digest = SHA256().hash("content".bytes)
        return [
            .gcPropose(BarrierProposal(round: round, digest: digest, generation: 1)),
            .gcAck(BarrierAnswer(round: round, digest: digest, knowledge: Self.knowledge)),
            .gcAck(.decline(round)),
            .gcCommit(BarrierCommit(proposal: BarrierProposal(round: round, digest: digest, generation: 300), knowledge: Self.knowledge)),
            .gcCommit(BarrierCommit(proposal: BarrierProposal(round: round, digest: digest, generation: 2), knowledge: Knowledge())),
            .gcAbort(round),
        ]
    }

    /// Two devices' counters, and a stamp of a third.
    static var knowledge: Knowledge {
        var knowledge = Knowledge()
        knowledge.note(member: devices[0], counter: 9, clock: HybridTimestamp(milliseconds: 1_700_000_000_001, logical: 0))
        knowledge.note(member: devices[1], counter: 1_700_000_000_000, clock: HybridTimestamp(milliseconds: 1_700_000_000_000, logical: 3))
        knowledge.note(HybridTimestamp(milliseconds: 1_700_000_000_500, logical: 0), by: devices[2])
        return knowledge
    }

    @Test func barrierFramesRoundTripAndEveryTruncationIsATypedError() throws {
        for frame in Self.barrierFrames {
            let bytes = FrameCodec.encode(frame)
            #expect(try FrameCodec.decode(bytes) == frame)
            // Nonce, digest, a short varint and what a few devices had seen: small frames.
            #expect(bytes.count <= 3 + 16 + 32 + 2 + 5 * (32 + 10) + 2)
            for length in 0..<bytes.count {
                #expect(throws: CodecError.self) { _ = try FrameCodec.decode(Array(bytes.prefix(length))) }
            }
            #expect { _ = try FrameCodec.decode(bytes + [0]) } throws: { ($0 as? CodecError)?.code == .trailingBytes }
        }
        #expect(try FrameCodec.decode(FrameCodec.encode(.gcAck(.decline(Self.barrierRound)))) == .gcAck(.decline(Self.barrierRound)))
    }

    static var barrierRound: RoundNonce {
        var generator = SeededGenerator(seed: 8)
        return RoundNonce.generate(using: &generator)
    }

    @Test func aRoundToGenerationZeroIsRefused() throws {
        // An empty knowledge is two zero counts after the generation.
        var bytes = FrameCodec.encode(.gcCommit(BarrierCommit(proposal: BarrierProposal(round: Self.barrierRound, digest: .zero, generation: 1), knowledge: Knowledge())))
        bytes[bytes.count - 3] = 0
        #expect { _ = try FrameCodec.decode(bytes) } throws: { ($0 as? CodecError)?.code == .valueOutOfRange }
    }

    @Test func aCompressionBombIsRefused() throws {
        var writer = ByteWriter()
        writer.append([FrameCodec.formatVersion, 1, 1])
        writer.appendVarint(UInt64(WireLimits.maximumFrameBytes + 1))
        writer.append([0x78, 0x9C, 0x03, 0x00])
        #expect { _ = try FrameCodec.decode(writer.bytes) } throws: { ($0 as? CodecError)?.code == .countTooLarge }
        // A body that inflates to more than it announced.
        let body = [UInt8](repeating: 7, count: 10_000)
        var lying = ByteWriter()
        lying.append([FrameCodec.formatVersion, 1, 1])
        lying.appendVarint(100)
        lying.append(try #require(Compression.deflate(body)))
        #expect(throws: CodecError.self) { _ = try FrameCodec.decode(lying.bytes) }
    }

    @Test func randomGarbageNeverTraps() {
        var generator = SeededGenerator(seed: 77)
        let valid = FrameCodec.encode(.reconcile(Self.sampleMessage))
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = generator.bytes(Int.random(in: 0...200, using: &generator))
                if bytes.count > 2 {
                    bytes[0] = FrameCodec.formatVersion
                    bytes[1] = UInt8.random(in: 1...2, using: &generator)
                    bytes[2] = 0
                }
            } else {
                // A valid frame with a few bytes flipped.
                bytes = valid
                for _ in 0..<Int.random(in: 1...4, using: &generator) {
                    bytes[Int.random(in: 3..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
            }
            _ = try? FrameCodec.decode(bytes)
        }
    }
}
