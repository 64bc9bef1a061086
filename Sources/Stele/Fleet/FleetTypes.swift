import SteleSQL

/// How a ``FleetNode`` paces itself. Times are durations in milliseconds: the
/// node has no clock; whoever runs it fires the timers it arms.
public struct FleetConfiguration: Sendable, Equatable {
    /// How often a device advertises its digest unprompted.
    public var advertiseIntervalMilliseconds: Int64
    /// How long after a change the device advertises (changes in a burst advertise once).
    public var changeDebounceMilliseconds: Int64
    /// How long a reconcile session may wait for the peer's next message.
    public var sessionTimeoutMilliseconds: Int64
    /// Whether this device takes part in barrier rounds and catches up with the
    /// fleet's generation: it leads and acks rounds (001 §4) and reads the anchor.
    /// Its runtime must then carry out ``FleetOutput/writeAnchor(_:)`` and
    /// ``FleetOutput/readAnchor``. Off, it declines every round, so the account
    /// collects nothing while it is on the roster (001 §9: the safe direction to fail).
    public var collects: Bool
    /// How long the fleet must stay in sync before the leader opens a round (001 §4).
    public var barrierDebounceMilliseconds: Int64
    /// How long a round may wait for its acks and its anchor before it is abandoned.
    public var barrierRoundMilliseconds: Int64
    /// The pause after a failed round, doubled after each further failure up to
    /// ``barrierMaximumBackoffMilliseconds`` (DESIGN §6: no futile rounds).
    public var barrierBackoffMilliseconds: Int64
    public var barrierMaximumBackoffMilliseconds: Int64
    /// How often a device tries again to deliver what its conversations owe a
    /// contact (``MessageNamespace/outbox()``) until a receipt cancels the duty.
    public var deliveryRetryMilliseconds: Int64
    /// How long after an agreement with a sibling a delivery that waited for it
    /// goes, if every sibling heard from lately still agrees: a sibling that
    /// came back at the same moment may be bringing a delete.
    public var deliverySettleMilliseconds: Int64
    /// Whether the runtime confirms, by draining this device's relay mailbox, that
    /// every frame a sibling sent before that moment was handed in
    /// (``FleetInput/relayDrained``): then a delivery that waited for a sibling's
    /// agreement goes at the first drain after that agreement, instead of after
    /// ``deliverySettleMilliseconds`` of hoping (a hub's relay; README "Conversations").
    public var confirmsByRelayDrain: Bool

    public init(
        advertiseIntervalMilliseconds: Int64 = 30_000, changeDebounceMilliseconds: Int64 = 250, sessionTimeoutMilliseconds: Int64 = 20_000,
        collects: Bool = true, barrierDebounceMilliseconds: Int64 = 5_000, barrierRoundMilliseconds: Int64 = 15_000,
        barrierBackoffMilliseconds: Int64 = 600_000, barrierMaximumBackoffMilliseconds: Int64 = 3_600_000, deliveryRetryMilliseconds: Int64 = 20_000,
        deliverySettleMilliseconds: Int64 = 2_000, confirmsByRelayDrain: Bool = false
    ) {
        self.advertiseIntervalMilliseconds = advertiseIntervalMilliseconds
        self.changeDebounceMilliseconds = changeDebounceMilliseconds
        self.sessionTimeoutMilliseconds = sessionTimeoutMilliseconds
        self.collects = collects
        self.barrierDebounceMilliseconds = barrierDebounceMilliseconds
        self.barrierRoundMilliseconds = barrierRoundMilliseconds
        self.barrierBackoffMilliseconds = barrierBackoffMilliseconds
        self.barrierMaximumBackoffMilliseconds = barrierMaximumBackoffMilliseconds
        self.deliveryRetryMilliseconds = deliveryRetryMilliseconds
        self.deliverySettleMilliseconds = deliverySettleMilliseconds
        self.confirmsByRelayDrain = confirmsByRelayDrain
    }
}

