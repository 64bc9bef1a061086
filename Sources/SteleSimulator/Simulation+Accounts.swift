import Foundation
import Stele

/// Devices and accounts: joining, contacts and conversations, revoking and
/// rotating the account key, and every device reading the directory.
extension Simulation {
    // MARK: - Devices

    /// The device of that name, revoked or not.
    public func device(_ name: String) -> SimulatedDevice? { everyDevice.first { $0.name == name } }

    /// The device of that name.
    /// - Throws: ``SimulationInputError`` for a device never added.
    func existing(_ name: String) throws -> SimulatedDevice {
        guard let device = device(name) else { throw SimulationInputError(message: "no device named \(name); add it first") }
        return device
    }

    public var roster: Set<DeviceID> { Set(devices.map(\.id)) }

    /// Adds a device to the account's roster (the others learn of it at once)
    /// and starts it; with `contact`, to that contact account's roster instead.
    @discardableResult
    public func addDevice(_ name: String, contact: String? = nil) throws -> SimulatedDevice {
        guard device(name) == nil else { throw SimulationInputError(message: "a device named \(name) exists already; give each device its own name") }
        let account = try contact.map { try accounts.contact($0).account } ?? self.account
        let identity = try accounts.identity(of: name)
        let path = "\(folder)/\(name).stele"
        let clock = ManualWallClock(milliseconds: Self.epoch)
        let keys = MemoryKeyStore()
        var options = Replica.Options(clock: clock, random: SplitMix64(seed: seed ^ identity.deviceID.stableSeed), stampFloor: usesStampFloors ? keys : nil)
        options.sqlite = storage.sqlite
        let replica = try Replica.create(at: path, account: account, device: identity.deviceID, options: options)
        let driver = try FleetDriver(
            replica: replica, identity: identity, keyStore: keys, environment: SimulatedEnvironment(simulation: self, device: identity.deviceID).environment,
            configuration: configuration, random: SplitMix64(seed: seed &+ identity.deviceID.stableSeed),
            anchorRandom: SplitMix64(seed: seed ^ 0xA4C4_0000 ^ identity.deviceID.stableSeed))
        driver.keepsSealedPlaintexts = true
        let device = SimulatedDevice(name: name, identity: identity, contact: contact, replica: replica, keys: keys, path: path, clock: clock, driver: driver)
        try declareNamespaces(on: device)
        watch(device)
        // The approval is what puts the device on the roster (issue 6): the first
        // device founds the account; any later one is approved by the longest-standing
        // member, which wraps the current account key for it.
        if let approver = devices(of: account).first {
            try accounts.approve(identity, into: account, by: approver.identity, ring: try approver.keys.load())
        } else {
            try device.keys.save(try accounts.found(account, by: identity))
        }
        everyDevice.append(device)
        noteReachability()
        updateTaps()
        try updateRosters()
        record(.joined, device: device)
        device.driver.start()
        return device
    }

    /// Adds another account with its own devices (`contact NAME D1 D2`): its
    /// roster is founded in the same directory, its devices share the network.
    public func addContact(_ name: String, devices names: [String]) throws {
        _ = try accounts.addContact(name)
        for device in names { try addDevice(device, contact: name) }
    }

    /// Makes `namespace` a conversation between the own account and `contact`
    /// (`conversation NS with NAME`): a messages namespace on every device of
    /// both accounts, of the same name, bound to the other side.
    public func addConversation(_ namespace: String, with contact: String) throws {
        let other = try accounts.contact(contact)
        if !namespaces.contains(where: { $0.name == namespace }) { namespaces.append((namespace, .messages)) }
        try accounts.addConversation(namespace, with: contact)
        for device in everyDevice where device.contact == nil || device.contact == other.name { try declareNamespaces(on: device) }
        try updateRosters()
    }

    /// Declares on a device what its account holds: the own account every
    /// namespace (and its conversations), a contact its conversations with the own account.
    func declareNamespaces(on device: SimulatedDevice) throws {
        if let contact = device.contact {
            for conversation in conversations where conversation.contact == contact {
                _ = try device.replica.conversation(conversation.namespace, with: account)
            }
            return
        }
        for namespace in namespaces { try device.replica.declare(namespace.name, namespace.kind) }
        for conversation in conversations {
            guard let other = contacts.first(where: { $0.name == conversation.contact }) else { continue }
            _ = try device.replica.conversation(conversation.namespace, with: other.account)
        }
    }

    /// The devices of an account, without revoked ones.
    func devices(of account: AccountID) -> [SimulatedDevice] {
        everyDevice.filter { !$0.isRevoked && $0.account == account }
    }

    /// The accounts a device talks to: the own account's talk to every contact, a contact's to the own account.
    func otherAccounts(of device: SimulatedDevice) -> [AccountID] {
        device.contact == nil ? contacts.map(\.account) : [account]
    }

