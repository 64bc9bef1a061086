import Stele

/// Knows every write and delete the workload issued, with the dot, vector or
/// stamp the replica reported for it, and checks the guarantees on the devices'
/// stores (DESIGN §9): G1, no superseded value visible; G2, every unsuperseded
/// write visible, or beaten by a concurrent write under the documented rule; G3,
/// identical visible state. It counts resurrections and lost writes, each row at
/// most once per kind of finding.
///
/// A device restored from a backup takes back what it wrote after the backup and
/// never shared: the oracle forgets those operations (they no longer happened),
/// rather than counting their absence as lost writes, unless a frame it sent
/// before the restore still lands and shares them.
public final class Oracle {
    public internal(set) var resurrections = 0
    public internal(set) var lostWrites = 0
    /// Deliveries of a message deleted for everyone before it was delivered,
    /// made while the deleting device was out of the deliverer's reach (``leakedAtTheLimit(_:_:)``).
    public internal(set) var leaksAtTheLimit = 0
    /// Findings on a record a device wrote after its replica *and* its key store
    /// were rolled back together (``keysRolledBack(_:floor:)``), with a stamp at
    /// or below what it had issued before: the one case the stamp floor cannot
    /// cover (``StampFloor``), counted apart, not a failure.
    public internal(set) var reissuesAtTheLimit = 0
    /// Stores the oracle could not read while judging: a finding, never a skip
    /// (the run fails).
    public internal(set) var unreadable = 0
    /// The first findings, described for a report.
    public internal(set) var findings: [String] = []
    /// Checks run (each over every device).
    public internal(set) var checks = 0

    struct Operation {
        let id: Int
        let namespace: String
        let key: String
        let device: DeviceID
        let deviceName: String
        let time: Int64
        /// Forgotten: no store held it any more (``forgetOperationsUnknown``). When, as
        /// the oracle's count of forgettings: a backup taken before then may bring it back.
        var erasedAt: Int?
        var erased: Bool { erasedAt != nil }
        let kind: Kind

        enum Kind {
            case causalPut(value: [UInt8], dot: Dot, timestamp: HybridTimestamp, vector: VersionVector)
            case causalDelete(vector: VersionVector)
            case lww(value: [UInt8]?, stamp: WriteStamp)
            case append(id: EventID)
            case bury(marker: EventID)
            case appendOnly(value: [UInt8], stamp: WriteStamp)
            /// One op of a message (the key is the message id).
            case message(MessageOp)
        }
    }

    var operations: [Operation] = []
    /// Ops from outside the account already recorded (``arrived(_:namespace:on:deviceName:time:)``).
    var arrivedOps: [MessageOpID: Int] = [:]
    var counted: Set<String> = []
    /// Operations a restore or revocation left only on frames in flight: by
    /// operation index, the frames (sequence numbers) carrying each, and back.
    var carriersOf: [Int: Set<UInt64>] = [:]
    var carried: [UInt64: Set<Int>] = [:]
    /// Operations an anchor that landed holds (its snapshot, or the collection it
    /// recorded): no restore can take them back, since a restored device recovers
    /// from the anchor (001 §7).
    var anchored: Set<Int> = []
    /// Devices whose replica and key store were rolled back together, with the
    /// floor they had before (everything they had issued), until their counter
    /// and clock pass it.
    var rolledBackFloors: [DeviceID: (floor: StampFloor, counterPassed: Bool, clockPassed: Bool)] = [:]
    /// "namespace|key" (a log's group, a message's id) of records such a device
    /// wrote under a stamp it may have issued before.
    var limited: Set<String> = []
    /// What the fleet had seen at each anchor that landed, with ``forgettingMark`` then.
    var landedKnowledge: [(mark: Int, knowledge: Knowledge)] = []
    /// The deletes recorded of each message ("namespace|message"), by operation index.
    var messageDeletes: [String: [Int]] = [:]
    /// Message ids posted again after a collection freed them ("namespace|message"):
    /// the index of the first operation of the id's current life. Once the barrier
    /// has collected a deleted message its id may be posted again: the operations
    /// before it are of a life that ended, deleted and collected.
    var reusedFrom: [String: Int] = [:]
    /// A group's buries and a message's ops, by "namespace|key" (operation indexes).
    var lifeEnders: [String: [Int]] = [:]
    /// For an append to a group some bury had buried: the markers of that group
    /// some store held when it was made (``perform(_:on:deviceName:time:freed:markersHeld:)``).
    /// A marker buries the group's events wherever it meets them, those appended
    /// later too, while it is held; once the barrier has collected it the same name
    /// starts a new group (docs/scenarios.md `D bury`). So an event is buried by a
    /// bury made after it, or by one whose marker was held when it was made; not
    /// by one collected before it, nor by one forgotten since (lost with the only
    /// devices that held it: seed 222034 of --devices 2 --clients 2
    /// --ledger-clients 2 --steps 2000).
    var markersAtAppend: [Int: Set<EventID>] = [:]
    /// The store that knew each operation at the last pass over them (``forEachUnknown``).
    private var knowers: [Int: Knower] = [:]
    /// How many times a pass found an operation known by an unchanged store without reading it (for the tests).
    private(set) var knownUnread = 0
    /// The anchor that landed last (``recovered(_:)``).
    var lastLandedAnchor: LandedAnchor?

