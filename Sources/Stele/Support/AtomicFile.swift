import Foundation

/// Replaces a file as one step, for the small files Stele keeps beside a
/// replica (the anchor, the key ring): the bytes go to a temporary file in the
/// same directory, are flushed to disk, and are renamed over the old file, so a
/// reader (or a crash) sees the old file or the new one, never a mix.
enum AtomicFile {
    /// - Parameter permissions: POSIX mode for the new file (`nil`: the default).
    /// - Throws: ``AtomicFileError`` saying which step failed; the old file is then unchanged.
    static func replace(_ path: String, with bytes: [UInt8], permissions: Int? = nil) throws(AtomicFileError) {
        let temporary = "\(path).\(UInt64.random(in: 0...UInt64.max)).tmp"
        do {
            let attributes: [FileAttributeKey: Any]? = permissions.map { [.posixPermissions: $0] }
            guard FileManager.default.createFile(atPath: temporary, contents: nil, attributes: attributes) else {
                throw AtomicFileError(message: "cannot create \(temporary)")
            }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
            defer { try? handle.close() }
            try handle.write(contentsOf: bytes)
            try handle.synchronize()
            guard rename(temporary, path) == 0 else {
                throw AtomicFileError(message: "cannot move the new file into place at \(path): \(String(cString: strerror(errno)))")
            }
            // The rename itself is durable only once the directory is flushed: until
            // then a power cut may bring the old file back.
            let directory = open((path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent, O_RDONLY)
            if directory >= 0 {
                defer { close(directory) }
                guard fsync(directory) == 0 else {
                    throw AtomicFileError(message: "cannot flush the directory of \(path): \(String(cString: strerror(errno)))")
                }
            }
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            if let error = error as? AtomicFileError { throw error }
            throw AtomicFileError(message: error.localizedDescription)
        }
    }
}

/// Why ``AtomicFile/replace(_:with:permissions:)`` failed.
struct AtomicFileError: Error {
    let message: String
}
