/// One live version of a `causal` row: a value, the dot of the write that made
/// it, and the write's hybrid timestamp.
public struct CausalVersion: Sendable, Equatable {
    public let dot: Dot
    public let timestamp: HybridTimestamp
    public let value: [UInt8]

    public init(dot: Dot, timestamp: HybridTimestamp, value: [UInt8]) {
        self.dot = dot
        self.timestamp = timestamp
        self.value = value
    }

    /// Orders concurrent versions for display: later timestamp, then larger device id.
    public var stamp: WriteStamp { WriteStamp(timestamp: timestamp, writer: dot.device) }
}

/// A `causal` row as sync ships it (RowVersion, 000 §4): the key, its version
/// vector (every write this row's state has seen), and the live versions that
/// no write in that history superseded. No versions means a tombstone.
///
/// Usually there is one version. Two writes made concurrently on two devices
/// are both kept until a later write that saw both replaces them; reads show the
/// one with the later write stamp (DESIGN §4: "deterministic winner: hybrid
/// timestamp, then device id") and the merge reports the other as a conflict.
/// Keeping the loser rather than discarding it is what makes the merge a join
/// (same result in every delivery order) and keeps a delete that saw one
/// version from resurrecting it through the other's merged vector.
public struct CausalRecord: Sendable, Equatable {
    public let key: String
    public let vector: VersionVector
    /// The surviving versions, sorted by dot.
    public let versions: [CausalVersion]

    /// The most versions a record may carry: a bound for input from outside
    /// (each device can contribute at most one surviving version).
    public static let maximumVersions = 256

    public init(key: String, vector: VersionVector, versions: [CausalVersion]) {
        self.key = key
        self.vector = vector
        // Almost always zero or one version, already in order: sort only if not.
        let inOrder = zip(versions, versions.dropFirst()).allSatisfy { $0.dot < $1.dot }
        self.versions = inOrder ? versions : versions.sorted { $0.dot < $1.dot }
    }

    /// A tombstone: the history, no live version.
    public static func tombstone(key: String, vector: VersionVector) -> CausalRecord {
        CausalRecord(key: key, vector: vector, versions: [])
    }

    public var isTombstone: Bool { versions.isEmpty }

    /// The version reads show: the latest write stamp, then the larger value.
    public var winner: CausalVersion? {
        versions.max { Self.shownFirst($1, $0) }
    }

    /// Whether reads show `first` rather than `second`: the later write stamp,
    /// then the larger value. Versions come from distinct devices, so stamps
    /// differ; the value comparison only keeps the order total.
    static func shownFirst(_ first: CausalVersion, _ second: CausalVersion) -> Bool {
        first.stamp != second.stamp ? second.stamp < first.stamp : second.value.lexicographicallyPrecedes(first.value)
    }

    /// The value reads show, or `nil` for a tombstone.
    public var value: [UInt8]? { winner?.value }

    /// Checks a record from outside before it is merged.
    /// - Throws: ``ReplicaError`` `invalidRecord`: bad key or value size, an empty
    ///   vector, too many versions, a duplicated dot, or a version whose dot the
    ///   vector does not cover.
    /// How errors name the record (built only when an error is).
    private var label: String { "causal record \"\(key.prefix(64))\"" }

    func validate() throws {
        try Limits.validateKeyAndValue(key, nil, label)
        guard !vector.isEmpty else { throw ReplicaError(.invalidRecord, "\(label) has an empty version vector") }
        guard versions.count <= Self.maximumVersions else {
            throw ReplicaError(.invalidRecord, "\(label) carries \(versions.count) versions, more than \(Self.maximumVersions)")
        }
        for (index, version) in versions.enumerated() {
            try Limits.validateKeyAndValue(key, version.value, label)
            try version.stamp.validate(label)
            guard version.dot.counter > 0, vector.covers(version.dot) else {
                throw ReplicaError(.invalidRecord, "\(label): version \(version.dot) is not covered by its vector \(vector)")
            }
            if index > 0 && versions[index - 1].dot.device == version.dot.device {
                throw ReplicaError(.invalidRecord, "\(label): two versions from one device \(version.dot.device); a later write covers an earlier one")
            }
        }
    }
}
