/// Bytes from outside that do not decode. Decoders never trap on input; they throw this.
public struct CodecError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of malformation was found.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String {
            case truncated, overlongVarint, valueOutOfRange, countTooLarge, trailingBytes, notCanonical, unknownVersion
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The input ended in the middle of a value.
        public static let truncated = Code(.truncated)
        /// A varint longer than its value needs, or longer than 10 bytes.
        public static let overlongVarint = Code(.overlongVarint)
        /// A number outside the range its field allows.
        public static let valueOutOfRange = Code(.valueOutOfRange)
        /// A count above the stated bound.
        public static let countTooLarge = Code(.countTooLarge)
        /// Bytes left over after a complete value.
        public static let trailingBytes = Code(.trailingBytes)
        /// A valid-looking encoding that is not the one canonical form (unsorted, duplicated, zero).
        public static let notCanonical = Code(.notCanonical)
        /// A format version this build does not know.
        public static let unknownVersion = Code(.unknownVersion)

        public var description: String { value.rawValue }
    }

    public let code: Code
    /// What was being decoded and what was wrong.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "cannot decode: \(message) (\(code))" }
}
