import Foundation
import Stele
import SteleSQL

/// The mirror client's figures (DESIGN §8.2, seed 003 "Making it instant").
///
/// - `mirror.enqueue`: one label delta and the recompute of its thread's
///   rollup, one transaction each, against one raw SQLite INSERT of a row of
///   the same size per transaction, same file settings (WAL, synchronous=NORMAL);
///   `mirror.enqueue.floor` is the least a delta can commit (see ``enqueue(scale:directory:)``).
/// - `mirror.inbox`: the first 50 threads of the inbox among 100,000 threads
///   (1,000,000 records, 1,000 pending mutations), against the same query on a
///   plain table of the same threads with no overlay.
///
/// The canonical records are loaded through the store's own pull applier
/// (``MirrorStore/applyNew(page:next:epoch:)``), so the rollups read are the
/// ones the store computed; the pending mutations go through the public API.
enum MirrorBenchmarks {
    static let kind = "mail"
    static let labels = "labels"
    static let inbox = "INBOX"

    static func run(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        try enqueue(scale: scale, directory: directory) + [try inboxRead(scale: scale, directory: directory)]
    }

    /// 64 bytes that differ per record.
    static func payload(_ index: Int) -> [UInt8] {
        (0..<64).map { UInt8(truncatingIfNeeded: index &* 131 &+ $0 &* 7) }
    }

    static func message(_ thread: Int, _ index: Int) -> String { "msg-\(thread)-\(index)" }
    static func thread(_ thread: Int) -> String { "thread-\(thread)" }

    /// Loads `threads` threads of `perThread` messages through the pull applier,
    /// `threadsPerPage` threads per transaction; `labels(thread, message)` gives a message's labels.
    static func load(
        _ store: MirrorStore, threads: Int, perThread: Int, threadsPerPage: Int, base: Int64, labels: (Int, Int) -> [String]
    ) throws {
        var seq: Int64 = 0
        for start in stride(from: 0, to: threads, by: threadsPerPage) {
            var page: [MirrorStore.PulledRecord] = []
            page.reserveCapacity(threadsPerPage * perThread)
            for t in start..<min(start + threadsPerPage, threads) {
                for m in 0..<perThread {
                    seq += 1
                    page.append(
                        MirrorStore.PulledRecord(
                            kind: kind, id: message(t, m), payload: payload(t &* perThread &+ m), modifiedAt: base + Int64(t * perThread + m),
                            group: thread(t), sets: [Self.labels: labels(t, m)], seq: seq))
                }
            }
            try store.applyNew(page: page, next: seq, epoch: "bench")
        }
    }

    // MARK: - mirror.enqueue

    /// Rounds of the whole workload; the fastest of each side is reported (noise only adds time).
    static let rounds = 3

