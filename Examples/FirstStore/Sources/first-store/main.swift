// One device's replica on its own, before any sync: the store, its namespaces and
// their merge rules, the change feed, a conversation's messages. The files go in a
// temporary folder, removed at the end.
import Foundation
import Stele

struct Todo: Codable { var title: String }

let folder = FileManager.default.temporaryDirectory.appendingPathComponent("first-store-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
let path = folder.appendingPathComponent("phone.stele").path

// The device: its identity, in its key store (the keychain in an app; a file here,
// kept out of the replica's backups). The account id names the account it syncs in.
let identity = try DeviceIdentity.generate()
let account = AccountID.generate()
let keys = FileKeyStore(path: path + ".keys")
try keys.save(KeyRing(identity: identity))

let replica = try Replica.openOrCreate(at: path, account: account, device: identity.deviceID, options: Replica.Options(stampFloor: keys))
let feed = replica.changes()                     // subscribe first: an event follows each commit

let notes = try replica.causal("notes")          // declared once, same kind for life

try notes.put("groceries", Array("milk".utf8))   // bytes at the core...
try notes.put("todo", encoding: Todo(title: "call"))   // ...Codable on top
try notes.delete("groceries")                    // leaves a tombstone; reads never show it

print("notes: \(try notes.entries().map(\.key)), tombstones kept: \(try replica.tombstoneCount())")
var told = 0
for await change in feed {                       // inserted / updated / deleted / conflict
    if case .conflict(let conflict) = change.kind { print("tell the user: \(conflict.resolution)") }
    print("change: \(change)")
    told += 1
    if told == 3 { break }                       // an app keeps listening; this example stops here
}

let chat = try replica.messages("chat")
try chat.post("m1", body: Array("see you at 8".utf8), author: "ana")
try chat.edit("m1", body: Array("see you at 9".utf8))
try chat.react("m1", emoji: "👍", as: "ben")
try chat.unsend("m1", scope: .everyone)          // .me: this account's devices only
let recalled = try chat.message("m1")            // scope .everyone, no body, no reactions
if let recalled { print("message m1 after unsend: deleted for \(recalled.scope), \(recalled.body.count) bytes of text, \(recalled.reactions.count) reactions") }

try FileManager.default.removeItem(at: folder)
