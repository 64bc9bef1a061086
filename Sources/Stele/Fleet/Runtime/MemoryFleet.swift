import Foundation

/// Devices in one process on a virtual clock: the in-memory ``FleetEnvironment``
/// for tests, benchmarks and trying Stele out. Frames, timers and anchor reads
/// and writes wait on one queue ordered by virtual time (then by when they were
/// queued), and run when the fleet is told to run. The drivers are the ones an
/// app runs; only the world around them is in memory. Not thread-safe: use it
/// from one thread (``FleetScheduler/assertOnOwner()`` checks in debug builds).
public final class MemoryFleet {
    /// Virtual milliseconds since the fleet was made.
    public private(set) var now: Int64 = 0
    /// The accounts' rosters and wrapped keys.
    public let directory = MemoryDirectory()
    /// The anchor substrate.
    public let anchors = MemoryAnchorStore()
    /// How long a frame takes (0: it arrives before any timer of the same moment fires).
    public var frameLatencyMilliseconds: Int64 = 1
    /// How long an anchor read or write takes.
    public var anchorLatencyMilliseconds: Int64 = 1
    /// What an anchor write does.
    public enum AnchorPolicy: Sendable { case land, fail, hang }
    public var anchorPolicy = AnchorPolicy.land
    /// Anchor writes asked for, whatever became of them.
    public private(set) var anchorWrites = 0
    /// Whether an anchor read reaches the substrate.
    public var anchorsReachable = true
    /// Devices that are off: frames to them are lost, and their timers wait
    /// until they wake (then they fire at once, as a suspended app's do).
    public var asleep: Set<DeviceID> = [] {
        didSet {
            let woken = deferred.filter { entry in entry.owner.map { !asleep.contains($0) } ?? true }
            deferred.removeAll { entry in woken.contains { $0 === entry } }
            for entry in woken {
                entry.deadline = now
                insert(entry)
            }
        }
    }
    /// Sees every frame as it is about to be delivered; returning `false` keeps
    /// it from its recipient (a test holds it back, to hand it over later with
    /// ``deliver(_:from:to:)``).
    public var intercept: ((_ from: DeviceID, _ to: DeviceID, _ bytes: [UInt8]) -> Bool)?
    /// Every frame sent, in order.
    public private(set) var sent: [(from: DeviceID, to: DeviceID, bytes: [UInt8])] = []

    private final class Entry: FleetScheduledTimer {
        var deadline: Int64
        let sequence: UInt64
        let owner: DeviceID?
        var action: (() -> Void)?

        init(deadline: Int64, sequence: UInt64, owner: DeviceID?, action: @escaping () -> Void) {
            self.deadline = deadline
            self.sequence = sequence
            self.owner = owner
            self.action = action
        }

        func cancel() { action = nil }
    }

    private var queue: [Entry] = []
    /// Timers that came due while their device was asleep.
    private var deferred: [Entry] = []
    private var sequence: UInt64 = 0
    private var drivers: [DeviceID: FleetDriver] = [:]
    private let owner = pthread_self()

    public init() {}

    /// The environment for one device's driver.
    public func environment(for device: DeviceID) -> FleetEnvironment {
        let endpoint = Endpoint(fleet: self, device: device)
        return FleetEnvironment(transport: endpoint, scheduler: endpoint, anchors: endpoint, directory: directory)
    }

    /// Frames sent to the driver's device reach it from now on.
    public func attach(_ driver: FleetDriver) { drivers[driver.replica.device] = driver }

    /// The device's frames go nowhere from now on (its driver is stopped).
    public func detach(_ device: DeviceID) { drivers.removeValue(forKey: device)?.stop() }

    /// The driver attached for `device`.
    public func driver(of device: DeviceID) -> FleetDriver? { drivers[device] }

    /// Adds a device to `account` with a new identity and an in-memory key store:
    /// the first device founds the account with a new account key, a later one
    /// is approved by the first device on the roster, which wraps every key it
    /// holds for it (``KeyRing/wrappedKeys(for:account:)``). The driver reads the directory and starts.
    /// - Parameters:
    ///   - path: the replica file (`":memory:"` for none).
    public func addDevice(account: AccountID, path: String = ":memory:", configuration: FleetConfiguration = FleetConfiguration()) throws -> FleetDriver {
        let identity = try DeviceIdentity.generate()
        let keys = MemoryKeyStore()
        if let roster = try? directory.roster(of: account) {
            guard let approver = roster.members.compactMap({ drivers[$0] }).min(by: { $0.replica.device < $1.replica.device }),
                let approverIdentity = approver.identity, let ring = try approver.keyStore?.load(), ring.newestEpoch != nil
            else { throw RosterError.unknownAccount(account) }
            try directory.append(
                try RosterChange.approval(of: identity.deviceID, signingKey: try identity.signingKey(), by: approverIdentity, account: account, index: roster.version),
                to: account)
            for wrapped in try ring.wrappedKeys(for: identity.deviceID, account: account) { try directory.publish(wrapped) }
        } else {
            try directory.found(try Roster.founding(account: account, by: identity))
            try keys.save(KeyRing(identity: identity, accountKeys: [1: AccountKey.generate()]))
        }
        let replica = try Replica.create(at: path, account: account, device: identity.deviceID, options: Replica.Options(stampFloor: keys))
        let driver = try FleetDriver(
            replica: replica, identity: identity, keyStore: keys, environment: environment(for: identity.deviceID), configuration: configuration)
        attach(driver)
        driver.start()
        // Every device of the account reads the directory: the newcomer is on everyone's roster.
        for member in drivers.values where member.replica.account == account { member.refreshDirectory() }
        return driver
    }

