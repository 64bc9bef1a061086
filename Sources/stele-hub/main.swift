import Foundation
import Stele
import SteleHub
import SteleHubPostgres
import SteleHubServer
import Synchronization

/// `stele-hub`: the hub's command line (HUB-API.md "stele-hub"). Thin: it
/// parses, opens the storage, starts the HTTP front, prints.
let usage = """
    usage: stele-hub COMMAND [OPTIONS]

    commands:
      serve     run the hub: stele-hub serve [--data DIR | --postgres URL [--postgres URL ...]] [--listen HOST:PORT] [--open]
                                            [--tls-cert FILE --tls-key FILE] [--threads N]
                                            [--max-body-bytes N] [--max-frame-bytes N] [--max-mailbox-bytes N]
                                            [--max-mutations-per-push N] [--max-changes-per-page N] [--max-clock-ahead SECONDS]
                                            [--session-seconds N] [--join-request-seconds N]
                (--postgres more than once: accounts are sharded over the databases, in the order given;
                 keep that order and number once accounts exist)
      invite    print a one-time invite code: stele-hub invite [--data DIR | --postgres URL]
      restored  after the hub's database was put back from a backup: stele-hub restored [--data DIR | --postgres URL]
                (the record history gets a new epoch: mirror clients replay and push again what the backup lacks)
      compact   collect now the tombstones every device has pulled past: stele-hub compact [--data DIR | --postgres URL]
                (serve does it every minute; GET /v1/accounts/{a}/status says which device holds the rest back)
      bench     the hub's figures: stele-hub bench [--json] [--quick] [--postgres URL] [--only PREFIX] [--connections N]
      version   this build's version (also --version)
    """

/// A usage mistake: printed with the usage, exit status 2.
struct UsageError: Error {
    let message: String
}

/// Parsed `--name value` options and `--flag`s.
struct Options {
    var values: [String: String] = [:]
    /// Every value of an option given more than once, in order (`--postgres` shards); `values` keeps the last.
    var all: [String: [String]] = [:]
    var flags: Set<String> = []

    /// The options that may come more than once.
    static let repeatable: Set<String> = ["--postgres"]

    init(_ arguments: ArraySlice<String>, options: Set<String>, flags: Set<String>) throws {
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            if flags.contains(argument) {
                self.flags.insert(argument)
            } else if options.contains(argument) {
                guard let value = iterator.next() else { throw UsageError(message: "\(argument) needs a value") }
                guard !value.isEmpty else { throw UsageError(message: "\(argument) needs a value, not an empty one") }
                if let earlier = values[argument], !Self.repeatable.contains(argument) {
                    throw UsageError(message: "\(argument) is given twice ('\(earlier)' and '\(value)'); give it once")
                }
                values[argument] = value
                all[argument, default: []].append(value)
            } else {
                throw UsageError(message: "unknown option '\(argument)'\(Spelling.hint(argument, in: options.union(flags)))")
            }
        }
    }

    /// A positive whole number, at most `maximum`: each limit's largest is far past
    /// any use, and keeps the hub's arithmetic on it (milliseconds, sums of bytes)
    /// inside 63 bits (a session of 2^53 seconds trapped at the first login).
    func integer(_ name: String, default fallback: Int, maximum: Int) throws -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text), value > 0 else { throw UsageError(message: "\(name) takes a positive whole number, not '\(text)'") }
        guard value <= maximum else { throw UsageError(message: "\(name) takes a whole number from 1 to \(maximum), not \(text)") }
        return value
    }
}

/// The storage the options name: PostgreSQL with `--postgres`, else SQLite under `--data`.
func openStorage(_ options: Options) throws -> any HubStorage {
    if options.values["--data"] != nil && options.values["--postgres"] != nil {
        throw UsageError(message: "--data and --postgres name two storages; give one")
    }
    if let urls = options.all["--postgres"] {
        guard Set(urls).count == urls.count else { throw UsageError(message: "--postgres names one database twice; give each shard once") }
        // Accounts sharded over the databases, in the order given (ShardedHubStorage); one
        // database is a list of one, so a shard of a longer list is never run alone.
        return try ShardedHubStorage(shards: try urls.map { try PostgresHubStorage(url: $0) })
    }
    let directory = options.values["--data"] ?? "./stele-hub-data"
    try createDataDirectory(directory)
    return try SQLiteHubStorage(path: "\(directory)/hub.sqlite")
}

