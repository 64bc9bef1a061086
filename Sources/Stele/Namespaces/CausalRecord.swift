/// A `causal` row as sync ships it: the key, its version vector and either the
/// live value with its write stamp or a tombstone (RowVersion, 000 §4).
public struct CausalRecord: Sendable, Equatable {
    public enum State: Sendable, Equatable {
        case live(value: [UInt8], stamp: WriteStamp)
        case tombstone
    }

    public let key: String
    public let vector: VersionVector
    public let state: State

    public init(key: String, vector: VersionVector, state: State) {
        self.key = key
        self.vector = vector
        self.state = state
    }

    /// The live value, or `nil` for a tombstone.
    public var value: [UInt8]? {
        if case .live(let value, _) = state { return value }
        return nil
    }

    public var isTombstone: Bool { state == .tombstone }

    /// Checks a record from outside before it is merged.
    /// - Throws: ``ReplicaError`` `invalidRecord`: bad key or value size, an empty
    ///   vector, or a live value whose writer is missing from its vector.
    func validate() throws {
        let what = "causal record \"\(key.prefix(64))\""
        try Limits.validateKeyAndValue(key, value, what)
        guard !vector.isEmpty else { throw ReplicaError(.invalidRecord, "\(what) has an empty version vector") }
        if case .live(_, let stamp) = state {
            try stamp.validate(what)
            guard vector[stamp.writer] > 0 else {
                throw ReplicaError(.invalidRecord, "\(what): its writer \(stamp.writer) is missing from its vector")
            }
        }
    }
}

/// The `causal` merge rule as a pure function (000 §4-5, DESIGN §4):
/// a dominating side wins; concurrent live vs tombstone: add-wins; concurrent
/// live vs live: the later write stamp wins; the merged vector is kept either way.
enum CausalMerge {
    struct Decision: Equatable {
        /// What to store, or `nil` to leave the local copy as it is.
        var store: CausalRecord?
        var outcome: MergeOutcome
    }

    static func merge(local: CausalRecord?, remote: CausalRecord) -> Decision {
        guard let local else {
            return Decision(store: remote, outcome: MergeOutcome(remote.isTombstone ? .recorded : .inserted))
        }
        switch remote.vector.compare(local.vector) {
        case .dominated:
            return Decision(store: nil, outcome: .unchanged)
        case .equal where remote.state == local.state:
            return Decision(store: nil, outcome: .unchanged)
        case .dominates:
            return Decision(store: remote, outcome: MergeOutcome(transition(from: local, to: remote)))
        case .equal, .concurrent:
            // Equal vectors with different states cannot arise from honest counters;
            // resolving them like concurrent writes still converges.
            return concurrent(local: local, remote: remote)
        }
    }

    private static func concurrent(local: CausalRecord, remote: CausalRecord) -> Decision {
        let merged = local.vector.merged(with: remote.vector)
        switch (local.state, remote.state) {
        case let (.live(localValue, localStamp), .live(remoteValue, remoteStamp)):
            if remoteStamp == localStamp && remoteValue == localValue {
                return Decision(store: CausalRecord(key: local.key, vector: merged, state: local.state), outcome: MergeOutcome(.recorded))
            }
            // Later stamp wins; identical stamps (only from a damaged clock) fall back to the larger value.
            let remoteWins = remoteStamp != localStamp ? remoteStamp > localStamp : localValue.lexicographicallyPrecedes(remoteValue)
            if remoteWins {
                return Decision(
                    store: CausalRecord(key: local.key, vector: merged, state: remote.state),
                    outcome: MergeOutcome(.updated, conflict: Conflict(resolution: .concurrentEditLost, lostValue: localValue, losingDevice: localStamp.writer)))
            }
            return Decision(
                store: CausalRecord(key: local.key, vector: merged, state: local.state),
                outcome: MergeOutcome(.recorded, conflict: Conflict(resolution: .concurrentEditLost, lostValue: remoteValue, losingDevice: remoteStamp.writer)))
        case (.live, .tombstone):
            // Add-wins: the delete did not see this edit, so it is not a decision about it (000 §5).
            return Decision(
                store: CausalRecord(key: local.key, vector: merged, state: local.state),
                outcome: MergeOutcome(.recorded, conflict: Conflict(resolution: .deleteLostToEdit, lostValue: nil, losingDevice: nil)))
        case (.tombstone, .live):
            return Decision(
                store: CausalRecord(key: local.key, vector: merged, state: remote.state),
                outcome: MergeOutcome(.inserted, conflict: Conflict(resolution: .deleteLostToEdit, lostValue: nil, losingDevice: nil)))
        case (.tombstone, .tombstone):
            return Decision(store: CausalRecord(key: local.key, vector: merged, state: .tombstone), outcome: MergeOutcome(.recorded))
        }
    }

    private static func transition(from local: CausalRecord, to remote: CausalRecord) -> MergeOutcome.Effect {
        switch (local.isTombstone, remote.isTombstone) {
        case (false, false): .updated
        case (false, true): .deleted
        case (true, false): .inserted
        case (true, true): .recorded
        }
    }
}
