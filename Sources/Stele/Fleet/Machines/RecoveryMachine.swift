/// How a device catches up with a fleet whose generation moved past it (001 §6-7,
/// 006 §5; DESIGN §6), as a state machine without I/O: ``FleetNode`` reads the
/// anchor and the replica; this machine keeps what it is doing and how it stands.
///
/// ```
/// idle ──a sibling ahead, or start──▶ readingAnchor ──read──▶ idle (caught up, or nobody ahead)
///   ▲                                                  └────▶ awaitingSnapshot(peer)
///   └──── snapshot imported, refused, or its wait timer ◀────┘
/// ```
/// ARCHITECTURE.md has the whole table.
struct RecoveryMachine {
    enum Phase: Equatable {
        case idle
        /// A read of the anchor is under way.
        case readingAnchor
        /// A snapshot was asked of this sibling.
        case awaitingSnapshot(from: DeviceID)
    }

    /// What the last attempt to catch up left, while the device is still behind.
    enum Standing: Equatable {
        case clear
        /// The anchor said this device was rolled back (restored from before the
        /// fleet's last collection); it has not recovered yet. It outranks a
        /// failure: a rolled-back device that then fails is still rolled back.
        case rolledBack
        /// The last attempt failed: why.
        case failed(String)
    }

    private(set) var phase: Phase = .idle
    private(set) var standing: Standing = .clear
    /// Siblings last heard at a higher generation than this device's, with that generation.
    private(set) var ahead: [DeviceID: UInt64] = [:]
    /// The last check could not tell where the anchor stands (unreachable, not
    /// opened, or its snapshot not imported): it is checked again at each
    /// advertisement until a read settles it. A device whose launch check failed
    /// with no sibling ahead may be below the anchor with the whole fleet (every
    /// device restored from before its rounds while it was out of reach, seed
    /// 7052): only the anchor can tell it, and only the anchor holds what the
    /// restores took away.
    private(set) var anchorUnsettled = false

    /// Where the device stands, at `generation` (``FleetNode/recoveryStatus``).
    func status(at generation: UInt64) -> RecoveryStatus {
        guard ahead.values.contains(where: { $0 > generation }) else { return phase == .readingAnchor ? .recovering : .current }
        if phase != .idle { return .recovering }
        switch standing {
        case .rolledBack: return .rolledBack
        case .failed(let why): return .stuck(why)
        case .clear: return .behind
        }
    }

    /// The sibling furthest ahead of `generation` (ties to the lowest id).
    func furthestAhead(of generation: UInt64) -> DeviceID? {
        ahead.filter { $0.value > generation }.max(by: { ($0.value, $1.key) < ($1.value, $0.key) })?.key
    }

    // MARK: - Events

    /// A sibling advertised `generation`; `nil`: its generation is not above this device's.
    mutating func onHeard(_ peer: DeviceID, ahead generation: UInt64?) {
        ahead[peer] = generation
    }

    /// A check of the anchor is wanted (idle → readingAnchor): `true` when one starts.
    mutating func onCheckAnchor() -> Bool {
        guard phase == .idle else { return false }
        phase = .readingAnchor
        return true
    }

    /// The anchor read ended (readingAnchor → idle); `settled`: it told where
    /// the anchor stands (none, or not ahead of this device). A read that finds it
    /// ahead settles when the device catches up from it (``onCaughtUp(to:fromAnchor:)``).
    mutating func onAnchorRead(settled: Bool = false) {
        if phase == .readingAnchor { phase = .idle }
        anchorUnsettled = !settled
    }

    /// The anchor moved under this device's round: its write was refused (another
    /// round's anchor holds its generation or a higher one), or an abandoned round's
    /// write landed late. Where the anchor stands is unsettled until a read
    /// settles it (or the device catches up from it).
    mutating func onAnchorMoved() {
        anchorUnsettled = true
    }

    /// The anchor shows this device rolled back.
    mutating func onRolledBack() {
        standing = .rolledBack
    }

    /// Catching up failed for `reason`, and a snapshot is asked of `peer` (→ awaitingSnapshot).
    mutating func onAskedForSnapshot(from peer: DeviceID, because reason: String) {
        phase = .awaitingSnapshot(from: peer)
        onFailed(reason)
    }

    /// No sibling is ahead to ask: the last failure no longer stands.
    mutating func onNobodyToAsk() {
        if case .failed = standing { standing = .clear }
    }

    /// A snapshot arrived from `peer`: `true` when it was the one asked for (awaitingSnapshot → idle).
    mutating func onSnapshot(from peer: DeviceID) -> Bool {
        guard phase == .awaitingSnapshot(from: peer) else { return false }
        phase = .idle
        return true
    }

    /// An attempt failed for `reason`.
    mutating func onFailed(_ reason: String) {
        if standing != .rolledBack { standing = .failed(reason) }
    }

    /// The roster is now `members`: a sibling taken off it is no longer ahead, and a
    /// snapshot asked of it is no longer awaited (awaitingSnapshot → idle). Kept, a
    /// revoked device with the lowest id stayed the one asked, every time, while the
    /// siblings ahead on the roster were never asked (seed 111020: a device that
    /// joined while the fleet moved to generation 1 never caught up).
    mutating func onRosterChanged(_ members: Set<DeviceID>) {
        ahead = ahead.filter { members.contains($0.key) }
        if case .awaitingSnapshot(let peer) = phase, !members.contains(peer) { phase = .idle }
    }

    /// The sibling asked for a snapshot did not answer in time (awaitingSnapshot → idle):
    /// it is asked again when one is next heard ahead.
    mutating func onSnapshotWaitExpired() {
        if case .awaitingSnapshot = phase { phase = .idle }
    }

    /// The device reached `generation` (→ idle, clear). From the anchor, that
    /// settles it; from a sibling's snapshot, the anchor may still be ahead of both,
    /// so a check that failed before is still tried again.
    mutating func onCaughtUp(to generation: UInt64, fromAnchor: Bool = false) {
        phase = .idle
        standing = .clear
        ahead = ahead.filter { $0.value > generation }
        if fromAnchor { anchorUnsettled = false }
    }
}
