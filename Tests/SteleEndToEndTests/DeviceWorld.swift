import Foundation
import Stele
import TestSupport

/// Where a story through real processes runs: one hub process on SQLite, or two
/// hub processes sharing one PostgreSQL database (the devices then sit on
/// different hubs).
enum Topology: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite
    case twoHubsOnPostgreSQL

    var description: String { rawValue }
}

/// A hub (one or two `stele-hub serve` processes) and devices that are `stele`
/// processes on store files in one temporary directory, paced fast
/// (`STELE_FAST_PACE=1`) so a story takes seconds.
final class DeviceWorld {
    let files: TemporaryDirectory
    let topology: Topology
    private(set) var hubs: [ChildProcess.Background] = []
    private(set) var ports: [UInt16] = []
    private let storage: [String]
    private let open: Bool
    static let environment = ["STELE_FAST_PACE": "1"]

    /// - Parameter open: whether accounts need no invite (`--open`).
    init(_ topology: Topology = .sqlite, open: Bool = true) throws {
        files = try TemporaryDirectory("stele-e2e")
        self.topology = topology
        self.open = open
        switch topology {
        case .sqlite:
            storage = ["--data", files.file("hub")]
            ports = [try ChildProcess.freePort()]
        case .twoHubsOnPostgreSQL:
            storage = ["--postgres", try PostgresTestCluster.url()]
            ports = [try ChildProcess.freePort(), try ChildProcess.freePort()]
        }
        for index in ports.indices { try startHub(index) }
    }

    deinit { for hub in hubs where hub.isRunning { hub.signal(SIGKILL) } }

    /// The URL of hub `index` (0, or 1 on two hubs).
    func hub(_ index: Int = 0) -> String { "http://127.0.0.1:\(ports[index])" }

    /// Starts (or starts again) hub `index` on its port and storage.
    func startHub(_ index: Int) throws {
        let process = try ChildProcess.Background(
            "stele-hub", ["serve", "--listen", "127.0.0.1:\(ports[index])"] + (open ? ["--open"] : []) + storage, environment: Self.environment)
        guard process.waitFor("listening on") else { throw ChildProcessError("stele-hub did not start: \(process.errorText)") }
        if index < hubs.count { hubs[index] = process } else { hubs.append(process) }
    }

    /// `stele-hub ARGUMENTS` on this world's storage (`invite`).
    func hubCommand(_ arguments: [String]) throws -> ChildProcess.Run {
        try ChildProcess.run("stele-hub", arguments + storage, environment: Self.environment)
    }

    /// Kills hub `index` with SIGKILL.
    func killHub(_ index: Int) { hubs[index].signal(SIGKILL) }

    func path(_ device: String) -> String { files.file("\(device).stele") }

    /// `stele ARGUMENTS`, run to the end.
    @discardableResult
    func stele(_ arguments: String...) throws -> ChildProcess.Run {
        try ChildProcess.run("stele", arguments, environment: Self.environment)
    }

    /// `stele ARGUMENTS` left running (`sync --watch`).
    func background(_ arguments: String...) throws -> ChildProcess.Background {
        try ChildProcess.Background("stele", arguments, environment: Self.environment)
    }

    /// `stele ARGUMENTS`, which must succeed.
    @discardableResult
    func must(_ arguments: String...) throws -> ChildProcess.Run {
        let run = try ChildProcess.run("stele", arguments, environment: Self.environment)
        guard run.status == 0 else { throw ChildProcessError("stele \(arguments.joined(separator: " ")) failed: \(run)") }
        return run
    }

    /// An account founded by `founder` on hub 0 and `joiner` joined through the
    /// last hub and approved; both declare `notes` (causal). Returns the account id.
    @discardableResult
    func pair(_ founder: String = "phone", _ joiner: String = "laptop") throws -> String {
        let founded = try must("init", path(founder), "--hub", hub(0), "--name", founder)
        guard let account = Self.field("account", in: founded.output) else { throw ChildProcessError("init printed no account: \(founded)") }
        let joined = try must("join", path(joiner), "--hub", hub(ports.count - 1), "--account", account, "--name", joiner)
        guard let device = Self.field("device", in: joined.output), let fingerprint = Self.field("fingerprint", in: joined.output) else {
            throw ChildProcessError("join printed no device: \(joined)")
        }
        try must("approve", path(founder), device, "--fingerprint", fingerprint)
        try must("namespace", path(founder), "notes", "causal")
        try must("namespace", path(joiner), "notes", "causal")
        return account
    }

    /// The value `stele get` prints, or nil when it exits 1 (absent).
    func get(_ device: String, _ key: String) throws -> String? {
        let run = try stele("get", path(device), "notes", key)
        switch run.status {
        case 0: return run.output.trimmingCharacters(in: .newlines)
        case 1: return nil
        default: throw ChildProcessError("stele get failed: \(run)")
        }
    }

    /// `stele status --json`, parsed.
    func status(_ device: String) throws -> [String: Any] {
        let run = try must("status", path(device), "--json")
        return (try JSONSerialization.jsonObject(with: Data(run.output.utf8))) as? [String: Any] ?? [:]
    }

    /// The device id `stele status` prints for `device`.
    func deviceID(_ device: String) throws -> String { try status(device)["device"] as? String ?? "" }

    /// The word after `name` on the line that starts with it.
    static func field(_ name: String, in output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(name + " ") }?.split(separator: " ").last.map(String.init)
    }
}

/// Waits (polling) until `condition` holds, up to `seconds`.
func eventually(_ seconds: Double = 30, _ condition: () throws -> Bool) throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(100_000)
    }
    return try condition()
}