/// Creates an SQLite hub's data directory if it is not there.
func createDataDirectory(_ directory: String) throws {
    do {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    } catch {
        throw HubStorageError(.unavailable, "cannot create the data directory \(directory): \(error.localizedDescription)")
    }
}

/// Where `serve` writes down the history it announced, beside an SQLite database
/// (HubService+Rewind); `nil` on PostgreSQL, whose cluster identity and timeline tell instead.
func announcedPath(_ options: Options) -> String? {
    guard options.values["--postgres"] == nil else { return nil }
    return "\(options.values["--data"] ?? "./stele-hub-data")/hub.sqlite.announced"
}

/// The note written down at `path`, if there is one.
func readAnnounced(_ path: String?) -> HubService.Announced? {
    guard let path, let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
    return HubService.Announced(text: text)
}

/// Writes the note down at `path` (a new file moved into place, so a crash leaves the old one or the new).
func writeAnnounced(_ announced: HubService.Announced, _ path: String?) throws {
    guard let path else { return }
    try Data(announced.text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
}

/// The storage the options name, for a command that works on a hub that exists:
/// a missing SQLite database is an error, and nothing is created.
func openExistingStorage(_ options: Options, naming what: String) throws -> any HubStorage {
    try requireDatabase(options, naming: what)
    return try openStorage(options)
}

/// Refuses an SQLite hub's data directory that holds no database (nothing is created there).
func requireDatabase(_ options: Options, naming what: String) throws {
    guard options.values["--postgres"] == nil else { return }
    let file = "\(options.values["--data"] ?? "./stele-hub-data")/hub.sqlite"
    guard FileManager.default.fileExists(atPath: file) else {
        throw HubStorageError(.unavailable, "there is no hub database at \(file): name \(what) with --data DIR (or --postgres URL)")
    }
}

/// A failure of a command that is no usage mistake: its message alone, exit status 1.
struct CommandError: Error, CustomStringConvertible {
    let description: String
}

/// The advisory lock on an SQLite hub's data directory (`DIR/hub.lock`): `serve`
/// holds it shared for as long as it runs, `restored` takes it alone. So
/// `restored` never runs under a serving hub, which would write its own run over
/// the note `restored` wrote beside the database and, at its next start, rewind
/// every client's history a second time. The kernel lets it go when the process
/// ends, SIGKILL included. `nil` on PostgreSQL (several hubs share one database;
/// the operator stops them all before `restored`).
/// - Returns: the descriptor holding the lock (`serve` keeps it open until it exits).
func lockDataDirectory(_ options: Options, exclusive: Bool) throws -> Int32? {
    guard options.values["--postgres"] == nil else { return nil }
    let directory = options.values["--data"] ?? "./stele-hub-data"
    let path = "\(directory)/hub.lock"
    let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else {
        throw HubStorageError(.unavailable, "cannot open the lock file \(path): \(String(cString: strerror(errno))); check the data directory is writable")
    }
    guard flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0 else {
        close(descriptor)
        throw CommandError(
            description: exclusive
                ? "a stele-hub serve is running on \(directory) (it holds \(path)): stop it first (SIGTERM), then run restored, then start serve again"
                : "stele-hub restored is running on \(directory) (it holds \(path)): start serve once it has finished")
    }
    return descriptor
}

/// Writes one line to standard error.
func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

func serve(_ arguments: ArraySlice<String>) throws {
    let options = try Options(
        arguments,
        options: [
            "--data", "--postgres", "--listen", "--tls-cert", "--tls-key", "--threads", "--max-body-bytes", "--max-frame-bytes", "--max-mailbox-bytes",
            "--session-seconds", "--join-request-seconds", "--max-mutations-per-push", "--max-changes-per-page", "--max-clock-ahead",
        ],
        flags: ["--open"])
    let listen = options.values["--listen"] ?? "127.0.0.1:8420"
    guard let colon = listen.lastIndex(of: ":"), let port = UInt16(listen[listen.index(after: colon)...]), colon != listen.startIndex else {
        throw UsageError(message: "--listen takes HOST:PORT (e.g. 127.0.0.1:8420), not '\(listen)'")
    }
    let host = String(listen[..<colon])
    if (options.values["--tls-cert"] == nil) != (options.values["--tls-key"] == nil) {
        throw UsageError(message: "--tls-cert and --tls-key go together")
    }
    var configuration = HubService.Configuration()
    configuration.open = options.flags.contains("--open")
    let tenYears = 10 * 365 * 86_400
    configuration.maximumBodyBytes = try options.integer("--max-body-bytes", default: configuration.maximumBodyBytes, maximum: 1 << 30)
    configuration.maximumFrameBytes = try options.integer("--max-frame-bytes", default: configuration.maximumFrameBytes, maximum: 1 << 30)
    configuration.maximumMailboxBytes = try options.integer("--max-mailbox-bytes", default: configuration.maximumMailboxBytes, maximum: 1 << 40)
    configuration.maximumMutationsPerPush = try options.integer("--max-mutations-per-push", default: configuration.maximumMutationsPerPush, maximum: 1_000_000)
    configuration.maximumChangesPerPage = try options.integer("--max-changes-per-page", default: configuration.maximumChangesPerPage, maximum: 1_000_000)
    configuration.maximumClockAheadSeconds = try options.integer("--max-clock-ahead", default: configuration.maximumClockAheadSeconds, maximum: tenYears)
    configuration.sessionLifetimeSeconds = try options.integer("--session-seconds", default: configuration.sessionLifetimeSeconds, maximum: tenYears)
    configuration.joinRequestLifetimeSeconds = try options.integer("--join-request-seconds", default: configuration.joinRequestLifetimeSeconds, maximum: tenYears)
    var serverConfiguration = HubServer.Configuration()
    serverConfiguration.host = host
    serverConfiguration.port = port
    serverConfiguration.threads = try options.integer("--threads", default: serverConfiguration.threads, maximum: 1_024)
    serverConfiguration.maximumBodyBytes = configuration.maximumBodyBytes
    if let certificate = options.values["--tls-cert"], let key = options.values["--tls-key"] {
        guard let certificateBytes = FileManager.default.contents(atPath: certificate) else { throw UsageError(message: "cannot read the TLS certificate \(certificate)") }
        guard let keyBytes = FileManager.default.contents(atPath: key) else { throw UsageError(message: "cannot read the TLS key \(key)") }
        serverConfiguration.tlsCertificatePEM = [UInt8](certificateBytes)
        serverConfiguration.tlsKeyPEM = [UInt8](keyBytes)
    }
    serverConfiguration.log = { line in
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
    // Before any file is made: a hub that cannot listen leaves no data directory behind.
    try HubServer.checkCanListen(host: host, port: port)
    if let directory = options.values["--postgres"] == nil ? options.values["--data"] ?? "./stele-hub-data" : nil {
        try createDataDirectory(directory)
    }
    // Held until the process ends (never closed: the kernel lets it go then).
    _ = try lockDataDirectory(options, exclusive: false)
    let storage = try openStorage(options)
    let service = HubService(storage: storage, configuration: configuration)
    // A database put back from a backup (or a failover) rewinds the history: a new epoch
    // makes every client replay and push again what it lacks (HubService+Rewind).
    let announced = announcedPath(options)
    let started = try service.detectRewind(announced: readAnnounced(announced))
    if let rewound = started.rewound {
        serverConfiguration.log("the record history was rewound: \(rewound.signal); it continues as epoch \(rewound.epoch), and clients replay and push again what it lacks")
    }
    try writeAnnounced(started.announced, announced)
    let note = Mutex(started.announced)
    let server = try HubServer(handler: service, configuration: serverConfiguration)
    let scheme = serverConfiguration.tlsCertificatePEM == nil ? "http" : "https"
    // Written straight to the descriptor: whoever started the hub waits for this line.
    FileHandle.standardOutput.write(Data("stele-hub listening on \(scheme)://\(host):\(server.port) (\(storage.backend.rawValue))\n".utf8))

    // Housekeeping every minute: expired sessions and aged join requests go, and tombstones
    // every device has pulled past are collected. A failure
    // (the storage down) is logged; the next sweep tries again.
    let sweeper = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "stele-hub sweep"))
    sweeper.schedule(deadline: .now() + 60, repeating: 60)
    sweeper.setEventHandler {
        do {
            try service.sweep()
            // Tombstones every device has pulled past go (HubService+Compaction): no timer decides.
            let compaction = try service.compact()
            if compaction.collected > 0 {
                serverConfiguration.log("compaction: \(compaction.collected) tombstones collected on \(compaction.accounts) accounts")
            }
        } catch {
            serverConfiguration.log("sweep failed: \(error)")
        }
    }
    sweeper.resume()
    // The history total, written down every second while it changes (and at exit) for the next start to compare.
    let announcer = announced.map { _ in DispatchSource.makeTimerSource(queue: DispatchQueue(label: "stele-hub announced")) }
    announcer?.schedule(deadline: .now() + 1, repeating: 1)
    announcer?.setEventHandler {
        do {
            let total = try service.historyTotal()
            guard let changed = note.withLock({ note -> HubService.Announced? in
                guard note.total != total else { return nil }
                note.total = total
                return note
            }) else { return }
            try writeAnnounced(changed, announced)
        } catch {
            serverConfiguration.log("cannot write down the history total: \(error)")
        }
    }
    announcer?.resume()

    // SIGINT and SIGTERM (blocked since the process began, so none is lost) end the
    // wait; in-flight requests finish, parked polls are answered.
    _ = TerminationSignals.wait()
    sweeper.cancel()
    announcer?.cancel()
    server.stop()
    if let total = try? service.historyTotal() {
        try? writeAnnounced(note.withLock { note in
            note.total = total
            return note
        }, announced)
    }
    storage.close()
    printError("stele-hub stopped")
}

