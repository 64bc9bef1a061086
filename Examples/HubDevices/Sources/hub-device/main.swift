// One device of an account, syncing through a real hub (`stele-hub serve`).
// Run it once per device, each with its own store:
//   hub-device found phone.stele --hub http://127.0.0.1:8420 --invite CODE
//   hub-device join laptop.stele --hub http://127.0.0.1:8420 --account ACCOUNT
//   hub-device approve phone.stele DEVICE
//   hub-device run phone.stele put milk 2L      (and at the same time)   hub-device run laptop.stele
// A device keeps three files: STORE (the replica), STORE.keys (its key ring: the
// identity, the account keys, the pinned roster; the keychain in an app, kept out
// of the replica's backups) and STORE.device (the hub's URL and the account id).
import Foundation
import Stele

struct Failure: Error, CustomStringConvertible { let description: String }

let usage = """
    usage: hub-device found STORE --hub URL [--invite CODE] [--name NAME]
           hub-device join STORE --hub URL --account ID [--name NAME]
           hub-device approve STORE DEVICE
           hub-device run STORE [put KEY VALUE | delete KEY] [--seconds N]
    """
var words: [String] = []
var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let word = arguments.popFirst() {
    if word.hasPrefix("--") { options[word] = arguments.popFirst() ?? "" } else { words.append(word) }
}
guard words.count >= 2 else {
    print(usage)
    exit(2)
}
let command = words[0]
let store = words[1]
let keys = FileKeyStore(path: store + ".keys")
let settingsPath = store + ".device"

@MainActor func hubURL() throws -> URL {
    guard let text = options["--hub"], let url = URL(string: text) else { throw Failure(description: "--hub URL is required\n\(usage)") }
    return url
}

@MainActor func saveSettings(_ client: HubClient) throws {
    try "\(client.hub.absoluteString)\n\(client.account.hex)\n".write(toFile: settingsPath, atomically: true, encoding: .utf8)
}

/// The key ring and a hub client for this device, from the files `found` or `join` wrote.
@MainActor func loadDevice() throws -> (ring: KeyRing, client: HubClient) {
    guard let ring = try keys.load() else { throw Failure(description: "no key ring at \(keys.path): run found or join first") }
    let lines = try String(contentsOfFile: settingsPath, encoding: .utf8).split(separator: "\n").map(String.init)
    guard lines.count == 2, let hub = URL(string: lines[0]), let account = AccountID(hex: lines[1]) else { throw Failure(description: "\(settingsPath) is damaged") }
    return (ring, HubClient(hub: hub, account: account, identity: ring.identity))
}

