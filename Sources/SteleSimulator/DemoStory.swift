import Foundation
import Stele

/// `stele demo`: a narrated, deterministic story on three devices of one account
/// (temporary stores, no server): an offline week, a delete that stays deleted, a
/// concurrent edit that survives a delete, a restore from an old backup. Every
/// step runs the shipping sync code in the simulator; the oracle gives the verdict.
public struct DemoStory {
    private let say: (String) -> Void
    private let simulation: Simulation
    /// What each device's last recovery did, as its node logged it.
    private final class Recoveries {
        var byDevice: [String: String] = [:]
    }
    private let recoveries = Recoveries()

    /// Where the devices' stores are copied at the end (`stele demo --keep DIR`), or `nil`.
    private let keep: String?

    /// - Parameter keep: a folder to copy the three devices' stores into at the end,
    ///   for `stele inspect` (made if missing; a store already there is replaced).
    public init(seed: UInt64 = 2_026, keep: String? = nil, say: @escaping (String) -> Void) throws {
        self.say = say
        self.keep = keep
        simulation = try Simulation(seed: seed)
        let recoveries = recoveries
        simulation.onEvent = { device, event in
            if event.kind == .recovered { recoveries.byDevice[device] = event.message }
        }
    }

    private func clock() -> String {
        let seconds = simulation.now / 1_000
        let days = seconds / 86_400
        let rest = seconds % 86_400
        return String(format: "day %d %02d:%02d:%02d", days + 1, rest / 3_600, rest % 3_600 / 60, rest % 60)
    }

    private func event(_ text: String) { say("  [\(clock())] \(text)") }

    private func show(_ name: String, _ key: String) throws -> String {
        let value = try simulation.device(name)?.replica.causal("notes").get(key)
        return value.map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "(deleted)"
    }

    private func tombstones(_ name: String) throws -> Int {
        try simulation.device(name)?.replica.tombstoneCounts().values.reduce(0, +) ?? 0
    }

    private func generation(_ name: String) throws -> UInt64 { simulation.device(name)?.replica.generation ?? 0 }

    private func blockers(_ name: String) throws -> String {
        guard let device = simulation.device(name) else { return "nobody" }
        let names = device.node.blockingCollection.compactMap { id in simulation.everyDevice.first { $0.id == id }?.name }
        return names.isEmpty ? "nobody" : names.joined(separator: ", ")
    }

    /// What the device's last recovery did, from its node's log.
    private func recovery(_ name: String) -> String {
        recoveries.byDevice[name] ?? "no recovery was needed"
    }

    private func sync(_ what: String) throws {
        let before = simulation.statistics.frames
        if let moving = simulation.sync() { throw DemoFailure(description: "sync did not settle: \(moving)") }
        // The oracle judges whenever it can: with a device asleep it waits for a later sync.
        if simulation.whyOracleCannotCheck() == nil { try simulation.checkOracle() }
        event("sync: \(what) (\(simulation.statistics.frames - before) frames)")
    }

