import Foundation
import Stele
import SteleSQL

/// `sync.reconcile_small_diff.*` and `sync.delete_batch*` (issue: fleet sync).
///
/// Two nodes exchange frames directly, each reply handed to the other at once,
/// so the figures count what the protocol sends and how many turns it takes,
/// with no network model in between.
enum SyncBenchmarks {
    /// Frames and bytes of one exchange, and whether it ended converged.
    struct Exchange {
        var frames = 0
        var bytes = 0
        /// The same frames without deflate: what compression saves.
        var uncompressedBytes = 0
        var seconds = 0.0
    }

    /// Replica `a` advertises to `b`; frames go back and forth until neither has
    /// anything to send (timers are not fired: an exchange needs none). Each node
    /// runs in the driver apps run, in the in-memory environment with frames
    /// arriving at once. With `identities`, the nodes are the sealed ones apps
    /// build (``SiblingChannel``); without, the unsealed baseline. Collection is
    /// off in both, so the only replies are reconcile frames.
    static func exchange(from a: Replica, to b: Replica, seed: UInt64, identities: (DeviceIdentity, DeviceIdentity)? = nil) throws -> Exchange {
        let roster: Set<DeviceID> = [a.device, b.device]
        let configuration = FleetConfiguration(collects: false)
        let world = MemoryFleet()
        world.frameLatencyMilliseconds = 0
        let drivers: [FleetDriver]
        if let identities {
            var signed = try Roster.founding(account: a.account, by: identities.0)
            try signed.append(
                try RosterChange.approval(of: identities.1.deviceID, signingKey: try identities.1.signingKey(), by: identities.0, account: a.account, index: signed.version))
            drivers = try [(a, identities.0, seed), (b, identities.1, seed &+ 1)].map { replica, identity, seed in
                try FleetDriver(
                    replica: replica, identity: identity, keyStore: MemoryKeyStore(KeyRing(identity: identity, roster: signed)),
                    environment: world.environment(for: replica.device), configuration: configuration, random: SplitMix64(seed: seed))
            }
        } else {
            drivers = [(a, seed), (b, seed &+ 1)].map { replica, seed in
                FleetDriver(
                    unsealed: replica, roster: roster, accountKeys: [], environment: world.environment(for: replica.device), configuration: configuration,
                    random: SplitMix64(seed: seed))
            }
        }
        for driver in drivers {
            driver.deliversLocalChanges = false
            world.attach(driver)
        }
        var exchange = Exchange()
        let watch = Stopwatch()
        // The change debounce ending is what makes a device advertise after a write.
        drivers[0].handle(.timer(.changeDebounce))
        world.run(forMilliseconds: 0)
        exchange.seconds = watch.elapsedSeconds
        let sent = world.sent.map(\.bytes)
        exchange.frames = sent.count
        exchange.bytes = sent.reduce(0) { $0 + $1.count }
        if identities == nil {
            exchange.uncompressedBytes = sent.reduce(0) { total, bytes in
                total + ((try? FrameCodec.decode(bytes)).map { FrameCodec.encode($0, compress: false).count } ?? bytes.count)
            }
        }
        for driver in drivers { driver.stop() }
        return exchange
    }

    /// Two replicas holding the same `count` rows of 100-byte values.
    static func twins(_ directory: String, _ name: String, count: Int) throws -> (Replica, Replica, [String]) {
        let (a, b, keys, _) = try twinsWithIdentities(directory, name, count: count)
        return (a, b, keys)
    }

