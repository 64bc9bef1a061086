#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A blocking HTTP/1.1 client over one loopback socket, for server tests that need
/// what URLSession hides: a parked request left open, a client that vanishes, a
/// request written by hand. Every read has a timeout, so a test fails instead of hanging.
final class RawHTTPClient {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A parsed answer.
    struct Response {
        var status: Int
        /// Names lowercased.
        var headers: [String: String]
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    private var socket: Int32

    /// Connects to 127.0.0.1:`port`; reads give up after `readTimeoutSeconds`.
    init(port: UInt16, readTimeoutSeconds: Int = 10) throws {
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: readTimeoutSeconds, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr = in_addr(s_addr: UInt32(0x7f00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            Glibc.close(socket)
            throw Failure(description: "connect: errno \(code)")
        }
    }

    deinit { close() }

    /// Writes every byte.
    func send(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let wrote = bytes[sent...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard wrote > 0 else { throw Failure(description: "send: errno \(errno)") }
            sent += wrote
        }
    }

    /// Writes a request with `Connection: close`, so the answer ends at end of stream.
    func send(_ method: String, _ target: String, headers: [String: String] = [:], body: [UInt8]? = nil) throws {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body, headers["Transfer-Encoding"] == nil { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try send(Array(head.utf8) + (body ?? []))
    }

    /// Reads to end of stream and parses the answer.
    func readResponse() throws -> Response {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let got = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if got == 0 { break }
            if got < 0 {
                // A reset after the whole answer arrived still leaves the answer.
                if errno == ECONNRESET, !data.isEmpty { break }
                throw Failure(description: "recv: errno \(errno) after \(data.count) bytes")
            }
            data += buffer[0..<got]
        }
        return try Self.parse(data)
    }

    /// Whether any byte (or the end of stream) arrives within `milliseconds`.
    func hasDataWithin(milliseconds: Int32) -> Bool {
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, milliseconds) > 0
    }

    /// Closes the socket (the client leaves).
    func close() {
        if socket >= 0 {
            Glibc.close(socket)
            socket = -1
        }
    }

    private static func parse(_ data: [UInt8]) throws -> Response {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = (0...(max(0, data.count - 4))).first(where: { data.count >= $0 + 4 && Array(data[$0..<$0 + 4]) == separator }) else {
            throw Failure(description: "no header end in \(data.count) bytes")
        }
        let head = String(decoding: data[..<end], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { throw Failure(description: "bad status line") }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingSpaces
        }
        var body = Array(data[(end + 4)...])
        if headers["transfer-encoding"]?.lowercased() == "chunked" { body = try dechunk(body) }
        return Response(status: status, headers: headers, body: body)
    }

    private static func dechunk(_ data: [UInt8]) throws -> [UInt8] {
        var body: [UInt8] = []
        var index = 0
        while index < data.count {
            guard let lineEnd = (index..<data.count - 1).first(where: { data[$0] == 13 && data[$0 + 1] == 10 }),
                  let size = Int(String(decoding: data[index..<lineEnd], as: UTF8.self).split(separator: ";")[0], radix: 16) else {
                throw Failure(description: "bad chunk")
            }
            if size == 0 { break }
            body += data[(lineEnd + 2)..<(lineEnd + 2 + size)]
            index = lineEnd + 2 + size + 2
        }
        return body
    }
}

extension Substring {
    var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
