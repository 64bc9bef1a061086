import Stele

/// FNV-1a, the simulator's one fast non-cryptographic hash: the event log's
/// fingerprint (``Simulation/eventLogHash``) and stable per-name seeds. The
/// same input hashes alike in every process, unlike `hashValue`.
struct EventLogHasher {
    private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    /// Adds one event: a tag, a virtual time, two devices and a number.
    mutating func add(_ tag: String, _ time: Int64, _ from: DeviceID, _ to: DeviceID, _ extra: Int) {
        add(bytes: Array(tag.utf8), lengthPrefixed: false)
        for word in [UInt64(bitPattern: time), from.stableSeed, to.stableSeed, UInt64(bitPattern: Int64(extra))] { add(word) }
    }

    /// Adds `bytes`, after their count unless `lengthPrefixed` is off.
    mutating func add(bytes: [UInt8], lengthPrefixed: Bool = true) {
        if lengthPrefixed { add(UInt64(bytes.count)) }
        for byte in bytes { mix(byte) }
    }

    private mutating func add(_ word: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) { mix(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
    }

    private mutating func mix(_ byte: UInt8) {
        value ^= UInt64(byte)
        value &*= 0x0000_0100_0000_01B3
    }
}

extension String {
    /// FNV-1a of the UTF-8 bytes: unlike `hashValue`, the same in every process.
    var hashValueStable: Int {
        var hasher = EventLogHasher()
        hasher.add(bytes: Array(utf8), lengthPrefixed: false)
        return Int(truncatingIfNeeded: hasher.value)
    }
}
