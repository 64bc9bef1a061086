import CMicroHTTPD
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Owns one `MHD_Daemon` and the C memory it points into (the log sink, the TLS
/// strings), and the context its callbacks receive as `cls`.
///
/// `@unchecked Sendable`: `daemon` and the C buffers are written once in `init`
/// and freed only in `deinit`; the daemon's lifecycle calls (quiesce, stop) go
/// through `state`, a Mutex, so each runs once; libmicrohttpd's own API is
/// thread-safe for the calls made from other threads (resume).
final class MHDDaemon: @unchecked Sendable {  // safe: written once in init, freed in deinit, lifecycle through the `state` Mutex (above)
    private struct State {
        var listenSocket: Int32 = -1
        var quiesced = false
        var stopped = false
    }

    private let daemon: OpaquePointer
    private let logSink: UnsafeMutablePointer<stele_mhd_log_sink>
    private let tlsStrings: [UnsafeMutablePointer<CChar>]
    /// Kept alive for as long as the callbacks may run.
    private let context: AnyObject
    private let state = Mutex(State())
    /// The port actually bound.
    let port: UInt16

    /// Starts listening.
    /// - Parameters:
    ///   - context: the object whose unretained pointer is every callback's `cls`.
    ///   - writeLog: receives libmicrohttpd's error messages; `logContext` is its `cls`.
    init(
        configuration: HubServer.Configuration,
        context: AnyObject,
        access: MHD_AccessHandlerCallback,
        completed: MHD_RequestCompletedCallback,
        uriLog: @escaping @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer?,
        writeLog: @escaping @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void
    ) throws {
        var address = sockaddr_storage()
        let family = stele_mhd_make_address(configuration.host, configuration.port, &address)
        guard family != 0 else { throw HubServerError.badHost(configuration.host) }
        let useTLS: Bool
        switch (configuration.tlsCertificatePEM, configuration.tlsKeyPEM) {
        case (nil, nil): useTLS = false
        case (.some, .some): useTLS = true
        default: throw HubServerError.incompleteTLS
        }

        var flags = MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ITC.rawValue | MHD_USE_ERROR_LOG.rawValue
        if MHD_is_feature_supported(.FEATURE_EPOLL) == .YES {
            flags |= MHD_USE_EPOLL_INTERNAL_THREAD.rawValue
        } else {
            flags |= MHD_USE_AUTO_INTERNAL_THREAD.rawValue
        }
        if family == AF_INET6 { flags |= MHD_USE_IPv6.rawValue }
        if useTLS { flags |= MHD_USE_TLS.rawValue }

        let contextPointer = Unmanaged.passUnretained(context).toOpaque()
        let sink = UnsafeMutablePointer<stele_mhd_log_sink>.allocate(capacity: 1)
        sink.initialize(to: stele_mhd_log_sink(write: writeLog, cls: contextPointer))
        // MHD reads the PEM strings while it starts; they stay until deinit all the same.
        let tls = useTLS ? [configuration.tlsCertificatePEM ?? [], configuration.tlsKeyPEM ?? []].map(Self.cString) : []

        let started = withUnsafePointer(to: &address) { storage in
            storage.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                stele_mhd_start(
                    flags, socketAddress,
                    access, contextPointer,
                    completed, contextPointer,
                    uriLog, contextPointer,
                    sink,
                    UInt32(clamping: configuration.threads),
                    UInt32(clamping: configuration.connectionLimit),
                    UInt32(clamping: configuration.connectionTimeoutSeconds),
                    configuration.connectionMemoryLimitBytes,
                    4096,
                    useTLS ? UnsafePointer(tls[0]) : nil,
                    useTLS ? UnsafePointer(tls[1]) : nil)
            }
        }
        guard let started else {
            let detail = String(cString: strerror(errno))
            sink.deallocate()
            tls.forEach { $0.deallocate() }
            throw HubServerError.startFailed(configuration.host, configuration.port, detail, tls: useTLS)
        }
        self.daemon = started
        self.logSink = sink
        self.tlsStrings = tls
        self.context = context
        self.port = stele_mhd_bind_port(started)
    }

    deinit {
        stop()
        logSink.deallocate()
        tlsStrings.forEach { $0.deallocate() }
    }

    /// Stops accepting connections; those open carry on. Idempotent.
    func quiesce() {
        state.withLock { state in
            guard !state.quiesced, !state.stopped else { return }
            state.quiesced = true
            state.listenSocket = MHD_quiesce_daemon(daemon)
        }
    }

    /// Closes every connection and joins libmicrohttpd's threads. Idempotent.
    /// Every suspended connection must have been resumed first (libmicrohttpd's rule).
    func stop() {
        let listenSocket: Int32? = state.withLock { state in
            guard !state.stopped else { return nil }
            state.stopped = true
            return state.listenSocket
        }
        guard let listenSocket else { return }
        MHD_stop_daemon(daemon)
        // MHD_quiesce_daemon hands the listening socket over; it may be closed only now.
        if listenSocket >= 0 { close(listenSocket) }
    }

    /// A NUL-terminated copy of `bytes` that lives until freed.
    private static func cString(_ bytes: [UInt8]) -> UnsafeMutablePointer<CChar> {
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
        bytes.withUnsafeBytes { raw in
            for (index, byte) in raw.enumerated() { pointer[index] = CChar(bitPattern: byte) }
        }
        pointer[bytes.count] = 0
        return pointer
    }
}
