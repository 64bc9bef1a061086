/// Where a ``FleetRuntime`` stands, as its ``FleetRuntime/statusUpdates()`` tell it.
public struct FleetRuntimeStatus: Sendable, CustomStringConvertible {
    /// The runtime's link to its hub.
    public enum Connection: Sendable, Equatable, CustomStringConvertible {
        /// ``FleetRuntime/start()`` has not been called yet.
        case notStarted
        /// Started; the first long poll has not been answered yet.
        case connecting
        /// The last request to the hub was answered.
        case connected
        /// The hub could not be reached or refused for now: the runtime tries again in about `retryInSeconds`.
        case reconnecting(retryInSeconds: Double)
        /// Stopped for good: by ``FleetRuntime/stop()``, or by an error (``FleetRuntimeStatus/error``).
        case stopped

        public var description: String {
            switch self {
            case .notStarted: "not started"
            case .connecting: "connecting"
            case .connected: "connected"
            case .reconnecting(let seconds): "reconnecting in \(Int(seconds.rounded(.up)))s"
            case .stopped: "stopped"
            }
        }
    }

    public var connection: Connection
    /// This device is on the account's roster and holds an account key (a device
    /// that asked to join is not until a member approves it).
    public var isMember: Bool
    /// The siblings whose last advertisement differs from this device's digest
    /// (or who have not been heard since the runtime started).
    public var siblingsOutOfSync: [DeviceID]
    /// Reconcile sessions under way.
    public var openSessions: Int
    /// Frames waiting to go out to the hub.
    public var framesWaiting: Int
    /// A change waits for its debounce before this device advertises it.
    public var advertisementDue: Bool
    /// Collection as this device sees it: generation, tombstones, who blocks it, recovery state.
    public var collection: CollectionStatus
    /// The latest trouble, with what to do; `nil` once things work again. When
    /// ``connection`` is `.stopped` and this is set, it is why the runtime stopped.
    public var error: FleetRuntimeError?

    /// Connected, every sibling agrees with this device's digest, no session is
    /// open, its latest change was advertised and nothing waits to be sent: the
    /// siblings know where it stands too.
    public var inSync: Bool {
        connection == .connected && isMember && siblingsOutOfSync.isEmpty && openSessions == 0 && !advertisementDue && framesWaiting == 0
    }

    /// One line: what a terminal's status line shows.
    public var description: String {
        var parts = [connection.description]
        if connection == .connected {
            if inSync {
                parts.append("in sync")
            } else if !siblingsOutOfSync.isEmpty {
                parts.append("syncing with \(siblingsOutOfSync.map { String($0.hex.prefix(8)) }.joined(separator: ", "))")
            } else {
                parts.append("syncing")
            }
        }
        parts.append("generation \(collection.generation)")
        let tombstones = collection.tombstones.values.reduce(0, +)
        parts.append("\(tombstones) tombstone\(tombstones == 1 ? "" : "s")")
        if !collection.blockedBy.isEmpty {
            parts.append("collection waits for \(collection.blockedBy.map { String($0.device.hex.prefix(8)) }.joined(separator: ", "))")
        }
        if collection.state != .current { parts.append(collection.state.description) }
        if let error { parts.append(error.message) }
        return parts.joined(separator: " · ")
    }
}

/// Why a ``FleetRuntime`` could not do something, and what to do about it.
/// Errors the runtime retries by itself leave it running; the others stop it
/// (``isFatal``).
public struct FleetRuntimeError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// The hub did not answer; the runtime retries with back-off.
        case unreachable
        /// The hub answered with an error status (5xx, or a refusal the runtime does not expect); retried.
        case refused
        /// The hub answered something that is not HUB-API (garbage, a cut body); retried.
        case malformed
        /// This device is not on the account's roster yet: a member must approve it (`stele approve`). Retried.
        case awaitingApproval
        /// This device was revoked from the account. Fatal: the store keeps what it held, and syncs no more.
        case revoked
        /// The account does not exist on this hub (a wrong hub URL, or a hub whose storage was replaced). Fatal.
        case unknownAccount
        /// No key ring, or one of another device or account. Fatal.
        case keyRing
        /// Another runtime (another `stele sync`) runs this device's store. Fatal.
        case storeInUse
        /// The store or the key store failed (a full disk, a locked file); the runtime goes on and tries again.
        case storage
        /// The directory's roster or keys did not verify; retried at the next directory read.
        case directory
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Whether the runtime stopped for it.
    public var isFatal: Bool { [.revoked, .unknownAccount, .keyRing, .storeInUse].contains(code) }

    public var description: String { message }
}