    /// An anchor that landed: its generation, and when its snapshot was taken, in
    /// virtual time and as ``forgettingMark``.
    struct LandedAnchor {
        let generation: UInt64
        let mark: Int
        let takenAt: Int64
        let snapshot: SnapshotEvidence
        /// What the fleet had seen when its round agreed (``collected(_:by:)``).
        let knowledge: Knowledge
    }
    /// How many times an operation was forgotten (``erase(_:)``).
    var erasures = 0

    public init() {}

    /// An anchor landed holding `snapshot` of `generation`, taken at virtual time
    /// `takenAt`, when the oracle's ``forgettingMark`` was `mark`: every operation
    /// made before then that the snapshot reflects is permanent.
    func anchorLanded(_ snapshot: Snapshot, generation: UInt64, takenAt: Int64, forgettingMark mark: Int) {
        landedKnowledge.append((erasures, snapshot.knowledge))
        let evidence = SnapshotEvidence(snapshot)
        lastLandedAnchor = LandedAnchor(generation: generation, mark: mark, takenAt: takenAt, snapshot: evidence, knowledge: snapshot.knowledge)
        for index in operations.indices where !operations[index].erased && operations[index].time <= takenAt {
            if isKnown(operations[index], by: [evidence]) { anchored.insert(index) }
        }
    }

    // MARK: - Recording

    /// Performs `operation` on `replica` and records what it reported.
    /// - Throws: storage errors (the operation did not happen). A write the rules
    ///   refuse (a second appendOnly write, an append to a buried group) happens
    ///   nowhere and is not recorded.
    /// - Returns: the rule's refusal, if the rules refused the write.
    /// - Parameters:
    ///   - freed: for a post, whether no store of the account (nor of the contact,
    ///     in a conversation) held any op of the message before it was made: the id
    ///     starts a new life if its last one ended (``reusedFrom``). Asked only then.
    ///   - markersHeld: for an append to a group a bury had buried, the markers of
    ///     the group the stores held before it was made (``markersAtAppend``).
    @discardableResult
    public func perform(
        _ operation: WorkloadOperation, on replica: Replica, deviceName: String, time: Int64, freed: (() -> Bool)? = nil,
        markersHeld: (() -> Set<EventID>)? = nil
    ) throws -> ReplicaError? {
        // Before the write: the writer's own store is among those asked.
        let nameFreed = endedLife(of: operation) && (freed?() ?? false)
        let held: Set<EventID>? = wasBuried(operation) ? (markersHeld?() ?? []) : nil
        let written: WorkloadOperation.Written
        do {
            written = try operation.write(on: replica, author: deviceName)
        } catch let error as ReplicaError where WorkloadOperation.refusals.contains(error.code) {
            return error
        }
        let kind: Operation.Kind
        switch written {
        case .nothing:
            return nil
        case let .causalPut(namespace, key, value, dot):
            guard let record = try observe(replica, { try $0.causal(namespace).record(key) }),
                let version = record.versions.first(where: { $0.dot == dot })
            else { return nil }
            kind = .causalPut(value: value, dot: dot, timestamp: version.timestamp, vector: record.vector)
        case let .causalDelete(namespace, key):
            guard let record = try observe(replica, { try $0.causal(namespace).record(key) }) else { return nil }
            kind = .causalDelete(vector: record.vector)
        case let .lww(_, _, value, stamp): kind = .lww(value: value, stamp: stamp)
        case let .appendOnly(_, _, value, stamp): kind = .appendOnly(value: value, stamp: stamp)
        case let .append(_, _, id): kind = .append(id: id)
        case let .bury(_, _, marker): kind = .bury(marker: marker)
        case let .message(_, _, op): kind = .message(op)
        }
        let (namespace, key) = written.place
        if nameFreed { reusedFrom["\(namespace)|\(key)"] = operations.count }
        if let held, case .append = kind { markersAtAppend[operations.count] = held }
        noteLimit(namespace, key, kind, by: replica.device)
        record(Operation(id: operations.count, namespace: namespace, key: key, device: replica.device, deviceName: deviceName, time: time, kind: kind))
        return nil
    }

