import Foundation
import Testing
import TestSupport
@testable import Stele

@Suite struct KeyStoreTests {
    func ring() throws -> KeyRing {
        let identity = try DeviceIdentity(privateKey: [UInt8](repeating: 31, count: 32))
        let roster = try Roster.founding(account: Fixtures.account(3), by: identity)
        return KeyRing(identity: identity, accountKeys: [1: AccountKey.generate(), 2: AccountKey.generate()], roster: roster)
    }

    @Test func aFileKeyStoreKeepsTheRingOwnerOnly() throws {
        let directory = try TemporaryDirectory("keys")
        let store = FileKeyStore(path: directory.path + "/device.keys")
        #expect(try store.load() == nil)
        let ring = try ring()
        try store.save(ring)
        #expect(try store.load() == ring)
        #expect(try store.load()?.orderedAccountKeys == [ring.accountKeys[1]!, ring.accountKeys[2]!])
        let attributes = try FileManager.default.attributesOfItem(atPath: store.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        // Saving again replaces the ring whole.
        var rotated = ring
        rotated.insert(AccountKey.generate(), epoch: 3)
        try store.save(rotated)
        #expect(try store.load()?.newestEpoch == 3)
    }

    @Test func aDamagedRingIsATypedErrorThatSaysWhatToDo() throws {
        let directory = try TemporaryDirectory("keys")
        let store = FileKeyStore(path: directory.path + "/device.keys")
        let bytes = try ring().encoded
        for damaged in [Array("not a key ring".utf8), Array(bytes.prefix(20)), Array(bytes.dropLast()), bytes + [0], [UInt8]()] {
            try Data(damaged).write(to: URL(fileURLWithPath: store.path))
            do {
                _ = try store.load()
                Issue.record("a damaged key ring of \(damaged.count) bytes loaded")
            } catch let error as KeyStoreError {
                #expect(error.code == .damaged)
                #expect(error.message.contains(store.path))
                #expect(error.message.contains("join this device again"))
            }
        }
        // A format from a newer build.
        var newer = bytes
        newer[8] = 9
        try Data(newer).write(to: URL(fileURLWithPath: store.path))
        #expect(throws: KeyStoreError.self) { _ = try store.load() }
    }

    @Test func anUnwritableStoreKeepsItsOldRing() throws {
        let directory = try TemporaryDirectory("keys")
        let store = FileKeyStore(path: directory.path + "/missing-folder/device.keys")
        #expect(throws: KeyStoreError.self) { try store.save(try ring()) }
        #expect(try store.load() == nil)
    }

    @Test func theMemoryStoreRoundTrips() throws {
        let store = MemoryKeyStore()
        #expect(try store.load() == nil)
        let ring = try ring()
        try store.save(ring)
        #expect(try store.load() == ring)
        #expect(try KeyRing(decoding: ring.encoded) == ring)
        #expect(try KeyRing(decoding: ring.encoded).roster?.members == [ring.identity.deviceID])
        let bare = KeyRing(identity: ring.identity)
        #expect(try KeyRing(decoding: bare.encoded) == bare)
    }
}
