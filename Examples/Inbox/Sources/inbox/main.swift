// A mail client's inbox over a `MirrorStore`: the hub holds the truth, the store
// mirrors it and queues the user's writes. Every write shows at once (the queue
// is overlaid on what the hub said); with `--hub` the queue is flushed and the
// hub's changes pulled, without it the writes wait in the queue for a later run.
//   inbox mail.mirror new t1 "lunch?"                 offline: queued only
//   inbox mail.mirror archive t1
//   inbox mail.mirror --hub http://127.0.0.1:8420 --invite CODE    (first time: founds an account)
//   inbox other.mirror --hub http://127.0.0.1:8420 --keys mail.mirror.keys   (a second client of it)
import Foundation
import Stele

struct Failure: Error, CustomStringConvertible { let description: String }

var words: [String] = []
var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let word = arguments.popFirst() {
    if word.hasPrefix("--") { options[word] = arguments.popFirst() ?? "" } else { words.append(word) }
}
guard let path = words.first else {
    print("usage: inbox STORE [new THREAD TEXT | archive THREAD] [--hub URL [--invite CODE] [--keys F]]")
    exit(2)
}

/// A hub client: a mirror client signs its sessions as a device of the account.
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
    try keys.save(try Membership.found(account, by: identity, in: HubDirectory(client: founding, invite: options["--invite"]), name: "inbox"))
    print("founded      account \(account.hex) (key ring \(keys.path))")
    return founding
}

do {
    let store = try MirrorStore(path: path)
    // The rollup "some message of the thread carries INBOX in its labels": kept up
    // to date in the same transaction as every write and every pull.
    try store.declareRollup(kind: "mail", set: "labels", member: "INBOX")

    // The user's action: a write into the queue, shown by every read at once.
    switch words.dropFirst().first {
    case "new" where words.count == 4:
        let thread = words[2]
        let id = "\(thread).\(try store.groupMembers(kind: "mail", group: thread).count + 1)"
        try store.put(kind: "mail", id: id, payload: Array(words[3].utf8), group: thread)
        try store.add(kind: "mail", id: id, set: "labels", member: "INBOX")
        print("new          \(id) in thread \(thread), labelled INBOX")
    case "archive" where words.count == 3:
        // Archive: INBOX leaves every message of the thread, so its rollup turns false.
        let changed = try store.removeFromGroup(kind: "mail", group: words[2], set: "labels", member: "INBOX")
        print("archived     \(words[2]) (\(changed.count) message\(changed.count == 1 ? " loses" : "s lose") INBOX)")
    case nil:
        break
    default:
        throw Failure(description: "usage: inbox STORE [new THREAD TEXT | archive THREAD] [--hub URL [--invite CODE] [--keys F]]")
    }

    if let text = options["--hub"] {
        guard let hub = URL(string: text) else { throw Failure(description: "'\(text)' is not a URL") }
        // Flush the queue, pull the hub's changes, retry with back-off. A mutation
        // retires only when its change comes back in a pull (its echo).
        let driver = MirrorDriver(sync: MirrorSync(store: store), transport: HubMirrorTransport(client: try hubClient(hub)))
        let report = try driver.syncUntilQuiet()
        print(report.unreachable ? "sync         the hub is out of reach: the queue waits" : "sync         \(report.pushes) push(es), \(report.changesApplied) change(s) pulled")
    }

    // Reads compose what the hub said with what the queue still holds.
    let inbox = try store.groups(kind: "mail", set: "labels", member: "INBOX")
    print("inbox        \(inbox.isEmpty ? "(empty)" : inbox.joined(separator: ", "))")
    for thread in inbox {
        let messages = try store.groupMembers(kind: "mail", group: thread)
        let latest = try messages.last.flatMap { try store.value(kind: "mail", id: $0) }.map { String(decoding: $0, as: UTF8.self) } ?? ""
        print("  \(thread)  \(messages.count) message\(messages.count == 1 ? "" : "s"), latest: \(latest)")
    }
    let queued = try store.queueCounts()
    print("queue        \(queued.pending) pending, \(queued.inFlight) in flight, \(queued.failed) failed")
    for conflict in try store.conflicts() { print("conflict     \(conflict.kind) \(conflict.id): \(conflict.reason)") }
} catch {
    print("inbox: \(error)")
    exit(1)
}