    /// The first operation of the current life of a name ("namespace|key").
    func lifeStart(_ namespace: String, _ key: String) -> Int { reusedFrom["\(namespace)|\(key)"] ?? 0 }

    /// Whether a post aims at an id whose current life may have ended: an op of
    /// the message recorded in it and not forgotten. Only then is `freed` asked
    /// whether the stores still hold anything of it.
    private func endedLife(of operation: WorkloadOperation) -> Bool {
        guard case let .post(namespace, message, _) = operation else { return false }
        let place = "\(namespace)|\(message)"
        let first = reusedFrom[place] ?? 0
        return (lifeEnders[place] ?? []).contains { $0 >= first && !operations[$0].erased }
    }

    /// Whether an append aims at a group some bury (not forgotten) has buried.
    private func wasBuried(_ operation: WorkloadOperation) -> Bool {
        guard case let .append(namespace, group, _) = operation else { return false }
        return (lifeEnders["\(namespace)|\(group)"] ?? []).contains { !operations[$0].erased }
    }

    /// The markers that bury the event an append made (``markersAtAppend``): of the
    /// buries of its group that are not forgotten, those made after it, and those
    /// whose marker a store held when it was made.
    func buriers(of append: Operation) -> [EventID] {
        let held = markersAtAppend[append.id] ?? []
        return (lifeEnders["\(append.namespace)|\(append.key)"] ?? []).compactMap { index in
            let bury = operations[index]
            guard !bury.erased, case .bury(let marker) = bury.kind else { return nil }
            return index > append.id || held.contains(marker) ? marker : nil
        }
    }

    /// `device`'s replica and its key store were both restored from an old
    /// backup: the floor it had before (`floor`, everything it had issued) is
    /// gone with the key store, and until its counter and clock pass it, what it
    /// writes may reuse a dot or a stamp it issued before. Findings on those
    /// records count as ``reissuesAtTheLimit``.
    public func keysRolledBack(_ device: DeviceID, floor: StampFloor?) {
        guard let floor else { return }
        let previous = rolledBackFloors[device]?.floor
        rolledBackFloors[device] = (previous.map { floor.raised(to: $0) } ?? floor, false, false)
    }

    /// Marks the record an operation wrote as at the limit, if its writer was
    /// rolled back with its key store and has not yet passed its old floor.
    func noteLimit(_ namespace: String, _ key: String, _ kind: Operation.Kind, by device: DeviceID) {
        guard var state = rolledBackFloors[device] else { return }
        let (counter, stamp): (UInt64?, HybridTimestamp?) =
            switch kind {
            case let .causalPut(_, dot, timestamp, _): (dot.counter, timestamp)
            case .causalDelete(let vector): (vector[device], nil)
            case .lww(_, let stamp), .appendOnly(_, let stamp): (nil, stamp.timestamp)
            case .message(let op): (nil, HybridTimestamp(rawValue: UInt64(op.time)))
            case .append, .bury: (nil, nil)
            }
        var atLimit = false
        if let counter { if counter <= state.floor.counter { atLimit = true } else { state.counterPassed = true } }
        if let stamp { if stamp <= state.floor.clock { atLimit = true } else { state.clockPassed = true } }
        // A log event's stamp is not reported: the event is at the limit until the clock passes.
        if case .append = kind, !state.clockPassed { atLimit = true }
        if case .bury = kind, !state.clockPassed { atLimit = true }
        if atLimit { limited.insert("\(namespace)|\(key)") }
        rolledBackFloors[device] = state.counterPassed && state.clockPassed ? nil : state
    }

