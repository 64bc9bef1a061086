import Stele

/// The sync workloads of `stele bench`, for `stele-hub bench` to run the same
/// ones through a real hub (issue 17): the stores, and the in-memory exchange
/// that is their baseline.
package enum FleetWorkloads {
    /// `sync.delete_batch`'s two stores: `count` rows of 100-byte values on both,
    /// then 90 % of them deleted on A and 1 % edited on B (half of those among
    /// A's deletes), with the devices' identities.
    package static func deleteBatch(directory: String, name: String, count: Int) throws -> (a: Replica, b: Replica, identities: (DeviceIdentity, DeviceIdentity)) {
        let (a, b, keys, identities) = try SyncBenchmarks.twinsWithIdentities(directory, name, count: count)
        let doomed = LocalWriteBenchmarks.deleted(keys)
        let notesA = try a.causal("notes")
        try a.write { for key in doomed { try notesA.delete(key) } }
        let notesB = try b.causal("notes")
        try b.write {
            for index in 0..<(count / 100) {
                let key = index % 2 == 0 ? doomed[(index * 7) % doomed.count] : keys[(index * 10) % count]
                try notesB.put(key, LocalWriteBenchmarks.value(2_000_000 + index))
            }
        }
        return (a, b, identities)
    }

    /// A store of `count` rows of 100-byte values, and a new device's empty store
    /// of the same account (`sync` of a device joining an account).
    package static func firstSync(directory: String, name: String, count: Int) throws -> (a: Replica, b: Replica, identities: (DeviceIdentity, DeviceIdentity)) {
        let account = AccountID.generate()
        let identities = (try DeviceIdentity.generate(), try DeviceIdentity.generate())
        let a = try Replica.create(at: "\(directory)/\(name)-a.stele", account: account, device: identities.0.deviceID)
        let b = try Replica.create(at: "\(directory)/\(name)-b.stele", account: account, device: identities.1.deviceID)
        let keys = LocalWriteBenchmarks.keys(count)
        let notes = try a.causal("notes")
        _ = try b.causal("notes")
        for start in stride(from: 0, to: count, by: 1_000) {
            try a.write { for index in start..<min(start + 1_000, count) { try notes.put(keys[index], LocalWriteBenchmarks.value(index)) } }
        }
        return (a, b, identities)
    }

    /// Seconds for A and B to converge over the in-memory transport, sealed, frames
    /// handed over at once (collection off): the baseline of a hub figure.
    /// - Throws: when they do not converge.
    package static func inMemorySeconds(from a: Replica, to b: Replica, identities: (DeviceIdentity, DeviceIdentity)) throws -> Double {
        let exchange = try SyncBenchmarks.exchange(from: a, to: b, seed: 17, identities: identities)
        guard try a.digest(of: "notes") == b.digest(of: "notes") else { throw BenchmarkError("the in-memory exchange did not converge") }
        return exchange.seconds
    }
}
