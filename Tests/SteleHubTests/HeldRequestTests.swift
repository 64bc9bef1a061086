import Foundation
import SteleHub
import SteleHubServer
import Synchronization
import Testing
import TestSupport
@testable import Stele

/// A long poll through ``URLSessionHubHTTP`` keeps no core busy while the hub
/// holds it. FoundationNetworking keeps watching a socket for writing once
/// libcurl has connected it, so a request that opens its own connection spins
/// until it is answered (a `stele sync` at 94 % CPU for a minute at a time);
/// the held request goes on a connection a quick `GET /v1/health` opened.
///
/// Each check runs in a process of its own (an exit test), where the CPU time
/// the process spends is the poll's alone: the suite's other tests run beside
/// this one in the parent.
@Suite struct HeldRequestTests {
    /// Seconds the hub holds the poll.
    static let held = 3.0

    /// The CPU seconds and wall seconds of one relay long poll held `held` seconds,
    /// the first request of a new ``URLSessionHubHTTP``, over a real socket.
    static func oneHeldPoll(warmsHeldConnections: Bool) throws -> (cpu: Double, wall: Double, status: Int) {
        let harness = try HubHarness(.sqlite)
        let server = try HubServer(handler: harness.service, configuration: HubServer.Configuration(port: 0))
        defer { server.stop() }
        let founder = Fixtures.identity(1)
        let account = try harness.found(founder)
        let token = try harness.session(founder, account)
        let http = URLSessionHubHTTP(maximumConnections: 6, warmsHeldConnections: warmsHeldConnections)
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/v1/accounts/\(account.hex)/relay?wait=\(Int(held))"))
        var request = HubHTTPRequest(method: "GET", url: url, headers: ["Authorization": "Bearer \(token)"], timeoutSeconds: held + 20)
        request.heldSeconds = held
        let answered = DispatchSemaphore(value: 0)
        let status = Mutex(0)
        let cpuBefore = processCPUSeconds()
        let start = Date()
        http.perform(request) { result in
            status.withLock { $0 = (try? result.get().status) ?? -1 }
            answered.signal()
        }
        answered.wait()
        return (processCPUSeconds() - cpuBefore, Date().timeIntervalSince(start), status.withLock { $0 })
    }

    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// Exits 0 when the poll was answered after being held and took under a tenth of
    /// its wall time in CPU, 1 when it spun, 2 when it was not held at all.
    static func exitWithVerdict(warmsHeldConnections: Bool) -> Never {
        guard let poll = try? oneHeldPoll(warmsHeldConnections: warmsHeldConnections), poll.status == 200, poll.wall >= held * 0.9 else { exit(2) }
        print("held \(poll.wall) s, CPU \(poll.cpu) s")
        exit(poll.cpu < poll.wall / 10 ? 0 : 1)
    }

    @Test func aHeldPollKeepsNoCoreBusy() async {
        await #expect(processExitsWith: .exitCode(0)) { Self.exitWithVerdict(warmsHeldConnections: true) }
    }

    /// The check can fail: the same poll on a connection of its own spins (a
    /// FoundationNetworking that no longer does fails this test, and the warm-up
    /// in ``URLSessionHubHTTP`` can go).
    @Test func theSamePollOnAConnectionOfItsOwnSpins() async {
        await #expect(processExitsWith: .exitCode(1)) { Self.exitWithVerdict(warmsHeldConnections: false) }
    }
}
