import Foundation
import Stele

/// What the hub's mirror clients must agree on after healing (issue 18), judged
/// from every push the simulated hub answered and the state everyone ends in:
/// - every client's effective read equals the hub's truth (records and member sets);
/// - no confirmed delete came back (a record the hub deleted is live again
///   without a genuinely newer write);
/// - no mutation was applied twice (one id, one change, per epoch of the hub's history);
/// - no intent was lost (each mutation the hub applied is reflected, or
///   superseded by a newer write);
/// - every rollup equals its recomputation from scratch.
public final class MirrorOracle {
    /// A mutation the hub answered `applied`, in the order the hub applied it.
    struct Applied {
        let order: Int
        /// The oracle's event clock when the hub applied it.
        var clock = 0
        let epoch: Int
        let mutation: String
        let kind: String
        let id: String
        let op: String
        let set: String?
        let member: String?
        let payload: [UInt8]?
        let modifiedAt: Int64
        let seq: Int64
    }

    private(set) var applied: [Applied] = []

    /// What a user's write aims at: a record's payload, or one member of one of its sets.
    public struct Target: Hashable, Sendable {
        let kind: String
        let id: String
        let set: String?
        let member: String?

        init(kind: String, id: String, set: String? = nil, member: String? = nil) {
            self.kind = kind
            self.id = id
            self.set = set
            self.member = member
        }
    }

    /// Every write a user asked for, with the order of the hub's answers at the time:
    /// a write asked after a mutation was applied supersedes it whatever became of the
    /// write (sent, cancelled against a pending one, overlaid forward, refused).
    private var intents: [Target: [Int]] = [:]

    func noteIntent(_ targets: [Target]) {
        for target in targets { intents[target, default: []].append(applied.count) }
    }

    /// Whether a user asked for a write to `target` after the mutation at `order` was applied.
    private func intendedAfter(_ target: Target, _ order: Int) -> Bool {
        intents[target]?.contains { $0 > order } ?? false
    }
    /// The hub's epochs so far (a restore starts a new one).
    var epoch = 0
    /// The history id each epoch started from (the restored copy's): an answer
    /// `applied` with a position at or below it, which the same mutation was already
    /// answered in an earlier epoch, is the restored copy remembering the mutation id
    /// (the first application), not a new one. (A position at or below it that is new
    /// for the mutation is a change that changed nothing, an idempotent add or remove,
    /// and it counts: it tells the state at its time.)
    var forks: [Int: Int64] = [:]
    /// Every position each mutation was answered `applied` at, over all epochs.
    private var answeredAt: [String: Set<Int64>] = [:]
    /// Records a restore took back to a tombstone or to nothing, with the order of the
    /// hub's answers at the time: the restored history holds no member of them, so a
    /// member change applied before can only come back with the record's own re-push
    /// from a client that saw it; a client that never saw it (the one whose change
    /// was in flight included) is answered `not_found` and drops it, as for any deleted record.
    private var deadAfterRestore: [String: [Int]] = [:]

    /// Notes what a restore left: `live` holds "kind id" of the records the restored copy has live.
    func noteRestore(live: Set<String>) {
        tick += 1
        restores.append(tick)
        let touched = Set(applied.filter { $0.set != nil }.map { "\($0.kind) \($0.id)" })
        for record in touched.subtracting(live) { deadAfterRestore[record, default: []].append(applied.count) }
    }
    /// Seqs answered per (epoch, mutation id): more than one is a mutation applied twice.
    private var seqs: [String: Set<Int64>] = [:]

    public private(set) var findings: [String] = []
    public private(set) var mismatches = 0
    public private(set) var resurrections = 0
    public private(set) var appliedTwice = 0
    public private(set) var lostIntents = 0
    public private(set) var rollupErrors = 0

    /// Mutations the hub applied, over the run.
    public var appliedCount: Int { applied.filter { $0.seq >= 0 }.count }

