/// Reconcile sessions (001 §7; DESIGN §5), the node's side: ``ContentSync`` keeps
/// the sessions and their timers, this extension runs ``ReconcileEngine`` against
/// the replica and builds the frames.
extension FleetNode {
    mutating func startSession(with peer: DeviceID, namespace declaration: NamespaceDeclaration) -> [FleetOutput] {
        let key = ContentSync.Key(peer: peer, namespace: declaration.name)
        guard sync.session(key) == nil else { return [] }
        do {
            let source = try NamespaceSync(replica: replica, declaration: declaration)
            var session = ContentSync.Session(id: random.next(), initiator: replica.device)
            let opening = try ReconcileEngine.opening(session: session.id, generation: replica.generation, source: source)
            let timer = armTimer(for: key, &session)
            sync.onAwaitingReply(key, session)
            return [
                .send(to: peer, bytes: FrameCodec.encode(.reconcile(opening))), timer,
                .log(FleetEvent(kind: .sessionStarted, peer: peer, namespace: declaration.name, message: "roots differ")),
            ]
        } catch {
            return [.log(FleetEvent.failed(.rejectedRecords, peer: peer, namespace: declaration.name, "could not start a reconcile: \(error)", error))]
        }
    }

    /// Between its ack (or, leading, its proposal) and the round's end, a device
    /// applies no sibling's records (``BarrierMember``): it starts no reconcile
    /// and answers reconcile steps with an empty one that ends the peer's session.
    var isHoldingRecords: Bool { leading.round != nil || acking.isHoldingRecords }

    /// A reconcile step from a sibling (001 §7; ``ReconcileEngine``).
    mutating func onReconcile(_ message: ReconcileMessage, from peer: DeviceID) -> [FleetOutput] {
        guard !isHoldingRecords else {
            // An empty step ends the peer's session now rather than at its timeout;
            // this device advertises when the round ends, and the reconcile starts again.
            let end = ReconcileMessage(session: message.session, namespace: message.namespace, kind: message.kind, generation: message.generation)
            return (message.needsReply ? [.send(to: peer, bytes: FrameCodec.encode(.reconcile(end)))] : [])
                + logOnce(.reconcileHeld, peer: peer, namespace: message.namespace, "a barrier round is open; records wait until it ends")
        }
        guard let declaration = try? replica.declaration(of: message.namespace), declaration.kind == message.kind else {
            return logOnce(.undeclaredNamespace, peer: peer, namespace: message.namespace, "a reconcile for a namespace not declared here as \(message.kind) was refused")
        }
        guard message.generation == replica.generation else {
            return logOnce(
                .generationGap, peer: peer, namespace: message.namespace,
                "reconcile at generation \(message.generation) refused at generation \(replica.generation)")
        }
        let key = ContentSync.Key(peer: peer, namespace: message.namespace)
        var session: ContentSync.Session
        if let existing = sync.session(key), existing.id == message.session {
            session = existing
        } else if let existing = sync.session(key), existing.initiator == replica.device, replica.device < peer {
            // Both started at once: the session of the lower device id goes on; the peer adopts it.
            return []
        } else {
            session = ContentSync.Session(id: message.session, initiator: peer)
        }
        // Records may come in now: an ack whose commit never came stops vouching for this content.
        let withdrawn = withdrawOutstandingAck()
        do {
            let source = try NamespaceSync(replica: replica, declaration: declaration)
            let before = session.progress.changed
            let reply = try ReconcileEngine.respond(to: message, source: source, progress: &session.progress)
            var outputs: [FleetOutput] = withdrawn
            if session.progress.changed > before { outputs += noteChange() }
            // A reply that asks nothing back ends the session here; with nothing to
            // say at all, an empty reply tells a peer that is waiting that it is over.
            let outgoing = reply ?? (message.needsReply ? ReconcileMessage(session: message.session, namespace: message.namespace, kind: message.kind, generation: message.generation) : nil)
            if let outgoing {
                // A conversation's records left for a sibling: what they carry may be deleted there.
                if outgoing.kind == .messages, !outgoing.records.isEmpty || outgoing.tombstones?.isEmpty == false { noteShared(outgoing.namespace) }
                outputs.append(.send(to: peer, bytes: FrameCodec.encode(.reconcile(outgoing))))
            }
            if let outgoing, outgoing.needsReply {
                outputs.append(armTimer(for: key, &session))
                sync.onAwaitingReply(key, session)
            } else {
                sync.onEnded(key)
                if session.epoch > 0 { outputs.append(.cancel(.session(peer: peer, namespace: message.namespace, epoch: session.epoch))) }
                outputs.append(
                    .log(FleetEvent(kind: .sessionFinished, peer: peer, namespace: message.namespace, message: "\(session.progress.changed) rows changed here, \(session.progress.conflicts) conflicts")))
                // What this device holds may now equal what its siblings last advertised.
                outputs += considerRound()
            }
            return outputs
        } catch {
            sync.onEnded(key)
            return withdrawn + [.log(FleetEvent.failed(.rejectedRecords, peer: peer, namespace: message.namespace, "reconcile refused: \(error)", error))]
        }
    }

    private mutating func armTimer(for key: ContentSync.Key, _ session: inout ContentSync.Session) -> FleetOutput {
        nextEpoch += 1
        session.epoch = nextEpoch
        return .arm(.session(peer: key.peer, namespace: key.namespace, epoch: nextEpoch), afterMilliseconds: configuration.sessionTimeoutMilliseconds)
    }
}
