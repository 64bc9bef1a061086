import Testing
import TestSupport
@testable import Stele

@Suite struct DigestTests {
    @Test func hashSumsAreAGroupModulo2To256() {
        var generator = SeededGenerator(seed: 5)
        for _ in 0..<500 {
            let a = Hash32(words: (generator.next(), generator.next(), generator.next(), generator.next()))
            let b = Hash32(words: (generator.next(), generator.next(), generator.next(), generator.next()))
            #expect(a + b == b + a)
            #expect(a + b - b == a)
            #expect(a - a == .zero)
            #expect(a + a.negated == .zero)
        }
        // The carry crosses every word.
        let allOnes = Hash32(words: (.max, .max, .max, .max))
        #expect(allOnes + Hash32(words: (0, 0, 0, 1)) == .zero)
    }

    @Test func sha256MatchesTheStandardVector() {
        let hasher = SHA256()
        #expect(Hex.encode(hasher.hash(Array("abc".utf8)).bytes) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func rangeIndexSumsMatchTheirLeavesAfterAddsRemovesAndARebuild() {
        var generator = SeededGenerator(seed: 8)
        var index = RangeIndex()
        var live: [[UInt8]: Hash32] = [:]
        for step in 0..<3_000 {
            let key = Array("k\(Int.random(in: 0..<500, using: &generator))".utf8)
            if let old = live[key] {
                index.remove(old, fromRange: index.range(of: key))
                live[key] = nil
            } else {
                let leaf = Hash32(words: (generator.next(), generator.next(), generator.next(), generator.next()))
                index.add(leaf, toRange: index.range(of: key))
                live[key] = leaf
            }
            if step == 1_500 {
                index = RangeIndex.rebuilt(from: live.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map { ($0.key, $0.value) })
                #expect(index.rangeCount > 1)
            }
        }
        #expect(index.totalCount == live.count)
        #expect(index.totalSum == live.values.reduce(Hash32.zero, +))
        // Every range holds exactly the leaves between its bounds.
        for range in 0..<index.rangeCount {
            let (lower, upper) = index.bounds(ofRange: range)
            let inside = live.filter { entry in
                !entry.key.lexicographicallyPrecedes(lower) && (upper.map { entry.key.lexicographicallyPrecedes($0) } ?? true)
            }
            #expect(index.sums[range] == inside.values.reduce(Hash32.zero, +))
            #expect(index.counts[range] == inside.count)
        }
    }

    @Test func theFreshLeafFastPathEncodesLikeTheGeneralOne() {
        let device = Fixtures.device(3)
        let timestamp = HybridTimestamp(milliseconds: 123_456, logical: 7)
        let record = CausalRecord(
            key: "k", vector: VersionVector([device: 99]),
            versions: [CausalVersion(dot: Dot(device: device, counter: 99), timestamp: timestamp, value: [1, 2, 3])])
        #expect(LeafEncoding.freshCausal(key: "k", device: device.bytes, counter: 99, timestamp: timestamp, value: [1, 2, 3]) == LeafEncoding.causal(record))
    }

    @Test func equalContentReachedInAnyOrderHasEqualDigests() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (fleet[0], fleet[1])
        try a.causal("notes").put("x", [1])
        try a.causal("notes").put("y", [2])
        try a.log("memory").append(group: "g", body: [3])
        try a.lww("flags").put("f", [4])
        try a.appendOnly("sealed").put("s", [5])
        try b.causal("notes").put("z", [9])
        try b.causal("notes").delete("z")
        #expect(try a.digest(of: "notes") != b.digest(of: "notes"))
        for record in try a.causal("notes").records().reversed() { try b.causal("notes").apply(record) }
        for event in try a.log("memory").events() { try b.log("memory").apply(event) }
        for record in try a.lww("flags").records() { try b.lww("flags").apply(record) }
        for record in try a.appendOnly("sealed").records() { try b.appendOnly("sealed").apply(record) }
        for name in ["notes", "memory", "flags", "sealed"] { #expect(try a.digest(of: name) == b.digest(of: name), "\(name)") }
    }

