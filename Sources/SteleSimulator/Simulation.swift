import Foundation
import Stele

/// A fleet of devices on a virtual clock and a seeded network: the world the
/// scenario language and `stele simulate` run in (DESIGN §9).
///
/// Device stores are real SQLite files in a temporary directory. A backup is an
/// SQLite online-backup copy of a device's file; a restore swaps it back in and
/// restarts the device, exactly what an OS restore does; a crash drops the
/// device's in-memory state and the frames in flight to it and reopens its file.
/// Everything random (delays, loss, duplication) comes from one seed, so the same
/// seed replays the same run, which ``eventLogHash`` proves.
public final class Simulation {
    /// How the network behaves.
    public struct Network: Sendable, Equatable {
        public var delayMilliseconds: ClosedRange<Int64> = 5...40
        public var lossPercent: Double = 0
        public var duplicatePercent: Double = 0

        public init() {}
    }

    /// What happened, counted.
    public struct Statistics: Sendable, Equatable {
        public var frames = 0
        public var bytes = 0
        public var operations = 0
        public var deletes = 0
        /// Faults injected, by kind (`loss`, `dup`, `crash`, `restore`, ...).
        public var faults: [String: Int] = [:]
        /// Frames that were in flight to a device when it crashed or was restored, and were lost.
        public var framesDroppedInFlight = 0
    }

    public let seed: UInt64
    public let account: AccountID
    public private(set) var now: Int64 = 0
    public var network = Network()
    public let oracle = Oracle()
    public private(set) var statistics = Statistics()
    /// The nodes' configuration; collection (`gc on`) is on unless switched off.
    public private(set) var configuration: FleetConfiguration
    /// The anchor substrate (001 §7): a store a device restore does not touch.
    public let anchors = MemoryAnchorStore()
    /// The account's first key (derived from the seed); a revoke rotates to a new one.
    public let accountKey: AccountKey
    /// The account's roster and wrapped keys (``Directory``), in process: joins
    /// and revokes go through it, and every device's node is told what it holds.
    public let directory = MemoryDirectory()
    /// The anchor substrate's state: reachable or not, and what its next write does.
    public struct AnchorSubstrate: Sendable, Equatable {
        public var isDown = false
        public var failNextWrite = false
        public var delayNextWriteMilliseconds: Int64?
        /// How long a read or write takes when nothing is wrong.
        public var latencyMilliseconds: Int64 = 150
    }
    public var anchorSubstrate = AnchorSubstrate()
    /// Every device ever added, in the order they joined, revoked ones and
    /// contacts' devices included.
    public private(set) var everyDevice: [SimulatedDevice] = []
    /// The roster: the own account's devices in the order they joined, without revoked ones.
    public var devices: [SimulatedDevice] { everyDevice.filter { !$0.isRevoked && $0.contact == nil } }
    /// Another account the scenario talks to (`contact NAME D1 D2`): its own
    /// devices, roster and key, in the same directory and on the same network.
    public struct Contact: Sendable {
        public let name: String
        public let account: AccountID
        let key: AccountKey
    }
    /// The contact accounts, in the order they were added.
    public private(set) var contacts: [Contact] = []
    /// Conversations (`conversation NS with NAME`): a messages namespace of the
    /// own account bound to a contact, and the same name on the contact's side.
    public private(set) var conversations: [(namespace: String, contact: String)] = []
    /// The namespaces every device declares.
    public private(set) var namespaces: [(name: String, kind: NamespaceKind)] = []
    /// Groups of devices that can reach each other (`nil`: no partition).
    public private(set) var partition: [Set<DeviceID>]?
    /// A timeline of what happened, for reports.
    public private(set) var timeline: [TimelineEntry] = []