    /// Tells the story.
    /// - Returns: whether the oracle found no resurrection and no lost write.
    @discardableResult
    public func tell() throws -> Bool {
        try simulation.declare("notes", .causal)
        try simulation.declare("memory", .log)
        for name in ["phone", "laptop", "tablet"] { try simulation.addDevice(name) }

        say("Stele demo: a phone, a laptop and a tablet of one account, each with its own store.")
        say("Every step runs the real sync code over a simulated network, on a virtual clock.\n")

        say("1. The phone writes two notes; every device gets them.")
        simulation.perform("phone", .put(namespace: "notes", key: "groceries", value: "milk"))
        simulation.perform("phone", .put(namespace: "notes", key: "old-plan", value: "move in May"))
        try sync("all three agree")
        event("tablet shows groceries=\(try show("tablet", "groceries")), old-plan=\(try show("tablet", "old-plan"))")
        try simulation.backup("tablet", as: "tablet-monday")
        event("the tablet's OS takes a device backup")

        say("\n2. The tablet goes into a drawer for a week. The phone deletes old-plan.")
        try simulation.setOnline("tablet", false)
        simulation.perform("phone", .delete(namespace: "notes", key: "old-plan"))
        try sync("phone and laptop agree; the tablet hears nothing")
        // A day at a time, so the week is seen to pass (every 30 s the phone and the laptop advertise).
        for day in 1...7 {
            simulation.advance(byMilliseconds: 86_400_000)
            if day == 1 || day == 7 {
                event("day \(day) of 7 in the drawer: the phone holds \(try tombstones("phone")) tombstone (the record that old-plan was deleted), waiting for \(try blockers("phone"))")
            } else {
                event("day \(day) of 7 in the drawer")
            }
        }
        event("all week the phone kept its tombstone: collection waits for \(try blockers("phone")), no timer guesses")
        event("a week later the tablet wakes up, still holding old-plan=\(try show("tablet", "old-plan"))")
        try simulation.setOnline("tablet", true)
        try sync("the tablet's stale copy meets the tombstone")
        event("tablet shows old-plan=\(try show("tablet", "old-plan")); phone shows \(try show("phone", "old-plan")): it stayed deleted")
        event("every device has seen it, so the barrier (a round in which every device confirms what it holds) wrote the anchor")
        event("(the fleet's agreed state, sealed, kept outside the devices) and collected: generation \(try generation("phone")) (one more per collection), \(try tombstones("phone")) tombstones held")

        say("\n3. Offline at the same time, the laptop deletes groceries while the phone edits it.")
        try simulation.partition([["phone"], ["laptop", "tablet"]])
        simulation.perform("laptop", .delete(namespace: "notes", key: "groceries"))
        simulation.perform("phone", .put(namespace: "notes", key: "groceries", value: "milk, eggs"))
        event("laptop shows groceries=\(try show("laptop", "groceries")); phone shows \(try show("phone", "groceries"))")
        simulation.heal()
        try sync("the delete never saw the edit")
        let conflicts = simulation.devices.filter { !$0.conflicts.isEmpty }.map(\.name)
        event("every device shows groceries=\(try show("laptop", "groceries")): add-wins (an edit the delete never saw survives it);")
        event("each device tells its app of the conflict: \(conflicts.joined(separator: ", "))")

        say("\n4. The tablet is restored from Monday's backup, from before old-plan was deleted.")
        try simulation.restore("tablet", from: "tablet-monday")
        event("after the restore the tablet holds old-plan=\(try show("tablet", "old-plan")) and groceries=\(try show("tablet", "groceries")), at generation \(try generation("tablet"))")
        simulation.perform("tablet", .put(namespace: "notes", key: "packing", value: "passport"))
        event("the tablet writes a new note, packing, after the restore")
        try sync("the restored tablet meets the fleet")
        event("the anchor caught it: \(recovery("tablet"))")
        event("(imported: the fleet's records from the anchor; kept: what the tablet wrote after the restore;")
        event(" dropped: its Monday copies of what the fleet has since deleted or changed, old-plan and groceries)")
        event("tablet shows old-plan=\(try show("tablet", "old-plan")), groceries=\(try show("tablet", "groceries")); phone shows packing=\(try show("phone", "packing"))")

        say("\n5. A conversation in the memory log is deleted on the phone while the laptop sleeps.")
        simulation.perform("phone", .append(namespace: "memory", group: "chat-1", value: "hello"))
        simulation.perform("phone", .append(namespace: "memory", group: "chat-1", value: "how are you"))
        try sync("everyone holds chat-1")
        try simulation.setOnline("laptop", false)
        simulation.perform("phone", .bury(namespace: "memory", group: "chat-1"))
        simulation.advance(byMilliseconds: 3_600_000)
        try simulation.setOnline("laptop", true)
        try sync("the laptop ships its copy; the tombstone buries it")
        let laptopLog = try simulation.device("laptop")!.replica.log("memory")
        event("laptop shows \(try laptopLog.live(group: "chat-1").count) events of chat-1 and stores \(try laptopLog.storedEventCount(group: "chat-1")): erased, not just hidden")

        // The verdict is the oracle's over the whole fleet, settled: a check that cannot run fails the story.
        try simulation.checkOracle()
        let oracle = simulation.oracle
        say("\nVerdict: after \(simulation.statistics.operations) writes, the oracle (a checker that knows every write and every delete) checked")
        say("every device \(oracle.checks) times and counts \(oracle.resurrections) resurrections and \(oracle.lostWrites) lost writes.")
        for finding in oracle.findings { say("  \(finding)") }
        say("Tombstones retained: \(simulation.totalTombstones()), at generation \(try generation("phone")): collected with a proof, never on a timer.")
        if let keep {
            try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            for name in ["phone", "laptop", "tablet"] {
                let path = (keep as NSString).appendingPathComponent("\(name).stele")
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
                try simulation.device(name)?.replica.backup(to: path)
            }
            say("\nThe three stores are in \(keep): stele inspect \((keep as NSString).appendingPathComponent("phone.stele"))")
        }
        say("\nNext: stele demo --hub (the same kind of story with a real hub and device processes),")
        say("stele simulate --seeds 20 (randomized fleets with every fault), or the README's \"Using the library\".")
        return oracle.resurrections == 0 && oracle.lostWrites == 0 && oracle.unreadable == 0
    }
}

struct DemoFailure: Error, CustomStringConvertible {
    let description: String
}
