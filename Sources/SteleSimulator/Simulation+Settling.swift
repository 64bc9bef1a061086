import Stele

/// Settling (SCENARIOS.md `sync`): running until the fleet is at rest, and
/// saying what still moves when it is not.
extension Simulation {
    /// Runs until every two online devices that can reach each other have equal
    /// roots and generations, and the fleet is idle: no frame in flight and no
    /// timer but the periodic advertisement due within the next 60 s.
    /// - Returns: `nil` when settled, or what was still moving after `limit` of virtual time.
    public func sync(limitMilliseconds limit: Int64 = 3_600_000) -> String? {
        let end = now + limit
        while true {
            if isStillMoving() {
                guard now < end, queue.nextDeadline != nil else { return stillMoving() }
                step()
            } else {
                timeline.append(TimelineEntry(time: now, device: nil, kind: .converged))
                return nil
            }
        }
    }

    /// What keeps the fleet from being settled, or `nil`.
    func stillMoving() -> String? {
        observing { differingPair() ?? inFlight() ?? pendingWork() }
    }

    /// The same verdict as ``stillMoving()`` without its message: the cheap
    /// checks first, so a fleet with frames in flight (most steps of a sync)
    /// reads no store.
    func isStillMoving() -> Bool {
        observing { inFlight() != nil || pendingWork() != nil || differingPair() != nil }
    }

    /// Two online devices of an account that reach each other but advertise
    /// differently; each device's advertisement is read once.
    private func differingPair() -> String? {
        let online = everyDevice.filter { !$0.isRevoked && $0.isOnline }
        var advertisements: [DeviceID: Advertisement?] = [:]
        func advertisement(_ device: SimulatedDevice) -> Advertisement? {
            if let known = advertisements[device.id] { return known }
            let read = try? device.node.advertisement()
            advertisements[device.id] = read
            return read
        }
        for (index, first) in online.enumerated() {
            for second in online[(index + 1)...] where first.account == second.account && canReach(first.id, second.id) {
                let (mine, theirs) = (advertisement(first), advertisement(second))
                if mine != theirs {
                    // A generation gap stops content reconcile, and with collection off no device
                    // recovers across it (gc off: generations do not move).
                    let gap = mine?.generation != theirs?.generation && mine != nil && theirs != nil
                    let off = gap && !configuration.collects ? "; collection is off (gc off), so neither recovers across the gap: gc on lets it" : ""
                    return "\(first.name) and \(second.name) still differ" + Self.difference(mine, theirs) + off
                }
            }
        }
        return nil
    }

    /// A frame of the roster's devices or an anchor write or read still queued.
    private func inFlight() -> String? {
        // A revoked device keeps talking to a fleet that refuses it: its frames
        // and timers are no part of the roster settling.
        let verdict: String? =
            if everyDevice.contains(where: { !$0.isRevoked && queued.framesFrom[$0.id] != nil }) {
                "frames in flight"
            } else if queued.anchorWrites > 0 {
                "an anchor write in flight"
            } else if queued.anchorReads > 0 {
                "an anchor read in flight"
            } else {
                nil
            }
        #if DEBUG
            // The tally against the queue itself, now and then.
            inFlightChecks &+= 1
            if inFlightChecks % 256 == 0 { precondition(verdict == scannedInFlight(), "the queued tally says \(verdict ?? "nothing"), the queue \(scannedInFlight() ?? "nothing")") }
        #endif
        return verdict
    }

    /// ``inFlight()`` found by scanning the queue: what the tally must agree with.
    func scannedInFlight() -> String? {
        let rosterIDs = Set(everyDevice.filter { !$0.isRevoked }.map(\.id))
        if queue.contains(where: { if case .deliver(let from, _, _, _) = $0 { return rosterIDs.contains(from) } else { return false } }) {
            return "frames in flight"
        }
        if queue.contains(where: { if case .anchorWrite = $0 { return true } else { return false } }) { return "an anchor write in flight" }
        if queue.contains(where: { if case .anchorRead = $0 { return true } else { return false } }) { return "an anchor read in flight" }
        return nil
    }

    /// A barrier round still due, or a timer other than the periodic ones.
    private func pendingWork() -> String? {
        let rosterIDs = Set(everyDevice.filter { !$0.isRevoked }.map(\.id))
        // Barrier rounds are part of settling (SCENARIOS.md `sync`): with every device
        // online and reachable, a fleet whose devices may still collect is not at rest
        // until they have, or until the leader backs off.
        let roster = devices
        if configuration.collects, roster.allSatisfy(\.isOnline),
            roster.allSatisfy({ first in roster.allSatisfy { canReach(first.id, $0.id) } }),
            let leader = roster.min(by: { $0.id < $1.id }), !leader.node.isBackingOff,
            let busy = roster.first(where: { $0.node.hasCollectionWork })
        {
            return "\(busy.name) still has tombstones to collect"
        }
        // SCENARIOS.md: idle means no timer but a periodic one due within the next 60 s;
        // a back-off long after that is a fleet at rest.
        for device in everyDevice where rosterIDs.contains(device.id) && device.isOnline {
            // The outbox retries while a contact is out of reach: periodic too, unless
            // a delivery only waits out its settling moment or its writer's turn
            // (work about to happen).
            let outboxIsWork = device.node.hasDeliverySettling || device.node.hasDeliveryWaitingOutATurn
            for (timer, deadline) in device.driver.armedTimers where timer != .advertise && (timer != .outbox || outboxIsWork) && deadline <= now + 60_000 {
                return "\(device.name) has a \(timer) timer pending"
            }
        }
        return nil
    }

    /// Where two advertisements part: the namespaces whose roots differ, or the generations.
    static func difference(_ first: Advertisement?, _ second: Advertisement?) -> String {
        guard let first, let second else { return " (one of them cannot read its store)" }
        if first.generation != second.generation { return " (generations \(first.generation) and \(second.generation))" }
        let names = Set(first.roots.map(\.namespace) + second.roots.map(\.namespace)).sorted().filter { name in
            first.roots.first { $0.namespace == name } != second.roots.first { $0.namespace == name }
        }
        return " in \(names.joined(separator: ", "))"
    }
}
