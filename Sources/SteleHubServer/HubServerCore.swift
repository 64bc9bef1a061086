import CMicroHTTPD
import Dispatch
import SteleHub
import Synchronization

/// What libmicrohttpd's callbacks reach through `cls`: assembles requests, hands
/// them to the handler, queues answers, parks long polls (see
/// `HubServerCore+Parking.swift`) and writes the request log.
final class HubServerCore: Sendable {
    let handler: any HubHandler
    let configuration: HubServer.Configuration
    /// Parked long polls and whether the server is stopping.
    let parking = Mutex(ParkingTable())
    /// Runs `HubWait.poll()` off libmicrohttpd's threads.
    let pollQueue = DispatchQueue(label: "stele.hub.server.poll", attributes: .concurrent)
    /// Runs the sweep that expires and re-checks parked polls.
    let sweepQueue = DispatchQueue(label: "stele.hub.server.sweep")
    /// Requests between their request line and their completion.
    let requestsInFlight = Atomic<Int>(0)
    private let nextNumber = Atomic<UInt64>(0)

    init(handler: any HubHandler, configuration: HubServer.Configuration) {
        self.handler = handler
        self.configuration = configuration
    }

    var isStopping: Bool { parking.withLock { $0.stopping } }

    // MARK: Callbacks (libmicrohttpd's thread for the connection)

    /// A request line arrived: its context, retained for the connection's `con_cls`.
    func begin(target: String, connection: OpaquePointer) -> RequestContext {
        requestsInFlight.add(1, ordering: .relaxed)
        let number = nextNumber.add(1, ordering: .relaxed).newValue
        return RequestContext(connection: connection, target: target, number: number)
    }

    /// One access-handler call: headers, a piece of body, the end of the body, or a resumed poll.
    func access(_ context: RequestContext, method: String, uploadData: UnsafePointer<CChar>?, uploadDataSize: UnsafeMutablePointer<Int>) -> MHD_Result {
        switch context.phase {
        case .headers:
            context.method = method
            collectHeaders(context)
            context.phase = .body
            // A body whose length is said two ways is ambiguous (RFC 9112 §6.3): a proxy in
            // front may read it otherwise than the hub. Refused before any of it is read.
            let lengths = Set((context.headers["content-length"] ?? "").split(separator: ",").map { String($0.filter { $0 != " " && $0 != "\t" }) })
            if lengths.count > 1 || (!lengths.isEmpty && context.headers["transfer-encoding"] != nil) {
                context.template = handler.template(of: context.requestWithoutBody)
                return answer(
                    context,
                    HubResponse.error(
                        400, "bad_request",
                        "the request gives its body's length two ways (Content-Length more than once, or with Transfer-Encoding); send one Content-Length, or chunks alone"))
            }
            if let declared = context.headers["content-length"].flatMap(UInt64.init), declared > UInt64(configuration.maximumBodyBytes) {
                context.bodyTooLong = true
                // A client that waits for `100 Continue` (or declares an absurd length) is
                // answered now; libmicrohttpd then reads no body and closes. Any other is
                // drained below without keeping a byte, so it can read the answer.
                let waitsToSend = context.headers["expect"]?.lowercased() == "100-continue"
                if waitsToSend || declared > UInt64(configuration.maximumBodyBytes) * 4 {
                    context.template = handler.template(of: context.requestWithoutBody)
                    return answer(context, tooLong)
                }
            }
            return .YES
        case .body:
            let count = uploadDataSize.pointee
            if count > 0 {
                if !context.bodyTooLong {
                    if context.body.count + count > configuration.maximumBodyBytes {
                        context.bodyTooLong = true
                        context.body = []
                    } else if let uploadData {
                        context.body.append(contentsOf: UnsafeRawBufferPointer(start: uploadData, count: count))
                    }
                }
                uploadDataSize.pointee = 0
                return .YES
            }
            return dispatch(context)
        case .parked:
            let response = context.handoff.withLock { $0.take() }
            return answer(context, response ?? HubResponse.error(500, "internal", "the hub lost a long poll's answer: ask again"))
        case .answered:
            return .YES
        }
    }

