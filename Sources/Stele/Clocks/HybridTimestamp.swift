/// A hybrid logical timestamp (physical milliseconds plus a logical counter)
/// for `lww` namespaces and for breaking ties between concurrent edits.
///
/// Packed into 64 bits: 48 bits of milliseconds (of which 47 are used, so the
/// packed value fits a SQLite integer: enough until the year 6429),
/// 16 bits of logical counter. Ordering the packed value orders by time, then counter.
public struct HybridTimestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The packed value.
    public let rawValue: UInt64

    public static let zero = HybridTimestamp(rawValue: 0)
    /// The largest physical time representable, in milliseconds.
    public static let maximumMilliseconds: Int64 = (1 << 47) - 1

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// - Precondition: `milliseconds` within 0...``maximumMilliseconds``.
    public init(milliseconds: Int64, logical: UInt16) {
        precondition((0...Self.maximumMilliseconds).contains(milliseconds), "timestamp \(milliseconds) out of range")
        rawValue = UInt64(milliseconds) << 16 | UInt64(logical)
    }

    public var milliseconds: Int64 { Int64(rawValue >> 16) }
    public var logical: UInt16 { UInt16(truncatingIfNeeded: rawValue) }

    public static func < (lhs: HybridTimestamp, rhs: HybridTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "\(milliseconds).\(logical)" }
}

/// Issues hybrid timestamps that never go backwards and always exceed every
/// timestamp this device has observed, whatever the wall clock says.
public struct HybridClock: Sendable {
    /// The last timestamp issued or observed.
    public private(set) var last: HybridTimestamp

    public init(last: HybridTimestamp = .zero) { self.last = last }

    /// The next timestamp: the wall clock if it has moved past ``last``, otherwise
    /// ``last`` with the logical counter bumped (carrying into the milliseconds).
    public mutating func next(wallClockMilliseconds wall: Int64) -> HybridTimestamp {
        let wall = min(max(wall, 0), HybridTimestamp.maximumMilliseconds)
        if wall > last.milliseconds {
            last = HybridTimestamp(milliseconds: wall, logical: 0)
        } else if last.logical == UInt16.max {
            last = HybridTimestamp(milliseconds: last.milliseconds + 1, logical: 0)
        } else {
            last = HybridTimestamp(milliseconds: last.milliseconds, logical: last.logical + 1)
        }
        return last
    }

    /// Records a timestamp seen on another device so later ones exceed it.
    public mutating func observe(_ remote: HybridTimestamp) {
        if remote > last { last = remote }
    }
}
