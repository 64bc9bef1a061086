/// Why a ``HubServer`` could not start.
public struct HubServerError: Error, CustomStringConvertible, Sendable {
    private enum Code: Sendable {
        case badHost
        case incompleteTLS
        case startFailed
    }

    private let code: Code
    /// What happened and what to do.
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The host is not an IPv4 or IPv6 literal.
    static func badHost(_ host: String) -> HubServerError {
        HubServerError(.badHost, "cannot listen on '\(host)': give an IPv4 or IPv6 address such as 127.0.0.1 or ::1")
    }

    /// Only one of the certificate and the key was given.
    static let incompleteTLS = HubServerError(.incompleteTLS, "TLS needs both a certificate and a key in PEM: give both or neither")

    /// libmicrohttpd refused to start (port taken, bad certificate, no memory).
    static func startFailed(_ host: String, _ port: UInt16, _ detail: String, tls: Bool) -> HubServerError {
        let reason = detail.isEmpty ? "" : " (\(detail))"
        let check = tls ? "check that the port is free and that the TLS certificate and key are valid PEM" : "check that no other process listens on port \(port), or pick another with --listen"
        return HubServerError(.startFailed, "could not listen on \(host):\(port)\(reason): \(check)")
    }

    /// A public `description` is the message.
    public var description: String { message }
}
