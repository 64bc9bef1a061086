import Foundation
import Testing
import TestSupport
@testable import Stele

/// The stamp floor (issue 14): raised before anything above it is issued,
/// started above at open, kept outside the replica file; each error path with
/// the input that triggers it.
@Suite struct StampFloorTests {
    /// A key store whose floor cannot be written (a full disk, a locked keychain).
    final class FailingFloorStore: StampFloorStore {
        var floor: StampFloor?
        var failing = false
        func loadStampFloor() throws -> StampFloor? { floor }
        func saveStampFloor(_ floor: StampFloor) throws {
            if failing { throw KeyStoreError(.unavailable, "the keychain is locked") }
            self.floor = floor
        }
    }

    static func replica(_ directory: TemporaryDirectory, _ store: some StampFloorStore, clock: ManualWallClock = ManualWallClock()) throws -> Replica {
        try Replica.openOrCreate(
            at: directory.file("device.stele"), account: Fixtures.account(), device: Fixtures.device(1),
            options: Replica.Options(clock: clock, stampFloor: store))
    }

    @Test func aWriteRaisesTheFloorBeforeIssuingPastIt() throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyStore(path: directory.file("device.keys"))
        let replica = try Self.replica(directory, keys)
        let dot = try replica.causal("notes").put("k", "v".bytes)
        let stamp = try replica.lww("flags").put("k", "v".bytes)
        let floor = try #require(try keys.loadStampFloor())
        #expect(floor.device == replica.device)
        #expect(floor.counter >= dot.counter)
        #expect(floor.clock >= stamp.timestamp)
        // Bytes round-trip; the file is the ring's path with -floor.
        #expect(try StampFloor(decoding: floor.encoded) == floor)
        #expect(FileManager.default.fileExists(atPath: keys.floorPath))
    }

    /// The replica file restored from before the writes: the next dot and stamp
    /// are above everything issued before, because the floor was not restored.
    @Test func aRestoredReplicaStartsAboveTheFloor() throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyStore(path: directory.file("device.keys"))
        let clock = ManualWallClock()
        var issued: (dot: Dot, stamp: WriteStamp)
        do {
            let replica = try Self.replica(directory, keys, clock: clock)
            _ = try replica.causal("notes")
            _ = try replica.lww("flags")
            try replica.backup(to: directory.file("backup.stele"))
            clock.advance(byMilliseconds: -600_000)
            for index in 0..<5 { _ = try replica.causal("notes").put("k", "\(index)".bytes) }
            issued = (try replica.causal("notes").put("k", "last".bytes), try replica.lww("flags").put("k", "last".bytes))
        }
        let path = directory.file("device.stele")
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try FileManager.default.copyItem(atPath: directory.file("backup.stele"), toPath: path)
        let restored = try Self.replica(directory, keys, clock: clock)
        #expect(try restored.causal("notes").get("k") == nil)
        #expect(try restored.causal("notes").put("k", "after".bytes).counter > issued.dot.counter)
        #expect(try restored.lww("flags").put("k", "after".bytes).timestamp > issued.stamp.timestamp)
    }

    /// Without a floor (the broken double: no key store given), the same restore
    /// reissues the very dot issued before: the test above is the floor's doing.
    @Test func withoutAFloorTheRestoredReplicaReissuesADot() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualWallClock()
        let path = directory.file("device.stele")
        let first: Dot
        do {
            let replica = try Replica.create(at: path, account: Fixtures.account(), device: Fixtures.device(1), options: Replica.Options(clock: clock))
            _ = try replica.causal("notes")
            try replica.backup(to: directory.file("backup.stele"))
            clock.advance(byMilliseconds: -600_000)
            first = try replica.causal("notes").put("k", "before".bytes)
        }
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try FileManager.default.copyItem(atPath: directory.file("backup.stele"), toPath: path)
        let restored = try Replica.open(at: path, options: Replica.Options(clock: clock))
        #expect(try restored.causal("notes").put("k", "after".bytes) == first)
    }

    /// A key store that cannot record the floor: the write is refused, typed, and
    /// nothing of it is in the store; once it can, the same write goes through.
    @Test func aFloorThatCannotBeSavedRefusesTheWrite() throws {
        let directory = try TemporaryDirectory()
        let store = FailingFloorStore()
        let replica = try Self.replica(directory, store)
        _ = try replica.causal("notes")
        store.failing = true
        #expect {
            try replica.causal("notes").put("k", "v".bytes)
        } throws: { error in
            (error as? ReplicaError)?.code == .stampFloorUnavailable && "\(error)".contains("the keychain is locked")
        }
        #expect(try replica.causal("notes").get("k") == nil)
        store.failing = false
        try replica.causal("notes").put("k", "v".bytes)
        #expect(try replica.causal("notes").get("k") == "v".bytes)
    }

    @Test func aFloorOfAnotherDeviceIsRefusedAtOpen() throws {
        let directory = try TemporaryDirectory()
        let store = FailingFloorStore()
        store.floor = StampFloor(device: Fixtures.device(2), counter: 5, clock: .zero)
        #expect {
            try Self.replica(directory, store)
        } throws: { error in
            (error as? ReplicaError)?.code == .deviceMismatch
        }
    }

    @Test func aDamagedFloorFileIsATypedErrorNamingTheFile() throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyStore(path: directory.file("device.keys"))
        for bytes in [[UInt8](), Array("STELEFLR".utf8) + [9], Array("not a floor at all".utf8), Array(StampFloor(device: Fixtures.device(1), counter: 1, clock: .zero).encoded.dropLast())] {
            try Data(bytes).write(to: URL(fileURLWithPath: keys.floorPath))
            #expect {
                try keys.loadStampFloor()
            } throws: { error in
                (error as? KeyStoreError)?.code == .damaged && "\(error)".contains(keys.floorPath)
            }
            #expect(throws: KeyStoreError.self) { try Self.replica(directory, keys) }
        }
    }

    /// Two handles raise the floor in turn; neither lowers what the other saved.
    @Test func aSaveNeverLowersAFloorAnotherHandleRaised() throws {
        let directory = try TemporaryDirectory()
        let keys = FileKeyStore(path: directory.file("device.keys"))
        let replica = try Self.replica(directory, keys)
        _ = try replica.causal("notes").put("k", "v".bytes)
        let saved = try #require(try keys.loadStampFloor())
        // Another process raised it far ahead meanwhile.
        let ahead = StampFloor(device: saved.device, counter: saved.counter + 10_000_000, clock: HybridTimestamp(rawValue: saved.clock.rawValue + (1 << 40)))
        try keys.saveStampFloor(ahead)
        replica.reservedFloor = nil
        _ = try replica.causal("notes").put("j", "v".bytes)
        let after = try #require(try keys.loadStampFloor())
        #expect(after.counter >= ahead.counter && after.clock >= ahead.clock)
    }
}
