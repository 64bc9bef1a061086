import Foundation
import Testing
import TestSupport
@testable import Stele

/// The concurrency shape README recommends, compiled under Swift 6 strict
/// concurrency as an app would write it: one actor owns the sync side (its own
/// `Replica` handle and the `FleetNode`); the UI, on the main actor, opens a
/// handle of its own on the same file for its reads and writes, and tells the
/// actor after a write (or lets its next advertisement find it). Both handles
/// share the device's key store, so neither reuses the other's stamps.
actor SyncEngine {
    private let replica: Replica
    private var node: FleetNode

    init(path: String, keys: String, account: AccountID, identity: DeviceIdentity, peer: DeviceID) throws {
        replica = try Replica.open(at: path, account: account, device: identity.deviceID, options: Replica.Options(stampFloor: FileKeyStore(path: keys)))
        node = try FleetNode(
            replica: replica, identity: identity, roster: [identity.deviceID, peer], accountKeys: [], random: SystemRandomNumberGenerator())
    }

    /// What the node would advertise now.
    func advertisement() throws -> Advertisement { try node.advertisement() }

    /// Where the engine's monotonic clock starts.
    private let started = ContinuousClock.now

    /// Milliseconds on the monotonic clock: what every input carries.
    private var now: Int64 {
        let elapsed = ContinuousClock.now - started
        return elapsed.components.seconds * 1_000 + elapsed.components.attoseconds / 1_000_000_000_000_000
    }

    /// The app wrote (through any handle): the node advertises after its debounce.
    func localChange() -> [FleetOutput] { node.handle(.localChange, at: now) }

    func fire(_ timer: FleetTimer) -> [FleetOutput] { node.handle(.timer(timer), at: now) }
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
        _ = await sync.localChange()
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
        let sync = try SyncEngine(path: path, keys: keys, account: Fixtures.account(), identity: identity, peer: Fixtures.device(2))
        let model = try NotesModel(path: path, keys: keys, account: Fixtures.account(), device: identity.deviceID, sync: sync)
        try await model.add("groceries", "milk")
        #expect(try model.text("groceries") == "milk")
        let advertised = try await sync.advertisement()
        #expect(advertised.roots.first { $0.namespace == "notes" }?.digest == (try model.notesDigest()))
        // After the debounce the actor's node sends that advertisement to the peer.
        let outputs = await sync.fire(.changeDebounce)
        #expect(outputs.contains { if case .send(let to, _) = $0 { to == Fixtures.device(2) } else { false } })
    }
}