    /// Ledger clients: pushes made while halted, tombstones for what the client never saw deleted.
    public private(set) var haltedPushes = 0
    public private(set) var forgedTombstones = 0
    /// Records some push deleted on the hub (a tombstone a ledger client may hold and send again).
    private var everDeleted: Set<String> = []

    /// The oracle's event clock: pushes, pages received, restores and disasters, in the order they happened.
    private var tick = 0
    /// Who holds a copy of each version ("kind id modifiedAt payload"), since when: the
    /// client that pushed it, and every client a page or a read brought it to.
    private var copies: [String: [(client: String, since: Int)]] = [:]
    /// What destroyed a client's copies, and when: a wiped app store loses its data
    /// (the live versions it held), a corrupt ledger its bookkeeping (the tombstones).
    enum Disaster { case data, bookkeeping }
    private var disasters: [String: [(Disaster, Int)]] = [:]
    /// When the hub was put back from a backup.
    private var restores: [Int] = []

    static func version(_ kind: String, _ id: String, _ modifiedAt: Int64, _ payload: String?) -> String { "\(kind) \(id) \(modifiedAt) \(payload ?? "-")" }

    /// A version a page brought (`payload` base64, `nil` for a tombstone).
    struct Received: Decodable {
        let kind: String
        let id: String
        let payload: String?
        let modifiedAt: Int64
    }

    /// Versions pages brought a ledger client during its current step: copies
    /// only once its store holds them (``settleReceived(by:holds:)``).
    private var pending: [String: [Received]] = [:]

    /// The versions of a page of records (changes, replay, or one record).
    private static func versions(_ body: [UInt8]) -> [Received] {
        struct Page: Decodable {
            let changes: [Received]?
            let records: [Received]?
        }
        if let page = try? JSONDecoder().decode(Page.self, from: Data(body)) { return (page.changes ?? []) + (page.records ?? []) }
        if let record = try? JSONDecoder().decode(Received.self, from: Data(body)) { return [record] }
        return []
    }

    /// A page of records (changes, replay, or one record) the hub gave a mirror
    /// client: its canonical tables hold what a page brings, so each version is a copy.
    func observe(received body: [UInt8], by client: String) {
        let records = Self.versions(body)
        guard !records.isEmpty else { return }
        tick += 1
        for record in records { copies[Self.version(record.kind, record.id, record.modifiedAt, record.payload), default: []].append((client, tick)) }
    }

    /// A page the hub gave a ledger client: its app's store takes a pulled version
    /// only when it still holds what the ledger knows (DESIGN §8.3), and a wiped
    /// store takes nothing, though the ledger's stamp moves on. The versions wait
    /// for the end of the client's step (seed 194013 of --devices 2
    /// --ledger-clients 2 --steps 3000: a page into a store wiped with its
    /// identity kept was counted a copy that outlived the hub's restore).
    func hold(received body: [UInt8], by client: String) {
        pending[client, default: []] += Self.versions(body)
    }

    /// The end of a ledger client's step: the versions its pages brought that it
    /// holds now (`holds`: the store has the live version, or the ledger keeps the
    /// tombstone) are its copies; the rest never reached it.
    func settleReceived(by client: String, holds: (Received) -> Bool) {
        guard let records = pending.removeValue(forKey: client), !records.isEmpty else { return }
        tick += 1
        for record in records where holds(record) {
            copies[Self.version(record.kind, record.id, record.modifiedAt, record.payload), default: []].append((client, tick))
        }
    }

    /// A disaster destroyed `client`'s copies of one kind.
    func noteDisaster(_ disaster: Disaster, at client: String) {
        tick += 1
        disasters[client, default: []].append((disaster, tick))
    }

