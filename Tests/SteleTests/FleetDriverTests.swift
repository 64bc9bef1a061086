import Foundation
import Testing
import TestSupport
@testable import Stele
import SteleSQL

/// The driver every runtime runs (``FleetDriver``): timers, the anchor, the
/// directory and the change feed, in the in-memory environment and behind
/// recording doubles where a test needs to see one call.
@Suite struct FleetDriverTests {
    /// The README's "Using the library" example, as written there.
    @Test func twoDevicesSyncThroughTheDriver() throws {
        let fleet = MemoryFleet()
        let account = AccountID.generate()
        let phone = try fleet.addDevice(account: account)
        let laptop = try fleet.addDevice(account: account)
        for device in [phone, laptop] { try device.replica.declare("notes", .causal) }

        try phone.replica.causal("notes").put("groceries", Array("milk".utf8))
        fleet.run(forMilliseconds: 1_000)
        #expect(try laptop.replica.causal("notes").get("groceries") == Array("milk".utf8))

        try laptop.replica.causal("notes").delete("groceries")
        fleet.run(forMilliseconds: 60_000)
        #expect(try phone.replica.causal("notes").get("groceries") == nil)
        // Both are on one roster, hold one account key, and the round collected the tombstone.
        #expect(phone.node.roster == laptop.node.roster)
        #expect(phone.node.accountKeys == laptop.node.accountKeys && phone.node.accountKeys.count == 1)
        #expect(phone.replica.generation == 1 && laptop.replica.generation == 1)
        #expect(try phone.replica.report().namespaces.reduce(0) { $0 + $1.tombstones } == 0)
    }

    /// A scheduler that records what it was asked and fires only when told.
    final class RecordingScheduler: FleetScheduler, FleetTransport {
        final class Timer: FleetScheduledTimer {
            let delay: Int64
            let action: () -> Void
            var cancelled = false
            init(_ delay: Int64, _ action: @escaping () -> Void) {
                self.delay = delay
                self.action = action
            }
            func cancel() { cancelled = true }
        }
        var timers: [Timer] = []
        var sent: [(to: DeviceID, bytes: [UInt8])] = []
        var monotonicMilliseconds: Int64 = 0
        func schedule(afterMilliseconds milliseconds: Int64, _ action: @escaping () -> Void) -> any FleetScheduledTimer {
            let timer = Timer(milliseconds, action)
            timers.append(timer)
            return timer
        }
        func assertOnOwner() {}
        func send(_ bytes: [UInt8], from sender: DeviceID, to recipient: DeviceID) { sent.append((recipient, bytes)) }
        /// Devices this transport says it cannot reach now.
        var unreachable: Set<DeviceID> = []
        func mayCarry(from sender: DeviceID, to recipient: DeviceID) -> Bool { !unreachable.contains(recipient) }
    }

    /// One sealed driver on a recording scheduler, with a sibling on its roster.
    static func recorded() throws -> (FleetDriver, RecordingScheduler, MemoryFleet) {
        let fleet = MemoryFleet()
        let recorder = RecordingScheduler()
        let account = Fixtures.account(7)
        let (identity, sibling) = (Fixtures.identity(71), Fixtures.identity(72))
        var roster = try Roster.founding(account: account, by: identity)
        try roster.append(try RosterChange.approval(of: sibling.deviceID, signingKey: try sibling.signingKey(), by: identity, account: account, index: roster.version))
        try fleet.directory.found(roster)
        let keys = MemoryKeyStore(KeyRing(identity: identity, accountKeys: [1: AccountKey.generate()]))
        let replica = try Fixtures.memoryReplica(account: account, device: identity.deviceID, clock: ManualWallClock())
        try replica.declare("notes", .causal)
        let environment = FleetEnvironment(transport: recorder, scheduler: recorder, anchors: fleet.anchors, directory: fleet.directory)
        let driver = try FleetDriver(replica: replica, identity: identity, keyStore: keys, environment: environment, random: SeededGenerator(seed: 7))
        driver.refreshDirectory()
        driver.start()
        return (driver, recorder, fleet)
    }

    @Test func armingATimerAgainReplacesItAndAReplacedOrCancelledTimerNeverReachesTheNode() throws {
        let (driver, recorder, _) = try Self.recorded()
        let first = try #require(recorder.timers.last { $0.delay == 30_000 })
        #expect(driver.armedTimers[.advertise] == 30_000)
        recorder.monotonicMilliseconds = 30_000
        first.action()
        // Fired: the node advertised and armed the next one, with a new deadline.
        #expect(driver.armedTimers[.advertise] == 60_000)
        let second = try #require(recorder.timers.last { $0.delay == 30_000 })
        #expect(second !== first)
        // The node re-arms on a second firing of the same one too: it replaces, the old is cancelled.
        driver.handle(.timer(.advertise))
        #expect(second.cancelled)
        let sentBefore = recorder.sent.count
        // A scheduler that fires a replaced timer anyway reaches nothing.
        second.action()
        first.action()
        #expect(recorder.sent.count == sentBefore)
    }

