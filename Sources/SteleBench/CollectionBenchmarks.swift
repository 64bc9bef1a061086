import Foundation
import Stele
import SteleSimulator

/// Tombstone collection (issue: the convergence barrier and the backup anchor).
enum CollectionBenchmarks {
    /// `gc.storage_returned` and `gc.storage_returned.bytes_per_deleted_key`: three
    /// devices hold 100,000 rows (100-byte values); one deletes 90,000 and the
    /// others take its tombstones; one barrier round collects them. The figure is
    /// the device's file on disk afterwards, against a store that only ever held
    /// the 10,000 survivors. The round is the replica's side of the barrier (ack,
    /// then commit: drop, give the pages back, checkpoint), which is all of it
    /// that touches storage; `gc.round.*` measures the protocol.
    static func storage(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let count = 100_000 / scale.divisor
        let keys = LocalWriteBenchmarks.keys(count)
        let doomed = LocalWriteBenchmarks.deleted(keys)
        let account = AccountID.generate()
        let devices = try (0..<3).map { index in
            try Replica.create(at: "\(directory)/gc-\(index).stele", account: account, device: try DeviceIdentity.generate().deviceID)
        }
        let notes = try devices.map { try $0.causal("notes") }
        for start in stride(from: 0, to: count, by: LocalWriteBenchmarks.batch) {
            try devices[0].write {
                for index in start..<min(start + LocalWriteBenchmarks.batch, count) { try notes[0].put(keys[index], LocalWriteBenchmarks.value(index)) }
            }
        }
        try devices[0].write { for key in doomed { try notes[0].delete(key) } }
        let records = try notes[0].records()
        for (replica, namespace) in zip(devices, notes).dropFirst() {
            for start in stride(from: 0, to: records.count, by: LocalWriteBenchmarks.batch) {
                try replica.write { for record in records[start..<min(start + LocalWriteBenchmarks.batch, records.count)] { try namespace.apply(record) } }
            }
        }
        let digest = try devices[0].contentDigest()
        var generator = SystemRandomNumberGenerator()
        let round = RoundNonce.generate(using: &generator)
        for replica in devices {
            guard try replica.contentDigest() == digest else { throw BenchmarkError("the three devices did not converge before the round") }
            try replica.recordAck(round: round, digest: digest, generation: 1)
        }
        for replica in devices {
            guard case .collected(let dropped) = try replica.commit(round: round, digest: digest, generation: 1), dropped == doomed.count else {
                throw BenchmarkError("the round did not collect the \(doomed.count) tombstones")
            }
        }
        let survivors = try Replica.create(at: "\(directory)/gc-survivors.stele", account: account, device: try DeviceIdentity.generate().deviceID)
        let survivorNotes = try survivors.causal("notes")
        try survivors.write { for (index, key) in keys.enumerated() where index % 10 == 0 { try survivorNotes.put(key, LocalWriteBenchmarks.value(index)) } }
        try survivors.checkpoint()
        let collected = try fileBytes(devices[0])
        let baseline = try fileBytes(survivors)
        return [
            BenchmarkFigure(name: "gc.storage_returned", value: Double(collected), unit: "bytes", baseline: Double(baseline)),
            BenchmarkFigure(
                name: "gc.storage_returned.bytes_per_deleted_key", value: Double(collected - baseline) / Double(doomed.count), unit: "bytes",
                target: .valueAtMost(1)),
        ]
    }

    /// The store's file and its write-ahead log on disk.
    static func fileBytes(_ replica: Replica) throws -> Int {
        let report = try replica.report()
        return report.fileBytes
    }

    /// `gc.round.3_devices` and `gc.round.10_devices` (virtual seconds, with the
    /// frames it took): a converged fleet holding tombstones, collection switched
    /// on, everyone reachable; from then until every device has dropped them,
    /// in the simulator on its default network (5–40 ms a frame).
    static func rounds(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        var figures: [BenchmarkFigure] = []
        for devices in [3, 10] {
            let simulation = try Simulation(seed: UInt64(devices))
            simulation.setCollection(false)
            try simulation.declare("notes", .causal)
            for index in 0..<devices { try simulation.addDevice("d\(index)") }
            for index in 0..<(200 / scale.divisor) {
                simulation.perform("d\(index % devices)", .put(namespace: "notes", key: "k\(index)", value: "v\(index)"))
            }
            guard simulation.sync() == nil else { throw BenchmarkError("the fleet did not converge before collection") }
            for index in stride(from: 0, to: 200 / scale.divisor, by: 2) {
                simulation.perform("d\((index / 2) % devices)", .delete(namespace: "notes", key: "k\(index)"))
            }
            guard simulation.sync() == nil, simulation.totalTombstones() > 0 else { throw BenchmarkError("the deletes did not converge") }
            let (start, frames) = (simulation.now, simulation.statistics.frames)
            simulation.setCollection(true)
            while simulation.totalTombstones() > 0 {
                guard simulation.now - start < 3_600_000 else { throw BenchmarkError("\(devices) devices did not collect within an hour") }
                simulation.advance(byMilliseconds: 100)
            }
            figures.append(BenchmarkFigure(name: "gc.round.\(devices)_devices", value: Double(simulation.now - start) / 1_000, unit: "virtual seconds"))
            figures.append(BenchmarkFigure(name: "gc.round.\(devices)_devices.frames", value: Double(simulation.statistics.frames - frames), unit: "frames"))
        }
        return figures
    }
}
