import Synchronization

/// Fans committed change events out to every subscriber's `AsyncStream`.
final class ChangeFeed: Sendable {
    private struct State {
        var nextID: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<ChangeEvent>.Continuation] = [:]
    }

    private let state = Mutex(State())

    /// A new stream that receives every event published from now on.
    func subscribe(bufferingPolicy: AsyncStream<ChangeEvent>.Continuation.BufferingPolicy) -> AsyncStream<ChangeEvent> {
        let (stream, continuation) = AsyncStream<ChangeEvent>.makeStream(bufferingPolicy: bufferingPolicy)
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            state.subscribers[state.nextID] = continuation
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Whether anyone listens: without subscribers, writes skip building events.
    var hasSubscribers: Bool { state.withLock { !$0.subscribers.isEmpty } }

    func publish(_ events: [ChangeEvent]) {
        guard !events.isEmpty else { return }
        let continuations = state.withLock { Array($0.subscribers.values) }
        for continuation in continuations {
            for event in events { continuation.yield(event) }
        }
    }

    /// Ends every stream (the replica closed).
    func finish() {
        let continuations = state.withLock { state in
            defer { state.subscribers.removeAll() }
            return Array(state.subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
