import Foundation
import Stele
import SteleSQL

/// A ledger client of the simulated hub (SCENARIOS `client C ledger`): an app
/// that owns its store (a plain SQLite table, ``SQLiteTableSource``), and the
/// shipped ``Ledger``, ``LedgerSync`` and ``LedgerDriver`` beside it, each file
/// its own, on the client's own clock.
public final class SimulatedLedgerClient {
    public let name: String
    let storePath: String
    let ledgerPath: String
    unowned let hub: SimulatedHub
    let clock: ManualWallClock
    private(set) var skew: Int64 = 0
    public private(set) var source: SQLiteTableSource
    public private(set) var ledger: Ledger
    private(set) var driver: LedgerDriver
    private var pendingCrash: MirrorDriver.CrashPoint?
    public private(set) var restarts = 0
    /// Why the last sync call stopped, when sync is halted or refused.
    public private(set) var lastRefusal: LedgerError?
    /// Records this client's app deleted ("kind id"): the only tombstones it may make.
    private(set) var appDeleted: Set<String> = []
    /// The app's store is empty because its user deleted everything (not a wipe).
    private var emptiedByUser = false
    /// A wipe happened since the last pass (or reset): the app cannot vouch for an empty store.
    private var wipedSincePass = false
    /// What the app's user deleted since the last pass, of what the ledger had seen: the
    /// app confirms as many deletions as are still deletions (an app counts what its user removed).
    private var deletedSincePass: Set<String> = []

    init(name: String, hub: SimulatedHub) throws {
        self.name = name
        self.hub = hub
        storePath = hub.folder + "/client-\(name)-app.sqlite"
        ledgerPath = hub.folder + "/client-\(name).ledger"
        clock = ManualWallClock(milliseconds: SimulatedHub.epochStart + hub.simulation.now)
        source = try SQLiteTableSource(path: storePath)
        (ledger, driver) = try Self.open(ledgerPath, source, clock, hub)
        driver = makeDriver()
    }

    private static func open(_ path: String, _ source: SQLiteTableSource, _ clock: ManualWallClock, _ hub: SimulatedHub) throws -> (Ledger, LedgerDriver) {
        var configuration = Ledger.Configuration()
        configuration.clock = clock
        // The simulated app counts what its user deletes and confirms exactly that, so any
        // tombstone beyond it is refused (the default guard, for apps that do not count,
        // refuses only a wave over half the store).
        configuration.massDeletionFraction = 0
        let ledger = try Ledger(path: path, source: source, account: hub.account.hex, hub: "simulated", configuration: configuration)
        return (ledger, LedgerDriver(sync: LedgerSync(ledger: ledger), transport: Transport(), sleepUntil: { _ in }))
    }

    private func makeDriver() -> LedgerDriver {
        let transport = Transport()
        transport.client = self
        return LedgerDriver(sync: LedgerSync(ledger: ledger), transport: transport) { [unowned self] target in
            let wait = target - clock.nowMilliseconds()
            if wait > 0 { hub.simulation.advance(byMilliseconds: wait) }
            tick()
        }
    }

    /// Carries the client's requests into the simulated hub.
    final class Transport: MirrorTransport {
        weak var client: SimulatedLedgerClient?
        func exchange(_ request: MirrorRequest) -> MirrorReply {
            guard let client else { return .unreachable("the client is gone") }
            return client.hub.exchange(request, from: client.name)
        }
    }

    func tick() { clock.set(milliseconds: SimulatedHub.epochStart + hub.simulation.now + skew) }

    /// The process restarts: the store and the ledger opened again from their files.
    func restart() throws {
        restarts += 1
        source = try SQLiteTableSource(path: storePath)
        (ledger, _) = try Self.open(ledgerPath, source, clock, hub)
        driver = makeDriver()
    }

    /// Whether sync is halted or refused until a reset.
    public var halted: Bool { ledger.halt != nil }

    func apply(_ statement: HubStatement) throws {
        tick()
        switch statement {
        case let .appWrite(_, kind, id, value):
            if let value {
                try source.put(kind: kind, id: id, payload: Array(value.utf8))
                emptiedByUser = false
            } else {
                // The app counts a deletion of what its store held and the ledger had seen.
                let stamped = try source.payload(kind: kind, id: id) != nil && (try? ledger.stamp(kind: kind, id: id))??.isTombstone == false
                try source.delete(kind: kind, id: id)
                appDeleted.insert("\(kind) \(id)")
                if stamped { deletedSincePass.insert("\(kind) \(id)") }
                // The user emptied the store only if this delete removed what the ledger had seen.
                if stamped, !wipedSincePass, try source.all().isEmpty { emptiedByUser = true }
            }
            hub.oracle.noteIntent([MirrorOracle.Target(kind: kind, id: id)])
        case .step(_, let step):
            try run(step)
        case .crashAt(_, let point):
            pendingCrash = point
        case .crash:
            try restart()
        case .skew(_, let milliseconds):
            skew = milliseconds
            tick()
        case .backupClient(_, let label):
            // The device's backup holds both files, as an OS backup of the app's container does.
            try Connection(path: storePath).backup(to: hub.folder + "/backups/client-\(label)-app.sqlite")
            if FileManager.default.fileExists(atPath: ledgerPath), !halted {
                try Connection(path: ledgerPath).backup(to: hub.folder + "/backups/client-\(label).ledger")
            }
        case .restoreClient(_, let label):
            try Connection(path: storePath).restore(from: hub.folder + "/backups/client-\(label)-app.sqlite")
            let ledgerBackup = hub.folder + "/backups/client-\(label).ledger"
            if FileManager.default.fileExists(atPath: ledgerBackup) {
                ledger.close()
                if FileManager.default.fileExists(atPath: ledger.haltNotePath) { try FileManager.default.removeItem(atPath: ledger.haltNotePath) }
                try SimulatedHub.copyDatabase(from: ledgerBackup, to: ledgerPath)
            }
            try restart()
        case .corruptLedger:
            try corrupt()
            hub.oracle.noteDisaster(.bookkeeping, at: name)
        case .wipeKeepingIdentity:
            try source.wipe(keepingIdentity: true)
            wipedSincePass = true
            hub.oracle.noteDisaster(.data, at: name)
            emptiedByUser = false
        default:
            throw SimulationInputError(message: "\(name) is a ledger client: its app writes with \(name) app put KIND ID VALUE and \(name) app delete KIND ID")
        }
    }

