import Foundation
import Stele

/// Injected faults: crashes, backups and restores, skew, storage failures.
extension Simulation {
    // MARK: - Faults

    /// Counts an injected fault of `kind`.
    public func count(_ kind: String) { statistics.faults[kind, default: 0] += 1 }

    /// Kills `name` mid-step: its in-memory state and the frames in flight to it
    /// are lost; it restarts from its file.
    public func crash(_ name: String) throws {
        let device = try existing(name)
        dropInFlight(to: device)
        try reopen(device)
        count("crash")
        record(.crashed, device: device)
    }

    /// Copies `name`'s store as an OS backup would.
    public func backup(_ name: String, as label: String) throws {
        let device = try existing(name)
        let path = "\(folder)/backups/\(label).stele"
        try? FileManager.default.removeItem(atPath: path)
        try device.replica.backup(to: path)
        // The keychain as it is now too, for a restore that rolls both back (``restore(_:from:withKeys:)``).
        backups[label] = (name, path, now, device.keys.copy(), oracle.forgettingMark)
        record(.backedUp, device: device)
    }

    /// Whether a backup of that name exists.
    public func hasBackup(_ label: String) -> Bool { backups[label] != nil }

    /// Replaces `name`'s store with the backup and restarts it, as an OS restore
    /// does. Its key store, like a keychain, stays as it is, unless `withKeys`:
    /// then it goes back to what it held when the backup was taken, stamp floor
    /// included (the limit ``StampFloor`` states, counted apart by the oracle).
    /// - Throws: ``SimulationInputError`` for a device never added or a backup never taken.
    public func restore(_ name: String, from label: String, withKeys: Bool = false) throws {
        let device = try existing(name)
        guard let backup = backups[label] else { throw SimulationInputError(message: "no backup named \(label); take it with backup D as \(label)") }
        let lostAlready = operationsLostAlready()
        dropInFlight(to: device)
        if withKeys {
            oracle.keysRolledBack(device.id, floor: try device.keys.loadStampFloor())
            device.keys.replaceContents(with: backup.keys.copy())
        }
        try reopen(device) {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: device.path + suffix) }
            try FileManager.default.copyItem(atPath: backup.path, toPath: device.path)
        }
        // A backup is a copy too: what it holds is back in the world.
        oracle.takeBack(knownTo: device.replica, forgottenAfter: backup.forgettingMark)
        forgetOperationsLost(sparing: lostAlready)
        count("restore")
        record(.restored, device: device)
    }

    /// Skews `name`'s wall clock by `milliseconds` against the virtual clock.
    public func skew(_ name: String, byMilliseconds milliseconds: Int64) throws {
        let device = try existing(name)
        device.skewMilliseconds = milliseconds
        syncClocks()
        count("skew")
    }

    /// Makes one of `name`'s next SQLite steps fail with `fault`.
    public func failStorage(_ name: String, with fault: StorageFault, afterSteps: Int = 0) throws {
        guard afterSteps >= 0 else { throw SimulationInputError(message: "a storage fault comes after 0 or more steps, not \(afterSteps)") }
        let device = try existing(name)
        device.replica.injectStorageFault(fault, afterSteps: afterSteps)
        count("storage")
    }

    func dropInFlight(to device: SimulatedDevice) {
        var frames = 0
        let removed = queue.removeAll { event in
            if case .deliver(_, let to, _, _) = event, to == device.id {
                frames += 1
                queued.count(event, -1)
                return true
            }
            if case .timer(let owner, _) = event { return owner == device.id }
            return false
        }
        for sequence in removed { oracle.frameLost(sequence) }
        statistics.framesDroppedInFlight += frames
    }

    /// After a restore or a revocation: the oracle forgets the writes no store on
    /// the roster holds, except those still on frames that can land (sent by a
    /// device on the roster to one on the roster).
    /// - Parameter sparing: what was out of the world before the event (``operationsLostAlready()``).
    func forgetOperationsLost(sparing: Set<Int> = []) {
        let (inFlight, keys) = worldOutsideTheStores()
        oracle.forgetOperationsUnknown(to: devices.map(\.replica), inFlight: inFlight, account: account, keys: keys, sparing: sparing)
    }

    /// What no store on the roster holds and no frame that can land carries, asked
    /// just before a restore or a revocation: the fleet lost it without one, so
    /// that event must not make the oracle forget it (``Oracle/unknownOperations``).
    func operationsLostAlready() -> Set<Int> {
        let (inFlight, keys) = worldOutsideTheStores()
        return oracle.unknownOperations(to: devices.map(\.replica), inFlight: inFlight, account: account, keys: keys)
    }

    /// The frames that can still land (sent by a device on the roster to one on the
    /// roster), and every key the account ever had: a snapshot in flight is sealed with one of them.
    private func worldOutsideTheStores() -> (inFlight: [(id: UInt64, bytes: [UInt8])], keys: [AccountKey]) {
        let roster = self.roster
        let inFlight: [(id: UInt64, bytes: [UInt8])] = queue.entries.compactMap { entry in
            guard case let .deliver(from, to, _, plain) = entry.payload, roster.contains(from), roster.contains(to) else { return nil }
            return (entry.sequence, plain)
        }
        var keys: [AccountKey] = [accountKey]
        for device in everyDevice where device.contact == nil {
            for key in accountKeys(of: device) where !keys.contains(key) { keys.append(key) }
        }
        return (inFlight, keys)
    }

    /// Drops the device's replica and node, optionally changes its file, then
    /// reopens the file and restarts the node.
    func reopen(_ device: SimulatedDevice, whileClosed change: () throws -> Void = {}) throws {
        var options = Replica.Options(
            clock: device.clock, random: SplitMix64(seed: seed ^ device.id.stableSeed ^ UInt64(now)), stampFloor: usesStampFloors ? device.keys : nil)
        options.sqlite = storage.sqlite
        device.firedBeforeReopen += device.replica.storageFaultsFired
        // The process dies: its driver hears nothing more. Release every
        // reference to the store before touching its file.
        device.driver.stop()
        guard let placeholder = device.placeholder else {
            throw SimulationInputError(message: "could not make an in-memory store to hold \(device.name) while its file is closed")
        }
        let environment = SimulatedEnvironment(simulation: self, device: device.id).environment
        device.driver = FleetDriver(unsealed: placeholder, roster: [], accountKeys: [], environment: environment, configuration: configuration, random: SplitMix64(seed: 0))
        device.replica = placeholder
        try change()
        device.replica = try Replica.open(at: device.path, account: device.account, device: device.id, options: options)
        try declareNamespaces(on: device)
        // It starts on the roster its key store pinned, then reads the directory
        // (a revoked device is told nothing: it keeps its old roster).
        device.driver = try FleetDriver(
            replica: device.replica, identity: device.identity, keyStore: device.keys, environment: environment, configuration: configuration,
            random: SplitMix64(seed: seed &+ device.id.stableSeed &+ UInt64(now)),
            anchorRandom: SplitMix64(seed: seed ^ 0xA4C4_0000 ^ device.id.stableSeed &+ UInt64(now)))
        device.driver.keepsSealedPlaintexts = true
        watch(device)
        if !device.isRevoked { try refreshRoster(of: device) }
        device.driver.start()
        // Its contacts' rosters, as at every launch. Nothing changed for the other
        // devices: a sibling's restart is no reason to read the directory again.
        if !device.isRevoked {
            device.driver.contactAccounts = otherAccounts(of: device)
            device.driver.refreshContacts()
        }
    }
}
