import Foundation
import Synchronization

/// A PostgreSQL server for the hub's tests: the one `STELE_TEST_POSTGRES_URL`
/// names (scripts/test starts one), or else a throwaway cluster this test
/// process starts on first use (initdb into a temporary directory, as the
/// `postgres` user when running as root, since PostgreSQL refuses root) and
/// stops at exit. Every ``url()`` is a new empty database, so tests never see
/// each other's rows. Without PostgreSQL installed, ``url()`` throws and the
/// test fails: it never skips.
public enum PostgresTestCluster {
    /// A cluster this process started.
    public struct Started: Sendable {
        public let directory: String
        public let port: Int
        public let owner: String?
    }

    private struct State {
        var base: String?
        var started: Started?
        var databases = 0
    }

    private static let state = Mutex(State())
    private static let startLock = NSLock()

    /// A URL to a new, empty database.
    /// - Throws: ``ClusterError`` when no server is configured and none can be started.
    public static func url() throws -> String {
        let base = try server()
        let name = state.withLock { state -> String in
            state.databases += 1
            return "stele_test_\(getpid())_\(state.databases)"
        }
        try psql(base, "CREATE DATABASE \(name)")
        // The maintenance URL ends in "/postgres" (a query may follow): swap that database for the new one.
        guard let range = base.range(of: "/postgres", options: .backwards) else { return base }
        return base.replacingCharacters(in: range, with: "/\(name)")
    }

    /// The cluster this process started, if it started one (tests that stop and restart it use this).
    public static var started: Started? { state.withLock { $0.started } }

    /// The `postgres` maintenance database's URL, starting a cluster if needed.
    static func server() throws -> String {
        // One test at a time decides and starts: two clusters for one process would be a leak.
        startLock.lock()
        defer { startLock.unlock() }
        if let base = state.withLock({ $0.base }) { return base }
        if let configured = ProcessInfo.processInfo.environment["STELE_TEST_POSTGRES_URL"], !configured.isEmpty {
            let base = maintenanceURL(configured)
            state.withLock { $0.base = base }
            return base
        }
        let started = try start()
        let base = "postgresql://postgres@127.0.0.1:\(started.port)/postgres"
        state.withLock { state in
            state.base = base
            state.started = started
        }
        atexit { PostgresTestCluster.stopStarted() }
        return base
    }

    /// The same server's `postgres` database.
    public static func maintenanceURL(_ url: String) -> String {
        guard let slash = url.range(of: "/", options: .backwards, range: url.range(of: "://").map { $0.upperBound..<url.endIndex }) else { return url + "/postgres" }
        let query = url[slash.upperBound...].firstIndex(of: "?").map { String(url[$0...]) } ?? ""
        return String(url[..<slash.lowerBound]) + "/postgres" + query
    }

    /// The directory of PostgreSQL's server programs.
    static func binaries() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        guard let newest = versions.last, FileManager.default.isExecutableFile(atPath: "\(root)/\(newest)/bin/initdb") else {
            throw ClusterError("PostgreSQL's server is not installed (no \(root)/N/bin/initdb): apt-get install postgresql, or set STELE_TEST_POSTGRES_URL")
        }
        return "\(root)/\(newest)/bin"
    }

    /// Starts a cluster in a new temporary directory on a free loopback port.
    public static func start() throws -> Started {
        let bin = try binaries()
        let directory = NSTemporaryDirectory() + "stele-pg-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let owner: String? = getuid() == 0 ? "postgres" : nil
        if let owner { try run("/bin/chown", [owner, directory]) }
        try run(as: owner, "\(bin)/initdb", ["-D", "\(directory)/data", "-A", "trust", "-U", "postgres", "--no-sync"])
        let port = try freePort()
        let started = Started(directory: directory, port: port, owner: owner)
        try restart(started)
        return started
    }

    /// Starts (again) a cluster ``start()`` made.
    public static func restart(_ cluster: Started) throws {
        let bin = try binaries()
        try run(
            as: cluster.owner, "\(bin)/pg_ctl",
            ["-D", "\(cluster.directory)/data", "-l", "\(cluster.directory)/log", "-o", "-p \(cluster.port) -k \(cluster.directory) -c listen_addresses=127.0.0.1 -c fsync=off", "-w", "start"])
    }

    /// Stops a cluster ``start()`` made (fast: open connections are ended).
    public static func stop(_ cluster: Started) throws {
        let bin = try binaries()
        try run(as: cluster.owner, "\(bin)/pg_ctl", ["-D", "\(cluster.directory)/data", "-m", "fast", "-w", "stop"])
    }

    /// Stops and deletes a cluster ``start()`` made.
    public static func remove(_ cluster: Started) {
        try? stop(cluster)
        try? FileManager.default.removeItem(atPath: cluster.directory)
    }

    private static func stopStarted() {
        if let started = state.withLock({ $0.started }) { remove(started) }
    }

    public static func psql(_ url: String, _ sql: String) throws {
        let path = ["/usr/bin/psql", "/usr/lib/postgresql/15/bin/psql"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let path else { throw ClusterError("psql is not installed: apt-get install postgresql-client") }
        try run(path, ["-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
    }

    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw ClusterError("cannot open a socket to find a free port") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw ClusterError("cannot find a free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a program to its end, its output in a file. Through `posix_spawn`
    /// and `waitpid`, not `Process`: `runuser` and `pg_ctl` leave a daemon
    /// behind, and `Process` was seen never to notice such a child's exit.
    static func run(as user: String? = nil, _ program: String, _ arguments: [String]) throws {
        let argv = user.map { ["/usr/sbin/runuser", "-u", $0, "--", program] + arguments } ?? [program] + arguments
        let outputPath = NSTemporaryDirectory() + "stele-pg-output-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pid: pid_t = 0
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ)
        guard spawned == 0 else { throw ClusterError("cannot run \(argv[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED and WEXITSTATUS are macros: exited normally with code 0 is a status of 0.
        guard status == 0 else {
            throw ClusterError("\(program) \(arguments.joined(separator: " ")) failed (status \(status)): \(text.suffix(600))")
        }
    }

    /// Why a PostgreSQL server for the tests could not be had.
    public struct ClusterError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}
