import Foundation
import Stele

/// Where a device's files are, from `STORE` and `--keys F`: the store, its key
/// ring (`STORE.keys` unless `--keys` says), and beside the ring the device's
/// hub settings (`KEYS-hub`: the hub's URL) and the last status a `stele sync`
/// saw (`KEYS-status`), which `stele status` reads.
struct DeviceFiles {
    let store: String
    let keys: FileKeyStore

    init(store: String, keys: String?) {
        self.store = store
        self.keys = FileKeyStore(path: keys ?? store + ".keys")
    }

    var hubPath: String { keys.path + "-hub" }
    var statusPath: String { keys.path + "-status" }

    /// The hub URL saved by `init` or `join`, or `override` (`--hub`).
    /// - Throws: ``InputError`` when there is none.
    func hub(_ override: String?) throws -> URL {
        if let override { return try Self.url(override) }
        guard let data = FileManager.default.contents(atPath: hubPath), let text = String(data: data, encoding: .utf8) else {
            throw InputError(message: "no hub is set for \(store) (\(hubPath) is missing): pass --hub URL, or set the device up with stele init or stele join")
        }
        do {
            return try Self.url(text.trimmingCharacters(in: .whitespacesAndNewlines))
        } catch let error as InputError {
            throw InputError(message: "\(hubPath): \(error.message) (or pass --hub URL)")
        }
    }

    func saveHub(_ url: URL) throws {
        guard FileManager.default.createFile(atPath: hubPath, contents: Data((url.absoluteString + "\n").utf8)) else {
            throw InputError(message: "cannot write \(hubPath); check the directory is writable")
        }
    }

    /// A hub URL: http or https with a host, and no path (the client puts `/v1/...`
    /// after the host; a path given would be dropped without a word).
    static func url(_ text: String) throws -> URL {
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
            throw InputError(message: "'\(text)' is not a hub URL; give one like http://127.0.0.1:8420")
        }
        guard url.path.isEmpty || url.path == "/", url.query == nil, url.fragment == nil else {
            throw InputError(message: "'\(text)' has a path; give the hub's address alone, like http://127.0.0.1:8420 (the hub's paths start /v1 by themselves)")
        }
        return url
    }

    /// The key ring, which must exist.
    func ring() throws -> KeyRing {
        let loaded: KeyRing?
        do {
            loaded = try keys.load()
        } catch let error as KeyStoreError {
            throw InputError(message: error.message)
        }
        guard let loaded else {
            throw InputError(message: "no key ring at \(keys.path): the device's identity lives there; pass --keys F, or set the device up with stele init or stele join")
        }
        return loaded
    }

    /// The store, opened for writing, with its stamp floor in the key store.
    func replica(readOnly: Bool = false) throws -> Replica {
        do {
            return try Replica.open(at: store, options: Replica.Options(readOnly: readOnly, stampFloor: readOnly ? nil : keys))
        } catch let error as ReplicaError {
            throw InputError(message: error.message)
        } catch let error as KeyStoreError {
            throw InputError(message: error.message)
        }
    }

    /// A hub client for the store's device.
    func client(_ replica: Replica, hub override: String?, timeoutSeconds: Double = 30) throws -> HubClient {
        let ring = try ring()
        guard ring.identity.deviceID == replica.device else {
            throw InputError(message: "the key ring \(keys.path) is device \(ring.identity.deviceID.hex.prefix(8))'s, not \(store)'s (\(replica.device.hex.prefix(8))); pass the right --keys F")
        }
        return HubClient(hub: try hub(override), account: replica.account, identity: ring.identity, timeoutSeconds: timeoutSeconds)
    }

    /// Refuses to set a device up over files that exist.
    func requireNew() throws {
        for path in [store, keys.path] where FileManager.default.fileExists(atPath: path) {
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            if size > 0 { throw InputError(message: "\(path) exists already; choose another STORE (or --keys F), or remove it if it is yours to lose") }
        }
        // Before the hub hears of the device (an invite is spent, a join request
        // made): its files can be written where they go. A file is made and removed
        // there, which also finds a read-only file system or an immutable folder.
        for path in [store, keys.path] {
            let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
                throw InputError(message: "the folder \(folder) for \(path) does not exist; create it (or choose another path), then run this again: the hub was not contacted")
            }
            let probe = "\(folder)/.stele-probe-\(UUID().uuidString)"
            guard FileManager.default.createFile(atPath: probe, contents: nil) else {
                throw InputError(message: "cannot write in the folder \(folder) for \(path); fix its permissions (or choose another path), then run this again: the hub was not contacted")
            }
            try? FileManager.default.removeItem(atPath: probe)
        }
    }
}

/// What a running `stele sync` last saw, saved for `stele status`.
struct SavedStatus: Codable {
    var savedAt: Date
    var connection: String
    var state: String
    var inSync: Bool
    var siblingsOutOfSync: [String]
    var blockedBy: [String]
    var error: String?

    init(_ status: FleetRuntimeStatus) {
        savedAt = Date()
        connection = status.connection.description
        state = Self.state(status.collection.state)
        inSync = status.inSync
        siblingsOutOfSync = status.siblingsOutOfSync.map(\.hex)
        blockedBy = status.collection.blockedBy.map(\.device.hex)
        error = status.error?.message
    }

    /// HUB-API's words for the collection state.
    static func state(_ state: RecoveryStatus) -> String {
        switch state {
        case .current: "current"
        case .behind: "behind"
        case .rolledBack: "rolled-back"
        case .recovering: "recovering"
        case .stuck: "stuck"
        }
    }

    func save(to path: String) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        guard let data = try? encoder.encode(self) else { return }
        _ = FileManager.default.createFile(atPath: path + ".tmp", contents: data)
        _ = rename(path + ".tmp", path)
    }

    static func load(from path: String) -> SavedStatus? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return try? decoder.decode(SavedStatus.self, from: data)
    }
}

/// A duration: a number and `ms`, `s`, `m` or `h` (seconds without a unit).
func seconds(of text: String) -> Double? {
    for (suffix, factor) in [("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3_600.0)] where text.hasSuffix(suffix) {
        if let value = Double(text.dropLast(suffix.count)), value >= 0 { return value * factor }
    }
    return Double(text).flatMap { $0 >= 0 ? $0 : nil }
}
