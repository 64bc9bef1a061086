/// Advertising and reconcile sessions (001 §4, §7; DESIGN §5) as a state machine
/// without I/O: whether an advertisement is due after a change, and the reconcile
/// sessions in progress with each sibling, one per namespace. ``FleetNode``
/// builds the frames and runs ``ReconcileEngine`` against the replica.
///
/// A session, per (sibling, namespace):
/// ```
/// (none) ──roots differ, or a step from the peer──▶ awaitingReply(epoch)
/// awaitingReply ──a step that asks for more──▶ awaitingReply(next epoch)
/// awaitingReply ──a last step, a refusal, its timer, the peer leaves──▶ (none)
/// ```
/// ARCHITECTURE.md has the whole table.
struct ContentSync {
    struct Key: Hashable {
        let peer: DeviceID
        let namespace: String
    }

    /// A reconcile in progress: it always awaits the peer's reply, under a timer.
    struct Session {
        let id: UInt64
        /// The device that started it (ties between two simultaneous starts go to the lower id).
        let initiator: DeviceID
        var progress = ReconcileEngine.Progress()
        /// The epoch of its timer (0 until one is armed).
        var epoch: UInt64 = 0
    }

    /// A change waits for this debounce, after which the device advertises.
    private(set) var changeDebounce = Debounce()
    private var sessions: [Key: Session] = [:]

    var openSessions: Int { sessions.count }

    func session(_ key: Key) -> Session? {
        sessions[key]
    }

    // MARK: - Events

    /// The node (re)started: no session survives, no change is pending.
    mutating func onStart() {
        sessions.removeAll()
        changeDebounce = Debounce()
    }

    /// A change happened (a local write, records taken in, a generation moved):
    /// `true` when the debounce timer is to be armed (quiet → changePending).
    mutating func onChange() -> Bool {
        changeDebounce.onWanted()
    }

    /// The debounce timer fired (changePending → quiet): time to advertise.
    mutating func onChangeDebounceFired() {
        changeDebounce.onFired()
    }

    /// A session awaits the peer's reply under the timer of `session.epoch` (→ awaitingReply).
    mutating func onAwaitingReply(_ key: Key, _ session: Session) {
        precondition(session.epoch > 0, "a session awaits a reply without a timer")
        sessions[key] = session
    }

    /// The session ended (a last step, a refusal): it is forgotten (→ none).
    mutating func onEnded(_ key: Key) {
        sessions[key] = nil
    }

    /// The timer of `epoch` fired for `key`: `true` when it was the session's and
    /// the session is dropped (awaitingReply → none).
    mutating func onTimer(_ key: Key, epoch: UInt64) -> Bool {
        guard let session = sessions[key], session.epoch == epoch else { return false }
        sessions[key] = nil
        return true
    }

    /// Sessions with devices that left the roster end.
    mutating func onRosterChanged(_ roster: Set<DeviceID>) {
        for key in sessions.keys where !roster.contains(key.peer) { sessions[key] = nil }
    }

    func violations(device: DeviceID, roster: Set<DeviceID>) -> [String] {
        var broken: [String] = []
        for (key, session) in sessions {
            if !roster.contains(key.peer) || key.peer == device { broken.append("a session with \(key.peer), who is not a sibling") }
            if session.epoch == 0 { broken.append("a session with \(key.peer) on \(key.namespace) without a timer") }
        }
        return broken
    }
}

/// What this device has heard of each sibling: its last advertisement, when it
/// came, and when it last agreed with this device's own (on the runtime's
/// monotonic clock). The leader opens rounds on it (001 §4), conversations wait
/// on it (FleetNode+Delivery.swift), and the collection status reports it.
struct SiblingView {
    /// Each sibling's last advertisement.
    private(set) var heard: [DeviceID: Advertisement] = [:]
    /// When each sibling's latest advertisement arrived.
    private(set) var heardAt: [DeviceID: Int64] = [:]
    /// When each sibling was last heard agreeing with this device.
    private(set) var agreedAt: [DeviceID: Int64] = [:]

    /// `peer` advertised `advertisement` at `now`; `agreeing`: it equals this device's own.
    mutating func onAdvertisement(_ advertisement: Advertisement, from peer: DeviceID, agreeing: Bool, at now: Int64) {
        heard[peer] = advertisement
        heardAt[peer] = now
        if agreeing { agreedAt[peer] = now }
    }

    /// Advertisements of devices that left the roster are forgotten.
    mutating func onRosterChanged(_ roster: Set<DeviceID>) {
        heard = heard.filter { roster.contains($0.key) }
    }

    func violations(device: DeviceID, roster: Set<DeviceID>) -> [String] {
        heard.keys.filter { !roster.contains($0) || $0 == device }.map { "an advertisement kept from \($0), who is not a sibling" }
    }
}
