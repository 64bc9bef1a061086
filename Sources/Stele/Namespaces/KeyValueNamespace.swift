import Foundation

/// A namespace of values under string keys: `causal`, `lww`, `appendOnly`, `local`.
/// Values are bytes at the core; the `Codable` conveniences below sit on top.
public protocol KeyValueNamespace {
    /// The namespace's name.
    var name: String { get }
    /// The live value of `key`, never a tombstone.
    func get(_ key: String) throws -> [UInt8]?
    /// Writes bytes under `key`; the result depends on the kind.
    func putBytes(_ key: String, _ value: [UInt8]) throws
}

extension CausalNamespace {
    public func putBytes(_ key: String, _ value: [UInt8]) throws { try put(key, value) }
}

extension KeyValueNamespace {
    /// Encodes `value` as JSON (keys sorted, so equal values give equal bytes on
    /// every device and equal digests) and writes it.
    /// - Throws: `EncodingError` if the value cannot be encoded; then nothing is written.
    public func put<Value: Encodable>(_ key: String, encoding value: Value) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try putBytes(key, Array(try encoder.encode(value)))
    }

    /// Reads and decodes the value of `key`.
    /// - Returns: `nil` if the key is absent or deleted.
    /// - Throws: ``ReplicaError`` `notDecodable` if the stored bytes are not a `Value`.
    public func get<Value: Decodable>(_ key: String, as type: Value.Type) throws -> Value? {
        guard let bytes = try get(key) else { return nil }
        do {
            return try JSONDecoder().decode(Value.self, from: Data(bytes))
        } catch {
            throw ReplicaError(
                .notDecodable,
                "the value of \(key) in \(name) is not a valid \(Value.self); it was written with another type or by other code",
                cause: DescribedError(String(describing: error)))
        }
    }
}

