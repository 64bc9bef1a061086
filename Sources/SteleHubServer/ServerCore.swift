import CMicroHTTPD
import Dispatch
import Foundation
import SteleHub
import Synchronization

/// A libmicrohttpd daemon handle. `@unchecked Sendable`: the pointer is only
/// passed to libmicrohttpd calls that are thread-safe for a running daemon
/// (resume, quiesce, stop), and only under ``ServerCore``'s lock.
struct DaemonHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// What the C callbacks reach through their context pointer: the handler, the
/// parked polls and the sweeper that re-polls and expires them.
final class ServerCore: Sendable {
    let handler: any HubHandler
    let configuration: HubServer.Configuration
    /// Where parked polls look again (never on libmicrohttpd's threads).
    let workers = DispatchQueue(label: "stele-hub polls", attributes: .concurrent)

    private struct State {
        var daemon: DaemonHandle?
        var parked: [ObjectIdentifier: ConnectionContext] = [:]
        var inFlight = 0
        var stopping = false
        var stopped = false
    }

    private let state = Mutex(State())

    init(handler: any HubHandler, configuration: HubServer.Configuration) {
        self.handler = handler
        self.configuration = configuration
    }

    func start(_ daemon: OpaquePointer) {
        state.withLock { $0.daemon = DaemonHandle(pointer: daemon) }
        let sweeper = Thread { [self] in sweep() }
        sweeper.name = "stele-hub sweeper"
        sweeper.start()
    }

    var parkedCount: Int { state.withLock { $0.parked.count } }
    var isStopping: Bool { state.withLock { $0.stopping } }

    func opened() { state.withLock { $0.inFlight += 1 } }
    func closed() { state.withLock { $0.inFlight -= 1 } }

    func register(_ context: ConnectionContext) { state.withLock { $0.parked[ObjectIdentifier(context)] = context } }
    func unregister(_ context: ConnectionContext) { _ = state.withLock { $0.parked.removeValue(forKey: ObjectIdentifier(context)) } }

    /// Every 250 ms: parked polls past their deadline get their expiry answer;
    /// those not looked at for a second look again.
    private func sweep() {
        while !state.withLock({ $0.stopped }) {
            usleep(250_000)
            let now = DispatchTime.now().uptimeNanoseconds
            for context in state.withLock({ Array($0.parked.values) }) {
                switch context.due(at: now) {
                case .expire: context.expire()
                case .poll: workers.async { context.poll() }
                case .nothing: break
                }
            }
        }
    }

    func stop() {
        let daemon: DaemonHandle? = state.withLock { state in
            guard !state.stopping else { return nil }
            state.stopping = true
            return state.daemon
        }
        guard let daemon else { return }
        // No new connections; the listening socket is ours to close.
        let listener = MHD_quiesce_daemon(daemon.pointer)
        if listener >= 0 { close(listener) }
        // Every parked poll gets its answer, then in-flight requests finish.
        for context in state.withLock({ Array($0.parked.values) }) { context.expire() }
        let deadline = Date().addingTimeInterval(5)
        while state.withLock({ $0.inFlight > 0 && !$0.parked.isEmpty || $0.inFlight > 0 }) && Date() < deadline {
            for context in state.withLock({ Array($0.parked.values) }) { context.expire() }
            usleep(10_000)
        }
        MHD_stop_daemon(daemon.pointer)
        state.withLock { state in
            state.stopped = true
            state.daemon = nil
        }
    }

    /// Writes the request's log line: method, path template, status, microseconds.
    func log(_ context: ConnectionContext) {
        let microseconds = (DispatchTime.now().uptimeNanoseconds - context.started) / 1_000
        configuration.log("method=\(context.method) path=\(context.template) status=\(context.status) us=\(microseconds)")
    }
}

