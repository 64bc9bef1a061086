import Foundation
import Stele
import SteleBench
import SteleHub
import SteleHubServer
import Synchronization

/// `mirror.retire_latency` (DESIGN §8.2, seed 003 "Retirement: on echo, not on
/// 2xx"): how long a mutation the hub acknowledged stays in the client's
/// queue before the echo retires it, with the echo brought by a long poll that
/// the push wakes, over loopback HTTP.
///
/// A mirror client as an app runs it: one ``MirrorStore`` file opened twice
/// (a store is used from one thread at a time; the queue's claims carry an
/// owner), a ``MirrorDriver`` over ``HubMirrorTransport`` and ``HubClient``
/// (URLSession) flushing on this thread, and a second thread holding a long
/// poll open with ``MirrorSync/nextPull(waitSeconds:)``. A sample runs from the
/// moment the push's answer reached the client to the commit that took the
/// mutation out of the queue: the pull's apply when the echo arrives after the
/// answer is recorded, or the recording itself when the echo was applied first.
///
/// The baseline is one pull round trip: a changes GET the hub answers at once.
/// The target is the issue's: at most that round trip's p99 plus 10 ms.
enum MirrorBench {
    static func run(quick: Bool, say: (String) -> Void) throws -> [BenchmarkFigure] {
        say("mirror.retire_latency ...")
        let samples = quick ? 50 : 300
        let directory = NSTemporaryDirectory() + "stele-hub-mirror-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let rig = try HubBenchCommand.Rig(storage: try SQLiteHubStorage(path: "\(directory)/hub.sqlite"))
        defer { rig.stop() }
        let client = HubClient(hub: rig.base, account: rig.account, identity: rig.phone, timeoutSeconds: 30)
        _ = try client.send("GET", "\(client.accountPath)/status")
        let path = "\(directory)/mirror.sqlite"
        let store = try MirrorStore(path: path)
        let timed = TimedTransport(HubMirrorTransport(client: client))
        let driver = MirrorDriver(sync: MirrorSync(store: store), transport: timed)

        let puller = Puller(path: path, client: client)
        puller.start()
        defer { puller.stop(wake: { try? wake(store, driver) }) }

        var latencies: [Double] = []
        for index in 0..<(samples + 10) {
            // Let the puller's next long poll park before the push, as it would between a user's actions.
            puller.waitUntilPolling()
            usleep(5_000)
            puller.resetRetired()
            try store.put(kind: "note", id: "note-\(index % 50)", payload: RecordsBench.payload(index))
            guard let step = try driver.flush(), case .pushed(let gated, let retired, _, _) = step else {
                throw HubBenchCommand.BenchError("mirror.retire_latency: the push was not answered (\(puller.failure ?? "no pull failure"))")
            }
            let recorded = DispatchTime.now().uptimeNanoseconds
            let acknowledged = timed.answeredAt
            let retiredAt: UInt64
            if retired == 1 {
                // The echo was applied before the answer was recorded: recording it retired the mutation.
                retiredAt = recorded
            } else if gated == 1, let time = puller.waitForRetirement(seconds: 10) {
                retiredAt = time
            } else {
                throw HubBenchCommand.BenchError("mirror.retire_latency: the mutation was not retired (\(step); \(puller.failure ?? "no pull failure"))")
            }
            guard try store.queue().isEmpty else { throw HubBenchCommand.BenchError("mirror.retire_latency: the queue is not empty after the echo") }
            // The first samples warm the connections up.
            if index >= 10 { latencies.append(Double(retiredAt &- acknowledged) / 1e6) }
        }

        // The baseline: a changes GET at the current cursor, which the hub answers at once (nothing is newer).
        let cursor = try store.cursor()
        var roundTrips: [Double] = []
        for _ in 0..<(samples + 10) {
            let start = DispatchTime.now().uptimeNanoseconds
            let answer = try client.send("GET", "\(client.accountPath)/records/changes?since=\(cursor.historyID)&limit=1000", jsonBytes: [])
            guard answer.status == 200 else { throw HubBenchCommand.BenchError("mirror.retire_latency: a changes GET was answered \(answer.status)") }
            roundTrips.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        let roundTrip = HubBenchCommand.percentile99(Array(roundTrips.dropFirst(10)))
        let latency = HubBenchCommand.percentile99(latencies)
        return [BenchmarkFigure(name: "mirror.retire_latency", value: latency, unit: "ms", baseline: roundTrip, target: .valueAtMost(((roundTrip + 10) * 100).rounded() / 100))]
    }

    /// One more change, to answer the puller's parked poll so that it sees it must stop.
    private static func wake(_ store: MirrorStore, _ driver: MirrorDriver) throws {
        try store.put(kind: "note", id: "wake", payload: [0])
        _ = try driver.flush()
    }

    /// A transport that notes when each answer came back.
    final class TimedTransport: MirrorTransport {
        let inner: any MirrorTransport
        private(set) var answeredAt: UInt64 = 0

        init(_ inner: any MirrorTransport) { self.inner = inner }

        func exchange(_ request: MirrorRequest) -> MirrorReply {
            let reply = inner.exchange(request)
            answeredAt = DispatchTime.now().uptimeNanoseconds
            return reply
        }
    }

    /// The pulling thread: its own store instance on the file, long polls one after
    /// another, and the time of each commit that retired a mutation.
    final class Puller: Sendable {
        private struct State {
            var stopping = false
            var polling = false
            var retiredAt: UInt64?
            var failure: String?
        }

        let path: String
        let client: HubClient
        private let state = Mutex(State())
        private let retirement = DispatchSemaphore(value: 0)
        private let polling = DispatchSemaphore(value: 0)
        private let finished = DispatchSemaphore(value: 0)

        init(path: String, client: HubClient) {
            self.path = path
            self.client = client
        }

        var failure: String? { state.withLock { $0.failure } }

        func start() {
            let thread = Thread { [self] in
                loop()
                finished.signal()
            }
            thread.start()
        }

        private func loop() {
            do {
                let store = try MirrorStore(path: path)
                let sync = MirrorSync(store: store)
                let transport = HubMirrorTransport(client: client)
                while !state.withLock({ $0.stopping }) {
                    let request = try sync.nextPull(waitSeconds: 30)
                    state.withLock { $0.polling = true }
                    polling.signal()
                    let step = try sync.handle(transport.exchange(request), to: request)
                    let now = DispatchTime.now().uptimeNanoseconds
                    state.withLock { $0.polling = false }
                    switch step {
                    case .pulled(_, let retired, _, _):
                        if retired > 0 {
                            state.withLock { $0.retiredAt = now }
                            retirement.signal()
                        }
                    case .pullFailed(let reason, _):
                        state.withLock { $0.failure = reason }
                        usleep(100_000)
                    default:
                        break
                    }
                }
            } catch {
                state.withLock { $0.failure = "\(error)" }
                polling.signal()
                retirement.signal()
            }
        }

        /// Waits until the thread has sent its next long poll.
        func waitUntilPolling() {
            while !state.withLock({ $0.polling || $0.failure != nil }) { _ = polling.wait(timeout: .now() + 0.1) }
        }

        func resetRetired() {
            state.withLock { $0.retiredAt = nil }
            while retirement.wait(timeout: .now()) == .success {}
        }

        /// When the pull retired the mutation, or `nil` after `seconds`.
        func waitForRetirement(seconds: Double) -> UInt64? {
            let deadline = DispatchTime.now() + seconds
            while DispatchTime.now() < deadline {
                if let time = state.withLock({ $0.retiredAt }) { return time }
                if state.withLock({ $0.failure }) != nil { return nil }
                _ = retirement.wait(timeout: deadline)
            }
            return state.withLock { $0.retiredAt }
        }

        /// Asks the thread to stop, wakes its parked poll with `wake`, and waits for it.
        func stop(wake: () -> Void) {
            state.withLock { $0.stopping = true }
            wake()
            _ = finished.wait(timeout: .now() + 35)
        }
    }
}
