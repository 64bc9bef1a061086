import Foundation
import SteleSQL

/// The ledger client's protocol, sans I/O (DESIGN §3): the outbox as pushes
/// through the hub's record API (the mirror client's requests, retry and
/// idempotence rules), the hub's pages as changes for the app's store. It never
/// touches the network; ``LedgerDriver`` carries its requests (over a
/// ``HubClient`` in an app, into `HubService` in the simulator).
public final class LedgerSync {
    public let ledger: Ledger
    /// Records per page of the feed and of the replay.
    public var pageSize = 1_000
    /// Reports of what went wrong, for the app's log: each kind once until things go right again.
    public private(set) var reports: [String] = []
    private var reported: Set<String> = []

    public init(ledger: Ledger) {
        self.ledger = ledger
    }

    // MARK: - Requests

    /// The next push: the outbox's pending changes due now; `nil` when none is due.
    public func nextPush() throws -> MirrorRequest? {
        let due = try ledger.due()
        guard !due.isEmpty else { return nil }
        let body = MirrorSync.PushBody(
            mutations: due.map {
                MirrorSync.PushBody.Item(
                    mutation: $0.mutation, kind: $0.kind, id: $0.id, op: $0.op, payload: $0.payload.map { Data($0).base64EncodedString() }, group: nil, set: nil, member: nil,
                    modifiedAt: $0.modifiedAt)
            })
        return MirrorRequest(purpose: .push(due.map(\.mutation)), method: "POST", path: "records/push", body: Array(try JSONEncoder().encode(body)), waitSeconds: 0)
    }

    /// When a pending change is next due (its back-off), in the clock's milliseconds.
    public func nextDueTime() throws -> Int64? { try ledger.nextDueTime() }

    /// The next pull request: a record to read again, else a page of the replay
    /// while one runs, else a page of changes since the cursor. A read of one record
    /// answered in another epoch than the cursor's (`pull_first`) waits for a page
    /// of changes: its 409 starts the replay that settles every record.
    public func nextPull(waitSeconds: Int = 0) throws -> MirrorRequest {
        let connection = try ledger.database()
        if try ledger.meta("pull_first", connection).asInteger != 1,
            let (kind, id) = try connection.queryFirst("SELECT kind, id FROM ledger_refetch ORDER BY kind, id LIMIT 1", [], { ($0.text(0), $0.text(1)) })
        {
            return MirrorRequest(
                purpose: .fetch(kind: kind, id: id), method: "GET", path: "records/\(MirrorSync.escaped(kind))/\(MirrorSync.escaped(id))", body: [], waitSeconds: 0)
        }
        if try ledger.meta("replay_mode", connection).asText != nil {
            var path = "records/replay?limit=\(pageSize)"
            if let after = try ledger.meta("replay_after", connection).asText, !after.isEmpty { path += "&after=\(MirrorSync.escaped(after))" }
            return MirrorRequest(purpose: .replay, method: "GET", path: path, body: [], waitSeconds: 0)
        }
        let cursor = try ledger.cursor(connection)
        var path = "records/changes?since=\(cursor.historyID)&limit=\(pageSize)"
        if let epoch = cursor.epoch { path += "&epoch=\(MirrorSync.escaped(epoch))" }
        if waitSeconds > 0 { path += "&wait=\(waitSeconds)" }
        return MirrorRequest(purpose: .changes, method: "GET", path: path, body: [], waitSeconds: waitSeconds)
    }

    /// Starts a replay (002 "Replay and Recovery"): every record's latest version is
    /// read from the beginning and applied where the ledger holds nothing newer;
    /// the cursor stays where it is.
    public func startReplay() throws {
        let connection = try ledger.database()
        try ledger.write(connection) {
            try connection.execute("UPDATE ledger_stamps SET seen = 0 WHERE seen <> 0")
            try ledger.setMeta("replay_mode", .text("explicit"), connection)
            try ledger.setMeta("replay_after", .text(""), connection)
        }
    }

    /// Whether the ledger is downloading everything after a reset.
    public var adopting: Bool { (try? ledger.meta("adopting", ledger.database()).asInteger == 1) ?? false }

    // MARK: - Replies

