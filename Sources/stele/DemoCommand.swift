import Foundation
import Stele
import SteleSimulator

/// `stele demo`: a short narrated story on two devices' stores in a temporary
/// directory, showing the foundation's rules. State moves between the devices by
/// the same merge functions fleet sync uses; the simulator issue replaces this
/// with the full fleet story.
enum DemoCommand {
    static let usage = "usage: stele demo [--keep DIR]"

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: [], options: ["--keep"], usage: usage)
        guard parsed.positionals.isEmpty else { throw UsageError(message: "demo takes no arguments", usage: usage) }
        let directory: String
        if let keep = parsed.options["--keep"] {
            directory = keep
            guard !FileManager.default.fileExists(atPath: "\(keep)/phone.stele") else {
                throw InputError(message: "\(keep) already holds a demo; choose an empty directory")
            }
        } else {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("stele-demo-\(UUID().uuidString)").path
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { if parsed.options["--keep"] == nil { try? FileManager.default.removeItem(atPath: directory) } }
        try DemoStory(directory: directory).tell()
        if let keep = parsed.options["--keep"] { print("\nThe stores are kept in \(keep); try: stele inspect \(keep)/phone.stele") }
    }
}

/// The story itself: two devices syncing through fleet sync over an in-memory
/// network on a virtual clock (the same code a real device runs).
struct DemoStory {
    let directory: String

    private func say(_ text: String) { print(text) }

    private func show(_ label: String, _ notes: CausalNamespace) throws {
        let rows = try notes.entries().map { "\($0.key)=\"\(String(decoding: $0.value, as: UTF8.self))\"" }
        say("    \(label): " + (rows.isEmpty ? "(nothing)" : rows.joined(separator: "  ")))
    }

    /// Lets the devices talk until they agree; reports what the sessions did.
    private func sync(_ driver: FleetDriver, _ phone: Replica, _ laptop: Replica) {
        let before = driver.events.count
        let traffic = driver.traffic
        for device in [phone.device, laptop.device] { driver.localChange(on: device) }
        driver.runUntilConverged()
        let finished = driver.events.dropFirst(before).filter { $0.event.kind == .sessionFinished }
        let conflicts = finished.compactMap { entry -> String? in
            guard !entry.event.message.hasSuffix(" 0 conflicts") else { return nil }
            return "\(entry.device == phone.device ? "phone" : "laptop"): \(entry.event.namespace ?? "") \(entry.event.message)"
        }
        say("    (synced in \(driver.traffic.frames - traffic.frames) frames, \(driver.traffic.bytes - traffic.bytes) bytes)")
        for line in conflicts { say("    \(line)") }
    }

    func tell() throws {
        let account = AccountID.generate()
        let phone = try Replica.create(at: "\(directory)/phone.stele", account: account, device: try DeviceIdentity.generate().deviceID)
        let laptop = try Replica.create(at: "\(directory)/laptop.stele", account: account, device: try DeviceIdentity.generate().deviceID)
        let phoneNotes = try phone.causal("notes")
        let laptopNotes = try laptop.causal("notes")
        _ = try phone.log("memory")
        _ = try laptop.log("memory")
        let driver = FleetDriver(replicas: [phone, laptop], seed: 2_026)
        driver.start()

        say("Stele demo: a phone and a laptop of one account, each with its own store, syncing by digest.\n")
        say("1. The phone writes two notes; they reach the laptop.")
        try phoneNotes.put("groceries", Array("milk".utf8))
        try phoneNotes.put("old-plan", Array("move in May".utf8))
        sync(driver, phone, laptop)
        try show("laptop", laptopNotes)

        say("\n2. The laptop goes offline for a week. Meanwhile the phone deletes old-plan.")
        driver.offline = [laptop.device]
        try phoneNotes.delete("old-plan")
        driver.localChange(on: phone.device)
        driver.advance(byMilliseconds: 7 * 24 * 3_600_000)
        say("    The laptop comes back holding its old copy; sync compares digests and ships the tombstone:")
        driver.offline = []
        sync(driver, phone, laptop)
        try show("phone ", phoneNotes)
        try show("laptop", laptopNotes)

        say("\n3. Both offline: the laptop deletes groceries while the phone edits it. Neither saw the other.")
        driver.offline = [phone.device, laptop.device]
        try laptopNotes.delete("groceries")
        try phoneNotes.put("groceries", Array("milk, eggs".utf8))
        driver.offline = []
        sync(driver, phone, laptop)
        try show("phone ", phoneNotes)
        try show("laptop", laptopNotes)
        say("    Add-wins: a delete that never saw the edit does not destroy it, and the merge reports the conflict.")

        say("\n4. A conversation in the memory log is deleted on the phone while the laptop still holds it.")
        let memory = try phone.log("memory")
        try memory.append(group: "chat-1", body: Array("hello".utf8))
        try memory.append(group: "chat-1", body: Array("how are you".utf8))
        sync(driver, phone, laptop)
        driver.offline = [laptop.device]
        try memory.bury("chat-1")
        driver.offline = []
        sync(driver, phone, laptop)
        let laptopLog = try laptop.log("memory")
        say("    phone shows \(try memory.live(group: "chat-1").count) events of chat-1 and stores \(try memory.storedEventCount(group: "chat-1")).")
        say("    laptop shows \(try laptopLog.live(group: "chat-1").count), stores \(try laptopLog.storedEventCount(group: "chat-1")): deleted, and erased from disk.")

        say("\n5. What each store holds now (stele inspect):")
        for (name, replica) in [("phone", phone), ("laptop", laptop)] {
            let report = try replica.report()
            let parts = report.namespaces.map { "\($0.name) (\($0.kind)): \($0.live) live, \($0.tombstones) tombstones" }
            say("    \(name): generation \(report.generation); " + parts.joined(separator: "; "))
        }
        let agree = try ["notes", "memory"].allSatisfy { try phone.digest(of: $0) == laptop.digest(of: $0) }
        say("    digests \(agree ? "equal" : "DIFFERENT"): \(agree ? "the devices agree" : "the devices disagree")")
        say("\nTombstones are kept until every device provably has them; collecting them safely is the barrier's job.")
    }
}
