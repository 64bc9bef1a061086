import Foundation
import Stele
import SteleSimulator

/// `sim.throughput` (issue: the simulator): simulated operations per second of
/// wall time, with every fault kind on and 5 devices, against the baseline of
/// the same workload written straight into one replica through the oracle's
/// recording entry point (no network, no sync, no faults), in the same process. The ratio is the price of
/// simulating a fleet around each write; the CI sweep's length follows from it.
enum SimulatorBenchmark {
    static func run(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        var options = SimulationRun.Options()
        options.devices = 5
        options.steps = 300 / scale.divisor
        let runs = scale == .full ? 6 : 1

        var operations = 0
        let simulated = try Stopwatch.time {
            for seed in 0..<runs { operations += try SimulationRun.run(seed: UInt64(seed), options: options).operations }
        }

        var written = 0
        let baseline = try Stopwatch.time {
            for seed in 0..<runs {
                let replica = try Replica.create(
                    at: "\(directory)/sim-baseline-\(seed).stele", account: AccountID.generate(), device: try DeviceIdentity.generate().deviceID)
                for namespace in Workload.namespaces { try replica.declare(namespace.name, namespace.kind) }
                var random = SplitMix64(seed: UInt64(seed))
                var workload = Workload()
                let oracle = Oracle()
                for _ in 0..<options.steps {
                    if (try? oracle.perform(workload.next(&random), on: replica, deviceName: "baseline", time: 0)) != nil { written += 1 }
                }
            }
        }
        return [
            BenchmarkFigure(
                name: "sim.throughput", value: Double(operations) / simulated, unit: "simulated operations/s (all faults, 5 devices)",
                baseline: Double(written) / baseline)
        ]
    }
}
