import Foundation
import Stele

/// One device of a simulation: its identity, its replica file, its clock (the
/// virtual clock plus its own skew) and the fleet node that syncs it.
public final class SimulatedDevice {
    public let name: String
    public let identity: DeviceIdentity
    public var id: DeviceID { identity.deviceID }
    /// The device's store; replaced when the device crashes or is restored.
    public internal(set) var replica: Replica
    /// Where the store lives.
    public let path: String
    let clock: ManualWallClock
    public internal(set) var node: FleetNode
    /// How far the device's wall clock is off the virtual clock.
    public internal(set) var skewMilliseconds: Int64 = 0
    public internal(set) var isOnline = true
    /// Taken off the roster: it keeps running on its old roster, and every
    /// device on the new one refuses its frames.
    public internal(set) var isRevoked = false
    /// What its fleet node logged, counted by kind (a refused frame, a peer at
    /// another generation, ...).
    public internal(set) var logged: [FleetEvent.Kind: Int] = [:]
    /// Devices whose frames it refused for not being on its roster.
    public internal(set) var refusedSenders: Set<DeviceID> = []
    /// Forced storage faults that fired on its store, across crashes and restores.
    public var storageFaultsFired: Int { firedBeforeReopen + replica.storageFaultsFired }
    var firedBeforeReopen = 0
    /// Every conflict the device's replica reported, as (namespace, key).
    public internal(set) var conflicts: [(namespace: String, key: String)] = []
    /// Its key store (identity and account keys): outside the replica file, so a
    /// restore of the file leaves it as it is, as a keychain would.
    public let keys = MemoryKeyStore()
    /// The simulator's own channel for this device, which knows every device ever
    /// added: it lets the oracle read what frames carry and lets a `tamper` hook
    /// rewrite them. The device's node has its own, gated by the roster.
    var tap: SiblingChannel

    init(name: String, identity: DeviceIdentity, replica: Replica, path: String, clock: ManualWallClock, node: FleetNode) {
        self.name = name
        self.identity = identity
        self.replica = replica
        self.path = path
        self.clock = clock
        self.node = node
        tap = SiblingChannel(identity: identity, account: replica.account)
    }
}