func invite(_ arguments: ArraySlice<String>) throws {
    let options = try Options(arguments, options: ["--data", "--postgres"], flags: [])
    let storage = try openStorage(options)
    defer { storage.close() }
    print(try HubService(storage: storage).createInvite())
}

/// `restored`: the operator put the database back from a backup. The record
/// history gets a new epoch, so every client's cursor of the old one is answered
/// `409 history_rewound` with how much of it the hub still holds, and the client
/// replays and pushes again what it saw past that (HUB-API "Records").
func restored(_ arguments: ArraySlice<String>) throws {
    let options = try Options(arguments, options: ["--data", "--postgres"], flags: [])
    try requireDatabase(options, naming: "the restored one")
    let lock = try lockDataDirectory(options, exclusive: true)
    defer { if let lock { close(lock) } }
    let storage = try openStorage(options)
    defer { storage.close() }
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    // Every shard's history starts a new epoch: which database was put back is not for the hub to guess.
    var epochs = (previous: "", current: "")
    for shard in storage.shards { epochs = try shard.transaction { sql in try HubService.startNewEpoch(now: now, sql) } }
    // The next start compares with the restored history, not with the one before it.
    try writeAnnounced(try HubService(storage: storage).noteCurrentCopy(), announcedPath(options))
    print("record history: epoch \(epochs.previous.isEmpty ? "(none)" : epochs.previous) -> \(epochs.current)")
    print("clients replay and push again what the restored copy lacks, on their next pull")
}