    /// A message op from outside the account (a contact's op, or a receipt
    /// written for one) that a device of the account took in: recorded once.
    func arrived(_ op: MessageOp, namespace: String, on replica: Replica, deviceName: String, time: Int64) {
        // Recorded again if the op was forgotten since (a restore lost it, and it came back).
        if let index = arrivedOps[op.id], !operations[index].erased { return }
        arrivedOps[op.id] = operations.count
        record(Operation(id: operations.count, namespace: namespace, key: op.message, device: replica.device, deviceName: deviceName, time: time, kind: .message(op)))
    }

    func record(_ operation: Operation) {
        switch operation.kind {
        case .bury, .message: lifeEnders["\(operation.namespace)|\(operation.key)", default: []].append(operations.count)
        default: break
        }
        if case .message(let op) = operation.kind, case .delete = op.action {
            messageDeletes["\(operation.namespace)|\(operation.key)", default: []].append(operations.count)
        }
        operations.append(operation)
    }

    /// The first delete for everyone of a message, if one was made: when (virtual time) and by which device.
    func deletedForEveryone(_ namespace: String, _ message: String) -> (time: Int64, device: String)? {
        let start = lifeStart(namespace, message)
        // The message's deletes, in the order they were recorded (``messageDeletes``).
        for index in messageDeletes["\(namespace)|\(message)"] ?? [] where index >= start {
            let operation = operations[index]
            guard !operation.erased, case .message(let op) = operation.kind, op.action == .delete(.everyone) else { continue }
            return (operation.time, operation.deviceName)
        }
        return nil
    }

    /// A deleted message's text reached a contact although the device that
    /// deleted it could talk to the one that delivered: counted with the resurrections.
    func leaked(_ subject: String, _ detail: String) {
        count(.resurrection, subject, "leak: " + detail)
    }

    /// A deleted message's text reached a contact while the device that deleted
    /// it was out of the deliverer's reach (or had only just come within it):
    /// the limit README "Conversations" states, counted apart, not a failure.
    func leakedAtTheLimit(_ subject: String, _ detail: String) {
        guard counted.insert("limit|\(subject)").inserted else { return }
        leaksAtTheLimit += 1
        if findings.count < 50 { findings.append("leak at the limit: \(subject): \(detail)") }
    }

    /// Reads what a write just committed (see ``suspendingFaults(_:_:)``).
    func observe<T>(_ replica: Replica, _ read: (Replica) throws -> T) throws -> T {
        try Self.suspendingFaults([replica]) { try read(replica) }
    }

    /// Runs the oracle's own reads. They are the observer's, not the devices':
    /// a storage fault forced on a device must neither fire on them (making the
    /// oracle miss a write that happened, or forget one that did not vanish) nor
    /// be used up by them, so faults wait until the reads are done.
    static func suspendingFaults<T>(_ replicas: [Replica], _ body: () throws -> T) rethrows -> T {
        let plans = replicas.compactMap(\.faults)
        for plan in plans { plan.pause() }
        defer { for plan in plans { plan.resume() } }
        return try body()
    }

