import Foundation
import Stele
import Synchronization

/// `stele demo --hub`: the README's walkthrough with real processes. A
/// `stele-hub` on a free loopback port, two devices that are `stele` processes on
/// their own stores, every command printed as it runs; a delete that the barrier
/// collects through the relay, and a copy of the laptop taken before the delete,
/// restored afterwards, that brings nothing back. Timers are shortened
/// (`STELE_FAST_PACE=1`) so the story takes seconds. Everything is removed at the end.
struct HubDemo {
    let say: (String) -> Void
    private let directory: String
    private let stele: URL
    private let hubBinary: URL
    private var background: [Process] = []
    /// What an interrupt stops and removes: every process started, the folder.
    private let leftovers = Leftovers()
    private static let environment = ProcessInfo.processInfo.environment.merging(["STELE_FAST_PACE": "1"]) { $1 }

    /// - Throws: ``InputError`` when `stele-hub` is not built beside `stele`.
    init(say: @escaping (String) -> Void) throws {
        self.say = say
        stele = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        hubBinary = stele.deletingLastPathComponent().appendingPathComponent("stele-hub")
        guard FileManager.default.isExecutableFile(atPath: hubBinary.path) else {
            throw InputError(message: "stele demo --hub runs stele-hub, which is not built beside \(stele.path): run swift build (it builds both), then swift run stele demo --hub")
        }
        directory = NSTemporaryDirectory() + "stele-hub-demo-\(UUID().uuidString.prefix(8))"
    }

    /// The processes a story has running and its folder: on SIGINT or SIGTERM
    /// (blocked since `main` began, so none is lost) the processes are stopped and
    /// the folder removed, and the demo ends (128 + the signal) while the story,
    /// on the main thread, waits: it starts nothing more (a process it starts
    /// after that is killed at once) and never exits first.
    private final class Leftovers: Sendable {
        private let state = Mutex<(running: Set<Int32>, stopping: Bool)>(([], false))

        /// Notes a process the story just started; one started once the demo
        /// is being stopped is killed at once, and the story waits for the end.
        func started(_ process: Process) {
            let pid = process.processIdentifier
            let stopping = state.withLock { state in
                if !state.stopping { state.running.insert(pid) }
                return state.stopping
            }
            if stopping {
                kill(pid, SIGKILL)
                Self.waitForTheEnd()
            }
        }

        /// A process the story saw end (or stopped itself); the story waits for
        /// the end if the demo is being stopped meanwhile.
        func ended(_ process: Process) {
            let stopping = state.withLock { state in
                state.running.remove(process.processIdentifier)
                return state.stopping
            }
            if stopping { Self.waitForTheEnd() }
        }

        /// Stops every process still running (SIGTERM, then SIGKILL after 5 s) and removes `directory`.
        func clean(_ directory: String) {
            let processes = state.withLock { state in
                state.stopping = true
                return state.running
            }
            for pid in processes { kill(pid, SIGTERM) }
            let deadline = Date().addingTimeInterval(5)
            // Foundation reaps them; a pid that no longer answers signal 0 is gone.
            while processes.contains(where: { kill($0, 0) == 0 }) && Date() < deadline { usleep(20_000) }
            for pid in processes where kill(pid, 0) == 0 { kill(pid, SIGKILL) }
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Waits for the end if the demo is being stopped: the story goes no further.
        func waitIfStopping() {
            if state.withLock({ $0.stopping }) { Self.waitForTheEnd() }
        }

        /// The story's thread, once the demo is being stopped: the signal's thread ends the process.
        private static func waitForTheEnd() -> Never {
            while true { sleep(60) }
        }
    }

