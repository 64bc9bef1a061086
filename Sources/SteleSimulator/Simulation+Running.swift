import Foundation
import Stele

/// The event loop: advancing virtual time, settling, carrying out the events
/// (frames, timers, anchor reads and writes) and the network's delays, losses and duplicates.
extension Simulation {
    // MARK: - Running

    /// Runs every event due within the next `duration` of virtual time.
    public func advance(byMilliseconds duration: Int64) {
        let end = now + duration
        while let deadline = queue.nextDeadline, deadline <= end { step() }
        now = end
        syncClocks()
    }

    /// Runs until every two online devices that can reach each other have equal
    /// roots and generations, and the fleet is idle: no frame in flight and no
    /// timer but the periodic advertisement due within the next 60 s.
    /// - Returns: `nil` when settled, or what was still moving after `limit` of virtual time.
    public func sync(limitMilliseconds limit: Int64 = 3_600_000) -> String? {
        let end = now + limit
        while true {
            if let moving = stillMoving() {
                guard now < end, queue.nextDeadline != nil else { return moving }
                step()
            } else {
                timeline.append(TimelineEntry(time: now, device: nil, kind: .converged))
                return nil
            }
        }
    }

    /// What keeps the fleet from being settled, or `nil`.
    func stillMoving() -> String? {
        observing { movement() }
    }

