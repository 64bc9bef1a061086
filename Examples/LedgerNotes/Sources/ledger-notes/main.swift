// A notes app that owns its store, an SQLite table of its own (`SQLiteTableSource`:
// `entities (kind, id, payload)`), synced by a `Ledger` kept in a file beside it.
// The app just writes and hard-deletes rows; a pass of the ledger diffs the table
// against its stamps, and a stamped row that is gone becomes a tombstone.
//   ledger-notes notes.db add n1 "buy milk"              offline: the pass only
//   ledger-notes notes.db delete n1
//   ledger-notes notes.db --hub http://127.0.0.1:8420 --invite CODE    (first time: founds an account)
//   ledger-notes other.db --hub http://127.0.0.1:8420 --keys notes.db.keys   (another store of it)
import Foundation
import Stele

struct Failure: Error, CustomStringConvertible { let description: String }

let usage = "usage: ledger-notes STORE [add ID TEXT | delete ID] [--hub URL [--invite CODE] [--keys F]]"
var words: [String] = []
var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let word = arguments.popFirst() {
    if word.hasPrefix("--") { options[word] = arguments.popFirst() ?? "" } else { words.append(word) }
}
guard let path = words.first else {
    print(usage)
    exit(2)
}

/// A hub client: a ledger client signs its sessions as a device of the account.
@MainActor func hubClient(_ hub: URL) throws -> HubClient {
    let keys = FileKeyStore(path: options["--keys"] ?? path + ".keys")
    if let ring = try keys.load() {
        guard let account = ring.roster?.account else { throw Failure(description: "\(keys.path) is not a member of an account yet") }
        return HubClient(hub: hub, account: account, identity: ring.identity)
    }
    // The first time: a new account, founded by this client (the hub-device
    // example shows the steps `Membership.found` takes).
    let identity = try DeviceIdentity.generate()
    let account = AccountID.generate()
    let founding = HubClient(hub: hub, account: account, identity: identity)
    try keys.save(try Membership.found(account, by: identity, in: HubDirectory(client: founding, invite: options["--invite"]), name: "ledger-notes"))
    print("founded      account \(account.hex) (key ring \(keys.path))")
    return founding
}

do {
    // The app's own store and its own writes: no Stele call is involved.
    let notes = try SQLiteTableSource(path: path)
    var deletedByUser = 0
    switch words.dropFirst().first {
    case "add" where words.count == 4:
        try notes.put(kind: "note", id: words[2], payload: Array(words[3].utf8))
        print("app wrote    \(words[2]) = \(words[3])")
    case "delete" where words.count == 3:
        // A hard delete: the row is simply gone; nothing in the table says it was there.
        let existed = try notes.payload(kind: "note", id: words[2]) != nil
        try notes.delete(kind: "note", id: words[2])
        deletedByUser = existed ? 1 : 0
        print("app deleted  \(words[2])\(existed ? "" : " (it was not there)")")
    case nil:
        break
    default:
        throw Failure(description: usage)
    }
    let emptiedByUser = try deletedByUser > 0 && notes.all().isEmpty

    let ledger: Ledger
    let report: Ledger.PassReport
    let sync: String?
    if let text = options["--hub"] {
        guard let hub = URL(string: text) else { throw Failure(description: "'\(text)' is not a URL") }
        let client = try hubClient(hub)
        // The ledger is bound to one account and hub, recorded in its file.
        ledger = try Ledger(path: path + ".ledger", source: notes, account: client.account.hex, hub: hub.absoluteString)
        let driver = LedgerDriver(sync: LedgerSync(ledger: ledger), transport: HubMirrorTransport(client: client))
        // The app confirms the deletions its user made: a pass that finds more (or an
        // empty store it was not told of) takes it for a wipe and halts, pushing nothing.
        driver.confirmingDeletions = deletedByUser
        driver.confirmingEmptyStore = emptiedByUser
        // A pass, then pushes and pulls; the hub's changes come back through the source's apply(_:).
        let synced = try driver.syncUntilQuiet()
        report = synced.pass
        sync = synced.unreachable ? "the hub is out of reach: the outbox waits" : "\(synced.pushes) push(es), then \(synced.changesApplied) change(s) from the hub applied"
    } else {
        // Offline: the pass alone. This ledger is bound to no hub; going online starts
        // the hub's ledger, whose first pass uploads the store as it is then.
        ledger = try Ledger(path: path + ".local-ledger", source: notes, account: "local", hub: "none")
        report = try ledger.pass(confirmingEmptyStore: emptiedByUser, confirmingDeletions: deletedByUser)
        sync = nil
    }
    print("pass         \(report.entities) note(s): \(report.upserts) new or changed, \(report.tombstones) deleted row(s) turned into tombstones")
    if let sync { print("sync         \(sync)") }

    for note in try notes.all() { print("  \(note.id)  \(String(decoding: note.payload, as: UTF8.self))") }
    // The stamps: one per entity ever seen; a tombstone is a stamp without a fingerprint.
    let tombstones = try ledger.stamps().filter(\.isTombstone).map(\.id)
    let status = try ledger.status()
    print("ledger       \(status.liveStamps) live stamp(s), tombstones: \(tombstones.isEmpty ? "none" : tombstones.joined(separator: ", ")); outbox \(status.pending) pending, \(status.failed) failed")
    if let halt = ledger.halt { print("halted       \(halt)") }
} catch {
    print("ledger-notes: \(error)")
    exit(1)
}