    /// Tells the story; `false` when a step did not end as the story says.
    mutating func tell() throws -> Bool {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let (leftovers, directory) = (self.leftovers, self.directory)
        TerminationSignals.onSignal { signal in
            leftovers.clean(directory)
            printError("stele demo: interrupted; its hub and device processes are stopped and \(directory) removed")
            fflush(nil)
            // Not exit(): the story's thread is parked, not finished; nothing is torn down under it.
            _exit(128 + signal)
        }
        defer {
            // However the story ends (an error, say, from a step whose process the signal stopped).
            leftovers.waitIfStopping()
            for process in background where process.isRunning { stop(process) }
            try? FileManager.default.removeItem(atPath: directory)
        }
        let port = try Self.freePort()
        let hub = "http://127.0.0.1:\(port)"
        say("A hub and two devices, each a process of its own, in \(directory) (removed at the end).\n")
        say("The hub: the relay, the directory and the anchor store the devices meet through.")
        let hubProcess = try start(hubBinary, ["serve", "--open", "--data", path("hub"), "--listen", "127.0.0.1:\(port)"], show: "stele-hub serve --open --data hub --listen 127.0.0.1:\(port)")
        guard waitForOutput(hubProcess.output, "listening on") else { return failed("the hub did not start") }

        say("\nThe phone founds an account; the laptop asks to join; the phone approves it, comparing fingerprints.")
        let founded = try run(["init", path("phone.stele"), "--hub", hub, "--name", "phone"])
        guard let account = field("account", in: founded) else { return failed("stele init printed no account") }
        let joined = try run(["join", path("laptop.stele"), "--hub", hub, "--account", account, "--name", "laptop"])
        guard let device = field("device", in: joined), let fingerprint = field("fingerprint", in: joined) else { return failed("stele join printed no device") }
        try run(["approve", path("phone.stele"), device, "--fingerprint", fingerprint])
        try run(["namespace", path("phone.stele"), "notes", "causal"])
        try run(["namespace", path("laptop.stele"), "notes", "causal"])

        say("\nThe phone stays online; the laptop writes and syncs once.")
        let phone = try start(stele, ["sync", path("phone.stele"), "--watch"], show: "stele sync phone.stele --watch   (in the background)")
        try run(["put", path("laptop.stele"), "notes", "passport", "in the drawer"])
        try run(["sync", path("laptop.stele")])
        guard eventually({ try self.value("phone.stele", "passport") == "in the drawer" }) else { return failed("the phone did not get the laptop's write") }
        try run(["get", path("phone.stele"), "notes", "passport"])

        say("\nA copy of the laptop's store, as a backup would take it, before anything is deleted.")
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path("laptop.stele") + suffix) {
            try FileManager.default.copyItem(atPath: path("laptop.stele") + suffix, toPath: path("laptop-backup.stele") + suffix)
        }
        say("  $ cp laptop.stele laptop-backup.stele")

        say("\nThe phone deletes it; the laptop syncs and no longer has it.")
        try run(["delete", path("phone.stele"), "notes", "passport"])
        guard eventually({
            _ = try self.run(["sync", self.path("laptop.stele")], quiet: true)
            return try self.value("laptop.stele", "passport") == nil
        }) else { return failed("the laptop did not get the delete") }
        try run(["get", path("laptop.stele"), "notes", "passport"], expect: 1)

        say("\nWith every device in sync, the barrier collects the tombstone: the anchor lands on the hub first.")
        let laptop = try start(stele, ["sync", path("laptop.stele"), "--watch"], show: "stele sync laptop.stele --watch   (in the background)")
        guard eventually({ try self.collected("phone.stele") && self.collected("laptop.stele") }) else { return failed("the tombstone was not collected") }
        try run(["status", path("phone.stele")])
        stop(laptop.process)

