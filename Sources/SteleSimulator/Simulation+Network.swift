import Foundation
import Stele

/// The network as the simulation drives it (``VirtualNetwork``): devices going
/// online and offline, partitions, and who can reach whom.
extension Simulation {
    /// Takes a device off the network or back on (`offline D` / `online D`).
    /// - Throws: ``SimulationInputError`` for a device never added.
    public func setOnline(_ name: String, _ online: Bool) throws {
        let device = try existing(name)
        guard device.isOnline != online else { return }
        device.isOnline = online
        noteReachability()
        record(online ? .online : .offline, device: device)
        if online { device.driver.nudge() }
    }

    /// Records, for every two devices of the own account, since when they have reached each other.
    func noteReachability() {
        let roster = devices
        virtualNetwork.noteReachability(of: roster.map(\.id), online: Set(roster.filter(\.isOnline).map(\.id)), at: now)
    }

    /// Splits the online devices into groups that cannot reach each other.
    /// - Throws: ``SimulationInputError`` for a device never added; nothing changes then.
    public func partition(_ groups: [[String]]) throws {
        let ids = try groups.map { group in
            try Set(group.map { name in
                guard let device = device(name) else { throw SimulationInputError(message: "no device named \(name) to partition; add it first") }
                return device.id
            })
        }
        virtualNetwork.split(into: ids)
        noteReachability()
        count("partition")
        timeline.append(TimelineEntry(time: now, device: nil, kind: .partition))
    }

    /// Ends partitions and restores a perfect network.
    public func heal() {
        virtualNetwork.heal()
        noteReachability()
        timeline.append(TimelineEntry(time: now, device: nil, kind: .heal))
        for device in devices where device.isOnline { device.driver.nudge() }
    }

    /// Whether two devices can exchange frames right now: both online, and not split by a partition.
    public func canReach(_ a: DeviceID, _ b: DeviceID) -> Bool {
        guard let first = device(id: a), let second = device(id: b), first.isOnline, second.isOnline else { return false }
        return virtualNetwork.canReach(a, b)
    }

    func device(id: DeviceID) -> SimulatedDevice? { everyDevice.first { $0.id == id } }
}