/// What happens to a ``FleetNode``: every input is one call to ``FleetNode/handle(_:at:)``, with the monotonic time it arrived at.
public enum FleetInput: Sendable, Equatable {
    /// The node starts (or restarts after a crash): it advertises and arms its timers.
    case start
    /// Sealed bytes arrived for this device (``SiblingChannel``): who sent them is
    /// inside, and only a sender on the roster is accepted.
    case sealed([UInt8])
    /// Sealed bytes that waited in this device's mailbox while it was away (a
    /// hub's relay keeps them): handled as ``sealed(_:)``, except that a barrier
    /// proposal among them is not acked and a round request is not acted on. A
    /// proposal's round has timed out at the leader by now, or will be proposed
    /// again once the leader hears from this device; acking it would only hold
    /// this device's records for a round that commits nothing (not acking is the
    /// safe direction, 001 §9). A request was made on what the sibling saw then;
    /// it asks again once it is in sync.
    case backlog([UInt8])
    /// An unsealed frame from a device: accepted only by a node built without a
    /// channel (the package's own tests and the unsealed benchmark baseline); a
    /// node with a channel refuses it.
    case frame(from: DeviceID, bytes: [UInt8])
    /// A timer the node armed came due.
    case timer(FleetTimer)
    /// The app wrote to the replica.
    case localChange
    /// The anchor write asked for by ``FleetOutput/writeAnchor(_:)`` ended: landed or failed.
    case anchorWritten(round: RoundNonce, succeeded: Bool)
    /// The substrate refused that write: another round's anchor holds its
    /// generation or a higher one (``AnchorHeader/mayReplace(_:)``, seed 370010).
    /// Nothing was written; the node reads the anchor and catches up with it.
    case anchorSuperseded(round: RoundNonce, reason: String)
    /// What ``FleetOutput/readAnchor`` found.
    case anchorRead(AnchorReading)
    /// The account's roster, as read from its ``Directory`` and verified:
    /// frames from a device no longer on it are refused at once, those in flight
    /// included, and `revoked` devices are refused by name. A round in progress
    /// fails at once when the roster changes (DESIGN §6: the roster is fenced).
    case rosterChanged(members: Set<DeviceID>, revoked: Set<DeviceID>)
    /// The account keys this device holds, oldest first (a rotation after a revoke arrives this way).
    case accountKeysChanged([AccountKey])
    /// The rosters of the contacts this device delivers conversations to.
    case contactsChanged([ContactRoster])
    /// New pacing (``FleetConfiguration``); `collects` may be switched at any time.
    case configurationChanged(FleetConfiguration)
    /// This device's relay mailbox was found empty: every frame a sibling sent it
    /// before now has been handed in (``FleetConfiguration/confirmsByRelayDrain``).
    case relayDrained
}

/// The result of reading the anchor substrate.
public enum AnchorReading: Sendable, Equatable {
    /// The anchor, its body opened with the account key.
    case found(Anchor)
    /// No anchor has been written for the account.
    case none
    /// The substrate cannot be reached, or the anchor cannot be read: why.
    case unavailable(String)
    /// The anchor is there and its cleartext header reads, but none of the keys
    /// held opens its body (sealed before this device got a key, say): why. The
    /// header still tells whether the anchor is ahead of this device.
    case unopened(AnchorHeader, String)
}

/// What a ``FleetNode`` asks its runtime to do.
public enum FleetOutput: Sendable, Equatable {
    /// Deliver these bytes to that device (sealed for it when the node has a channel).
    case send(to: DeviceID, bytes: [UInt8])
    /// Fire this timer after this long (re-arming a timer replaces it).
    case arm(FleetTimer, afterMilliseconds: Int64)
    /// The timer is no longer needed (a session ended before it timed out).
    case cancel(FleetTimer)
    /// Something worth telling whoever watches: a rejected frame, a finished session.
    case log(FleetEvent)
    /// Seal this anchor with the account key and write it to the anchor substrate,
    /// then report with ``FleetInput/anchorWritten(round:succeeded:)``, or
    /// ``FleetInput/anchorSuperseded(round:reason:)`` when the substrate refused it
    /// (001 §8: nothing is collected until it has landed).
    case writeAnchor(Anchor)
    /// Read the anchor (001 §7) and report with ``FleetInput/anchorRead(_:)``.
    case readAnchor
}

/// The node's timers.
public enum FleetTimer: Sendable, Hashable {
    case advertise
    case changeDebounce
    /// A session's inactivity timer; `epoch` tells a stale firing from the current one.
    case session(peer: DeviceID, namespace: String, epoch: UInt64)
    /// The fleet has been in sync for the barrier's debounce: the leader may open a round.
    case barrierDebounce
    /// A round's deadline; `epoch` names the round it was armed for.
    case barrierRound(epoch: UInt64)
    /// The pause after a failed round is over.
    case barrierBackoff
    /// A sibling asked for a snapshot has not answered.
    case snapshotWait
    /// This device acked a round and has heard no commit for too long: it
    /// withdraws its ack and applies siblings' records again; `epoch` names the ack.
    case barrierHold(epoch: UInt64)
    /// Time to try the conversations' outboxes again.
    case outbox
}

