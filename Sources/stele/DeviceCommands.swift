import Foundation
import Stele

/// `stele init|join|approve|revoke STORE ...`: setting a device up on a hub and
/// changing who belongs to the account (HUB-API.md "stele as a device").
enum DeviceCommands {
    static let initUsage = "usage: stele init STORE --hub URL [--invite CODE] [--name NAME] [--keys F]"
    static let joinUsage = "usage: stele join STORE --hub URL --account ID [--name NAME] [--keys F]"
    static let approveUsage = "usage: stele approve STORE DEVICE [--fingerprint XXXX-XXXX-XXXX] [--keys F] [--hub URL]"
    static let revokeUsage = "usage: stele revoke STORE DEVICE [--keys F] [--hub URL]"

    /// `stele init`: a new account on the hub, founded by this new device.
    static func initialize(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: [], options: ["--hub", "--invite", "--name", "--keys"], usage: initUsage)
        let files = try newDevice(parsed, usage: initUsage, what: "init")
        let hub = try DeviceFiles.url(parsed.options["--hub"] ?? "")
        let identity = try DeviceIdentity.generate()
        let account = AccountID.generate()
        let name = parsed.options["--name"] ?? ProcessInfo.processInfo.hostName
        let client = HubClient(hub: hub, account: account, identity: identity)
        let ring = try hubErrors(hub) {
            try Membership.found(account, by: identity, in: HubDirectory(client: client, invite: parsed.options["--invite"]), name: name)
        }
        try create(files, ring: ring, account: account, hub: hub)
        print("account      \(account.hex)")
        print("device       \(identity.deviceID.hex)")
        print("fingerprint  \(try DeviceFingerprint.of(identity))")
        print("This device founded the account on \(hub.absoluteString). Declare namespaces (stele namespace \(files.store) NS causal), then keep it syncing: stele sync \(files.store) --watch")
        print("Another device joins with: stele join ITS_STORE --hub \(hub.absoluteString) --account \(account.hex)")
    }

    /// `stele join`: a new device asks to join an account; a member approves it.
    static func join(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: [], options: ["--hub", "--account", "--name", "--keys"], usage: joinUsage)
        let files = try newDevice(parsed, usage: joinUsage, what: "join")
        let hub = try DeviceFiles.url(parsed.options["--hub"] ?? "")
        guard let text = parsed.options["--account"] else { throw UsageError(message: "--account ID is required: the account to join (its founder's stele init printed it)", usage: joinUsage) }
        guard let account = AccountID(hex: text.lowercased()) else { throw UsageError(message: "'\(text)' is not an account id (32 hex digits)", usage: joinUsage) }
        let identity = try DeviceIdentity.generate()
        let client = HubClient(hub: hub, account: account, identity: identity)
        try hubErrors(hub) { try HubDirectory(client: client).requestJoin(name: parsed.options["--name"] ?? ProcessInfo.processInfo.hostName) }
        try create(files, ring: KeyRing(identity: identity), account: account, hub: hub)
        print("device       \(identity.deviceID.hex)")
        print("fingerprint  \(try DeviceFingerprint.of(identity))")
        print("Asked to join account \(account.hex). On a member device run:")
        print("  stele approve MEMBER_STORE \(identity.deviceID.hex)")
        print("and check it shows the same fingerprint. Then: stele sync \(files.store) --watch")
    }

    /// `stele approve`: a member approves a join request and wraps the account key for it.
    static func approve(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: [], options: ["--fingerprint", "--keys", "--hub"], usage: approveUsage)
        guard parsed.positionals.count == 2 else {
            throw UsageError(message: "expected a store and the device to approve, got \(parsed.positionals.count) argument\(parsed.positionals.count == 1 ? "" : "s")", usage: approveUsage)
        }
        let files = DeviceFiles(store: parsed.positionals[0], keys: parsed.options["--keys"])
        let (client, ring) = try member(files, hub: parsed.options["--hub"])
        let directory = HubDirectory(client: client)
        let requests = try hubErrors(client.hub) { try directory.joinRequests() }
        let wanted = parsed.positionals[1].lowercased()
        let members = ring.roster?.members ?? []
        let request = try pick(wanted, among: requests.map(\.device), what: "join request", account: client.account) { matches in
            if let member = members.first(where: { $0.hex.hasPrefix(wanted) }) {
                return "device \(member.hex.prefix(8)) is already a member of account \(client.account.hex.prefix(8)); there is nothing to approve"
            }
            return "no device \(wanted) asked to join account \(client.account.hex.prefix(8))"
                + (matches.isEmpty ? " (a request ages out after a week; ask the device to run stele join again)" : "")
        }.flatMap { device in requests.first { $0.device == device } }
        guard let request else { throw ExitStatus(code: 1) }
        if let expected = parsed.options["--fingerprint"], expected.lowercased() != request.fingerprint {
            printError("stele approve: device \(request.device.hex.prefix(8)) has fingerprint \(request.fingerprint), not \(expected): NOT approved. Check the device's screen.")
            throw ExitStatus(code: 1)
        }
        let updated = try hubErrors(client.hub) { try Membership.approve(request.device, signingKey: request.signingKey, by: ring, in: directory) }
        try save(updated, files)
        print("approved     \(request.device.hex) (\(request.name.isEmpty ? "unnamed" : request.name))")
        print("fingerprint  \(request.fingerprint)   <- the device printed this too; if it did not, revoke it now")
    }

    /// `stele revoke`: takes a device off the roster and rotates the account key.
    static func revoke(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: [], options: ["--keys", "--hub"], usage: revokeUsage)
        guard parsed.positionals.count == 2 else {
            throw UsageError(message: "expected a store and the device to revoke, got \(parsed.positionals.count) argument\(parsed.positionals.count == 1 ? "" : "s")", usage: revokeUsage)
        }
        let files = DeviceFiles(store: parsed.positionals[0], keys: parsed.options["--keys"])
        let (client, ring) = try member(files, hub: parsed.options["--hub"])
        let directory = HubDirectory(client: client)
        let roster = try hubErrors(client.hub) { try directory.roster(of: client.account) }
        let wanted = parsed.positionals[1].lowercased()
        guard let device = try pick(wanted, among: Array(roster.members), what: "member", account: client.account, unknown: { _ in
            "device \(wanted) is not a member of account \(client.account.hex.prefix(8))" + (roster.revoked.contains { $0.hex.hasPrefix(wanted) } ? " (it was revoked already)" : "")
        }) else { throw ExitStatus(code: 1) }
        guard device != client.identity.deviceID else {
            throw InputError(message: "this device cannot revoke itself; revoke it from another member")
        }
        let (updated, epoch) = try hubErrors(client.hub) { try Membership.revoke(device, by: ring, in: directory) }
        try save(updated, files)
        print("revoked      \(device.hex)")
        print("The account key moved to epoch \(epoch); the other devices take it at their next directory read. The revoked device keeps what it had and syncs no more.")
    }

    // MARK: - Shared

    /// The files of a device about to be set up: STORE given, nothing there yet.
    private static func newDevice(_ parsed: ParsedArguments, usage: String, what: String) throws -> DeviceFiles {
        guard parsed.positionals.count == 1 else {
            throw UsageError(message: "expected one store path, got \(parsed.positionals.count) argument\(parsed.positionals.count == 1 ? "" : "s")", usage: usage)
        }
        guard parsed.options["--hub"] != nil else { throw UsageError(message: "--hub URL is required: the stele-hub this device syncs through", usage: usage) }
        if let name = parsed.options["--name"], name.utf8.count > 200 { throw UsageError(message: "--name is over 200 bytes", usage: usage) }
        let files = DeviceFiles(store: parsed.positionals[0], keys: parsed.options["--keys"])
        try files.requireNew()
        return files
    }

    /// Saves the ring, the store and the hub's URL. The hub already knows the
    /// device, so a failure here says what to do rather than leaving half a device.
    private static func create(_ files: DeviceFiles, ring: KeyRing, account: AccountID, hub: URL) throws {
        do {
            try files.keys.save(ring)
            _ = try Replica.create(at: files.store, account: account, device: ring.identity.deviceID, options: Replica.Options(stampFloor: files.keys))
            try files.saveHub(hub)
        } catch {
            throw InputError(message: "the hub has the device, but its files could not be written (\(error)); free the space or fix the permissions, remove \(files.store) and \(files.keys.path), and set the device up again")
        }
    }

    /// A member's client and key ring.
    private static func member(_ files: DeviceFiles, hub: String?) throws -> (HubClient, KeyRing) {
        let replica = try files.replica(readOnly: true)
        let ring = try files.ring()
        guard ring.roster?.members.contains(replica.device) == true else {
            throw InputError(message: "\(files.store) is not a member of its account yet (no approval synced): run stele sync \(files.store) once it is approved, or act from a member device")
        }
        return (try files.client(replica, hub: hub), ring)
    }

    private static func save(_ ring: KeyRing, _ files: DeviceFiles) throws {
        do {
            try files.keys.save(ring)
        } catch {
            throw InputError(message: "the hub took the change, but the key ring \(files.keys.path) could not be saved (\(error)); the next stele sync reads it back from the hub")
        }
    }

    /// The one device among `candidates` that `wanted` (a full id or a prefix of 8 or more hex digits) names.
    private static func pick(
        _ wanted: String, among candidates: [DeviceID], what: String, account: AccountID, unknown: ([DeviceID]) -> String
    ) throws -> DeviceID? {
        guard wanted.count >= 8, wanted.allSatisfy(\.isHexDigit) else {
            throw InputError(message: "'\(wanted)' is not a device id: give the 64 hex digits stele printed, or 8 or more of the first ones")
        }
        let matches = candidates.filter { $0.hex.hasPrefix(wanted) }
        switch matches.count {
        case 1: return matches[0]
        case 0:
            printError("stele: \(unknown(matches))")
            return nil
        default:
            throw InputError(message: "'\(wanted)' names \(matches.count) \(what)s of account \(account.hex.prefix(8)); give more digits")
        }
    }

    /// A hub that cannot be reached or refuses: one line saying so and what to do (exit 1).
    static func hubErrors<T>(_ hub: URL, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as HubClientError {
            switch (error.code, error.hubCode) {
            case (.unreachable, _):
                printError("stele: cannot reach the hub at \(hub.absoluteString): \(error.message)")
            case (_, "invite_required"):
                // The hub says which: none was given, or the one given is unknown or spent.
                printError("stele: \(error.message); an invite code comes from stele-hub invite on the hub's machine, and goes in --invite CODE")
            case (_, "revoked"):
                printError("stele: this device was revoked from the account; it cannot act for it any more")
            case (_, "not_a_member"):
                printError("stele: this device is not on the account's roster (yet): a member must approve it first")
            default:
                printError("stele: \(error.message)")
            }
            throw ExitStatus(code: 1)
        } catch let error as RosterError {
            printError("stele: \(error)")
            throw ExitStatus(code: 1)
        } catch let error as MembershipError {
            printError("stele: \(error)")
            throw ExitStatus(code: 1)
        }
    }
}
