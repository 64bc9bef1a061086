import Foundation
import Testing
import TestSupport
@testable import Stele

/// The anchor (001 §7): `decide`, the sealed file, and every way its bytes can be wrong.
@Suite struct AnchorTests {
    static let account = Fixtures.account()
    static let key = AccountKey.generate()

    static func anchor(generation: UInt64, snapshot: String = "the account's rows") throws -> Anchor {
        var generator = SeededGenerator(seed: generation)
        let header = AnchorHeader(
            account: account, generation: generation, round: RoundNonce.generate(using: &generator),
            digest: try Hash32(bytes: (0..<32).map { UInt8($0) &+ UInt8(truncatingIfNeeded: generation) }))
        return Anchor(header: header, snapshot: Array(snapshot.utf8))
    }

    // MARK: - decide (001 §7)

    @Test func decideReadsAnAnchorAheadAsARollBack() {
        #expect(AnchorDecision.decide(local: 3, anchor: nil) == .noAnchor)
        #expect(AnchorDecision.decide(local: 0, anchor: nil) == .noAnchor)
        #expect(AnchorDecision.decide(local: 3, anchor: 3) == .current)
        #expect(AnchorDecision.decide(local: 4, anchor: 3) == .current)
        #expect(AnchorDecision.decide(local: 2, anchor: 3) == .rolledBack(to: 3))
        #expect(AnchorDecision.decide(local: 0, anchor: 1) == .rolledBack(to: 1))
    }

    // MARK: - Sealing