/// One connection's request. `@unchecked Sendable`: the request fields are
/// written only by libmicrohttpd's callbacks for this connection, which run one
/// at a time on its thread and never while the connection is parked; what a
/// parked poll shares with the wakeup, sweeper and worker threads is `phase`,
/// behind a mutex.
final class ConnectionContext: @unchecked Sendable {
    let core: ServerCore
    let connection: OpaquePointer
    let started = DispatchTime.now().uptimeNanoseconds
    var method = ""
    var path = ""
    var template = "unmatched"
    var status = 0
    var headers: [String: String] = [:]
    var query: [String: String] = [:]
    var body: [UInt8] = []
    var bodyTooLarge = false

    enum Phase {
        case assembling
        case parked(Parked)
        case answered(HubResponse)
        case done
    }

    struct Parked {
        let wait: HubWait
        var ticket: HubWakeups.Ticket?
        let deadline: UInt64
        var nextPoll: UInt64
        var polling = false
        var pollAgain = false
    }

    enum Due { case expire, poll, nothing }

    private let phase = Mutex<Phase>(.assembling)

    init(core: ServerCore, connection: OpaquePointer) {
        self.core = core
        self.connection = connection
    }

    /// The answer for a resumed connection, once.
    func takeAnswer() -> HubResponse? {
        phase.withLock { phase in
            guard case .answered(let response) = phase else { return nil }
            phase = .done
            return response
        }
    }

    /// Parks the connection: it must be suspended by the caller first.
    func park(_ wait: HubWait) {
        let now = DispatchTime.now().uptimeNanoseconds
        phase.withLock { $0 = .parked(Parked(wait: wait, ticket: nil, deadline: now + UInt64(wait.waitSeconds * 1e9), nextPoll: now + 1_000_000_000)) }
        core.register(self)
        if core.isStopping {
            expire()
            return
        }
        // Subscribe, then look once: a frame that landed between the handler's
        // look and the subscription is found now.
        core.workers.async { self.poll() }
    }

    /// What the sweeper should do with this parked poll at `now`.
    func due(at now: UInt64) -> Due {
        phase.withLock { phase in
            guard case .parked(let parked) = phase else { return .nothing }
            if now >= parked.deadline { return .expire }
            return now >= parked.nextPoll && !parked.polling ? .poll : .nothing
        }
    }

    /// Looks again (on a worker thread): subscribes for the next wake first, so
    /// nothing that lands during the look is missed; answers if there is an answer.
    func poll() {
        let wakeups = core.handler.wakeups
        let start: HubWait? = phase.withLock { phase in
            guard case .parked(var parked) = phase else { return nil }
            if parked.polling {
                parked.pollAgain = true
                phase = .parked(parked)
                return nil
            }
            parked.polling = true
            phase = .parked(parked)
            return parked.wait
        }
        guard let wait = start else { return }
        while true {
            let ticket = wakeups.subscribe(wait.key) { [weak self] in
                guard let self else { return }
                self.core.workers.async { self.poll() }
            }
            let keep: Bool = phase.withLock { phase in
                guard case .parked(var parked) = phase else { return false }
                if let old = parked.ticket { wakeups.cancel(old) }
                parked.ticket = ticket
                phase = .parked(parked)
                return true
            }
            guard keep else {
                wakeups.cancel(ticket)
                return
            }
            if let response = wait.poll() {
                answer(response)
                return
            }
            let again: Bool = phase.withLock { phase in
                guard case .parked(var parked) = phase else { return false }
                let again = parked.pollAgain
                parked.pollAgain = false
                parked.polling = again
                parked.nextPoll = DispatchTime.now().uptimeNanoseconds + 1_000_000_000
                phase = .parked(parked)
                return again
            }
            if !again { return }
        }
    }

    /// Ends the wait with its expiry answer.
    func expire() {
        let wait: HubWait? = phase.withLock { phase in
            guard case .parked(let parked) = phase else { return nil }
            return parked.wait
        }
        guard let wait else { return }
        answer(wait.expire())
    }

    /// Stores the answer and resumes the connection, exactly once.
    func answer(_ response: HubResponse) {
        let ticket: HubWakeups.Ticket?? = phase.withLock { phase in
            guard case .parked(let parked) = phase else { return nil }
            phase = .answered(response)
            return .some(parked.ticket)
        }
        guard let ticket else { return }
        if let ticket { core.handler.wakeups.cancel(ticket) }
        core.unregister(self)
        MHD_resume_connection(connection)
    }
}

