/// The sizes the store accepts. Writes beyond them throw ``ReplicaError/Code/limitExceeded``
/// (or ``ReplicaError/Code/invalidName``) and change nothing.
public enum Limits {
    /// The largest value, in bytes: 1 MiB. Larger payloads belong in files the value points to.
    public static let maximumValueBytes = 1 << 20
    /// The longest key or log group, in UTF-8 bytes.
    public static let maximumKeyBytes = 1_024
    /// The longest namespace name, in characters.
    public static let maximumNamespaceNameLength = 64

    static func checkKey(_ key: String, _ what: String = "key") throws {
        let count = key.utf8.count
        guard count > 0 else { throw ReplicaError(.invalidName, "a \(what) must not be empty") }
        guard count <= maximumKeyBytes else {
            throw ReplicaError(.limitExceeded, "a \(what) is at most \(maximumKeyBytes) UTF-8 bytes; this one has \(count)")
        }
    }

    static func checkValue(_ value: [UInt8]) throws {
        guard value.count <= maximumValueBytes else {
            throw ReplicaError(
                .limitExceeded,
                "a value is at most \(maximumValueBytes) bytes (1 MiB); this one has \(value.count). Store large payloads in files and keep their names here")
        }
    }

    /// Namespace names are bare words (SCENARIOS.md lexical rules): letters, digits, `-`, `_`, `.`.
    static func checkNamespaceName(_ name: String) throws {
        let allowed = name.unicodeScalars.allSatisfy { scalar in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "-" || scalar == "_" || scalar == ".")
        }
        guard !name.isEmpty, name.count <= maximumNamespaceNameLength, allowed else {
            throw ReplicaError(
                .invalidName,
                "namespace name \"\(name)\" is not allowed: use 1 to \(maximumNamespaceNameLength) letters, digits, '-', '_' or '.'")
        }
    }
}
