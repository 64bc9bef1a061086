import Foundation
import Stele
import SteleSimulator

/// `sim.throughput` (issue: the simulator): simulated operations per second of
/// wall time, with every fault kind on and 5 devices, against the baseline of
/// the same workload's writes made straight on one replica (no simulator: no
/// oracle, network, sync or faults), in the same process. The ratio is the price
/// of simulating a fleet around each write; the CI sweep's length follows from it.
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
                for _ in 0..<options.steps {
                    // Counted as the simulation counts its operations: a refusal of the
                    // rules is one, a write aimed at a message not there is none.
                    do {
                        _ = try workload.next(&random).write(on: replica, author: "baseline")
                        written += 1
                    } catch let error as ReplicaError where WorkloadOperation.refusals.contains(error.code) {
                        if error.code != .messageMissing { written += 1 }
                    }
                }
            }
        }
        // The same runs on every core at once (`stele simulate --jobs`), against them one by one.
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var together = 0
        let parallel = try Stopwatch.time {
            let outcomes = try SimulationRun.run(seeds: Array(0..<UInt64(max(runs, 2 * cores))), options: options, jobs: cores)
            together = outcomes.reduce(0) { $0 + $1.operations }
        }
        return [
            BenchmarkFigure(
                name: "sim.throughput", value: Double(operations) / simulated, unit: "simulated operations/s (all faults, 5 devices)",
                // The simulator's cost at most 5 times the direct writes (issue: the simulator at ten times the speed).
                baseline: Double(written) / baseline, target: .ratioAtLeast(0.2)),
            BenchmarkFigure(
                name: "sim.throughput.jobs", value: Double(together) / parallel, unit: "simulated operations/s on \(cores) cores (--jobs), against one",
                baseline: Double(operations) / simulated),
        ]
    }
}
