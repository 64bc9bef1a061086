import CMicroHTTPD
import Dispatch
import Foundation
import SteleHub
import Synchronization

/// The hub's HTTP front: libmicrohttpd with its epoll event loop and a small
/// thread pool (never a thread per connection). It assembles each request,
/// hands it to a ``HubHandler``, and parks long polls by suspending their
/// connection: no thread waits for a frame. A parked poll is resumed when its
/// key wakes (``HubWakeups``), when its re-poll (at least once a second, in case
/// a notification between hub processes was lost) finds an answer, or at its
/// deadline.
public final class HubServer: Sendable {
    /// How the server listens and what it allows.
    public struct Configuration: Sendable {
        /// An IPv4 address to bind (`127.0.0.1` by default; `0.0.0.0` for every interface).
        public var host = "127.0.0.1"
        /// 0 picks a free port (``HubServer/port`` says which).
        public var port: UInt16 = 8420
        /// libmicrohttpd's event-loop threads.
        public var threads = 4
        /// A body over this is answered `413 too_large` without being kept.
        public var maximumBodyBytes = 8 << 20
        public var connectionLimit = 20_000
        /// An idle connection (not a parked poll) is closed after this.
        public var idleTimeoutSeconds = 90
        /// Each connection's buffer pool in libmicrohttpd.
        public var connectionMemoryBytes = 16 << 10
        /// PEM bytes; both set serve HTTPS.
        public var tlsCertificate: [UInt8]?
        public var tlsKey: [UInt8]?
        /// Receives one line per finished request.
        public var log: @Sendable (String) -> Void = { _ in }

        public init() {}
    }

    /// The port bound.
    public let port: UInt16
    let core: ServerCore

    /// Starts serving.
    /// - Throws: ``HubServerError`` when the address is bad, the port is taken or TLS is unavailable.
    public init(handler: any HubHandler, configuration: Configuration) throws {
        signal(SIGPIPE, SIG_IGN)
        Self.raiseDescriptorLimit()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = configuration.port.bigEndian
        guard inet_pton(AF_INET, configuration.host, &address.sin_addr) == 1 else {
            throw HubServerError("cannot listen on '\(configuration.host)': give an IPv4 address such as 127.0.0.1 or 0.0.0.0")
        }
        if configuration.tlsCertificate != nil && stele_mhd_has_tls() == 0 {
            throw HubServerError("this libmicrohttpd has no TLS support; serve plain HTTP behind a TLS proxy")
        }
        let core = ServerCore(handler: handler, configuration: configuration)
        let opaque = Unmanaged.passUnretained(core).toOpaque()
        let certificate = configuration.tlsCertificate.map { $0 + [0] }
        let key = configuration.tlsKey.map { $0 + [0] }
        let daemon: OpaquePointer? = certificate.withOptionalCString { certificatePointer in
            key.withOptionalCString { keyPointer in
                withUnsafePointer(to: &address) { addressPointer in
                    stele_mhd_start(
                        0, addressPointer, accessHandler, opaque, requestCompleted, opaque,
                        UInt32(max(1, configuration.threads)), UInt32(configuration.connectionLimit), configuration.connectionMemoryBytes,
                        UInt32(configuration.idleTimeoutSeconds), certificatePointer, keyPointer)
                }
            }
        }
        guard let daemon else {
            throw HubServerError("cannot listen on \(configuration.host):\(configuration.port): the port is taken, the address is not this machine's, or the TLS files are not PEM")
        }
        core.start(daemon)
        port = stele_mhd_port(daemon)
        self.core = core
    }

    deinit { core.stop() }

    /// Stops accepting, answers every parked poll (its expiry answer), lets
    /// requests in flight finish (up to five seconds), then closes. Idempotent.
    public func stop() { core.stop() }

    /// Parked long polls now.
    public var parkedCount: Int { core.parkedCount }

    /// The descriptor limit raised to its hard limit: every idle long poll holds one.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}

/// The server failed to start.
public struct HubServerError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension Optional where Wrapped == [UInt8] {
    /// Calls `body` with a C string of the bytes (already NUL-terminated), or NULL.
    func withOptionalCString<T>(_ body: (UnsafePointer<CChar>?) -> T) -> T {
        guard let bytes = self else { return body(nil) }
        return bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress) }
        }
    }
}