    /// ``twins(_:_:count:)`` with the devices' identities, for sealed exchanges.
    static func twinsWithIdentities(_ directory: String, _ name: String, count: Int) throws -> (Replica, Replica, [String], (DeviceIdentity, DeviceIdentity)) {
        let account = AccountID.generate()
        let identities = (try DeviceIdentity.generate(), try DeviceIdentity.generate())
        let a = try Replica.create(at: "\(directory)/\(name)-a.stele", account: account, device: identities.0.deviceID)
        let b = try Replica.create(at: "\(directory)/\(name)-b.stele", account: account, device: identities.1.deviceID)
        let keys = LocalWriteBenchmarks.keys(count)
        let notes = try a.causal("notes")
        for start in stride(from: 0, to: count, by: 1_000) {
            try a.write { for index in start..<min(start + 1_000, count) { try notes.put(keys[index], LocalWriteBenchmarks.value(index)) } }
        }
        let copy = try b.causal("notes")
        let records = try notes.records()
        for start in stride(from: 0, to: records.count, by: 1_000) {
            try b.write { for record in records[start..<min(start + 1_000, records.count)] { try copy.apply(record) } }
        }
        return (a, b, keys, identities)
    }

    static func smallDiff(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let count = 100_000 / scale.divisor
        let (a, b, keys) = try twins(directory, "small-diff", count: count)
        // 100 differing rows, 50 each side: 25 new keys and 25 edits on each.
        var payload = 0
        for (replica, tag) in [(a, "a"), (b, "b")] {
            let notes = try replica.causal("notes")
            for index in 0..<25 {
                let key = "new-\(tag)-\(index)"
                let value = LocalWriteBenchmarks.value(1_000_000 + index)
                try notes.put(key, value)
                payload += key.utf8.count + value.count
                let edited = keys[(index * 3_989 + (tag == "a" ? 0 : 17)) % count]
                try notes.put(edited, value)
                payload += edited.utf8.count + value.count
            }
        }
        let baseline = try a.causal("notes").entries().reduce(0) { $0 + $1.key.utf8.count + 16 }
        let exchange = try exchange(from: a, to: b, seed: 11)
        guard try a.digest(of: "notes") == b.digest(of: "notes") else {
            throw BenchmarkError("the small-diff reconcile did not converge")
        }
        let limit = Double(64 * 1_024 + 2 * payload)
        return [
            BenchmarkFigure(
                name: "sync.reconcile_small_diff.bytes", value: Double(exchange.bytes), unit: "bytes", baseline: Double(baseline),
                target: .valueAtMost(limit)),
            BenchmarkFigure(
                name: "sync.reconcile_small_diff.round_trips", value: Double((exchange.frames + 1) / 2), unit: "round trips",
                target: .valueAtMost(6)),
            BenchmarkFigure(name: "sync.reconcile_small_diff.bytes.uncompressed", value: Double(exchange.uncompressedBytes), unit: "bytes"),
        ]
    }

    /// Rounds of `sync.delete_batch`; the fastest of each side is kept (noise only adds time).
    static let deleteBatchRounds = 2

