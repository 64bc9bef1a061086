import Foundation
import Stele

/// One device of a simulation: its identity, its replica file, its clock (the
/// virtual clock plus its own skew) and the fleet node that syncs it.
public final class SimulatedDevice {
    public let name: String
    public let identity: DeviceIdentity
    /// The contact account the device belongs to (`contact NAME D1 D2`), or
    /// `nil` for a device of the simulation's own account.
    public let contact: String?
    public var id: DeviceID { identity.deviceID }
    /// The device's store; replaced when the device crashes or is restored.
    public internal(set) var replica: Replica
    /// Where the store lives.
    public let path: String
    let clock: ManualWallClock
    /// The driver that runs its fleet node: the one apps run, in the simulated environment.
    public internal(set) var driver: FleetDriver
    /// Its fleet node.
    public var node: FleetNode { driver.node }
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
    /// Its key store (identity, account keys and the stamp floor): outside the
    /// replica file, so a restore of the file leaves it as it is, as a keychain would.
    public let keys: MemoryKeyStore
    /// The simulator's own channel for this device, which knows every device ever
    /// added: it lets the oracle read what frames carry and lets a `tamper` hook
    /// rewrite them. The device's node has its own, gated by the roster.
    var tap: SiblingChannel
    /// The same for frames between this device and another account's devices, by account.
    var contactTaps: [AccountID: SiblingChannel] = [:]
    /// An empty in-memory store the device holds while its file is closed (a
    /// crash, a restore): made once, never written; the stopped driver built on
    /// it for that moment never starts.
    lazy var placeholder: Replica? = try? Replica.create(at: ":memory:", account: account, device: id)

    init(
        name: String, identity: DeviceIdentity, contact: String?, replica: Replica, keys: MemoryKeyStore, path: String, clock: ManualWallClock, driver: FleetDriver
    ) {
        self.name = name
        self.keys = keys
        self.contact = contact
        self.identity = identity
        self.replica = replica
        self.path = path
        self.clock = clock
        self.driver = driver
        tap = SiblingChannel(identity: identity, account: replica.account)
    }

    /// The account the device belongs to.
    public var account: AccountID { tap.account }

    /// Opens a frame sent to this device, from a sibling or a contact's device (the oracle's view).
    func openAny(_ bytes: [UInt8]) -> (sender: DeviceID, frame: [UInt8])? {
        if let opened = try? tap.open(bytes) { return opened }
        for account in contactTaps.keys.sorted(by: { $0.bytes.lexicographicallyPrecedes($1.bytes) }) {
            if let opened = try? contactTaps[account]?.open(bytes) { return opened }
        }
        return nil
    }

    /// Seals a frame for `recipient` as this device would (the `tamper` hook's rewrite).
    func sealAny(_ frame: [UInt8], to recipient: DeviceID) -> [UInt8]? {
        if tap.members.contains(recipient) { return try? tap.seal(frame, to: recipient) }
        for account in contactTaps.keys where contactTaps[account]?.members.contains(recipient) == true {
            return try? contactTaps[account]?.seal(frame, to: recipient)
        }
        return nil
    }
}
