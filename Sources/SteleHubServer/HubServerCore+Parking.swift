import CMicroHTTPD
import Dispatch
import SteleHub

/// The parked long polls, under ``HubServerCore/parking``.
struct ParkingTable: Sendable {
    /// One suspended connection waiting for its answer.
    struct Entry: Sendable {
        let context: RequestContext
        let wait: HubWait
        /// The connection's socket, peeked to notice a client that left.
        let socket: Int32
        let deadline: ContinuousClock.Instant
        var nextCheck: ContinuousClock.Instant
        /// A subscription to `wait.key` is live (set before subscribing, cleared by its wake).
        var subscribed = false
        /// The last subscription, for cancelling it; cancelling one that fired does nothing.
        var ticket: HubWakeups.Ticket?
        /// A `poll()` is running or queued; whoever set this runs it, nobody else does.
        var polling = true
        /// A wake came while polling: poll once more before resting.
        var wokenWhilePolling = false
    }

    var entries: [UInt64: Entry] = [:]
    /// Set by stop: nothing parks any more.
    var stopping = false
}

/// Long polls: a parked connection is suspended in libmicrohttpd (no thread held)
/// and resumed exactly once, by whoever removes its entry from the table.
extension HubServerCore {
    /// Parks a connection the access handler has just suspended, and polls once at
    /// once (a frame may have landed between `handle` and the subscription).
    func park(_ context: RequestContext, _ wait: HubWait) {
        let now = ContinuousClock.now
        let entry = ParkingTable.Entry(
            context: context,
            wait: wait,
            socket: stele_mhd_connection_fd(context.connection),
            deadline: now + .seconds(max(0, wait.waitSeconds)),
            nextCheck: now + .seconds(configuration.pollRecheckSeconds))
        let parked = parking.withLock { table in
            guard !table.stopping else { return false }
            table.entries[context.number] = entry
            return true
        }
        guard parked else {
            resume(context, wait.expire())
            return
        }
        pollQueue.async { self.poll(context.number, checkingPeer: false) }
    }

    /// Resubscribes if needed, then looks again. Runs on the poll queue, for the one
    /// caller that set `polling`.
    func poll(_ number: UInt64, checkingPeer: Bool) {
        guard let (wait, socket, mustSubscribe) = parking.withLock({ table -> (HubWait, Int32, Bool)? in
            guard var entry = table.entries[number] else { return nil }
            let mustSubscribe = !entry.subscribed
            entry.subscribed = true
            table.entries[number] = entry
            return (entry.wait, entry.socket, mustSubscribe)
        }) else { return }

        // The entry is still parked, so its socket is open (a stale peek after a
        // concurrent finish only reads another socket and changes nothing below).
        if checkingPeer, socket >= 0, stele_socket_peer_gone(socket) != 0 {
            finish(number) { wait.expire() }
            return
        }
        if mustSubscribe {
            // Subscribe before looking, so a frame that lands after the look still wakes.
            let ticket = handler.wakeups.subscribe(wait.key) { [weak self] in self?.woken(number) }
            let kept = parking.withLock { table in
                guard table.entries[number] != nil else { return false }
                table.entries[number]?.ticket = ticket
                return true
            }
            if !kept {
                handler.wakeups.cancel(ticket)
                return
            }
        }

        let response = wait.poll()
        enum Next { case nothing, pollAgain, answer(HubResponse), expire }
        let now = ContinuousClock.now
        let next = parking.withLock { table -> Next in
            guard var entry = table.entries[number] else { return .nothing }
            if let response { return .answer(response) }
            if now >= entry.deadline { return .expire }
            if entry.wokenWhilePolling {
                entry.wokenWhilePolling = false
                table.entries[number] = entry
                return .pollAgain
            }
            entry.polling = false
            entry.nextCheck = now + .seconds(configuration.pollRecheckSeconds)
            table.entries[number] = entry
            return .nothing
        }
        switch next {
        case .nothing: break
        case .pollAgain: pollQueue.async { self.poll(number, checkingPeer: false) }
        case .answer(let response): finish(number) { response }
        case .expire: finish(number) { wait.expire() }
        }
    }

    /// The key was woken (on the waking thread): look again, or tell the running look to.
    func woken(_ number: UInt64) {
        let start = parking.withLock { table -> Bool in
            guard var entry = table.entries[number] else { return false }
            entry.subscribed = false
            defer { table.entries[number] = entry }
            if entry.polling {
                entry.wokenWhilePolling = true
                return false
            }
            entry.polling = true
            return true
        }
        if start { pollQueue.async { self.poll(number, checkingPeer: false) } }
    }

    /// Every quarter second: expires polls past their wait, re-checks those not looked
    /// at for `pollRecheckSeconds` (and whether their client is still there).
    func sweep() {
        let now = ContinuousClock.now
        var expired: [UInt64] = []
        var due: [UInt64] = []
        parking.withLock { table in
            for (number, entry) in table.entries where !entry.polling {
                if now >= entry.deadline {
                    expired.append(number)
                } else if now >= entry.nextCheck {
                    due.append(number)
                }
            }
            for number in due { table.entries[number]?.polling = true }
        }
        for number in expired {
            finish(number, onlyIfResting: true) { nil }
        }
        for number in due {
            pollQueue.async { self.poll(number, checkingPeer: true) }
        }
    }

    /// Stop: every parked poll gets its expire answer now.
    func expireAllForStop() {
        let entries = parking.withLock { table in
            table.stopping = true
            defer { table.entries = [:] }
            return Array(table.entries.values)
        }
        for entry in entries {
            if let ticket = entry.ticket { handler.wakeups.cancel(ticket) }
            resume(entry.context, entry.wait.expire())
        }
    }

    /// Forgets a parked connection libmicrohttpd completed itself, without resuming it.
    func abandon(_ context: RequestContext) {
        let removed = parking.withLock { $0.entries.removeValue(forKey: context.number) }
        if let ticket = removed?.ticket { handler.wakeups.cancel(ticket) }
    }

    /// How many polls are parked.
    var parkedCount: Int { parking.withLock { $0.entries.count } }

    /// Removes the entry and resumes its connection with `response()` (its `expire()`
    /// when that gives nil). Whoever removes the entry resumes: exactly once.
    /// - Parameter onlyIfResting: leave it alone when a poll took it meanwhile (that poll
    ///   will see the deadline itself).
    private func finish(_ number: UInt64, onlyIfResting: Bool = false, _ response: () -> HubResponse?) {
        let removed = parking.withLock { table -> ParkingTable.Entry? in
            guard let entry = table.entries[number] else { return nil }
            if onlyIfResting, entry.polling { return nil }
            table.entries[number] = nil
            return entry
        }
        guard let removed else { return }
        if let ticket = removed.ticket { handler.wakeups.cancel(ticket) }
        resume(removed.context, response() ?? removed.wait.expire())
    }

    /// Hands the answer over and resumes: the access handler is called again and queues it.
    private func resume(_ context: RequestContext, _ response: HubResponse) {
        context.handoff.withLock { $0 = response }
        MHD_resume_connection(context.connection)
    }

    /// Sweeps every quarter second until the server stops.
    func scheduleSweep() {
        sweepQueue.asyncAfter(deadline: .now() + .milliseconds(250)) { [weak self] in
            guard let self, !self.isStopping else { return }
            self.sweep()
            self.scheduleSweep()
        }
    }
}