    /// Whether every copy of an applied version is gone by disasters no sync can
    /// undo: the hub's by a restore after it applied the version, every client's by
    /// a wipe or a corrupt ledger (a put) or a corrupt ledger (a tombstone) after it
    /// got its copy. A mirror client's copy is never destroyed here.
    private func destroyedEverywhere(_ mutation: Applied) -> Bool {
        guard restores.contains(where: { $0 > mutation.clock }) else { return false }
        let key = Self.version(mutation.kind, mutation.id, mutation.modifiedAt, mutation.payload.map { Data($0).base64EncodedString() })
        // A tombstone lives in the ledger's bookkeeping (a wipe keeps it); a live version in the
        // store, with its date in the bookkeeping: a fresh ledger cannot tell it is newer than the
        // hub's copy, so its adoption takes the hub's (a reset after corruption: DESIGN §8.3).
        let kinds: [Disaster] = mutation.payload == nil ? [.bookkeeping] : [.data, .bookkeeping]
        return (copies[key] ?? []).allSatisfy { copy in disasters[copy.client]?.contains { kinds.contains($0.0) && $0.1 > copy.since } ?? false }
    }

    public var failed: Bool { mismatches + resurrections + appliedTwice + lostIntents + rollupErrors + haltedPushes + forgedTombstones > 0 }

    /// Everything the oracle counts as a failure.
    public var failures: Int { mismatches + resurrections + appliedTwice + lostIntents + rollupErrors + haltedPushes + forgedTombstones }

    /// A ledger client's push, as it leaves: nothing may leave while the client is
    /// halted, and a tombstone only for what its app deleted or the hub deleted
    /// (002: no wave of tombstones after a wipe; never a forged one).
    func observe(ledgerPush body: [UInt8], from client: SimulatedLedgerClient) {
        guard let push = try? JSONDecoder().decode(Push.self, from: Data(body)) else { return }
        if client.halted {
            haltedPushes += 1
            findings.append("\(client.name) pushed \(push.mutations.count) changes while its sync was halted")
        }
        for item in push.mutations where item.op == "delete" {
            let key = "\(item.kind) \(item.id)"
            if !client.appDeleted.contains(key) && !everDeleted.contains(key) {
                forgedTombstones += 1
                findings.append("\(client.name) pushed a tombstone for \(key), which neither its app nor the hub ever deleted")
            }
        }
    }

    private struct Push: Decodable {
        struct Item: Decodable {
            let mutation: String
            let kind: String
            let id: String
            let op: String
            let payload: String?
            let set: String?
            let member: String?
            let modifiedAt: Int64
        }

        let mutations: [Item]
    }

    private struct Answer: Decodable {
        struct Result: Decodable {
            let mutation: String
            let status: String
            let seq: Int64?
        }

        let results: [Result]
    }

    /// A push the hub answered with `status` and `body` (delivered to the client or not).
    func observe(push body: [UInt8], status: Int, answer: [UInt8], from client: String) {
        guard status == 200, let push = try? JSONDecoder().decode(Push.self, from: Data(body)),
            let results = try? JSONDecoder().decode(Answer.self, from: Data(answer))
        else { return }
        let items = Dictionary(push.mutations.map { ($0.mutation, $0) }, uniquingKeysWith: { first, _ in first })
        for result in results.results where result.status == "applied" || result.status == "not_found" {
            guard let item = items[result.mutation] else { continue }
            if item.op == "delete" { everDeleted.insert("\(item.kind) \(item.id)") }
            tick += 1
            if item.op == "put" || item.op == "delete" {
                copies[Self.version(item.kind, item.id, item.modifiedAt, item.payload), default: []].append((client, tick))
            }
            guard let seq = result.seq else {
                // A delete of what the hub did not have: an intent that supersedes older writes all the same.
                if item.op == "delete" {
                    applied.append(
                        Applied(
                            order: applied.count, clock: tick, epoch: epoch, mutation: item.mutation, kind: item.kind, id: item.id, op: "delete-absent", set: nil, member: nil,
                            payload: nil, modifiedAt: item.modifiedAt, seq: -1))
                }
                continue
            }
            if let fork = forks[epoch], seq <= fork, answeredAt[result.mutation]?.contains(seq) == true { continue }
            answeredAt[result.mutation, default: []].insert(seq)
            let key = "\(epoch) \(result.mutation)"
            // The same answer again (a push sent again after its answer was lost) is the first application, not a new one.
            guard seqs[key, default: []].insert(seq).inserted else { continue }
            if seqs[key]?.count == 2 {
                appliedTwice += 1
                findings.append("mutation \(result.mutation) applied twice in epoch \(epoch): seqs \(seqs[key]?.sorted() ?? [])")
            }
            applied.append(
                Applied(
                    order: applied.count, clock: tick, epoch: epoch, mutation: item.mutation, kind: item.kind, id: item.id, op: item.op, set: item.set,
                    member: item.member, payload: item.payload.flatMap { Data(base64Encoded: $0) }.map { [UInt8]($0) }, modifiedAt: item.modifiedAt, seq: seq))
        }
    }