// MARK: libmicrohttpd's callbacks (free functions: C function pointers capture nothing)

/// libmicrohttpd calls this once when the headers are in, once per body chunk,
/// once at the end, and once more after a parked connection is resumed.
func accessHandler(
    _ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ url: UnsafePointer<CChar>?, _ method: UnsafePointer<CChar>?,
    _ version: UnsafePointer<CChar>?, _ uploadData: UnsafePointer<CChar>?, _ uploadDataSize: UnsafeMutablePointer<Int>?,
    _ contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let contextSlot else { return .NO }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    guard let existing = contextSlot.pointee else {
        // Headers are in: a new request.
        let context = ConnectionContext(core: core, connection: connection)
        context.method = method.map { String(cString: $0) } ?? ""
        context.path = url.map { String(cString: $0) } ?? "/"
        let opaque = Unmanaged.passUnretained(context).toOpaque()
        MHD_get_connection_values(connection, .HEADER_KIND, collectHeader, opaque)
        MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, collectQuery, opaque)
        contextSlot.pointee = Unmanaged.passRetained(context).toOpaque()
        core.opened()
        return .YES
    }
    let context = Unmanaged<ConnectionContext>.fromOpaque(existing).takeUnretainedValue()
    if let uploadDataSize, uploadDataSize.pointee > 0 {
        let count = uploadDataSize.pointee
        if context.body.count + count > core.configuration.maximumBodyBytes {
            // Kept no further: the answer is 413 once the upload ends.
            context.bodyTooLarge = true
            context.body = []
        } else if !context.bodyTooLarge, let uploadData {
            uploadData.withMemoryRebound(to: UInt8.self, capacity: count) { context.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: count)) }
        }
        uploadDataSize.pointee = 0
        return .YES
    }
    if let answer = context.takeAnswer() {
        return queue(answer, context)
    }
    let request = HubRequest(method: context.method, path: context.path, query: context.query, headers: context.headers, body: context.body)
    context.template = core.handler.template(of: request)
    if context.bodyTooLarge {
        return queue(.error(413, "too_large", "the body is over the hub's \(core.configuration.maximumBodyBytes)-byte limit"), context)
    }
    context.body = []
    switch core.handler.handle(request) {
    case .respond(let response):
        return queue(response, context)
    case .wait(let wait):
        MHD_suspend_connection(connection)
        context.park(wait)
        return .YES
    }
}

/// Sends `response` on the connection.
func queue(_ response: HubResponse, _ context: ConnectionContext) -> MHD_Result {
    context.status = response.status
    // libmicrohttpd copies the bytes; a body is never empty for it (a zero count is fine).
    let body = response.body.isEmpty ? [0] : response.body
    let created: OpaquePointer? = body.withUnsafeBytes { bytes in
        MHD_create_response_from_buffer(response.body.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
    }
    guard let created else { return .NO }
    defer { MHD_destroy_response(created) }
    for (name, value) in response.headers { MHD_add_response_header(created, name, value) }
    return MHD_queue_response(context.connection, UInt32(response.status), created)
}

/// The request is over (answered, or the client went away): log it and release its context.
func requestCompleted(
    _ cls: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ reason: MHD_RequestTerminationCode
) {
    guard let cls, let contextSlot, let opaque = contextSlot.pointee else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
    let context = Unmanaged<ConnectionContext>.fromOpaque(opaque).takeRetainedValue()
    contextSlot.pointee = nil
    core.unregister(context)
    core.log(context)
    core.closed()
}

func collectHeader(_ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let context = Unmanaged<ConnectionContext>.fromOpaque(cls).takeUnretainedValue()
    context.headers[String(cString: key).lowercased()] = value.map { String(cString: $0) } ?? ""
    return .YES
}

func collectQuery(_ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let context = Unmanaged<ConnectionContext>.fromOpaque(cls).takeUnretainedValue()
    context.query[String(cString: key)] = value.map { String(cString: $0) } ?? ""
    return .YES
}
