import CMicroHTTPD

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension HubServer {
    /// Whether `host:port` can be listened on now, asked before anything else is
    /// made (`stele-hub serve` creates no database for a hub that cannot start): a
    /// socket is bound there, as libmicrohttpd binds it (`SO_REUSEADDR`), and closed.
    /// Port 0 (any free port) always can. Another process may take the port between
    /// this check and the start, which then fails as it always did.
    /// - Throws: ``HubServerError`` naming the address and what to do.
    public static func checkCanListen(host: String, port: UInt16) throws {
        guard port != 0 else { return }
        var address = sockaddr_storage()
        let family = stele_mhd_make_address(host, port, &address)
        guard family != 0 else { throw HubServerError.badHost(host) }
        #if canImport(Glibc)
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(family, SOCK_STREAM, 0)
        #endif
        // No socket at all says nothing about the port: the start will tell.
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var reuse: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        let length = socklen_t(family == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) } }
        guard bound != 0 else { return }
        let code = errno
        let detail = code == EADDRINUSE ? "another process listens there" : String(cString: strerror(code))
        throw HubServerError.startFailed(host, port, detail, tls: false)
    }
}
