/// A change to a replica's visible state, delivered after the transaction that
/// made it commits (never for work that was rolled back).
public struct ChangeEvent: Sendable, Equatable, CustomStringConvertible {
    /// What changed.
    public enum Subject: Sendable, Equatable {
        /// A row of a `causal`, `lww`, `appendOnly` or `local` namespace.
        case row(key: String)
        /// One event of a `log` namespace.
        case event(id: EventID, group: String)
        /// A whole `log` group, buried by a tombstone event.
        case group(String)
        /// A message of a `messages` namespace, by id.
        case message(String)
    }

    /// The kind of change.
    public enum Kind: Sendable, Equatable {
        case inserted
        case updated
        case deleted
        /// A merge chose between concurrent writes; the app can tell its user.
        case conflict(Conflict)
    }

    /// Where the change came from.
    public enum Origin: Sendable, Equatable {
        /// A write on this device.
        case local
        /// Remote state applied by sync.
        case remote
    }

    public let namespace: String
    public let subject: Subject
    public let kind: Kind
    public let origin: Origin

    public var description: String { "\(origin) \(kind) \(namespace) \(subject)" }
}

/// A decision a merge made between concurrent writes (DESIGN §2 G2: nothing is decided silently).
public struct Conflict: Sendable, Equatable {
    /// Which rule decided.
    public enum Resolution: Sendable, Equatable {
        /// A delete concurrent with an edit lost: the edit survives (add-wins, 000 §5).
        case deleteLostToEdit
        /// Two concurrent edits; the one with the later hybrid timestamp (then larger device id) won.
        case concurrentEditLost
        /// An `lww` exact timestamp tie between a write and a delete: the delete won (000 §5).
        case deleteWonTie
        /// Two different first writes to an `appendOnly` record: the earlier one stays final (002).
        case laterFirstWriteLost
    }

    public let resolution: Resolution
    /// The value that lost, when the loser was a value (not a delete).
    public let lostValue: [UInt8]?
    /// The device whose write lost, when known.
    public let losingDevice: DeviceID?
}