    /// A frame the transport says it cannot carry now is neither sent nor sealed:
    /// no salt is drawn for it, so the next frame is sealed with the salt it would
    /// have had if the dropped one had never been made.
    @Test func aFrameTheTransportCannotCarryIsNeitherSealedNorSent() throws {
        let (driver, recorder, _) = try Self.recorded()
        let (twin, twinRecorder, _) = try Self.recorded()
        let sibling = Fixtures.identity(72).deviceID
        recorder.unreachable = [sibling]
        let sentBefore = recorder.sent.count
        driver.handle(.timer(.advertise))
        #expect(recorder.sent.count == sentBefore, "nothing for a sibling out of reach")
        recorder.unreachable = []
        driver.handle(.timer(.advertise))
        twin.handle(.timer(.advertise))
        let (frame, twinFrame) = (try #require(recorder.sent.last), try #require(twinRecorder.sent.last))
        #expect(frame.to == sibling && twinFrame.to == sibling)
        // The salt follows the version byte and the recipient's id.
        let salt = { (bytes: [UInt8]) in Array(bytes[(1 + DeviceID.byteCount)..<(1 + DeviceID.byteCount + SiblingChannel.saltCount)]) }
        #expect(salt(frame.bytes) == salt(twinFrame.bytes))
    }

    @Test func aStoppedDriverCancelsItsTimersAndHearsNothingMore() throws {
        let (driver, recorder, _) = try Self.recorded()
        let armed = recorder.timers.filter { !$0.cancelled }
        #expect(!armed.isEmpty)
        driver.stop()
        #expect(armed.allSatisfy { $0.cancelled })
        #expect(driver.armedTimers.isEmpty)
        let (sentBefore, scheduledBefore) = (recorder.sent.count, recorder.timers.count)
        for timer in armed { timer.action() }
        driver.nudge()
        try driver.replica.causal("notes").put("k", [1])
        #expect(recorder.sent.count == sentBefore)
        #expect(recorder.timers.count == scheduledBefore, "a write after the stop queues nothing")
    }

    @Test func aBurstOfLocalWritesIsOneLocalChangeAfterTheWriteReturns() throws {
        let (driver, recorder, _) = try Self.recorded()
        let before = recorder.timers.count
        try driver.replica.write {
            for index in 0..<100 { try driver.replica.causal("notes").put("k\(index)", [UInt8(index)]) }
        }
        try driver.replica.causal("notes").put("one more", [1])
        let queued = recorder.timers[before...].filter { $0.delay == 0 }
        #expect(queued.count == 1, "one local change queued for the burst, not one per row")
        #expect(driver.armedTimers[.changeDebounce] == nil, "nothing reaches the node inside the write")
        queued[0].action()
        #expect(driver.armedTimers[.changeDebounce] != nil)
        // Remote rows applied by sync are no local change.
        let countAfter = recorder.timers.count
        let other = try Fixtures.memoryReplica(account: driver.replica.account, device: Fixtures.device(73), clock: ManualWallClock())
        try other.causal("notes").put("remote", [2])
        for record in try other.causal("notes").records() { try driver.replica.causal("notes").apply(record) }
        #expect(recorder.timers.count == countAfter)
    }

    // MARK: - The anchor

    @Test func theAnchorIsSealedWithTheNewestKeyAndOpenedWithAnyKeyHeldNewestFirst() throws {
        let account = Fixtures.account(8)
        let (old, new, other) = (AccountKey.generate(), AccountKey.generate(), AccountKey.generate())
        var generator = SeededGenerator(seed: 8)
        let anchor = Anchor(
            header: AnchorHeader(account: account, generation: 3, round: RoundNonce.generate(using: &generator), digest: .zero), snapshot: [1, 2, 3])
        let sealed = AnchorFile.encode(anchor, key: new)
        #expect(FleetDriver.opening(.success(sealed), account: account, keys: [old, new]) == .found(anchor))
        #expect(FleetDriver.opening(.success(sealed), account: account, keys: [new, old]) == .found(anchor))
        // No anchor at all, and one that exists but opens with no key held, differ (G5).
        #expect(FleetDriver.opening(.success(nil), account: account, keys: [old]) == AnchorReading.none)
        guard case .unopened(let header, _) = FleetDriver.opening(.success(sealed), account: account, keys: [old, other]), header == anchor.header else {
            Issue.record("an anchor no key opens must be unopened (its header read), never absent")
            return
        }
        guard case .unopened = FleetDriver.opening(.success(sealed), account: account, keys: []) else {
            Issue.record("an anchor with no key held must be unopened")
            return
        }
        guard case .unavailable(let reason) = FleetDriver.opening(.success(sealed), account: Fixtures.account(9), keys: [new]) else {
            Issue.record("another account's anchor must be unavailable")
            return
        }
        #expect(reason.contains("belongs to account"))
        guard case .unavailable = FleetDriver.opening(.success([1, 2, 3]), account: account, keys: [new]) else {
            Issue.record("garbage must be unavailable, never absent")
            return
        }
        #expect(FleetDriver.opening(.failure(AnchorError(.unavailable, "offline")), account: account, keys: [new]) == .unavailable("offline"))
    }

    @Test func aDeviceAloneCollectsAndTheAnchorLandsSealedWithTheRotatedKey() throws {
        let fleet = MemoryFleet()
        let account = AccountID.generate()
        let phone = try fleet.addDevice(account: account)
        let identity = try #require(phone.identity)
        // A rotation: epoch 2 published wrapped for the phone itself.
        let rotated = AccountKey.generate()
        try fleet.directory.publish(try WrappedAccountKey.wrap(rotated, epoch: 2, for: identity.deviceID, by: identity, account: account))
        phone.refreshDirectory()
        #expect(try phone.keyStore?.load()?.accountKeys[2] == rotated, "the unwrapped key is saved in the key store")
        try phone.replica.declare("notes", .causal)
        try phone.replica.causal("notes").put("gone", [1])
        try phone.replica.causal("notes").delete("gone")
        fleet.run(forMilliseconds: 60_000)
        #expect(fleet.anchorWrites == 1)
        #expect(phone.replica.generation == 1)
        let sealed = try #require(fleet.anchors.bytes(of: account))
        let first = try #require(phone.node.accountKeys.first)
        #expect(first != rotated)
        #expect(throws: (any Error).self) { try AnchorFile.decode(sealed, key: first) }
        #expect(try AnchorFile.decode(sealed, key: rotated).header.generation == 1)
    }

    @Test func aFailedAnchorWriteCollectsNothing() throws {
        let fleet = MemoryFleet()
        fleet.anchorPolicy = .fail
        let phone = try fleet.addDevice(account: AccountID.generate())
        try phone.replica.declare("notes", .causal)
        try phone.replica.causal("notes").put("gone", [1])
        try phone.replica.causal("notes").delete("gone")
        fleet.run(forMilliseconds: 60_000)
        #expect(fleet.anchorWrites == 1)
        #expect(phone.replica.generation == 0)
        #expect(try phone.replica.report().namespaces.reduce(0) { $0 + $1.tombstones } == 1)
    }

    // MARK: - The directory

    @Test func aDirectoryServingAForkedRosterIsRefusedWholeAndSaid() throws {
        let (driver, _, fleet) = try Self.recorded()
        var events: [FleetEvent] = []
        driver.onEvent = { events.append($0) }
        let pinned = try #require(try driver.keyStore?.load())
        let rosterBefore = driver.node.roster
        // Another directory holds a roster of the same account founded by someone else.
        let forger = Fixtures.identity(79)
        let forked = MemoryDirectory()
        var roster = try Roster.founding(account: driver.replica.account, by: forger)
        try roster.append(
            try RosterChange.approval(of: Fixtures.device(78), signingKey: try Fixtures.identity(78).signingKey(), by: forger, account: roster.account, index: roster.version))
        try forked.found(roster)
        let forkedDriver = try FleetDriver(
            replica: driver.replica, identity: try #require(driver.identity), keyStore: try #require(driver.keyStore),
            environment: FleetEnvironment(transport: RecordingScheduler(), scheduler: RecordingScheduler(), anchors: fleet.anchors, directory: forked))
        forkedDriver.onEvent = { events.append($0) }
        var outcome: Result<Void, any Error>?
        forkedDriver.refreshRoster { outcome = $0 }
        #expect(throws: RosterError.self) { try outcome?.get() }
        #expect(events.map(\.kind) == [.directoryFailed])
        #expect(try driver.keyStore?.load() == pinned, "nothing of the forked read is saved")
        #expect(forkedDriver.node.roster == rosterBefore, "the node keeps the pinned roster")
    }

    @Test func aContactWhoseRosterCannotBeReadIsLeftOutAndSaid() throws {
        let (driver, _, fleet) = try Self.recorded()
        var events: [FleetEvent] = []
        driver.onEvent = { events.append($0) }
        let contact = Fixtures.account(11)
        try fleet.directory.found(try Roster.founding(account: contact, by: Fixtures.identity(111)))
        driver.contactAccounts = [contact, Fixtures.account(12)]
        var finished = false
        driver.refreshContacts { finished = true }
        #expect(finished)
        #expect(driver.node.contacts.keys.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) } == [contact])
        #expect(events.map(\.kind) == [.directoryFailed])
    }

    /// A full disk (SQLITE_FULL in a node's step): the driver drops the frames
    /// that arrive in the next second unopened (each would ask for a write that
    /// fails the same way), then takes frames again, and the fleet converges
    /// once the disk has room. The pause doubles when the disk is still full.
    @Test func aFullDiskPausesFramesAndTheFleetConvergesOnceThereIsRoom() throws {
        let fleet = MemoryFleet()
        let account = AccountID.generate()
        let phone = try fleet.addDevice(account: account)
        let laptop = try fleet.addDevice(account: account)
        for device in [phone, laptop] { try device.replica.declare("notes", .causal) }
        #expect(fleet.runUntilQuiet())
        let garbage: [UInt8] = Array(repeating: 7, count: 40)
        var fullAt: [Int64] = []
        var refused = 0
        laptop.onEvent = { event in
            if event.kind == .rejectedSeal { refused += 1 }
            guard event.failure?.isDiskFull == true else { return }
            fullAt.append(fleet.now)
            // A frame that arrives within the pause (1 ms later) is dropped unopened.
            if fullAt.count == 1 { fleet.deliver(garbage, from: phone.replica.device, to: laptop.replica.device) }
        }
        var arrivals: [(time: Int64, paused: Bool)] = []
        fleet.intercept = { _, to, _ in
            if to == laptop.replica.device { arrivals.append((fleet.now, laptop.isPausedForDiskFull)) }
            return true
        }
        // The laptop's disk fills: its next three writes fail with SQLITE_FULL.
        let disk = SQLiteFaultPlan()
        disk.fail(.step, with: .full, sqlContains: "INSERT", count: 3)
        laptop.replica.faults = disk
        try phone.replica.causal("notes").put("k", [1])
        fleet.run(forMilliseconds: 120_000)
        let first = try #require(fullAt.first)
        #expect(arrivals.filter(\.paused).map(\.time) == [first + fleet.frameLatencyMilliseconds])
        #expect(laptop.framesDroppedForDiskFull == 1)
        #expect(refused == 0)
        #expect(disk.fired == 3 && fullAt.count == 3)
        // Each failure came after the pause the last one started, twice as long each time.
        let gaps = zip(fullAt, fullAt.dropFirst()).map { $1 - $0 }
        #expect(gaps.count == 2 && gaps[0] >= FleetDriver.diskFullPauseMilliseconds && gaps[1] >= 2 * FleetDriver.diskFullPauseMilliseconds)
        #expect(try laptop.replica.causal("notes").get("k") == [1])
        // With room again, frames are taken in: the same garbage is now opened and refused.
        #expect(!laptop.isPausedForDiskFull)
        fleet.deliver(garbage, from: phone.replica.device, to: laptop.replica.device)
        fleet.run(forMilliseconds: 10)
        #expect(refused == 1)
        #expect(laptop.framesDroppedForDiskFull == 1)
    }

    @Test func memoryFleetRunsUntilQuietAndADetachedDeviceHearsNothingMore() throws {
        let fleet = MemoryFleet()
        let account = AccountID.generate()
        let phone = try fleet.addDevice(account: account)
        let laptop = try fleet.addDevice(account: account)
        for device in [phone, laptop] { try device.replica.declare("notes", .causal) }
        try phone.replica.causal("notes").put("a", [1])
        #expect(fleet.runUntilQuiet())
        #expect(try laptop.replica.causal("notes").get("a") == [1])
        #expect(fleet.driver(of: laptop.replica.device) === laptop)
        fleet.detach(laptop.replica.device)
        #expect(fleet.driver(of: laptop.replica.device) == nil)
        try phone.replica.causal("notes").put("b", [2])
        fleet.run(forMilliseconds: 60_000)
        #expect(try laptop.replica.causal("notes").get("b") == nil)
        // Asked for 40 s of quiet, a fleet advertising every 30 s never has it, and says so.
        let busy = MemoryFleet()
        _ = try busy.addDevice(account: AccountID.generate())
        #expect(!busy.runUntilQuiet(quietMilliseconds: 40_000, limitMilliseconds: 100_000))
    }
}