    /// A device's state was discarded (restored from a backup, or revoked): an
    /// operation no remaining store knows of is gone from the world (its absence
    /// is then neither a lost write nor its supersession a resurrection), unless
    /// a frame sent before still carries it: then it lives if one of those frames
    /// lands and dies with the last of them (``frameLanded(_:in:)``, ``frameLost(_:)``).
    ///
    /// Knowing is judged now, not later: afterwards the restored device's counter
    /// runs on past the dots it lost (which is also why a causal write is known
    /// by a record that has seen its whole vector, not merely its dot).
    /// - Parameters:
    ///   - inFlight: the frames on the wire that can still land, by sequence number.
    ///   - account: the account, and `keys` every key of it: a snapshot a
    ///     sibling served (before a restore, say) carries what it held.
    ///   - sparing: what was out of the world already before the restore or the
    ///     revocation (``unknownOperations(to:inFlight:account:keys:)``, asked just
    ///     before it): that event did not lose it, so it is not forgotten, and the
    ///     checks find it missing (seed 295073: a recovery that dropped a delete
    ///     no round had collected hid behind the restore that came later).
    func forgetOperationsUnknown(
        to replicas: [Replica], inFlight: [(id: UInt64, bytes: [UInt8])], account: AccountID? = nil, keys: [AccountKey] = [], sparing: Set<Int> = []
    ) {
        forEachUnknown(to: replicas, inFlight: inFlight, account: account, keys: keys) { index, carrying in
            guard !sparing.contains(index) else { return }
            if carrying.isEmpty {
                erase(index)
            } else {
                carriersOf[index] = carrying
                for id in carrying { carried[id, default: []].insert(index) }
            }
        }
    }

    /// What ``forgetOperationsUnknown(to:inFlight:account:keys:sparing:)`` would
    /// forget if it ran now: no store holds it and no frame in flight carries it.
    /// Asked just before a restore or a revocation, it is what the fleet lost
    /// without one, which only a bug does.
    func unknownOperations(to replicas: [Replica], inFlight: [(id: UInt64, bytes: [UInt8])], account: AccountID? = nil, keys: [AccountKey] = []) -> Set<Int> {
        var unknown = Set<Int>()
        forEachUnknown(to: replicas, inFlight: inFlight, account: account, keys: keys) { index, carrying in
            // An appendOnly write a first write beat leaves nothing but a conflict: the
            // fleet drops it by design, and ``isKnown`` knows only the winner.
            if case .appendOnly = operations[index].kind { return }
            if carrying.isEmpty { unknown.insert(index) }
        }
        return unknown
    }

    /// Calls `body` with every operation not forgotten, not anchored and not on a
    /// frame already counted that no store in `replicas` knows, with the frames in
    /// flight that carry it (none: it is out of the world).
    ///
    /// An operation a store knew at the last pass is known again without a read
    /// when that store has not changed since (the same handle, standing where it
    /// stood: ``Replica/standing()``) and knowing it takes the store's content
    /// alone (``isKnownByContentAlone(_:)``). A restore or a revocation asks twice
    /// in a row (before and after), and in between only one store changes.
    private func forEachUnknown(
        to replicas: [Replica], inFlight: [(id: UInt64, bytes: [UInt8])], account: AccountID?, keys: [AccountKey], _ body: (Int, Set<UInt64>) -> Void
    ) {
        Self.suspendingFaults(replicas) {
            let stores = replicas.map(StoreEvidence.init)
            let standings = replicas.map { replica in replica.standing().map { Knower(replica: replica, changes: $0.changes, dataVersion: $0.dataVersion) } }
            var knownNow: [Int: Knower] = [:]
            defer { knowers = knownNow }
            var frames: [(id: UInt64, evidence: FrameEvidence)]?
            for index in operations.indices where !operations[index].erased && carriersOf[index] == nil && !anchored.contains(index) {
                if let knower = knowers[index], Self.isKnownByContentAlone(operations[index]),
                    standings.contains(where: { $0.map(knower.standsAsBefore) ?? false })
                {
                    knownNow[index] = knower
                    knownUnread += 1
                    continue
                }
                if let found = stores.indices.first(where: { isKnown(operations[index], by: [stores[$0]]) }) {
                    if let standing = standings[found] { knownNow[index] = standing }
                    continue
                }
                if frames == nil { frames = inFlight.map { ($0.id, FrameEvidence($0.bytes, account: account, keys: keys)) }.filter { !$0.evidence.isEmpty } }
                body(index, Set((frames ?? []).filter { isKnown(operations[index], by: [$0.evidence]) }.map(\.id)))
            }
        }
    }

