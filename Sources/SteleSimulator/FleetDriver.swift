import Stele

/// Runs a fleet of ``FleetNode``s over an in-memory network on a virtual clock:
/// frames take a seeded random delay (so they reorder), may be lost or
/// duplicated, and never reach an offline device. Everything random comes from
/// one seed, so a run replays exactly. The simulator issue grows this into the
/// full simulator (crashes, restores, partitions, the scenario language).
public final class FleetDriver {
    /// How the network behaves.
    public struct Network: Sendable {
        /// Each frame's delay, drawn uniformly; a wide range reorders frames.
        public var delayMilliseconds: ClosedRange<Int64>
        /// Percent of frames dropped.
        public var lossPercent: Double
        /// Percent of frames delivered twice.
        public var duplicatePercent: Double

        public init(delayMilliseconds: ClosedRange<Int64> = 5...40, lossPercent: Double = 0, duplicatePercent: Double = 0) {
            self.delayMilliseconds = delayMilliseconds
            self.lossPercent = lossPercent
            self.duplicatePercent = duplicatePercent
        }
    }

    /// What the network carried.
    public struct Traffic: Sendable, Equatable {
        public var frames = 0
        public var bytes = 0
        public var dropped = 0
        public var duplicated = 0
    }

    private enum Event {
        case deliver(from: DeviceID, to: DeviceID, bytes: [UInt8])
        case timer(device: DeviceID, timer: FleetTimer)
    }

    public private(set) var now: Int64 = 0
    public var network: Network
    public private(set) var traffic = Traffic()
    /// Devices that neither send nor receive.
    public var offline: Set<DeviceID> = []
    /// Every event the nodes logged, with the time and the device.
    public private(set) var events: [(time: Int64, device: DeviceID, event: FleetEvent)] = []
    /// Called for every frame sent, before the network decides its fate (benchmarks count round trips here).
    public var onSend: ((_ from: DeviceID, _ to: DeviceID, _ bytes: [UInt8], _ time: Int64) -> Void)?

    private var nodes: [DeviceID: FleetNode] = [:]
    private var queue = EventQueue<Event>()
    /// The sequence number of each timer's latest arming: earlier armings are void.
    private var armed: [DeviceID: [FleetTimer: UInt64]] = [:]
    private var random: SplitMix

    public init(replicas: [Replica], network: Network = Network(), configuration: FleetConfiguration = FleetConfiguration(), seed: UInt64) {
        self.network = network
        random = SplitMix(seed: seed)
        let roster = Set(replicas.map(\.device))
        for (index, replica) in replicas.enumerated() {
            nodes[replica.device] = FleetNode(
                replica: replica, roster: roster, configuration: configuration, random: SplitMix(seed: seed &+ UInt64(index) &* 0x9E37_79B9))
        }
    }

    public var devices: [DeviceID] { nodes.keys.sorted() }

    public func node(_ device: DeviceID) -> FleetNode? { nodes[device] }

    /// Starts every node (they advertise and arm their timers).
    public func start() {
        for device in devices { deliver(.start, to: device) }
    }

    /// Tells a node its app wrote to its replica.
    public func localChange(on device: DeviceID) { deliver(.localChange, to: device) }

    /// Hands raw bytes to a node as if `from` had sent them (tests of bad input).
    public func inject(_ bytes: [UInt8], from: DeviceID, to: DeviceID) { deliver(.frame(from: from, bytes: bytes), to: to) }

    /// Runs every event due within the next `duration` of virtual time.
    public func advance(byMilliseconds duration: Int64) {
        let end = now + duration
        while let deadline = queue.nextDeadline, deadline <= end { step() }
        now = end
    }

    /// Runs until every pair of online devices has equal roots in every namespace
    /// and no frame is in flight, or until `limit` of virtual time has passed.
    /// - Returns: whether the fleet converged.
    @discardableResult
    public func runUntilConverged(limitMilliseconds limit: Int64 = 3_600_000) -> Bool {
        let end = now + limit
        while now <= end {
            if isQuiet && isConverged { return true }
            guard queue.nextDeadline != nil else { return isConverged }
            step()
        }
        return isQuiet && isConverged
    }

    /// No frame in flight and no session open.
    public var isQuiet: Bool {
        !queue.payloads.contains { if case .deliver = $0 { return true } else { return false } }
            && nodes.values.allSatisfy { $0.openSessions == 0 }
    }

    /// Every online device's roots equal (and generations equal).
    public var isConverged: Bool {
        let online = devices.filter { !offline.contains($0) }
        guard let first = online.first, let reference = try? nodes[first]?.advertisement() else { return true }
        return online.dropFirst().allSatisfy { (try? nodes[$0]?.advertisement()) == reference }
    }

    private func step() {
        guard let (deadline, sequence, event) = queue.pop() else { return }
        now = max(now, deadline)
        switch event {
        case let .deliver(from, to, bytes):
            guard !offline.contains(to) else { return }
            deliver(.frame(from: from, bytes: bytes), to: to)
        case let .timer(device, timer):
            guard armed[device]?[timer] == sequence else { return }
            armed[device]?[timer] = nil
            deliver(.timer(timer), to: device)
        }
    }

    private func deliver(_ input: FleetInput, to device: DeviceID) {
        guard var node = nodes[device] else { return }
        let outputs = node.handle(input)
        nodes[device] = node
        for output in outputs {
            switch output {
            case let .send(to, bytes):
                send(bytes, from: device, to: to)
            case let .arm(timer, delay):
                let sequence = queue.push(.timer(device: device, timer: timer), at: now + delay)
                armed[device, default: [:]][timer] = sequence
            case let .log(event):
                events.append((now, device, event))
            }
        }
    }

    private func send(_ bytes: [UInt8], from: DeviceID, to: DeviceID) {
        onSend?(from, to, bytes, now)
        guard !offline.contains(from) else { return }
        traffic.frames += 1
        traffic.bytes += bytes.count
        if random.percent() < network.lossPercent {
            traffic.dropped += 1
            return
        }
        queue.push(.deliver(from: from, to: to, bytes: bytes), at: now + random.value(in: network.delayMilliseconds))
        if random.percent() < network.duplicatePercent {
            traffic.duplicated += 1
            queue.push(.deliver(from: from, to: to, bytes: bytes), at: now + random.value(in: network.delayMilliseconds))
        }
    }
}

/// SplitMix64: the simulator's one source of randomness.
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func percent() -> Double { Double(next() >> 11) / Double(1 << 53) * 100 }

    mutating func value(in range: ClosedRange<Int64>) -> Int64 {
        range.lowerBound + Int64(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }
}
