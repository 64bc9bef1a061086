import Foundation

/// One HTTP request the mirror client wants sent, under the account's path
/// (`/v1/accounts/{a}/` + ``path``).
public struct MirrorRequest: Sendable, Equatable {
    public enum Purpose: Sendable, Equatable {
        /// A push of these mutation ids.
        case push([String])
        /// A page of the change feed.
        case changes
        /// A page of the replay.
        case replay
        /// One record, read again (a ledger client's change the hub would not take).
        case fetch(kind: String, id: String)
    }

    public let purpose: Purpose
    public let method: String
    /// The path under the account, with its query (`records/changes?since=4&limit=1000`).
    public let path: String
    /// A JSON body, or empty.
    public let body: [UInt8]
    /// How long the hub may hold the request (a long poll), in seconds.
    public let waitSeconds: Int
}

/// What became of a ``MirrorRequest``.
public enum MirrorReply: Sendable {
    /// The hub answered.
    case answer(HubAnswer)
    /// No hub could be reached; nothing was sent.
    case unreachable(String)
    /// The request left, and no answer came back (a timeout): the hub may have applied it.
    case lost(String)
}

/// What handling a reply did.
public enum MirrorStep: Sendable, Equatable {
    /// A push answered: mutations gated on their echo, retired, in conflict, sent again with a corrected stamp.
    case pushed(gated: Int, retired: Int, conflicts: Int, restamped: Int)
    /// A push failed; `failedNow` mutations exhausted their attempts. `reachable` is false when no hub could be reached.
    case pushFailed(reason: String, countsAttempt: Bool, failedNow: Int, reachable: Bool)
    /// A page of changes applied; `more` when the hub has more now.
    case pulled(changed: Int, retired: Int, superseded: Int, more: Bool)
    /// A replay page applied; `more` while the replay goes on.
    case replayed(records: Int, more: Bool)
    /// The hub's history was rewound: the next pulls replay.
    case replayStarted
    /// A pull failed (the hub could not be reached, refused, or answered garbage).
    case pullFailed(reason: String, reachable: Bool)
    /// One record read again and applied (a ledger client's).
    case fetched(changed: Int)
}

/// The mirror client's protocol, sans I/O (DESIGN §3): it turns the store's
/// queue into push requests and the hub's answers into queue and canonical
/// changes, and never touches the network itself. ``MirrorDriver`` carries its
/// requests (over a ``HubClient`` in an app, into `HubService` in the simulator).
public final class MirrorSync {
    public let store: MirrorStore
    /// Changes per page of the feed and of the replay.
    public var pageSize = 1_000
    /// Errors reported so far, by kind, so that one the hub keeps making is reported once.
    private var reported: Set<String> = []
    /// Reports of what went wrong, for the app's log: each kind once until things go right again.
    public private(set) var reports: [String] = []

    public init(store: MirrorStore) {
        self.store = store
    }

    // MARK: - Flush

    /// The next push: pending mutations due now, claimed for this instance; `nil` when none is due.
    public func nextPush() throws -> MirrorRequest? {
        let claimed = try store.claim()
        guard !claimed.isEmpty else { return nil }
        let body = PushBody(
            mutations: claimed.map { item in
                PushBody.Item(
                    mutation: item.mutation, kind: item.kind, id: item.id, op: item.op, payload: item.payload.map { Data($0).base64EncodedString() },
                    group: item.op == "put" ? item.group : nil, set: item.set.isEmpty ? nil : item.set, member: item.member.isEmpty ? nil : item.member,
                    modifiedAt: item.modifiedAt)
            })
        let encoded = try JSONEncoder().encode(body)
        return MirrorRequest(purpose: .push(claimed.map(\.mutation)), method: "POST", path: "records/push", body: Array(encoded), waitSeconds: 0)
    }

    /// When a pending mutation is next due (a back-off or another flusher's lease), in the store clock's milliseconds.
    public func nextDueTime() throws -> Int64? { try store.nextDueTime() }

    // MARK: - Pull

    /// The next pull request: a page of the replay while one runs, else a page of
    /// changes since the cursor (from the beginning when the canonical data is
    /// gone under a surviving cursor). `waitSeconds` > 0 makes it a long poll.
    public func nextPull(waitSeconds: Int = 0) throws -> MirrorRequest {
        if let replay = try store.replayState() {
            var path = "records/replay?limit=\(pageSize)"
            if !replay.after.isEmpty { path += "&after=\(Self.escaped(replay.after))" }
            return MirrorRequest(purpose: .replay, method: "GET", path: path, body: [], waitSeconds: 0)
        }
        if try store.canonicalDataLost() { try store.forgetCursor() }
        let cursor = try store.cursor()
        var path = "records/changes?since=\(cursor.historyID)&limit=\(pageSize)"
        if let epoch = cursor.epoch { path += "&epoch=\(Self.escaped(epoch))" }
        if waitSeconds > 0 { path += "&wait=\(waitSeconds)" }
        return MirrorRequest(purpose: .changes, method: "GET", path: path, body: [], waitSeconds: waitSeconds)
    }

