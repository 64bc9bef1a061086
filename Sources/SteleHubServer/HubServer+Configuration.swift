extension HubServer {
    /// How a ``HubServer`` listens and what it allows. Defaults follow HUB-API.md's limits.
    public struct Configuration: Sendable {
        /// The address to listen on, an IPv4 or IPv6 literal (`127.0.0.1`, `::1`, `0.0.0.0`).
        public var host: String
        /// The port; 0 lets the kernel pick a free one (read it back from ``HubServer/port``).
        public var port: UInt16
        /// libmicrohttpd worker threads, each running its own event loop (epoll where available).
        public var threads: Int
        /// A request body longer than this is answered `413 too_large` without being kept.
        public var maximumBodyBytes: Int
        /// Open connections at most, parked long polls included.
        public var connectionLimit: Int
        /// An idle connection (keep-alive, or a client that stopped sending) is closed after this
        /// long. A parked long poll is not idle: its wait bounds it instead.
        public var connectionTimeoutSeconds: Int
        /// libmicrohttpd's per-connection memory pool (request line, headers, read and write
        /// buffers). Larger headers are refused `431`.
        public var connectionMemoryLimitBytes: Int
        /// How often a parked long poll looks again without a wake (a cross-process
        /// notification that got lost must not strand it).
        public var pollRecheckSeconds: Double
        /// How long ``HubServer/stop()`` lets in-flight requests finish before closing them.
        public var stopGraceSeconds: Double
        /// The TLS certificate chain in PEM; with ``tlsKeyPEM``, the server speaks HTTPS.
        public var tlsCertificatePEM: [UInt8]?
        /// The TLS private key in PEM.
        public var tlsKeyPEM: [UInt8]?
        /// Where the request log and libmicrohttpd's own errors go, one line per call. Called
        /// from server threads: it must be quick and thread-safe.
        public var log: @Sendable (String) -> Void

        /// A configuration; every argument has HUB-API's default.
        public init(
            host: String = "127.0.0.1",
            port: UInt16 = 0,
            threads: Int = 4,
            maximumBodyBytes: Int = 8 << 20,
            connectionLimit: Int = 20_000,
            connectionTimeoutSeconds: Int = 90,
            connectionMemoryLimitBytes: Int = 16 << 10,
            pollRecheckSeconds: Double = 1,
            stopGraceSeconds: Double = 5,
            tlsCertificatePEM: [UInt8]? = nil,
            tlsKeyPEM: [UInt8]? = nil,
            log: @escaping @Sendable (String) -> Void = { _ in }
        ) {
            self.host = host
            self.port = port
            self.threads = threads
            self.maximumBodyBytes = maximumBodyBytes
            self.connectionLimit = connectionLimit
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.connectionMemoryLimitBytes = connectionMemoryLimitBytes
            self.pollRecheckSeconds = pollRecheckSeconds
            self.stopGraceSeconds = stopGraceSeconds
            self.tlsCertificatePEM = tlsCertificatePEM
            self.tlsKeyPEM = tlsKeyPEM
            self.log = log
        }
    }
}