    /// A store that knew an operation at the last pass over them, and where it stood then.
    struct Knower {
        /// Weak: a store closed since (restored, crashed, revoked) is not the store that knew.
        weak var replica: Replica?
        let changes: Int64
        let dataVersion: Int64

        /// Whether `now` is the same handle, standing where it stood.
        func standsAsBefore(_ now: Knower) -> Bool {
            guard let replica, let other = now.replica else { return false }
            return replica === other && changes == now.changes && dataVersion == now.dataVersion
        }
    }

    /// Whether a store knows `operation` by what it holds alone (``isKnown(_:by:)``),
    /// whatever else the oracle has seen since: not an `append`, whose event may be
    /// known through a marker of a bury (``buriers(of:)``, which changes as buries
    /// are forgotten and taken back).
    static func isKnownByContentAlone(_ operation: Operation) -> Bool {
        if case .append = operation.kind { false } else { true }
    }

    /// A device was restored from a backup: a backup is a copy too, so what the
    /// oracle forgot because no store held it any more is back in the world if
    /// the restored store holds it (a second restore from a later backup brings
    /// back what the first took away). Judged at once, before the device writes,
    /// and only for what was forgotten after the backup was taken
    /// (`mark`, ``forgettingMark`` then): what the world had already lost when the
    /// backup was taken cannot be in it, whatever its vectors cover (a device that
    /// lost a write runs its counter past it, seed 200026).
    ///
    /// Nor what a round the fleet agreed on after it was forgotten vouches for:
    /// the restored device is then behind that round, recovers from its
    /// snapshot, and drops every local record the round's ``Knowledge`` covers
    /// (it cannot tell a write lost before the round from one deleted and
    /// collected in it; dropping is the side that resurrects nothing).
    func takeBack(knownTo replica: Replica, forgottenAfter mark: Int) {
        Self.suspendingFaults([replica]) {
            let store = StoreEvidence(replica: replica)
            for index in operations.indices {
                guard let erasedAt = operations[index].erasedAt, erasedAt > mark, isKnown(operations[index], by: [store]) else { continue }
                var since = Knowledge()
                for landed in landedKnowledge where landed.mark >= erasedAt { since.merge(landed.knowledge) }
                guard !Self.recoveryDrops(operations[index], holding: replica, vouchedFor: since) else { continue }
                operations[index].erasedAt = nil
            }
        }
    }

    /// A device recovered (its node logged `recovered`): an anchor is a copy too.
    /// What the oracle forgot after the last anchor that landed was taken, and
    /// both that anchor's snapshot and the recovered store hold, came back from
    /// the anchor (seed 300027 of --devices 3 --steps 1000 --faults
    /// join,revoke,restore,crash,anchor,offline: the only devices that held a
    /// value were restored while the anchor write that held it was delayed; the
    /// write landed, and they recovered the value from it).
    ///
    /// Holding, not knowing: a recovered causal record keeps the vector of what
    /// the fleet agreed on, which covers versions the agreement superseded and
    /// recovery dropped (``Knowledge/uncovered(of:agreed:)``), and a restored
    /// store keeps records recovery does not vouch for. Neither came from the
    /// anchor (seeds 325033, 325052 and 324010 of the sweeps: taking back what the
    /// store merely knew counted values superseded long ago as lost).
    ///
    /// A delete the round collected leaves nothing to hold: no tombstone in the
    /// snapshot, none in the recovered store. What both carry is its effect, and
    /// the round's knowledge, which covers the delete's own stamp, says so
    /// (``collected(_:by:)``; seed 394002 of --devices 3 --steps 1000 --faults
    /// join,revoke,restore,crash,anchor,offline: the devices that held a delete
    /// were restored while the anchor of the round that collected it was in
    /// flight, a joiner and then both recovered from it and dropped the value,
    /// and the oracle, which had forgotten the delete, counted a lost write).
    func recovered(_ replica: Replica) {
        guard let anchor = lastLandedAnchor, anchor.generation == replica.generation else { return }
        Self.suspendingFaults([replica]) {
            let store = StoreEvidence(replica: replica)
            let storeKnowledge = try? replica.knowledge()
            for index in operations.indices {
                guard let erasedAt = operations[index].erasedAt, erasedAt > anchor.mark, operations[index].time <= anchor.takenAt else { continue }
                let operation = operations[index]
                let held = holds(operation, anchor.snapshot) && holds(operation, store)
                let collected = Self.collected(operation, by: anchor.knowledge) && storeKnowledge.map { Self.collected(operation, by: $0) } == true
                guard held || collected else { continue }
                operations[index].erasedAt = nil
            }
        }
    }

