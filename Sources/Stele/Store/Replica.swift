import Foundation
import SteleSQL

/// One device's replica: a single SQLite file (WAL) holding the account id, the
/// device id, the fleet generation and the namespaces (DESIGN §4).
///
/// A replica is not `Sendable`: it owns one SQLite connection and is used from
/// one actor or serial context at a time (STYLE "SQLite"). Its change events are
/// an `AsyncSequence` that can be consumed anywhere (``changes(bufferingPolicy:)``).
public final class Replica {
    /// What a replica is opened with.
    public struct Options {
        /// The wall clock for hybrid counters and timestamps.
        public var clock: any WallClock
        /// Randomness for event ids (seeded by the simulator for replayable runs).
        public var random: any RandomNumberGenerator
        /// Open without writing anything: reads work, writes throw ``ReplicaError/Code/readOnly``.
        public var readOnly: Bool
        /// SQLite failures to force (tests and the simulator: a seam, not API).
        package var faults: SQLiteFaultPlan?
        /// How the connection is set up (the simulator turns syncs off: a crash it
        /// simulates keeps the operating system's page cache, so a sync changes
        /// nothing it can observe).
        package var sqlite: Connection.Configuration = .standard
        /// Where the device's ``StampFloor`` is kept: its ``KeyStore``, outside the
        /// replica file and its backups. With one, a replica restored from a backup
        /// never issues a counter or a stamp it issued before (``StampFloor``);
        /// without one (`nil`), it may, and recovery may then take writes made right
        /// after the restore as seen by the fleet. Every handle and process that
        /// writes the file must share the same store.
        public var stampFloor: (any StampFloorStore)?
        /// Off only to measure what digest maintenance costs; a store written without
        /// it cannot sync until reopened with it on (its digests are rebuilt at open).
        @_spi(Benchmarks) public var maintainsDigests = true
        /// Off only to measure what following other handles' writes costs
        /// (`sync.other_writers_check`): such a handle ignores them.
        @_spi(Benchmarks) public var followsOtherWriters = true

        public init(
            clock: any WallClock = SystemWallClock(),
            random: any RandomNumberGenerator = SystemRandomNumberGenerator(),
            readOnly: Bool = false,
            stampFloor: (any StampFloorStore)? = nil
        ) {
            self.clock = clock
            self.random = random
            self.readOnly = readOnly
            self.stampFloor = stampFloor
        }
    }

    /// The file path, or `:memory:`.
    public let path: String
    /// The account this store belongs to.
    public let account: AccountID
    /// The device this store belongs to.
    public let device: DeviceID
    /// The device id's 32 bytes, as leaf encodings need them.
    let deviceBytes: [UInt8]
    /// The device's fleet generation (001 §7). Zero until the barrier collects.
    public internal(set) var generation: UInt64
    /// Whether the store was opened read-only.
    public let isReadOnly: Bool

    let connection: Connection
    let clock: any WallClock
    var random: any RandomNumberGenerator
    let feed = ChangeFeed()

