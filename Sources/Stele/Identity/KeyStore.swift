import Foundation

/// What a device keeps outside its replica file (001 §7: the BackupKey rides the
/// keychain, not the backup): its X25519 private key, the account keys it has
/// received, and the roster it last verified (so a directory cannot later serve
/// it an older or foreign log, ``Roster/adopting(_:)``). Restoring the replica
/// from a backup therefore loses none of them, and a stolen replica backup holds
/// no key at all.
public struct KeyRing: Sendable, Equatable {
    public let identity: DeviceIdentity
    /// Account keys by epoch (numbered from 1; a revoke rotates to the next).
    public private(set) var accountKeys: [UInt32: AccountKey]
    /// The roster this device last verified and adopted.
    public var roster: Roster?

    public init(identity: DeviceIdentity, accountKeys: [UInt32: AccountKey] = [:], roster: Roster? = nil) {
        self.identity = identity
        self.accountKeys = accountKeys
        self.roster = roster
    }

    /// The keys oldest first, as ``FleetInput/accountKeysChanged(_:)`` carries them.
    public var orderedAccountKeys: [AccountKey] { accountKeys.sorted { $0.key < $1.key }.map(\.value) }
    /// The newest epoch held, if any.
    public var newestEpoch: UInt32? { accountKeys.keys.max() }

    public mutating func insert(_ key: AccountKey, epoch: UInt32) { accountKeys[epoch] = key }

    static let magic = Array("STELEKEY".utf8)
    static let format: UInt8 = 1

    /// Bytes: "STELEKEY", a format byte, the 32-byte private key, the number of
    /// account keys, then per key its epoch (varint) and its 32 bytes, then the
    /// roster's length (0: none) and its bytes (``Roster/encoded``).
    public var encoded: [UInt8] {
        var writer = ByteWriter(capacity: 48 + accountKeys.count * 40)
        writer.append(Self.magic)
        writer.append(Self.format)
        writer.append(identity.privateKey)
        writer.appendVarint(UInt64(accountKeys.count))
        for (epoch, key) in accountKeys.sorted(by: { $0.key < $1.key }) {
            writer.appendVarint(UInt64(epoch))
            writer.append(key.bytes)
        }
        let roster = roster?.encoded ?? []
        writer.appendVarint(UInt64(roster.count))
        writer.append(roster)
        return writer.bytes
    }

    /// - Throws: ``KeyStoreError`` when the bytes are not a key ring this build wrote.
    public init(decoding bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        do {
            guard Array(try reader.readBytes(Self.magic.count, "key ring magic")) == Self.magic else {
                throw KeyStoreError(.damaged, "the file does not start with STELEKEY: it is not a Stele key ring")
            }
            let format = try reader.readBytes(1, "key ring format").first ?? 0
            guard format == Self.format else { throw KeyStoreError(.damaged, "key ring format \(format) is not one this build reads") }
            identity = try DeviceIdentity(privateKey: Array(try reader.readBytes(32, "private key")))
            let count = try reader.readVarint("account key count")
            guard count <= 1_000_000 else { throw KeyStoreError(.damaged, "the key ring claims \(count) account keys") }
            var keys: [UInt32: AccountKey] = [:]
            for _ in 0..<count {
                let epoch = try reader.readVarint("account key epoch")
                guard epoch <= UInt64(UInt32.max) else { throw KeyStoreError(.damaged, "account key epoch \(epoch) is out of range") }
                keys[UInt32(epoch)] = try AccountKey(bytes: try reader.readBytes(AccountKey.byteCount, "account key"))
            }
            let rosterCount = try reader.readVarint("roster length")
            guard rosterCount <= UInt64(reader.remaining) else { throw KeyStoreError(.damaged, "the key ring's roster is cut") }
            roster = rosterCount == 0 ? nil : try Roster(decoding: Array(try reader.readBytes(Int(rosterCount), "roster")))
            try reader.expectEnd("key ring")
            accountKeys = keys
        } catch let error as KeyStoreError {
            throw error
        } catch {
            throw KeyStoreError(.damaged, "the key ring is cut or malformed: \(error)")
        }
    }
}

