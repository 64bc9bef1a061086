import Dispatch

/// ``FleetScheduler`` on a serial `DispatchQueue`: the queue is the driver's
/// owner, timers fire on it, and time is the monotonic uptime clock (a user
/// setting the wall clock back moves nothing).
final class DispatchFleetScheduler: FleetScheduler {
    let queue: DispatchQueue
    private let origin = DispatchTime.now().uptimeNanoseconds

    init(queue: DispatchQueue) { self.queue = queue }

    var monotonicMilliseconds: Int64 { Int64((DispatchTime.now().uptimeNanoseconds - origin) / 1_000_000) }

    func schedule(afterMilliseconds milliseconds: Int64, _ action: @escaping () -> Void) -> any FleetScheduledTimer {
        let timer = QueueConfined(Timer(action), on: queue)
        queue.asyncAfter(deadline: .now() + .milliseconds(Int(max(0, min(milliseconds, Int64(Int32.max)))))) {
            timer.value.fire()
        }
        return timer.value
    }

    func assertOnOwner() { dispatchPrecondition(condition: .onQueue(queue)) }

    /// A timer that runs once unless cancelled first.
    final class Timer: FleetScheduledTimer {
        private var action: (() -> Void)?
        init(_ action: @escaping () -> Void) { self.action = action }
        func cancel() { action = nil }
        func fire() {
            let action = self.action
            self.action = nil
            action?()
        }
    }
}
