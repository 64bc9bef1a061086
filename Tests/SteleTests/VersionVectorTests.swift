import Testing
import TestSupport
@testable import Stele

@Suite struct VersionVectorTests {
    static let devices = Fixtures.devices(4)
    static var a: DeviceID { devices[0] }
    static var b: DeviceID { devices[1] }

    private func randomVector(_ generator: inout SeededGenerator) -> VersionVector {
        var counters: [DeviceID: UInt64] = [:]
        for device in Self.devices where Bool.random(using: &generator) {
            counters[device] = UInt64.random(in: 0...3, using: &generator)
        }
        return VersionVector(counters)
    }

    @Test func comparesTheFourWays() {
        let ab = VersionVector([Self.a: 1, Self.b: 1])
        let a1 = VersionVector([Self.a: 1])
        let b1 = VersionVector([Self.b: 1])
        #expect(ab.compare(ab) == .equal)
        #expect(ab.compare(a1) == .dominates)
        #expect(a1.compare(ab) == .dominated)
        #expect(a1.compare(b1) == .concurrent)
        #expect(VersionVector().compare(VersionVector()) == .equal)
        #expect(a1.compare(VersionVector()) == .dominates)
    }

    @Test func zeroCountersAreAbsent() {
        #expect(VersionVector([Self.a: 0]) == VersionVector())
        #expect(VersionVector([Self.a: 0])[Self.a] == 0)
    }

    @Test func mergeIsCommutativeAssociativeAndIdempotent() {
        var generator = SeededGenerator(seed: 0x5EED)
        for _ in 0..<2_000 {
            let x = randomVector(&generator)
            let y = randomVector(&generator)
            let z = randomVector(&generator)
            #expect(x.merged(with: y) == y.merged(with: x), "seed \(generator.seed)")
            #expect(x.merged(with: y).merged(with: z) == x.merged(with: y.merged(with: z)), "seed \(generator.seed)")
            #expect(x.merged(with: x) == x, "seed \(generator.seed)")
        }
    }

    @Test func mergeIsTheLeastUpperBound() {
        var generator = SeededGenerator(seed: 11)
        for _ in 0..<2_000 {
            let x = randomVector(&generator)
            let y = randomVector(&generator)
            let merged = x.merged(with: y)
            #expect([.equal, .dominates].contains(merged.compare(x)))
            #expect([.equal, .dominates].contains(merged.compare(y)))
            for device in Self.devices { #expect(merged[device] == max(x[device], y[device])) }
        }
    }

    @Test func compareAgreesWithPointwiseDefinitionAndIsAntisymmetric() {
        var generator = SeededGenerator(seed: 12)
        for _ in 0..<2_000 {
            let x = randomVector(&generator)
            let y = randomVector(&generator)
            let ge = Self.devices.allSatisfy { x[$0] >= y[$0] }
            let le = Self.devices.allSatisfy { x[$0] <= y[$0] }
            let expected: VersionVector.Ordering = ge && le ? .equal : ge ? .dominates : le ? .dominated : .concurrent
            #expect(x.compare(y) == expected)
            let mirrored: VersionVector.Ordering =
                switch expected {
                case .dominates: .dominated
                case .dominated: .dominates
                default: expected
                }
            #expect(y.compare(x) == mirrored)
        }
    }

    @Test func advanceRaisesOneCounter() {
        var vector = VersionVector([Self.a: 3])
        vector.advance(Self.b, to: 5)
        vector.advance(Self.a, to: 4)
        #expect(vector == VersionVector([Self.a: 4, Self.b: 5]))
    }

    @Test func theEncodingRoundTripsAndIsCanonical() throws {
        var generator = SeededGenerator(seed: 13)
        for _ in 0..<500 {
            let vector = randomVector(&generator)
            #expect(try VersionVector(encoded: vector.encoded) == vector)
            // Built in any order, the same vector encodes the same bytes.
            let shuffled = Dictionary(uniqueKeysWithValues: vector.entries.shuffled(using: &generator).map { ($0.device, $0.counter) })
            #expect(VersionVector(shuffled).encoded == vector.encoded)
        }
        let one = VersionVector([Self.a: 1_700_000_000_000])
        #expect(one.encoded.count == 1 + 32 + 6)
    }

    @Test func theDecoderRejectsMalformedInputWithoutTrapping() throws {
        let valid = VersionVector([Self.a: 1, Self.b: 300]).encoded
        // Every truncation.
        for length in 0..<valid.count {
            #expect(throws: CodecError.self) { _ = try VersionVector(encoded: Array(valid.prefix(length))) }
        }
        // Trailing bytes.
        #expect { _ = try VersionVector(encoded: valid + [0]) } throws: { ($0 as? CodecError)?.code == .trailingBytes }
        // A count of 2^32 entries with nothing behind it.
        #expect { _ = try VersionVector(encoded: [0x80, 0x80, 0x80, 0x80, 0x10]) } throws: { ($0 as? CodecError)?.code == .countTooLarge }
        // Entries out of order.
        let unsorted = [2] + Self.b.bytes + [1] + Self.a.bytes + [1]
        #expect { _ = try VersionVector(encoded: unsorted) } throws: { ($0 as? CodecError)?.code == .notCanonical }
        // The same device twice.
        let duplicated = [2] + Self.a.bytes + [1] + Self.a.bytes + [2]
        #expect { _ = try VersionVector(encoded: duplicated) } throws: { ($0 as? CodecError)?.code == .notCanonical }
        // A zero counter.
        #expect { _ = try VersionVector(encoded: [1] + Self.a.bytes + [0]) } throws: { ($0 as? CodecError)?.code == .notCanonical }
        // An overlong varint.
        #expect { _ = try VersionVector(encoded: [1] + Self.a.bytes + [0x81, 0x00]) } throws: { ($0 as? CodecError)?.code == .overlongVarint }
        // A counter beyond Int64.max.
        let huge: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
        #expect { _ = try VersionVector(encoded: [1] + Self.a.bytes + huge) } throws: { ($0 as? CodecError)?.code == .valueOutOfRange }
        // Random garbage never traps.
        var generator = SeededGenerator(seed: 14)
        for _ in 0..<5_000 {
            let garbage = generator.bytes(Int.random(in: 0...80, using: &generator))
            _ = try? VersionVector(encoded: garbage)
        }
    }
}
