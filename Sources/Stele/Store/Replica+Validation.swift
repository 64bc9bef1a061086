import Foundation
import SteleSQL

/// What the `replica` table says about the store.
struct StoredIdentity {
    var account: AccountID
    var device: DeviceID
    var generation: UInt64
    var ownCounter: UInt64
    var clock: HybridTimestamp
    var tombstoneSequence: UInt64
}

extension Replica {
    static func fileHasContent(_ path: String) -> Bool {
        guard path != ":memory:" else { return false }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
        return (size ?? 0) > 0
    }

    static func removeStoreFiles(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// Reads and checks the store's header and identity row using reads only, so
    /// a file that turns out not to be ours is left exactly as it was.
    static func readIdentity(_ connection: Connection, path: String, readOnly: Bool) throws -> StoredIdentity {
        let applicationID: Int64
        do {
            applicationID = try connection.scalarInt("PRAGMA application_id") ?? 0
        } catch let error as SQLiteError {
            throw classify(error, path: path)
        }
        guard applicationID == ReplicaSchema.applicationID else {
            let detail = applicationID == 0 ? "a SQLite database of another application" : String(format: "a database with application_id 0x%08x", applicationID)
            throw ReplicaError(.notAStore, "\(path) is not a Stele store (\(detail)); point at a store made by Stele")
        }
        let version: Int
        do {
            version = try Migrator.version(of: connection)
        } catch let error as SQLiteError {
            throw classify(error, path: path)
        }
        let latest = ReplicaSchema.migrator.latestVersion
        if version > latest {
            throw ReplicaError(
                .newerFormat, "the store at \(path) has format \(version), newer than the \(latest) this build knows; upgrade Stele to open it")
        }
        if readOnly && version < latest {
            throw ReplicaError(
                .readOnly, "the store at \(path) has the older format \(version); open it once read-write to upgrade it to \(latest)")
        }
        do {
            // A store of format 1 is migrated after this read: it has no sequence yet.
            let sequence = version >= 2 ? "tombstone_seq" : "0"
            let row = try connection.queryFirst("SELECT account, device, generation, own_counter, clock, \(sequence) FROM replica WHERE id = 1") { row in
                (row.blob(0), row.blob(1), row.int64(2), row.int64(3), row.int64(4), row.int64(5))
            }
            guard let row else {
                throw ReplicaError(.corrupt, "the store at \(path) has no identity row; the file is damaged. Keep it for diagnosis and restore from a backup")
            }
            return StoredIdentity(
                account: try AccountID(bytes: row.0), device: try DeviceID(bytes: row.1),
                generation: UInt64(row.2), ownCounter: UInt64(row.3), clock: HybridTimestamp(rawValue: UInt64(row.4)),
                tombstoneSequence: UInt64(row.5))
        } catch let error as SQLiteError {
            throw classify(error, path: path)
        } catch let error as CodecError {
            throw ReplicaError(.corrupt, "the store at \(path) has a malformed identity row; the file is damaged", cause: error)
        }
    }

    private static func classify(_ error: SQLiteError, path: String) -> any Error {
        switch error.code.primary {
        case .notADatabase:
            ReplicaError(.notAStore, "\(path) is not a Stele store (not a SQLite database at all); point at a store made by Stele", cause: error)
        case .corrupt:
            ReplicaError(.corrupt, "the store at \(path) is damaged (SQLite reports corruption); keep it for diagnosis and restore from a backup", cause: error)
        case .error:
            // A missing table: SQLite but not laid out as a Stele store.
            ReplicaError(.corrupt, "the store at \(path) is missing part of its schema; the file is damaged", cause: error)
        case .cantOpen where !Connection.canMakeFilesBeside(path):
            // The file opened, but the first read needs the `-wal` and `-shm` files
            // SQLite keeps beside a WAL database, and the folder takes no new file.
            ReplicaError(
                .folderNotWritable,
                "cannot open the store at \(path) to write: its folder \(Connection.folder(of: path)) is not writable, and SQLite keeps the store's -wal and -shm files beside it; make the folder writable, or copy the store to a folder that is",
                cause: error)
        default:
            // Busy, I/O, permissions: not a verdict on the file; report SQLite's own error.
            error
        }
    }
}
