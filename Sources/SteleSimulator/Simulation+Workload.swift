import Foundation
import Stele

/// The workload through the oracle, and what is checked of the fleet.
extension Simulation {
    // MARK: - Workload

    /// Runs one write on a device, tells the oracle, and lets its node know.
    /// - Returns: `false` if the device's store refused it (a forced storage fault),
    ///   or there is no device of that name (``lastFailure`` says which).
    ///   A write the device could not even aim (a message it does not hold) is
    ///   refused too, but returns `true` with ``lastRefusal`` set, and is no step at all.
    @discardableResult
    public func perform(_ name: String, _ operation: WorkloadOperation) -> Bool {
        guard let device = device(name) else {
            lastFailure = "no device named \(name); add it first"
            return false
        }
        syncClocks()
        lastRefusal = nil
        do {
            // A contact's writes reach the own account's oracle when they land on its devices.
            let (judge, other) = device.contact == nil ? (oracle, contactOracle) : (contactOracle, oracle)
            let place: String? = if case let .post(namespace, message, _) = operation { "\(namespace)|\(message)" } else { nil }
            let lifeBefore = place.flatMap { judge.reusedFrom[$0] }
            let lostAlready = device.isRevoked ? operationsLostAlready() : []
            lastRefusal = try judge.perform(
                operation, on: device.replica, deviceName: name, time: now, freed: { self.nameFreed(by: operation, on: device) },
                markersHeld: { self.markersHeld(for: operation, writer: device) })
            // A message id posted anew in a conversation starts its new life for the other
            // account's oracle too, which learns the post only as it arrives (``Oracle/arrived``).
            if let place, judge.reusedFrom[place] != lifeBefore { other.reusedFrom[place] = other.operations.count }
            if lastRefusal?.code == .messageMissing { return true }
            // The fleet refuses a revoked device's writes: they are no one's to keep.
            if device.isRevoked { forgetOperationsLost(sparing: lostAlready) }
            statistics.operations += 1
            if operation.isDelete { statistics.deletes += 1 }
            // The driver hears of the write from the replica's change feed.
            hasher.add("op", now, device.id, device.id, operation.hashValueStable)
            noteTombstones(device: name)
            return true
        } catch {
            failedOperations += 1
            lastFailure = "\(error)"
            return false
        }
    }

    /// The markers of the group an append aims at that the account's devices hold
    /// (``Oracle/markersAtAppend``): those that will meet the event. Revoked devices
    /// are left out (nothing they hold reaches the fleet), and so is a marker a
    /// device below the writer's generation (and the landed anchor's) holds when
    /// that anchor's round collected it (its knowledge covers it): the device drops
    /// it when it adopts the generation (it missed the commit) or recovers from the
    /// anchor, and the generation gap keeps it from the writer meanwhile. A device
    /// at the writer's own generation below a dangling anchor still reconciles with
    /// it, and holds what it holds. A store that cannot be read is passed over.
    func markersHeld(for operation: WorkloadOperation, writer: SimulatedDevice) -> Set<EventID> {
        guard case let .append(namespace, group, _) = operation else { return [] }
        return observing {
            var held: Set<EventID> = []
            for device in everyDevice where !device.isRevoked && device.account == writer.account {
                guard let log = try? device.replica.log(namespace), (try? log.isBuried(group)) == true else { continue }
                let markers = ((try? log.events()) ?? []).filter { $0.group == group && $0.kind == .marker }
                if let collected = collected(below: device, writer: writer), markers.allSatisfy({ collected.covers($0.stamp) }) { continue }
                held.formUnion(markers.map(\.id))
            }
            return held
        }
    }

    /// Whether no store holds anything of the message id a post uses: no op of the
    /// message on any device of the account or, in a conversation, of the
    /// contact's. A store that cannot be read counts as holding it. Revoked
    /// devices are left out: nothing they hold reaches the fleet. Nor does a device
    /// below the writer's generation hold a deleted message the landed anchor's
    /// round collected (``markersHeld(for:writer:)`` says why).
    func nameFreed(by operation: WorkloadOperation, on writer: SimulatedDevice) -> Bool {
        guard case let .post(namespace, message, _) = operation else { return false }
        let contact = ((try? writer.replica.conversations()) ?? []).first { $0.name == namespace }?.contact
        func holds(_ device: SimulatedDevice) throws -> Bool {
            let messages = try device.replica.messages(namespace)
            let ops = try messages.ops(of: message)
            guard !ops.isEmpty else { return false }
            guard let collected = collected(below: device, writer: writer), try messages.message(message)?.isDeleted ?? false else { return true }
            return !ops.allSatisfy(collected.covers)
        }
        return observing {
            everyDevice.allSatisfy { device in
                device.isRevoked || (device.account != writer.account && device.account != contact) || (try? holds(device)) == false
            }
        }
    }

