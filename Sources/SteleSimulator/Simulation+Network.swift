import Foundation
import Stele

/// The virtual network: who is online, partitions, and since when two devices
/// have reached each other.
extension Simulation {
    // MARK: - The network

    public func setOnline(_ name: String, _ online: Bool) {
        guard let device = device(name), device.isOnline != online else { return }
        device.isOnline = online
        noteReachability()
        record(online ? .online : .offline, device: device)
        if online { device.driver.nudge() }
    }

    /// Records, for every two devices of the own account, since when they have reached each other.
    func noteReachability() {
        let roster = devices
        var next: [String: Int64] = [:]
        for (index, first) in roster.enumerated() {
            for second in roster[(index + 1)...] where canReach(first.id, second.id) {
                let key = Self.pairKey(first.name, second.name)
                next[key] = reachableSince[key] ?? now
            }
        }
        reachableSince = next
    }

    static func pairKey(_ first: String, _ second: String) -> String {
        first < second ? "\(first)|\(second)" : "\(second)|\(first)"
    }

    /// Splits the online devices into groups that cannot reach each other.
    public func partition(_ groups: [[String]]) {
        defer { noteReachability() }
        partition = groups.map { Set($0.compactMap { device($0)?.id }) }
        count("partition")
        timeline.append(TimelineEntry(time: now, device: nil, kind: .partition))
    }

    /// Ends partitions and restores a perfect network.
    public func heal() {
        partition = nil
        noteReachability()
        network = Network()
        timeline.append(TimelineEntry(time: now, device: nil, kind: .heal))
        for device in devices where device.isOnline { device.driver.nudge() }
    }

    /// Whether two devices can exchange frames right now.
    public func canReach(_ a: DeviceID, _ b: DeviceID) -> Bool {
        guard let first = device(id: a), let second = device(id: b), first.isOnline, second.isOnline else { return false }
        guard let partition else { return true }
        return partition.contains { $0.contains(a) && $0.contains(b) } || !partition.contains { $0.contains(a) || $0.contains(b) }
    }

    func device(id: DeviceID) -> SimulatedDevice? { everyDevice.first { $0.id == id } }
}
