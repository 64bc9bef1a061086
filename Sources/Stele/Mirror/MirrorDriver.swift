import Foundation

/// Carries a mirror client's requests to a hub and brings the replies back.
public protocol MirrorTransport: AnyObject {
    func exchange(_ request: MirrorRequest) -> MirrorReply
}

/// A ``MirrorTransport`` over a ``HubClient`` (URLSession in an app).
public final class HubMirrorTransport: MirrorTransport {
    public let client: HubClient

    public init(client: HubClient) {
        self.client = client
    }

    public func exchange(_ request: MirrorRequest) -> MirrorReply {
        do {
            let answer = try client.send(request.method, "\(client.accountPath)/\(request.path)", jsonBytes: request.body, heldSeconds: Double(request.waitSeconds))
            return .answer(answer)
        } catch let error as HubClientError {
            switch error.code {
            case .unreachable: return error.mayHaveArrived ? .lost(error.message) : .unreachable(error.message)
            // The session could not be opened: the hub answered, so the request counts as answered with that refusal.
            case .refused: return .answer(HubAnswer(status: error.status == 0 ? 500 : error.status, body: Array(Self.errorBody(error).utf8)))
            case .malformed: return .answer(HubAnswer(status: 502, body: Array(Self.errorBody(error).utf8)))
            }
        } catch {
            return .unreachable("\(error)")
        }
    }

    private static func errorBody(_ error: HubClientError) -> String {
        let object: [String: Any] = ["error": ["code": error.hubCode.isEmpty ? "session" : error.hubCode, "message": error.message]]
        return (try? JSONSerialization.data(withJSONObject: object)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

/// Runs a ``MirrorSync`` over a transport: flush passes, pulls, and the whole
/// sync of SCENARIOS (`C sync`: flush and pull until the pull brings nothing new
/// and nothing pending can be sent, retrying with back-off).
public final class MirrorDriver {
    /// Where a flush may be made to die, for crash tests (SCENARIOS `C crash …`).
    public enum CrashPoint: String, Sendable, CaseIterable {
        /// After claiming, before the push.
        case beforeSend = "before-send"
        /// After the hub applied the push, before the answer was recorded.
        case afterSend = "after-send"
        /// After the mutations were marked in flight, before any pull.
        case afterInFlight = "after-in-flight"
    }

    /// Thrown where a planned crash happens; the caller then reopens the store.
    public struct Crashed: Error, Sendable, Equatable {
        public let point: CrashPoint

        public init(point: CrashPoint) {
            self.point = point
        }
    }

    /// The outcome of a sync.
    public struct Report: Sendable, Equatable {
        public var pushes = 0
        public var pulls = 0
        public var changesApplied = 0
        /// The hub could not be reached: everything still pending stays so.
        public var unreachable = false
        public var steps: [MirrorStep] = []
    }

    public let sync: MirrorSync
    public let transport: any MirrorTransport
    /// Waits until the store clock reads a time (milliseconds); the simulator moves virtual time instead.
    public var sleepUntil: (Int64) -> Void
    /// The next flush dies here, once.
    public var crashPoint: CrashPoint?

    public init(sync: MirrorSync, transport: any MirrorTransport, sleepUntil: ((Int64) -> Void)? = nil) {
        self.sync = sync
        self.transport = transport
        let clock = sync.store.configuration.clock
        self.sleepUntil =
            sleepUntil ?? { target in
                let pause = target - clock.nowMilliseconds()
                if pause > 0 { Thread.sleep(forTimeInterval: Double(pause) / 1000) }
            }
    }

    /// One flush pass (SCENARIOS `C flush`): claim what is due, send it in one push, record the answer.
    /// Returns `nil` when nothing was due.
    public func flush() throws -> MirrorStep? {
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

    /// Pulls every page since the cursor (replaying when the hub says its history was rewound).
    /// Returns the steps; the last one says whether the pull reached the end.
    public func pull(waitSeconds: Int = 0) throws -> [MirrorStep] {
        var steps: [MirrorStep] = []
        var wait = waitSeconds
        // A page, or a replay page, per round; bounded so a hub that keeps answering `more` cannot hold the caller forever.
        for _ in 0..<100_000 {
            let request = try sync.nextPull(waitSeconds: wait)
            wait = 0
            let step = try sync.handle(transport.exchange(request), to: request)
            steps.append(step)
            switch step {
            case .pulled(_, _, _, let more) where more: continue
            case .replayStarted, .replayed: continue
            default: return steps
            }
        }
        return steps
    }

    /// Runs the replay API over the store (SCENARIOS `C replay`): every record's
    /// latest version, paged from the beginning; the cursor ends where it was.
    public func replay() throws -> [MirrorStep] {
        try sync.startReplay()
        return try pull()
    }

    /// Flushes and pulls until the pull brings nothing new and nothing pending can
    /// be sent: a mutation the hub answers with an error is retried after its
    /// back-off until it succeeds or exhausts its attempts; a hub that cannot be
    /// reached ends the sync at once, everything left pending.
    @discardableResult
    public func syncUntilQuiet(maximumRounds: Int = 1_000) throws -> Report {
        var report = Report()
        for _ in 0..<maximumRounds {
            var progressed = false
            while let step = try flush() {
                report.pushes += 1
                report.steps.append(step)
                if case .pushFailed(_, _, _, let reachable) = step, !reachable {
                    report.unreachable = true
                    return report
                }
                progressed = true
            }
            let steps = try pull()
            report.pulls += steps.count
            report.steps += steps
            for step in steps {
                switch step {
                case .pulled(let changed, let retired, let superseded, _):
                    report.changesApplied += changed
                    if changed + retired + superseded > 0 { progressed = true }
                case .replayed, .replayStarted:
                    progressed = true
                case .pullFailed(_, let reachable) where !reachable:
                    report.unreachable = true
                    return report
                default:
                    break
                }
            }
            if progressed { continue }
            // Nothing moved: wait for the next back-off (or lease) to end, if anything is still pending.
            guard let due = try sync.nextDueTime() else { return report }
            sleepUntil(due)
        }
        return report
    }
}
