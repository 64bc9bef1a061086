import CMicroHTTPD
import SteleHub

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The hub's HTTP front: libmicrohttpd with a pool of event-loop threads, passing
/// each request to a ``HubHandler`` and parking long polls as suspended
/// connections (no thread held per poll). Listens from `init` until ``stop()``.
///
/// Each request writes one log line when it completes:
/// `method=POST path=/v1/accounts/{a}/relay/{device} status=202 us=123` (the route
/// template, never an id, token, query value or body).
public final class HubServer: Sendable {
    private let core: HubServerCore
    private let daemon: MHDDaemon

    /// The port it listens on (the one picked when the configuration said 0).
    public var port: UInt16 { daemon.port }

    /// How many long polls are parked now.
    public var parkedPolls: Int { core.parkedCount }

    /// How many requests are between their request line and their completion.
    public var requestsInFlight: Int { core.requestsInFlight.load(ordering: .relaxed) }

    /// Starts listening; raises this process's open-file limit to its hard limit first
    /// (every parked poll is an open socket).
    /// - Throws: ``HubServerError`` when the host is not an address literal, only half
    ///   of TLS is given, or libmicrohttpd cannot listen (port taken, bad PEM).
    public init(handler: any HubHandler, configuration: Configuration = Configuration()) throws {
        _ = stele_raise_open_files_limit()
        let core = HubServerCore(handler: handler, configuration: configuration)
        self.core = core
        self.daemon = try MHDDaemon(
            configuration: configuration,
            context: core,
            access: hubServerAccess,
            completed: hubServerCompleteRequest,
            uriLog: hubServerBeginRequest,
            writeLog: hubServerWriteLog)
        core.scheduleSweep()
    }

    deinit {
        stop()
    }

    /// Stops gracefully: accepts no new connection, answers every parked poll with its
    /// expire answer, lets in-flight requests finish (for at most
    /// ``Configuration/stopGraceSeconds``), then closes everything. Idempotent; blocks
    /// until done.
    public func stop() {
        daemon.quiesce()
        core.expireAllForStop()
        let deadline = ContinuousClock.now + .seconds(core.configuration.stopGraceSeconds)
        while core.requestsInFlight.load(ordering: .relaxed) > 0, ContinuousClock.now < deadline {
            sleepBriefly()
        }
        // A request that parked after the sweep above was answered at once (stopping is
        // set), so no connection is left suspended for MHD_stop_daemon.
        daemon.stop()
    }

    private func sleepBriefly() {
        var pause = timespec(tv_sec: 0, tv_nsec: 10_000_000)
        _ = nanosleep(&pause, nil)
    }
}
