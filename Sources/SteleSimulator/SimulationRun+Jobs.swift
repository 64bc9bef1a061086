import Dispatch
import Synchronization

extension SimulationRun {
    /// Runs one seed after another on each of up to `jobs` threads at once. Each
    /// run is a world of its own (its stores, clocks, network and oracle), so the
    /// outcomes are those of the same seeds run one by one, in the order of
    /// `seeds`; only the wall time differs.
    /// - Parameter progress: called after each run with how many have ended and
    ///   how many of them failed, one call at a time (under the runner's lock).
    /// - Throws: the first error a run threw (no further runs start).
    public static func run(
        seeds: [UInt64], options: Options, jobs: Int, progress: @escaping @Sendable (_ done: Int, _ failed: Int) -> Void = { _, _ in }
    ) throws -> [Outcome] {
        try run(seeds: seeds, jobs: jobs, progress: progress) { try run(seed: $0, options: options) }
    }

    /// The same with what each seed runs given (the tests' seam: a run that throws).
    static func run(
        seeds: [UInt64], jobs: Int, progress: @escaping @Sendable (_ done: Int, _ failed: Int) -> Void, _ body: @Sendable (UInt64) throws -> Outcome
    ) throws -> [Outcome] {
        let shared = Jobs(count: seeds.count)
        DispatchQueue.concurrentPerform(iterations: max(1, min(jobs, seeds.count))) { _ in
            while let index = shared.take() {
                do {
                    shared.finish(index, with: try body(seeds[index]), progress: progress)
                } catch {
                    shared.fail(error)
                    return
                }
            }
        }
        return try shared.outcomes()
    }
}

/// What the threads of ``SimulationRun/run(seeds:options:jobs:progress:)`` share.
private final class Jobs: Sendable {
    private struct State {
        var next = 0
        var done = 0
        var failed = 0
        var outcomes: [SimulationRun.Outcome?]
        var error: (any Error)?
    }

    private let state: Mutex<State>

    init(count: Int) {
        state = Mutex(State(outcomes: Array(repeating: nil, count: count)))
    }

    /// The next run to start, or `nil` when none is left or one failed.
    func take() -> Int? {
        state.withLock { state in
            guard state.error == nil, state.next < state.outcomes.count else { return nil }
            defer { state.next += 1 }
            return state.next
        }
    }

    func finish(_ index: Int, with outcome: SimulationRun.Outcome, progress: @Sendable (Int, Int) -> Void) {
        state.withLock { state in
            state.outcomes[index] = outcome
            state.done += 1
            if outcome.failed { state.failed += 1 }
            progress(state.done, state.failed)
        }
    }

    func fail(_ error: any Error) {
        state.withLock { state in
            if state.error == nil { state.error = error }
        }
    }

    func outcomes() throws -> [SimulationRun.Outcome] {
        try state.withLock { state in
            if let error = state.error { throw error }
            return state.outcomes.compactMap { $0 }
        }
    }
}
