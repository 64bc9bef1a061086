import Foundation
import Stele
import SteleBench
import SteleHub
import SteleHubPostgres
import Synchronization

/// Concurrent pushes into a hub on PostgreSQL (issue 20), over loopback HTTP
/// through `HubClient` as apps send them:
/// - `hub.push.contended`: 32 pushers into one account (each change takes the
///   account's next history position under its row lock, so they queue), against
///   the same 32 pushers into 32 accounts: the price of commit-ordered history.
/// - `hub.push.postgresql.aggregate`: mutations per second one hub process accepts
///   across 100 accounts.
enum PushBench {
    static func run(quick: Bool, postgres: String, say: (String) -> Void) throws -> [BenchmarkFigure] {
        let storage = try PostgresHubStorage(url: postgres, connections: 8)
        let rig = try HubBenchCommand.Rig(storage: storage)
        defer { rig.stop() }
        let founders = try (0..<100).map { _ in try DeviceIdentity.generate() }
        let accounts = try founders.map { founder -> AccountID in
            let account = AccountID.generate()
            let roster = try Roster.founding(account: account, by: founder)
            let made = HubBenchCommand.Rig.call(rig.service, "POST", "/v1/accounts", ["genesis": Data(roster.encoded).base64EncodedString()])
            guard made.status == 201 else { throw HubBenchCommand.BenchError("the bench could not make an account: \(made.status)") }
            return account
        }
        let perPusher = quick ? 500 : 3_000

        say("hub.push.contended: 32 pushers into one account, then into 32 ...")
        var contended = 0.0
        var spread = 0.0
        for _ in 0..<(quick ? 1 : 2) {
            contended = max(contended, try rate(rig, pushers: (0..<32).map { _ in (accounts[0], founders[0]) }, mutations: perPusher, perPush: 100, tag: "c"))
            spread = max(spread, try rate(rig, pushers: (0..<32).map { (accounts[$0], founders[$0]) }, mutations: perPusher, perPush: 100, tag: "s"))
        }
        say("hub.push.postgresql.aggregate: 100 accounts ...")
        let each = quick ? 1_000 : 5_000
        // The faster of two rounds, as every figure of the suite keeps its fastest round.
        var aggregate = 0.0
        for round in 0..<(quick ? 1 : 2) {
            aggregate = max(aggregate, try rate(rig, pushers: (0..<100).map { (accounts[$0], founders[$0]) }, mutations: each, perPush: 500, tag: "a\(round)"))
        }
        // The baseline: the same rows inserted straight with libpq on one connection.
        let raw = Double(100 * each) / (try RecordsBench.rawPostgres(100 * each, url: postgres))
        return [
            BenchmarkFigure(name: "hub.push.contended", value: contended, unit: "mutations/s", baseline: spread, target: .ratioAtLeast(0.5)),
            BenchmarkFigure(name: "hub.push.postgresql.aggregate", value: aggregate, unit: "mutations/s", baseline: raw, target: .valueAtLeast(20_000)),
        ]
    }

    /// Mutations per second: each pusher, on its own thread with its own `HubClient`,
    /// pushes `mutations` puts of new records to its account, `perPush` at a time.
    static func rate(_ rig: HubBenchCommand.Rig, pushers: [(AccountID, DeviceIdentity)], mutations: Int, perPush: Int, tag: String) throws -> Double {
        let run = UUID().uuidString.prefix(8)
        let payload = Data(RecordsBench.payload(7)).base64EncodedString()
        // Sessions first, outside the clock.
        let clients = try pushers.map { account, founder -> HubClient in
            let client = HubClient(hub: rig.base, account: account, identity: founder, timeoutSeconds: 120, http: URLSessionHubHTTP(maximumConnections: 2))
            _ = try client.send("GET", "\(client.accountPath)/status")
            return client
        }
        let failure = Mutex<String?>(nil)
        let start = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        let encoder = JSONEncoder()
        for (index, client) in clients.enumerated() {
            done.enter()
            Thread {
                start.wait()
                defer { done.leave() }
                do {
                    for first in stride(from: 0, to: mutations, by: perPush) {
                        let push = RecordsBench.Push(mutations: (first..<min(first + perPush, mutations)).map { number in
                            .init(mutation: "\(run)-\(tag)\(index)-\(number)", kind: "note", id: "\(run)-\(tag)\(index)-\(number)", op: "put", payload: payload, modifiedAt: Int64(number))
                        })
                        let answer = try client.send("POST", "\(client.accountPath)/records/push", body: Array(try encoder.encode(push)))
                        guard answer.status == 200 else { throw HubBenchCommand.BenchError("a push was answered \(answer.status)") }
                    }
                } catch {
                    failure.withLock { $0 = $0 ?? "\(error)" }
                }
            }.start()
        }
        let seconds = Stopwatch.time {
            for _ in clients { start.signal() }
            done.wait()
        }
        if let failure = failure.withLock({ $0 }) { throw HubBenchCommand.BenchError(failure) }
        return Double(mutations * clients.count) / seconds
    }
}