    /// The last own counter used (hybrid: DESIGN §4 "Version vectors").
    var ownCounter: UInt64
    /// The last tombstone sequence number used (``nextTombstoneSequence()``).
    var tombstoneSequence: UInt64
    /// Every tombstone at or below this sequence number has been collected
    /// (`barrier.collected_through`, kept in memory: rounds consult it on every change).
    var collectedThrough: UInt64 = 0
    var hybridClock: HybridClock
    private var countersDirty = false
    var devices: DeviceTable
    var declared: [String: NamespaceDeclaration]
    /// Hot-statement caches by namespace id and kind: an id a rolled-back
    /// declaration used may come back as another kind's, whose statements differ.
    private var slotsByNamespace: [NamespaceSlotsKey: StatementSlots] = [:]
    /// Each replicated namespace's digest (``NamespaceDigest``), by namespace id.
    var digests: [Int64: NamespaceDigest] = [:]
    /// Digest changes of the open transaction, undone if it rolls back.
    var digestUndo: [(Int64, DigestChange)] = []
    /// The SHA-256 context leaf hashes are computed with.
    let hasher = SHA256()
    /// Reused storage for the leaf encodings of local writes.
    var scratch = ByteWriter(capacity: 4_096)
    /// Whether writes maintain digests: always, except for the benchmark that
    /// measures what maintaining them costs (`sync.digest_overhead`).
    let maintainsDigests: Bool
    /// Whether this handle catches up with other handles' writes (always, but for a benchmark baseline).
    let followsOtherWriters: Bool
    /// Where the stamp floor is kept, and the floor known to be saved there
    /// (``Replica+StampFloor.swift``).
    let floorStore: (any StampFloorStore)?
    var reservedFloor: StampFloor?
    private var pendingEvents: [ChangeEvent] = []
    private var observers: [(ChangeEvent) -> Void] = []
    /// SQLite's `data_version` when this handle last caught up with the file
    /// (``catchUpWithOtherWriters()``).
    var seenDataVersion: Int64 = 0
    /// The last outbox read of each conversation (by namespace id), with the
    /// state of its tables it was read at (``MessageNamespace/outbox()``).
    var outboxes: [Int64: CachedOutbox] = [:]
    /// The conversations (by namespace id) whose tables' changes through this
    /// handle are counted (``SteleSQL/Connection/countChanges(of:as:)``).
    var watchedConversations: Set<Int64> = []
    /// How many times an outbox was read whole from the file (for the tests).
    var outboxReads = 0
    /// How many times a cached outbox read again only the messages changed since (for the tests).
    var outboxPatches = 0
    /// The storage error of an operation that failed inside the open batch.
    private var storageFailure: (any Error)?
    private var collectingEvents = false

    private init(
        path: String, connection: Connection, identity: StoredIdentity, options: Options
    ) throws {
        self.path = path
        self.connection = connection
        self.account = identity.account
        self.device = identity.device
        self.deviceBytes = identity.device.bytes
        self.generation = identity.generation
        self.ownCounter = identity.ownCounter
        self.tombstoneSequence = identity.tombstoneSequence
        self.hybridClock = HybridClock(last: identity.clock)
        self.isReadOnly = options.readOnly
        self.maintainsDigests = options.maintainsDigests
        self.followsOtherWriters = options.followsOtherWriters
        self.floorStore = options.readOnly ? nil : options.stampFloor
        self.clock = options.clock
        self.random = options.random
        self.devices = try DeviceTable.load(connection)
        self.declared = try Self.loadNamespaces(connection)
        self.collectedThrough = UInt64(try connection.scalarInt("SELECT collected_through FROM barrier WHERE id = 1") ?? 0)
        guard devices.index(of: device) == DeviceTable.ownIndex else {
            throw ReplicaError(.corrupt, "the store's device table does not list its own device first; the file is damaged")
        }
        try startAboveStampFloor()
        seenDataVersion = try connection.dataVersion()
        try rebuildDigests()
    }

    deinit { feed.finish() }

    // MARK: - Opening

    /// Creates a new store at `path` (or an in-memory one for `:memory:`).
    /// - Throws: ``ReplicaError`` `storeExists` if a non-empty file is already there.
    public static func create(
        at path: String, account: AccountID, device: DeviceID, options: Options = Options()
    ) throws -> Replica {
        guard !options.readOnly else { throw ReplicaError(.readOnly, "cannot create a store read-only") }
        guard !fileHasContent(path) else {
            throw ReplicaError(.storeExists, "a file already exists at \(path); open it instead, or choose another path")
        }
        let existedBefore = FileManager.default.fileExists(atPath: path)
        do {
            let connection = try Connection(path: path, mode: .readWriteCreate, configuration: options.sqlite, faults: options.faults)
            let now = options.clock.nowMilliseconds()
            try connection.transaction {
                try ReplicaSchema.migrator.migrate(connection)
                try connection.executeScript("PRAGMA application_id = \(ReplicaSchema.applicationID)")
                try connection.execute(
                    "INSERT INTO replica (id, account, device, created_ms) VALUES (1, ?, ?, ?)",
                    [.blob(account.bytes), .blob(device.bytes), .integer(now)])
                try connection.execute("INSERT INTO devices (idx, id) VALUES (?, ?)", [.integer(DeviceTable.ownIndex), .blob(device.bytes)])
            }
            let identity = StoredIdentity(account: account, device: device, generation: 0, ownCounter: 0, clock: .zero, tombstoneSequence: 0)
            return try Replica(path: path, connection: connection, identity: identity, options: options)
        } catch {
            // Leave nothing half-made behind: remove the file if we made it, or empty
            // it again if it was an empty file we were asked to fill.
            if path != ":memory:" {
                if existedBefore {
                    _ = FileManager.default.createFile(atPath: path, contents: Data())
                    for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                } else {
                    removeStoreFiles(path)
                }
            }
            throw error
        }
    }

