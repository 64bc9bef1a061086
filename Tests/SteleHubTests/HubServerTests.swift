import Foundation
import SteleHub
import SteleHubServer
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The libmicrohttpd front over real loopback sockets, with a handler whose
/// mailbox the test controls.
@Suite(.serialized) struct HubServerTests {
    /// A mailbox handler: `POST /box` appends and wakes `box`; `GET /box?after=N`
    /// answers the items after N, or parks; `POST /quiet` appends without waking.
    final class BoxHandler: HubHandler {
        let wakeups = HubWakeups()
        let items = Mutex<[String]>([])
        let polls = Mutex(0)

        func template(of request: HubRequest) -> String { request.path == "/box" ? "/box" : "/other" }

        func handle(_ request: HubRequest) -> HubOutcome {
            switch (request.method, request.path) {
            case ("POST", "/box"), ("POST", "/quiet"):
                items.withLock { $0.append(String(decoding: request.body, as: UTF8.self)) }
                if request.path == "/box" { wakeups.wake("box") }
                return .respond(HubResponse(status: 202, headers: ["X-Count": "\(items.withLock { $0.count })"]))
            case ("GET", "/box"):
                let after = Int(request.query["after"] ?? "0") ?? 0
                let wait = Double(request.query["wait"] ?? "0") ?? 0
                if let answer = answer(after: after) { return .respond(answer) }
                if wait == 0 { return .respond(HubResponse(status: 204)) }
                return .wait(HubWait(key: "box", waitSeconds: wait, poll: { [self] in
                    polls.withLock { $0 += 1 }
                    return answer(after: after)
                }, expire: { HubResponse(status: 204, headers: ["X-Expired": "yes"]) }))
            case ("GET", "/echo"):
                let text = "method=\(request.method) query=\(request.query.sorted { $0.key < $1.key }) auth=\(request.headers["authorization"] ?? "-")"
                return .respond(HubResponse(status: 200, headers: ["Content-Type": "text/plain"], body: Array(text.utf8)))
            case ("PUT", "/bytes"):
                return .respond(HubResponse(status: 200, headers: ["Content-Type": "application/octet-stream"], body: request.body.reversed()))
            default:
                return .respond(.error(404, "not_found", "no \(request.path)"))
            }
        }

        private func answer(after: Int) -> HubResponse? {
            let items = items.withLock { $0 }
            guard items.count > after else { return nil }
            return HubResponse(status: 200, body: Array(items[after...].joined(separator: ",").utf8))
        }
    }

    final class LogLines: Sendable {
        let lines = Mutex<[String]>([])
        func add(_ line: String) { lines.withLock { $0.append(line) } }
        var all: [String] { lines.withLock { $0 } }
    }

    static func start(_ handler: any HubHandler, log: LogLines? = nil, maximumBodyBytes: Int = 8 << 20) throws -> HubServer {
        var configuration = HubServer.Configuration()
        configuration.port = 0
        configuration.maximumBodyBytes = maximumBodyBytes
        if let log { configuration.log = { log.add($0) } }
        return try HubServer(handler: handler, configuration: configuration)
    }

    struct Answer: Sendable {
        let status: Int
        let headers: [String: String]
        let body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        configuration.httpMaximumConnectionsPerHost = 300
        return URLSession(configuration: configuration)
    }()

