import Stele

/// What the wire tells the oracles, beyond what the stores hold: a contact's
/// ops (kept by an oracle of their own that nobody checks: the own account's
/// learns them when they land on its devices), and the leak rule for a
/// conversation's text reaching a contact after it was deleted for everyone
/// (README "Conversations"). The simulation calls it as frames are sent and
/// delivered (Simulation+OracleTap.swift).
struct OracleTap {
    /// How long the device that deleted a message must have been within the
    /// deliverer's reach for a delivery of its text to count as a leak: long
    /// enough for any fault mix to let the delete through by reconcile.
    static let leakReachMilliseconds: Int64 = 600_000

    /// Ops contacts' devices wrote.
    let contactOracle = Oracle()
    /// When each message's text first reached a contact's device, by "namespace/message".
    private var reachedContact: [String: Int64] = [:]

    enum Verdict: Equatable {
        /// No delete for everyone came before the text first reached the contact.
        case fine
        /// The promise is broken: the deleting device held the delete and had been
        /// within the deliverer's reach for ``leakReachMilliseconds``.
        case leak
        /// Deleted first, but the deleting device was out of the deliverer's reach.
        case atTheLimit
    }

    /// A message's text reached a contact's device at `now`. `deleted`: when the
    /// message was deleted for everyone, if it was; `reachableSince`: since when
    /// the deliverer and the deleting device have reached each other;
    /// `deleterHoldsIt`: the deleting device still holds the delete.
    mutating func textReached(
        _ namespace: String, _ message: String, at now: Int64, deletedAt deleted: Int64?, reachableSince: Int64?, deleterHoldsIt: Bool
    ) -> Verdict {
        let key = "\(namespace)/\(message)"
        let reached = reachedContact[key]
        if reached == nil { reachedContact[key] = now }
        guard let deleted, (reached ?? now) > deleted else { return .fine }
        if deleterHoldsIt, let reachableSince, now - max(reachableSince, deleted) >= Self.leakReachMilliseconds { return .leak }
        return .atTheLimit
    }
}