    /// Handles the reply to `request` (one this instance built).
    public func handle(_ reply: MirrorReply, to request: MirrorRequest) throws -> MirrorStep {
        if let hubTime = MirrorSync.hubTime(reply) { try ledger.noteHubTime(hubTime) }
        switch request.purpose {
        case .push(let mutations): return try handlePush(reply, mutations)
        case .changes: return try handleChanges(reply)
        case .replay: return try handleReplay(reply)
        case .fetch(let kind, let id): return try handleFetch(reply, kind: kind, id: id)
        }
    }

    private func handlePush(_ reply: MirrorReply, _ mutations: [String]) throws -> MirrorStep {
        switch reply {
        case .unreachable(let why):
            return .pushFailed(reason: why, countsAttempt: false, failedNow: 0, reachable: false)
        case .lost(let why):
            let failed = try ledger.recordFailure(.failed("no answer: \(why)"), mutations: mutations)
            return .pushFailed(reason: why, countsAttempt: true, failedNow: failed, reachable: true)
        case .answer(let answer) where answer.status == 200:
            guard let parsed = try? JSONDecoder().decode(MirrorSync.PushAnswer.self, from: Data(answer.body)) else {
                let message = "the hub's answer to a push is not HUB-API's push answer"
                report("push-malformed", message)
                try ledger.recordFailure(.malformed(message), mutations: mutations)
                return .pushFailed(reason: message, countsAttempt: false, failedNow: 0, reachable: true)
            }
            reported.remove("push-malformed")
            let answered = try ledger.record(
                answers: parsed.results.map { .init(mutation: $0.mutation, status: $0.status, seq: $0.seq, reason: $0.reason, hubTime: $0.hubTime) },
                epoch: parsed.epoch)
            return .pushed(gated: 0, retired: answered.applied, conflicts: answered.conflicts, restamped: answered.restamped)
        case .answer(let answer):
            if let limit = MirrorSync.pushLimit(answer, sent: mutations.count) {
                // The hub takes fewer per push than were sent: send fewer, and lose no attempt.
                ledger.hubMutationsPerPush = limit
                return .pushFailed(reason: MirrorSync.sendingFewer(limit), countsAttempt: false, failedNow: 0, reachable: true)
            }
            let message = "the hub answered the push \(answer.status) \(answer.refusal?.code ?? ""): \(answer.refusal?.message ?? "")"
            let failed = try ledger.recordFailure(.failed(message), mutations: mutations)
            return .pushFailed(reason: message, countsAttempt: true, failedNow: failed, reachable: true)
        }
    }

    private func handleChanges(_ reply: MirrorReply) throws -> MirrorStep {
        switch reply {
        case .unreachable(let why), .lost(let why):
            return .pullFailed(reason: why, reachable: false)
        case .answer(let answer) where answer.status == 200:
            guard let page = MirrorSync.changesPage(answer.body) else {
                let message = "the hub's page of changes is not HUB-API's page"
                report("pull-malformed", message)
                return .pullFailed(reason: message, reachable: true)
            }
            reported.remove("pull-malformed")
            let applied = try ledger.applyRemote(page.records, arrival: .feed) { connection in
                let current = try ledger.cursor(connection)
                // A page of an older read moves nothing back.
                let reached = current.epoch == page.epoch ? max(current.historyID, page.next) : page.next
                try ledger.setMeta("cursor", .integer(reached), connection)
                try ledger.setMeta("epoch", .text(page.epoch), connection)
                try connection.execute("DELETE FROM ledger_meta WHERE name = 'pull_first'")
                // The first whole download after a reset is over: the passes compare again.
                if !page.more, try ledger.meta("adopting", connection).asInteger == 1 { try ledger.finishAdoption(connection) }
            }
            return .pulled(changed: applied.changed, retired: 0, superseded: 0, more: page.more)
        case .answer(let answer) where answer.status == 409 || answer.status == 410:
            guard let rewound = try? JSONDecoder().decode(MirrorSync.Rewound.self, from: Data(answer.body)) else {
                let message = "the hub answered \(answer.status) without its epoch and history id"
                report("pull-malformed", message)
                return .pullFailed(reason: message, reachable: true)
            }
            let connection = try ledger.database()
            let cursor = try ledger.cursor(connection)
            if answer.status == 409, let epoch = cursor.epoch, epoch == rewound.epoch, cursor.historyID > rewound.historyId {
                // The hub kept its epoch, so its history was not rewound by a restore it knows
                // of: the ledger's cursor is beyond anything the hub ever wrote. Bookkeeping that
                // cannot be trusted halts sync (002).
                let error = LedgerError(
                    .corrupt,
                    "the ledger \(ledger.path) is corrupt (its cursor \(cursor.historyID) is beyond the hub's history id \(rewound.historyId) in epoch \(epoch)); sync is halted and the file kept as evidence: call reset() to start a fresh ledger beside it (if the hub was put back from a backup, its operator should run stele-hub restored)",
                    file: ledger.path)
                try ledger.halt(error)
                throw error
            }
            // The hub's history is not the one the cursor is in: replay everything, send
            // again what the hub lacks, then go on from the hub's history id.
            try ledger.write(connection) {
                try connection.execute("UPDATE ledger_stamps SET seen = 0 WHERE seen <> 0")
                try ledger.setMeta("replay_mode", .text("rewind"), connection)
                try ledger.setMeta("replay_after", .text(""), connection)
                try ledger.setMeta("replay_epoch", .text(rewound.epoch), connection)
                try ledger.setMeta("replay_history", .integer(rewound.historyId), connection)
                // How much of the cursor's history the hub still holds: all of it after a
                // compaction (410), up to the fork after a restore; none when it does not say.
                try ledger.setMeta("replay_common", .integer(min(rewound.commonHistoryId ?? 0, rewound.historyId)), connection)
            }
            return .replayStarted
        case .answer(let answer):
            return .pullFailed(reason: "the hub answered the pull \(answer.status) \(answer.refusal?.code ?? "")", reachable: true)
        }
    }

