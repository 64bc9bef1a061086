import Foundation
import Stele
import SteleBench
import SteleHub
import SteleHubPostgres
import SteleHubServer
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `stele-hub bench [--json] [--quick] [--postgres URL] [--only PREFIX]`: the hub's figures over
/// loopback, each against a baseline run in the same process (issue 16):
/// relay throughput against a bare libmicrohttpd handler, relay latency to a
/// parked poll, idle long polls held with their memory, and two devices'
/// runtimes syncing through the hub against the in-memory transport (``FleetBench``),
/// the record API's figures (``RecordsBench``) and a mirror client's retirement on echo (``MirrorBench``).
enum HubBenchCommand {
    static func run(_ arguments: ArraySlice<String>) throws {
        let options = try Options(arguments, options: ["--postgres", "--connections", "--only"], flags: ["--json", "--quick"])
        let quick = options.flags.contains("--quick")
        // `--only PREFIX` runs the figures whose names start with it (hub.relay, hub.fleet, ...).
        let only = options.values["--only"] ?? ""
        func wanted(_ name: String) -> Bool { name.hasPrefix(only) || only.hasPrefix(name) }
        var figures: [BenchmarkFigure] = []
        let say: (String) -> Void = { printError($0) }
        if wanted("hub.relay.frames") {
            say("hub.relay.frames ...")
            figures.append(try relayThroughput(frames: quick ? 500 : 5_000))
        }
        if wanted("hub.relay.latency_p99") {
            say("hub.relay.latency_p99 ...")
            figures.append(try relayLatency(samples: quick ? 50 : 300))
            if let url = options.values["--postgres"] {
                say("hub.relay.latency_p99.postgresql ...")
                figures.append(try postgresLatency(url: url, samples: quick ? 50 : 300))
            }
        }
        if wanted("hub.connections") {
            say("hub.connections ...")
            figures.append(contentsOf: try connections(count: try options.integer("--connections", default: quick ? 1_000 : 10_000, maximum: 100_000)))
        }
        if wanted("hub.fleet") {
            figures.append(contentsOf: try FleetBench.run(quick: quick, say: say))
        }
        if wanted("hub.push") || wanted("hub.pull") {
            figures.append(contentsOf: try RecordsBench.run(quick: quick, postgres: options.values["--postgres"], say: say))
        }
        if wanted("hub.push.contended") || wanted("hub.push.postgresql.aggregate") {
            if let url = options.values["--postgres"] {
                figures.append(contentsOf: try PushBench.run(quick: quick, postgres: url, say: say))
            } else {
                say("hub.push.contended and hub.push.postgresql.aggregate need PostgreSQL: give --postgres URL")
            }
        }
        if wanted("hub.replay") || wanted("hub.compact") {
            figures.append(contentsOf: try CompactionBench.run(quick: quick, say: say))
        }
        if wanted("mirror.retire_latency") {
            figures.append(contentsOf: try MirrorBench.run(quick: quick, say: say))
        }
        guard !figures.isEmpty else {
            throw UsageError(message: "--only \(only) names no figure; the figures start hub.relay, hub.connections, hub.fleet, hub.push, hub.pull, hub.replay, hub.compact or mirror.retire_latency")
        }
        if options.flags.contains("--json") {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(figures), as: UTF8.self))
        } else {
            for figure in figures {
                let baseline = figure.baseline.map { String(format: " baseline %.2f", $0) } ?? ""
                let ratio = figure.ratio.map { String(format: " ratio %.3f", $0) } ?? ""
                let met = figure.met.map { $0 ? " (met: \(figure.target ?? ""))" : " (NOT met: \(figure.target ?? ""))" } ?? ""
                print("\(figure.name): \(String(format: "%.2f", figure.value)) \(figure.unit)\(baseline)\(ratio)\(met)")
            }
        }
    }

    // MARK: a hub with one account and two devices

    /// An in-process hub on `storage`, served on a free loopback port, with an
    /// account whose phone sends to its laptop.
    final class Rig: Sendable {
        let storage: any HubStorage
        let service: HubService
        let server: HubServer
        let account: AccountID
        let phoneToken: String
        let laptopToken: String
        let laptop: DeviceID
        /// The account's founding device (the records' writer in ``RecordsBench``).
        let phone: DeviceIdentity
        var base: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

        init(storage: any HubStorage, account: AccountID = AccountID.generate(), phone: DeviceIdentity? = nil, laptop: DeviceIdentity? = nil) throws {
            self.storage = storage
            var configuration = HubService.Configuration()
            configuration.open = true
            service = HubService(storage: storage, configuration: configuration)
            var serverConfiguration = HubServer.Configuration()
            serverConfiguration.port = 0
            server = try HubServer(handler: service, configuration: serverConfiguration)
            self.account = account
            let phone = try phone ?? DeviceIdentity.generate()
            self.phone = phone
            let laptopIdentity = try laptop ?? DeviceIdentity.generate()
            self.laptop = laptopIdentity.deviceID
            let roster = try Roster.founding(account: account, by: phone)
            _ = Self.call(service, "POST", "/v1/accounts", ["genesis": Data(roster.encoded).base64EncodedString()])
            phoneToken = try Self.session(service, phone, account)
            let approval = try RosterChange.approval(of: laptopIdentity.deviceID, signingKey: try laptopIdentity.signingKey(), by: phone, account: account, index: 1)
            _ = Self.call(service, "POST", "/v1/accounts/\(account.hex)/roster", ["change": Data(approval.encoded).base64EncodedString()], token: phoneToken)
            laptopToken = try Self.session(service, laptopIdentity, account)
        }

        static func call(_ service: HubService, _ method: String, _ path: String, _ json: [String: Any], token: String? = nil) -> HubResponse {
            let headers = token.map { ["authorization": "Bearer \($0)"] } ?? [:]
            return service.handle(HubRequest(method: method, target: path, headers: headers, body: Array(HubJSON.encode(json).utf8))).response ?? HubResponse(status: 0)
        }

        static func session(_ service: HubService, _ device: DeviceIdentity, _ account: AccountID) throws -> String {
            let time = Int64(Date().timeIntervalSince1970 * 1000)
            let signature = try HubSessionProof.sign(by: device, account: account, timeMilliseconds: time)
            let answer = call(service, "POST", "/v1/accounts/\(account.hex)/sessions", ["device": device.deviceID.hex, "time": time, "signature": Data(signature).base64EncodedString()])
            guard let token = (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])?["token"] as? String else {
                throw BenchError("the bench could not open a session: \(answer.status)")
            }
            return token
        }

        func stop() {
            server.stop()
            storage.close()
        }
    }

    struct BenchError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    // MARK: HTTP through URLSession, the client apps use

    static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 16
        configuration.timeoutIntervalForRequest = 90
        return URLSession(configuration: configuration)
    }()

    /// Sends a request and waits for the answer; returns the status and body.
    static func send(_ url: URL, method: String, body: [UInt8]? = nil, token: String? = nil) -> (Int, [UInt8]) {
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let body { request.httpBody = Data(body) }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let result = Mutex<(Int, [UInt8])>((0, []))
        let done = DispatchSemaphore(value: 0)
        session.dataTask(with: request) { data, response, _ in
            result.withLock { $0 = ((response as? HTTPURLResponse)?.statusCode ?? 0, [UInt8](data ?? Data())) }
            done.signal()
        }.resume()
        done.wait()
        return result.withLock { $0 }
    }

    /// Posts `count` bodies of 1 KiB to `url` from `concurrency` threads.
    static func post(_ count: Int, to url: URL, token: String?, concurrency: Int = 8) -> Int {
        let frame = [UInt8](repeating: 0xA5, count: 1_024)
        let next = Mutex(0)
        let accepted = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: concurrency) { _ in
            while next.withLock({ value -> Bool in
                guard value < count else { return false }
                value += 1
                return true
            }) {
                let (status, _) = send(url, method: "POST", body: frame, token: token)
                if status / 100 == 2 { accepted.withLock { $0 += 1 } }
            }
        }
        return accepted.withLock { $0 }
    }

    /// Reads relay answers until `count` frames arrived (HUB-API's relay body).
    static func receive(_ count: Int, rig: Rig) -> Int {
        var after: UInt64 = 0
        var received = 0
        var idle = 0
        while received < count && idle < 20 {
            let (status, body) = send(URL(string: "\(rig.base)/v1/accounts/\(rig.account.hex)/relay?after=\(after)&wait=5")!, method: "GET", token: rig.laptopToken)
            guard status == 200, body.count >= 8 else {
                idle += 1
                continue
            }
            let next = body.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            var offset = 8
            var frames = 0
            while offset + 12 <= body.count {
                let length = body[offset + 8..<offset + 12].reduce(0) { $0 << 8 | Int($1) }
                offset += 12 + length
                frames += 1
            }
            if frames == 0 { idle += 1 }
            received += frames
            after = next
        }
        return received
    }

    static func relayThroughput(frames: Int) throws -> BenchmarkFigure {
        // The baseline: the HTTP floor, a bare handler answering the same POSTs.
        var bareConfiguration = HubServer.Configuration()
        bareConfiguration.port = 0
        let bare = try HubServer(handler: BareHandler(), configuration: bareConfiguration)
        _ = post(200, to: URL(string: "http://127.0.0.1:\(bare.port)/bare")!, token: nil)
        let bareStart = DispatchTime.now()
        let bareAnswered = post(frames, to: URL(string: "http://127.0.0.1:\(bare.port)/bare")!, token: nil)
        let bareSeconds = Double(DispatchTime.now().uptimeNanoseconds - bareStart.uptimeNanoseconds) / 1e9
        bare.stop()
        guard bareAnswered == frames else { throw BenchError("the bare handler answered \(bareAnswered) of \(frames) requests") }

        let directory = NSTemporaryDirectory() + "stele-hub-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let rig = try Rig(storage: try SQLiteHubStorage(path: "\(directory)/hub.sqlite"))
        defer { rig.stop() }
        let mailbox = URL(string: "\(rig.base)/v1/accounts/\(rig.account.hex)/relay/\(rig.laptop.hex)")!
        let received = Mutex(0)
        let start = DispatchTime.now()
        let finished = DispatchSemaphore(value: 0)
        let receiving = DispatchQueue(label: "stele-hub bench receiver")
        receiving.async {
            received.withLock { $0 = receive(frames, rig: rig) }
            finished.signal()
        }
        let accepted = post(frames, to: mailbox, token: rig.phoneToken)
        finished.wait()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
        let got = received.withLock { $0 }
        guard accepted == frames, got == frames else { throw BenchError("the relay took \(accepted) and delivered \(got) of \(frames) frames") }
        return BenchmarkFigure(name: "hub.relay.frames", value: Double(frames) / seconds, unit: "frames/s", baseline: Double(frames) / bareSeconds, target: .ratioAtLeast(0.4))
    }

    /// Milliseconds from posting a frame to reading the answer of the poll that waited for it.
    static func latencies(_ samples: Int, post rig: Rig, poll pollBase: URL) -> [Double] {
        var results: [Double] = []
        var after: UInt64 = 0
        for _ in 0..<samples {
            let answered = DispatchSemaphore(value: 0)
            let finish = Mutex<UInt64>(0)
            var request = URLRequest(url: URL(string: "\(pollBase)/v1/accounts/\(rig.account.hex)/relay?after=\(after)&wait=30")!)
            request.setValue("Bearer \(rig.laptopToken)", forHTTPHeaderField: "Authorization")
            let nextSeq = Mutex<UInt64>(after)
            session.dataTask(with: request) { data, _, _ in
                finish.withLock { $0 = DispatchTime.now().uptimeNanoseconds }
                let body = [UInt8](data ?? Data())
                if body.count >= 8 { nextSeq.withLock { $0 = body.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } } }
                answered.signal()
            }.resume()
            // Let the poll park before the frame is sent.
            usleep(20_000)
            let start = DispatchTime.now().uptimeNanoseconds
            _ = send(URL(string: "\(rig.base)/v1/accounts/\(rig.account.hex)/relay/\(rig.laptop.hex)")!, method: "POST", body: [UInt8](repeating: 1, count: 1_024), token: rig.phoneToken)
            answered.wait()
            results.append(Double(finish.withLock { $0 } - start) / 1e6)
            after = nextSeq.withLock { $0 }
        }
        return results
    }

    static func percentile99(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)]
    }

    static func relayLatency(samples: Int) throws -> BenchmarkFigure {
        let directory = NSTemporaryDirectory() + "stele-hub-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let rig = try Rig(storage: try SQLiteHubStorage(path: "\(directory)/hub.sqlite"))
        defer { rig.stop() }
        let values = latencies(samples, post: rig, poll: rig.base)
        return BenchmarkFigure(name: "hub.relay.latency_p99", value: percentile99(values), unit: "ms", target: .valueAtMost(5))
    }

    /// The frame is posted to this process's hub and the poll waits on a second
    /// hub process on the same database: the wakeup crosses LISTEN/NOTIFY.
    static func postgresLatency(url: String, samples: Int) throws -> BenchmarkFigure {
        let rig = try Rig(storage: try PostgresHubStorage(url: url))
        defer { rig.stop() }
        let other = Process()
        other.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        other.arguments = ["serve", "--postgres", url, "--listen", "127.0.0.1:0"]
        let output = Pipe()
        other.standardOutput = output
        other.standardError = FileHandle.nullDevice
        try other.run()
        defer {
            other.terminate()
            other.waitUntilExit()
        }
        guard let line = String(data: output.fileHandleForReading.availableData, encoding: .utf8), let range = line.range(of: "http://") else {
            throw BenchError("the second hub process did not say where it listens")
        }
        let address = line[range.upperBound...].prefix { $0 != " " }
        guard let second = URL(string: "http://\(address)") else { throw BenchError("cannot read the second hub's address from \(line)") }
        let values = latencies(samples, post: rig, poll: second)
        return BenchmarkFigure(name: "hub.relay.latency_p99.postgresql", value: percentile99(values), unit: "ms")
    }

    // MARK: idle long polls

    /// Resident memory of this process, from /proc.
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Parks `count` idle long polls, opened by a child process (each end of a
    /// connection takes a descriptor), and measures this process's memory growth.
    static func connections(count: Int) throws -> [BenchmarkFigure] {
        let directory = NSTemporaryDirectory() + "stele-hub-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let rig = try Rig(storage: try SQLiteHubStorage(path: "\(directory)/hub.sqlite"))
        defer { rig.stop() }
        let before = residentBytes()
        let clients = Process()
        clients.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        clients.arguments = ["_open-polls", "127.0.0.1", String(rig.server.port), "/v1/accounts/\(rig.account.hex)/relay?wait=60", rig.laptopToken, String(count)]
        clients.standardError = FileHandle.standardError
        let ready = Pipe()
        clients.standardOutput = ready
        try clients.run()
        defer {
            clients.terminate()
            clients.waitUntilExit()
        }
        _ = ready.fileHandleForReading.availableData
        let deadline = Date().addingTimeInterval(60)
        while rig.service.wakeups.waiting < count && Date() < deadline { usleep(50_000) }
        let held = rig.service.wakeups.waiting
        let grown = max(0, residentBytes() - before)
        return [
            BenchmarkFigure(name: "hub.connections", value: Double(held), unit: "idle long polls"),
            BenchmarkFigure(name: "hub.connections.bytes_per_connection", value: held == 0 ? 0 : Double(grown) / Double(held), unit: "bytes", target: .valueAtMost(48 * 1_024)),
        ]
    }
}

/// `stele-hub _open-polls HOST PORT PATH TOKEN COUNT` (the bench's helper
/// process): opens COUNT connections, sends each a long poll, prints one line
/// when all are sent, then holds them until killed.
enum OpenPolls {
    static func run(_ arguments: ArraySlice<String>) -> Int32 {
        let values = Array(arguments)
        guard values.count == 5, let port = UInt16(values[1]), let count = Int(values[4]) else { return 2 }
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let request = Array("GET \(values[2]) HTTP/1.1\r\nHost: \(values[0])\r\nAuthorization: Bearer \(values[3])\r\n\r\n".utf8)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, values[0], &address.sin_addr)
        var sockets: [Int32] = []
        for _ in 0..<count {
            let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard socket >= 0 else { break }
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(socket)
                break
            }
            _ = request.withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
            sockets.append(socket)
        }
        FileHandle.standardOutput.write(Data("opened \(sockets.count)\n".utf8))
        while true { sleep(60) }
    }
}
