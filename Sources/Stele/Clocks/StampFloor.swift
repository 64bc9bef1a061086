/// A bound on everything a device has issued or vouched for: its own counter
/// (the entries it puts in version vectors) and its hybrid clock (the stamps of
/// its `lww`, `log`, `appendOnly` and message writes, and the clock it reports
/// when it acks a barrier round). Kept outside the replica file, in the device's
/// ``KeyStore`` (``StampFloorStore``), and raised *before* the replica issues
/// anything above it.
///
/// Why (beyond the seed; issue 14): a replica restored from a backup has its
/// counter and clock rolled back with it. Without a bound kept elsewhere, the
/// device would issue again dots and stamps it had already issued before the
/// restore: a second, different write under a dot a sibling holds (two versions
/// that never saw each other under one name), an `appendOnly` first write
/// replaced by a tie broken on value (002: a wrong clock must never erase a
/// record), and post-restore writes whose stamps sit below the clock its last
/// ack reported, which recovery then takes as seen by the fleet and drops
/// (DESIGN §6 "Recovery keeps post-restore edits"). A replica opened with a
/// floor starts its counter and clock at the floor, so nothing it issues after
/// a restore was issued before.
///
/// What remains: a replica and its key store rolled back *together* (both
/// restored from the same old backup) lose the floor too, and the device may
/// issue again what it issued after that backup, until its clock passes it.
public struct StampFloor: Sendable, Equatable, CustomStringConvertible {
    /// The device whose stamps these are.
    public let device: DeviceID
    /// No own counter above this was issued.
    public var counter: UInt64
    /// No hybrid timestamp above this was issued or observed.
    public var clock: HybridTimestamp

    public init(device: DeviceID, counter: UInt64, clock: HybridTimestamp) {
        self.device = device
        self.counter = counter
        self.clock = clock
    }

    /// Whether the floor bounds this counter and clock.
    public func covers(counter: UInt64, clock: HybridTimestamp) -> Bool {
        counter <= self.counter && clock <= self.clock
    }

    /// The pointwise maximum of two floors of one device.
    public func raised(to other: StampFloor) -> StampFloor {
        StampFloor(device: device, counter: max(counter, other.counter), clock: max(clock, other.clock))
    }

    public var description: String { "counter \(counter), clock \(clock)" }

    static let magic = Array("STELEFLR".utf8)
    static let format: UInt8 = 1

    /// Bytes: "STELEFLR", a format byte, the 32-byte device id, the counter and
    /// the clock as 8 bytes big-endian each.
    public var encoded: [UInt8] {
        var writer = ByteWriter(capacity: 57)
        writer.append(Self.magic)
        writer.append(Self.format)
        writer.append(device.bytes)
        writer.appendBigEndian(counter)
        writer.appendBigEndian(clock.rawValue)
        return writer.bytes
    }

    /// - Throws: ``KeyStoreError`` `damaged` when the bytes are not a floor this build wrote.
    public init(decoding bytes: [UInt8]) throws {
        var reader = ByteReader(bytes)
        do {
            guard Array(try reader.readBytes(Self.magic.count, "stamp floor magic")) == Self.magic else {
                throw KeyStoreError(.damaged, "the file does not start with STELEFLR: it is not a Stele stamp floor")
            }
            let format = try reader.readBytes(1, "stamp floor format").first ?? 0
            guard format == Self.format else { throw KeyStoreError(.damaged, "stamp floor format \(format) is not one this build reads") }
            device = try DeviceID(bytes: Array(reader.readBytes(DeviceID.byteCount, "stamp floor device")))
            counter = try reader.readBigEndianUInt64("stamp floor counter")
            clock = HybridTimestamp(rawValue: try reader.readBigEndianUInt64("stamp floor clock"))
            try reader.expectEnd("stamp floor")
        } catch let error as KeyStoreError {
            throw error
        } catch {
            throw KeyStoreError(.damaged, "the stamp floor is cut or malformed: \(error)")
        }
    }
}

/// Where a device keeps its ``StampFloor``: beside its key ring, outside the
/// replica file and out of the backups that restore it. ``FileKeyStore`` and
/// ``MemoryKeyStore`` are stores; give yours to ``Replica/Options/stampFloor``.
///
/// The replica raises the floor inside its write transaction, so two handles
/// (or two processes) writing one replica file raise it one at a time; they must
/// share one store.
public protocol StampFloorStore: AnyObject {
    /// The floor, or `nil` when none was ever saved.
    /// - Throws: ``KeyStoreError``.
    func loadStampFloor() throws -> StampFloor?
    /// Replaces the floor, durably, before returning.
    /// - Throws: ``KeyStoreError`` `unavailable`; the old floor is kept.
    func saveStampFloor(_ floor: StampFloor) throws
}