    private func handleReplay(_ reply: MirrorReply) throws -> MirrorStep {
        switch reply {
        case .unreachable(let why), .lost(let why):
            return .pullFailed(reason: why, reachable: false)
        case .answer(let answer) where answer.status == 200:
            guard let page = MirrorSync.replayPage(answer.body) else {
                let message = "the hub's replay page is not HUB-API's page"
                report("replay-malformed", message)
                return .pullFailed(reason: message, reachable: true)
            }
            let applied = try ledger.applyRemote(page.records, arrival: .replay) { connection in
                guard !page.more else {
                    try ledger.setMeta("replay_after", .text(page.next), connection)
                    return
                }
                if try ledger.meta("replay_mode", connection).asText == "rewind" {
                    // A stamp the hub confirmed within the history it still holds (`replay_common`),
                    // and the replay never mentions, was deleted and its tombstone collected once
                    // every device had it (HUB-API `410 history_compacted`): a live one is read back
                    // (a 404 deletes it from the store unless a later edit stands), a tombstone stays.
                    // What the rewound hub does not hold at all is sent again by the next pass,
                    // and has no seq in its history: one kept from the history thrown away
                    // could fall inside what a later restore holds, and the version be read
                    // back, found absent and taken for a collected delete (seed 150096: a
                    // tombstone nobody asked for). A stamp marked unsent before carries no seq.
                    //
                    // A read queued before the rewind (a conflict's, to learn the winner; a
                    // rewind's before this one) asked of a history the hub no longer holds:
                    // this replay brought what the hub holds now, and sends again what it
                    // lacks. Served later, its 404 would be taken for a delete that won
                    // (seed 437035 of `--devices 1 --clients 3 --ledger-clients 3 --steps 2000
                    // --faults hub,hub-restore,crash,skew,loss,dup`: a put answered `stale`
                    // queued its read, the hub was put back from a backup without the record,
                    // and the ledger pushed a tombstone nobody asked for). Only what this
                    // rewind finds to read stays queued.
                    try connection.execute("DELETE FROM ledger_refetch")
                    let common = try ledger.meta("replay_common", connection).asInteger ?? 0
                    try connection.execute(
                        """
                        INSERT OR IGNORE INTO ledger_refetch (kind, id) SELECT kind, id FROM ledger_stamps
                        WHERE seen = 0 AND unsent = 0 AND seq > 0 AND seq <= ? AND fingerprint IS NOT NULL
                        """, [.integer(common)])
                    try connection.execute(
                        "UPDATE ledger_stamps SET unsent = 1, seq = 0 WHERE seen = 0 AND NOT (unsent = 0 AND seq > 0 AND seq <= ?)", [.integer(common)])
                    try ledger.setMeta("epoch", ledger.meta("replay_epoch", connection), connection)
                    try ledger.setMeta("cursor", ledger.meta("replay_history", connection), connection)
                    if try ledger.meta("adopting", connection).asInteger == 1 { try ledger.finishAdoption(connection) }
                }
                try connection.execute("UPDATE ledger_stamps SET seen = 0 WHERE seen <> 0")
                try connection.execute("DELETE FROM ledger_meta WHERE name IN ('replay_mode', 'replay_after', 'replay_epoch', 'replay_history', 'replay_common')")
            }
            return .replayed(records: applied.changed, more: page.more)
        case .answer(let answer) where answer.status == 400:
            // The token is not one this hub issued (it was restored again): start the replay over.
            let connection = try ledger.database()
            try ledger.write(connection) { try ledger.setMeta("replay_after", .text(""), connection) }
            return .pullFailed(reason: "the hub refused the replay token; the replay starts over", reachable: true)
        case .answer(let answer):
            return .pullFailed(reason: "the hub answered the replay \(answer.status) \(answer.refusal?.code ?? "")", reachable: true)
        }
    }