    /// Whether `knowledge`, what a fleet had seen when a round agreed, covers a
    /// delete's own stamp: a causal delete raises its writer's counter in the
    /// record's vector, an `lww` delete is its stamp. The round then saw it, and
    /// either kept its tombstone or collected it; a later write supersedes it as
    /// it would have anyway. Only deletes: a put's vector is covered by an
    /// agreement that superseded it as well (seeds 325033, 325052, 324010).
    static func collected(_ operation: Operation, by knowledge: Knowledge) -> Bool {
        switch operation.kind {
        case .causalDelete(let vector): knowledge.covers(vector: vector)
        case .lww(.none, let stamp): knowledge.covers(stamp)
        default: false
        }
    }

    /// Whether `evidence` holds the operation itself: its version of a causal
    /// record, its very stamp, its event, its op (a causal delete, which leaves
    /// no version, by what the record has seen).
    func holds(_ operation: Operation, _ evidence: any Evidence) -> Bool {
        let namespace = operation.namespace
        switch operation.kind {
        case .causalPut(_, let dot, _, _):
            return evidence.causal(namespace, operation.key)?.versions.contains { $0.dot == dot } ?? false
        case .causalDelete(let vector):
            return evidence.causal(namespace, operation.key).map { Self.hasSeen($0.vector, vector) } ?? false
        case .lww(_, let stamp):
            return evidence.lww(namespace, operation.key)?.stamp == stamp
        case .appendOnly(_, let stamp):
            return evidence.appendOnly(namespace, operation.key)?.stamp == stamp
        case .append(let id), .bury(let id):
            return evidence.hasEvent(namespace, id)
        case .message(let op):
            return evidence.messageOps(namespace, operation.key)?.contains(op.id) ?? false
        }
    }

    /// Whether recovering from a snapshot with `knowledge` drops what `replica`
    /// holds of the operation (``Replica/recover(from:)``: a record the
    /// knowledge covers goes, and of a message each op it covers).
    static func recoveryDrops(_ operation: Operation, holding replica: Replica, vouchedFor knowledge: Knowledge) -> Bool {
        func covered(_ stamp: WriteStamp?) -> Bool { stamp.map(knowledge.covers) ?? false }
        let namespace = operation.namespace
        switch operation.kind {
        case .causalPut, .causalDelete:
            guard let record = (try? replica.causal(namespace).record(operation.key)) ?? nil else { return false }
            return knowledge.covers(vector: record.vector)
        case .lww:
            return covered(((try? replica.lww(namespace).record(operation.key)) ?? nil)?.stamp)
        case .appendOnly:
            return covered(((try? replica.appendOnly(namespace).record(operation.key)) ?? nil)?.stamp)
        case .append(let id), .bury(let id):
            return covered(((try? replica.log(namespace).event(id)) ?? nil)?.stamp)
        case .message(let op):
            return knowledge.covers(op)
        }
    }

    /// Whether frame `id` carries operations that live or die with it.
    func isCarrier(_ id: UInt64) -> Bool { carried[id] != nil }

    /// Frame `id` was handed to a device on the roster: what it carried and the
    /// store now holds is back in the world; what the store did not take is as
    /// if the frame was lost.
    func frameLanded(_ id: UInt64, in replica: Replica) {
        guard let indexes = carried.removeValue(forKey: id) else { return }
        let store = StoreEvidence(replica: replica)
        Self.suspendingFaults([replica]) {
            for index in indexes.sorted() {
                guard isKnown(operations[index], by: [store]) else {
                    drop(id, from: index)
                    continue
                }
                for other in carriersOf.removeValue(forKey: index) ?? [] where other != id {
                    carried[other]?.remove(index)
                    if carried[other]?.isEmpty == true { carried[other] = nil }
                }
            }
        }
    }