    /// Starts a replay that ends where the cursor is: every record's latest
    /// version is read again (records this client dropped come back, what the hub
    /// lacks is queued again) and the cursor is left as it was.
    public func startReplay() throws {
        let cursor = try store.cursor()
        try store.beginReplay(epoch: cursor.epoch ?? "", historyID: cursor.historyID, common: cursor.historyID)
    }

    // MARK: - Replies

    /// Handles the reply to `request` (one this instance built).
    public func handle(_ reply: MirrorReply, to request: MirrorRequest) throws -> MirrorStep {
        if let hubTime = Self.hubTime(reply) { try store.noteHubTime(hubTime) }
        switch request.purpose {
        case .push(let mutations): return try handlePush(reply, mutations)
        case .changes: return try handleChanges(reply)
        case .replay: return try handleReplay(reply)
        case .fetch: return .pullFailed(reason: "a mirror client reads no single record", reachable: true)
        }
    }

    /// The history epoch an answer carries (`Stele-Hub-Epoch`, on a single record's read), if it does.
    static func hubEpoch(_ reply: MirrorReply) -> String? {
        guard case .answer(let answer) = reply else { return nil }
        return answer.headers["stele-hub-epoch"]
    }

    /// The hub's clock an answer carries (`Stele-Hub-Time`), if it does.
    static func hubTime(_ reply: MirrorReply) -> Int64? {
        guard case .answer(let answer) = reply, let text = answer.headers["stele-hub-time"] else { return nil }
        return Int64(text)
    }

    private func handlePush(_ reply: MirrorReply, _ mutations: [String]) throws -> MirrorStep {
        switch reply {
        case .unreachable(let why):
            // 003/SCENARIOS: a hub that cannot be reached costs no attempt.
            try store.recordFailure(.unreachable, mutations: mutations)
            return .pushFailed(reason: why, countsAttempt: false, failedNow: 0, reachable: false)
        case .lost(let why):
            let failed = try store.recordFailure(.failed("no answer: \(why)"), mutations: mutations)
            return .pushFailed(reason: why, countsAttempt: true, failedNow: failed, reachable: true)
        case .answer(let answer) where answer.status == 200:
            guard let parsed = try? JSONDecoder().decode(PushAnswer.self, from: Data(answer.body)) else {
                let message = "the hub's answer to a push is not HUB-API's push answer"
                report("push-malformed", message)
                try store.recordFailure(.malformed(message), mutations: mutations)
                return .pushFailed(reason: message, countsAttempt: false, failedNow: 0, reachable: true)
            }
            reported.remove("push-malformed")
            let recorded = try store.record(
                answers: parsed.results.map { .init(mutation: $0.mutation, status: $0.status, seq: $0.seq, reason: $0.reason, hubTime: $0.hubTime) },
                historyID: parsed.historyId, epoch: parsed.epoch)
            return .pushed(gated: recorded.gated, retired: recorded.retired, conflicts: recorded.conflicts, restamped: recorded.restamped)
        case .answer(let answer):
            if let limit = Self.pushLimit(answer, sent: mutations.count) {
                // The hub takes fewer per push than were sent: send fewer, and lose no attempt.
                store.hubMutationsPerPush = limit
                try store.recordFailure(.unreachable, mutations: mutations)
                return .pushFailed(reason: Self.sendingFewer(limit), countsAttempt: false, failedNow: 0, reachable: true)
            }
            let message = "the hub answered the push \(answer.status) \(answer.refusal?.code ?? ""): \(answer.refusal?.message ?? "")"
            let failed = try store.recordFailure(.failed(message), mutations: mutations)
            return .pushFailed(reason: message, countsAttempt: true, failedNow: failed, reachable: true)
        }
    }

    private func handleChanges(_ reply: MirrorReply) throws -> MirrorStep {
        switch reply {
        case .unreachable(let why), .lost(let why):
            return .pullFailed(reason: why, reachable: false)
        case .answer(let answer) where answer.status == 200:
            guard let page = Self.changesPage(answer.body) else {
                let message = "the hub's page of changes is not HUB-API's page"
                report("pull-malformed", message)
                return .pullFailed(reason: message, reachable: true)
            }
            reported.remove("pull-malformed")
            let applied = try store.apply(page: page.records, next: page.next, epoch: page.epoch)
            return .pulled(changed: applied.changed, retired: applied.retired, superseded: applied.superseded, more: page.more)
        case .answer(let answer) where answer.status == 409 || answer.status == 410:
            // The hub's history is not the one the cursor is in: replay, then go on from the hub's history id.
            guard let rewound = try? JSONDecoder().decode(Rewound.self, from: Data(answer.body)) else {
                let message = "the hub answered \(answer.status) without its epoch and history id"
                report("pull-malformed", message)
                return .pullFailed(reason: message, reachable: true)
            }
            // A hub that does not say how much of the cursor's history it kept vouches for none of it.
            try store.beginReplay(epoch: rewound.epoch, historyID: rewound.historyId, common: min(rewound.commonHistoryId ?? 0, rewound.historyId))
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
            guard let page = Self.replayPage(answer.body) else {
                let message = "the hub's replay page is not HUB-API's page"
                report("replay-malformed", message)
                return .pullFailed(reason: message, reachable: true)
            }
            let applied = try store.apply(replay: page.records, next: page.next, more: page.more)
            return .replayed(records: applied.changed, more: page.more)
        case .answer(let answer) where answer.status == 400:
            // The token is not one this hub issued (it was restored again, or its secret changed): start the replay over.
            if let state = try store.replayState() { try store.beginReplay(epoch: state.epoch, historyID: state.historyID, common: state.common) }
            return .pullFailed(reason: "the hub refused the replay token; the replay starts over", reachable: true)
        case .answer(let answer):
            return .pullFailed(reason: "the hub answered the replay \(answer.status) \(answer.refusal?.code ?? "")", reachable: true)
        }
    }

