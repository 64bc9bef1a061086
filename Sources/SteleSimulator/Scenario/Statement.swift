import Stele

/// One line of a scenario (`SCENARIOS.md`), parsed.
public enum Statement: Sendable, Equatable {
    // Fleet statements
    case fleet([String])
    case namespace(String, NamespaceKind)
    case join(String)
    case revoke(String)
    case operation(device: String, WorkloadOperation)
    case offline([String])
    case online([String])
    case partition([String], [String])
    case heal
    case networkLoss(Double)
    case networkDuplicate(Double)
    case networkDelay(min: Int64, max: Int64)
    case sync
    case advance(Int64)
    case gc(Bool)
    case backup(device: String, label: String)
    /// `restore D from NAME`; added: `... with keys`, the key store (and its
    /// stamp floor) rolled back with the replica.
    case restore(device: String, label: String, withKeys: Bool)
    case crash(String)
    case anchor(AnchorAction)
    /// Added: skews a device's wall clock (`skew D 5m`, `skew D -2h`).
    case skew(device: String, milliseconds: Int64)
    /// Added: makes one of a device's next storage steps fail: the next one
    /// (`storage D fail full`) or the one after N more (`storage D fail ioerr after 5`).
    case storageFault(device: String, StorageFault, afterSteps: Int)
    /// Added: another account with its own devices (`contact NAME D1 D2`).
    case contact(name: String, devices: [String])
    /// Added: a messages namespace bound to a contact on both sides (`conversation NS with NAME`).
    case conversation(namespace: String, contact: String)
    // Hub statements (server-authoritative mode)
    case hub(HubStatement)
    // Expectations
    case expect(Expectation)

    public enum AnchorAction: Sendable, Equatable {
        case down, up, failNextWrite
        /// Up, with no failure or delay still armed (`anchor heal`).
        case heal
        case delayNextWrite(Int64)
        /// `anchor backup as NAME` / `anchor restore from NAME`: the substrate's copy of the
        /// account's anchor is kept, then put back (a hub restored from a backup rewinds its anchor objects).
        case backup(label: String)
        case restore(label: String)
    }
}

/// What a scenario says must hold.
public enum Expectation: Sendable, Equatable {
    public enum Target: Sendable, Equatable {
        case device(String)
        case all
    }

    public enum MessageState: Sendable, Equatable {
        case text(String)
        case deleted
        case absent
    }

    /// Where a device stands with respect to the fleet's generation, as
    /// `expect D status STATE` names it (Stele's `RecoveryStatus` without the
    /// reason a device is stuck).
    public enum Status: String, Sendable, Equatable, CaseIterable {
        case current, behind
        case rolledBack = "rolled-back"
        case recovering, stuck
    }

    /// `expect D NS KEY = VALUE` (`nil`: `absent`), or `expect all ...`.
    case value(Target, namespace: String, key: String, value: String?)
    case groupEmpty(Target, namespace: String, group: String)
    case count(device: String, namespace: String, count: Int)
    case stored(device: String, namespace: String, group: String, count: Int)
    case message(device: String, namespace: String, message: String, MessageState)
    case tombstones(device: String, namespace: String?, count: Int)
    case generation(device: String, generation: UInt64)
    /// `expect D status STATE`.
    case status(device: String, state: Status)
    case gcBlockedBy(device: String, devices: [String])
    /// `expect D conflict NS KEY`; added: `expect D no conflict NS KEY` (`raised` false).
    case conflict(device: String, namespace: String, key: String, raised: Bool)
    /// Added: `expect D refused D2`, D refused frames from D2 (not on its roster).
    case refused(device: String, sender: String)
    /// Added: `expect D anchor readable|unreadable`, whether D's account keys open the anchor.
    case anchorReadable(device: String, readable: Bool)
    /// Added: `expect D storage failed N`, N forced storage faults fired on D's store.
    case storageFailed(device: String, count: Int)
    /// Added: `expect D delivered NS MSG`, a contact's receipt marks the message delivered on D.
    case delivered(device: String, namespace: String, message: String)
    /// Added: `expect D outbox NS N`, N messages of the conversation still owe a delivery on D.
    case outbox(device: String, namespace: String, count: Int)
    case converged
    case resurrections(Int)
    case lostWrites(Int)
    /// An expectation about the hub or its clients.
    case hub(HubExpectation)
}