    private func handleFetch(_ reply: MirrorReply, kind: String, id: String) throws -> MirrorStep {
        let connection = try ledger.database()
        let done = { (connection: Connection) in
            try connection.execute("DELETE FROM ledger_refetch WHERE kind = ? AND id = ?", [.text(kind), .text(id)])
        }
        // Answered in another epoch than the cursor's: the hub was put back from a backup
        // since, and neither a copy nor a 404 (absent, or a tombstone) of this history
        // says what won in the one the read was asked for. The changes come first.
        if let epoch = MirrorSync.hubEpoch(reply), let mine = try ledger.meta("epoch", connection).asText, epoch != mine {
            try ledger.write(connection) { try ledger.setMeta("pull_first", .integer(1), connection) }
            // Nothing was read, and the pull goes on (to the changes, then the replay).
            return .fetched(changed: 0)
        }
        switch reply {
        case .unreachable(let why), .lost(let why):
            return .pullFailed(reason: why, reachable: false)
        case .answer(let answer) where answer.status == 200:
            guard let wire = try? JSONDecoder().decode(MirrorSync.WireRecord.self, from: Data(answer.body)), let record = MirrorSync.records([wire])?.first,
                record.kind == kind, record.id == id
            else {
                report("fetch-malformed", "the hub's record is not HUB-API's record")
                return .pullFailed(reason: "the hub's record is not HUB-API's record", reachable: true)
            }
            let applied = try ledger.applyRemote([record], arrival: .refetch, finish: done)
            return .fetched(changed: applied.changed)
        case .answer(let answer) where answer.status == 404:
            // No live copy on the hub: a tombstone won. Its time is not told; it is later than the stamp's.
            let stamp = try ledger.stamp(kind: kind, id: id)
            let tombstone = MirrorStore.PulledRecord(kind: kind, id: id, payload: nil, modifiedAt: (stamp?.modifiedAt ?? 0) &+ 1, group: nil, sets: [:], seq: 0)
            let applied = try ledger.applyRemote([tombstone], arrival: .refetch, finish: done)
            return .fetched(changed: applied.changed)
        case .answer(let answer):
            _ = connection
            return .pullFailed(reason: "the hub answered the read of \(kind) \(id) \(answer.status) \(answer.refusal?.code ?? "")", reachable: true)
        }
    }

    private func report(_ kind: String, _ message: String) {
        guard reported.insert(kind).inserted else { return }
        reports.append(message)
    }
}

/// Runs a ``LedgerSync`` over a transport: passes, pushes, pulls, and the whole
/// sync of SCENARIOS (`C sync`: pass, then push and pull until nothing moves,
/// retrying with back-off).
public final class LedgerDriver {
    public typealias CrashPoint = MirrorDriver.CrashPoint
    public typealias Crashed = MirrorDriver.Crashed

    /// The outcome of a sync.
    public struct Report: Sendable, Equatable {
        public var pass = Ledger.PassReport()
        public var pushes = 0
        public var pulls = 0
        public var changesApplied = 0
        /// The hub could not be reached: everything found stays pending.
        public var unreachable = false
        public var steps: [MirrorStep] = []
    }

    public let sync: LedgerSync
    public let transport: any MirrorTransport
    /// Waits until the ledger's clock reads a time (milliseconds); the simulator moves virtual time instead.
    public var sleepUntil: (Int64) -> Void
    /// The next push dies here, once.
    public var crashPoint: CrashPoint?
    /// Passed to every pass (``Ledger/pass(confirmingEmptyStore:confirmingDeletions:)``).
    public var confirmingEmptyStore = false
    public var confirmingDeletions = 0

