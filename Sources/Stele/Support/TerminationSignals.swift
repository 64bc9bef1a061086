import Foundation

/// SIGINT and SIGTERM for a long-running command (`stele sync`, `stele-hub
/// serve`), never lost: ``block()`` runs first thing in `main`, before any
/// thread exists, so every thread inherits the mask and a signal sent at any
/// moment stays pending until ``wait()`` takes it. (A handler installed later,
/// or a Dispatch signal source, leaves a window after the process starts in
/// which a signal is dropped, and the command then never stops.)
package enum TerminationSignals {
    private static var set: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        return set
    }

    /// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts later.
    package static func block() {
        var signals = set
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Unblocks SIGINT and SIGTERM in the calling thread: a command that does not
    /// take them itself, started by a process that blocked them (a child inherits
    /// the mask across `exec`; Foundation's `Process` does not reset it), ends on
    /// them as any process does.
    package static func unblock() {
        var signals = set
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    }

    /// Waits until SIGINT or SIGTERM is sent; returns which.
    package static func wait() -> Int32 {
        var signals = set
        var received: Int32 = 0
        while sigwait(&signals, &received) != 0 {}
        return received
    }

    /// Calls `handler` on a thread of its own when SIGINT or SIGTERM comes (once).
    package static func onSignal(_ handler: @escaping @Sendable (Int32) -> Void) {
        Thread.detachNewThread { handler(wait()) }
    }
}