/// A hub statement of SCENARIOS.md ("Hub statements"): the hub, its mirror
/// clients and their writes, syncs, faults and crashes.
public enum HubStatement: Sendable, Equatable {
    public enum PushFault: String, Sendable, Equatable, CaseIterable {
        case internalError = "500"
        case unavailable = "503"
        case notFound = "404"
        case timeout
    }

    public enum ClientStep: String, Sendable, Equatable, CaseIterable {
        case undo, flush, pull, sync, retry, replay, wipe, reset
    }

    case start
    case appendOnly(kind: String)
    case client(String)
    case rollup(kind: String, set: String, member: String)
    case put(client: String, kind: String, id: String, value: String, group: String?)
    case delete(client: String, kind: String, id: String)
    case member(client: String, add: Bool, kind: String, id: String, set: String, member: String)
    case groupMember(client: String, add: Bool, kind: String, group: String, set: String, member: String)
    case step(client: String, ClientStep)
    case failPushes(count: Int, PushFault)
    case down
    case up
    /// `hub heal`: up, and the push failures still queued by `hub fail next` are dropped (the healing phase).
    case heal
    case backup(label: String)
    case restore(label: String)
    case crashAt(client: String, MirrorDriver.CrashPoint)
    case crash(client: String)
    case skew(client: String, milliseconds: Int64)
    case backupClient(client: String, label: String)
    case restoreClient(client: String, label: String)
    /// `client C ledger`: a ledger client (the app owns its store).
    case ledgerClient(String)
    /// `C app put KIND ID VALUE` (a value) / `C app delete KIND ID` (nil): the app writes its own store.
    case appWrite(client: String, kind: String, id: String, value: String?)
    /// `C corrupt ledger`: the ledger's file damaged on disk.
    case corruptLedger(client: String)
    /// `C wipe keeping identity`: the app's store emptied, its identity kept (the wipe only its emptiness betrays).
    case wipeKeepingIdentity(client: String)
    /// `hub compact`: the hub's tombstone compaction runs now.
    case compact
    /// `hub revoke C`: the founder revokes C's device (it holds compaction back no more; its sessions end).
    case revoke(client: String)
}

/// What a hub scenario says must hold of the hub or a client.
public enum HubExpectation: Sendable, Equatable {
    public enum Queue: String, Sendable, Equatable, CaseIterable {
        case pending
        case inFlight = "in-flight"
        case failed
    }

    case value(client: String, kind: String, id: String, value: String?)
    case member(client: String, kind: String, id: String, set: String, member: String, has: Bool)
    case group(client: String, kind: String, group: String, set: String, member: String, has: Bool)
    case queue(client: String, Queue, count: Int)
    case hubValue(kind: String, id: String, value: String?)
    case hubMember(kind: String, id: String, set: String, member: String, has: Bool)
    case pushes(client: String, count: Int)
    case tombstones(Int)
    /// `expect hub horizon held by C`: the status endpoint names C's device as the one holding compaction back.
    case horizonHeldBy(client: String)
    /// `expect hub warns "TEXT"`: one of the status endpoint's warnings contains TEXT.
    case warns(String)
    /// `expect hub clients agree`: the hub's oracle finds nothing, the judgement
    /// `stele simulate` makes of its hub clients once they are healed (every
    /// client reads what the hub holds, every rollup matches its records, every
    /// applied write is reflected or superseded, none applied twice).
    case clientsAgree
    case conflict(client: String, kind: String, id: String)
    case halted(client: String, Bool)
}