    /// `mirror.enqueue`, and `mirror.enqueue.floor`: the writes every delta must
    /// commit and nothing else, straight through SteleSQL on the store's own
    /// tables (the mutation counter counted, the queue row inserted into the
    /// queue's table and its three indexes, or deleted from them), to show where
    /// the ratio is bounded.
    static func enqueue(scale: BenchmarkSuite.Scale, directory: String) throws -> [BenchmarkFigure] {
        let threads = 500
        let perThread = 20
        let operations = 10_000 / scale.divisor
        let batch = 100
        let store = try MirrorStore(path: "\(directory)/mirror-enqueue.sqlite")
        try store.declareRollup(kind: kind, set: labels, member: inbox)
        // Every message of every thread carries INBOX, as in a mail inbox.
        try load(store, threads: threads, perThread: perThread, threadsPerPage: threads, base: 1_700_000_000_000) { _, _ in [inbox] }

        // The baseline: a table with the queue row's columns, one INSERT per transaction.
        let raw = try Connection(path: "\(directory)/raw-enqueue.sqlite")
        try raw.executeScript(
            """
            CREATE TABLE queue (qid INTEGER PRIMARY KEY, mutation TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL, op TEXT NOT NULL,
                set_name TEXT NOT NULL, member TEXT NOT NULL, modified_at INTEGER NOT NULL, ordinal INTEGER NOT NULL)
            """)
        var rawOrdinal: Int64 = 0
        let clientID = store.clientID
        let floor = try Connection(path: store.path)

        // Operation `i` toggles INBOX on one message: an even one removes it (a
        // new pending row, the rollup recomputed), the next odd one adds it back
        // (the pending row cancelled, the rollup recomputed), walking across threads.
        func target(_ i: Int) -> (String, Bool) {
            let pair = i / 2
            return (message(pair % threads, (pair / threads) % perThread), i % 2 == 0)
        }

        var best = (raw: Double.infinity, mirror: Double.infinity, floor: Double.infinity)
        for _ in 0..<rounds {
            var times = (raw: 0.0, mirror: 0.0, floor: 0.0)
            for start in stride(from: 0, to: operations, by: batch) {
                let range = start..<min(start + batch, operations)
                times.raw += try Stopwatch.time {
                    for i in range {
                        let (id, removing) = target(i)
                        rawOrdinal += 1
                        try raw.transaction {
                            let statement = try raw.cached(
                                "INSERT INTO queue (mutation, kind, id, op, set_name, member, modified_at, ordinal) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
                            try statement.bind(1, "\(clientID)-\(rawOrdinal)")
                            try statement.bind(2, kind)
                            try statement.bind(3, id)
                            try statement.bind(4, removing ? "remove" : "add")
                            try statement.bind(5, labels)
                            try statement.bind(6, inbox)
                            try statement.bind(7, Int64(1_800_000_000_000) + rawOrdinal)
                            try statement.bind(8, rawOrdinal)
                            try statement.step()
                        }
                    }
                }
                var unexpected: String?
                times.mirror += try Stopwatch.time {
                    for i in range {
                        let (id, removing) = target(i)
                        let result =
                            removing
                            ? try store.remove(kind: kind, id: id, set: labels, member: inbox)
                            : try store.add(kind: kind, id: id, set: labels, member: inbox)
                        if result != (removing ? .inserted : .cancelled) { unexpected = "\(removing ? "remove" : "add") \(id) was \(result)" }
                    }
                }
                if let unexpected { throw BenchmarkError("mirror.enqueue: \(unexpected)") }
                times.floor += try Stopwatch.time {
                    for i in range {
                        let (id, removing) = target(i)
                        try floor.transaction {
                            let counted = try floor.cached(
                                "INSERT INTO mirror_meta (name, value) VALUES ('counter', 1) ON CONFLICT (name) DO UPDATE SET value = value + 1 RETURNING value")
                            guard try counted.step() else { throw BenchmarkError("mirror.enqueue.floor: the counter did not count") }
                            let number = counted.int64(0)
                            counted.reset()
                            if removing {
                                let insert = try floor.cached(
                                    "INSERT INTO mirror_queue (mutation, kind, id, op, set_name, member, modified_at, ordinal) VALUES (?, ?, ?, 'remove', ?, ?, ?, ?)")
                                try insert.bind(1, "\(clientID)-\(number)")
                                try insert.bind(2, kind)
                                try insert.bind(3, id)
                                try insert.bind(4, labels)
                                try insert.bind(5, inbox)
                                try insert.bind(6, Int64(1_800_000_000_000) + number)
                                try insert.bind(7, number)
                                try insert.step()
                            } else {
                                let delete = try floor.cached("DELETE FROM mirror_queue WHERE kind = ? AND id = ? AND set_name = ? AND member = ?")
                                try delete.bind(1, kind)
                                try delete.bind(2, id)
                                try delete.bind(3, labels)
                                try delete.bind(4, inbox)
                                try delete.step()
                            }
                        }
                    }
                }
            }
            guard try store.queue().isEmpty else { throw BenchmarkError("mirror.enqueue: the queue is not empty after every delta was cancelled") }
            best = (min(best.raw, times.raw), min(best.mirror, times.mirror), min(best.floor, times.floor))
        }
        return [
            BenchmarkFigure(
                name: "mirror.enqueue", value: Double(operations) / best.mirror, unit: "ops/s", baseline: Double(operations) / best.raw, target: .ratioAtLeast(0.5)),
            BenchmarkFigure(name: "mirror.enqueue.floor", value: Double(operations) / best.floor, unit: "ops/s", baseline: Double(operations) / best.raw),
        ]
    }

    // MARK: - mirror.inbox

    static func inboxRead(scale: BenchmarkSuite.Scale, directory: String) throws -> BenchmarkFigure {
        let threads = 100_000 / scale.divisor
        let perThread = 10
        let pendingRemoves = 500 / scale.divisor
        let pendingAdds = 500 / scale.divisor
        let reads = 1_000
        let base: Int64 = 1_700_000_000_000
        // Three threads in four are in the inbox, by their last three messages; the newest message of every thread is unread.
        func canonicallyInInbox(_ t: Int) -> Bool { t % 4 != 0 }
        let store = try MirrorStore(path: "\(directory)/mirror-inbox.sqlite")
        try store.declareRollup(kind: kind, set: labels, member: inbox)
        try load(store, threads: threads, perThread: perThread, threadsPerPage: 10_000, base: base) { t, m in
            var labels: [String] = []
            if canonicallyInInbox(t) && m >= perThread - 3 { labels.append(inbox) }
            if m == perThread - 1 { labels.append("UNREAD") }
            return labels
        }

        // The pending mutations, each through the public API in its own transaction:
        // INBOX removed from the newest inbox threads' messages (archives), and
        // added to the newest message of the newest threads outside it.
        var archived: Set<Int> = []
        var removed = 0
        var t = threads - 1
        while removed < pendingRemoves && t >= 0 {
            if canonicallyInInbox(t) {
                var left = 3
                for m in (perThread - 3)..<perThread where removed < pendingRemoves {
                    try store.remove(kind: kind, id: message(t, m), set: labels, member: inbox)
                    removed += 1
                    left -= 1
                }
                if left == 0 { archived.insert(t) }
            }
            t -= 1
        }
        var added: Set<Int> = []
        t = threads - 1
        while added.count < pendingAdds && t >= 0 {
            if !canonicallyInInbox(t) {
                try store.add(kind: kind, id: message(t, perThread - 1), set: labels, member: inbox)
                added.insert(t)
            }
            t -= 1
        }
        let counts = try store.queueCounts()
        guard counts.pending == pendingRemoves + pendingAdds else {
            throw BenchmarkError("mirror.inbox: \(counts.pending) mutations are pending, not \(pendingRemoves + pendingAdds)")
        }

        // The effective inbox, newest first: what both sides must read.
        func effectivelyInInbox(_ t: Int) -> Bool { (canonicallyInInbox(t) && !archived.contains(t)) || added.contains(t) }
        let expected = (0..<threads).reversed().lazy.filter(effectivelyInInbox).prefix(50).map(thread)

        // The baseline: the same threads' flags in a plain table, no overlay, same file settings.
        let plain = try Connection(path: "\(directory)/plain-inbox.sqlite")
        try plain.executeScript(
            """
            CREATE TABLE threads (grp TEXT PRIMARY KEY, in_inbox INTEGER NOT NULL, latest INTEGER NOT NULL) WITHOUT ROWID;
            CREATE INDEX threads_inbox ON threads (in_inbox, latest DESC, grp);
            """)
        try plain.transaction {
            for t in 0..<threads {
                try plain.execute(
                    "INSERT INTO threads (grp, in_inbox, latest) VALUES (?, ?, ?)",
                    [.text(thread(t)), .integer(effectivelyInInbox(t) ? 1 : 0), .integer(base + Int64(t * perThread + perThread - 1))])
            }
        }
        let plainQuery = "SELECT grp FROM threads WHERE in_inbox = ? ORDER BY latest DESC, grp LIMIT ?"
        func readPlain() throws -> [String] { try plain.query(plainQuery, [.integer(1), .integer(50)]) { $0.text(0) } }
        func readMirror() throws -> [String] { try store.groups(kind: kind, set: labels, member: inbox, limit: 50) }
        guard try readMirror() == Array(expected), try readPlain() == Array(expected) else {
            throw BenchmarkError("mirror.inbox: the inbox read is not the expected first 50 threads")
        }

        // Rounds alternate the two sides; the fastest round of each is reported.
        var best = (plain: Double.infinity, mirror: Double.infinity)
        for _ in 0..<5 {
            let plainTime = try Stopwatch.time { for _ in 0..<reads { _ = try readPlain() } }
            let mirrorTime = try Stopwatch.time { for _ in 0..<reads { _ = try readMirror() } }
            best = (min(best.plain, plainTime), min(best.mirror, mirrorTime))
        }
        return BenchmarkFigure(
            name: "mirror.inbox", value: best.mirror / Double(reads), unit: "seconds", baseline: best.plain / Double(reads), target: .ratioAtMost(1.2))
    }
}