do {
    switch command {
    case "found":
        let identity = try DeviceIdentity.generate()
        let client = HubClient(hub: try hubURL(), account: AccountID.generate(), identity: identity)
        // Creating the account: its founding roster is this device approving itself,
        // signed with its own key. The hub stores it (spending the invite code) and
        // can never add a device of its own: every device verifies the whole log.
        let roster = try Roster.founding(account: client.account, by: identity)
        try HubDirectory(client: client, invite: options["--invite"]).found(roster, name: options["--name"] ?? "founder")
        // The first account key (epoch 1), and roster pinning: the key ring keeps the
        // roster this device verified, so the hub can never serve it an older or forked one.
        try keys.save(KeyRing(identity: identity, accountKeys: [1: AccountKey.generate()], roster: roster))
        try saveSettings(client)
        print("account      \(client.account.hex)")
        print("device       \(identity.deviceID.hex)")
    case "join":
        guard let text = options["--account"], let account = AccountID(hex: text.lowercased()) else { throw Failure(description: "--account ID is required\n\(usage)") }
        let identity = try DeviceIdentity.generate()
        let client = HubClient(hub: try hubURL(), account: account, identity: identity)
        // A join request: the device id and its roster signing key, for a member to approve.
        try HubDirectory(client: client).requestJoin(name: options["--name"] ?? "joiner")
        // No roster and no account key yet: the runtime reads both once a member approves.
        try keys.save(KeyRing(identity: identity))
        try saveSettings(client)
        print("device       \(identity.deviceID.hex)")
        print("fingerprint  \(try DeviceFingerprint.of(identity))   <- approve prints it too: compare")
    case "approve":
        guard words.count == 3 else { throw Failure(description: usage) }
        let device = try loadDevice()
        var ring = device.ring
        let account = device.client.account
        let directory = HubDirectory(client: device.client)
        guard let request = try directory.joinRequests().first(where: { $0.device.hex.hasPrefix(words[2].lowercased()) }) else {
            throw Failure(description: "no device \(words[2]) asked to join")
        }
        guard let pinned = ring.roster, ring.newestEpoch != nil else {
            throw Failure(description: "this device is not a member yet: run it once it is approved")
        }
        // Roster pinning: the roster the hub serves must extend the one pinned here.
        var roster = try pinned.adopting(try directory.roster(of: account))
        let approval = try RosterChange.approval(of: request.device, signingKey: request.signingKey, by: ring.identity, account: account, index: roster.version)
        try directory.append(approval, to: account)
        try roster.append(approval)
        // Publishing the joiner's wrapped keys: every account key this device holds,
        // each sealed by a member for the joiner alone, so it opens anchors written
        // before it joined. The hub stores bytes it cannot open.
        for wrapped in try ring.wrappedKeys(for: request.device, account: account) { try directory.publish(wrapped) }
        ring.roster = roster  // pin the roster with the joiner on it
        try keys.save(ring)
        // (`Membership.approve(_:signingKey:by:in:)` does these steps in one call, and
        // signs again when another member changed the roster at the same moment.)
        print("approved     \(request.device.hex) (\(request.name))")
        print("fingerprint  \(request.fingerprint)")
    case "run":
        let (ring, client) = try loadDevice()
        // The replica, with its stamp floor in the key store (outside the replica's backups).
        let replica = try Replica.openOrCreate(
            at: store, account: client.account, device: ring.identity.deviceID, options: Replica.Options(stampFloor: keys))
        // The device: relay, long poll, timers, anchor and directory, all against the hub.
        // `.quick` paces the timers for a demo in seconds; an app keeps the defaults.
        let runtime = try FleetRuntime(replica: replica, keyStore: keys, client: client, configuration: .quick)
        // `.start`: takes the store's lock, reads the directory (pinning the roster it
        // adopts, opening the keys wrapped for this device), greets the siblings. A
        // device not approved yet waits for its approval and starts then.
        runtime.start()
        // The app's writes go through the runtime's replica and reach the node by themselves.
        try runtime.withReplica { replica in
            let notes = try replica.causal("notes")
            if words.count == 5, words[2] == "put" {
                try notes.put(words[3], Array(words[4].utf8))
                print("wrote        \(words[3]) = \(words[4])")
            } else if words.count == 4, words[2] == "delete" {
                print("deleted      \(words[3])\(try notes.delete(words[3]) == nil ? " (it was not there)" : "")")
            }
        }
        let seconds = Double(options["--seconds"] ?? "") ?? 10
        Task {
            try? await Task.sleep(for: .seconds(seconds))
            runtime.stop()
        }
        // Status as it changes, until the runtime stops (the timer above, or a fatal error).
        var last = ""
        for await status in runtime.statusUpdates() where status.description != last {
            last = status.description
            print("status       \(last)")
        }
        let rows = try runtime.withReplica { try $0.causal("notes").entries() }
        print("notes        " + (rows.isEmpty ? "(empty)" : rows.map { "\($0.key) = \(String(decoding: $0.value, as: UTF8.self))" }.joined(separator: ", ")))
        if let error = runtime.status.error, error.isFatal { throw Failure(description: error.message) }
    default:
        throw Failure(description: usage)
    }
} catch {
    print("hub-device: \(error)")
    exit(1)
}
