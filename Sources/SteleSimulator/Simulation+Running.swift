import Foundation
import Stele

/// The event loop: advancing virtual time, carrying out the events (frames,
/// timers, anchor reads and writes), and putting frames on the network
/// (``VirtualNetwork`` decides their fate). Settling is Simulation+Settling.swift.
extension Simulation {
    // MARK: - Running

    /// Runs every event due within the next `duration` of virtual time (a
    /// negative one runs nothing: virtual time never goes back).
    public func advance(byMilliseconds duration: Int64) {
        let end = now + max(duration, 0)
        while let deadline = queue.nextDeadline, deadline <= end { step() }
        now = end
        syncClocks()
    }

    func step() {
        guard let (deadline, sequence, event) = queue.pop() else { return }
        queued.count(event, -1)
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
        case let .anchorWrite(owner, sealed, takenAt, mark, completion):
            guard let target = device(id: owner) else { return }
            let reached = !anchorSubstrate.isDown && target.isOnline && !anchorSubstrate.failNextWrite
            anchorSubstrate.failNextWrite = false
            let header = try? AnchorFile.header(sealed)
            // The substrate takes it as it lands, unless another round's anchor holds its generation (seed 370010).
            var refusal: AnchorError?
            if reached { anchors.writeAnchor(sealed, of: target.account) { if case .failure(let error) = $0 { refusal = error } } }
            let landed = reached && refusal == nil
            hasher.add(landed ? "anchor-landed" : refusal != nil ? "anchor-refused" : "anchor-failed", now, owner, owner, Int(header?.generation ?? 0))
            if landed {
                record(.anchorWritten(header?.generation ?? 0), device: target)
                // Another account's anchor is no evidence for this account's writes (seed 13).
                if let anchor = opened(sealed, by: target), let snapshot = try? Snapshot(decoding: anchor.snapshot) {
                    (target.account == account ? oracle : contactOracle).anchorLanded(snapshot, generation: anchor.header.generation, takenAt: takenAt, forgettingMark: mark)
                }
            }
            completion(landed ? .success(()) : .failure(refusal ?? AnchorError(.unavailable, "the anchor substrate is unreachable")))
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

    /// Puts an event on the queue, counted in ``queued``.
    func enqueue(_ event: Event, at deadline: Int64) {
        queued.count(event, 1)
        queue.push(event, at: deadline)
    }

    /// Queues a device's timer on the virtual clock.
    func schedule(_ timer: SimulatedTimer, for device: DeviceID, afterMilliseconds delay: Int64) -> SimulatedTimer {
        enqueue(.timer(device: device, timer: timer), at: now + delay)
        return timer
    }

    /// Queues a device's anchor write: it lands (or fails) after the substrate's latency.
    func queueAnchorWrite(_ sealed: [UInt8], by device: DeviceID, completion: @escaping (Result<Void, AnchorError>) -> Void) {
        let delay = anchorSubstrate.delayNextWriteMilliseconds ?? anchorSubstrate.latencyMilliseconds
        anchorSubstrate.delayNextWriteMilliseconds = nil
        // Where the writer's account's oracle stands as the snapshot is taken (``Oracle/recovered(_:)``).
        let ownAccount = (self.device(id: device)?.account ?? account) == account
        let mark = (ownAccount ? oracle : contactOracle).forgettingMark
        enqueue(.anchorWrite(device: device, sealed: sealed, takenAt: now, forgettingMark: mark, completion: completion), at: now + delay)
    }

    /// Queues a device's anchor read.
    func queueAnchorRead(by device: DeviceID, completion: @escaping (Result<[UInt8]?, AnchorError>) -> Void) {
        enqueue(.anchorRead(device: device, completion: completion), at: now + anchorSubstrate.latencyMilliseconds)
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
            opened = carried(bytes, from: source, to: target)
            deliverySent(opened ?? [], from: source)
        }
        guard canReach(from, to) else { return }
        statistics.frames += 1
        statistics.bytes += bytes.count
        guard case .delivered(let delays) = virtualNetwork.fate(using: &random) else {
            count("loss")
            return
        }
        let plain = opened ?? device(id: from).map { carried(bytes, from: $0, to: device(id: to)) } ?? []
        for delay in delays {
            enqueue(.deliver(from: from, to: to, sealed: bytes, plain: plain), at: now + delay)
        }
        if delays.count > 1 { count("dup") }
    }

    /// Whether a frame sent now could be anything but dropped by ``send(_:from:to:)``:
    /// the two devices reach each other, or they are of two accounts (such a frame is
    /// read even if it goes nowhere). A frame that would be dropped is not sealed.
    func mayCarry(from: DeviceID, to: DeviceID) -> Bool {
        guard let source = device(id: from), let target = device(id: to) else { return false }
        return source.account != target.account || canReach(from, to)
    }

    /// What a frame carries, as the oracle sees it (it knows every device's
    /// keys); the device sees only the sealed bytes. The node that sealed it
    /// kept its plaintext (``FleetNode/keepsSealedPlaintexts``), so the oracle
    /// reads that rather than opening every frame a second time; a frame no node
    /// sealed just now (a node without a channel sends plaintext) is opened as
    /// before. Debug builds open every 64th frame anyway and check that both agree.
    func carried(_ bytes: [UInt8], from source: SimulatedDevice, to target: SimulatedDevice?) -> [UInt8] {
        guard let plain = source.driver.node.plaintext(ofSealed: bytes) else { return target?.openAny(bytes)?.frame ?? [] }
        #if DEBUG
            if statistics.frames % 64 == 0, let target {
                let reopened = target.openAny(bytes)?.frame ?? []
                precondition(reopened == plain, "the oracle read \(plain.count) bytes from the sender, the frame opens to \(reopened.count)")
            }
        #endif
        return plain
    }
}
