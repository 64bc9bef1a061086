import Foundation
import Synchronization
import Testing
import SteleHub
import SteleHubServer

#if canImport(Glibc)
import Glibc
#endif

/// A small handler for the server's tests: a mailbox in a Mutex. `POST /box` appends
/// its body and wakes `box`; `GET /box?after=N&wait=S` answers the messages after N
/// at once, or parks until there are some (`204` with `X-Expired` when the wait ends);
/// `/echo` answers what it was asked.
final class MailboxHandler: HubHandler {
    let wakeups = HubWakeups()
    private let messages = Mutex<[[UInt8]]>([])
    /// Requests that reached `handle`.
    let handled = Mutex<[HubRequest]>([])

    /// Appends without waking anyone, as a write whose notification got lost.
    func appendSilently(_ message: String) {
        messages.withLock { $0.append(Array(message.utf8)) }
    }

    func handle(_ request: HubRequest) -> HubOutcome {
        handled.withLock { $0.append(request) }
        switch (request.method, request.path) {
        case ("POST", "/box"):
            messages.withLock { $0.append(request.body) }
            wakeups.wake("box")
            return .respond(HubResponse(status: 202))
        case ("GET", "/box"):
            let after = request.query["after"].flatMap(Int.init) ?? 0
            let waitSeconds = request.query["wait"].flatMap(Double.init) ?? 30
            let look: @Sendable () -> HubResponse? = { [self] in
                let newer = self.messages.withLock { $0.count > after ? Array($0[after...]) : [] }
                guard !newer.isEmpty else { return nil }
                return HubResponse(status: 200, headers: ["X-Count": "\(newer.count)"], body: Array(newer.joined(separator: Array("|".utf8))))
            }
            if let now = look() { return .respond(now) }
            return .wait(HubWait(key: "box", waitSeconds: waitSeconds, poll: look, expire: {
                HubResponse(status: 204, headers: ["X-Expired": "1"])
            }))
        case ("GET", "/slow"):
            var pause = timespec(tv_sec: 0, tv_nsec: 700_000_000)
            nanosleep(&pause, nil)
            return .respond(HubResponse(status: 200, body: Array("slow".utf8)))
        default:
            if request.path.hasPrefix("/echo") {
                let query = request.query.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
                return .respond(HubResponse(status: 200, headers: [
                    "Content-Type": "application/octet-stream",
                    "X-Method": request.method,
                    "X-Path": request.path,
                    "X-Query": query,
                    "X-Foo": request.headers["x-foo"] ?? "",
                ], body: request.body))
            }
            return .respond(HubResponse.error(404, "not_found", "no such path"))
        }
    }

    func template(of request: HubRequest) -> String {
        if request.path.hasPrefix("/echo") { return "\(request.method) /echo" }
        return "\(request.method) \(request.path == "/box" ? "/box" : "{unknown}")"
    }
}

/// Collects log lines.
final class LogLines: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    var sink: @Sendable (String) -> Void { { [self] line in self.lines.withLock { $0.append(line) } } }
}

/// Polls `condition` every 10 ms for up to `seconds`.
func eventually(within seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        var pause = timespec(tv_sec: 0, tv_nsec: 10_000_000)
        nanosleep(&pause, nil)
    }
    return condition()
}

@Suite(.serialized)
struct HubServerTests {
    private func server(_ handler: any HubHandler, _ configure: (inout HubServer.Configuration) -> Void = { _ in }) throws -> HubServer {
        var configuration = HubServer.Configuration(threads: 2)
        configure(&configuration)
        return try HubServer(handler: handler, configuration: configuration)
    }

