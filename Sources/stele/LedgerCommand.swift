import Foundation
import Stele

/// `stele ledger PATH [--json] [--stamps N]`: a ledger client's bookkeeping
/// (DESIGN §8.3, seed 002): the store's identity, the cursor, the stamps and the
/// outbox, and whether sync is halted and why. It opens nothing for writing and
/// syncs nothing.
enum LedgerCommand {
    static let usage = """
        usage: stele ledger PATH [--json] [--stamps N]
          PATH         the ledger file, or the app's store with its ledger beside it (PATH.ledger)
          --json       one JSON object
          --stamps N   list at most N stamps (default 50; 0 for none)
        """

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--json"], options: ["--stamps"], usage: usage)
        guard parsed.positionals.count == 1, let given = parsed.positionals.first else {
            throw UsageError(message: parsed.positionals.isEmpty ? "name the ledger to show" : "ledger takes one path", usage: usage)
        }
        var limit = 50
        if let text = parsed.options["--stamps"] {
            guard let value = Int(text), value >= 0 else { throw UsageError(message: "--stamps needs a whole number, got \(text)", usage: usage) }
            limit = value
        }
        let path = try ledgerPath(given)
        let ledger: Ledger
        let status: Ledger.Status
        var stamps: [Ledger.Stamp] = []
        var outbox: [Ledger.Outgoing] = []
        do {
            ledger = try Ledger.inspecting(path: path)
            status = try ledger.status()
            // A halted corrupt file is not read further: its stamps are evidence, not data.
            stamps = (try? ledger.stamps()) ?? []
            outbox = (try? ledger.outbox()) ?? []
        } catch let error as LedgerError {
            throw InputError(message: error.message)
        }
        if parsed.has("--json") {
            print(try jsonText(Listing(status, stamps: Array(stamps.prefix(limit)), outbox: outbox)))
            return
        }
        print("ledger      \(status.path)")
        print("account     \(status.account.isEmpty ? "-" : status.account)")
        print("hub         \(status.hub.isEmpty ? "-" : status.hub)")
        if let halt = status.halt {
            print("sync        HALTED (\(halt.code.rawValue)): \(halt.message)")
            if [.corrupt, .newerFormat].contains(halt.code) {
                print("            the file is kept as it is; the app's reset() moves it aside and starts a fresh ledger")
                return
            }
        } else if status.adopting {
            print("sync        running: the first download after a reset (the passes compare again once it ends)")
        } else if let replay = status.replaying {
            print("sync        running: a replay (\(replay)) is under way")
        } else {
            print("sync        running")
        }
        print("store       identity \(status.storeIdentity ?? "- (no pass yet)"), \(status.entityCount.map { "\(grouped($0)) entities" } ?? "no count") at the last pass")
        print("cursor      epoch \(status.cursorEpoch ?? "-"), history id \(status.cursorHistoryID)")
        print("stamps      \(grouped(status.liveStamps)) live, \(grouped(status.tombstones)) tombstone\(status.tombstones == 1 ? "" : "s")")
        print("outbox      \(grouped(status.pending)) pending, \(grouped(status.failed)) failed")
        if status.clockCorrection != 0 {
            print("clock       writes dated \(status.clockCorrection > 0 ? "+" : "")\(status.clockCorrection) ms from this device's clock, by the hub's time")
        }
        if limit > 0, !stamps.isEmpty {
            print("")
            print(
                table(
                    ["kind", "id", "fingerprint", "modified", "seq", "note"],
                    stamps.prefix(limit).map { stamp in
                        [
                            stamp.kind, stamp.id, stamp.fingerprint.map { String($0.description.prefix(16)) } ?? "tombstone", time(stamp.modifiedAt), String(stamp.seq),
                            stamp.unsent ? "the hub lacks it: sent again at the next pass" : (stamp.seq == 0 ? "not answered yet" : ""),
                        ]
                    }, numeric: [4]))
            if stamps.count > limit { print("... \(grouped(stamps.count - limit)) more (--stamps N shows more)") }
        }
        if !outbox.isEmpty {
            print("")
            print(
                table(
                    ["mutation", "state", "attempts", "op", "kind", "id", "modified", "last error"],
                    outbox.map { [$0.mutation, $0.state, String($0.attempts), $0.op, $0.kind, $0.id, time($0.modifiedAt), $0.lastError ?? "-"] }, numeric: [2]))
        }
    }

    /// The ledger file `given` names: itself, or the ledger beside an app's store.
    static func ledgerPath(_ given: String) throws -> String {
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: given + ".ledger") && !given.hasSuffix(".ledger") { return given + ".ledger" }
        guard manager.fileExists(atPath: given, isDirectory: &isDirectory) || manager.fileExists(atPath: given + ".halted") else {
            throw InputError(message: "no ledger at \(given): neither the file nor \(given).ledger exists (name the ledger file, or the app's store beside it)")
        }
        guard !isDirectory.boolValue else { throw InputError(message: "\(given) is a directory, not a ledger") }
        // A file that is no SQLite database at all is not a ledger (one that is damaged
        // inside shows as halted, corrupt: its stamps are the app's evidence).
        if let handle = FileHandle(forReadingAtPath: given) {
            let head = (try? handle.read(upToCount: 16)) ?? Data()
            try? handle.close()
            if head != Data("SQLite format 3\u{0}".utf8) {
                throw InputError(message: "\(given) is not a ledger: it is no SQLite database (name the ledger file, or the app's store beside it)")
            }
        }
        return given
    }

    private static func time(_ milliseconds: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    private struct Listing: Encodable {
        struct Halt: Encodable {
            let code: String
            let message: String
        }

        struct Stamp: Encodable {
            let kind: String
            let id: String
            let fingerprint: String?
            let modifiedAt: Int64
            let seq: Int64
            let unsent: Bool
        }

        struct Outgoing: Encodable {
            let mutation: String
            let state: String
            let attempts: Int
            let op: String
            let kind: String
            let id: String
            let modifiedAt: Int64
            let lastError: String?
        }

        let ledger: String
        let account: String
        let hub: String
        let halted: Bool
        let halt: Halt?
        let adopting: Bool
        let replaying: String?
        let storeIdentity: String?
        let entityCount: Int?
        let cursorEpoch: String?
        let cursorHistoryId: Int64
        let liveStamps: Int
        let tombstones: Int
        let pending: Int
        let failed: Int
        let clockCorrection: Int64
        let stamps: [Stamp]
        let outbox: [Outgoing]

        init(_ status: Ledger.Status, stamps: [Ledger.Stamp], outbox: [Ledger.Outgoing]) {
            ledger = status.path
            account = status.account
            hub = status.hub
            halted = status.halt != nil
            halt = status.halt.map { Halt(code: $0.code.rawValue, message: $0.message) }
            adopting = status.adopting
            replaying = status.replaying
            storeIdentity = status.storeIdentity
            entityCount = status.entityCount
            cursorEpoch = status.cursorEpoch
            cursorHistoryId = status.cursorHistoryID
            liveStamps = status.liveStamps
            tombstones = status.tombstones
            pending = status.pending
            failed = status.failed
            clockCorrection = status.clockCorrection
            self.stamps = stamps.map { Stamp(kind: $0.kind, id: $0.id, fingerprint: $0.fingerprint.map { $0.bytes.map { String(format: "%02x", $0) }.joined() }, modifiedAt: $0.modifiedAt, seq: $0.seq, unsent: $0.unsent) }
            self.outbox = outbox.map {
                Outgoing(mutation: $0.mutation, state: $0.state, attempts: $0.attempts, op: $0.op, kind: $0.kind, id: $0.id, modifiedAt: $0.modifiedAt, lastError: $0.lastError)
            }
        }
    }
}
