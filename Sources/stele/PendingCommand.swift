import Foundation
import Stele

/// `stele pending STORE [--json]`: a mirror store's queue of local intent (DESIGN
/// §8.2, seed 003 "What this costs": the queue must be inspectable), in intent
/// order, with the counts by state.
enum PendingCommand {
    static let usage = "usage: stele pending STORE [--json]   (STORE: a mirror client's store)"

    /// A failure of the store once opened (a storage error): one line, exit status 1.
    /// A path that names no mirror store is an input error, exit status 2, as for
    /// every command that takes a store (`stele inspect`, `stele status`).
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--json"], usage: usage)
        guard parsed.positionals.count == 1, let path = parsed.positionals.first else {
            throw UsageError(message: parsed.positionals.isEmpty ? "name the mirror store to list" : "pending takes one store", usage: usage)
        }
        try refuseWhatOpeningWouldAdopt(path)
        let store: MirrorStore
        let queue: [MirrorStore.QueuedMutation]
        let counts: (pending: Int, inFlight: Int, failed: Int)
        do {
            // Read-only: listing the queue writes nothing, not even SQLite's change counter.
            store = try MirrorStore(readingAt: path)
            queue = try store.queue()
            counts = try store.queueCounts()
        } catch let error as MirrorError {
            switch error.code {
            case .notAMirrorStore, .newerFormat, .invalidArgument: throw InputError(message: error.message)
            case .storage: throw Failure(description: error.message)
            }
        }
        if parsed.has("--json") {
            let listing = Listing(
                store: path, counts: Counts(total: queue.count, pending: counts.pending, inFlight: counts.inFlight, failed: counts.failed),
                mutations: queue.map(Entry.init))
            print(try jsonText(listing))
            return
        }
        guard !queue.isEmpty else {
            print("the queue is empty: nothing waits to be sent or echoed")
            return
        }
        print(
            table(
                ["mutation", "state", "attempts", "op", "kind", "id", "set/member", "expected", "last error"],
                queue.map { item in
                    [
                        item.mutation, item.state.rawValue, String(item.attempts), item.op, item.kind, item.id, setMember(item),
                        item.expectedHistoryID.map(String.init) ?? "-", item.lastError ?? "-",
                    ]
                }, numeric: [2, 7]))
        print("")
        print(
            "\(grouped(queue.count)) mutation\(queue.count == 1 ? "" : "s"): \(grouped(counts.pending)) pending, "
                + "\(grouped(counts.inFlight)) in flight, \(grouped(counts.failed)) failed")
    }

    /// `MirrorStore(path:)` creates a store where the file is missing, and makes
    /// one of an empty file or an empty database: listing must never do that, so
    /// those are refused here, before the store is opened, and left as they are.
    static func refuseWhatOpeningWouldAdopt(_ path: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw InputError(message: "no mirror store at \(path): the file does not exist (name the file the app's MirrorStore opened)")
        }
        guard !isDirectory.boolValue else { throw InputError(message: "\(path) is a directory, not a mirror store") }
        guard let handle = FileHandle(forReadingAtPath: path) else { throw InputError(message: "cannot read \(path)") }
        defer { try? handle.close() }
        let header = [UInt8]((try? handle.read(upToCount: 100)) ?? Data())
        guard !header.isEmpty else { throw InputError(message: "\(path) is empty, not a mirror store; choose another path") }
        // An SQLite database names its program in the header's application_id (bytes 68-71); a mirror store's is never 0.
        if header.count == 100, header.starts(with: Array("SQLite format 3\0".utf8)), header[68..<72].allSatisfy({ $0 == 0 }) {
            throw InputError(message: "\(path) is not a Stele mirror store; choose another path")
        }
    }

    static func setMember(_ item: MirrorStore.QueuedMutation) -> String {
        guard let set = item.set, let member = item.member else { return "-" }
        return "\(set)/\(member)"
    }

    // MARK: - JSON

    struct Listing: Encodable {
        let store: String
        let counts: Counts
        let mutations: [Entry]
    }

    struct Counts: Encodable {
        let total: Int
        let pending: Int
        let inFlight: Int
        let failed: Int
    }

    /// One queued mutation; absent values are `null`, so every entry has every key.
    struct Entry: Encodable {
        let item: MirrorStore.QueuedMutation

        init(_ item: MirrorStore.QueuedMutation) { self.item = item }

        private enum Keys: String, CodingKey {
            case mutation, state, attempts, op, kind, id, set, member, group, modifiedAt, expectedHistoryId, lastError, claimedBy, payloadBytes
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(item.mutation, forKey: .mutation)
            try container.encode(item.state.rawValue, forKey: .state)
            try container.encode(item.attempts, forKey: .attempts)
            try container.encode(item.op, forKey: .op)
            try container.encode(item.kind, forKey: .kind)
            try container.encode(item.id, forKey: .id)
            try container.encode(item.set, forKey: .set)
            try container.encode(item.member, forKey: .member)
            try container.encode(item.group, forKey: .group)
            try container.encode(item.modifiedAt, forKey: .modifiedAt)
            try container.encode(item.expectedHistoryID, forKey: .expectedHistoryId)
            try container.encode(item.lastError, forKey: .lastError)
            try container.encode(item.claimedBy, forKey: .claimedBy)
            try container.encode(item.payload?.count, forKey: .payloadBytes)
        }
    }
}