    /// Frame `id` will never land: what it alone carried is gone.
    func frameLost(_ id: UInt64) {
        guard let indexes = carried.removeValue(forKey: id) else { return }
        for index in indexes.sorted() { drop(id, from: index) }
    }

    func drop(_ id: UInt64, from index: Int) {
        carriersOf[index]?.remove(id)
        guard carriersOf[index]?.isEmpty == true else { return }
        carriersOf[index] = nil
        erase(index)
    }

    func erase(_ index: Int) {
        erasures += 1
        operations[index].erasedAt = erasures
    }

    /// Where the oracle's forgetting stands now: a backup taken now remembers it
    /// (``takeBack(knownTo:forgottenAfter:)``).
    var forgettingMark: Int { erasures }

    func isKnown(_ operation: Operation, by evidence: [any Evidence]) -> Bool {
        evidence.contains { store in
            switch operation.kind {
            // A causal write is known where the record has seen everything the write
            // had seen (its vector, its own dot included): every effect it has on
            // what is superseded is then there too. Covering its dot alone proves
            // nothing once its writer lost it to a restore and ran its counter past
            // it (seed 4019 of --seed 4000 --devices 4 --steps 3000).
            case .causalPut(_, _, _, let vector):
                return store.causal(operation.namespace, operation.key).map { Self.hasSeen($0.vector, vector) } ?? false
            case .causalDelete(let vector):
                // In a whole snapshot, a key that is not there was deleted and collected.
                return store.causal(operation.namespace, operation.key).map { Self.hasSeen($0.vector, vector) } ?? store.isComplete
            case .lww(let value, let stamp):
                // Known where the record is the write or beats it in the merge's own
                // order (``lwwPrecedes``): on an equal timestamp a delete wins whatever
                // the writers, so a live record tied with a delete has not seen it
                // (seed 81102: comparing stamps, writer included, took a revoked
                // device's unshared delete as anchored).
                guard let record = store.lww(operation.namespace, operation.key) else { return value == nil && store.isComplete }
                return !Self.lwwPrecedes((record.value, record.stamp), (value, stamp))
            case .append(let id):
                // A complete snapshot lacking the event says nothing: the event may
                // never have reached the fleet (made after its device acked, say), and
                // if its group was buried the bury is what the oracle goes by.
                guard !store.hasEvent(operation.namespace, id) else { return true }
                // Known where a marker that buries it is. Made into a group no bury had
                // buried, every marker of the group does; made into one a bury had
                // buried, a marker collected before it buries nothing of it (``buriers(of:)``).
                guard store.isBuried(operation.namespace, operation.key) else { return false }
                guard markersAtAppend[operation.id] != nil else { return true }
                return buriers(of: operation).contains { store.hasEvent(operation.namespace, $0) }
            case .bury(let marker):
                return store.hasEvent(operation.namespace, marker) || store.isComplete
            case .appendOnly(_, let stamp):
                return store.appendOnly(operation.namespace, operation.key)?.stamp == stamp
            case .message(let op):
                // In a whole snapshot, a message that is not there was deleted and
                // collected, if it was deleted: an op of a message whose post never
                // reached the fleet (an orphan, kept outside the digest by the devices
                // that took it in) is simply not there (seed 250035 of --devices 3
                // --steps 2000: a contact's reaction counted as anchored, then lost
                // with the last device that held it).
                guard let held = store.messageOps(operation.namespace, operation.key) else {
                    if case .post = op.action { return false }
                    return store.isComplete && isDeleted(operation.namespace, operation.key)
                }
                return held.contains(op.id)
            }
        }
    }

    /// Whether a delete of the message (for me or for everyone) is among the operations that happened.
    func isDeleted(_ namespace: String, _ message: String) -> Bool {
        let first = lifeStart(namespace, message)
        return (messageDeletes["\(namespace)|\(message)"] ?? []).contains { $0 >= first && !operations[$0].erased }
    }

    /// Whether `history` has seen everything `write` had seen.
    static func hasSeen(_ history: VersionVector, _ write: VersionVector) -> Bool {
        switch history.compare(write) {
        case .equal, .dominates: true
        case .dominated, .concurrent: false
        }
    }
}
