import Dispatch

/// A value that lives on one serial `DispatchQueue`: it may be captured by any
/// closure, but read or changed only on that queue, which ``value`` checks
/// (`dispatchPrecondition`, debug builds).
///
/// `@unchecked Sendable`: the value is never touched off its queue (every
/// access goes through ``value``, which checks the queue), so no two threads
/// ever see it at once. This is the one place the runtime's non-`Sendable`
/// state (the driver, the replica, the outbox) crosses into `@Sendable`
/// completions, which hop onto the queue before they look inside.
struct QueueConfined<Value>: @unchecked Sendable {  // safe: the value is only touched on its serial queue, checked by `value` (above)
    let queue: DispatchQueue
    private let box: Box

    private final class Box {
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    init(_ value: Value, on queue: DispatchQueue) {
        self.queue = queue
        box = Box(value)
    }

    /// The value; only on ``queue``.
    var value: Value {
        get {
            dispatchPrecondition(condition: .onQueue(queue))
            return box.value
        }
        nonmutating set {
            dispatchPrecondition(condition: .onQueue(queue))
            box.value = newValue
        }
    }

    /// Runs `body` with the value on the queue, later.
    func async(_ body: @escaping (Value) -> Void) {
        let box = self.box
        let queue = self.queue
        let sendable = UncheckedHop { body(box.value) }
        queue.async { sendable.run() }
    }
}

/// A closure handed to the confining queue (``QueueConfined``); it runs there only.
private struct UncheckedHop: @unchecked Sendable {  // safe: built for one queue.async and run only on the confining queue
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}