/// A notable event, reported through ``FleetOutput/log(_:)``.
public struct FleetEvent: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable, CaseIterable {
        /// Bytes that did not decode; nothing changed.
        case rejectedFrame
        /// A frame from a device that is not on the roster (or revoked from it); nothing changed.
        case unknownDevice
        /// Sealed bytes that did not open: damaged, for another device, or not
        /// sealed by a roster member; the message says which. Nothing changed.
        case rejectedSeal
        /// A frame about a namespace this device has not declared (or of another kind).
        case undeclaredNamespace
        /// A peer at another fleet generation: no content reconcile either way (001 §7).
        case generationGap
        /// A reconcile was refused: a record in it broke the rules; nothing of it applied.
        case rejectedRecords
        /// A reconcile waits: this device acked (or leads) a barrier round that is
        /// still open, and applies no sibling's records until it ends (DESIGN §6).
        case reconcileHeld
        /// A reconcile session started.
        case sessionStarted
        /// A reconcile session ended; the message says how many rows changed here.
        case sessionFinished
        /// A session heard nothing for too long and was dropped.
        case sessionTimedOut
        /// A peer's digest equals this device's in every namespace.
        case inSync
        /// This device, the leader, opened a barrier round.
        case roundOpened
        /// This device holds tombstones and asked the leader for a round.
        case roundRequested
        /// A round was abandoned: a missing or differing ack, a roster change, a failed anchor write, the deadline.
        case roundFailed
        /// A round committed here: the message says what was collected.
        case roundCommitted
        /// A barrier frame was ignored (not from the leader, a stale round, a generation that does not follow).
        case barrierIgnored
        /// This device's hold on siblings' records ended without a commit: the round's
        /// deadline passed, or the first sibling record withdrew its ack.
        case holdEnded
        /// A snapshot was not served or not taken in: a request from a device not
        /// behind, one this device has no key to seal for, or a snapshot it did not ask for.
        case snapshotDeclined
        /// This device was behind the fleet's generation and caught up: the message says how.
        case recovered
        /// This device is behind and cannot catch up for now: the message says why.
        case recoveryFailed
        /// Ops owed to a contact were sent to its devices (the message says how many).
        case delivered
        /// A contact's delivery (or receipts) was taken in.
        case deliveryReceived
        /// Ops owed to a contact wait: a sibling may hold them, and may have deleted
        /// them, so they go once this device has agreed with a sibling again.
        case deliveryWaits
        /// A read of this device's own store failed where the answer decides what
        /// is safe (its recorded ack, a digest): the step stopped and decided
        /// nothing on a guess (G5); the message says what failed and when it is
        /// tried again.
        case storageFailed
        /// What the directory served was not taken: it could not be read, its
        /// roster does not extend the one this device pinned, or a key wrapped
        /// for this device did not open. The message says which.
        case directoryFailed
    }

    public let kind: Kind
    public let peer: DeviceID?
    public let namespace: String?
    public let message: String
    /// Why, typed, when the event reports a failure: what a runtime acts on.
    public let failure: FleetFailure?

    public init(kind: Kind, peer: DeviceID?, namespace: String?, message: String, failure: FleetFailure? = nil) {
        self.kind = kind
        self.peer = peer
        self.namespace = namespace
        self.message = message
        self.failure = failure
    }

    /// A failure caused by `error`: logged as `kind`, or as ``Kind/storageFailed``
    /// when the device's own store is what failed (a full disk is no bad frame).
    static func failed(_ kind: Kind, peer: DeviceID?, namespace: String?, _ message: String, _ error: any Error) -> FleetEvent {
        let failure = FleetFailure(error)
        if case .storage = failure.cause { return FleetEvent(kind: .storageFailed, peer: peer, namespace: namespace, message: message, failure: failure) }
        return FleetEvent(kind: kind, peer: peer, namespace: namespace, message: message, failure: failure)
    }

    public var description: String {
        "\(kind)" + (peer.map { " peer \($0)" } ?? "") + (namespace.map { " \($0)" } ?? "") + ": \(message)"
    }
}

/// Why a step failed, typed: a runtime tells a full disk from a stale frame by
/// this, never by the message.
public struct FleetFailure: Sendable, Equatable, CustomStringConvertible {
    public enum Cause: Sendable, Equatable {
        /// The device's own store (or key store) failed; `sqliteCode` is SQLite's
        /// primary result code when SQLite said (`SQLITE_FULL` is 13).
        case storage(sqliteCode: Int32?)
        /// Bytes that did not decode.
        case codec
        /// Sealing or opening failed, or there was no key to do it with.
        case crypto
        /// Another device's input broke a rule of the protocol.
        case `protocol`
    }

    public let cause: Cause
    public let detail: String

    public init(cause: Cause, detail: String) {
        self.cause = cause
        self.detail = detail
    }

    /// The failure an error thrown inside a step stands for.
    public init(_ error: any Error) {
        detail = "\(error)"
        switch error {
        case let error as SQLiteError: cause = .storage(sqliteCode: error.code.primary.rawValue)
        case let error as ReplicaError:
            cause = [.corrupt, .readOnly, .stampFloorUnavailable].contains(error.code) ? .storage(sqliteCode: nil) : .protocol
        case is KeyStoreError: cause = .storage(sqliteCode: nil)
        case is CodecError: cause = .codec
        case is CryptoError, is SealError: cause = .crypto
        case let error as AnchorError: cause = error.code == .notAuthentic ? .crypto : .storage(sqliteCode: nil)
        default: cause = .protocol
        }
    }

    /// The disk is full: retrying at once only fails again.
    public var isDiskFull: Bool { cause == .storage(sqliteCode: SQLiteResultCode.full.rawValue) }

    public var description: String { "\(cause): \(detail)" }
}
