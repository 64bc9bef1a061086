/// The `causal` merge rule as a pure function (000 §4-5, DESIGN §4).
///
/// Each side is a history (its vector) and the versions that survive in it. The
/// merged history is the pointwise maximum; a version survives if the other side
/// holds it too or has not seen it (its dot is outside the other's vector). So:
/// - a side whose history dominates wins outright (a delete that saw the edit
///   deletes it; an edit that saw the delete revives the key);
/// - a delete concurrent with an edit loses: the edit's dot is outside the
///   delete's history, so the edit survives (add-wins);
/// - two concurrent edits both survive, reads show the later write stamp, and
///   the loser is reported;
/// - the merged vector is recorded either way.
/// This is a join (commutative, associative, idempotent), so every arrival order
/// of the same records gives the same row.
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
        let localDots = Set(local.versions.map(\.dot))
        let remoteDots = Set(remote.versions.map(\.dot))
        let keptLocal = local.versions.filter { remoteDots.contains($0.dot) || !remote.vector.covers($0.dot) }
        let addedRemote = remote.versions.filter { !localDots.contains($0.dot) && !local.vector.covers($0.dot) }
        let merged = CausalRecord(key: local.key, vector: local.vector.merged(with: remote.vector), versions: keptLocal + addedRemote)
        guard merged != local else { return Decision(store: nil, outcome: .unchanged) }

        let before = local.winner
        let after = merged.winner
        let effect: MergeOutcome.Effect =
            switch (before, after) {
            case (nil, nil): .recorded
            case (nil, _?): .inserted
            case (_?, nil): .deleted
            case let (old?, new?): old == new ? .recorded : .updated
            }
        return Decision(store: merged, outcome: MergeOutcome(effect, conflict: conflict(local, remote, keptLocal, addedRemote, after)))
    }

    /// The decision to report, if the merge chose between concurrent writes.
    private static func conflict(
        _ local: CausalRecord, _ remote: CausalRecord, _ keptLocal: [CausalVersion], _ addedRemote: [CausalVersion], _ winner: CausalVersion?
    ) -> Conflict? {
        // A delete on one side that had not seen an edit of the other, which survives.
        // (Kept local versions are by construction ones the remote history lacks.)
        if remote.isTombstone && !keptLocal.isEmpty {
            return Conflict(resolution: .deleteLostToEdit, lostValue: nil, losingDevice: nil)
        }
        // An edit that saw the delete revives the key; only one that had not is a conflict.
        if local.isTombstone && !addedRemote.isEmpty && remote.vector.compare(local.vector) == .concurrent {
            return Conflict(resolution: .deleteLostToEdit, lostValue: nil, losingDevice: nil)
        }
        // Concurrent edits from both sides now stand side by side: one is hidden.
        guard let winner, !keptLocal.isEmpty, !addedRemote.isEmpty else { return nil }
        let loser: CausalVersion? =
            addedRemote.contains(winner)
            ? local.winner
            : addedRemote.max { $0.stamp < $1.stamp }
        guard let loser else { return nil }
        return Conflict(resolution: .concurrentEditLost, lostValue: loser.value, losingDevice: loser.dot.device)
    }
}
