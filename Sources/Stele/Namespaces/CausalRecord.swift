/// One live version of a `causal` row: a value, the dot of the write that made
/// it, the write's hybrid timestamp, and its causal context: the history the
/// write had seen when it was made.
///
/// The context travels with the version (beyond the seed; issue 14): a record's
/// vector is the merged history of everything that reached the row, so once the
/// editing side has merged a delete, the vector covers the delete although the
/// edit never saw it. Only the version's own context tells a device holding that
/// delete whether the edit saw it (nothing to report) or not (the delete lost:
/// a conflict, 000 §5), in every arrival order.
public struct CausalVersion: Sendable, Equatable {
    public let dot: Dot
    public let timestamp: HybridTimestamp
    public let value: [UInt8]
    /// What the write had seen, when it is less than its record's vector;
    /// `nil` means "its record's vector" (a version nothing was merged past
    /// since it was written, and rows stored before contexts were kept).
    public let context: VersionVector?

    public init(dot: Dot, timestamp: HybridTimestamp, value: [UInt8], context: VersionVector? = nil) {
        self.dot = dot
        self.timestamp = timestamp
        self.value = value
        self.context = context
    }

    /// The same write, with its context spelled out against `vector` (its record's).
    func resolved(in vector: VersionVector) -> CausalVersion {
        context == nil ? CausalVersion(dot: dot, timestamp: timestamp, value: value, context: vector) : self
    }

    /// Whether this is the same write as `other` (its context aside).
    func isSameWrite(as other: CausalVersion) -> Bool {
        dot == other.dot && timestamp == other.timestamp && value == other.value
    }

    /// Whether the write had seen everything `history` holds.
    func saw(_ history: VersionVector, recordVector: VersionVector) -> Bool {
        switch (context ?? recordVector).compare(history) {
        case .equal, .dominates: true
        case .dominated, .concurrent: false
        }
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
        // A context equal to the record's vector is written as none, so two devices
        // holding the same record hold it alike.
        let normalized = versions.map { version in
            version.context == vector ? CausalVersion(dot: version.dot, timestamp: version.timestamp, value: version.value) : version
        }
        // Almost always zero or one version, already in order: sort only if not.
        let inOrder = zip(normalized, normalized.dropFirst()).allSatisfy { $0.dot < $1.dot }
        self.versions = inOrder ? normalized : normalized.sorted { $0.dot < $1.dot }
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
            if let context = version.context {
                // A write saw itself, and nothing its record has not.
                guard context.covers(version.dot), [.dominated, .equal].contains(context.compare(vector)) else {
                    throw ReplicaError(.invalidRecord, "\(label): version \(version.dot) has a context \(context) outside its vector \(vector)")
                }
            }
            if index > 0 && versions[index - 1].dot.device == version.dot.device {
                throw ReplicaError(.invalidRecord, "\(label): two versions from one device \(version.dot.device); a later write covers an earlier one")
            }
        }
    }
}