    static func deleteBatch(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let count = 100_000 / scale.divisor
        var best = (exchange: Double.infinity, raw: Double.infinity, floor: Double.infinity, sealed: Double.infinity)
        var bytes = 0
        var uncompressed = 0
        var deleted = 0
        var sealedBytes = 0
        for round in 0..<deleteBatchRounds {
            let (a, b, keys, identities) = try twinsWithIdentities(directory, "delete-batch-\(round)", count: count)
            let doomed = LocalWriteBenchmarks.deleted(keys)
            deleted = doomed.count
            let notesA = try a.causal("notes")
            try a.write { for key in doomed { try notesA.delete(key) } }
            // B edits 1,000 rows, half of them among A's deletes (those edits survive: add-wins).
            let notesB = try b.causal("notes")
            let edits = count / 100
            try b.write {
                for index in 0..<edits {
                    let key = index % 2 == 0 ? doomed[(index * 7) % doomed.count] : keys[(index * 10) % count]
                    try notesB.put(key, LocalWriteBenchmarks.value(2_000_000 + index))
                }
            }
            // The floor: B's file as it is now, and only the two statements per key
            // that applying a tombstone over a live row needs (``DeleteFloor``).
            let floorPath = "\(directory)/delete-batch-floor-\(round).stele"
            try b.backup(to: floorPath)
            // The same two stores again, for the same exchange with sealing (crypto.sync_overhead);
            // the rounds alternate which goes first.
            let sealedPaths = ("\(directory)/delete-batch-sealed-\(round)-a.stele", "\(directory)/delete-batch-sealed-\(round)-b.stele")
            try a.backup(to: sealedPaths.0)
            try b.backup(to: sealedPaths.1)
            let sealedA = try Replica.open(at: sealedPaths.0, account: a.account, device: a.device)
            let sealedB = try Replica.open(at: sealedPaths.1, account: b.account, device: b.device)
            var sealed = Exchange()
            if round % 2 == 1 { sealed = try exchange(from: sealedA, to: sealedB, seed: 12, identities: identities) }
            let exchange = try exchange(from: a, to: b, seed: 12)
            if round % 2 == 0 { sealed = try Self.exchange(from: sealedA, to: sealedB, seed: 12, identities: identities) }
            guard try a.digest(of: "notes") == b.digest(of: "notes"), try sealedA.digest(of: "notes") == a.digest(of: "notes"),
                try sealedB.digest(of: "notes") == b.digest(of: "notes"), sealed.frames == exchange.frames
            else {
                throw BenchmarkError("the delete-batch reconcile did not converge, or the sealed exchange took other frames")
            }
            best.sealed = min(best.sealed, sealed.seconds)
            sealedBytes = sealed.bytes
            bytes = exchange.bytes
            uncompressed = exchange.uncompressedBytes
            best.exchange = min(best.exchange, exchange.seconds)
            best.raw = min(best.raw, try rawDelete(directory: directory, round: round, keys: keys, doomed: doomed))
            let floor = try DeleteFloor(path: floorPath)
            best.floor = min(best.floor, try Stopwatch.time { try floor.delete(doomed) })
        }
        return [
            BenchmarkFigure(name: "sync.delete_batch", value: best.exchange, unit: "seconds", baseline: best.raw, target: .ratioAtMost(3.0)),
            BenchmarkFigure(
                name: "sync.delete_batch.wire_bytes_per_deleted_key", value: Double(bytes) / Double(deleted), unit: "bytes",
                target: .valueAtMost(11)),
            BenchmarkFigure(
                name: "sync.delete_batch.wire_bytes_per_deleted_key.uncompressed", value: Double(uncompressed) / Double(deleted), unit: "bytes"),
            // What applying the tombstones alone must cost in SQLite: the bound under the ratio above.
            BenchmarkFigure(name: "sync.delete_batch.apply_floor", value: best.floor, unit: "seconds", baseline: best.raw),
            // Issue 6: sealing must not be the bottleneck.
            BenchmarkFigure(name: "crypto.sync_overhead", value: best.sealed, unit: "seconds", baseline: best.exchange, target: .ratioAtMost(1.2)),
            BenchmarkFigure(name: "crypto.sync_overhead.wire_bytes", value: Double(sealedBytes), unit: "bytes", baseline: Double(bytes)),
        ]
    }

    /// The baseline: a raw SQLite DELETE of the same keys in one transaction.
    static func rawDelete(directory: String, round: Int, keys: [String], doomed: [String]) throws -> Double {
        let raw = try Connection(path: "\(directory)/delete-batch-raw-\(round).db")
        try raw.executeScript("CREATE TABLE kv (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID")
        try raw.transaction {
            let insert = try raw.cached("INSERT INTO kv (key, value) VALUES (?, ?)")
            for (index, key) in keys.enumerated() {
                insert.reset()
                try insert.bind(1, key)
                try insert.bind(2, LocalWriteBenchmarks.value(index))
                try insert.step()
            }
        }
        return try Stopwatch.time {
            try raw.transaction {
                let delete = try raw.cached("DELETE FROM kv WHERE key = ?")
                for key in doomed {
                    delete.reset()
                    try delete.bind(1, key)
                    try delete.step()
                }
            }
        }
    }
}