    public init(sync: LedgerSync, transport: any MirrorTransport, sleepUntil: ((Int64) -> Void)? = nil) {
        self.sync = sync
        self.transport = transport
        let clock = sync.ledger.configuration.clock
        self.sleepUntil =
            sleepUntil ?? { target in
                let pause = target - clock.nowMilliseconds()
                if pause > 0 { Thread.sleep(forTimeInterval: Double(pause) / 1000) }
            }
    }

    /// One pass of the ledger over the app's store.
    @discardableResult
    public func pass() throws -> Ledger.PassReport {
        try sync.ledger.pass(confirmingEmptyStore: confirmingEmptyStore, confirmingDeletions: confirmingDeletions)
    }

    /// One push (SCENARIOS `C flush` without the pass): the due changes, sent in one request.
    /// Returns `nil` when nothing was due.
    public func push() throws -> MirrorStep? {
        guard let request = try sync.nextPush() else { return nil }
        if crashPoint == .beforeSend {
            crashPoint = nil
            throw Crashed(point: .beforeSend)
        }
        let reply = transport.exchange(request)
        if crashPoint == .afterSend, case .answer = reply {
            crashPoint = nil
            throw Crashed(point: .afterSend)
        }
        let step = try sync.handle(reply, to: request)
        if crashPoint == .afterInFlight, case .pushed = step {
            crashPoint = nil
            throw Crashed(point: .afterInFlight)
        }
        return step
    }

    /// SCENARIOS `C flush`: a pass, then one push.
    public func flush() throws -> MirrorStep? {
        try pass()
        return try push()
    }

    /// Pulls every page since the cursor, the records to read again first and the
    /// replay when one runs. Returns the steps; the last says whether the pull reached the end.
    public func pull(waitSeconds: Int = 0) throws -> [MirrorStep] {
        var steps: [MirrorStep] = []
        var wait = waitSeconds
        for _ in 0..<100_000 {
            let request = try sync.nextPull(waitSeconds: wait)
            wait = 0
            let step = try sync.handle(transport.exchange(request), to: request)
            steps.append(step)
            switch step {
            case .pulled(_, _, _, let more) where more: continue
            case .replayStarted, .replayed, .fetched: continue
            default: return steps
            }
        }
        return steps
    }

    /// SCENARIOS `C replay` (002 "Replay and Recovery"): a pass first, so every local
    /// edit and deletion is in the ledger with its date, then every record's latest
    /// version, applied where the ledger holds nothing newer; the cursor stays.
    public func replay() throws -> [MirrorStep] {
        try pass()
        try sync.startReplay()
        return try pull()
    }

    /// A pass, then pushes and pulls until the pull brings nothing new and nothing
    /// pending can be sent. After a reset the download comes first and the pass
    /// after it sends what the hub lacks. A hub that cannot be reached ends the
    /// sync at once, with what the pass found left pending.
    @discardableResult
    public func syncUntilQuiet(maximumRounds: Int = 1_000) throws -> Report {
        var report = Report()
        var needsPass = true
        for _ in 0..<maximumRounds {
            var progressed = false
            if needsPass {
                let found = try pass()
                if report.pass == Ledger.PassReport() || !found.adopting { report.pass = found }
                needsPass = false
            }
            while let step = try push() {
                report.pushes += 1
                report.steps.append(step)
                if case .pushFailed(_, _, _, let reachable) = step, !reachable {
                    report.unreachable = true
                    return report
                }
                progressed = true
            }
            let adopting = sync.adopting
            let steps = try pull()
            report.pulls += steps.count
            report.steps += steps
            for step in steps {
                switch step {
                case .pulled(let changed, _, _, _), .fetched(let changed):
                    report.changesApplied += changed
                    if changed > 0 { progressed = true }
                case .replayed(let records, _):
                    report.changesApplied += records
                    progressed = true
                    needsPass = true
                case .replayStarted:
                    progressed = true
                case .pullFailed(_, let reachable) where !reachable:
                    report.unreachable = true
                    return report
                default:
                    break
                }
            }
            if adopting && !sync.adopting {
                // The download after a reset ended: the pass now sends what the hub lacks.
                needsPass = true
                progressed = true
            }
            if progressed { continue }
            guard let due = try sync.nextDueTime() else { return report }
            sleepUntil(due)
        }
        return report
    }
}