    private let folder: String
    private var random: SplitMix64
    private var queue = EventQueue<Event>()
    private var backups: [String: (device: String, path: String, time: Int64, keys: MemoryKeyStore, forgettingMark: Int)] = [:]
    /// Whether devices keep a stamp floor in their key store (``StampFloor``).
    /// Off only for tests that show what the floor prevents: set it before
    /// adding devices.
    public var usesStampFloors = true
    private var hasher = EventLogHasher()
    private let wireHasher = RunningDigest()
    /// Whether every frame delivered is kept in ``wire`` (tests that compare runs byte for byte).
    public var recordsWire = false
    /// Every sealed frame delivered, in order, when ``recordsWire`` is on.
    public private(set) var wire: [[UInt8]] = []
    /// Ops contacts' devices wrote, kept by an oracle nobody checks: the own
    /// account's oracle learns them when they land on its devices.
    private let contactOracle = Oracle()
    /// When each message's text first reached a contact's device, by "namespace/message".
    private var reachedContact: [String: Int64] = [:]
    /// Since when two devices of the own account have been able to reach each
    /// other without a break, by their names joined with "|" in order.
    private var reachableSince: [String: Int64] = [:]
    /// How long the device that deleted a message must have been within the
    /// deliverer's reach for a delivery of its text to count as a leak: long
    /// enough for any fault mix to let the delete through by reconcile.
    static let leakReachMilliseconds: Int64 = 600_000
    /// Rewrites (or, returning `nil`, drops) every frame as it is delivered:
    /// how tests put a deliberately broken peer on the wire to prove the oracle
    /// can fail. `nil`: frames arrive as sent.
    public var tamper: ((_ from: DeviceID, _ to: DeviceID, _ bytes: [UInt8]) -> [UInt8]?)?
    /// Called with every event a device's node logs, as a line (virtual time,
    /// device, event): `stele scenario --trace` prints them.
    public var trace: ((String) -> Void)?
    /// Called with every event a device's node logs, by device name.
    public var onEvent: ((_ device: String, _ event: FleetEvent) -> Void)?
    /// Failed when a device's storage refused a write the workload asked for.
    public private(set) var failedOperations = 0
    /// Why the last operation was refused: by storage (``perform(_:_:)`` returned
    /// `false`) or by a rule of its kind (it returned `true`: the write happened nowhere).
    public private(set) var lastRefusal: ReplicaError?
    /// The last storage failure of an operation.
    public private(set) var lastFailure: String?

    private enum Event {
        case deliver(from: DeviceID, to: DeviceID, sealed: [UInt8], plain: [UInt8])
        case timer(device: DeviceID, timer: SimulatedTimer)
        case anchorWrite(device: DeviceID, sealed: [UInt8], takenAt: Int64, completion: (Result<Void, AnchorError>) -> Void)
        case anchorRead(device: DeviceID, completion: (Result<[UInt8]?, AnchorError>) -> Void)
    }