    /// Hands `bytes` to `to` as if `from` had just sent them (a frame a test held back).
    public func deliver(_ bytes: [UInt8], from: DeviceID, to: DeviceID) {
        enqueue(after: frameLatencyMilliseconds, owner: nil) { [weak self] in
            guard let self, !self.asleep.contains(to), self.intercept?(from, to, bytes) ?? true else { return }
            self.drivers[to]?.receive(bytes, from: from)
        }
    }

    /// Runs everything due within the next `milliseconds` of virtual time.
    public func run(forMilliseconds milliseconds: Int64) {
        let end = now + milliseconds
        while let next = queue.first, next.deadline <= end {
            queue.removeFirst()
            now = max(now, next.deadline)
            if let owner = next.owner, asleep.contains(owner) {
                if next.action != nil { deferred.append(next) }
                continue
            }
            guard let action = next.action else { continue }
            next.action = nil
            action()
        }
        now = end
    }

    /// Runs until nothing is queued but timers further off than `quietMilliseconds`
    /// (the periodic advertisement), or until `limitMilliseconds` have passed.
    /// - Returns: whether the fleet went quiet.
    @discardableResult
    public func runUntilQuiet(quietMilliseconds: Int64 = 1_000, limitMilliseconds: Int64 = 3_600_000) -> Bool {
        let end = now + limitMilliseconds
        while true {
            queue.removeAll { $0.action == nil }
            guard let next = queue.first else { return true }
            if next.deadline > now + quietMilliseconds { return true }
            guard next.deadline <= end else { return false }
            run(forMilliseconds: next.deadline - now)
        }
    }

    @discardableResult
    private func enqueue(after delay: Int64, owner: DeviceID?, _ action: @escaping () -> Void) -> Entry {
        sequence += 1
        let entry = Entry(deadline: now + max(0, delay), sequence: sequence, owner: owner, action: action)
        insert(entry)
        return entry
    }

    /// Queues after every entry due at the same time or earlier: first queued, first run.
    private func insert(_ entry: Entry) {
        var low = 0
        var high = queue.count
        while low < high {
            let middle = (low + high) / 2
            if queue[middle].deadline <= entry.deadline { low = middle + 1 } else { high = middle }
        }
        queue.insert(entry, at: low)
    }

    /// One device's side of the fleet.
    private final class Endpoint: FleetTransport, FleetScheduler, AnchorSubstrate {
        unowned let fleet: MemoryFleet
        let device: DeviceID

        init(fleet: MemoryFleet, device: DeviceID) {
            self.fleet = fleet
            self.device = device
        }

        func send(_ bytes: [UInt8], from sender: DeviceID, to recipient: DeviceID) {
            fleet.sent.append((sender, recipient, bytes))
            fleet.deliver(bytes, from: sender, to: recipient)
        }

        var monotonicMilliseconds: Int64 { fleet.now }

        func schedule(afterMilliseconds milliseconds: Int64, _ action: @escaping () -> Void) -> any FleetScheduledTimer {
            fleet.enqueue(after: milliseconds, owner: device, action)
        }

        func assertOnOwner() {
            assert(pthread_equal(pthread_self(), fleet.owner) != 0, "a MemoryFleet is used from one thread only")
        }

        func writeAnchor(_ sealed: [UInt8], of account: AccountID, completion: @escaping (Result<Void, AnchorError>) -> Void) {
            fleet.anchorWrites += 1
            let policy = fleet.anchorPolicy
            guard policy != .hang else { return }
            fleet.enqueue(after: fleet.anchorLatencyMilliseconds, owner: device) { [fleet] in
                guard policy == .land else { return completion(.failure(AnchorError(.unavailable, "the anchor write was made to fail"))) }
                fleet.anchors.writeAnchor(sealed, of: account, completion: completion)
            }
        }

        func readAnchor(of account: AccountID, completion: @escaping (Result<[UInt8]?, AnchorError>) -> Void) {
            fleet.enqueue(after: fleet.anchorLatencyMilliseconds, owner: device) { [fleet] in
                guard fleet.anchorsReachable else { return completion(.failure(AnchorError(.unavailable, "the anchor substrate is unreachable"))) }
                completion(.success(fleet.anchors.bytes(of: account)))
            }
        }
    }
}