        say("\nThe laptop is restored from the copy taken before the delete: the row is back on its disk.")
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path("laptop.stele") + suffix) }
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path("laptop-backup.stele") + suffix) {
            try FileManager.default.copyItem(atPath: path("laptop-backup.stele") + suffix, toPath: path("laptop.stele") + suffix)
        }
        say("  $ cp laptop-backup.stele laptop.stele")
        try run(["get", path("laptop.stele"), "notes", "passport"])

        say("\nIt syncs: the anchor on the hub shows it was rolled back; it recovers, and the row stays deleted.")
        guard eventually({
            _ = try self.run(["sync", self.path("laptop.stele"), "--timeout", "5s"], quiet: true)
            return try self.value("laptop.stele", "passport") == nil
        }) else { return failed("the restored laptop brought the row back") }
        try run(["get", path("laptop.stele"), "notes", "passport"], expect: 1)
        try run(["get", path("phone.stele"), "notes", "passport"], expect: 1)
        stop(phone.process)
        stop(hubProcess.process)
        say("\nDeleted on one device, gone on both, and a restore from before the delete did not bring it back.")
        return true
    }

    // MARK: - Steps

    /// Stops a process the story started (SIGTERM) and waits for its end.
    private func stop(_ process: Process) {
        process.terminate()
        process.waitUntilExit()
        leftovers.ended(process)
    }

    private func path(_ name: String) -> String { "\(directory)/\(name)" }

    private func failed(_ what: String) -> Bool {
        say("\nThe story broke: \(what).")
        return false
    }

    /// Runs `stele ARGUMENTS`, printing the command and its output (unless `quiet`).
    @discardableResult
    private func run(_ arguments: [String], expect status: Int32 = 0, quiet: Bool = false) throws -> String {
        let process = Process()
        process.executableURL = stele
        process.arguments = arguments
        process.environment = Self.environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        leftovers.started(process)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        leftovers.ended(process)
        let text = String(decoding: data, as: UTF8.self)
        if !quiet {
            say("  $ stele " + arguments.map { $0.replacingOccurrences(of: directory + "/", with: "") }.joined(separator: " "))
            let shown = text.replacingOccurrences(of: directory + "/", with: "").split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.isEmpty }
            for line in shown { say("    " + line) }
            if process.terminationStatus == 1, status == 1, shown.isEmpty { say("    (exit 1: absent)") }
        }
        guard process.terminationStatus == status || quiet else {
            throw InputError(message: "stele \(arguments.first ?? "") exited \(process.terminationStatus): \(text)")
        }
        return text
    }

    /// A process left running, with its output gathered.
    private mutating func start(_ binary: URL, _ arguments: [String], show: String) throws -> (process: Process, output: OutputLog) {
        say("  $ \(show)")
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = Self.environment
        let log = OutputLog()
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        pipe.fileHandleForReading.readabilityHandler = { log.append($0.availableData) }
        try process.run()
        leftovers.started(process)
        background.append(process)
        return (process, log)
    }

    private func waitForOutput(_ log: OutputLog, _ text: String) -> Bool { eventually { log.text.contains(text) } }

    private func eventually(_ condition: () throws -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            leftovers.waitIfStopping()
            if (try? condition()) == true { return true }
            usleep(100_000)
        }
        return false
    }

    private func value(_ store: String, _ key: String) throws -> String? {
        let replica = try Replica.open(at: path(store), options: Replica.Options(readOnly: true))
        return try replica.causal("notes").get(key).map { String(decoding: $0, as: UTF8.self) }
    }

    private func collected(_ store: String) throws -> Bool {
        let replica = try Replica.open(at: path(store), options: Replica.Options(readOnly: true))
        let tombstones = try replica.tombstoneCounts().values.reduce(0, +)
        return replica.generation >= 1 && tombstones == 0
    }

    private func field(_ name: String, in output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(name + " ") }?.split(separator: " ").last.map(String.init)
    }

    /// A loopback port nothing listens on now.
    static func freePort() throws -> UInt16 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw InputError(message: "cannot open a socket to find a free port") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let found = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        guard found else { throw InputError(message: "cannot find a free loopback port") }
        return UInt16(bigEndian: address.sin_port)
    }
}

/// Output a background process wrote, gathered from its pipe's handler thread.
final class OutputLog: Sendable {
    private let bytes = Mutex<[UInt8]>([])
    func append(_ data: Data) { bytes.withLock { $0.append(contentsOf: data) } }
    var text: String { bytes.withLock { String(decoding: $0, as: UTF8.self) } }
}
