import Foundation
import Testing
import TestSupport
@testable import Stele

/// DESIGN §4: a device's own counter is hybrid, `max(current + 1, wall-clock ms)`,
/// so a device restored from an old backup never reuses a counter it had used.
@Suite struct HybridCounterTests {
    @Test func theOwnCounterFollowsTheWallClockAndNeverRepeats() throws {
        let clock = ManualWallClock(milliseconds: 5_000)
        let replica = try Fixtures.memoryReplica(clock: clock)
        let notes = try replica.causal("notes")
        #expect(try notes.put("a", [1]).counter == 5_000)
        // Same millisecond: current + 1.
        #expect(try notes.put("b", [1]).counter == 5_001)
        clock.advance(byMilliseconds: 10_000)
        #expect(try notes.put("a", [2]).counter == 15_000)
        // The wall clock stepping back does not pull the counter back.
        clock.advance(byMilliseconds: -60_000)
        #expect(try notes.put("a", [3]).counter == 15_001)
    }

    /// Restores the replica file from `backup` the way an OS restore does: the
    /// device's files are replaced while the app is not running.
    private func restore(_ path: String, from backup: String) throws {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        try FileManager.default.copyItem(atPath: backup, toPath: path)
    }

    @Test func countersNeverRepeatAcrossARestoreOnceTheWallClockMovedOn() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualWallClock(milliseconds: 1_000_000)
        let path = directory.file("device.stele")
        let account = Fixtures.account()
        let device = Fixtures.device(1)
        var used: Set<UInt64> = []
        do {
            let replica = try Fixtures.replica(in: directory, account: account, device: device, clock: clock)
            let notes = try replica.causal("notes")
            for index in 0..<20 { used.insert(try notes.put("k\(index % 3)", [UInt8(index)]).counter) }
            try replica.backup(to: directory.file("backup.stele"))
            // A burst after the backup: counters run ahead of the wall clock.
            for index in 0..<1_000 { used.insert(try notes.put("k\(index % 5)", [UInt8(index % 256)]).counter) }
            clock.advance(byMilliseconds: 30_000)
            for index in 0..<10 { used.insert(try notes.put("late\(index)", [1]).counter) }
        }
        #expect(used.count == 1_030)

        try restore(path, from: directory.file("backup.stele"))
        // The restore happens later: the wall clock has moved on (an hour here).
        clock.advance(byMilliseconds: 3_600_000)
        let restored = try Replica.open(at: path, account: account, device: device, options: Replica.Options(clock: clock))
        let notes = try restored.causal("notes")
        for index in 0..<50 {
            let counter = try notes.put("after\(index)", [1]).counter
            #expect(!used.contains(counter), "counter \(counter) was used before the restore")
            #expect(counter > used.max()!)
        }
    }

    @Test func aCounterASiblingSawIsNeverReusedEvenWithAStoppedClock() throws {
        let fleet = try TestFleet(count: 2)
        let (a, b) = (fleet[0], fleet[1])
        // A writes a burst far ahead of its wall clock and B learns of it.
        for index in 0..<100 { try a.causal("notes").put("k", [UInt8(index)]) }
        let record = try #require(try a.causal("notes").record("k"))
        try b.causal("notes").apply(record)
        let highest = record.vector[a.device]

        // A "forgets" (a fresh store standing in for a restore) with no wall-clock progress,
        // then hears from B before writing: its next counter exceeds what B knew.
        let restored = try Fixtures.memoryReplica(account: fleet.account, device: a.device, clock: fleet.clocks[0])
        let echoed = try #require(try b.causal("notes").record("k"))
        try restored.causal("notes").apply(echoed)
        #expect(try restored.causal("notes").put("other", [1]).counter > highest)
    }

    @Test func countersSurviveReopening() throws {
        let directory = try TemporaryDirectory()
        let clock = ManualWallClock(milliseconds: 100)
        var last: UInt64 = 0
        do {
            let replica = try Fixtures.replica(in: directory, clock: clock)
            for _ in 0..<10 { last = try replica.causal("notes").put("k", [1]).counter }
        }
        let reopened = try Replica.open(at: directory.file("device.stele"), options: Replica.Options(clock: clock))
        #expect(try reopened.causal("notes").put("k", [2]).counter == last + 1)
    }
}
