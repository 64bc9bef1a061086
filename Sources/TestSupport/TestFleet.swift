import Foundation
import Stele

/// Several in-memory replicas of one account, each with its own manual clock:
/// enough to exercise merge rules by applying one device's records to another.
public final class TestFleet {
    public let account: AccountID
    public let devices: [DeviceID]
    public let clocks: [ManualWallClock]
    public let replicas: [Replica]

    /// - Parameter count: devices, ordered by id (replica 0 has the lowest id).
    public init(count: Int, seed: UInt64 = 1) throws {
        account = Fixtures.account(seed)
        devices = Fixtures.devices(count, seed: seed)
        clocks = devices.map { _ in ManualWallClock() }
        replicas = try zip(devices, clocks).map { pair in
            try Fixtures.memoryReplica(account: Fixtures.account(seed), device: pair.0, clock: pair.1)
        }
    }

    public subscript(index: Int) -> Replica { replicas[index] }
}

/// The bytes of a file, to prove an operation left it untouched.
public func fileBytes(_ path: String) -> Data? {
    FileManager.default.contents(atPath: path)
}
