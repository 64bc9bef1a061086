import Stele

/// The simulation's taps on the wire (``OracleTap``): what a frame to or from a
/// contact's device tells the oracles, and the tamper hook that puts a broken
/// peer on the wire.
extension Simulation {
    /// A device of the own account wrote receipts for a contact's delivery and
    /// sends them: the oracle learns those its store holds now.
    func deliverySent(_ plain: [UInt8], from source: SimulatedDevice) {
        // A revoked device's writes are no one's to keep (``perform(_:_:)``).
        guard source.contact == nil, !source.isRevoked, case .delivery(let delivery)? = try? FrameCodec.decode(plain) else { return }
        observing {
            for record in delivery.records {
                let receipts = record.ops.filter { op in
                    if case .receipt = op.action { op.account == account } else { false }
                }
                // Most records carry none: their store is not read.
                guard !receipts.isEmpty else { continue }
                // An acknowledgement of a receipt whose op is gone is sent, not kept.
                let held = Set(((try? source.replica.messages(delivery.conversation).ops(of: record.message)) ?? []).map(\.id))
                for op in receipts where held.contains(op.id) {
                    oracle.arrived(op, namespace: delivery.conversation, on: source.replica, deviceName: source.name, time: now)
                }
            }
        }
    }

    /// A delivery landed on another account's device. On the own account's, the
    /// oracle learns the contact's ops the device took in. On a contact's, the
    /// text of a message deleted for everyone before any of its text had reached
    /// the contact is a leak: a failure (counted with the resurrections) when the
    /// device that deleted it had been within the deliverer's reach for
    /// ``OracleTap/leakReachMilliseconds``, a leak at the limit otherwise.
    func deliveryLanded(_ plain: [UInt8], from source: SimulatedDevice, on target: SimulatedDevice) {
        guard case .delivery(let delivery)? = try? FrameCodec.decode(plain) else { return }
        let namespace = delivery.conversation
        observing {
            for record in delivery.records {
                if target.contact == nil {
                    guard !target.isRevoked else { continue }
                    let held = Set(((try? target.replica.messages(namespace).ops(of: record.message)) ?? []).map(\.id))
                    for op in record.ops where held.contains(op.id) {
                        oracle.arrived(op, namespace: namespace, on: target.replica, deviceName: target.name, time: now)
                    }
                    continue
                }
                guard source.contact == nil else { continue }
                guard record.ops.contains(where: \.carriesText) else { continue }
                let deleted = oracle.deletedForEveryone(namespace, record.message)
                // The promise (README "Conversations"): no device delivers it once the
                // delete could have reached it from the device that made it.
                let deleter = deleted.flatMap { device($0.device) }
                let verdict = tap.textReached(
                    namespace, record.message, at: now, deletedAt: deleted?.time,
                    reachableSince: deleter.flatMap { virtualNetwork.reachable(source.id, $0.id) },
                    deleterHoldsIt: deleter.map { (try? $0.replica.messages(namespace).message(record.message))??.scope == .everyone } ?? false)
                guard verdict != .fine, let deleted else { continue }
                let subject = "\(namespace) message \(record.message)"
                let detail = "\(source.name) delivered its text to \(target.name) at \(now) ms, after \(deleted.device) deleted it for everyone at \(deleted.time) ms and before it was ever delivered"
                if verdict == .leak {
                    oracle.leaked(subject, detail)
                } else {
                    oracle.leakedAtTheLimit(subject, detail + " (the deleting device was out of its reach)")
                }
            }
        }
    }

    /// The bytes delivered: as sealed, or, with a ``tamper`` hook, its rewrite of
    /// the plaintext sealed again as the sender would (a broken peer, not a broken wire).
    func tampered(_ sealed: [UInt8], _ plain: [UInt8], from: DeviceID, to: DeviceID) -> [UInt8]? {
        guard let tamper else { return sealed }
        guard let rewritten = tamper(from, to, plain) else { return nil }
        return device(id: from)?.sealAny(rewritten, to: to)
    }
}
