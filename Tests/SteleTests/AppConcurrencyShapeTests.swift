import Foundation
import Testing
import TestSupport
@testable import Stele

/// The concurrency shape README recommends, compiled under Swift 6 strict
/// concurrency as an app would write it: one actor owns the sync side (its own
/// `Replica` handle and the `FleetDriver`, whose environment it serves on its
/// own executor); the UI, on the main actor, opens a handle of its own on the
/// same file for its reads and writes, and tells the actor after a write (or
/// lets its next advertisement find it). Both handles share the device's key
/// store, so neither reuses the other's stamps.
actor SyncEngine {
    /// The actor's side of the world: frames it would send, timers it would arm.
    /// An app's sends bytes over its transport and arms timers on its executor.
    final class Environment: FleetTransport, FleetScheduler {
        var sent: [DeviceID] = []
        var now: Int64 = 0
        final class Timer: FleetScheduledTimer {
            var cancelled = false
            func cancel() { cancelled = true }
        }
        var scheduled: [(deadline: Int64, timer: Timer, action: () -> Void)] = []
        var monotonicMilliseconds: Int64 { now }
        func send(_ bytes: [UInt8], from sender: DeviceID, to recipient: DeviceID) { sent.append(recipient) }
        func schedule(afterMilliseconds milliseconds: Int64, _ action: @escaping () -> Void) -> any FleetScheduledTimer {
            let timer = Timer()
            scheduled.append((now + milliseconds, timer, action))
            return timer
        }
        func assertOnOwner() {}

        /// Moves the clock on by `milliseconds`, firing what comes due in order.
        func advance(by milliseconds: Int64) {
            let end = now + milliseconds
            while let next = scheduled.enumerated().filter({ !$0.element.timer.cancelled && $0.element.deadline <= end }).min(by: { $0.element.deadline < $1.element.deadline }) {
                scheduled.remove(at: next.offset)
                now = next.element.deadline
                next.element.action()
            }
            now = end
        }
    }

    private let environment = Environment()
    private let driver: FleetDriver

    init(path: String, keys: String, account: AccountID, identity: DeviceIdentity, peer: DeviceIdentity) throws {
        let keyStore = FileKeyStore(path: keys)
        var roster = try Roster.founding(account: account, by: identity)
        try roster.append(try RosterChange.approval(of: peer.deviceID, signingKey: try peer.signingKey(), by: identity, account: account, index: roster.version))
        try keyStore.save(KeyRing(identity: identity, accountKeys: [1: AccountKey.generate()], roster: roster))
        let replica = try Replica.open(at: path, account: account, device: identity.deviceID, options: Replica.Options(stampFloor: keyStore))
        let directory = MemoryDirectory()
        try directory.found(roster)
        let driver = try FleetDriver(
            replica: replica, identity: identity, keyStore: keyStore,
            environment: FleetEnvironment(transport: environment, scheduler: environment, anchors: MemoryAnchorStore(), directory: directory))
        driver.start()
        self.driver = driver
    }

    /// What the node would advertise now.
    func advertisement() throws -> Advertisement { try driver.node.advertisement() }

    /// The app wrote through its own handle: the driver's node advertises after its debounce.
    func localChange() { driver.nudge() }

    /// Lets `milliseconds` pass; returns the devices frames went to meanwhile.
    func advance(by milliseconds: Int64) -> [DeviceID] {
        let before = environment.sent.count
        environment.advance(by: milliseconds)
        return Array(environment.sent[before...])
    }
}

/// The UI's model: main-actor state over its own handle.
@MainActor final class NotesModel {
    private let replica: Replica
    private let sync: SyncEngine

    init(path: String, keys: String, account: AccountID, device: DeviceID, sync: SyncEngine) throws {
        replica = try Replica.open(at: path, account: account, device: device, options: Replica.Options(stampFloor: FileKeyStore(path: keys)))
        self.sync = sync
    }

    func add(_ key: String, _ text: String) async throws {
        try replica.causal("notes").put(key, Array(text.utf8))
        await sync.localChange()
    }

    func text(_ key: String) throws -> String? { try replica.causal("notes").get(key).map { String(decoding: $0, as: UTF8.self) } }

    func notesDigest() throws -> Hash32 { try replica.digest(of: "notes") }
}

@Suite struct AppConcurrencyShapeTests {
    @Test @MainActor func aMainActorModelWritesAndTheSyncActorAdvertisesIt() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        let keys = directory.file("device.keys")
        let identity = Fixtures.identity(1)
        _ = try Replica.create(at: path, account: Fixtures.account(), device: identity.deviceID, options: Replica.Options(stampFloor: FileKeyStore(path: keys)))
        let sync = try SyncEngine(path: path, keys: keys, account: Fixtures.account(), identity: identity, peer: Fixtures.identity(2))
        let model = try NotesModel(path: path, keys: keys, account: Fixtures.account(), device: identity.deviceID, sync: sync)
        try await model.add("groceries", "milk")
        #expect(try model.text("groceries") == "milk")
        let advertised = try await sync.advertisement()
        #expect(advertised.roots.first { $0.namespace == "notes" }?.digest == (try model.notesDigest()))
        // After the debounce (250 ms, well before the periodic 30 s) the actor's node sends it to the peer.
        let recipients = await sync.advance(by: FleetConfiguration().changeDebounceMilliseconds)
        #expect(recipients.contains(Fixtures.device(2)))
    }
}