    private func run(_ step: HubStatement.ClientStep) throws {
        driver.crashPoint = pendingCrash
        driver.confirmingEmptyStore = emptiedByUser
        driver.confirmingDeletions = try deletedSincePass.filter { key in
            let parts = key.split(separator: " ", maxSplits: 1).map(String.init)
            return try source.payload(kind: parts[0], id: parts[1]) == nil
        }.count
        defer { driver.crashPoint = nil }
        hub.simulation.trace?(
            String(format: "%10.3f s  %@  %@ (the app confirms %d deletions%@)", Double(hub.simulation.now) / 1_000, name, step.rawValue, deletedSincePass.count,
                emptiedByUser ? " and an empty store" : ""))
        defer {
            // What the step's pages brought counts as this client's copy only where it is held now.
            hub.oracle.settleReceived(by: name) { record in
                if let payload = record.payload {
                    return (try? source.payload(kind: record.kind, id: record.id)).flatMap { $0 }.map { Data($0).base64EncodedString() } == payload
                }
                guard let stamp = (try? ledger.stamp(kind: record.kind, id: record.id)) ?? nil else { return false }
                return stamp.isTombstone && stamp.modifiedAt >= record.modifiedAt
            }
            // `STELE_TRACE_RECORD="KIND ID"` with --trace: the ledger's stamp and outbox row of one record after each step.
            if let watch = ProcessInfo.processInfo.environment["STELE_TRACE_RECORD"]?.split(separator: " ").map(String.init), watch.count == 2 {
                let stamp = try? ledger.stamp(kind: watch[0], id: watch[1])
                hub.simulation.trace?(
                    "\(name) after \(step.rawValue): stamp \(stamp.map { String(describing: $0) } ?? "none"), outbox \((try? ledger.outbox().filter { $0.kind == watch[0] && $0.id == watch[1] }) ?? [])")
            }
        }
        do {
            switch step {
            case .undo: throw SimulationInputError(message: "\(name) is a ledger client: its app has no undo")
            case .flush: _ = try driver.flush()
            case .pull: _ = try driver.pull()
            case .sync: try driver.syncUntilQuiet()
            case .retry: try ledger.retryFailed()
            case .replay: _ = try driver.replay()
            case .wipe:
                try source.wipe()
                wipedSincePass = true
                hub.oracle.noteDisaster(.data, at: name)
                emptiedByUser = false
            case .reset:
                try ledger.reset()
                wipedSincePass = false
                lastRefusal = nil
            }
            if step == .flush || step == .sync { pendingCrash = nil }
            if step == .flush || step == .sync || step == .replay { try passed() }
            if step != .wipe && step != .reset { lastRefusal = nil }
        } catch is MirrorDriver.Crashed {
            // Every crash point lies after the pass: what it found is in the ledger.
            pendingCrash = nil
            try passed()
            try restart()
        } catch let error as LedgerError where error.halts {
            // Sync refuses until a reset (the scenario says `expect C halted`); the run goes on.
            lastRefusal = error
            hub.simulation.trace?(String(format: "%10.3f s  %@  halted: %@", Double(hub.simulation.now) / 1_000, name, error.message))
        }
    }

    /// A pass went through: the deletions counted so far are in the ledger.
    private func passed() throws {
        deletedSincePass = []
        emptiedByUser = false
        wipedSincePass = false
    }

    /// Damages the ledger's file on disk (SCENARIOS `C corrupt ledger`): a page of
    /// its stamps overwritten with garbage, the way a torn write or a bad sector
    /// leaves it. The ledger is closed first, as a crash would, and opened again.
    private func corrupt() throws {
        ledger.close()
        guard FileManager.default.fileExists(atPath: ledgerPath) else { return try restart() }
        var pageSize = 4096
        var root = 1
        do {
            let connection = try Connection(path: ledgerPath, mode: .readWrite, configuration: nil)
            try connection.checkpoint()
            pageSize = Int(try connection.scalarInt("PRAGMA page_size") ?? 4096)
            // The root page of the stamps' table: damaged, the file fails its check.
            root = Int(try connection.scalarInt("SELECT rootpage FROM sqlite_master WHERE name = 'ledger_stamps'") ?? 1)
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: ledgerPath))
        try handle.seek(toOffset: UInt64((max(root, 1) - 1) * pageSize))
        handle.write(Data(repeating: 0xA5, count: pageSize))
        try handle.close()
        try restart()
    }
}
