import Stele

/// The simulated network between devices (DESIGN §9): its conditions (delay,
/// loss, duplication), partitions, who can reach whom, and since when. It
/// decides what becomes of a frame put on it; the simulation's event queue
/// carries the frame to its delivery time, in one order with the timers and
/// anchor calls it shares a clock with. Every draw comes from the generator the
/// caller passes, in a fixed order, so a seed replays the same network.
public struct VirtualNetwork: Sendable {
    /// How the network behaves.
    public struct Conditions: Sendable, Equatable {
        public var delayMilliseconds: ClosedRange<Int64> = 5...40
        public var lossPercent: Double = 0
        public var duplicatePercent: Double = 0

        public init() {}

        /// Conditions checked: percentages within 0...100, delays not negative.
        /// - Throws: ``SimulationInputError`` naming what is out of range.
        public init(delayMilliseconds: ClosedRange<Int64> = 5...40, lossPercent: Double = 0, duplicatePercent: Double = 0) throws {
            for (name, percent) in [("loss", lossPercent), ("duplicate", duplicatePercent)] where !(0...100).contains(percent) {
                throw SimulationInputError(message: "network \(name) is a percentage from 0 to 100, not \(percent)")
            }
            guard delayMilliseconds.lowerBound >= 0 else {
                throw SimulationInputError(message: "a network delay cannot be negative (\(delayMilliseconds.lowerBound) ms)")
            }
            self.delayMilliseconds = delayMilliseconds
            self.lossPercent = lossPercent
            self.duplicatePercent = duplicatePercent
        }
    }

    /// What becomes of one frame.
    public enum Fate: Equatable, Sendable {
        /// The two devices cannot reach each other: it goes nowhere, uncounted.
        case unreachable
        /// Lost on the way.
        case lost
        /// Delivered after each of these delays (two: duplicated).
        case delivered(afterMilliseconds: [Int64])
    }

    public var conditions = Conditions()
    /// Groups of devices that can reach each other (`nil`: no partition). A
    /// device in no group reaches every device in no group.
    public private(set) var partition: [Set<DeviceID>]?
    /// Since when two devices have been able to reach each other without a
    /// break, by the pair (``pair(_:_:)``).
    private var reachableSince: [Pair: Int64] = [:]

    public init() {}

    /// Two devices, in either order.
    struct Pair: Hashable {
        let low: DeviceID
        let high: DeviceID
        init(_ first: DeviceID, _ second: DeviceID) {
            (low, high) = first < second ? (first, second) : (second, first)
        }
    }

    /// Whether two devices, both online, can exchange frames under the partition.
    public func canReach(_ a: DeviceID, _ b: DeviceID) -> Bool {
        guard let partition else { return true }
        return partition.contains { $0.contains(a) && $0.contains(b) } || !partition.contains { $0.contains(a) || $0.contains(b) }
    }

    /// Splits the devices into groups that cannot reach each other.
    mutating func split(into groups: [Set<DeviceID>]) {
        partition = groups
    }

    /// Ends partitions and restores perfect conditions.
    mutating func heal() {
        partition = nil
        conditions = Conditions()
    }

    /// The fate of a frame sent at this moment between two devices that can
    /// reach each other: loss drawn first, then a delay, then duplication and
    /// its own delay.
    func fate(using random: inout SplitMix64) -> Fate {
        if random.chance(conditions.lossPercent) { return .lost }
        var delays = [random.value(in: conditions.delayMilliseconds)]
        if random.chance(conditions.duplicatePercent) { delays.append(random.value(in: conditions.delayMilliseconds)) }
        return .delivered(afterMilliseconds: delays)
    }

    /// Notes, for every two of `devices`, since when they have reached each
    /// other: a pair that cannot now (one of them is not in `online`, or a
    /// partition splits them) is forgotten, one that can keeps its earlier time
    /// or starts at `now`.
    mutating func noteReachability(of devices: [DeviceID], online: Set<DeviceID>, at now: Int64) {
        var next: [Pair: Int64] = [:]
        for (index, first) in devices.enumerated() where online.contains(first) {
            for second in devices[(index + 1)...] where online.contains(second) && canReach(first, second) {
                let pair = Pair(first, second)
                next[pair] = reachableSince[pair] ?? now
            }
        }
        reachableSince = next
    }

    /// Since when two devices have reached each other without a break (`nil`: they cannot now).
    func reachable(_ first: DeviceID, _ second: DeviceID) -> Int64? {
        reachableSince[Pair(first, second)]
    }
}