/// `compact`: collects at once the tombstones every member device of an account
/// has pulled past (`serve` does it every minute; the account's status says who holds the rest back).
func compact(_ arguments: ArraySlice<String>) throws {
    let options = try Options(arguments, options: ["--data", "--postgres"], flags: [])
    let storage = try openExistingStorage(options, naming: "it")
    defer { storage.close() }
    let compaction = try HubService(storage: storage).compact()
    print("collected \(compaction.collected) tombstones on \(compaction.accounts) accounts")
}

func run() -> Int32 {
    let arguments = CommandLine.arguments.dropFirst()
    // First, before any thread starts: `serve` takes SIGINT and SIGTERM itself.
    // Every other command ends on them as any process does, even when its parent had them blocked.
    if arguments.first == "serve" { TerminationSignals.block() } else { TerminationSignals.unblock() }
    guard let command = arguments.first else {
        printError(usage)
        return 2
    }
    if ["help", "--help", "-h"].contains(command) {
        print(usage)
        return 0
    }
    if ["--version", "version"].contains(command) {
        print("stele-hub \(SteleVersion.current)")
        return 0
    }
    let rest = arguments.dropFirst()
    if rest.contains(where: { ["--help", "-h"].contains($0) }) {
        print(usage)
        return 0
    }
    do {
        switch command {
        case "serve": try serve(rest)
        case "invite": try invite(rest)
        case "restored": try restored(rest)
        case "compact": try compact(rest)
        case "bench": try HubBenchCommand.run(rest)
        case "_open-polls": return OpenPolls.run(rest)
        default:
            printError("stele-hub: unknown command '\(command)'\(Spelling.hint(command, in: ["serve", "invite", "restored", "compact", "bench", "version"]))")
            printError(usage)
            return 2
        }
        return 0
    } catch let error as UsageError {
        printError("stele-hub \(command): \(error.message)")
        printError(usage)
        return 2
    } catch let error as HubStorageError {
        printError("stele-hub \(command): \(error.message)")
        return 1
    } catch let error as CommandError {
        printError("stele-hub \(command): \(error.description)")
        return 1
    } catch {
        printError("stele-hub \(command): \(error)")
        return 1
    }
}

exit(run())
