import Foundation
import Stele
import SteleHub
import SteleHubServer
import SteleSQL
import Synchronization
import TestSupport

/// A real hub (``HubService`` over SQLite or PostgreSQL, served by ``HubServer``
/// on a loopback port) and devices that run ``FleetRuntime``s against it, each
/// with its own store file and key ring: what an app's devices do, in one
/// process, over real sockets.
final class RuntimeRig {
    let files: TemporaryDirectory
    let storage: any HubStorage
    let service: HubService
    private(set) var server: HubServer
    var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }
    private var keep: [AnyObject] = []

    /// Pacing fast enough for a test: advertisements every second, rounds after 300 ms in sync.
    static var fast: FleetRuntime.Configuration { .quick }

    init(_ backend: Backend = .sqlite, configure: (inout HubService.Configuration) -> Void = { _ in }) throws {
        files = try TemporaryDirectory("stele-runtime")
        storage = try backend.makeStorage(&keep)
        var configuration = HubService.Configuration()
        configuration.open = true
        configure(&configuration)
        service = HubService(storage: storage, configuration: configuration)
        var serverConfiguration = HubServer.Configuration()
        serverConfiguration.port = 0
        server = try HubServer(handler: service, configuration: serverConfiguration)
    }

    deinit {
        server.stop()
        storage.close()
    }

    /// Stops serving: devices find the hub unreachable.
    func takeDown() { server.stop() }

    /// Serves again on the same port and storage.
    func bringBack() throws {
        let port = server.port
        var serverConfiguration = HubServer.Configuration()
        serverConfiguration.port = port
        server = try HubServer(handler: service, configuration: serverConfiguration)
    }

    /// One device: its store file, its key ring file, its identity.
    final class Device {
        let name: String
        let path: String
        let keys: FileKeyStore
        let identity: DeviceIdentity
        let account: AccountID
        let client: HubClient
        var runtime: FleetRuntime?

        init(name: String, path: String, identity: DeviceIdentity, account: AccountID, hub: URL, http: (any HubHTTP)?) {
            self.name = name
            self.path = path
            keys = FileKeyStore(path: path + ".keys")
            self.identity = identity
            self.account = account
            client = HubClient(hub: hub, account: account, identity: identity, timeoutSeconds: 10, http: http)
        }

        var directory: HubDirectory { HubDirectory(client: client) }

        /// Opens the store and starts a runtime on it.
        @discardableResult
        func start(_ configuration: FleetRuntime.Configuration = RuntimeRig.fast) throws -> FleetRuntime {
            let replica = try Replica.open(at: path, options: Replica.Options(stampFloor: keys))
            let runtime = try FleetRuntime(replica: replica, keyStore: keys, client: client, configuration: configuration)
            runtime.start()
            self.runtime = runtime
            return runtime
        }

        func stop() {
            runtime?.stop()
            runtime = nil
        }

        /// Reads or writes through the running runtime, or a handle of its own when none runs.
        func with<T>(_ body: (Replica) throws -> T) throws -> T {
            if let runtime { return try runtime.withReplica(body) }
            let replica = try Replica.open(at: path, options: Replica.Options(stampFloor: keys))
            return try body(replica)
        }

        func value(_ namespace: String, _ key: String) throws -> String? {
            try with { try $0.causal(namespace).get(key) }.map { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// A device founding a new account, with `namespaces` (causal) declared.
    func found(_ name: String, namespaces: [String] = ["notes"], http: (any HubHTTP)? = nil) throws -> Device {
        let identity = try DeviceIdentity.generate()
        let account = AccountID.generate()
        let device = Device(name: name, path: files.file("\(name).stele"), identity: identity, account: account, hub: url, http: http)
        try device.keys.save(try Membership.found(account, by: identity, in: device.directory, name: name))
        let replica = try Replica.create(at: device.path, account: account, device: identity.deviceID, options: Replica.Options(stampFloor: device.keys))
        for namespace in namespaces { _ = try replica.declare(namespace, .causal) }
        return device
    }

    /// A new device that asked to join `account` (not approved yet).
    func ask(_ name: String, toJoin account: AccountID, namespaces: [String] = ["notes"], http: (any HubHTTP)? = nil) throws -> Device {
        let identity = try DeviceIdentity.generate()
        let device = Device(name: name, path: files.file("\(name).stele"), identity: identity, account: account, hub: url, http: http)
        try device.directory.requestJoin(name: name)
        try device.keys.save(KeyRing(identity: identity))
        let replica = try Replica.create(at: device.path, account: account, device: identity.deviceID, options: Replica.Options(stampFloor: device.keys))
        for namespace in namespaces { _ = try replica.declare(namespace, .causal) }
        return device
    }

    /// `approver` approves `joiner` and wraps the account key for it.
    func approve(_ joiner: Device, by approver: Device) throws {
        guard let ring = try approver.keys.load() else { throw HarnessError("\(approver.name) has no key ring") }
        let request = try approver.directory.joinRequests().first { $0.device == joiner.identity.deviceID }
        guard let request else { throw HarnessError("no join request from \(joiner.name)") }
        try approver.keys.save(try Membership.approve(request.device, signingKey: request.signingKey, by: ring, in: approver.directory))
    }

    /// A phone that founded an account and a laptop it approved, both running.
    func startedPair(phoneHTTP: (any HubHTTP)? = nil, _ configuration: FleetRuntime.Configuration = RuntimeRig.fast) throws -> (phone: Device, laptop: Device) {
        let phone = try found("phone", http: phoneHTTP)
        let laptop = try join("laptop", approvedBy: phone)
        try phone.start(configuration)
        try laptop.start(configuration)
        return (phone, laptop)
    }

    /// A device that joined `account` and was approved by `approver`.
    func join(_ name: String, approvedBy approver: Device, namespaces: [String] = ["notes"], http: (any HubHTTP)? = nil) throws -> Device {
        let device = try ask(name, toJoin: approver.account, namespaces: namespaces, http: http)
        try approve(device, by: approver)
        return device
    }
}

/// Waits (polling) until `condition` holds, up to `seconds`; the test then checks it.
@discardableResult
func eventually(_ seconds: Double = 20, _ condition: () throws -> Bool) throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// A ``HubHTTP`` that counts requests and can answer some itself instead of the hub.
final class ScriptedHTTP: HubHTTP {
    let inner = URLSessionHubHTTP()
    /// Given a request, an answer to give instead of asking the hub (nil: ask it).
    private let script = Mutex<(@Sendable (HubHTTPRequest) -> Result<HubAnswer, HubClientError>?)?>(nil)
    private let log = Mutex<[(method: String, path: String, time: Date)]>([])
    private let answers = Mutex<[Int]>([])

    func perform(_ request: HubHTTPRequest, completion: @escaping @Sendable (Result<HubAnswer, HubClientError>) -> Void) {
        log.withLock { $0.append((request.method, request.url.path, Date())) }
        if let scripted = script.withLock({ $0 })?(request) {
            DispatchQueue.global().async { completion(scripted) }
            return
        }
        inner.perform(request) { [self] result in
            answers.withLock { $0.append((try? result.get().status) ?? 0) }
            completion(result)
        }
    }

    /// The statuses the hub answered (0: no answer), in the order they came.
    var statuses: [Int] { answers.withLock { $0 } }

    func answer(with script: (@Sendable (HubHTTPRequest) -> Result<HubAnswer, HubClientError>?)?) { self.script.withLock { $0 = script } }

    var requests: [(method: String, path: String, time: Date)] { log.withLock { $0 } }
    func count(_ method: String, containing fragment: String) -> Int { requests.filter { $0.method == method && $0.path.contains(fragment) }.count }
}