/// Where a device's ``KeyRing`` lives: the platform keychain in an app; a file
/// (``FileKeyStore``) or memory (``MemoryKeyStore``) here. It keeps the device's
/// ``StampFloor`` too (``StampFloorStore``): give the store to the replica's
/// ``Replica/Options/stampFloor`` so a restored replica never issues a stamp twice.
public protocol KeyStore: StampFloorStore {
    /// The ring, or `nil` when this device has none yet (a new device).
    /// - Throws: ``KeyStoreError``.
    func load() throws -> KeyRing?
    /// Replaces the ring as one step. - Throws: ``KeyStoreError`` `unavailable`; the old ring is kept.
    func save(_ ring: KeyRing) throws
}

/// A key ring in one file, readable by its owner only (mode 0600), replaced
/// whole through a temporary file and a rename. Keep it out of the directory
/// whose backups restore the replica. The stamp floor lives beside it, in
/// ``floorPath``: it changes far more often than the ring (about once a second
/// while the device writes), and apart the two never race.
public final class FileKeyStore: KeyStore {
    public let path: String
    /// Where the stamp floor is kept: the ring's path with `-floor` appended.
    public var floorPath: String { path + "-floor" }

    public init(path: String) { self.path = path }

    public func loadStampFloor() throws -> StampFloor? {
        guard FileManager.default.fileExists(atPath: floorPath) else { return nil }
        guard let data = FileManager.default.contents(atPath: floorPath) else {
            throw KeyStoreError(.unavailable, "cannot read the stamp floor at \(floorPath); check its permissions")
        }
        do {
            return try StampFloor(decoding: [UInt8](data))
        } catch let error as KeyStoreError {
            throw KeyStoreError(
                error.code,
                "\(floorPath): \(error.message); move it aside to go on (the device may then reuse stamps it issued since its replica's last backup)")
        }
    }

    public func saveStampFloor(_ floor: StampFloor) throws {
        do {
            try AtomicFile.replace(floorPath, with: floor.encoded, permissions: 0o600)
        } catch {
            throw KeyStoreError(.unavailable, "cannot write the stamp floor at \(floorPath): \(error.message); the previous one is unchanged")
        }
    }

    public func load() throws -> KeyRing? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw KeyStoreError(.unavailable, "cannot read the key ring at \(path); check its permissions")
        }
        do {
            return try KeyRing(decoding: [UInt8](data))
        } catch let error as KeyStoreError {
            throw KeyStoreError(error.code, "\(path): \(error.message); restore it from the keychain backup, or join this device again as a new one")
        }
    }

    public func save(_ ring: KeyRing) throws {
        do {
            try AtomicFile.replace(path, with: ring.encoded, permissions: 0o600)
        } catch {
            throw KeyStoreError(.unavailable, "cannot write the key ring at \(path): \(error.message); the previous one is unchanged")
        }
    }
}

/// A key ring in memory: for tests and the simulator, where it survives the
/// replica's restores as a keychain would.
public final class MemoryKeyStore: KeyStore {
    private var ring: KeyRing?
    private var floor: StampFloor?

    public init(_ ring: KeyRing? = nil) { self.ring = ring }

    public func load() throws -> KeyRing? { ring }
    public func save(_ ring: KeyRing) throws { self.ring = ring }
    public func loadStampFloor() throws -> StampFloor? { floor }
    public func saveStampFloor(_ floor: StampFloor) throws { self.floor = floor }

    /// A copy of what the store holds now (the simulator backs up a keychain with it).
    public func copy() -> MemoryKeyStore {
        let copy = MemoryKeyStore(ring)
        copy.floor = floor
        return copy
    }

    /// Replaces what the store holds with another store's (a keychain restored from a backup).
    public func replaceContents(with other: MemoryKeyStore) {
        ring = other.ring
        floor = other.floor
    }
}

/// A key ring that cannot be used.
public struct KeyStoreError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The store cannot be read or written.
        case unavailable
        /// The bytes are not a key ring this build wrote.
        case damaged
    }

    public let code: Code
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "key store \(code.rawValue): \(message)" }
}