    @Test func sealingRoundTripsAndRefusesAnythingElse() throws {
        let plaintext = Array("snapshot".utf8)
        let sealed = Sealing.seal(plaintext, key: Self.key, associated: [1, 2, 3])
        #expect(sealed.count == plaintext.count + Sealing.overhead)
        #expect(Sealing.open(sealed[...], key: Self.key, associated: [1, 2, 3]) == plaintext)
        // Fresh nonces: the same plaintext never seals to the same bytes.
        #expect(Sealing.seal(plaintext, key: Self.key, associated: [1, 2, 3]) != sealed)
        #expect(Sealing.open(sealed[...], key: AccountKey.generate(), associated: [1, 2, 3]) == nil)
        #expect(Sealing.open(sealed[...], key: Self.key, associated: [1, 2, 4]) == nil)
        #expect(Sealing.open(sealed[...], key: Self.key, associated: []) == nil)
        for index in sealed.indices {
            var flipped = sealed
            flipped[index] ^= 0x01
            #expect(Sealing.open(flipped[...], key: Self.key, associated: [1, 2, 3]) == nil, "bit flipped at \(index)")
        }
        for count in 0..<sealed.count { #expect(Sealing.open(sealed.prefix(count), key: Self.key, associated: [1, 2, 3]) == nil) }
        // An empty snapshot seals and opens too.
        #expect(Sealing.open(Sealing.seal([], key: Self.key, associated: [])[...], key: Self.key, associated: []) == [])
    }

    @Test func sealingMatchesAKnownAnswer() throws {
        // NIST GCM test vector (AES-256, 96-bit IV, no associated data): proves the
        // construction is plain AES-256-GCM and not something that merely round-trips.
        let key = try AccountKey(bytes: Hex.decode("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")!)
        let nonce = Hex.decode("cafebabefacedbaddecaf888")!
        let plaintext = Hex.decode(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255")!
        let sealed = Sealing.seal(plaintext, key: key, associated: [], nonce: nonce)
        #expect(
            Hex.encode(sealed.dropFirst(Sealing.nonceCount))
                == "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad"
                + "b094dac5d93471bdec1a502270e3cc6c")
    }

    // MARK: - The file

    @Test func anAnchorRoundTripsThroughItsFileAndItsHeaderNeedsNoKey() throws {
        let anchor = try Self.anchor(generation: 7)
        let bytes = AnchorFile.encode(anchor, key: Self.key)
        #expect(try AnchorFile.header(bytes) == anchor.header)
        #expect(try AnchorFile.decode(bytes, key: Self.key) == anchor)
        // The header is readable in the clear, at a fixed place.
        #expect(Array(bytes.prefix(8)) == Array("STELEANC".utf8))
        #expect(Array(bytes[25..<33]) == [0, 0, 0, 0, 0, 0, 0, 7])
    }

    @Test func damagedAnchorFilesAreTypedErrors() throws {
        let bytes = AnchorFile.encode(try Self.anchor(generation: 2), key: Self.key)
        func code(_ bytes: [UInt8]) -> AnchorError.Code? {
            do {
                _ = try AnchorFile.decode(bytes, key: Self.key)
                return nil
            } catch let error as AnchorError {
                return error.code
            } catch {
                return nil
            }
        }
        #expect(code(Array(bytes.prefix(AnchorFile.headerCount + 10))) == .damaged)
        #expect(code([]) == .damaged)
        #expect(code(Array(repeating: 0x41, count: 200)) == .damaged)
        var newer = bytes
        newer[8] = 2
        #expect(code(newer) == .newerFormat)
        var older = bytes
        older[8] = 0
        #expect(code(older) == .damaged)
        // A header edited on the substrate (here: the generation) no longer opens the body.
        var edited = bytes
        edited[32] ^= 0x04
        #expect(try AnchorFile.header(edited).generation == 2 ^ 4)
        #expect(code(edited) == .notAuthentic)
        // Every bit of the body is covered.
        for index in stride(from: AnchorFile.headerCount, to: bytes.count, by: 3) {
            var flipped = bytes
            flipped[index] ^= 0x80
            #expect(code(flipped) == .notAuthentic, "byte \(index)")
        }
        #expect(code(bytes.dropLast()) == .notAuthentic)
        #expect(throws: AnchorError.self) { try AnchorFile.decode(bytes, key: AccountKey.generate()) }
    }

    // MARK: - The directory store

    @Test func theDirectoryStoreReplacesItsAnchorWhole() throws {
        let directory = try TemporaryDirectory("anchor")
        let store = DirectoryAnchorStore(directory: directory.file("drive"))
        #expect(try store.header(of: Self.account) == nil)
        #expect(try store.read(Self.account, key: Self.key) == nil)
        let first = try Self.anchor(generation: 1)
        try store.write(first, key: Self.key)
        #expect(try store.header(of: Self.account) == first.header)
        let second = try Self.anchor(generation: 2, snapshot: "later")
        try store.write(second, key: Self.key)
        #expect(try store.read(Self.account, key: Self.key) == second)
        // No temporary file is left behind.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.file("drive")).count == 1)
        // Another account's anchor is not this one's.
        #expect(try store.header(of: Fixtures.account(7)) == nil)
    }

    /// A generation is written by one round only (seed 370010): a higher one or the
    /// same round again replaces, another round's of the same generation and a
    /// lower one do not.
    @Test func aGenerationIsWrittenByOneRoundOnly() throws {
        let stored = try Self.anchor(generation: 5).header
        var generator = SeededGenerator(seed: 99)
        let otherRound = AnchorHeader(account: stored.account, generation: 5, round: RoundNonce.generate(using: &generator), digest: stored.digest)
        #expect(stored.mayReplace(nil))
        #expect(stored.mayReplace(stored))
        #expect(try Self.anchor(generation: 6).header.mayReplace(stored))
        #expect(!otherRound.mayReplace(stored))
        #expect(!(try Self.anchor(generation: 4).header.mayReplace(stored)))
        #expect(throws: Never.self) { try AnchorFile.checkReplaces(stored, with: stored) }
        #expect { try AnchorFile.checkReplaces(stored, with: otherRound) } throws: { ($0 as? AnchorError)?.code == .superseded }
    }

    /// Every store keeps the rule as a write lands: the directory store, the memory
    /// store and the memory store as a substrate; what it refuses leaves the stored anchor as it was.
    @Test func theStoresRefuseAnotherRoundsAnchorOfTheirGeneration() throws {
        let directory = try TemporaryDirectory("anchor")
        let committed = try Self.anchor(generation: 5, snapshot: "after round B")
        var generator = SeededGenerator(seed: 99)
        let late = Anchor(
            header: AnchorHeader(account: Self.account, generation: 5, round: RoundNonce.generate(using: &generator), digest: committed.header.digest),
            snapshot: Array("round A's, from before the delete".utf8))
        let stores: [any AnchorStore] = [DirectoryAnchorStore(directory: directory.file("drive")), MemoryAnchorStore()]
        for store in stores {
            try store.write(committed, key: Self.key)
            #expect { try store.write(late, key: Self.key) } throws: { ($0 as? AnchorError)?.code == .superseded }
            #expect { try store.write(try Self.anchor(generation: 4), key: Self.key) } throws: { ($0 as? AnchorError)?.code == .superseded }
            #expect(try store.read(Self.account, key: Self.key) == committed)
            let next = try Self.anchor(generation: 6)
            try store.write(next, key: Self.key)
            #expect(try store.read(Self.account, key: Self.key) == next)
        }
        let substrate = MemoryAnchorStore()
        try substrate.write(committed, key: Self.key)
        var outcome: Result<Void, AnchorError>?
        substrate.writeAnchor(AnchorFile.encode(late, key: Self.key), of: Self.account) { outcome = $0 }
        guard case .failure(let error) = outcome else { Issue.record("the late write landed: \(String(describing: outcome))"); return }
        #expect(error.code == .superseded)
        #expect(try substrate.read(Self.account, key: Self.key) == committed)
    }

    @Test func theDirectoryStoreNamesWhatIsWrong() throws {
        let directory = try TemporaryDirectory("anchor")
        let store = DirectoryAnchorStore(directory: directory.path)
        // An anchor of another account, put under this account's name.
        let other = Fixtures.account(9)
        let foreign = Anchor(
            header: AnchorHeader(account: other, generation: 3, round: try RoundNonce(bytes: [UInt8](repeating: 1, count: 16)), digest: .zero),
            snapshot: [])
        try Data(AnchorFile.encode(foreign, key: Self.key)).write(to: URL(fileURLWithPath: store.path(of: Self.account)))
        #expect(throws: AnchorError.self) { try store.header(of: Self.account) }
        do {
            _ = try store.header(of: Self.account)
        } catch let error as AnchorError {
            #expect(error.code == .accountMismatch)
            #expect(error.description.contains(other.description))
        }
        // Garbage under the anchor's name.
        try Data("not an anchor".utf8).write(to: URL(fileURLWithPath: store.path(of: Self.account)))
        do {
            _ = try store.read(Self.account, key: Self.key)
            Issue.record("garbage read as an anchor")
        } catch let error as AnchorError {
            #expect(error.code == .damaged)
        }
        // A directory where the file should go: the write fails and says so.
        let blocked = DirectoryAnchorStore(directory: directory.file("blocked"))
        try FileManager.default.createDirectory(atPath: blocked.path(of: Self.account), withIntermediateDirectories: true)
        do {
            try blocked.write(try Self.anchor(generation: 1), key: Self.key)
            Issue.record("a write over a directory succeeded")
        } catch let error as AnchorError {
            #expect(error.code == .unavailable)
        }
    }

    @Test func aSiblingsSnapshotIsDeflatedSealedAndOpensOnlyWithAnAccountKey() throws {
        let replica = try Fixtures.memoryReplica()
        let notes = try replica.causal("notes")
        try replica.write { for index in 0..<300 { try notes.put("note-\(index)", Array(repeating: UInt8(index % 7), count: 200)) } }
        let snapshot = try Snapshot.take(of: replica, generation: 3, knowledge: Knowledge())
        let old = AccountKey.generate()
        let sealed = SealedSnapshot(snapshot, account: replica.account, key: Self.key)
        // Deflated before sealing: far smaller than the snapshot itself.
        #expect(sealed.sealed.count < snapshot.encoded.count / 4)
        #expect(try sealed.open(account: replica.account, keys: [old, Self.key]) == snapshot)
        #expect(throws: AnchorError.self) { _ = try sealed.open(account: replica.account, keys: [old]) }
        #expect(throws: AnchorError.self) { _ = try sealed.open(account: Fixtures.account(77), keys: [Self.key]) }
        // The generation in the clear is bound to the body.
        let relabelled = SealedSnapshot(generation: 4, sealed: sealed.sealed)
        #expect(throws: AnchorError.self) { _ = try relabelled.open(account: replica.account, keys: [Self.key]) }
        var flipped = sealed.sealed
        flipped[flipped.count / 2] ^= 1
        #expect(throws: AnchorError.self) { _ = try SealedSnapshot(generation: 3, sealed: flipped).open(account: replica.account, keys: [Self.key]) }
    }
}
