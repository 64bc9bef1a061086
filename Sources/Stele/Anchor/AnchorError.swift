/// An anchor that cannot be used. Each message says what happened and what to
/// do; none of these changes the device's generation (a failed recovery leaves
/// it alone, 001 §7).
public struct AnchorError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The substrate cannot be reached or written (offline, disk full, no permission).
        case unavailable
        /// The file is not an anchor, or its header is cut or malformed.
        case damaged
        /// Written by a newer Stele.
        case newerFormat
        /// The anchor belongs to another account.
        case accountMismatch
        /// The body does not open with this key: another key, or bytes changed.
        case notAuthentic
        /// A write was refused: the substrate holds another round's anchor of the
        /// same generation or a higher one (``AnchorHeader/mayReplace(_:)``). The
        /// stored anchor is left as it was; read it and catch up with it.
        case superseded
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "anchor \(code.rawValue): \(message)" }
}
