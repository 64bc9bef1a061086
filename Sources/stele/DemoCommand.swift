import Foundation
import Stele

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

/// The story itself.
struct DemoStory {
    let directory: String

    private func say(_ text: String) { print(text) }

    private func show(_ label: String, _ notes: CausalNamespace) throws {
        let rows = try notes.entries().map { "\($0.key)=\"\(String(decoding: $0.value, as: UTF8.self))\"" }
        say("    \(label): " + (rows.isEmpty ? "(nothing)" : rows.joined(separator: "  ")))
    }

    /// Ships every record of one device's `notes` and `memory` to another.
    /// - Returns: the conflicts the receiving device reported.
    @discardableResult
    private func sync(_ from: Replica, _ to: Replica) throws -> [String] {
        var conflicts: [String] = []
        for record in try from.causal("notes").records() {
            if let conflict = try to.causal("notes").apply(record).conflict {
                conflicts.append("conflict on \(record.key): \(conflict.resolution)")
            }
        }
        for event in try from.log("memory").events() { try to.log("memory").apply(event) }
        return conflicts
    }

    func tell() throws {
        let account = AccountID.generate()
        let phone = try Replica.create(at: "\(directory)/phone.stele", account: account, device: try DeviceIdentity.generate().deviceID)
        let laptop = try Replica.create(at: "\(directory)/laptop.stele", account: account, device: try DeviceIdentity.generate().deviceID)
        let phoneNotes = try phone.causal("notes")
        let laptopNotes = try laptop.causal("notes")

        say("Stele demo: two devices of one account, each with its own store.\n")
        say("1. The phone writes two notes; they reach the laptop.")
        try phoneNotes.put("groceries", Array("milk".utf8))
        try phoneNotes.put("old-plan", Array("move in May".utf8))
        try sync(phone, laptop)
        try show("laptop", laptopNotes)

        say("\n2. The phone deletes old-plan. The laptop, which has not heard, ships its copy back.")
        try phoneNotes.delete("old-plan")
        try sync(laptop, phone)
        try show("phone ", phoneNotes)
        say("    The phone's tombstone has seen that copy, so it stays deleted. When the laptop hears:")
        try sync(phone, laptop)
        try show("laptop", laptopNotes)

        say("\n3. Offline, the laptop deletes groceries while the phone edits it. Neither saw the other.")
        try laptopNotes.delete("groceries")
        try phoneNotes.put("groceries", Array("milk, eggs".utf8))
        let atLaptop = try sync(phone, laptop)
        try sync(laptop, phone)
        try show("phone ", phoneNotes)
        try show("laptop", laptopNotes)
        say("    Add-wins: a delete that never saw the edit does not destroy it, and the app is told:")
        for conflict in atLaptop { say("    laptop: \(conflict)") }

        say("\n4. A conversation in the memory log is deleted on the phone; the laptop re-ships its events.")
        let memory = try phone.log("memory")
        try memory.append(group: "chat-1", body: Array("hello".utf8))
        try memory.append(group: "chat-1", body: Array("how are you".utf8))
        try sync(phone, laptop)
        try memory.bury("chat-1")
        try sync(laptop, phone)
        say("    phone shows \(try memory.live(group: "chat-1").count) events of chat-1, and stores \(try memory.storedEventCount(group: "chat-1")) of them.")
        try sync(phone, laptop)
        say("    laptop shows \(try laptop.log("memory").live(group: "chat-1").count), stores \(try laptop.log("memory").storedEventCount(group: "chat-1")): deleted, and erased from disk.")

        say("\n5. What each store holds now (stele inspect):")
        for (name, replica) in [("phone", phone), ("laptop", laptop)] {
            let report = try replica.report()
            let parts = report.namespaces.map { "\($0.name) (\($0.kind)): \($0.live) live, \($0.tombstones) tombstones" }
            say("    \(name): generation \(report.generation); " + parts.joined(separator: "; "))
        }
        say("\nTombstones are kept until every device provably has them; collecting them safely is the barrier's job.")
    }
}