    private func report(_ kind: String, _ message: String) {
        guard reported.insert(kind).inserted else { return }
        reports.append(message)
    }

    // MARK: - Wire

    /// A push's body (HUB-API); the ledger client sends the same, without groups or sets.
    struct PushBody: Encodable {
        struct Item: Encodable {
            let mutation: String
            let kind: String
            let id: String
            let op: String
            let payload: String?
            let group: String?
            let set: String?
            let member: String?
            let modifiedAt: Int64
        }

        let mutations: [Item]
    }

    struct PushAnswer: Decodable {
        struct Result: Decodable {
            let mutation: String
            let status: String
            let seq: Int64?
            let reason: String?
            let hubTime: Int64?
        }

        let historyId: Int64
        /// The history the id belongs to (a hub that sends none leaves gates unbound to one).
        let epoch: String?
        let results: [Result]
    }

    struct WireRecord: Decodable {
        let kind: String
        let id: String
        let payload: String?
        let modifiedAt: Int64
        let group: String?
        /// JSONDecoder keeps one of two set names Swift holds equal (`é` as one
        /// character and as `e` + U+0301): only a page of an unusual shape comes this
        /// way; the hub's own pages go through ``MirrorPageScanner``, which keeps both.
        let sets: [String: [String]]?
        let seq: Int64
    }

    private struct ChangesPage: Decodable {
        let changes: [WireRecord]
        let next: Int64
        let epoch: String
        let more: Bool
    }

    private struct ReplayPage: Decodable {
        let records: [WireRecord]
        let next: String
        let more: Bool
    }

    struct Rewound: Decodable {
        let epoch: String
        let historyId: Int64
        /// How much of the cursor's history the hub still holds.
        let commonHistoryId: Int64?
    }

    /// A page of changes: read by ``MirrorPageScanner`` when it has the usual shape,
    /// else by `JSONDecoder`; nil when it is not HUB-API's page.
    package static func changesPage(_ body: [UInt8]) -> (records: [MirrorStore.PulledRecord], next: Int64, epoch: String, more: Bool)? {
        if let page = MirrorPageScanner.page(body, listKey: "changes"), let next = page.nextNumber, let epoch = page.epoch, let more = page.more {
            return (page.records, next, epoch, more)
        }
        guard let page = try? JSONDecoder().decode(ChangesPage.self, from: Data(body)), let records = records(page.changes) else { return nil }
        return (records, page.next, page.epoch, page.more)
    }

    /// A replay page, read as ``changesPage(_:)`` reads a page of changes.
    package static func replayPage(_ body: [UInt8]) -> (records: [MirrorStore.PulledRecord], next: String, more: Bool)? {
        if let page = MirrorPageScanner.page(body, listKey: "records"), let next = page.nextToken, page.epoch == nil, let more = page.more {
            return (page.records, next, more)
        }
        guard let page = try? JSONDecoder().decode(ReplayPage.self, from: Data(body)), let records = records(page.records) else { return nil }
        return (records, page.next, page.more)
    }

    /// The records of a page, or `nil` when a payload is not base64.
    static func records(_ wire: [WireRecord]) -> [MirrorStore.PulledRecord]? {
        var records: [MirrorStore.PulledRecord] = []
        records.reserveCapacity(wire.count)
        for item in wire {
            var payload: [UInt8]?
            if let text = item.payload {
                guard let data = Data(base64Encoded: text) else { return nil }
                payload = [UInt8](data)
            }
            records.append(.init(kind: item.kind, id: item.id, payload: payload, modifiedAt: item.modifiedAt, group: item.group, sets: item.sets ?? [:], seq: item.seq))
        }
        return records
    }

    static func escaped(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

extension MirrorSync {
    /// The hub's limit of mutations per push when `answer` refuses a push of
    /// `sent` for carrying too many (a `400` with `maximumMutations` below
    /// `sent`), else `nil`.
    static func pushLimit(_ answer: HubAnswer, sent: Int) -> Int? {
        guard answer.status == 400, let limit = answer.json["maximumMutations"] as? Int, limit >= 1, limit < sent else { return nil }
        return limit
    }

    static func sendingFewer(_ limit: Int) -> String { "the hub takes at most \(limit) mutations per push; sending fewer" }
}
