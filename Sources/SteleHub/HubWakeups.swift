import Synchronization

/// Who waits on which key: a parked long poll subscribes, a write that lands
/// for the key (in this process, or through another hub process's
/// notification) wakes every subscriber. Callbacks run on the waking thread and
/// must only hand the work off (resume a connection).
public final class HubWakeups: Sendable {
    /// A subscription, for ``cancel(_:)``.
    public struct Ticket: Hashable, Sendable {
        let key: String
        let number: UInt64
    }

    private struct State {
        var next: UInt64 = 0
        var waiters: [String: [UInt64: @Sendable () -> Void]] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// Calls `wake` once, the first time `key` is woken after this call.
    public func subscribe(_ key: String, _ wake: @escaping @Sendable () -> Void) -> Ticket {
        state.withLock { state in
            state.next += 1
            state.waiters[key, default: [:]][state.next] = wake
            return Ticket(key: key, number: state.next)
        }
    }

    /// Drops a subscription that has not fired (a wait that ended on its deadline).
    public func cancel(_ ticket: Ticket) {
        state.withLock { state in
            state.waiters[ticket.key]?[ticket.number] = nil
            if state.waiters[ticket.key]?.isEmpty == true { state.waiters[ticket.key] = nil }
        }
    }

    /// Wakes and forgets every subscriber of `key`.
    public func wake(_ key: String) {
        let callbacks = state.withLock { state in state.waiters.removeValue(forKey: key) ?? [:] }
        for callback in callbacks.values { callback() }
    }

    /// Wakes every subscriber of every key (a notification channel that was lost
    /// and is back: each parked poll looks again).
    public func wakeAll() {
        let callbacks = state.withLock { state in
            let all = state.waiters.values.flatMap(\.values)
            state.waiters = [:]
            return all
        }
        for callback in callbacks { callback() }
    }

    /// How many subscriptions are waiting.
    public var waiting: Int { state.withLock { $0.waiters.values.reduce(0) { $0 + $1.count } } }
}
