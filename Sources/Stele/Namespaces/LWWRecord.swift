/// An `lww` row as sync ships it: the key, the live value or a delete, and the
/// write stamp that orders it (000 §5).
public struct LWWRecord: Sendable, Equatable {
    public let key: String
    /// The live value, or `nil` for a delete.
    public let value: [UInt8]?
    public let stamp: WriteStamp

    public init(key: String, value: [UInt8]?, stamp: WriteStamp) {
        self.key = key
        self.value = value
        self.stamp = stamp
    }

    public var isDeleted: Bool { value == nil }

    /// How errors name the record (built only when an error is).
    private var label: String { "lww record \"\(key.prefix(64))\"" }

    func validate() throws {
        try Limits.validateKeyAndValue(key, value, label)
        try stamp.validate(label)
    }
}

/// The `lww` merge rule as a pure function: the later hybrid timestamp wins; on
/// an exact tie a delete wins (000 §5: "an exact tie resolves delete-wins");
/// otherwise the larger device id, then the larger value, so every device agrees.
enum LWWMerge {
    struct Decision: Equatable {
        var store: LWWRecord?
        var outcome: MergeOutcome
    }

    static func merge(local: LWWRecord?, remote: LWWRecord) -> Decision {
        guard let local else {
            return Decision(store: remote, outcome: MergeOutcome(remote.isDeleted ? .recorded : .inserted))
        }
        if local == remote { return Decision(store: nil, outcome: .unchanged) }
        let tie = local.stamp.timestamp == remote.stamp.timestamp
        if tie && local.isDeleted != remote.isDeleted {
            // The delete wins the tie; report it, since the write it beat was concurrent.
            let (loser, deleteIsRemote) = local.isDeleted ? (remote, false) : (local, true)
            let conflict = Conflict(resolution: .deleteWonTie, lostValue: loser.value, losingDevice: loser.stamp.writer)
            if deleteIsRemote { return Decision(store: remote, outcome: MergeOutcome(.deleted, conflict: conflict)) }
            return Decision(store: nil, outcome: MergeOutcome(.unchanged, conflict: conflict))
        }
        let remoteWins: Bool
        if remote.stamp != local.stamp {
            remoteWins = remote.stamp > local.stamp
        } else {
            // Same stamp, both live, different values: only a damaged clock gets here.
            remoteWins = (local.value ?? []).lexicographicallyPrecedes(remote.value ?? [])
        }
        guard remoteWins else { return Decision(store: nil, outcome: .unchanged) }
        let effect: MergeOutcome.Effect =
            switch (local.isDeleted, remote.isDeleted) {
            case (false, false): .updated
            case (false, true): .deleted
            case (true, false): .inserted
            case (true, true): .recorded
            }
        return Decision(store: remote, outcome: MergeOutcome(effect))
    }
}
