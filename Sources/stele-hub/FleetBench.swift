import Foundation
import Stele
import SteleBench
import SteleHub
import SteleHubServer
import Synchronization

/// Devices through a real hub (issue 17): two ``FleetRuntime``s against a hub
/// served by this process on loopback, each figure against the same workload
/// over the in-memory transport in this process.
enum FleetBench {
    static func run(quick: Bool, say: (String) -> Void) throws -> [BenchmarkFigure] {
        let rows = quick ? 10_000 : 100_000
        say("hub.fleet.delete_batch ...")
        let deleteBatch = try compare("hub.fleet.delete_batch", rows: rows, workload: FleetWorkloads.deleteBatch)
        say("hub.fleet.first_sync ...")
        let firstSync = try compare("hub.fleet.first_sync", rows: rows, workload: FleetWorkloads.firstSync)
        say("hub.fleet.idle_requests_per_minute ...")
        let idle = try idleRequests(windowSeconds: quick ? 60 : 180)
        return [deleteBatch, firstSync, idle]
    }

    /// A ``HubHTTP`` that counts the requests it carries.
    final class CountingHTTP: HubHTTP {
        let inner = URLSessionHubHTTP()
        let count = Atomic<Int>(0)

        func perform(_ request: HubHTTPRequest, completion: @escaping @Sendable (Result<HubAnswer, HubClientError>) -> Void) {
            count.add(1, ordering: .relaxed)
            inner.perform(request, completion: completion)
        }
    }

    /// A hub on a loopback port, in this process, on a SQLite file.
    final class Hub {
        let directory: String
        let storage: SQLiteHubStorage
        let server: HubServer
        var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

        init() throws {
            directory = NSTemporaryDirectory() + "stele-hub-fleet-bench-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            storage = try SQLiteHubStorage(path: "\(directory)/hub.sqlite")
            var configuration = HubService.Configuration()
            configuration.open = true
            var serverConfiguration = HubServer.Configuration()
            serverConfiguration.port = 0
            server = try HubServer(handler: HubService(storage: storage, configuration: configuration), configuration: serverConfiguration)
        }

        deinit {
            server.stop()
            storage.close()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Runtimes for `replicas` (the account's two devices, founded and approved on this hub).
        func runtimes(_ a: Replica, _ b: Replica, _ identities: (DeviceIdentity, DeviceIdentity), http: (any HubHTTP)? = nil) throws -> [FleetRuntime] {
            let clientA = HubClient(hub: url, account: a.account, identity: identities.0, http: http)
            var ringA = try Membership.found(a.account, by: identities.0, in: HubDirectory(client: clientA))
            ringA = try Membership.approve(identities.1.deviceID, signingKey: try identities.1.signingKey(), by: ringA, in: HubDirectory(client: clientA))
            let ringB = KeyRing(identity: identities.1, accountKeys: ringA.accountKeys, roster: ringA.roster)
            var configuration = FleetRuntime.Configuration()
            configuration.fleet.collects = false
            return [
                try FleetRuntime(replica: a, keyStore: MemoryKeyStore(ringA), client: clientA, configuration: configuration),
                try FleetRuntime(
                    replica: b, keyStore: MemoryKeyStore(ringB), client: HubClient(hub: url, account: b.account, identity: identities.1, http: http),
                    configuration: configuration),
            ]
        }
    }

    /// Waits until both runtimes say they are in sync and their digests agree.
    static func converge(_ runtimes: [FleetRuntime], timeoutSeconds: Double) throws {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while Date() < deadline {
            if runtimes.allSatisfy(\.status.inSync) {
                let digests = try runtimes.map { runtime in try runtime.withReplica { try $0.digest(of: "notes") } }
                if digests[0] == digests[1] { return }
            }
            usleep(2_000)
        }
        throw HubBenchCommand.BenchError("the devices did not converge through the hub within \(Int(timeoutSeconds)) s: \(runtimes.map(\.status))")
    }

    /// The workload through the hub against the same over the in-memory transport.
    static func compare(
        _ name: String, rows: Int, workload: (String, String, Int) throws -> (a: Replica, b: Replica, identities: (DeviceIdentity, DeviceIdentity))
    ) throws -> BenchmarkFigure {
        let hub = try Hub()
        let (a, b, identities) = try workload(hub.directory, name, rows)
        // The hub's run takes copies of the stores, so both runs start from the same bytes.
        try a.backup(to: "\(hub.directory)/hub-a.stele")
        try b.backup(to: "\(hub.directory)/hub-b.stele")
        let baseline = try FleetWorkloads.inMemorySeconds(from: a, to: b, identities: identities)
        let hubA = try Replica.open(at: "\(hub.directory)/hub-a.stele")
        let hubB = try Replica.open(at: "\(hub.directory)/hub-b.stele")
        let runtimes = try hub.runtimes(hubA, hubB, identities)
        let start = DispatchTime.now().uptimeNanoseconds
        runtimes.forEach { $0.start() }
        defer { runtimes.forEach { $0.stop() } }
        try converge(runtimes, timeoutSeconds: 600)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        guard try runtimes[0].withReplica({ try $0.digest(of: "notes") }) == a.digest(of: "notes") else {
            throw HubBenchCommand.BenchError("\(name): the hub's devices converged on other contents than the in-memory run")
        }
        return BenchmarkFigure(name: name, value: seconds, unit: "seconds", baseline: baseline, target: .ratioAtMost(1.5))
    }

    /// Requests per minute a device in sync makes while nothing changes.
    static func idleRequests(windowSeconds: Double) throws -> BenchmarkFigure {
        let hub = try Hub()
        let (a, b, identities) = try FleetWorkloads.firstSync(directory: hub.directory, name: "idle", count: 100)
        let http = CountingHTTP()
        let runtimes = try hub.runtimes(a, b, identities, http: http)
        runtimes.forEach { $0.start() }
        defer { runtimes.forEach { $0.stop() } }
        try converge(runtimes, timeoutSeconds: 60)
        // Past the first minute's one-off reads (directory, anchor), then count.
        Thread.sleep(forTimeInterval: 2)
        let before = http.count.load(ordering: .relaxed)
        Thread.sleep(forTimeInterval: windowSeconds)
        let requests = http.count.load(ordering: .relaxed) - before
        let perDeviceMinute = Double(requests) / Double(runtimes.count) / (windowSeconds / 60)
        return BenchmarkFigure(name: "hub.fleet.idle_requests_per_minute", value: perDeviceMinute, unit: "requests/min per device", target: .valueAtMost(4))
    }
}
