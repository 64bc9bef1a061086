/// Who wrote a value and when: orders concurrent writes deterministically by
/// hybrid timestamp, then device id (DESIGN §4), the same on every device.
public struct WriteStamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let timestamp: HybridTimestamp
    public let writer: DeviceID

    public init(timestamp: HybridTimestamp, writer: DeviceID) {
        self.timestamp = timestamp
        self.writer = writer
    }

    public static func < (lhs: WriteStamp, rhs: WriteStamp) -> Bool {
        (lhs.timestamp, lhs.writer) < (rhs.timestamp, rhs.writer)
    }

    public var description: String { "\(timestamp)@\(writer)" }

    func validate(_ what: @autoclosure () -> String) throws {
        guard timestamp.rawValue <= UInt64(Int64.max) else {
            throw ReplicaError(.invalidRecord, "\(what()): timestamp \(timestamp.rawValue) is out of range")
        }
    }
}

/// What applying remote state changed (the merge functions' result).
public struct MergeOutcome: Sendable, Equatable {
    public enum Effect: Sendable, Equatable {
        /// Nothing changed: the local copy already had this (or a later) history.
        case unchanged
        /// A row or event became visible.
        case inserted
        /// A visible value changed.
        case updated
        /// A visible row (or a whole log group) went away.
        case deleted
        /// Bookkeeping changed (a merged vector, a tombstone recorded) but nothing visible.
        case recorded
        /// The kind's rule refused the record: an event of a buried log group (never
        /// stored: erasure), or a tombstone aimed at an `appendOnly` record.
        case discarded
    }

    public let effect: Effect
    /// Set when the merge chose between concurrent writes.
    public let conflict: Conflict?

    public init(_ effect: Effect, conflict: Conflict? = nil) {
        self.effect = effect
        self.conflict = conflict
    }

    static let unchanged = MergeOutcome(.unchanged)
}

extension Limits {
    static func validateKeyAndValue(_ key: String, _ value: [UInt8]?, _ what: @autoclosure () -> String) throws {
        do {
            try checkKey(key)
            if let value { try checkValue(value) }
        } catch let error as ReplicaError {
            throw ReplicaError(.invalidRecord, "\(what()): \(error.message)")
        }
    }
}
