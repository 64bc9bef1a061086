/// A map from device id to counter that orders histories causally (000 §4).
///
/// Absent devices count as zero and zero counters are never stored, so two
/// vectors are equal exactly when their entries are. Entries are kept sorted by
/// device id, which makes comparison and merge linear and the encoding canonical.
public struct VersionVector: Hashable, Sendable, CustomStringConvertible {
    /// One device's counter.
    public struct Entry: Hashable, Sendable {
        public let device: DeviceID
        public let counter: UInt64
    }

    /// How two vectors relate.
    public enum Ordering: Sendable, Equatable {
        /// Identical histories.
        case equal
        /// This vector has seen everything the other has, and more.
        case dominates
        /// The other vector has seen everything this one has, and more.
        case dominated
        /// Each has seen something the other has not.
        case concurrent
    }

    /// The largest counter a vector holds: counters are stored as SQLite integers.
    public static let maximumCounter = UInt64(Int64.max)

    /// The entries, sorted by device id, all with counters above zero.
    public private(set) var entries: [Entry]

    /// The empty vector: nothing seen.
    public init() { entries = [] }

    /// A vector from a dictionary; zero counters are dropped.
    public init(_ counters: [DeviceID: UInt64]) {
        entries = counters.filter { $0.value > 0 }.map { Entry(device: $0.key, counter: $0.value) }.sorted { $0.device < $1.device }
        checkInvariants()
    }

    /// Builds a vector from entries already sorted, unique and non-zero (decoders check first).
    init(sortedEntries: [Entry]) {
        entries = sortedEntries
        checkInvariants()
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The counter for `device`, zero when absent.
    public subscript(device: DeviceID) -> UInt64 {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].device < device { low = middle + 1 } else { high = middle }
        }
        return low < entries.count && entries[low].device == device ? entries[low].counter : 0
    }

    /// Raises `device`'s counter to `counter`.
    /// - Precondition: `counter` is not below the current one and not above ``maximumCounter``
    ///   (a vector never goes back in time).
    public mutating func advance(_ device: DeviceID, to counter: UInt64) {
        precondition(counter <= Self.maximumCounter, "counter \(counter) exceeds the maximum")
        if let index = entries.firstIndex(where: { $0.device >= device }) {
            if entries[index].device == device {
                precondition(counter >= entries[index].counter, "a version vector never goes back")
                entries[index] = Entry(device: device, counter: counter)
            } else if counter > 0 {
                entries.insert(Entry(device: device, counter: counter), at: index)
            }
        } else if counter > 0 {
            entries.append(Entry(device: device, counter: counter))
        }
        checkInvariants()
    }

    /// Compares two histories.
    /// - Complexity: O(n + m).
    public func compare(_ other: VersionVector) -> Ordering {
        var selfAhead = false
        var otherAhead = false
        var i = 0
        var j = 0
        while i < entries.count || j < other.entries.count {
            if j == other.entries.count || (i < entries.count && entries[i].device < other.entries[j].device) {
                selfAhead = true
                i += 1
            } else if i == entries.count || other.entries[j].device < entries[i].device {
                otherAhead = true
                j += 1
            } else {
                if entries[i].counter > other.entries[j].counter { selfAhead = true }
                if entries[i].counter < other.entries[j].counter { otherAhead = true }
                i += 1
                j += 1
            }
            if selfAhead && otherAhead { return .concurrent }
        }
        switch (selfAhead, otherAhead) {
        case (false, false): return .equal
        case (true, false): return .dominates
        case (false, true): return .dominated
        case (true, true): return .concurrent
        }
    }

    /// True when this vector has seen everything `other` has and more.
    public func dominates(_ other: VersionVector) -> Bool { compare(other) == .dominates }

    /// The pointwise maximum: the history that has seen both.
    /// - Complexity: O(n + m).
    public func merged(with other: VersionVector) -> VersionVector {
        var result: [Entry] = []
        result.reserveCapacity(max(entries.count, other.entries.count))
        var i = 0
        var j = 0
        while i < entries.count || j < other.entries.count {
            if j == other.entries.count || (i < entries.count && entries[i].device < other.entries[j].device) {
                result.append(entries[i])
                i += 1
            } else if i == entries.count || other.entries[j].device < entries[i].device {
                result.append(other.entries[j])
                j += 1
            } else {
                result.append(entries[i].counter >= other.entries[j].counter ? entries[i] : other.entries[j])
                i += 1
                j += 1
            }
        }
        return VersionVector(sortedEntries: result)
    }

    public var description: String {
        "[" + entries.map { "\($0.device):\($0.counter)" }.joined(separator: " ") + "]"
    }

    /// Sorted, unique, non-zero, within bounds. Checked in debug builds after every mutation.
    func checkInvariants() {
        #if DEBUG
        for index in entries.indices {
            // preconditions inside DEBUG: they run in scripts/test's optimized debug build.
            precondition(entries[index].counter > 0 && entries[index].counter <= Self.maximumCounter, "counter out of range")
            if index > 0 { precondition(entries[index - 1].device < entries[index].device, "entries out of order") }
        }
        #endif
    }
}