    func movement() -> String? {
        let online = everyDevice.filter { !$0.isRevoked && $0.isOnline }
        for (index, first) in online.enumerated() {
            for second in online[(index + 1)...] where first.account == second.account && canReach(first.id, second.id) {
                let (mine, theirs) = (try? first.node.advertisement(), try? second.node.advertisement())
                if mine != theirs {
                    return "\(first.name) and \(second.name) still differ" + Self.difference(mine, theirs)
                }
            }
        }
        // A revoked device keeps talking to a fleet that refuses it: its frames
        // and timers are no part of the roster settling.
        let rosterIDs = Set(everyDevice.filter { !$0.isRevoked }.map(\.id))
        if queue.payloads.contains(where: { if case .deliver(let from, _, _, _) = $0 { return rosterIDs.contains(from) } else { return false } }) {
            return "frames in flight"
        }
        if queue.payloads.contains(where: { if case .anchorWrite = $0 { return true } else { return false } }) { return "an anchor write in flight" }
        if queue.payloads.contains(where: { if case .anchorRead = $0 { return true } else { return false } }) { return "an anchor read in flight" }
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
            // The outbox retries while a contact is out of reach: periodic too.
            for (timer, deadline) in device.driver.armedTimers where timer != .advertise && timer != .outbox && deadline <= now + 60_000 {
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

    func step() {
        guard let (deadline, sequence, event) = queue.pop() else { return }
        now = max(now, deadline)
        syncClocks()
        switch event {
        case let .deliver(from, to, sealed, plain):
            guard let target = device(id: to), canReach(from, to), let bytes = tampered(sealed, plain, from: from, to: to) else {
                oracle.frameLost(sequence)
                return
            }
            hasher.add("deliver", now, from, to, plain.count)
            // The bytes themselves: salts and nonces come from the nodes' seeded generators.
            wireHasher.add(bytes)
            if recordsWire { wire.append(bytes) }
            target.driver.receive(bytes, from: from)
            if let source = device(id: from), source.account != target.account { deliveryLanded(plain, from: source, on: target) }
            if oracle.isCarrier(sequence) {
                if roster.contains(from) && roster.contains(to) { oracle.frameLanded(sequence, in: target.replica) } else { oracle.frameLost(sequence) }
            }
        case let .timer(owner, timer):
            guard !timer.isCancelled, device(id: owner) != nil else { return }
            hasher.add("timer", now, owner, owner, 0)
            timer.fire()
        case let .anchorWrite(owner, sealed, takenAt, completion):
            guard let target = device(id: owner) else { return }
            let landed = !anchorSubstrate.isDown && target.isOnline && !anchorSubstrate.failNextWrite
            anchorSubstrate.failNextWrite = false
            let header = try? AnchorFile.header(sealed)
            if landed { anchors.replace(sealed, of: target.account) }
            hasher.add(landed ? "anchor-landed" : "anchor-failed", now, owner, owner, Int(header?.generation ?? 0))
            if landed {
                record(.anchorWritten(header?.generation ?? 0), device: target)
                // Another account's anchor is no evidence for this account's writes (seed 13).
                if let anchor = opened(sealed, by: target), let snapshot = try? Snapshot(decoding: anchor.snapshot) {
                    (target.account == account ? oracle : contactOracle).anchorLanded(snapshot, takenAt: takenAt)
                }
            }
            completion(landed ? .success(()) : .failure(AnchorError(.unavailable, "the anchor substrate is unreachable")))
        case let .anchorRead(owner, completion):
            guard let target = device(id: owner) else { return }
            hasher.add("anchor-read", now, owner, owner, 0)
            if anchorSubstrate.isDown || !target.isOnline {
                completion(.failure(AnchorError(.unavailable, "the anchor substrate is unreachable")))
            } else {
                completion(.success(anchors.bytes(of: target.account)))
            }
        }
    }

    /// An anchor a device sealed, opened with the keys it holds (the oracle's view).
    func opened(_ sealed: [UInt8], by device: SimulatedDevice) -> Anchor? {
        for key in accountKeys(of: device).reversed() { if let anchor = try? AnchorFile.decode(sealed, key: key) { return anchor } }
        return nil
    }

    /// Queues a device's timer on the virtual clock.
    func schedule(_ timer: SimulatedTimer, for device: DeviceID, afterMilliseconds delay: Int64) -> SimulatedTimer {
        queue.push(.timer(device: device, timer: timer), at: now + delay)
        return timer
    }

    /// Queues a device's anchor write: it lands (or fails) after the substrate's latency.
    func queueAnchorWrite(_ sealed: [UInt8], by device: DeviceID, completion: @escaping (Result<Void, AnchorError>) -> Void) {
        let delay = anchorSubstrate.delayNextWriteMilliseconds ?? anchorSubstrate.latencyMilliseconds
        anchorSubstrate.delayNextWriteMilliseconds = nil
        queue.push(.anchorWrite(device: device, sealed: sealed, takenAt: now, completion: completion), at: now + delay)
    }

    /// Queues a device's anchor read.
    func queueAnchorRead(by device: DeviceID, completion: @escaping (Result<[UInt8]?, AnchorError>) -> Void) {
        queue.push(.anchorRead(device: device, completion: completion), at: now + anchorSubstrate.latencyMilliseconds)
    }

    func syncClocks() {
        for device in everyDevice { device.clock.set(milliseconds: Self.epoch + now + device.skewMilliseconds) }
    }

    /// Puts a frame on the network. Offline devices still run (their app writes,
    /// their timers fire); their frames go nowhere.
    func send(_ bytes: [UInt8], from: DeviceID, to: DeviceID) {
        // A frame to another account's device is read even if it goes nowhere: the
        // receipts in it were written all the same.
        var opened: [UInt8]?
        if let source = device(id: from), let target = device(id: to), source.account != target.account {
            opened = target.openAny(bytes)?.frame ?? []
            deliverySent(opened ?? [], from: source)
        }
        guard canReach(from, to) else { return }
        statistics.frames += 1
        statistics.bytes += bytes.count
        guard case .delivered(let delays) = virtualNetwork.fate(using: &random) else {
            count("loss")
            return
        }
        // The oracle sees what a frame carries (it knows every device's keys); the
        // device sees only the sealed bytes.
        let plain = opened ?? device(id: to)?.openAny(bytes)?.frame ?? []
        for delay in delays {
            queue.push(.deliver(from: from, to: to, sealed: bytes, plain: plain), at: now + delay)
        }
        if delays.count > 1 { count("dup") }
    }
}