    /// The request is complete (answered, or the client left): the log line, and the
    /// context's last reference goes.
    func complete(_ context: RequestContext, termination: MHD_RequestTerminationCode) {
        if context.phase == .parked {
            // libmicrohttpd does not complete a suspended connection in normal operation;
            // should it (a stop that found one), the entry must go so nobody resumes it.
            abandon(context)
        }
        if context.status == 0 {
            // libmicrohttpd answered on its own (a malformed request, headers too large).
            context.status = Int(stele_mhd_connection_status(context.connection))
        }
        let template = context.template ?? handler.template(of: context.requestWithoutBody)
        let elapsed = ContinuousClock.now - context.started
        let microseconds = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
        var line = "method=\(Self.loggable(context.method)) path=\(Self.path(of: template, method: context.method)) status=\(context.status) us=\(microseconds)"
        if termination != .REQUEST_TERMINATED_COMPLETED_OK { line += " closed=early" }
        // The failure's own words, on one line, quotes escaped: for the operator only.
        if let detail = context.detail {
            line += " error=\"" + detail.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\r", with: " ") + "\""
        }
        configuration.log(line)
        requestsInFlight.subtract(1, ordering: .relaxed)
    }

    // MARK: Requests

    private var tooLong: HubResponse {
        HubResponse.error(413, "too_large", "the request body is over \(configuration.maximumBodyBytes) bytes: send less")
    }

    private func collectHeaders(_ context: RequestContext) {
        let cls = Unmanaged.passUnretained(context).toOpaque()
        _ = MHD_get_connection_values(context.connection, .HEADER_KIND, collectHeader, cls)
    }

    /// The body is in: the handler answers, or parks the request.
    private func dispatch(_ context: RequestContext) -> MHD_Result {
        let request = HubRequest(method: context.method, target: context.target, headers: context.headers, body: context.body)
        context.headers = [:]
        context.body = []
        context.template = handler.template(of: request)
        if context.bodyTooLong { return answer(context, tooLong) }
        switch handler.handle(request) {
        case .respond(let response):
            return answer(context, response)
        case .wait(let wait):
            if isStopping { return answer(context, wait.expire()) }
            context.phase = .parked
            MHD_suspend_connection(context.connection)
            park(context, wait)
            return .YES
        }
    }

    /// Queues `response` on the connection.
    private func answer(_ context: RequestContext, _ response: HubResponse) -> MHD_Result {
        context.phase = .answered
        context.status = response.status
        context.detail = response.detail
        let created: OpaquePointer?
        if response.body.isEmpty {
            created = MHD_create_response_from_buffer(0, nil, .RESPMEM_PERSISTENT)
        } else {
            created = response.body.withUnsafeBytes { raw in
                MHD_create_response_from_buffer(raw.count, UnsafeMutableRawPointer(mutating: raw.baseAddress), .RESPMEM_MUST_COPY)
            }
        }
        guard let created else { return .NO }
        defer { MHD_destroy_response(created) }
        for (name, value) in response.headers {
            let lowered = name.lowercased()
            // libmicrohttpd writes the framing headers itself.
            if lowered == "content-length" || lowered == "transfer-encoding" { continue }
            if MHD_add_response_header(created, name, value) != .YES {
                configuration.log("hub-server: dropped response header '\(Self.loggable(name))' (not a valid header)")
            }
        }
        if isStopping { _ = MHD_add_response_header(created, "Connection", "close") }
        return MHD_queue_response(context.connection, UInt32(clamping: response.status), created)
    }

    // MARK: Log

    /// A method as sent, kept to a short printable token (`-` when none arrived).
    private static func loggable(_ text: String) -> String {
        if text.isEmpty { return "-" }
        return String(text.unicodeScalars.prefix(24).map { $0.isASCII && $0.value > 0x20 && $0.value < 0x7f && $0 != "=" ? Character($0) : "?" })
    }

    /// The template without its leading method (`POST /v1/x` → `/v1/x`), spaces made `_`.
    private static func path(of template: String, method: String) -> String {
        let path = template.hasPrefix(method + " ") ? String(template.dropFirst(method.count + 1)) : template
        return path.isEmpty ? "-" : String(path.map { $0 == " " ? "_" : $0 })
    }
}

/// MHD_get_connection_values's iterator: one request header into the context.
private func collectHeader(_ cls: UnsafeMutableRawPointer?, _ kind: MHD_ValueKind, _ key: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?) -> MHD_Result {
    guard let cls, let key else { return .YES }
    let context = Unmanaged<RequestContext>.fromOpaque(cls).takeUnretainedValue()
    let name = String(cString: key).lowercased()
    let text = value.map { String(cString: $0) } ?? ""
    if let earlier = context.headers[name] {
        context.headers[name] = earlier + ", " + text
    } else {
        context.headers[name] = text
    }
    return .YES
}
