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
        // Contexts spelled out against each side's own vector: the merged one differs.
        let localVersions = local.versions.map { $0.resolved(in: local.vector) }
        let remoteVersions = remote.versions.map { $0.resolved(in: remote.vector) }
        let localDots = Set(localVersions.map(\.dot))
        let remoteDots = Set(remoteVersions.map(\.dot))
        var keptLocal = localVersions.filter { remoteDots.contains($0.dot) || !remote.vector.covers($0.dot) }
        var addedRemote = remoteVersions.filter { !localDots.contains($0.dot) && !local.vector.covers($0.dot) }
        var collision: (kept: CausalVersion, lost: CausalVersion)?
        // Two different writes under one dot: a device reissued a counter it had
        // used before, which the stamp floor rules out except at its stated limit
        // (the replica and its key store restored together from one backup,
        // ``StampFloor``), or for a device that keeps no floor. Left alone, each side would keep
        // its own version and the two would never converge; both sides keep the
        // one that reads would show (the later write stamp), and the other is
        // reported, never dropped silently.
        for (index, lost) in keptLocal.enumerated().reversed() where remoteDots.contains(lost.dot) {
            guard let theirs = remoteVersions.first(where: { $0.dot == lost.dot }) else { continue }
            guard !theirs.isSameWrite(as: lost) else {
                // One write: its context is what it saw, the smaller of two accounts
                // of it (a row stored before contexts were kept knows only its vector).
                if let mine = lost.context, let other = theirs.context, other.compare(mine) == .dominated { keptLocal[index] = theirs }
                continue
            }
            let kept = CausalRecord.shownFirst(theirs, lost) ? theirs : lost
            let beaten = kept.isSameWrite(as: theirs) ? lost : theirs
            keptLocal.removeAll { $0.isSameWrite(as: beaten) && $0.dot == beaten.dot }
            if kept.isSameWrite(as: theirs) { addedRemote.append(theirs) }
            collision = (kept, beaten)
        }
        let merged = CausalRecord(key: local.key, vector: local.vector.merged(with: remote.vector), versions: keptLocal + addedRemote)
        guard merged != local else {
            guard let collision else { return Decision(store: nil, outcome: .unchanged) }
            return Decision(store: nil, outcome: MergeOutcome(.unchanged, conflict: lost(collision.lost)))
        }

        let before = local.winner
        let after = merged.winner
        let effect: MergeOutcome.Effect =
            switch (before, after) {
            case (nil, nil): .recorded
            case (nil, _?): .inserted
            case (_?, nil): .deleted
            case let (old?, new?): old.isSameWrite(as: new) ? .recorded : .updated
            }
        if let collision { return Decision(store: merged, outcome: MergeOutcome(effect, conflict: lost(collision.lost))) }
        return Decision(store: merged, outcome: MergeOutcome(effect, conflict: conflict(local, remote, keptLocal, addedRemote, after)))
    }

    private static func lost(_ version: CausalVersion) -> Conflict {
        Conflict(resolution: .concurrentEditLost, lostValue: version.value, losingDevice: version.dot.device)
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
        // An edit that saw the delete revives the key; only one that had not is a
        // conflict. Its own context says which, whatever the remote side merged
        // since (its vector may cover the delete it never saw).
        if local.isTombstone && addedRemote.contains(where: { !$0.saw(local.vector, recordVector: remote.vector) }) {
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
