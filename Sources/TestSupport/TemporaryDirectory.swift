import Foundation

/// A fresh directory under the system temporary directory, removed with everything
/// in it when released.
public final class TemporaryDirectory {
    public let path: String

    public init(_ label: String = "stele") throws {
        let base = FileManager.default.temporaryDirectory.path
        path = "\(base)/\(label)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// A path inside the directory.
    public func file(_ name: String) -> String { "\(path)/\(name)" }
}
