// Two devices of one account, syncing in one process over `MemoryFleet`: the
// in-memory environment (a virtual clock, frames on a queue) around the same
// `FleetDriver` an app runs. Nothing here touches the network or the disk, and
// virtual time moves only when the fleet is told to run, so the story is the
// same on every run and takes well under a second.
import Foundation
import Stele

func say(_ line: String) { print(line) }
func text(_ bytes: [UInt8]?) -> String { bytes.map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "nothing" }

let fleet = MemoryFleet()
let account = AccountID.generate()

// 1. The phone founds the account: a signed roster with itself on it, and the first account key.
let phone = try fleet.addDevice(account: account)
say("1. The phone founded the account: a roster with 1 device on it, and the first account key.")

// 2. The laptop asks to join; the phone approves it (a signed roster change) and
//    wraps the account key for it. Every device then reads the directory again.
let laptop = try fleet.addDevice(account: account)
fleet.runUntilQuiet()
say("2. The laptop joined, approved by the phone: each sees \(phone.node.roster.count) devices on the roster,")
say("   and both hold the same account key: \(phone.node.accountKeys == laptop.node.accountKeys).")

// The drivers report what they do as events; keep the barrier rounds each one commits.
var committed: [String: String] = [:]
for (name, device) in [("phone", phone), ("laptop", laptop)] {
    device.onEvent = { event in
        if event.kind == .roundCommitted { committed[name] = event.message }
    }
}

// 3. Every device declares the same namespaces, each with its merge rule for life.
for device in [phone, laptop] { try device.replica.declare("notes", .causal) }
say("3. Both declared the namespace \"notes\" (causal: version vectors, a concurrent edit beats a delete).")

// 4. A write on the phone reaches the laptop: sealed frames for each device, on the (virtual) wire.
try phone.replica.causal("notes").put("groceries", Array("milk".utf8))
say("4. The phone wrote groceries = \"milk\"; the laptop reads \(text(try laptop.replica.causal("notes").get("groceries"))) before any sync.")
fleet.run(forMilliseconds: 1_000)
let arrived = try laptop.replica.causal("notes").get("groceries")
say("   One virtual second later the laptop reads \(text(arrived)).")

// 5. The laptop deletes it. The delete leaves a tombstone, which travels like a write.
try laptop.replica.causal("notes").delete("groceries")
say("5. The laptop deleted groceries; it keeps \(try laptop.replica.tombstoneCount()) tombstone so the delete can travel.")
fleet.run(forMilliseconds: 1_000)
let goneOnPhone = try phone.replica.causal("notes").get("groceries") == nil
say("   A second later the phone reads \(text(try phone.replica.causal("notes").get("groceries"))) and holds \(try phone.replica.tombstoneCount()) tombstone.")

// 6. Once every device on the roster has acked the same content, a barrier round
//    collects the tombstone on both (after writing the backup anchor): the
//    generation moves to 1. No timer decides this; the proof does.
var waited: Int64 = 0
while waited < 300_000, try phone.replica.generation < 1 || laptop.replica.generation < 1 || phone.replica.tombstoneCount() + laptop.replica.tombstoneCount() > 0 {
    fleet.run(forMilliseconds: 1_000)
    waited += 1_000
}
let tombstonesLeft = try phone.replica.tombstoneCount() + laptop.replica.tombstoneCount()
say("6. Within \(waited / 1_000) more virtual seconds every device had acked the same content, and a barrier round")
for name in ["phone", "laptop"] { say("   committed on the \(name): \(committed[name] ?? "no round")") }
say("   Generation \(phone.replica.generation) on the phone, \(laptop.replica.generation) on the laptop; \(tombstonesLeft) tombstones left.")

// 7. The verdict: the write arrived, the delete stayed deleted, the tombstone was collected.
let stillGone = try phone.replica.causal("notes").get("groceries") == nil && laptop.replica.causal("notes").get("groceries") == nil
let passed = arrived == Array("milk".utf8) && goneOnPhone && stillGone && tombstonesLeft == 0 && phone.replica.generation >= 1 && laptop.replica.generation >= 1
say(passed ? "PASS: the write reached the laptop, the delete stayed deleted on both, and its tombstone was collected." : "FAIL: the story did not end as told (see above).")
exit(passed ? 0 : 1)