    /// The simulator's channels see every frame of every device ever added to an account.
    func updateTaps() {
        for device in everyDevice {
            device.tap.update(members: Set(everyDevice.filter { $0.account == device.account }.map(\.id)), revoked: [])
            for other in otherAccounts(of: device) {
                let members = Set(everyDevice.filter { $0.account == other }.map(\.id))
                if device.contactTaps[other] == nil {
                    device.contactTaps[other] = .contact(identity: device.identity, account: device.account, contact: other, members: members)
                } else {
                    device.contactTaps[other]?.update(members: members, revoked: [])
                }
            }
        }
    }

    /// Takes a device off the roster. Nobody tells the device: it keeps running
    /// and sending on its old roster, and every device on the new roster refuses
    /// its frames from now on (the frames already in flight included).
    /// The longest-standing other member signs the revocation and rotates the
    /// account key: the new one is wrapped for every remaining member, never for
    /// the revoked device, so anchors sealed from now on are closed to it.
    /// Revoking a device revoked already changes nothing.
    /// - Throws: ``RosterError`` `lastMember` when no other device is left to sign it;
    ///   ``SimulationInputError`` for a device never added.
    public func revoke(_ name: String) throws {
        let device = try existing(name)
        guard !device.isRevoked else { return }
        let account = device.account
        guard let revoker = devices(of: account).first(where: { $0 !== device }) else { throw RosterError.lastMember(device.id) }
        let lostAlready = operationsLostAlready()
        let (key, epoch) = try accounts.revoke(device.id, from: account, by: revoker.identity)
        device.isRevoked = true
        noteReachability()
        var ring = try revoker.keys.load() ?? KeyRing(identity: revoker.identity)
        ring.insert(key, epoch: epoch)
        try revoker.keys.save(ring)
        // Wrapped for every remaining member, the revoker too: a copy in the
        // directory is how its keychain, restored from an old backup, gets it back.
        try accounts.publish(key, epoch: epoch, for: devices(of: account).map(\.id), by: revoker.identity, account: account)
        forgetOperationsLost(sparing: lostAlready)
        try updateRosters()
        record(.revoked, device: device)
    }

    /// Every device on the roster reads the directory (``FleetDriver/refreshRoster(completion:)``):
    /// the roster, verified and checked to extend the one it pinned, goes to its
    /// node, and any account key wrapped for it that it lacks goes into its key
    /// store and its node. Then every device reads its contacts' rosters. A
    /// revoked device hears nothing more.
    func updateRosters() throws {
        for account in accounts.every {
            for device in devices(of: account) { try refreshRoster(of: device) }
        }
        for device in everyDevice where !device.isRevoked {
            device.driver.contactAccounts = otherAccounts(of: device)
            device.driver.refreshContacts()
        }
    }

    /// The in-process directory answers at once: what the driver refused is thrown here.
    func refreshRoster(of device: SimulatedDevice) throws {
        var outcome: Result<Void, any Error>?
        device.driver.refreshRoster { outcome = $0 }
        try outcome?.get()
    }

    /// Whether any account key `device` holds opens the anchor (`false` with no anchor).
    public func canReadAnchor(_ device: SimulatedDevice) -> Bool {
        accountKeys(of: device).contains { key in (try? anchors.read(device.account, key: key)) != nil }
    }

    /// The account keys a device holds, oldest first.
    func accountKeys(of device: SimulatedDevice) -> [AccountKey] {
        (try? device.keys.load())?.orderedAccountKeys ?? []
    }

    /// Declares a namespace on every device (and on devices that join later).
    public func declare(_ name: String, _ kind: NamespaceKind) throws {
        namespaces.append((name, kind))
        for device in everyDevice where device.contact == nil { try device.replica.declare(name, kind) }
    }

    /// The virtual time every device's wall clock starts at (2026-01-01).
    static let epoch: Int64 = 1_767_225_600_000

    func watch(_ device: SimulatedDevice) {
        device.replica.observeChanges { [weak device] event in
            guard let device, case .conflict = event.kind, case .row(let key) = event.subject else { return }
            device.conflicts.append((event.namespace, key))
        }
        device.driver.onEvent = { [unowned self, unowned device] event in
            device.logged[event.kind, default: 0] += 1
            if event.kind == .unknownDevice, let peer = event.peer { device.refusedSenders.insert(peer) }
            if event.kind == .roundCommitted || event.kind == .recovered { record(.generation(device.replica.generation), device: device) }
            if event.kind == .recovered { (device.account == account ? oracle : contactOracle).recovered(device.replica) }
            onEvent?(device.name, event)
            if let trace { trace(String(format: "%10.3f s  %@  %@", Double(now) / 1_000, device.name, "\(event)")) }
        }
    }
}
