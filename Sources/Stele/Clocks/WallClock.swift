import Foundation
import Synchronization

/// The source of wall-clock time, injected wherever protocol logic needs time
/// so that the simulator can drive it (STYLE "Concurrency").
public protocol WallClock: Sendable {
    /// Milliseconds since the Unix epoch.
    func nowMilliseconds() -> Int64
}

/// The machine's clock.
public struct SystemWallClock: WallClock {
    public init() {}

    /// Read straight from `CLOCK_REALTIME` (a vDSO call): every write reads it,
    /// and going through `Date` cost 5% of `local.delete`.
    public func nowMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}

/// A clock that moves only when told to: for tests and the simulator.
public final class ManualWallClock: WallClock {
    private let milliseconds: Mutex<Int64>

    public init(milliseconds: Int64 = 1_700_000_000_000) {
        self.milliseconds = Mutex(milliseconds)
    }

    public func nowMilliseconds() -> Int64 { milliseconds.withLock { $0 } }

    /// Moves the clock forward (or back, with a negative amount: a skewed or reset clock).
    public func advance(byMilliseconds amount: Int64) { milliseconds.withLock { $0 += amount } }

    /// Sets the clock to an absolute time.
    public func set(milliseconds value: Int64) { milliseconds.withLock { $0 = value } }
}
