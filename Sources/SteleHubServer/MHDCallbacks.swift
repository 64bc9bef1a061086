import Foundation
import CMicroHTTPD

// libmicrohttpd's callbacks: free functions, so they capture nothing and convert
// to C function pointers. `cls` is the unretained HubServerCore (the daemon keeps
// it alive); `con_cls` holds the request's RequestContext, retained from the
// request line (uri log) to the completion notice.

/// MHD_OPTION_URI_LOG_CALLBACK: the request line arrived; its target is still raw
/// (percent-encoded path and query), which is what HubRequest wants.
func hubServerBeginRequest(_ cls: UnsafeMutableRawPointer?, _ uri: UnsafePointer<CChar>?, _ connection: OpaquePointer?) -> UnsafeMutableRawPointer? {
    guard let cls, let connection else { return nil }
    let core = Unmanaged<HubServerCore>.fromOpaque(cls).takeUnretainedValue()
    let context = core.begin(target: uri.map { String(cString: $0) } ?? "/", connection: connection)
    return Unmanaged.passRetained(context).toOpaque()
}

/// The access handler: called with the headers, each piece of body, the end of the
/// body, and again after a parked connection is resumed.
func hubServerAccess(
    _ cls: UnsafeMutableRawPointer?,
    _ connection: OpaquePointer?,
    _ url: UnsafePointer<CChar>?,
    _ method: UnsafePointer<CChar>?,
    _ version: UnsafePointer<CChar>?,
    _ uploadData: UnsafePointer<CChar>?,
    _ uploadDataSize: UnsafeMutablePointer<Int>?,
    _ slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
) -> MHD_Result {
    guard let cls, let connection, let uploadDataSize, let slot else { return .NO }
    let core = Unmanaged<HubServerCore>.fromOpaque(cls).takeUnretainedValue()
    let context: RequestContext
    if let raw = slot.pointee {
        context = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
    } else {
        // The uri log always runs first; should it not, the (unescaped) url still serves.
        context = core.begin(target: url.map { String(cString: $0) } ?? "/", connection: connection)
        slot.pointee = Unmanaged.passRetained(context).toOpaque()
    }
    return core.access(context, method: method.map { String(cString: $0) } ?? "", uploadData: uploadData, uploadDataSize: uploadDataSize)
}

/// MHD_OPTION_NOTIFY_COMPLETED: the request is over; releases its context.
func hubServerCompleteRequest(
    _ cls: UnsafeMutableRawPointer?,
    _ connection: OpaquePointer?,
    _ slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
    _ termination: MHD_RequestTerminationCode
) {
    guard let cls, let slot, let raw = slot.pointee else { return }
    slot.pointee = nil
    let core = Unmanaged<HubServerCore>.fromOpaque(cls).takeUnretainedValue()
    let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
    core.complete(context, termination: termination)
}

/// libmicrohttpd's own error messages, to the log sink.
func hubServerWriteLog(_ cls: UnsafeMutableRawPointer?, _ message: UnsafePointer<CChar>?) {
    guard let cls, let message else { return }
    let core = Unmanaged<HubServerCore>.fromOpaque(cls).takeUnretainedValue()
    var text = String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
    // The address goes to libmicrohttpd as a socket address, so its own words name
    // port 0; the port meant is the configured one.
    text = text.replacingOccurrences(of: "to port 0.", with: "to port \(core.configuration.port).")
        .replacingOccurrences(of: "to port 0", with: "to port \(core.configuration.port)")
    core.configuration.log("libmicrohttpd: " + text)
}