    /// Starts a request; the answer arrives through the returned box.
    static func begin(_ server: HubServer, _ method: String, _ target: String, body: [UInt8]? = nil, headers: [String: String] = [:]) -> AnswerBox {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(server.port)\(target)")!)
        request.httpMethod = method
        if let body { request.httpBody = Data(body) }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let box = AnswerBox()
        session.dataTask(with: request) { data, response, _ in
            let http = response as? HTTPURLResponse
            var headers: [String: String] = [:]
            for (name, value) in http?.allHeaderFields ?? [:] { if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value } }
            box.set(Answer(status: http?.statusCode ?? 0, headers: headers, body: [UInt8](data ?? Data())))
        }.resume()
        return box
    }

    static func call(_ server: HubServer, _ method: String, _ target: String, body: [UInt8]? = nil, headers: [String: String] = [:]) -> Answer {
        begin(server, method, target, body: body, headers: headers).wait(seconds: 30) ?? Answer(status: -1, headers: [:], body: [])
    }

    final class AnswerBox: Sendable {
        private let answer = Mutex<Answer?>(nil)
        private let done = DispatchSemaphore(value: 0)
        func set(_ value: Answer) {
            answer.withLock { $0 = value }
            done.signal()
        }
        /// The answer, or nil if none came within `seconds`.
        func wait(seconds: Double) -> Answer? {
            guard done.wait(timeout: .now() + seconds) == .success else { return nil }
            done.signal()
            return answer.withLock { $0 }
        }
    }

    @Test func aRequestCarriesItsMethodQueryHeadersAndBinaryBody() throws {
        let server = try Self.start(BoxHandler())
        defer { server.stop() }
        let echo = Self.call(server, "GET", "/echo?b=2&a=x%20y", headers: ["Authorization": "Bearer t"])
        #expect(echo.status == 200)
        #expect(echo.text == "method=GET query=[(key: \"a\", value: \"x y\"), (key: \"b\", value: \"2\")] auth=Bearer t")
        let bytes: [UInt8] = [0, 1, 2, 255, 0]
        let reversed = Self.call(server, "PUT", "/bytes", body: bytes)
        #expect(reversed.body == bytes.reversed())
        #expect(reversed.headers["content-type"] == "application/octet-stream")
        let missing = Self.call(server, "GET", "/nowhere")
        #expect(missing.status == 404)
        #expect(missing.text.contains("\"code\":\"not_found\""))
    }

    @Test func aBodyOverTheLimitIsRefusedAndTheServerGoesOn() throws {
        let handler = BoxHandler()
        let server = try Self.start(handler, maximumBodyBytes: 64 << 10)
        defer { server.stop() }
        let refused = Self.call(server, "POST", "/box", body: [UInt8](repeating: 65, count: 200 << 10))
        #expect(refused.status == 413)
        #expect(refused.text.contains("\"code\":\"too_large\""))
        #expect(handler.items.withLock { $0.isEmpty })
        #expect(Self.call(server, "POST", "/box", body: Array("ok".utf8)).status == 202)
    }

    @Test func aParkedPollIsAnsweredWhenItsKeyWakesAndNotBefore() throws {
        let handler = BoxHandler()
        let server = try Self.start(handler)
        defer { server.stop() }
        let poll = Self.begin(server, "GET", "/box?after=0&wait=20")
        #expect(poll.wait(seconds: 0.5) == nil)
        #expect(server.parkedCount == 1)
        #expect(Self.call(server, "POST", "/box", body: Array("hello".utf8)).status == 202)
        let answer = try #require(poll.wait(seconds: 5))
        #expect(answer.status == 200)
        #expect(answer.text == "hello")
        #expect(server.parkedCount == 0)
    }

    @Test func aPollThatHearsNothingExpiresWithItsAnswer() throws {
        let server = try Self.start(BoxHandler())
        defer { server.stop() }
        let started = Date()
        let answer = Self.call(server, "GET", "/box?after=0&wait=1")
        #expect(answer.status == 204)
        #expect(answer.headers["x-expired"] == "yes")
        #expect(Date().timeIntervalSince(started) >= 0.9)
    }

    @Test func aParkedPollLooksAgainWithoutAWake() throws {
        let handler = BoxHandler()
        let server = try Self.start(handler)
        defer { server.stop() }
        let poll = Self.begin(server, "GET", "/box?after=0&wait=20")
        #expect(poll.wait(seconds: 0.3) == nil)
        // Lands without waking anyone, as a lost notification from another hub would.
        #expect(Self.call(server, "POST", "/quiet", body: Array("late".utf8)).status == 202)
        let answer = try #require(poll.wait(seconds: 5))
        #expect(answer.text == "late")
    }

    @Test func manyParkedPollsAreAllAnswered() throws {
        let handler = BoxHandler()
        let server = try Self.start(handler)
        defer { server.stop() }
        let polls = (0..<200).map { _ in Self.begin(server, "GET", "/box?after=0&wait=30") }
        let deadline = Date().addingTimeInterval(10)
        while server.parkedCount < 200 && Date() < deadline { usleep(20_000) }
        #expect(server.parkedCount == 200)
        #expect(Self.call(server, "POST", "/box", body: Array("all".utf8)).status == 202)
        let answers = polls.compactMap { $0.wait(seconds: 10) }
        #expect(answers.count == 200)
        #expect(answers.allSatisfy { $0.text == "all" })
    }

    @Test func stopAnswersParkedPollsAndReturns() throws {
        let server = try Self.start(BoxHandler())
        let poll = Self.begin(server, "GET", "/box?after=0&wait=30")
        let deadline = Date().addingTimeInterval(5)
        while server.parkedCount < 1 && Date() < deadline { usleep(10_000) }
        let started = Date()
        server.stop()
        #expect(Date().timeIntervalSince(started) < 6)
        let answer = try #require(poll.wait(seconds: 5))
        #expect(answer.headers["x-expired"] == "yes")
        server.stop()
    }

    @Test func eachRequestLogsOneLineWithoutQueryOrBody() throws {
        let log = LogLines()
        let server = try Self.start(BoxHandler(), log: log)
        _ = Self.call(server, "POST", "/box?secret=query-value", body: Array("payload-value".utf8), headers: ["Authorization": "Bearer token-value"])
        _ = Self.call(server, "GET", "/nowhere")
        server.stop()
        let lines = log.all
        #expect(lines.count == 2)
        #expect(lines.first?.hasPrefix("method=POST path=/box status=202 us=") == true)
        #expect(lines.last?.hasPrefix("method=GET path=/other status=404 us=") == true)
        #expect(!lines.joined().contains("value"))
    }

    @Test func aSecondServerOnATakenPortSaysSo() throws {
        let server = try Self.start(BoxHandler())
        defer { server.stop() }
        var configuration = HubServer.Configuration()
        configuration.port = server.port
        #expect(throws: HubServerError.self) { try HubServer(handler: BoxHandler(), configuration: configuration) }
        configuration.host = "not-an-address"
        #expect(throws: HubServerError.self) { try HubServer(handler: BoxHandler(), configuration: configuration) }
    }
}
