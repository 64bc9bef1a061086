import Foundation
import Stele
import SteleSQL

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
    /// What happened, counted.
    public struct Statistics: Sendable, Equatable {
        public var frames = 0
        public var bytes = 0
        /// Writes made: by the fleet's devices (the workload), and by the hub's
        /// clients (``clientOperations`` of them).
        public var operations = 0
        public var deletes = 0
        /// The writes a mirror or ledger client's user made (a put, a delete, a set
        /// member added or removed, an app's write), counted in ``operations`` too;
        /// their syncs, retries and resets are no writes, and are not counted.
        public var clientOperations = 0
        /// Faults injected, by kind (`loss`, `dup`, `crash`, `restore`, ...).
        public var faults: [String: Int] = [:]
        /// Frames that were in flight to a device when it crashed or was restored, and were lost.
        public var framesDroppedInFlight = 0
    }

    public let seed: UInt64
    /// The own account, its contacts and their directory.
    public internal(set) var accounts: SimulatedAccounts
    /// The own account.
    public var account: AccountID { accounts.account }
    public internal(set) var now: Int64 = 0
    /// The network between the devices: conditions, partitions, reachability.
    public internal(set) var virtualNetwork = VirtualNetwork()
    /// How the network behaves (delay, loss, duplication); `heal` restores perfect conditions.
    public var network: VirtualNetwork.Conditions {
        get { virtualNetwork.conditions }
        set { virtualNetwork.conditions = newValue }
    }
    public let oracle = Oracle()
    public internal(set) var statistics = Statistics()
    /// The nodes' configuration; collection (`gc on`) is on unless switched off.
    public internal(set) var configuration: FleetConfiguration
    /// The anchor substrate (001 §7): a store a device restore does not touch.
    public let anchors = MemoryAnchorStore()
    /// The account's first key (derived from the seed); a revoke rotates to a new one.
    public var accountKey: AccountKey { accounts.accountKey }
    /// The accounts' rosters and wrapped keys (``Directory``), in process: joins
    /// and revokes go through it, and every device's driver reads it.
    public var directory: MemoryDirectory { accounts.directory }
    /// The anchor substrate's state: reachable or not, and what its next write does.
    public struct AnchorSubstrate: Sendable, Equatable {
        public var isDown = false
        public var failNextWrite = false
        public var delayNextWriteMilliseconds: Int64?
        /// How long a read or write takes when nothing is wrong.
        public var latencyMilliseconds: Int64 = 150
    }
    public var anchorSubstrate = AnchorSubstrate()
    /// The anchor as `anchor backup as NAME` found it (`nil` inside: there was none).
    var anchorBackups: [String: [UInt8]?] = [:]
    /// Every device ever added, in the order they joined, revoked ones and
    /// contacts' devices included.
    public internal(set) var everyDevice: [SimulatedDevice] = []
    /// The roster: the own account's devices in the order they joined, without revoked ones.
    public var devices: [SimulatedDevice] { everyDevice.filter { !$0.isRevoked && $0.contact == nil } }
    /// The contact accounts, in the order they were added.
    public var contacts: [SimulatedAccounts.Contact] { accounts.contacts }
    /// Conversations (`conversation NS with NAME`): a messages namespace of the
    /// own account bound to a contact, and the same name on the contact's side.
    public var conversations: [(namespace: String, contact: String)] { accounts.conversations }
    /// The namespaces every device declares.
    public internal(set) var namespaces: [(name: String, kind: NamespaceKind)] = []
    /// Groups of devices that can reach each other (`nil`: no partition).
    public var partition: [Set<DeviceID>]? { virtualNetwork.partition }
    /// A timeline of what happened, for reports.
    public internal(set) var timeline: [TimelineEntry] = []
    /// Whether every write adds the tombstones retained across the fleet to the
    /// timeline (the report's tombstone line). Off by default: counting reads
    /// every device's store after every write, a tenth of a long run's time.
    public var recordsTombstoneCounts = false

    let folder: String
    /// The scenario's hub and its mirror clients, once `hub` started it.
    public internal(set) var hub: SimulatedHub?
    /// Where and how the devices' stores are kept.
    public let storage: Storage
    var random: SplitMix64
    /// Every queued event: put on it through ``enqueue(_:at:)``, which keeps ``queued``.
    var queue = EventQueue<Event>()
    /// What the queue holds that keeps the fleet from settling.
    var queued = QueuedTally()
    /// How many times ``inFlight()`` was asked (debug builds check the tally now and then).
    var inFlightChecks = 0
    var backups: [String: (device: String, path: String, time: Int64, keys: MemoryKeyStore, forgettingMark: Int)] = [:]
    /// Whether devices keep a stamp floor in their key store (``StampFloor``).
    /// Off only for tests that show what the floor prevents: set it before
    /// adding devices.
    public var usesStampFloors = true
    var hasher = EventLogHasher()
    let wireHasher = RunningDigest()
    /// Whether every frame delivered is kept in ``wire`` (tests that compare runs byte for byte).
    public var recordsWire = false
    /// Every sealed frame delivered, in order, when ``recordsWire`` is on.
    public internal(set) var wire: [[UInt8]] = []
    /// What frames tell the oracles (a contact's ops, leaks to a contact).
    var tap = OracleTap()
    /// Ops contacts' devices wrote, kept by an oracle nobody checks: the own
    /// account's oracle learns them when they land on its devices.
    var contactOracle: Oracle { tap.contactOracle }
    /// How long a deleting device must have been within a deliverer's reach for
    /// a delivery of the deleted text to count as a leak (``OracleTap``).
    static let leakReachMilliseconds = OracleTap.leakReachMilliseconds
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
    public internal(set) var failedOperations = 0
    /// Why the last operation was refused: by storage (``perform(_:_:)`` returned
    /// `false`) or by a rule of its kind (it returned `true`: the write happened nowhere).
    public internal(set) var lastRefusal: ReplicaError?
    /// The last storage failure of an operation.
    public internal(set) var lastFailure: String?

    /// What the queue holds that keeps a fleet from settling (``isStillMoving()``):
    /// counted as events are queued and taken off, rather than found by scanning
    /// the queue, hundreds of events long, at every step of a `sync` (issue 22).
    struct QueuedTally {
        /// Frames in flight, by sender.
        private(set) var framesFrom: [DeviceID: Int] = [:]
        private(set) var anchorWrites = 0
        private(set) var anchorReads = 0

        /// Counts `event` in (`delta` 1) or out (-1).
        mutating func count(_ event: Event, _ delta: Int) {
            switch event {
            case .deliver(let from, _, _, _):
                let count = framesFrom[from, default: 0] + delta
                framesFrom[from] = count == 0 ? nil : count
            case .anchorWrite: anchorWrites += delta
            case .anchorRead: anchorReads += delta
            case .timer: break
            }
        }
    }

    enum Event {
        case deliver(from: DeviceID, to: DeviceID, sealed: [UInt8], plain: [UInt8])
        case timer(device: DeviceID, timer: SimulatedTimer)
        /// `forgettingMark`: the account's ``Oracle/forgettingMark`` when the snapshot was taken.
        case anchorWrite(device: DeviceID, sealed: [UInt8], takenAt: Int64, forgettingMark: Int, completion: (Result<Void, AnchorError>) -> Void)
        case anchorRead(device: DeviceID, completion: (Result<[UInt8]?, AnchorError>) -> Void)
    }

    /// Where the devices' stores live. Either way each store is a real SQLite
    /// file in WAL mode, a crash drops what the process held and reopens the
    /// file, and a backup is a real copy of it: the simulated process never
    /// dies, so what the operating system holds survives every simulated crash,
    /// and whether the file was synced to a disk is nothing the run can observe.
    public enum Storage: Sendable, Equatable {
        /// As a device keeps it: the temporary directory, `synchronous=NORMAL`.
        case asShipped
        /// Memory-backed files (`/dev/shm` where there is one) written without
        /// syncs, each held through its device's one handle (`locking_mode=EXCLUSIVE`:
        /// no lock calls per transaction): the same bytes, without the disk (the
        /// default). A test that opens a second handle on a device's file picks
        /// ``asShipped``.
        case inMemoryFiles

        var folder: URL {
            var shared: ObjCBool = false
            if self == .inMemoryFiles, FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &shared), shared.boolValue,
                FileManager.default.isWritableFile(atPath: "/dev/shm")
            {
                return URL(fileURLWithPath: "/dev/shm")
            }
            return FileManager.default.temporaryDirectory
        }

        var sqlite: Connection.Configuration {
            var configuration = Connection.Configuration.standard
            if self == .inMemoryFiles {
                configuration.synchronous = "OFF"
                configuration.lockingMode = "EXCLUSIVE"
            }
            return configuration
        }
    }

    /// Creates an empty world; add devices with ``addDevice(_:)``.
    public init(seed: UInt64, configuration: FleetConfiguration = FleetConfiguration(collects: true), storage: Storage = .inMemoryFiles) throws {
        self.seed = seed
        self.configuration = configuration
        self.storage = storage
        accounts = try SimulatedAccounts(seed: seed)
        random = SplitMix64(seed: seed)
        _ = Self.abandonedFoldersRemoved
        folder = storage.folder.appendingPathComponent("stele-sim-\(getpid())-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder + "/backups", withIntermediateDirectories: true)
    }

    /// Once per process: the folders of runs whose process is gone (killed, or
    /// ended by `exit` with a run alive) are removed, since `/dev/shm` is memory.
    /// A folder is named after its process; one whose process no longer exists and
    /// that nothing has changed for an hour is abandoned (the hour spares a process
    /// of another PID namespace sharing the folder).
    private static let abandonedFoldersRemoved: Void = {
        for storage in [Storage.inMemoryFiles, .asShipped] { removeAbandonedFolders(in: storage.folder.path) }
    }()

    static func removeAbandonedFolders(in parent: String, olderThan age: TimeInterval = 3600) {
        let files = FileManager.default
        guard let names = try? files.contentsOfDirectory(atPath: parent) else { return }
        for name in names where name.hasPrefix("stele-sim-") {
            guard let pid = Int32(name.dropFirst("stele-sim-".count).prefix { $0 != "-" }), pid != getpid(), kill(pid, 0) == -1, errno == ESRCH else { continue }
            let path = parent + "/" + name
            guard let changed = (try? files.attributesOfItem(atPath: path))?[.modificationDate] as? Date, -changed.timeIntervalSinceNow > age else { continue }
            try? files.removeItem(atPath: path)
        }
    }

    deinit {
        everyDevice.removeAll()
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Allows or forbids barrier rounds on every device (`gc on` / `gc off`).
    /// Switching it on prompts every online device to look for a round at once,
    /// the contacts' devices too (they held rounds back alike).
    public func setCollection(_ allowed: Bool) {
        let switchedOn = allowed && !configuration.collects
        configuration.collects = allowed
        for device in everyDevice { device.driver.setConfiguration(configuration) }
        if switchedOn { for device in everyDevice where !device.isRevoked && device.isOnline { device.driver.nudge() } }
    }
}

/// The oracle was asked to judge a fleet it cannot judge yet.
public struct OracleCannotCheck: Error, Sendable, CustomStringConvertible {
    public let reason: String
    public var description: String { "the oracle could not check: \(reason)" }
}

/// A call the simulation cannot carry out as asked (a name used twice): nothing changed.
public struct SimulationInputError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
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