    /// Judges the healed world: every client synced until quiet, the hub up.
    public func check(_ hub: SimulatedHub) throws {
        let truth = try hub.truth()
        let hubRecords = try hub.allRecords()
        for client in hub.clients {
            let store = client.store
            let kinds = Set(truth.records.keys).union(try store.kinds())
            for kind in kinds.sorted() {
                let reads = Dictionary(uniqueKeysWithValues: try store.records(kind: kind).map { ($0.id, $0.payload) })
                let expected = truth.records[kind] ?? [:]
                if reads != expected {
                    mismatches += 1
                    let extra = Set(reads.keys).subtracting(expected.keys).sorted().prefix(3)
                    let missing = Set(expected.keys).subtracting(reads.keys).sorted().prefix(3)
                    let differing = expected.keys.filter { reads[$0] != nil && reads[$0] != expected[$0] }.sorted().prefix(3)
                    findings.append("\(client.name) reads \(kind) unlike the hub: extra \(Array(extra)), missing \(Array(missing)), different \(Array(differing))")
                }
                for (id, _) in expected {
                    for set in Set(truth.members.filter { $0[0] == kind && $0[1] == id }.map { $0[2] }).union(try store.setNames(kind: kind, id: id)) {
                        let mine = Set(try store.members(kind: kind, id: id, set: set))
                        let theirs = Set(truth.members.filter { $0[0] == kind && $0[1] == id && $0[2] == set }.map { $0[3] })
                        if mine != theirs {
                            mismatches += 1
                            findings.append("\(client.name) reads \(kind) \(id) \(set) = \(mine.sorted()), the hub \(theirs.sorted())")
                        }
                    }
                }
            }
            for mismatch in try store.rollupMismatches().prefix(3) {
                rollupErrors += 1
                findings.append("\(client.name) rollup: \(mismatch)")
            }
        }
        for client in hub.ledgerClients {
            if let halt = client.ledger.halt {
                mismatches += 1
                findings.append("\(client.name) is still halted after healing: \(halt.message)")
                continue
            }
            var reads: [String: [String: [UInt8]]] = [:]
            for entity in try client.source.all() { reads[entity.kind, default: [:]][entity.id] = entity.payload }
            for kind in Set(reads.keys).union(truth.records.keys).sorted() {
                let mine = reads[kind] ?? [:]
                let expected = truth.records[kind] ?? [:]
                guard mine != expected else { continue }
                mismatches += 1
                let extra = Set(mine.keys).subtracting(expected.keys).sorted().prefix(3)
                let missing = Set(expected.keys).subtracting(mine.keys).sorted().prefix(3)
                let differing = expected.keys.filter { mine[$0] != nil && mine[$0] != expected[$0] }.sorted().prefix(3)
                findings.append("\(client.name)'s app store holds \(kind) unlike the hub: extra \(Array(extra)), missing \(Array(missing)), different \(Array(differing))")
            }
        }
        checkIntents(hubRecords, truth.members)
    }

    /// One version of a record, as the hub applied it under any mutation id.
    private struct AppliedVersion: Hashable {
        let kind, id, op: String
        let modifiedAt: Int64
        init(_ mutation: Applied) { (kind, id, op, modifiedAt) = (mutation.kind, mutation.id, mutation.op, mutation.modifiedAt) }
    }

    /// The order at which the hub first applied each version: `applied` is in order,
    /// so the first one met is the earliest.
    private var firstApplications: [AppliedVersion: Int] {
        var first: [AppliedVersion: Int] = [:]
        for mutation in applied where first[AppliedVersion(mutation)] == nil { first[AppliedVersion(mutation)] = mutation.order }
        return first
    }