    @Test func tombstonesAreNotLeaves() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        try notes.put("keep", [1])
        let before = try replica.digest(of: "notes")
        try notes.put("gone", [2])
        #expect(try replica.digest(of: "notes") != before)
        try notes.delete("gone")
        #expect(try replica.digest(of: "notes") == before)
        #expect(try notes.tombstoneCount() == 1)
    }

    @Test func aRolledBackBatchLeavesTheDigestAsItWas() throws {
        struct Abort: Error {}
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        let memory = try replica.log("memory")
        let emptyLog = try replica.digest(of: "memory")
        try notes.put("a", [1])
        let before = try replica.digest(of: "notes")
        let tombstonesBefore = try notes.tombstoneFingerprint()
        #expect(throws: Abort.self) {
            try replica.write {
                try notes.put("b", [2])
                try notes.delete("a")
                try memory.append(group: "g", body: [1])
                throw Abort()
            }
        }
        #expect(try replica.digest(of: "notes") == before)
        #expect(try notes.tombstoneFingerprint() == tombstonesBefore)
        #expect(try replica.digest(of: "memory") == emptyLog)
    }

    @Test func aLocalNamespaceHasNoDigest() throws {
        let replica = try Fixtures.memoryReplica()
        try replica.local("cache").put("k", [1])
        #expect { _ = try replica.digest(of: "cache") } throws: { ($0 as? ReplicaError)?.code == .invalidName }
    }

    /// The incremental digest always equals one rebuilt from the stored rows, and
    /// survives reopening the store.
    @Test(arguments: 0..<12)
    func theIncrementalDigestMatchesARebuildAfterRandomWork(seed: UInt64) throws {
        let directory = try TemporaryDirectory()
        var generator = SeededGenerator(seed: seed)
        let fleet = try TestFleet(count: 2, seed: seed)
        let replica = try Fixtures.replica(in: directory, account: fleet.account, device: fleet.devices[0])
        let keys = (0..<20).map { "k\($0)" }
        for _ in 0..<200 {
            let key = keys.randomElement(using: &generator)!
            switch Int.random(in: 0..<9, using: &generator) {
            case 0, 1: try replica.causal("notes").put(key, [UInt8.random(in: 0...255, using: &generator)])
            case 2: try replica.causal("notes").delete(key)
            case 3: try replica.lww("flags").put(key, [1])
            case 4: try replica.lww("flags").delete(key)
            case 5:
                if try !replica.log("memory").isBuried(key) { try replica.log("memory").append(group: key, body: [2]) }
            case 6: try replica.log("memory").bury(key)
            case 7:
                // A remote edit, sometimes concurrent with local ones.
                let other = try fleet[1].causal("notes")
                try other.put(key, [UInt8.random(in: 0...255, using: &generator)])
                try replica.causal("notes").apply(try #require(try other.record(key)))
            default:
                _ = try? replica.appendOnly("sealed").put(key, [3])
            }
        }
        var digests: [String: Hash32] = [:]
        for name in ["notes", "flags", "memory", "sealed"] {
            let declaration = try replica.declaration(of: name)
            let rebuilt = try replica.rebuiltDigest(declaration)
            let kept = try #require(replica.digestState(declaration))
            #expect(rebuilt.index.totalSum == kept.index.totalSum, "seed \(seed) \(name)")
            #expect(rebuilt.index.totalCount == kept.index.totalCount, "seed \(seed) \(name)")
            digests[name] = try replica.digest(of: name)
        }
        let reopened = try Replica.open(at: directory.file("device.stele"))
        for (name, digest) in digests { #expect(try reopened.digest(of: name) == digest, "seed \(seed) \(name)") }
    }
}
