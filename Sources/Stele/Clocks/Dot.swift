/// One write's identity: the device that made it and the own counter it used.
///
/// Hybrid own counters (DESIGN §4) make a dot unique for the life of a device,
/// even across restores, which is what lets a version vector say precisely which
/// writes it has seen.
public struct Dot: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let device: DeviceID
    public let counter: UInt64

    public init(device: DeviceID, counter: UInt64) {
        self.device = device
        self.counter = counter
    }

    public static func < (lhs: Dot, rhs: Dot) -> Bool { (lhs.device, lhs.counter) < (rhs.device, rhs.counter) }

    public var description: String { "\(device):\(counter)" }
}

extension VersionVector {
    /// Whether the history this vector stands for includes the write `dot`.
    public func covers(_ dot: Dot) -> Bool { self[dot.device] >= dot.counter }
}