    @Test func aRequestAndItsAnswerCarryHeadersAndABinaryBody() throws {
        let server = try server(MailboxHandler())
        defer { server.stop() }
        #expect(server.port != 0)
        let body = (0..<4096).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST", "/echo", headers: ["X-Foo": "Bar baz", "Content-Type": "application/octet-stream"], body: body)
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.body == body)
        #expect(response.headers["x-foo"] == "Bar baz")
        #expect(response.headers["x-method"] == "POST")
        #expect(response.headers["content-type"] == "application/octet-stream")
    }

    @Test func theQueryIsDecodedAndThePathStaysPercentEncoded() throws {
        let handler = MailboxHandler()
        let server = try server(handler)
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET", "/echo/a%2Fb?after=5&name=x%20y&empty=")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.headers["x-path"] == "/echo/a%2Fb")
        #expect(response.headers["x-query"] == "after=5&empty=&name=x y")
    }

    @Test func anOversizedBodyIsAnswered413WithTheJSONErrorAndTheServerKeepsServing() throws {
        let handler = MailboxHandler()
        let server = try server(handler) { $0.maximumBodyBytes = 1024 }
        defer { server.stop() }

        // Declared length, sent in full: drained without being kept, then answered.
        let drained = try RawHTTPClient(port: server.port)
        try drained.send("POST", "/echo", body: [UInt8](repeating: 1, count: 3000))
        let first = try drained.readResponse()
        #expect(first.status == 413)
        #expect(first.headers["content-type"] == "application/json")
        #expect(first.text.contains("\"too_large\""))
        #expect(first.text.contains("\"error\""))

        // Chunked, so the size is only known as it streams.
        let chunked = try RawHTTPClient(port: server.port)
        var request = Array("POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        for _ in 0..<4 { request += Array("200\r\n".utf8) + [UInt8](repeating: 2, count: 0x200) + Array("\r\n".utf8) }
        request += Array("0\r\n\r\n".utf8)
        try chunked.send(request)
        #expect(try chunked.readResponse().status == 413)

        // A client waiting for `100 Continue` is refused before it sends anything.
        let expecting = try RawHTTPClient(port: server.port)
        try expecting.send(Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\nExpect: 100-continue\r\n\r\n".utf8))
        let refused = try expecting.readResponse()
        #expect(refused.status == 413)
        #expect(refused.text.contains("\"too_large\""))

        #expect(handler.handled.withLock { $0.isEmpty })
        let after = try RawHTTPClient(port: server.port)
        try after.send("POST", "/echo", body: [UInt8](repeating: 3, count: 1024))
        let fine = try after.readResponse()
        #expect(fine.status == 200)
        #expect(fine.body.count == 1024)
    }

    /// A body whose length is said two ways (two Content-Lengths that differ, or
    /// Content-Length with Transfer-Encoding) is refused `400` before the handler
    /// sees it (RFC 9112 §6.3); a repeated equal length is one length.
    @Test func aBodyLengthSaidTwoWaysIsRefused() throws {
        let handler = MailboxHandler()
        let server = try server(handler)
        defer { server.stop() }
        let requests = [
            "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 16\r\nContent-Length: 17\r\n\r\n0123456789abcdefg",
            "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        ]
        for request in requests {
            let client = try RawHTTPClient(port: server.port)
            try client.send(Array(request.utf8))
            let response = try client.readResponse()
            #expect(response.status == 400, "\(request)")
            #expect(response.text.contains("two ways"), "\(response.text)")
        }
        #expect(handler.handled.withLock { $0.isEmpty })
        let same = try RawHTTPClient(port: server.port)
        try same.send(Array("POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello".utf8))
        #expect(try same.readResponse().status == 200)
    }

    @Test func aParkedPollIsAnsweredWhenAnotherRequestWakesItAndNotBefore() throws {
        let handler = MailboxHandler()
        // No re-check within the test: only the wake can answer it.
        let server = try server(handler) { $0.pollRecheckSeconds = 60 }
        defer { server.stop() }
        let poll = try RawHTTPClient(port: server.port)
        try poll.send("GET", "/box?after=0&wait=30")
        #expect(eventually(within: 5) { server.parkedPolls == 1 && handler.wakeups.waiting == 1 })
        #expect(!poll.hasDataWithin(milliseconds: 300))

        let post = try RawHTTPClient(port: server.port)
        try post.send("POST", "/box", body: Array("hello".utf8))
        #expect(try post.readResponse().status == 202)
        let answer = try poll.readResponse()
        #expect(answer.status == 200)
        #expect(answer.text == "hello")
        #expect(eventually(within: 5) { server.parkedPolls == 0 && handler.wakeups.waiting == 0 })
    }

    @Test func aPollWithDataWaitingIsAnsweredAtOnce() throws {
        let handler = MailboxHandler()
        handler.appendSilently("ready")
        let server = try server(handler)
        defer { server.stop() }
        let poll = try RawHTTPClient(port: server.port)
        try poll.send("GET", "/box?after=0&wait=30")
        let answer = try poll.readResponse()
        #expect(answer.status == 200)
        #expect(answer.text == "ready")
        #expect(server.parkedPolls == 0)
    }

    @Test func aPollExpiresAfterItsWaitWithTheExpireAnswer() throws {
        let handler = MailboxHandler()
        let server = try server(handler)
        defer { server.stop() }
        let poll = try RawHTTPClient(port: server.port)
        let sent = ContinuousClock.now
        try poll.send("GET", "/box?after=0&wait=2")
        #expect(eventually(within: 1.5) { server.parkedPolls == 1 })
        let answer = try poll.readResponse()
        #expect(ContinuousClock.now - sent >= .seconds(2))
        #expect(answer.status == 204)
        #expect(answer.headers["x-expired"] == "1")
        #expect(eventually(within: 2) { handler.wakeups.waiting == 0 && server.parkedPolls == 0 })
    }

    @Test func theRecheckFindsDataThatCameWithoutAWake() throws {
        let handler = MailboxHandler()
        let server = try server(handler) { $0.pollRecheckSeconds = 1 }
        defer { server.stop() }
        let poll = try RawHTTPClient(port: server.port, readTimeoutSeconds: 6)
        try poll.send("GET", "/box?after=0&wait=30")
        #expect(eventually(within: 5) { server.parkedPolls == 1 })
        handler.appendSilently("quiet")
        let answer = try poll.readResponse()
        #expect(answer.status == 200)
        #expect(answer.text == "quiet")
    }

    @Test func aClientThatLeavesWhileParkedFreesItsWaiter() throws {
        let handler = MailboxHandler()
        let server = try server(handler)
        defer { server.stop() }
        let poll = try RawHTTPClient(port: server.port)
        try poll.send("GET", "/box?after=0&wait=30")
        #expect(eventually(within: 5) { server.parkedPolls == 1 && handler.wakeups.waiting == 1 })
        poll.close()
        // Well before the 30 s wait: the re-check notices the closed socket.
        #expect(eventually(within: 5) { server.parkedPolls == 0 && handler.wakeups.waiting == 0 && server.requestsInFlight == 0 })
        // And the server still answers.
        let next = try RawHTTPClient(port: server.port)
        try next.send("POST", "/box", body: Array("x".utf8))
        #expect(try next.readResponse().status == 202)
    }

    @Test func twoHundredParkedPollsAreAllAnswered() throws {
        let handler = MailboxHandler()
        let server = try server(handler) { $0.pollRecheckSeconds = 60 }
        defer { server.stop() }
        let polls = try (0..<200).map { _ in try RawHTTPClient(port: server.port) }
        for poll in polls { try poll.send("GET", "/box?after=0&wait=30") }
        #expect(eventually(within: 10) { server.parkedPolls == 200 })
        #expect(!polls[0].hasDataWithin(milliseconds: 100))
        let post = try RawHTTPClient(port: server.port)
        try post.send("POST", "/box", body: Array("all".utf8))
        #expect(try post.readResponse().status == 202)
        var answered = 0
        for poll in polls {
            let answer = try poll.readResponse()
            if answer.status == 200, answer.text == "all" { answered += 1 }
        }
        #expect(answered == 200)
        #expect(eventually(within: 5) { server.parkedPolls == 0 && handler.wakeups.waiting == 0 })
    }

    @Test func stopAnswersParkedPollsAndReturns() throws {
        let handler = MailboxHandler()
        let server = try server(handler)
        let polls = try (0..<3).map { _ in try RawHTTPClient(port: server.port) }
        for poll in polls { try poll.send("GET", "/box?after=0&wait=30") }
        #expect(eventually(within: 5) { server.parkedPolls == 3 })
        server.stop()
        for poll in polls {
            let answer = try poll.readResponse()
            #expect(answer.status == 204)
            #expect(answer.headers["x-expired"] == "1")
        }
        #expect(handler.wakeups.waiting == 0)
        #expect(throws: RawHTTPClient.Failure.self) { try RawHTTPClient(port: server.port) }
        server.stop()
    }

    @Test func stopLetsAnInFlightRequestFinish() throws {
        let handler = MailboxHandler()
        let server = try server(handler)
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET", "/slow")
        #expect(eventually(within: 5) { handler.handled.withLock { $0.contains { $0.path == "/slow" } } })
        server.stop()
        let answer = try client.readResponse()
        #expect(answer.status == 200)
        #expect(answer.text == "slow")
    }

    @Test func eachRequestLogsMethodTemplateStatusAndTimeButNoQueryOrBody() throws {
        let log = LogLines()
        let server = try server(MailboxHandler()) {
            $0.log = log.sink
            $0.maximumBodyBytes = 64
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST", "/echo?token=SECRETQUERY", headers: ["Authorization": "Bearer SECRETTOKEN"], body: Array("SECRETBODY".utf8))
        #expect(try client.readResponse().status == 200)
        let big = try RawHTTPClient(port: server.port)
        try big.send("POST", "/box", body: [UInt8](repeating: 65, count: 100))
        #expect(try big.readResponse().status == 413)
        #expect(eventually(within: 5) { log.all.count >= 2 })
        let lines = log.all
        let echo = try #require(lines.first { $0.hasPrefix("method=POST path=/echo ") })
        #expect(echo.contains(" status=200 us="))
        #expect(echo.split(separator: " ").count == 4)
        #expect(Int(echo.split(separator: "us=").last ?? "") != nil)
        #expect(lines.contains { $0.hasPrefix("method=POST path=/box status=413 us=") })
        for line in lines {
            #expect(!line.contains("SECRET"))
        }
    }

    @Test func anAnswerLibmicrohttpdGivesItselfIsLoggedWithItsStatus() throws {
        let log = LogLines()
        let handler = MailboxHandler()
        let server = try server(handler) {
            $0.log = log.sink
            $0.connectionMemoryLimitBytes = 8 << 10
        }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("GET", "/echo", headers: ["X-Huge": String(repeating: "h", count: 20_000)])
        let response = try client.readResponse()
        #expect(response.status == 431)
        #expect(handler.handled.withLock { $0.isEmpty })
        #expect(eventually(within: 5) { log.all.contains { $0.hasPrefix("method=") && $0.contains(" status=431 us=") } })
    }

    @Test func aHeadOfTheHealthGetsTheGetsStatusAndHeadersButNoBody() throws {
        let hub = try HubHarness(.sqlite)
        let server = try HubServer(handler: hub.service, configuration: HubServer.Configuration(threads: 2))
        defer { server.stop() }
        let get = try RawHTTPClient(port: server.port)
        try get.send("GET", "/v1/health")
        let got = try get.readResponse()
        #expect(got.status == 200)
        #expect(!got.body.isEmpty)
        let head = try RawHTTPClient(port: server.port)
        try head.send("HEAD", "/v1/health")
        let headed = try head.readResponse()
        #expect(headed.status == 200)
        #expect(headed.body.isEmpty)
        #expect(headed.headers["content-type"] == got.headers["content-type"])
        #expect(headed.headers["content-length"] == "\(got.body.count)")
    }

    @Test func theBareHandlerAnswers200WithAnEmptyBody() throws {
        let log = LogLines()
        let server = try server(BareHandler()) { $0.log = log.sink }
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        try client.send("POST", "/anything", body: [UInt8](repeating: 0, count: 1024))
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.body.isEmpty)
        #expect(eventually(within: 5) { log.all.contains { $0.hasPrefix("method=POST path=bare status=200 us=") } })
    }

    @Test func aHostThatIsNotAnAddressIsRefused() {
        #expect(throws: HubServerError.self) {
            _ = try HubServer(handler: BareHandler(), configuration: HubServer.Configuration(host: "not-an-address"))
        }
    }
}

/// HTTPS through libmicrohttpd's GnuTLS, checked with curl (scripts/test installs it; without it the test fails).
struct HubServerTLSTests {
    /// A self-signed certificate for localhost and 127.0.0.1, valid until 2126; test use only.
    static let certificatePEM = """
-----BEGIN CERTIFICATE-----
MIIBmjCCAUGgAwIBAgIUC967YrTyjJnEwpPaOHkaxqUNIL8wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTIwNTAzMTAzOVoYDzIxMjYxMTEx
MDMxMDM5WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAATZMeF3Lz/YVUfsIICaqHHPIi8qCCUYiudYulh3mLX5VnhRjU/piYJU
o8R3mypho3QCjPoMI9rt7kc6G4gMVCpho28wbTAdBgNVHQ4EFgQUy6Q34FJUlVAY
ay+zXB4Co6Hs72wwHwYDVR0jBBgwFoAUy6Q34FJUlVAYay+zXB4Co6Hs72wwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwCgYIKoZI
zj0EAwIDRwAwRAIgav761J9Qe1qBrv0N4pWb5u9g6v2uaSOJuKiKkJ/k2mYCIA6d
gbmlUTcNndvb98gLOgOQrdS9b7pVu+uODrdQpRdw
-----END CERTIFICATE-----
"""
    static let keyPEM = """
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZ6Zv3HcgmV9OUisD
5+W2f23pIpqEKmmIAEy52NmI5GehRANCAATZMeF3Lz/YVUfsIICaqHHPIi8qCCUY
iudYulh3mLX5VnhRjU/piYJUo8R3mypho3QCjPoMI9rt7kc6G4gMVCph
-----END PRIVATE KEY-----
"""

    /// Runs curl against the server, trusting only the test certificate; its stdout.
    private func curl(_ arguments: [String]) throws -> String {
        let certificate = FileManager.default.temporaryDirectory.appendingPathComponent("stele-hub-test-\(getpid()).pem")
        try Data(Self.certificatePEM.utf8).write(to: certificate)
        defer { try? FileManager.default.removeItem(at: certificate) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["-sS", "--max-time", "20", "--cacert", certificate.path] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    @Test
    func httpsCarriesRequestsAndParkedPolls() throws {
        let handler = MailboxHandler()
        let server = try HubServer(handler: handler, configuration: HubServer.Configuration(
            threads: 2, pollRecheckSeconds: 60,
            tlsCertificatePEM: Array(Self.certificatePEM.utf8), tlsKeyPEM: Array(Self.keyPEM.utf8)))
        defer { server.stop() }
        let base = "https://localhost:\(server.port)"
        let echoed = try curl(["-X", "POST", "--data-binary", "over tls", "-H", "X-Foo: tls", "-w", " %{http_code}", base + "/echo?a=1"])
        #expect(echoed == "over tls 200")

        // Plain HTTP on the TLS port gets no HTTP answer.
        let plain = try RawHTTPClient(port: server.port, readTimeoutSeconds: 5)
        try plain.send("GET", "/echo")
        #expect((try? plain.readResponse()) == nil)

        let answer = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let text = try? curl(["-w", " %{http_code}", base + "/box?after=0&wait=30"])
            answer.withLock { $0 = text }
            done.signal()
        }
        #expect(eventually(within: 10) { server.parkedPolls == 1 })
        #expect(try curl(["-X", "POST", "--data-binary", "woken", "-w", "%{http_code}", base + "/box"]) == "202")
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(answer.withLock { $0 } == "woken 200")
    }
}
