import SteleHub
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension PostgresShared {
    /// At most this many keys go in one `pg_notify` round trip.
    static let keysPerNotification = 100

    /// Queues `key`; the notifier thread sends it soon, with whatever else is queued.
    func announce(_ key: String) {
        let wake = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            let wasEmpty = state.pendingKeys.isEmpty
            state.pendingKeys.insert(key)
            return wasEmpty
        }
        if wake { notifierWake.signal() }
    }

    /// Starts the thread that sends queued keys over its own connection, never
    /// inside a writing transaction (NOTIFY takes a global lock at commit).
    func startNotifier() {
        let thread = Thread { [self] in
            runNotifier()
            notifierFinished.signal()
        }
        thread.name = "stele-hub pg notify"
        thread.start()
    }

    private func runNotifier() {
        var connection: PostgresConnection?
        var delayMilliseconds = 100
        while true {
            _ = notifierWake.wait(timeout: .now() + 1)
            let (keys, closed) = state.withLock { state in
                let keys = Array(state.pendingKeys)
                state.pendingKeys = []
                return (keys, state.closed)
            }
            if keys.isEmpty {
                if closed { return }
                continue
            }
            do {
                if connection == nil { connection = try PostgresConnection(url: url) }
                guard let connection else { continue }
                var start = 0
                while start < keys.count {
                    let batch = Array(keys[start..<min(start + Self.keysPerNotification, keys.count)])
                    let calls = batch.indices.map { "pg_notify('\(Self.channel)', $\($0 + 1))" }
                    _ = try connection.run("SELECT " + calls.joined(separator: ", "), batch.map { .text($0) })
                    start += batch.count
                }
                delayMilliseconds = 100
            } catch {
                // Lost connection or server down: keep the keys and try again
                // after a pause (the listeners will also look again with "*").
                connection = nil
                if closed { return }
                state.withLock { $0.pendingKeys.formUnion(keys) }
                usleep(UInt32(delayMilliseconds) * 1000)
                delayMilliseconds = min(delayMilliseconds * 2, 5000)
                notifierWake.signal()
            }
        }
    }

    /// Adds `listener`; the first call opens the listening connection (now, when
    /// it can) and starts the thread that delivers notifications.
    func listen(_ listener: @escaping @Sendable (String) -> Void) {
        let start = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.listeners.append(listener)
            defer { state.listenerStarted = true }
            return !state.listenerStarted
        }
        guard start else { return }
        // Listening before this returns means no announcement made after it is missed.
        let first = try? Self.openListener(url: url)
        let lease = first.map { PostgresLease(connection: $0) }
        let thread = Thread { [self] in
            runListener(lease?.connection)
            listenerFinished.signal()
        }
        thread.name = "stele-hub pg listen"
        thread.start()
    }

    private static func openListener(url: String) throws -> PostgresConnection {
        let connection = try PostgresConnection(url: url)
        try connection.command("LISTEN \(channel)")
        return connection
    }

    private func deliver(_ key: String) {
        let listeners = state.withLock { $0.listeners }
        for listener in listeners { listener(key) }
    }

    private func runListener(_ first: PostgresConnection?) {
        var connection = first
        // A channel that was down may have missed announcements: everyone looks again once it is back.
        var missedAnnouncements = first == nil
        var delayMilliseconds = 100
        while !isClosed {
            guard let listening = connection else {
                do {
                    connection = try Self.openListener(url: url)
                    delayMilliseconds = 100
                    if missedAnnouncements { deliver("*") }
                    missedAnnouncements = false
                } catch {
                    // Back off, but keep noticing close() within a tenth of a second.
                    var waited = 0
                    while waited < delayMilliseconds && !isClosed {
                        usleep(100_000)
                        waited += 100
                    }
                    delayMilliseconds = min(delayMilliseconds * 2, 5000)
                }
                continue
            }
            var descriptor = pollfd(fd: listening.socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 1000)
            if ready < 0 && errno == EINTR { continue }
            do {
                try listening.consumeInput()
                for payload in listening.takeNotifications() { deliver(payload) }
            } catch {
                connection = nil
                missedAnnouncements = true
            }
        }
    }
}
