import Foundation

/// Where the anchor lives: a substrate a restore of the device does not roll
/// back (001 §7). The barrier writes it before any tombstone is dropped (001 §8);
/// a device compares its generation with the header's (``AnchorDecision``) and
/// recovers from the body.
public protocol AnchorStore: AnyObject {
    /// The anchor's cleartext header, or `nil` when none has been written.
    /// - Throws: ``AnchorError`` `unavailable`, `damaged`, `newerFormat`, `accountMismatch`.
    func header(of account: AccountID) throws -> AnchorHeader?

    /// The whole anchor, opened with `key`, or `nil` when none has been written.
    /// - Throws: ``AnchorError``, `notAuthentic` included.
    func read(_ account: AccountID, key: AccountKey) throws -> Anchor?

    /// Replaces the anchor as one step: a reader sees the old one or the new one, never a mix.
    /// A generation is written by one round only (``AnchorHeader/mayReplace(_:)``).
    /// - Throws: ``AnchorError`` `unavailable`, or `superseded` when another round's
    ///   anchor holds this generation or a higher one; the old anchor is then left as it was.
    func write(_ anchor: Anchor, key: AccountKey) throws
}

/// An anchor kept as one file per account in a directory (a cloud-synced folder
/// in an app; any directory in tests). Writes go to a temporary file that is
/// flushed and then renamed over the old one.
public final class DirectoryAnchorStore: AnchorStore {
    public let directory: String

    public init(directory: String) {
        self.directory = directory
    }

    public func path(of account: AccountID) -> String { "\(directory)/\(account).stele-anchor" }

    public func header(of account: AccountID) throws -> AnchorHeader? {
        guard let bytes = try contents(account) else { return nil }
        return try checked(AnchorFile.header(bytes), account)
    }

    public func read(_ account: AccountID, key: AccountKey) throws -> Anchor? {
        guard let bytes = try contents(account) else { return nil }
        _ = try checked(AnchorFile.header(bytes), account)
        return try AnchorFile.decode(bytes, key: key)
    }

    /// Checks the stored header, then renames over it: one step for a reader, though
    /// two writers in two processes may race between the check and the rename (a
    /// cloud-synced folder offers nothing stronger; the hub's anchor object does).
    public func write(_ anchor: Anchor, key: AccountKey) throws {
        // An anchor that does not parse (or is over the bound) is no round's: a write repairs it.
        // One that cannot be read at all is not written over: it may be another round's.
        let stored: AnchorHeader?
        do {
            stored = try contents(anchor.header.account).flatMap { bytes in try? AnchorFile.header(bytes) }
        } catch let error as AnchorError where error.code == .damaged {
            stored = nil
        } catch {
            throw AnchorError(.unavailable, "cannot read the anchor in \(directory) to check what it holds: \(error); it is left as it was")
        }
        try AnchorFile.checkReplaces(stored, with: anchor.header)
        let bytes = AnchorFile.encode(anchor, key: key)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw AnchorError(.unavailable, "cannot create \(directory): \(error.localizedDescription)")
        }
        do {
            try AtomicFile.replace(path(of: anchor.header.account), with: bytes)
        } catch {
            throw AnchorError(.unavailable, "cannot write the anchor in \(directory): \(error.message); the previous anchor is unchanged")
        }
    }

    private func contents(_ account: AccountID) throws -> [UInt8]? {
        let path = path(of: account)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let attributes = try? FileManager.default.attributesOfItem(atPath: path)
        if let size = attributes?[.size] as? Int, size > AnchorFile.maximumCount {
            throw AnchorError(.damaged, "the anchor at \(path) is \(size) bytes, over the \(AnchorFile.maximumCount)-byte bound; it is not an anchor Stele wrote")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw AnchorError(.unavailable, "cannot read the anchor at \(path)")
        }
        return [UInt8](data)
    }

    private func checked(_ header: AnchorHeader, _ account: AccountID) throws -> AnchorHeader {
        guard header.account == account else {
            throw AnchorError(.accountMismatch, "the anchor at \(path(of: account)) belongs to account \(header.account), not \(account); remove or move it")
        }
        return header
    }
}

/// An anchor kept in memory, sealed exactly as a file would hold it: for tests
/// and the simulator (which makes it unreachable or slow on demand).
public final class MemoryAnchorStore: AnchorStore {
    private var files: [AccountID: [UInt8]] = [:]

    public init() {}

    /// The sealed bytes held for `account`, as a substrate would store them.
    public func bytes(of account: AccountID) -> [UInt8]? { files[account] }

    /// Replaces the sealed bytes held for `account` (a driver's write, already sealed).
    public func replace(_ sealed: [UInt8], of account: AccountID) { files[account] = sealed }

    /// Forgets `account`'s anchor (a substrate put back from before it had one).
    public func remove(of account: AccountID) { files[account] = nil }

    public func header(of account: AccountID) throws -> AnchorHeader? {
        guard let bytes = files[account] else { return nil }
        return try AnchorFile.header(bytes)
    }

    public func read(_ account: AccountID, key: AccountKey) throws -> Anchor? {
        guard let bytes = files[account] else { return nil }
        return try AnchorFile.decode(bytes, key: key)
    }

    public func write(_ anchor: Anchor, key: AccountKey) throws {
        try land(AnchorFile.encode(anchor, key: key), of: anchor.header.account)
    }

    /// Replaces the sealed bytes held for `account` unless another round's anchor
    /// holds their generation or a higher one (``AnchorHeader/mayReplace(_:)``), as
    /// every substrate does at the moment a write lands.
    /// - Throws: ``AnchorError`` `damaged` (the bytes are not an anchor), `superseded`.
    public func land(_ sealed: [UInt8], of account: AccountID) throws {
        try AnchorFile.checkReplaces(files[account].flatMap { try? AnchorFile.header($0) }, with: AnchorFile.header(sealed))
        files[account] = sealed
    }
}

extension MemoryAnchorStore: AnchorSubstrate {
    /// Lands (or is refused) at once, before returning.
    public func writeAnchor(_ sealed: [UInt8], of account: AccountID, completion: @escaping (Result<Void, AnchorError>) -> Void) {
        do {
            try land(sealed, of: account)
            completion(.success(()))
        } catch let error as AnchorError {
            completion(.failure(error))
        } catch {
            completion(.failure(AnchorError(.damaged, "\(error)")))
        }
    }

    /// Answers at once, before returning.
    public func readAnchor(of account: AccountID, completion: @escaping (Result<[UInt8]?, AnchorError>) -> Void) {
        completion(.success(bytes(of: account)))
    }
}
