import SteleHub
import Synchronization

/// One request's state, from its request line to libmicrohttpd's completion
/// notice; libmicrohttpd holds it (retained) in the connection's `con_cls`.
///
/// `@unchecked Sendable`: the `var` fields are only touched on the libmicrohttpd
/// thread that owns the connection (each connection belongs to one worker
/// thread, and its callbacks never run concurrently); the `let` fields are
/// immutable; `handoff`, the one field other threads write, is a Mutex. A parked
/// request is shared with the poll queue only to resume it.
final class RequestContext: @unchecked Sendable {  // safe: its connection's one worker thread owns the vars; `handoff` is a Mutex (above)
    /// Where the request is in its life.
    enum Phase {
        /// Waiting for the first access-handler call (headers in).
        case headers
        /// Receiving the body.
        case body
        /// Suspended as a long poll, until `handoff` holds its answer.
        case parked
        /// An answer is queued.
        case answered
    }

    /// The libmicrohttpd connection (`struct MHD_Connection *`), valid until completion.
    let connection: OpaquePointer
    /// The request target as sent: path, still percent-encoded, and query.
    let target: String
    /// When the request line arrived, for the log.
    let started: ContinuousClock.Instant
    /// The key of its entry while parked.
    let number: UInt64
    /// The answer a parked poll got, set just before the connection is resumed.
    let handoff = Mutex<HubResponse?>(nil)

    var phase = Phase.headers
    var method = ""
    /// Header names lowercased; dropped once the handler has the request.
    var headers: [String: String] = [:]
    /// The body so far; dropped once the handler has the request, or when too long.
    var body: [UInt8] = []
    var bodyTooLong = false
    /// The route template for the log, once known.
    var template: String?
    /// The status queued, 0 until then.
    var status = 0
    /// What went wrong inside the hub, for the log line (``HubResponse/detail``).
    var detail: String?

    init(connection: OpaquePointer, target: String, number: UInt64) {
        self.connection = connection
        self.target = target
        self.number = number
        self.started = ContinuousClock.now
    }

    /// The request as far as it arrived, without its body: for the handler's template.
    var requestWithoutBody: HubRequest {
        HubRequest(method: method, target: target, headers: headers)
    }
}
