import Dispatch

/// Monotonic wall time for benchmarks (never used by protocol logic).
package struct Stopwatch {
    private let start = DispatchTime.now().uptimeNanoseconds

    package init() {}

    package var elapsedSeconds: Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }

    /// Runs `body` and returns its duration in seconds.
    package static func time(_ body: () throws -> Void) rethrows -> Double {
        let watch = Stopwatch()
        try body()
        return watch.elapsedSeconds
    }
}