    /// Opens an existing store.
    /// - Parameters:
    ///   - account: the account the store must belong to, or `nil` to accept any (inspection).
    ///   - device: the device the store must belong to, or `nil` to accept any.
    /// - Throws: ``ReplicaError``: `storeMissing`, `notAStore` (not SQLite, or another
    ///   application's database), `newerFormat`, `corrupt`, `accountMismatch`,
    ///   `deviceMismatch`. In every case the file is left untouched.
    public static func open(
        at path: String, account: AccountID? = nil, device: DeviceID? = nil, options: Options = Options()
    ) throws -> Replica {
        var isFolder: ObjCBool = false
        if path != ":memory:", FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            throw ReplicaError(.notAStore, "\(path) is a folder, not a Stele store; name the store file inside it")
        }
        guard path != ":memory:", fileHasContent(path) else {
            throw ReplicaError(.storeMissing, "no Stele store at \(path); check the path, or create the store first")
        }
        let connection: Connection
        do {
            connection = try Connection(
                path: path, mode: options.readOnly ? .readOnly : .readWrite, configuration: nil, faults: options.faults)
        } catch let error as SQLiteError {
            throw ReplicaError(.storeMissing, "cannot open \(path): \(error.message)", cause: error)
        }
        // A reader too waits out another process's lock (its WAL recovery as it
        // opens the file, its commit) instead of failing at once.
        connection.setBusyTimeout(milliseconds: options.sqlite.busyTimeoutMilliseconds)
        // Validate before anything writes: a foreign file must not be touched.
        let identity = try readIdentity(connection, path: path, readOnly: options.readOnly)
        if let account, account != identity.account {
            throw ReplicaError(
                .accountMismatch,
                "the store at \(path) belongs to account \(identity.account), not \(account); open the right store for this account")
        }
        if let device, device != identity.device {
            throw ReplicaError(
                .deviceMismatch,
                "the store at \(path) belongs to device \(identity.device.hex), not \(device.hex); each device opens its own store")
        }
        if !options.readOnly {
            try connection.configure(options.sqlite)
            try connection.transaction { try ReplicaSchema.migrator.migrate(connection) }
        }
        return try Replica(path: path, connection: connection, identity: identity, options: options)
    }

    /// Opens the store at `path`, creating it first if there is none.
    public static func openOrCreate(
        at path: String, account: AccountID, device: DeviceID, options: Options = Options()
    ) throws -> Replica {
        if path == ":memory:" || !fileHasContent(path) {
            return try create(at: path, account: account, device: device, options: options)
        }
        return try open(at: path, account: account, device: device, options: options)
    }

    // MARK: - Events

    /// The replica's change events, from now on, as an `AsyncSequence`.
    ///
    /// Events arrive after the transaction that caused them commits, in order.
    /// The stream ends when the replica is released.
    public func changes(
        bufferingPolicy: AsyncStream<ChangeEvent>.Continuation.BufferingPolicy = .unbounded
    ) -> AsyncStream<ChangeEvent> {
        feed.subscribe(bufferingPolicy: bufferingPolicy)
    }

    /// Calls `observer` with every change event, synchronously, right after the
    /// transaction that caused it commits, on the replica's own context. For code
    /// that already runs beside the replica (the simulator's oracle, a UI model on
    /// the same actor); elsewhere use ``changes(bufferingPolicy:)``.
    public func observeChanges(_ observer: @escaping (ChangeEvent) -> Void) {
        observers.append(observer)
    }

    // MARK: - Writing

    /// Runs `body` as one transaction: every write inside commits together or not
    /// at all, and change events are delivered once, after the commit.
    ///
    /// Each operation inside is atomic on its own: it either applies fully or
    /// throws. An operation that throws a ``ReplicaError`` (bad input, a broken
    /// rule) has written nothing and the batch may carry on; one that fails in
    /// storage (a `SQLiteError`: disk full, I/O) fails the whole batch, which then
    /// rolls back and rethrows even if `body` caught the error. A nested `write`
    /// is a savepoint: if it throws, only its own work is undone.
    /// - Throws: whatever `body` throws (everything it wrote is rolled back), or a
    ///   ``ReplicaError`` `readOnly`, or a `SQLiteError` from the commit.
    @discardableResult
    public func write<T>(_ body: () throws -> T) throws -> T {
        guard !isReadOnly else {
            throw ReplicaError(.readOnly, "the store at \(path) was opened read-only; open it without readOnly to write")
        }
        let outermost = !connection.isInTransaction
        if outermost {
            collectingEvents = feed.hasSubscribers || !observers.isEmpty
            storageFailure = nil
        }
        let eventMark = pendingEvents.count
        let deviceMark = devices.count
        let namespaceMark = declared.count
        let failureMark = storageFailure
        let digestMark = digestUndo.count
        let result: T
        do {
            result = try connection.transaction {
                // With the write lock held, nobody else can commit until this does:
                // what another handle wrote before is taken in first (counters,
                // device indexes, namespaces, digests).
                if outermost { try catchUpWithOtherWriters() }
                let result = try body()
                if let storageFailure {
                    // An operation failed half way and the body carried on: nothing commits.
                    throw storageFailure
                }
                if outermost && countersDirty { try persistCounters() }
                return result
            }
        } catch {
            pendingEvents.removeSubrange(eventMark...)
            // Interned devices and declared namespaces of the undone work are gone from the file.
            if devices.count != deviceMark { devices = (try? DeviceTable.load(connection)) ?? devices }
            if declared.count != namespaceMark {
                declared = (try? Self.loadNamespaces(connection)) ?? declared
                digests = digests.filter { entry in declared.values.contains { $0.id == entry.key } }
                slotsByNamespace = slotsByNamespace.filter { entry in declared.values.contains { $0.id == entry.key.id && $0.kind == entry.key.kind } }
            }
            undoDigestChanges(after: digestMark)
            // The rollback (or savepoint rollback) undid any half-done operation.
            storageFailure = outermost ? nil : failureMark
            throw error
        }
        if outermost {
            countersDirty = false
            digestUndo.removeAll(keepingCapacity: true)
            let events = pendingEvents
            pendingEvents.removeAll(keepingCapacity: true)
            feed.publish(events)
            for event in events { for observer in observers { observer(event) } }
            checkInvariants()
        }
        return result
    }

    /// Runs one public operation (a put, a delete, a merge): alone it is its own
    /// transaction; inside a batch it runs without a savepoint, and a storage
    /// failure marks the batch failed (see ``write(_:)``). Operations check their
    /// input and rules before their first write, so a ``ReplicaError`` leaves nothing behind.
    func operation<T>(_ body: () throws -> T) throws -> T {
        guard connection.isInTransaction else { return try write(body) }
        guard !isReadOnly else {
            throw ReplicaError(.readOnly, "the store at \(path) was opened read-only; open it without readOnly to write")
        }
        do {
            return try body()
        } catch let error as ReplicaError {
            throw error
        } catch {
            if storageFailure == nil { storageFailure = error }
            throw error
        }
    }

    /// The hot-statement cache of one namespace, shared by all its handles.
    func statementSlots(for declaration: NamespaceDeclaration, count: Int) -> StatementSlots {
        let key = NamespaceSlotsKey(id: declaration.id, kind: declaration.kind)
        if let slots = slotsByNamespace[key] { return slots }
        let slots = StatementSlots(connection: connection, count: count)
        slotsByNamespace[key] = slots
        return slots
    }

    struct NamespaceSlotsKey: Hashable {
        let id: Int64
        let kind: NamespaceKind
    }

    func emit(_ event: @autoclosure () -> ChangeEvent) {
        if collectingEvents { pendingEvents.append(event()) }
    }

    /// The next own counter: `max(current + 1, wall-clock ms)`, so a device restored
    /// from an old backup does not reuse a counter it had used before (DESIGN §4).
    func nextOwnCounter(wallClockMilliseconds: Int64? = nil) -> UInt64 {
        let wall = UInt64(max(wallClockMilliseconds ?? clock.nowMilliseconds(), 0))
        ownCounter = min(max(ownCounter + 1, wall), VersionVector.maximumCounter)
        countersDirty = true
        return ownCounter
    }

    func nextTimestamp(wallClockMilliseconds: Int64? = nil) -> HybridTimestamp {
        countersDirty = true
        return hybridClock.next(wallClockMilliseconds: wallClockMilliseconds ?? clock.nowMilliseconds())
    }

    /// A counter and a timestamp for one write, reading the wall clock once.
    func nextStamp() -> (counter: UInt64, timestamp: HybridTimestamp) {
        let wall = clock.nowMilliseconds()
        return (nextOwnCounter(wallClockMilliseconds: wall), nextTimestamp(wallClockMilliseconds: wall))
    }

    /// Keeps the own counter above anything a sibling has seen from this device
    /// (after a restore, siblings may know later counters than the backup did).
    func observe(_ vector: VersionVector) {
        let seen = vector[device]
        if seen > ownCounter {
            ownCounter = seen
            countersDirty = true
        }
    }

    func observe(_ timestamp: HybridTimestamp) {
        if timestamp > hybridClock.last {
            hybridClock.observe(timestamp)
            countersDirty = true
        }
    }

    private func persistCounters() throws {
        // Nothing issued here may leave this transaction before the floor covers it.
        try reserveStampFloorIfNeeded()
        try connection.execute(
            "UPDATE replica SET own_counter = ?, clock = ?, tombstone_seq = ? WHERE id = 1",
            [.integer(Int64(ownCounter)), .integer(Int64(bitPattern: hybridClock.last.rawValue)), .integer(Int64(tombstoneSequence))])
    }

    /// The sequence number for a tombstone being written now (persisted with the
    /// transaction, like the own counter; numbers a rollback skips are never reused
    /// in memory and harmless on disk).
    func nextTombstoneSequence() -> Int64 {
        tombstoneSequence += 1
        countersDirty = true
        return Int64(tombstoneSequence)
    }

    /// Records the device's fleet generation (001 §7). The barrier (issue 5) is the
    /// one caller that moves it in the library; tests use it to open a gap.
    func setGeneration(_ value: UInt64) throws {
        try write {
            try connection.execute("UPDATE replica SET generation = ? WHERE id = 1", [.integer(Int64(value))])
        }
        generation = value
    }

    /// Copies the store into a file with SQLite's online-backup API (what an OS
    /// device backup captures).
    /// - Throws: `SQLiteError` if the destination cannot be written.
    public func backup(to destination: String) throws {
        try connection.backup(to: destination)
    }

    /// The SQLite failure plan forced on this store's connection (tests and the simulator: a seam, not API).
    package var faults: SQLiteFaultPlan? {
        get { connection.faults }
        set { connection.faults = newValue }
    }

    /// Cheap consistency checks after every committed write, in debug builds.
    func checkInvariants() {
        #if DEBUG
        // preconditions, not asserts: scripts/test builds the debug configuration
        // optimized, where asserts would be compiled out.
        precondition(devices.index(of: device) == DeviceTable.ownIndex, "own device lost its index")
        precondition(!connection.isInTransaction, "a write left a transaction open")
        precondition(pendingEvents.isEmpty, "events left unpublished")
        #endif
    }
}