    /// What the round of the anchor `device`'s account has landed had seen, when
    /// the device is below that anchor's generation and below the writer's.
    private func collected(below device: SimulatedDevice, writer: SimulatedDevice) -> Knowledge? {
        guard device.account == writer.account, device.replica.generation < writer.replica.generation,
            let sealed = anchors.bytes(of: device.account), let anchor = opened(sealed, by: device),
            device.replica.generation < anchor.header.generation, let snapshot = try? Snapshot(decoding: anchor.snapshot)
        else { return nil }
        return snapshot.knowledge
    }

    /// The devices, of any account, whose conversations still owe a delivery, and how many messages.
    public func owingDeliveries() -> [(device: String, count: Int)] {
        observing {
            everyDevice.filter { !$0.isRevoked }.compactMap { device in
                let owed = ((try? device.replica.conversations()) ?? []).reduce(0) { total, conversation in
                    total + ((try? device.replica.messages(conversation.name).outboxCount()) ?? 0)
                }
                return owed > 0 ? (device.name, owed) : nil
            }
        }
    }

    /// Adds the tombstones retained now to the timeline (after `device`'s write, or
    /// in the healed phase until they are collected), when it counts them
    /// (``recordsTombstoneCounts``: counting reads every store, only for a report).
    func noteTombstones(device: String? = nil) {
        guard recordsTombstoneCounts else { return }
        timeline.append(TimelineEntry(time: now, device: device, kind: .tombstones(totalTombstones())))
    }

    /// Tombstones retained across the online devices' stores.
    public func totalTombstones() -> Int {
        observing {
            devices.reduce(0) { total, device in total + ((try? device.replica.tombstoneCount()) ?? 0) }
        }
    }

    /// Runs reads of the harness (settling checks, expectations, reports) with
    /// every device's forced storage faults held back: they are meant for the
    /// device's own steps, and must neither fire on nor be used up by an observer.
    public func observing<T>(_ body: () throws -> T) rethrows -> T {
        try Oracle.suspendingFaults(everyDevice.map(\.replica), body)
    }

    /// Runs the oracle over every device.
    /// - Throws: ``OracleCannotCheck`` saying why, when a device is offline, a
    ///   partition stands or the fleet is still moving: the oracle judges only a
    ///   fleet that has settled, and a check that could not run is no pass.
    public func checkOracle() throws {
        if let reason = whyOracleCannotCheck() { throw OracleCannotCheck(reason: reason) }
        oracle.check(devices.map { ($0.name, $0.replica) }, namespaces: namespaces)
    }

    /// Why the oracle cannot judge the fleet now, or `nil` when it can.
    public func whyOracleCannotCheck() -> String? {
        if partition != nil { return "a partition stands; heal it first" }
        let offline = devices.filter { !$0.isOnline }.map(\.name)
        if !offline.isEmpty { return "\(offline.joined(separator: ", ")) \(offline.count == 1 ? "is" : "are") offline" }
        if let moving = stillMoving() { return "the fleet is still moving: \(moving)" }
        return nil
    }

    /// A hash of every delivered event, operation and timer, in order: equal for
    /// two runs of the same seed and scenario.
    public var eventLogHash: UInt64 { hasher.value }

    /// A SHA-256 over the bytes of every sealed frame delivered, in order: equal
    /// for two runs of the same seed and scenario, down to every salt and nonce.
    public var wireDigest: Hash32 { wireHasher.value }

    func record(_ kind: TimelineEntry.Kind, device: SimulatedDevice) {
        timeline.append(TimelineEntry(time: now, device: device.name, kind: kind))
        hasher.add("\(kind)", now, device.id, device.id, 0)
    }
}