    /// Each applied mutation is reflected in the hub's final state or superseded by a newer write.
    private func checkIntents(_ records: [String: (payload: [UInt8]?, modifiedAt: Int64)], _ members: Set<[String]>) {
        // The last applied payload op of each record, and the last applied delta of each member.
        var lastMemberOp: [String: Applied] = [:]
        var lastDelete: [String: Applied] = [:]
        let firstApplication = firstApplications
        for mutation in applied {
            let record = "\(mutation.kind) \(mutation.id)"
            let final = records[record]
            switch mutation.op {
            case "delete-absent":
                lastDelete[record] = mutation
            case "put":
                // Reflected: the hub holds it, or a version that beats it (later, or a tie the tombstone or a larger payload won).
                // A later delete (even of a record the hub had lost), or any later write a user asked for, supersedes the put.
                let deletedLater = applied.contains { $0.kind == mutation.kind && $0.id == mutation.id && $0.op.hasPrefix("delete") && $0.modifiedAt >= mutation.modifiedAt }
                guard let final else {
                    if deletedLater || intendedAfter(Target(kind: mutation.kind, id: mutation.id), mutation.order) || destroyedEverywhere(mutation) { continue }
                    lostIntents += 1
                    findings.append("the put \(mutation.mutation) of \(record) is gone: the hub has no such record")
                    continue
                }
                let beaten =
                    final.modifiedAt > mutation.modifiedAt
                    || (final.modifiedAt == mutation.modifiedAt
                        && (final.payload == nil || final.payload == mutation.payload || !(final.payload ?? []).lexicographicallyPrecedes(mutation.payload ?? [])))
                if !beaten && !intendedAfter(Target(kind: mutation.kind, id: mutation.id), mutation.order) && !destroyedEverywhere(mutation) {
                    lostIntents += 1
                    findings.append("the put \(mutation.mutation) of \(record) at \(mutation.modifiedAt) is lost: the hub holds a version of \(final.modifiedAt)")
                }
            case "delete":
                lastDelete[record] = mutation
                // A write a user asked for after the delete supersedes it (even if that write was lost to a disaster after).
                // After the delete was first applied, not after this application: a client sends the same
                // tombstone again under a new mutation id once a restored hub lost it (a ledger reset, a
                // replay), and a write asked for in between came after the delete all the same (seed 153017).
                if let final, final.payload != nil, final.modifiedAt <= mutation.modifiedAt, !destroyedEverywhere(mutation),
                    !intendedAfter(Target(kind: mutation.kind, id: mutation.id), firstApplication[AppliedVersion(mutation)] ?? mutation.order)
                {
                    resurrections += 1
                    findings.append("\(record), deleted by \(mutation.mutation) at \(mutation.modifiedAt), is live again at \(final.modifiedAt)")
                }
            default:
                if let set = mutation.set, let member = mutation.member { lastMemberOp["\(record) \(set) \(member)"] = mutation }
            }
        }
        for (key, mutation) in lastMemberOp {
            let record = "\(mutation.kind) \(mutation.id)"
            // A delete after it cleared the sets; a record no longer live holds nothing; a later write a user asked for supersedes it.
            if let delete = lastDelete[record], delete.order > mutation.order { continue }
            if deadAfterRestore[record]?.contains(where: { $0 > mutation.order }) == true { continue }
            if intendedAfter(Target(kind: mutation.kind, id: mutation.id, set: mutation.set, member: mutation.member), mutation.order) { continue }
            guard let final = records[record], final.payload != nil else { continue }
            let holds = members.contains([mutation.kind, mutation.id, mutation.set ?? "", mutation.member ?? ""])
            if holds != (mutation.op == "add") {
                lostIntents += 1
                findings.append("the \(mutation.op) \(mutation.mutation) of \(key) is lost: the hub \(holds ? "has" : "lacks") it")
            }
        }
    }
}