    /// Creates an empty world; add devices with ``addDevice(_:)``.
    public init(seed: UInt64, configuration: FleetConfiguration = FleetConfiguration(collects: true)) throws {
        self.seed = seed
        self.configuration = configuration
        var keyRandom = SplitMix64(seed: seed ^ 0x00BA_C0E7)
        accountKey = try AccountKey(bytes: (0..<4).flatMap { _ in withUnsafeBytes(of: keyRandom.next()) { Array($0) } })
        random = SplitMix64(seed: seed)
        var accountRandom = SplitMix64(seed: seed ^ 0xACC0_0000)
        account = AccountID.generate(using: &accountRandom)
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("stele-sim-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder + "/backups", withIntermediateDirectories: true)
    }

    deinit {
        everyDevice.removeAll()
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Allows or forbids barrier rounds on every device (`gc on` / `gc off`).
    /// Switching it on prompts every online device to look for a round at once.
    public func setCollection(_ allowed: Bool) {
        let switchedOn = allowed && !configuration.collects
        configuration.collects = allowed
        for device in everyDevice { device.driver.setConfiguration(configuration) }
        if switchedOn { for device in devices where device.isOnline { device.driver.nudge() } }
    }

    // MARK: - Devices

    /// The device of that name, revoked or not.
    public func device(_ name: String) -> SimulatedDevice? { everyDevice.first { $0.name == name } }

    public var roster: Set<DeviceID> { Set(devices.map(\.id)) }

    /// Adds a device to the account's roster (the others learn of it at once)
    /// and starts it; with `contact`, to that contact account's roster instead.
    @discardableResult
    public func addDevice(_ name: String, contact: String? = nil) throws -> SimulatedDevice {
        precondition(device(name) == nil, "device \(name) exists")
        let owner = try contact.map { name in
            guard let found = contacts.first(where: { $0.name == name }) else { throw UnknownContact(name: name) }
            return found
        }
        let account = owner?.account ?? self.account
        var keyRandom = SplitMix64(seed: seed ^ UInt64(truncatingIfNeeded: name.hashValueStable))
        let identity = try DeviceIdentity(privateKey: (0..<4).flatMap { _ in withUnsafeBytes(of: keyRandom.next()) { Array($0) } })
        let path = "\(folder)/\(name).stele"
        let clock = ManualWallClock(milliseconds: Self.epoch)
        let keys = MemoryKeyStore()
        let replica = try Replica.create(
            at: path, account: account, device: identity.deviceID,
            options: Replica.Options(clock: clock, random: SplitMix64(seed: seed ^ identity.deviceID.stableSeed), stampFloor: usesStampFloors ? keys : nil))
        let driver = try FleetDriver(
            replica: replica, identity: identity, keyStore: keys, environment: SimulatedEnvironment(simulation: self, device: identity.deviceID).environment,
            configuration: configuration, random: SplitMix64(seed: seed &+ identity.deviceID.stableSeed))
        let device = SimulatedDevice(name: name, identity: identity, contact: contact, replica: replica, keys: keys, path: path, clock: clock, driver: driver)
        try declareNamespaces(on: device)
        watch(device)
        // The approval is what puts the device on the roster (issue 6): the first
        // device founds the account; any later one is approved by the longest-standing
        // member, which wraps the current account key for it.
        if let approver = devices(of: account).first {
            let current = try directory.roster(of: account)
            try directory.append(
                try RosterChange.approval(of: identity.deviceID, signingKey: try identity.signingKey(), by: approver.identity, account: account, index: current.version),
                to: account)
            let ring = try approver.keys.load()
            if let ring, let epoch = ring.newestEpoch, let key = ring.accountKeys[epoch] {
                try directory.publish(try WrappedAccountKey.wrap(key, epoch: epoch, for: identity.deviceID, by: approver.identity, account: account))
            }
        } else {
            try directory.found(try Roster.founding(account: account, by: identity))
            try device.keys.save(KeyRing(identity: identity, accountKeys: [1: owner?.key ?? accountKey]))
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
        precondition(!contacts.contains { $0.name == name }, "contact \(name) exists")
        var accountRandom = SplitMix64(seed: seed ^ 0xC0_0000 ^ UInt64(truncatingIfNeeded: name.hashValueStable))
        let account = AccountID.generate(using: &accountRandom)
        let key = try AccountKey(bytes: (0..<4).flatMap { _ in withUnsafeBytes(of: accountRandom.next()) { Array($0) } })
        contacts.append(Contact(name: name, account: account, key: key))
        for device in names { try addDevice(device, contact: name) }
    }

    /// Makes `namespace` a conversation between the own account and `contact`
    /// (`conversation NS with NAME`): a messages namespace on every device of
    /// both accounts, of the same name, bound to the other side.
    public func addConversation(_ namespace: String, with contact: String) throws {
        guard let other = contacts.first(where: { $0.name == contact }) else { throw UnknownContact(name: contact) }
        if !namespaces.contains(where: { $0.name == namespace }) { namespaces.append((namespace, .messages)) }
        conversations.append((namespace, contact))
        for device in everyDevice where device.contact == nil || device.contact == other.name { try declareNamespaces(on: device) }
        try updateRosters()
    }

    /// Declares on a device what its account holds: the own account every
    /// namespace (and its conversations), a contact its conversations with the own account.
    private func declareNamespaces(on device: SimulatedDevice) throws {
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
    private func otherAccounts(of device: SimulatedDevice) -> [AccountID] {
        device.contact == nil ? contacts.map(\.account) : [account]
    }

    /// The simulator's channels see every frame of every device ever added to an account.
    private func updateTaps() {
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
    /// - Throws: ``RosterError`` `lastMember` when no other device is left to sign it.
    public func revoke(_ name: String) throws {
        guard let device = device(name), !device.isRevoked else { return }
        let account = device.account
        guard let revoker = devices(of: account).first(where: { $0 !== device }) else { throw RosterError.lastMember(device.id) }
        let current = try directory.roster(of: account)
        try directory.append(try RosterChange.revocation(of: device.id, by: revoker.identity, account: account, index: current.version), to: account)
        device.isRevoked = true
        noteReachability()
        // Numbered by the roster, not by the revoker's key ring: a keychain restored
        // from an old backup must not number a new key as one the fleet already has.
        let epoch = UInt32(try directory.roster(of: account).revoked.count + 1)
        var keyRandom = SplitMix64(seed: seed ^ 0x0E0C_0000 ^ UInt64(epoch))
        let key = try AccountKey(bytes: (0..<4).flatMap { _ in withUnsafeBytes(of: keyRandom.next()) { Array($0) } })
        var ring = try revoker.keys.load() ?? KeyRing(identity: revoker.identity)
        ring.insert(key, epoch: epoch)
        try revoker.keys.save(ring)
        // Wrapped for every remaining member, the revoker too: a copy in the
        // directory is how its keychain, restored from an old backup, gets it back.
        for member in devices(of: account) {
            try directory.publish(try WrappedAccountKey.wrap(key, epoch: epoch, for: member.id, by: revoker.identity, account: account))
        }
        forgetOperationsLost()
        try updateRosters()
        record(.revoked, device: device)
    }

    /// Every device on the roster reads the directory (``FleetDriver/refreshRoster(completion:)``):
    /// the roster, verified and checked to extend the one it pinned, goes to its
    /// node, and any account key wrapped for it that it lacks goes into its key
    /// store and its node. Then every device reads its contacts' rosters. A
    /// revoked device hears nothing more.
    private func updateRosters() throws {
        for account in [account] + contacts.map(\.account) {
            for device in devices(of: account) { try refreshRoster(of: device) }
        }
        for device in everyDevice where !device.isRevoked {
            device.driver.contactAccounts = otherAccounts(of: device)
            device.driver.refreshContacts()
        }
    }

    /// The in-process directory answers at once: what the driver refused is thrown here.
    private func refreshRoster(of device: SimulatedDevice) throws {
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

    private func watch(_ device: SimulatedDevice) {
        device.replica.observeChanges { [weak device] event in
            guard let device, case .conflict = event.kind, case .row(let key) = event.subject else { return }
            device.conflicts.append((event.namespace, key))
        }
        device.driver.onEvent = { [unowned self, unowned device] event in
            device.logged[event.kind, default: 0] += 1
            if event.kind == .unknownDevice, let peer = event.peer { device.refusedSenders.insert(peer) }
            if event.kind == .roundCommitted || event.kind == .recovered { record(.generation(device.replica.generation), device: device) }
            onEvent?(device.name, event)
            if let trace { trace(String(format: "%10.3f s  %@  %@", Double(now) / 1_000, device.name, "\(event)")) }
        }
    }

    // MARK: - The network

    public func setOnline(_ name: String, _ online: Bool) {
        guard let device = device(name), device.isOnline != online else { return }
        device.isOnline = online
        noteReachability()
        record(online ? .online : .offline, device: device)
        if online { device.driver.nudge() }
    }

    /// Records, for every two devices of the own account, since when they have reached each other.
    private func noteReachability() {
        let roster = devices
        var next: [String: Int64] = [:]
        for (index, first) in roster.enumerated() {
            for second in roster[(index + 1)...] where canReach(first.id, second.id) {
                let key = Self.pairKey(first.name, second.name)
                next[key] = reachableSince[key] ?? now
            }
        }
        reachableSince = next
    }

    private static func pairKey(_ first: String, _ second: String) -> String {
        first < second ? "\(first)|\(second)" : "\(second)|\(first)"
    }

    /// Splits the online devices into groups that cannot reach each other.
    public func partition(_ groups: [[String]]) {
        defer { noteReachability() }
        partition = groups.map { Set($0.compactMap { device($0)?.id }) }
        count("partition")
        timeline.append(TimelineEntry(time: now, device: nil, kind: .partition))
    }

    /// Ends partitions and restores a perfect network.
    public func heal() {
        partition = nil
        noteReachability()
        network = Network()
        timeline.append(TimelineEntry(time: now, device: nil, kind: .heal))
        for device in devices where device.isOnline { device.driver.nudge() }
    }

    /// Whether two devices can exchange frames right now.
    public func canReach(_ a: DeviceID, _ b: DeviceID) -> Bool {
        guard let first = device(id: a), let second = device(id: b), first.isOnline, second.isOnline else { return false }
        guard let partition else { return true }
        return partition.contains { $0.contains(a) && $0.contains(b) } || !partition.contains { $0.contains(a) || $0.contains(b) }
    }

    func device(id: DeviceID) -> SimulatedDevice? { everyDevice.first { $0.id == id } }

    // MARK: - Running

    /// Runs every event due within the next `duration` of virtual time.
    public func advance(byMilliseconds duration: Int64) {
        let end = now + duration
        while let deadline = queue.nextDeadline, deadline <= end { step() }
        now = end
        syncClocks()
    }

    /// Runs until every two online devices that can reach each other have equal
    /// roots and generations, and the fleet is idle: no frame in flight and no
    /// timer but the periodic advertisement due within the next 60 s.
    /// - Returns: `nil` when settled, or what was still moving after `limit` of virtual time.
    public func sync(limitMilliseconds limit: Int64 = 3_600_000) -> String? {
        let end = now + limit
        while true {
            if let moving = stillMoving() {
                guard now < end, queue.nextDeadline != nil else { return moving }
                step()
            } else {
                timeline.append(TimelineEntry(time: now, device: nil, kind: .converged))
                return nil
            }
        }
    }

    /// What keeps the fleet from being settled, or `nil`.
    func stillMoving() -> String? {
        observing { movement() }
    }

    private func movement() -> String? {
        let online = everyDevice.filter { !$0.isRevoked && $0.isOnline }
        for (index, first) in online.enumerated() {
            for second in online[(index + 1)...] where first.account == second.account && canReach(first.id, second.id) {
                let (mine, theirs) = (try? first.node.advertisement(), try? second.node.advertisement())
                if mine != theirs {
                    return "\(first.name) and \(second.name) still differ" + Self.difference(mine, theirs)
                }
            }
        }
        // A revoked device keeps talking to a fleet that refuses it: its frames
        // and timers are no part of the roster settling.
        let rosterIDs = Set(everyDevice.filter { !$0.isRevoked }.map(\.id))
        if queue.payloads.contains(where: { if case .deliver(let from, _, _, _) = $0 { return rosterIDs.contains(from) } else { return false } }) {
            return "frames in flight"
        }
        if queue.payloads.contains(where: { if case .anchorWrite = $0 { return true } else { return false } }) { return "an anchor write in flight" }
        if queue.payloads.contains(where: { if case .anchorRead = $0 { return true } else { return false } }) { return "an anchor read in flight" }
        // Barrier rounds are part of settling (SCENARIOS.md `sync`): with every device
        // online and reachable, a fleet whose devices may still collect is not at rest
        // until they have, or until the leader backs off.
        let roster = devices
        if configuration.collects, roster.allSatisfy(\.isOnline),
            roster.allSatisfy({ first in roster.allSatisfy { canReach(first.id, $0.id) } }),
            let leader = roster.min(by: { $0.id < $1.id }), !leader.node.isBackingOff,
            let busy = roster.first(where: { $0.node.hasCollectionWork })
        {
            return "\(busy.name) still has tombstones to collect"
        }
        // SCENARIOS.md: idle means no timer but a periodic one due within the next 60 s;
        // a back-off long after that is a fleet at rest.
        for device in everyDevice where rosterIDs.contains(device.id) && device.isOnline {
            // The outbox retries while a contact is out of reach: periodic too.
            for (timer, deadline) in device.driver.armedTimers where timer != .advertise && timer != .outbox && deadline <= now + 60_000 {
                return "\(device.name) has a \(timer) timer pending"
            }
        }
        return nil
    }

    /// Where two advertisements part: the namespaces whose roots differ, or the generations.
    static func difference(_ first: Advertisement?, _ second: Advertisement?) -> String {
        guard let first, let second else { return " (one of them cannot read its store)" }
        if first.generation != second.generation { return " (generations \(first.generation) and \(second.generation))" }
        let names = Set(first.roots.map(\.namespace) + second.roots.map(\.namespace)).sorted().filter { name in
            first.roots.first { $0.namespace == name } != second.roots.first { $0.namespace == name }
        }
        return " in \(names.joined(separator: ", "))"
    }

    private func step() {
        guard let (deadline, sequence, event) = queue.pop() else { return }
        now = max(now, deadline)
        syncClocks()
        switch event {
        case let .deliver(from, to, sealed, plain):
            guard let target = device(id: to), canReach(from, to), let bytes = tampered(sealed, plain, from: from, to: to) else {
                oracle.frameLost(sequence)
                return
            }
            hasher.add("deliver", now, from, to, plain.count)
            // The bytes themselves: salts and nonces come from the nodes' seeded generators.
            wireHasher.add(bytes)
            if recordsWire { wire.append(bytes) }
            target.driver.receive(bytes, from: from)
            if let source = device(id: from), source.account != target.account { deliveryLanded(plain, from: source, on: target) }
            if oracle.isCarrier(sequence) {
                if roster.contains(from) && roster.contains(to) { oracle.frameLanded(sequence, in: target.replica) } else { oracle.frameLost(sequence) }
            }
        case let .timer(owner, timer):
            guard !timer.isCancelled, device(id: owner) != nil else { return }
            hasher.add("timer", now, owner, owner, 0)
            timer.fire()
        case let .anchorWrite(owner, sealed, takenAt, completion):
            guard let target = device(id: owner) else { return }
            let landed = !anchorSubstrate.isDown && target.isOnline && !anchorSubstrate.failNextWrite
            anchorSubstrate.failNextWrite = false
            let header = try? AnchorFile.header(sealed)
            if landed { anchors.replace(sealed, of: target.account) }
            hasher.add(landed ? "anchor-landed" : "anchor-failed", now, owner, owner, Int(header?.generation ?? 0))
            if landed {
                record(.anchorWritten(header?.generation ?? 0), device: target)
                // Another account's anchor is no evidence for this account's writes (seed 13).
                if let anchor = opened(sealed, by: target), let snapshot = try? Snapshot(decoding: anchor.snapshot) {
                    (target.account == account ? oracle : contactOracle).anchorLanded(snapshot, takenAt: takenAt)
                }
            }
            completion(landed ? .success(()) : .failure(AnchorError(.unavailable, "the anchor substrate is unreachable")))
        case let .anchorRead(owner, completion):
            guard let target = device(id: owner) else { return }
            hasher.add("anchor-read", now, owner, owner, 0)
            if anchorSubstrate.isDown || !target.isOnline {
                completion(.failure(AnchorError(.unavailable, "the anchor substrate is unreachable")))
            } else {
                completion(.success(anchors.bytes(of: target.account)))
            }
        }
    }

    /// An anchor a device sealed, opened with the keys it holds (the oracle's view).
    private func opened(_ sealed: [UInt8], by device: SimulatedDevice) -> Anchor? {
        for key in accountKeys(of: device).reversed() { if let anchor = try? AnchorFile.decode(sealed, key: key) { return anchor } }
        return nil
    }

    /// Queues a device's timer on the virtual clock.
    func schedule(_ timer: SimulatedTimer, for device: DeviceID, afterMilliseconds delay: Int64) -> SimulatedTimer {
        queue.push(.timer(device: device, timer: timer), at: now + delay)
        return timer
    }

    /// Queues a device's anchor write: it lands (or fails) after the substrate's latency.
    func queueAnchorWrite(_ sealed: [UInt8], by device: DeviceID, completion: @escaping (Result<Void, AnchorError>) -> Void) {
        let delay = anchorSubstrate.delayNextWriteMilliseconds ?? anchorSubstrate.latencyMilliseconds
        anchorSubstrate.delayNextWriteMilliseconds = nil
        queue.push(.anchorWrite(device: device, sealed: sealed, takenAt: now, completion: completion), at: now + delay)
    }

    /// Queues a device's anchor read.
    func queueAnchorRead(by device: DeviceID, completion: @escaping (Result<[UInt8]?, AnchorError>) -> Void) {
        queue.push(.anchorRead(device: device, completion: completion), at: now + anchorSubstrate.latencyMilliseconds)
    }

    private func syncClocks() {
        for device in everyDevice { device.clock.set(milliseconds: Self.epoch + now + device.skewMilliseconds) }
    }

    /// Puts a frame on the network. Offline devices still run (their app writes,
    /// their timers fire); their frames go nowhere.
    func send(_ bytes: [UInt8], from: DeviceID, to: DeviceID) {
        // A frame to another account's device is read even if it goes nowhere: the
        // receipts in it were written all the same.
        var opened: [UInt8]?
        if let source = device(id: from), let target = device(id: to), source.account != target.account {
            opened = target.openAny(bytes)?.frame ?? []
            deliverySent(opened ?? [], from: source)
        }
        guard canReach(from, to) else { return }
        statistics.frames += 1
        statistics.bytes += bytes.count
        if random.chance(network.lossPercent) {
            count("loss")
            return
        }
        // The oracle sees what a frame carries (it knows every device's keys); the
        // device sees only the sealed bytes.
        let plain = opened ?? device(id: to)?.openAny(bytes)?.frame ?? []
        queue.push(.deliver(from: from, to: to, sealed: bytes, plain: plain), at: now + random.value(in: network.delayMilliseconds))
        if random.chance(network.duplicatePercent) {
            count("dup")
            queue.push(.deliver(from: from, to: to, sealed: bytes, plain: plain), at: now + random.value(in: network.delayMilliseconds))
        }
    }

    /// A device of the own account wrote receipts for a contact's delivery and
    /// sends them: the oracle learns those its store holds now.
    private func deliverySent(_ plain: [UInt8], from source: SimulatedDevice) {
        // A revoked device's writes are no one's to keep (``perform(_:_:)``).
        guard source.contact == nil, !source.isRevoked, case .delivery(let delivery)? = try? FrameCodec.decode(plain) else { return }
        observing {
            for record in delivery.records {
                // An acknowledgement of a receipt whose op is gone is sent, not kept.
                let held = Set(((try? source.replica.messages(delivery.conversation).ops(of: record.message)) ?? []).map(\.id))
                for op in record.ops where op.account == account && held.contains(op.id) {
                    if case .receipt = op.action { oracle.arrived(op, namespace: delivery.conversation, on: source.replica, deviceName: source.name, time: now) }
                }
            }
        }
    }

    /// A delivery landed on another account's device. On the own account's, the
    /// oracle learns the contact's ops the device took in. On a contact's, the
    /// text of a message deleted for everyone before any of its text had reached
    /// the contact is a leak: a failure (counted with the resurrections) when the
    /// device that deleted it had been within the deliverer's reach for
    /// ``leakReachMilliseconds``, a leak at the limit otherwise.
    private func deliveryLanded(_ plain: [UInt8], from source: SimulatedDevice, on target: SimulatedDevice) {
        guard case .delivery(let delivery)? = try? FrameCodec.decode(plain) else { return }
        let namespace = delivery.conversation
        observing {
            for record in delivery.records {
                if target.contact == nil {
                    guard !target.isRevoked else { continue }
                    let held = Set(((try? target.replica.messages(namespace).ops(of: record.message)) ?? []).map(\.id))
                    for op in record.ops where held.contains(op.id) {
                        oracle.arrived(op, namespace: namespace, on: target.replica, deviceName: target.name, time: now)
                    }
                    continue
                }
                guard source.contact == nil else { continue }
                guard record.ops.contains(where: \.carriesText) else { continue }
                let key = "\(namespace)/\(record.message)"
                let reached = reachedContact[key]
                if reached == nil { reachedContact[key] = now }
                guard let deleted = oracle.deletedForEveryone(namespace, record.message), (reached ?? now) > deleted.time else { continue }
                let subject = "\(namespace) message \(record.message)"
                let detail = "\(source.name) delivered its text to \(target.name) at \(now) ms, after \(deleted.device) deleted it for everyone at \(deleted.time) ms and before it was ever delivered"
                // The promise (README "Conversations"): no device delivers it once the
                // delete could have reached it from the device that made it.
                let since = reachableSince[Self.pairKey(source.name, deleted.device)]
                let deleter = device(deleted.device)
                let deleterHoldsIt = deleter.map { (try? $0.replica.messages(namespace).message(record.message))??.scope == .everyone } ?? false
                if deleterHoldsIt, let since, now - max(since, deleted.time) >= Self.leakReachMilliseconds {
                    oracle.leaked(subject, detail)
                } else {
                    oracle.leakedAtTheLimit(subject, detail + " (the deleting device was out of its reach)")
                }
            }
        }
    }

    /// The bytes delivered: as sealed, or, with a ``tamper`` hook, its rewrite of
    /// the plaintext sealed again as the sender would (a broken peer, not a broken wire).
    private func tampered(_ sealed: [UInt8], _ plain: [UInt8], from: DeviceID, to: DeviceID) -> [UInt8]? {
        guard let tamper else { return sealed }
        guard let rewritten = tamper(from, to, plain) else { return nil }
        return device(id: from)?.sealAny(rewritten, to: to)
    }

    // MARK: - Faults

    /// Counts an injected fault of `kind`.
    public func count(_ kind: String) { statistics.faults[kind, default: 0] += 1 }

    /// Kills `name` mid-step: its in-memory state and the frames in flight to it
    /// are lost; it restarts from its file.
    public func crash(_ name: String) throws {
        guard let device = device(name) else { return }
        dropInFlight(to: device)
        try reopen(device)
        count("crash")
        record(.crashed, device: device)
    }

    /// Copies `name`'s store as an OS backup would.
    public func backup(_ name: String, as label: String) throws {
        guard let device = device(name) else { return }
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
    public func restore(_ name: String, from label: String, withKeys: Bool = false) throws {
        guard let device = device(name), let backup = backups[label] else { return }
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
        forgetOperationsLost()
        count("restore")
        record(.restored, device: device)
    }

    /// Skews `name`'s wall clock by `milliseconds` against the virtual clock.
    public func skew(_ name: String, byMilliseconds milliseconds: Int64) {
        guard let device = device(name) else { return }
        device.skewMilliseconds = milliseconds
        syncClocks()
        count("skew")
    }

    /// Makes one of `name`'s next SQLite steps fail with `fault`.
    public func failStorage(_ name: String, with fault: StorageFault, afterSteps: Int = 0) {
        guard let device = device(name) else { return }
        device.replica.injectStorageFault(fault, afterSteps: afterSteps)
        count("storage")
    }

    private func dropInFlight(to device: SimulatedDevice) {
        var frames = 0
        let removed = queue.removeAll { event in
            if case .deliver(_, let to, _, _) = event, to == device.id {
                frames += 1
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
    private func forgetOperationsLost() {
        let roster = self.roster
        let inFlight: [(id: UInt64, bytes: [UInt8])] = queue.entries.compactMap { entry in
            guard case let .deliver(from, to, _, plain) = entry.payload, roster.contains(from), roster.contains(to) else { return nil }
            return (entry.sequence, plain)
        }
        // Every key the account ever had: a snapshot in flight is sealed with one of them.
        var keys: [AccountKey] = [accountKey]
        for device in everyDevice where device.contact == nil {
            for key in accountKeys(of: device) where !keys.contains(key) { keys.append(key) }
        }
        oracle.forgetOperationsUnknown(to: devices.map(\.replica), inFlight: inFlight, account: account, keys: keys)
    }

    /// Drops the device's replica and node, optionally changes its file, then
    /// reopens the file and restarts the node.
    private func reopen(_ device: SimulatedDevice, whileClosed change: () throws -> Void = {}) throws {
        let options = Replica.Options(
            clock: device.clock, random: SplitMix64(seed: seed ^ device.id.stableSeed ^ UInt64(now)), stampFloor: usesStampFloors ? device.keys : nil)
        device.firedBeforeReopen += device.replica.storageFaultsFired
        // The process dies: its driver hears nothing more. Release every
        // reference to the store before touching its file.
        device.driver.stop()
        let placeholder = try Replica.create(at: ":memory:", account: device.account, device: device.id)
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
            random: SplitMix64(seed: seed &+ device.id.stableSeed &+ UInt64(now)))
        watch(device)
        if !device.isRevoked { try refreshRoster(of: device) }
        device.driver.start()
        try updateRosters()
    }

    // MARK: - Workload

    /// Runs one write on a device, tells the oracle, and lets its node know.
    /// - Returns: `false` if the device's store refused it (a forced storage fault).
    ///   A write the device could not even aim (a message it does not hold) is
    ///   refused too, but returns `true` with ``lastRefusal`` set, and is no step at all.
    @discardableResult
    public func perform(_ name: String, _ operation: WorkloadOperation) -> Bool {
        guard let device = device(name) else { return false }
        syncClocks()
        lastRefusal = nil
        do {
            // A contact's writes reach the own account's oracle when they land on its devices.
            lastRefusal = try (device.contact == nil ? oracle : contactOracle).perform(operation, on: device.replica, deviceName: name, time: now)
            if lastRefusal?.code == .messageMissing { return true }
            // The fleet refuses a revoked device's writes: they are no one's to keep.
            if device.isRevoked { forgetOperationsLost() }
            statistics.operations += 1
            if operation.isDelete { statistics.deletes += 1 }
            // The driver hears of the write from the replica's change feed.
            hasher.add("op", now, device.id, device.id, operation.hashValueStable)
            timeline.append(TimelineEntry(time: now, device: name, kind: .tombstones(totalTombstones())))
            return true
        } catch {
            failedOperations += 1
            lastFailure = "\(error)"
            return false
        }
    }

    /// The devices, of any account, whose conversations still owe a delivery, and how many messages.
    public func owingDeliveries() -> [(device: String, count: Int)] {
        observing {
            everyDevice.filter { !$0.isRevoked }.compactMap { device in
                let owed = ((try? device.replica.conversations()) ?? []).reduce(0) { total, conversation in
                    total + ((try? device.replica.messages(conversation.name).outboxCount()) ?? 0)
                }
                return owed > 0 ? (device.name, owed) : nil
            }
        }
    }

    /// Tombstones retained across the online devices' stores.
    public func totalTombstones() -> Int {
        observing {
            devices.reduce(0) { total, device in total + ((try? device.replica.report())?.namespaces.reduce(0) { $0 + $1.tombstones } ?? 0) }
        }
    }

    /// Runs reads of the harness (settling checks, expectations, reports) with
    /// every device's forced storage faults held back: they are meant for the
    /// device's own steps, and must neither fire on nor be used up by an observer.
    public func observing<T>(_ body: () throws -> T) rethrows -> T {
        try Oracle.suspendingFaults(everyDevice.map(\.replica), body)
    }

    /// Runs the oracle over every device.
    /// - Throws: ``OracleCannotCheck`` saying why, when a device is offline, a
    ///   partition stands or the fleet is still moving: the oracle judges only a
    ///   fleet that has settled, and a check that could not run is no pass.
    public func checkOracle() throws {
        if let reason = whyOracleCannotCheck() { throw OracleCannotCheck(reason: reason) }
        oracle.check(devices.map { ($0.name, $0.replica) }, namespaces: namespaces)
    }

    /// Why the oracle cannot judge the fleet now, or `nil` when it can.
    public func whyOracleCannotCheck() -> String? {
        if partition != nil { return "a partition stands; heal it first" }
        let offline = devices.filter { !$0.isOnline }.map(\.name)
        if !offline.isEmpty { return "\(offline.joined(separator: ", ")) \(offline.count == 1 ? "is" : "are") offline" }
        if let moving = stillMoving() { return "the fleet is still moving: \(moving)" }
        return nil
    }

    /// A hash of every delivered event, operation and timer, in order: equal for
    /// two runs of the same seed and scenario.
    public var eventLogHash: UInt64 { hasher.value }

    /// A SHA-256 over the bytes of every sealed frame delivered, in order: equal
    /// for two runs of the same seed and scenario, down to every salt and nonce.
    public var wireDigest: Hash32 { wireHasher.value }

    private func record(_ kind: TimelineEntry.Kind, device: SimulatedDevice) {
        timeline.append(TimelineEntry(time: now, device: device.name, kind: kind))
        hasher.add("\(kind)", now, device.id, device.id, 0)
    }
}

/// The oracle was asked to judge a fleet it cannot judge yet.
public struct OracleCannotCheck: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public var description: String { "the oracle could not check: \(reason)" }
}

/// A contact account named that was never added.
public struct UnknownContact: Error, Sendable, CustomStringConvertible {
    public let name: String
    public var description: String { "no contact named \(name); add it with contact \(name) D1 D2 first" }
}

/// What happened when, for the SVG report.
public struct TimelineEntry: Sendable {
    public enum Kind: Sendable, CustomStringConvertible {
        case joined, revoked, online, offline, crashed, backedUp, restored, partition, heal, converged
        case tombstones(Int)
        /// The anchor landed for a round to this generation.
        case anchorWritten(UInt64)
        /// The device's generation moved (a commit, an adoption or a recovery).
        case generation(UInt64)

        public var description: String {
            switch self {
            case .joined: "joined"
            case .revoked: "revoked"
            case .online: "online"
            case .offline: "offline"
            case .crashed: "crashed"
            case .backedUp: "backed up"
            case .restored: "restored"
            case .partition: "partition"
            case .heal: "heal"
            case .converged: "converged"
            case .tombstones(let count): "tombstones \(count)"
            case .anchorWritten(let generation): "anchor at generation \(generation)"
            case .generation(let generation): "generation \(generation)"
            }
        }
    }

    public let time: Int64
    public let device: String?
    public let kind: Kind
}

extension DeviceID {
    /// The id's first eight bytes as a number: a stable per-device seed.
    var stableSeed: UInt64 { bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) } }
}
