import Foundation
import Stele
import SteleHub
import SteleSQL
import Synchronization
import Testing
import TestSupport

/// The record API of HUB-API on both backends: last writer wins with ties to
/// the tombstone, append-only kinds, member sets, mutation ids answered as the
/// first time, the change feed's paging and long poll, replay, single records,
/// and every bad input refused whole.
@Suite(.serialized) struct HubRecordsTests {
    /// A hub with one account and a session for its founder.
    struct Account {
        let hub: HubHarness
        let account: AccountID
        let token: String
        var base: String { "/v1/accounts/\(account.hex)" }

        init(_ backend: Backend, configure: (inout HubService.Configuration) -> Void = { _ in }) throws {
            hub = try HubHarness(backend, configure: configure)
            account = try hub.found(Fixtures.identity(1))
            token = try hub.session(Fixtures.identity(1), account)
        }

        /// Pushes `mutations`; returns the answer.
        @discardableResult
        func push(_ mutations: [[String: Any]]) -> HubResponse {
            hub.call("POST", "\(base)/records/push", json: ["mutations": mutations], token: token)
        }

        /// The statuses of a push's results, in order.
        func statuses(_ mutations: [[String: Any]]) -> [String] {
            (push(mutations).json["results"] as? [[String: Any]] ?? []).compactMap { $0["status"] as? String }
        }

        func get(_ kind: String, _ id: String) -> HubResponse { hub.call("GET", "\(base)/records/\(kind)/\(id)", token: token) }

        func payload(_ kind: String, _ id: String) -> String? {
            (get(kind, id).json["payload"] as? String).flatMap { Data(base64Encoded: $0) }.map { String(decoding: $0, as: UTF8.self) }
        }

        /// Every change after `since`, paging with `next`; returns them and the last cursor.
        func pageAll(since: Int64 = 0, limit: Int = 1_000) throws -> (changes: [[String: Any]], next: Int64) {
            var cursor = since
            var all: [[String: Any]] = []
            while true {
                let page = hub.call("GET", "\(base)/records/changes?since=\(cursor)&limit=\(limit)", token: token)
                guard page.status == 200 else { throw HarnessError("changes: \(page.status) \(page.text)") }
                all += page.json["changes"] as? [[String: Any]] ?? []
                cursor = (page.json["next"] as? NSNumber)?.int64Value ?? cursor
                if page.json["more"] as? Bool != true { return (all, cursor) }
            }
        }
    }

    static func put(_ id: String, _ value: String, at time: Int64, mutation: String? = nil, kind: String = "note", group: String? = nil) -> [String: Any] {
        var object: [String: Any] = [
            "mutation": mutation ?? "m-\(id)-\(time)-\(value)", "kind": kind, "id": id, "op": "put", "payload": Data(value.utf8).base64EncodedString(), "modifiedAt": time,
        ]
        if let group { object["group"] = group }
        return object
    }

    static func delete(_ id: String, at time: Int64, mutation: String? = nil, kind: String = "note") -> [String: Any] {
        ["mutation": mutation ?? "d-\(id)-\(time)", "kind": kind, "id": id, "op": "delete", "modifiedAt": time]
    }

    static func member(_ op: String, _ id: String, _ label: String, mutation: String, kind: String = "note") -> [String: Any] {
        ["mutation": mutation, "kind": kind, "id": id, "op": op, "set": "labels", "member": label, "modifiedAt": 1]
    }

    // MARK: - Merging

    @Test(arguments: Backend.allCases) func lastWriterWinsAndATieGoesToTheTombstone(_ backend: Backend) throws {
        let a = try Account(backend)
        let t = a.hub.now
        #expect(a.statuses([Self.put("x", "one", at: t)]) == ["applied"])
        #expect(a.statuses([Self.put("x", "older", at: t - 1)]) == ["stale"])
        #expect(a.payload("note", "x") == "one")
        #expect(a.statuses([Self.put("x", "two", at: t + 1)]) == ["applied"])
        #expect(a.statuses([Self.delete("x", at: t)]) == ["stale"], "a delete older than the write loses")
        #expect(a.statuses([Self.delete("x", at: t + 1)]) == ["applied"], "a tie goes to the tombstone")
        #expect(a.get("note", "x").status == 404)
        #expect(a.statuses([Self.put("x", "same-time", at: t + 1)]) == ["stale"], "a put at the tombstone's time loses to it")
        #expect(a.statuses([Self.delete("x", at: t + 5)]) == ["not_found"], "a tombstone is not deleted twice")
        #expect(a.statuses([Self.delete("never", at: t)]) == ["not_found"])
        #expect(a.statuses([Self.put("never", "older", at: t - 1)]) == ["stale"], "the hub keeps a delete of what it lacked: an older copy pushed later loses to it")
        #expect(a.statuses([Self.put("never", "newer", at: t + 1)]) == ["applied"])
        #expect(a.statuses([Self.put("x", "between", at: t + 2)]) == ["stale"], "the second delete's time is kept: a put older than it loses")
        #expect(a.statuses([Self.put("x", "back", at: t + 6)]) == ["applied"], "a newer write brings it back")
        // Two live writes of the same time: every hub picks the larger payload.
        #expect(a.statuses([Self.put("y", "b", at: t)]) == ["applied"])
        #expect(a.statuses([Self.put("y", "a", at: t)]) == ["stale"])
        #expect(a.statuses([Self.put("y", "c", at: t)]) == ["applied"])
        #expect(a.payload("note", "y") == "c")
    }

    @Test(arguments: Backend.allCases) func anAppendOnlyKindRefusesTombstones(_ backend: Backend) throws {
        let a = try Account(backend)
        #expect(a.hub.call("PUT", "\(a.base)/kinds/diary", json: ["appendOnly": true], token: a.token).status == 200)
        #expect(a.statuses([Self.put("d1", "entry", at: 10, kind: "diary")]) == ["applied"])
        let refused = a.push([Self.delete("d1", at: 99, kind: "diary")]).json["results"] as? [[String: Any]]
        #expect(refused?.first?["status"] as? String == "refused")
        #expect(refused?.first?["reason"] as? String == "append_only")
        #expect(a.hub.call("DELETE", "\(a.base)/records/diary/d1?modifiedAt=99", token: a.token).status == 409)
        #expect(a.payload("diary", "d1") == "entry", "002: a tombstone never beats a live copy")
        #expect(a.hub.call("PUT", "\(a.base)/kinds/diary", json: ["appendOnly": "yes"], token: a.token).status == 400)
    }

    @Test(arguments: Backend.allCases) func memberSetsAddAndRemoveIdempotently(_ backend: Backend) throws {
        let a = try Account(backend)
        #expect(a.statuses([Self.put("m1", "mail", at: 1, group: "thread-1")]) == ["applied"])
        let first = a.push([Self.member("add", "m1", "INBOX", mutation: "a1")])
        let seq = ((first.json["results"] as? [[String: Any]])?.first?["seq"] as? NSNumber)?.int64Value
        #expect(a.statuses([Self.member("add", "m1", "INBOX", mutation: "a2"), Self.member("add", "m1", "UNREAD", mutation: "a3")]) == ["applied", "applied"])
        #expect((a.get("note", "m1").json["sets"] as? [String: [String]]) == ["labels": ["INBOX", "UNREAD"]])
        // Adding again changes nothing: the record keeps the position of its last real change.
        let again = a.push([Self.member("add", "m1", "INBOX", mutation: "a4")])
        #expect(((again.json["results"] as? [[String: Any]])?.first?["seq"] as? NSNumber)?.int64Value ?? 0 > seq ?? 0, "a3 moved it")
        #expect(a.statuses([Self.member("remove", "m1", "INBOX", mutation: "r1"), Self.member("remove", "m1", "INBOX", mutation: "r2")]) == ["applied", "applied"])
        #expect((a.get("note", "m1").json["sets"] as? [String: [String]]) == ["labels": ["UNREAD"]])
        #expect(a.get("note", "m1").json["group"] as? String == "thread-1")
        #expect(a.statuses([Self.member("add", "ghost", "INBOX", mutation: "g1")]) == ["not_found"])
        // A delete clears the sets with the payload.
        #expect(a.statuses([Self.delete("m1", at: 2)]) == ["applied"])
        #expect(a.statuses([Self.member("add", "m1", "INBOX", mutation: "a5")]) == ["not_found"])
    }

    @Test(arguments: Backend.allCases) func aMutationSeenBeforeIsAnsweredAsTheFirstTime(_ backend: Backend) throws {
        let a = try Account(backend)
        let first = a.push([Self.put("x", "v1", at: 5, mutation: "once")])
        let history = (first.json["historyId"] as? NSNumber)?.int64Value
        // The same push again (its answer was lost): nothing applies twice.
        let retried = a.push([Self.put("x", "v1", at: 5, mutation: "once")])
        #expect(retried.json["results"] as? NSArray == first.json["results"] as? NSArray)
        #expect((retried.json["historyId"] as? NSNumber)?.int64Value == history)
        // Even when the world moved on: a later write, then the old mutation id again.
        #expect(a.statuses([Self.put("x", "v2", at: 6, mutation: "later")]) == ["applied"])
        #expect(a.statuses([Self.put("x", "v1", at: 5, mutation: "once")]) == ["applied"], "answered as it was, not re-judged")
        #expect(a.payload("note", "x") == "v2", "and not applied again")
        // A stale answer is remembered as stale.
        #expect(a.statuses([Self.put("x", "old", at: 1, mutation: "lost")]) == ["stale"])
        #expect(a.statuses([Self.put("x", "old", at: 1, mutation: "lost")]) == ["stale"])
    }

    // MARK: - Several mutations of one push

    /// The results of a push, as (status, seq) pairs.
    static func outcomes(_ answer: HubResponse) -> [(String, Int64?)] {
        (answer.json["results"] as? [[String: Any]] ?? []).map { ($0["status"] as? String ?? "", ($0["seq"] as? NSNumber)?.int64Value) }
    }

    @Test(arguments: Backend.allCases) func mutationsOfOneRecordInOnePushAreJudgedInOrder(_ backend: Backend) throws {
        let a = try Account(backend)
        let first = a.push([Self.put("x", "one", at: 1), Self.put("x", "two", at: 2), Self.put("x", "older", at: 1), Self.put("y", "why", at: 1)])
        #expect(Self.outcomes(first).map(\.0) == ["applied", "applied", "stale", "applied"])
        #expect(Self.outcomes(first).map(\.1) == [1, 2, nil, 3])
        #expect((first.json["historyId"] as? NSNumber)?.int64Value == 3)
        #expect(a.payload("note", "x") == "two")
        // A delete, then a put of the same time (the tombstone wins), then a newer put.
        let second = a.push([Self.delete("x", at: 5), Self.put("x", "tie", at: 5), Self.delete("x", at: 6), Self.put("x", "back", at: 7)])
        #expect(Self.outcomes(second).map(\.0) == ["applied", "stale", "not_found", "applied"])
        // The second delete meets the tombstone: not found, and its later time is a change.
        #expect(Self.outcomes(second).map(\.1) == [4, nil, 5, 6])
        #expect(a.payload("note", "x") == "back")
        // The feed holds each record once, at its last position, and ends at the history id.
        let (changes, next) = try a.pageAll()
        #expect(changes.map { $0["id"] as? String ?? "" } == ["y", "x"])
        #expect(changes.map { ($0["seq"] as? NSNumber)?.int64Value ?? 0 } == [3, 6])
        #expect(next == 6)
    }

    /// Pushes into one account that arrive together are written together (a group
    /// commit), each answered as if it had come alone: a refused session refuses only
    /// its own push, a mutation id two pushes share is applied once and both get that
    /// answer, and every change has its own history position.
    @Test(arguments: Backend.allCases) func concurrentPushesIntoOneAccountAreEachAnsweredAsIfAlone(_ backend: Backend) throws {
        let account = try Account(backend)
        let answers = Mutex<[Int: HubResponse]>([:])
        let group = DispatchGroup()
        let service = account.hub.service
        let (base, goodToken) = (account.base, account.token)
        for pusher in 0..<16 {
            var mutations = (0..<20).map { Self.put("p\(pusher)-\($0)", "v", at: 10, mutation: "m\(pusher)-\($0)") }
            mutations.insert(Self.put("shared", "s", at: 5, mutation: "shared"), at: pusher % 20)
            let body = Array(HubJSON.encode(["mutations": mutations]).utf8)
            let token = pusher == 7 ? "not-a-token" : goodToken
            group.enter()
            Thread {
                defer { group.leave() }
                let request = HubRequest(method: "POST", target: "\(base)/records/push", headers: ["authorization": "Bearer \(token)"], body: body)
                let answer = service.handle(request).response ?? HubResponse(status: 0)
                answers.withLock { $0[pusher] = answer }
            }.start()
        }
        #expect(group.wait(timeout: .now() + 60) == .success)
        let all = answers.withLock { $0 }
        #expect(all[7]?.status == 401, "the push with a bad token is refused, alone")
        var sharedSeqs = Set<Int64>()
        var seqs = Set<Int64>()
        for (pusher, answer) in all where pusher != 7 {
            #expect(answer.status == 200, "pusher \(pusher): \(answer.text)")
            let results = answer.json["results"] as? [[String: Any]] ?? []
            #expect(results.count == 21)
            for result in results {
                #expect(result["status"] as? String == "applied", "\(result)")
                let seq = (result["seq"] as? NSNumber)?.int64Value ?? -1
                if result["mutation"] as? String == "shared" { sharedSeqs.insert(seq) } else { #expect(seqs.insert(seq).inserted, "position \(seq) given twice") }
            }
            #expect((answer.json["historyId"] as? NSNumber)?.int64Value ?? 0 >= (results.compactMap { ($0["seq"] as? NSNumber)?.int64Value }.max() ?? 0))
        }
        #expect(sharedSeqs.count == 1, "the shared mutation is applied once and answered so to all: \(sharedSeqs)")
        #expect(seqs.count == 15 * 20)
        let feed = try account.pageAll()
        #expect(feed.changes.count == 15 * 20 + 1)
        #expect(feed.next == 15 * 20 + 1)
        #expect(Set(seqs.union(sharedSeqs)) == Set((1...Int64(15 * 20 + 1))))
    }

    @Test(arguments: Backend.allCases) func aMutationIDRepeatedInOnePushIsAnsweredAsTheFirstTime(_ backend: Backend) throws {
        let a = try Account(backend)
        let answer = a.push([
            Self.put("x", "first", at: 1, mutation: "same"), Self.put("x", "second", at: 2, mutation: "same"), Self.put("z", "zed", at: 1, mutation: "other"),
            Self.put("x", "third", at: 3, mutation: "same"),
        ])
        let results = answer.json["results"] as? [[String: Any]] ?? []
        #expect(results.count == 4)
        #expect(results.map { $0["mutation"] as? String ?? "" } == ["same", "same", "other", "same"])
        #expect(Self.outcomes(answer).map(\.0) == ["applied", "applied", "applied", "applied"])
        #expect(Self.outcomes(answer).map(\.1) == [1, 1, 2, 1], "each repeat is the first answer, applying nothing")
        #expect((answer.json["historyId"] as? NSNumber)?.int64Value == 2)
        #expect(a.payload("note", "x") == "first")
        // And in a later push, as everywhere.
        #expect(Self.outcomes(a.push([Self.put("x", "fourth", at: 4, mutation: "same")])).map(\.1) == [1])
        #expect(a.payload("note", "x") == "first")
    }

    @Test(arguments: Backend.allCases) func onePushMixesKindsPutsDeletesAndMemberSets(_ backend: Backend) throws {
        let a = try Account(backend)
        #expect(a.hub.call("PUT", "\(a.base)/kinds/diary", json: ["appendOnly": true], token: a.token).status == 200)
        let first = a.push([
            Self.put("m1", "mail", at: 1, group: "thread-1"), Self.member("add", "m1", "INBOX", mutation: "a1"), Self.member("add", "m1", "INBOX", mutation: "a2"),
            Self.put("d1", "entry", at: 1, kind: "diary"), Self.delete("d1", at: 2, kind: "diary"), Self.member("remove", "m1", "UNREAD", mutation: "r1"),
            Self.member("add", "m1", "UNREAD", mutation: "a3"), Self.member("add", "ghost", "INBOX", mutation: "g1"), Self.put("m1", "diary-id", at: 1, kind: "diary"),
        ])
        #expect(Self.outcomes(first).map(\.0) == ["applied", "applied", "applied", "applied", "refused", "applied", "applied", "not_found", "applied"])
        #expect(Self.outcomes(first).map(\.1) == [1, 2, 2, 3, nil, 2, 4, nil, 5], "an idempotent set op answers the record's position")
        #expect(((first.json["results"] as? [[String: Any]])?[4]["reason"] as? String) == "append_only")
        #expect((a.get("note", "m1").json["sets"] as? [String: [String]]) == ["labels": ["INBOX", "UNREAD"]])
        #expect(a.payload("diary", "d1") == "entry")
        #expect(a.payload("diary", "m1") == "diary-id", "the same id in another kind is another record")
        #expect((a.get("diary", "m1").json["sets"] as? [String: [String]]) == [:])
        // A delete clears the sets; set ops on the tombstone find nothing; a newer put brings the record back bare.
        let second = a.push([
            Self.member("remove", "m1", "INBOX", mutation: "r2"), Self.delete("m1", at: 5), Self.member("add", "m1", "X", mutation: "a4"), Self.put("m1", "again", at: 6),
            Self.member("add", "m1", "STAR", mutation: "a5"),
        ])
        #expect(Self.outcomes(second).map(\.0) == ["applied", "applied", "not_found", "applied", "applied"])
        #expect(Self.outcomes(second).map(\.1) == [6, 7, nil, 8, 9])
        let m1 = a.get("note", "m1").json
        #expect((m1["sets"] as? [String: [String]]) == ["labels": ["STAR"]])
        #expect(m1["group"] as? String == "thread-1", "a put without a group keeps the record's")
        #expect(a.payload("note", "m1") == "again")
        let (changes, next) = try a.pageAll()
        #expect(changes.map { "\($0["kind"] as? String ?? "")/\($0["id"] as? String ?? "")" } == ["diary/d1", "diary/m1", "note/m1"])
        #expect(next == 9)
        let replayed = a.hub.call("GET", "\(a.base)/records/replay", token: a.token).json["records"] as? [[String: Any]] ?? []
        #expect(replayed.first { $0["id"] as? String == "m1" && $0["kind"] as? String == "note" }?["sets"] as? [String: [String]] == ["labels": ["STAR"]])
    }

    @Test(arguments: Backend.allCases) func pushBodiesReadAlikeHoweverTheJSONIsWritten(_ backend: Backend) throws {
        let a = try Account(backend)
        // Escapes of every kind (a surrogate pair among them), null optionals, whitespace, and an unknown field.
        let body = #"""
             { "mutations" : [ {"mutation":"e\u0031","kind":"no\/te","id":"a \"b\"\\c\u00e9\ud83d\ude00\n","op":"put","payload":"aGk=","group":null,"set":null,"modifiedAt":-0},
            {"mutation":"e2","kind":"note","id":"plain-é","op":"put","payload":"aG\/+","modifiedAt":5,"extra":{"ignored":[1,2.5,true]}} ] }
            """#
        let answer = a.hub.call("POST", "\(a.base)/records/push", body: Array(body.utf8), token: a.token)
        #expect(answer.status == 200, "\(answer.text)")
        #expect(Self.outcomes(answer).map(\.0) == ["applied", "applied"])
        #expect((answer.json["results"] as? [[String: Any]])?.first?["mutation"] as? String == "e1")
        let (changes, _) = try a.pageAll()
        #expect(changes.map { $0["kind"] as? String ?? "" } == ["no/te", "note"])
        #expect(changes.map { $0["id"] as? String ?? "" } == ["a \"b\"\\c\u{e9}\u{1F600}\n", "plain-\u{e9}"])
        #expect(changes.map { $0["payload"] as? String ?? "" } == ["aGk=", "aG/+"])
        #expect(changes.first?["group"] is NSNull)
        #expect(changes.first?["modifiedAt"] as? Int == 0)
        // A fraction is refused naming its field; a whole number written with a fraction is the integer.
        let fraction = a.hub.call(
            "POST", "\(a.base)/records/push", body: Array(#"{"mutations":[{"mutation":"f","kind":"k","id":"i","op":"put","payload":"AA==","modifiedAt":1.5}]}"#.utf8), token: a.token)
        #expect(fraction.status == 400 && fraction.text.contains("modifiedAt"))
        let whole = a.hub.call(
            "POST", "\(a.base)/records/push", body: Array(#"{"mutations":[{"mutation":"w","kind":"k","id":"i","op":"put","payload":"AA==","modifiedAt":2.0}]}"#.utf8), token: a.token)
        #expect(Self.outcomes(whole).map(\.0) == ["applied"])
        let wrongType = a.hub.call(
            "POST", "\(a.base)/records/push", body: Array(#"{"mutations":[{"mutation":"t","kind":"k","id":7,"op":"put","payload":"AA==","modifiedAt":2}]}"#.utf8), token: a.token)
        #expect(wrongType.status == 400 && wrongType.text.contains("mutations[0].id"), "\(wrongType.text)")
    }

    @Test(arguments: Backend.allCases) func aWriteFromTooFarAheadIsRefusedWithTheHubsTime(_ backend: Backend) throws {
        let a = try Account(backend) { $0.maximumClockAheadSeconds = 60 }
        let results = a.push([Self.put("x", "future", at: a.hub.now + 61_000)]).json["results"] as? [[String: Any]]
        #expect(results?.first?["status"] as? String == "refused")
        #expect(results?.first?["reason"] as? String == "clock_skew")
        #expect((results?.first?["hubTime"] as? NSNumber)?.int64Value == a.hub.now)
        #expect(a.statuses([Self.put("y", "soon", at: a.hub.now + 59_000)]) == ["applied"])
    }

    // MARK: - Names byte for byte, and what no name or time may be

    /// The bytes of `text` percent-encoded, every one: a path segment that says exactly those bytes.
    static func encoded(_ text: String) -> String { text.utf8.map { String(format: "%%%02X", $0) }.joined() }

    /// Two spellings of "é" (one character, and "e" with a combining accent) are
    /// equal as Swift strings but are two UTF-8 byte strings: in one push they are
    /// two records and two members, each read back by its own bytes; a mutation
    /// id in either spelling is its own mutation.
    @Test(arguments: Backend.allCases) func namesThatLookAlikeAreTwoRecordsInOnePush(_ backend: Backend) throws {
        let a = try Account(backend)
        let composed = "\u{e9}"
        let decomposed = "e\u{301}"
        #expect(composed == decomposed && Array(composed.utf8) != Array(decomposed.utf8))
        #expect(
            a.statuses([
                Self.put(composed, "one", at: 5, mutation: "n-\(composed)"), Self.put(decomposed, "two", at: 10, mutation: "n-\(decomposed)"),
                Self.put("tagged", "t", at: 1), Self.member("add", "tagged", composed, mutation: "a1"), Self.member("add", "tagged", decomposed, mutation: "a2"),
            ]) == ["applied", "applied", "applied", "applied", "applied"])
        #expect(a.payload("note", Self.encoded(composed)) == "one")
        #expect(a.payload("note", Self.encoded(decomposed)) == "two")
        // A delete of one spelling leaves the other.
        #expect(a.statuses([Self.delete(decomposed, at: 20)]) == ["applied"])
        #expect(a.get("note", Self.encoded(decomposed)).status == 404)
        #expect(a.payload("note", Self.encoded(composed)) == "one")
        let members = (a.get("note", "tagged").json["sets"] as? [String: [String]])?["labels"] ?? []
        #expect(Set(members.map { Array($0.utf8) }) == [Array(composed.utf8), Array(decomposed.utf8)])
        // And across pushes: removing one spelling keeps the other member.
        #expect(a.statuses([Self.member("remove", "tagged", decomposed, mutation: "r2")]) == ["applied"])
        let left = (a.get("note", "tagged").json["sets"] as? [String: [String]])?["labels"] ?? []
        #expect(left.map { Array($0.utf8) } == [Array(composed.utf8)])
        // Two set names in the two spellings are two sets, in the push and in every read.
        let bySet: [[String: Any]] = [
            ["mutation": "s1", "kind": "note", "id": "tagged", "op": "add", "set": composed, "member": "x", "modifiedAt": 1],
            ["mutation": "s2", "kind": "note", "id": "tagged", "op": "add", "set": decomposed, "member": "y", "modifiedAt": 1],
        ]
        #expect(a.statuses(bySet) == ["applied", "applied"])
        let read = a.get("note", "tagged").body
        let changes = a.hub.call("GET", "\(a.base)/records/changes?since=0", token: a.token).body
        for body in [read, changes] {
            let text = String(decoding: body, as: UTF8.self)
            #expect(text.contains("\"\(composed)\":[\"x\"]") && text.contains("\"\(decomposed)\":[\"y\"]"), "\(text)")
        }
    }

    /// U+0000 in a kind, id, group, set, member or mutation id is refused whole
    /// (PostgreSQL's text cannot hold it, so neither backend takes it), as it is
    /// in a single record's path; nothing is written.
    @Test(arguments: Backend.allCases) func aNameHoldingNULIsRefusedAndNothingIsWritten(_ backend: Backend) throws {
        let a = try Account(backend)
        var withGroup = Self.put("g", "v", at: 1)
        withGroup["group"] = "t\u{0}1"
        let bodies: [[String: Any]] = [
            Self.put("a", "v", at: 1, kind: "z\u{0}"), Self.put("b\u{0}x", "v", at: 1), Self.put("c", "v", at: 1, mutation: "m\u{0}"), withGroup,
            ["mutation": "s", "kind": "note", "id": "d", "op": "add", "set": "l\u{0}", "member": "x", "modifiedAt": 1],
            ["mutation": "t", "kind": "note", "id": "d", "op": "add", "set": "labels", "member": "x\u{0}", "modifiedAt": 1],
        ]
        for mutation in bodies {
            let answer = a.push([Self.put("fine", "v", at: 1, mutation: "fine-\(UUID())"), mutation])
            #expect(answer.status == 400, "\(mutation)")
            #expect(answer.text.contains("U+0000"), "\(answer.text)")
        }
        #expect(a.get("note", "fine").status == 404)
        #expect(a.hub.call("PUT", "\(a.base)/records/note/x%00y", json: ["payload": "QQ==", "modifiedAt": 1], token: a.token).status == 400)
        #expect(a.get("note", "x%00y").status == 400)
    }

    /// Times are 0 to 2^53 − 1 milliseconds in a push, a put and a delete alike;
    /// a single record's delete dated past `--max-clock-ahead` is refused as a
    /// put is (`422 clock_skew`), and nothing is written.
    @Test(arguments: Backend.allCases) func timesOutOfRangeOrTooFarAheadAreRefusedEverywhere(_ backend: Backend) throws {
        let a = try Account(backend) { $0.maximumClockAheadSeconds = 10 }
        for time: Int64 in [-5, -9_007_199_254_740_993, 9_007_199_254_740_992] {
            let answer = a.push([Self.put("p", "v", at: time)])
            #expect(answer.status == 400, "\(time): \(answer.text)")
            #expect(answer.text.contains("modifiedAt"), "\(answer.text)")
            #expect(a.hub.call("PUT", "\(a.base)/records/note/q", json: ["payload": "QQ==", "modifiedAt": time], token: a.token).status == 400, "\(time)")
        }
        #expect(a.hub.call("DELETE", "\(a.base)/records/note/q?modifiedAt=9007199254740992", token: a.token).status == 400)
        let ahead = a.hub.call("DELETE", "\(a.base)/records/note/q?modifiedAt=\(a.hub.now + 86_400_000)", token: a.token)
        #expect(ahead.status == 422)
        #expect((ahead.json["error"] as? [String: Any])?["code"] as? String == "clock_skew")
        #expect((ahead.json["hubTime"] as? NSNumber)?.int64Value == a.hub.now)
        // Nothing was written: a put dated now still lands.
        #expect(a.hub.call("PUT", "\(a.base)/records/note/q", json: ["payload": "QQ==", "modifiedAt": a.hub.now], token: a.token).status == 200)
    }

    /// Malformed input is said in the API's words: no Swift type names, no
    /// empty field name, an empty epoch and a broken percent-escape named.
    @Test(arguments: Backend.allCases) func malformedInputIsSaidInTheAPIsWords(_ backend: Backend) throws {
        let a = try Account(backend)
        let array = a.hub.call("POST", "\(a.base)/records/push", body: Array("[]".utf8), token: a.token)
        #expect(array.status == 400)
        #expect(array.text.contains("must be a JSON object") && !array.text.contains("Dictionary"), "\(array.text)")
        let string = a.hub.call(
            "POST", "\(a.base)/records/push", body: Array(#"{"mutations":[{"mutation":"m","kind":"k","id":"i","op":"delete","modifiedAt":"1"}]}"#.utf8), token: a.token)
        #expect(string.status == 400)
        #expect(string.text.contains("mutations[0].modifiedAt") && string.text.contains("whole number") && !string.text.contains("Double"), "\(string.text)")
        let epoch = a.hub.call("GET", "\(a.base)/records/changes?since=0&epoch=", token: a.token)
        #expect(epoch.status == 400)
        #expect(epoch.text.contains("epoch is empty"), "\(epoch.text)")
        for path in ["note/%ZZ", "note/%C3", "%C3/x"] {
            let answer = a.get(String(path.split(separator: "/")[0]), String(path.split(separator: "/")[1]))
            #expect(answer.status == 400, "\(path)")
            #expect(answer.text.contains("percent-encoding"), "\(answer.text)")
        }
        #expect(a.hub.call("GET", "/v1/nope", token: a.token).text.contains("docs/hub-api.md lists"))
    }

    /// A file that is no database is said to be damaged, with the way on (a
    /// backup), not blamed on the directory. A database damaged under a running
    /// hub answers `500` saying so, not a `503` to retry for ever, and what SQLite
    /// said (its statements, its file) goes only to the operator's log.
    @Test func aDamagedDatabaseIsSaidToBeDamagedAndItsStatementsStayInTheLog() throws {
        let directory = try TemporaryDirectory("stele-hub-damaged")
        let garbage = directory.file("garbage.sqlite")
        try Data(repeating: 0x5A, count: 8_192).write(to: URL(fileURLWithPath: garbage))
        do {
            _ = try SQLiteHubStorage(path: garbage)
            Issue.record("a file of garbage opened as the hub's database")
        } catch let error as HubStorageError {
            #expect(error.code == .damaged)
            #expect(error.message.contains("put back a backup") && !error.message.contains("writable"), "\(error.message)")
        }

        let path = directory.file("hub.sqlite")
        let storage = try SQLiteHubStorage(path: path)
        let harness = HubHarness(storage: storage)
        let clock = harness.clock
        let account = try harness.found(Fixtures.identity(1))
        let token = try harness.session(Fixtures.identity(1), account)
        let filler = String(repeating: "x", count: 3_000)
        for index in 0..<60 {
            _ = harness.call(
                "POST", "/v1/accounts/\(account.hex)/records/push", json: ["mutations": [Self.put("r\(index)", filler, at: Int64(index + 1))]], token: token)
        }
        storage.close()
        // Every page past the schema's first few overwritten: the records' pages are garbage.
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        let size = try handle.seekToEnd()
        for offset in stride(from: UInt64(4 * 4_096), to: size, by: 4_096) {
            try handle.seek(toOffset: offset)
            try handle.write(contentsOf: Data(repeating: 0xA5, count: 4_096))
        }
        try handle.close()
        let reopened: SQLiteHubStorage
        do {
            reopened = try SQLiteHubStorage(path: path)
        } catch let error as HubStorageError {
            // Damage the migration met on opening: said as such.
            #expect(error.code == .damaged, "\(error.message)")
            return
        }
        defer { reopened.close() }
        let answer = HubService(storage: reopened, clock: { clock.milliseconds }).handle(
            HubRequest(method: "GET", target: "/v1/accounts/\(account.hex)/records/note/r7", headers: ["authorization": "Bearer \(token)"]))
        guard case .respond(let response) = answer else {
            Issue.record("a read of a damaged database was parked")
            return
        }
        #expect(response.status == 500)
        let text = String(decoding: response.body, as: UTF8.self)
        #expect(text.contains("damaged") && !text.contains("SELECT") && !text.contains(path), "\(text)")
        #expect(response.detail?.contains("malformed") == true || response.detail?.contains("damaged") == true, "\(response.detail ?? "")")
    }

    // MARK: - The change feed and replay

    @Test(arguments: Backend.allCases) func changesPageInHistoryOrderAndEndAtTheHistoryID(_ backend: Backend) throws {
        let a = try Account(backend)
        for index in 0..<25 { a.push([Self.put("r\(index)", "v", at: Int64(index))]) }
        a.push([Self.delete("r3", at: 100)])
        a.push([Self.put("r4", "edited", at: 100)])
        let (changes, next) = try a.pageAll(limit: 7)
        // r3 and r4 changed twice: only their latest versions remain, at their new positions.
        #expect(changes.count == 25)
        let seqs = changes.compactMap { ($0["seq"] as? NSNumber)?.int64Value }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        #expect(changes.last?["id"] as? String == "r4")
        #expect(changes.dropLast().last?["id"] as? String == "r3")
        #expect(changes.dropLast().last?["payload"] is NSNull, "tombstones are in the feed")
        let status = a.hub.call("GET", "\(a.base)/status", token: a.token)
        #expect((status.json["historyId"] as? NSNumber)?.int64Value == next)
        #expect(next == 27)
        // Nothing after the end; a cursor from the future or of another epoch is rewound history.
        let empty = a.hub.call("GET", "\(a.base)/records/changes?since=\(next)", token: a.token)
        #expect(empty.status == 200 && (empty.json["changes"] as? [Any])?.isEmpty == true && empty.json["more"] as? Bool == false)
        let beyond = a.hub.call("GET", "\(a.base)/records/changes?since=\(next + 1)", token: a.token)
        #expect(beyond.status == 409 && beyond.errorCode == "history_rewound")
        #expect((beyond.json["historyId"] as? NSNumber)?.int64Value == next)
        #expect(beyond.json["epoch"] as? String == empty.json["epoch"] as? String)
        let foreign = a.hub.call("GET", "\(a.base)/records/changes?since=0&epoch=another", token: a.token)
        #expect(foreign.status == 409 && foreign.errorCode == "history_rewound")
    }

    /// `stele-hub restored` starts a new epoch and notes where it forked: a cursor of an
    /// older epoch is told how much of its history the hub still holds (the lowest fork
    /// on the way back to its epoch, per account), one of an unknown epoch nothing.
    @Test(arguments: Backend.allCases) func aRewoundHistorySaysHowMuchOfACursorsEpochItHolds(_ backend: Backend) throws {
        let a = try Account(backend)
        let b = try a.hub.found(Fixtures.identity(2))
        let bToken = try a.hub.session(Fixtures.identity(2), b)
        for index in 0..<5 { a.push([Self.put("r\(index)", "v", at: Int64(index))]) }
        a.hub.call("POST", "/v1/accounts/\(b.hex)/records/push", json: ["mutations": [Self.put("x", "v", at: 1)]], token: bToken)
        let first = try #require(a.hub.call("GET", "\(a.base)/records/changes?since=0", token: a.token).json["epoch"] as? String)

        let one = try a.hub.storage.transaction { sql in try HubService.startNewEpoch(now: a.hub.now, sql) }
        #expect(one.previous == first && one.current != first)
        for index in 0..<3 { a.push([Self.put("s\(index)", "v", at: Int64(index))]) }
        func rewound(_ epoch: String, since: Int64 = 0, account: AccountID? = nil, token: String? = nil) -> (status: Int, common: Int64?, history: Int64?) {
            let answer = a.hub.call("GET", "/v1/accounts/\((account ?? a.account).hex)/records/changes?since=\(since)&epoch=\(epoch)", token: token ?? a.token)
            return (answer.status, (answer.json["commonHistoryId"] as? NSNumber)?.int64Value, (answer.json["historyId"] as? NSNumber)?.int64Value)
        }
        #expect(rewound(first) == (409, 5, 8))
        #expect(rewound(first, account: b, token: bToken) == (409, 1, 1), "each account forks at its own history id")

        let two = try a.hub.storage.transaction { sql in try HubService.startNewEpoch(now: a.hub.now, sql) }
        #expect(two.previous == one.current)
        #expect(rewound(one.current) == (409, 8, 8))
        #expect(rewound(first) == (409, 5, 8), "the lowest fork on the way back")
        #expect(rewound("never-issued") == (409, 0, 8), "an epoch not on the lineage: nothing is vouched for")
        #expect(rewound(two.current, since: 9) == (409, 8, 8), "a cursor beyond the history: the history is what is held")
        #expect(rewound(two.current).status == 200)
    }

    /// A fresh hub's first feed requests are refused (another epoch): the epoch they name must be
    /// the same each time. Made inside the refused request's transaction, it was rolled back and
    /// made anew at every request, and a client replayed for ever (found by stele simulate --clients).
    @Test(arguments: Backend.allCases) func refusedFeedRequestsOfAFreshHubNameOneEpoch(_ backend: Backend) throws {
        let a = try Account(backend)
        let first = a.hub.call("GET", "\(a.base)/records/changes?since=0&epoch=another", token: a.token)
        let second = a.hub.call("GET", "\(a.base)/records/changes?since=0&epoch=another", token: a.token)
        #expect(first.status == 409 && second.status == 409)
        let epoch = try #require(first.json["epoch"] as? String)
        #expect(second.json["epoch"] as? String == epoch)
        let feed = a.hub.call("GET", "\(a.base)/records/changes?since=0&epoch=\(epoch)", token: a.token)
        #expect(feed.status == 200 && feed.json["epoch"] as? String == epoch)
    }

    @Test(arguments: Backend.allCases) func aWaitingChangesPollAnswersWhenAPushLands(_ backend: Backend) throws {
        let a = try Account(backend)
        let request = HubRequest(method: "GET", target: "\(a.base)/records/changes?since=0&wait=30", headers: ["authorization": "Bearer \(a.token)"])
        guard case .wait(let wait) = a.hub.service.handle(request) else {
            Issue.record("an empty feed with wait should park")
            return
        }
        #expect(wait.poll() == nil)
        let woke = WakeCounter()
        let ticket = a.hub.service.wakeups.subscribe(wait.key) { woke.add() }
        a.push([Self.put("x", "v", at: 1)])
        // On PostgreSQL the wakeup comes back through NOTIFY, a moment later.
        #expect(try eventually(5) { woke.count == 1 })
        a.hub.service.wakeups.cancel(ticket)
        let answer = try #require(wait.poll())
        #expect((answer.json["changes"] as? [[String: Any]])?.first?["id"] as? String == "x")
        // The expired wait answers an empty page at the cursor.
        #expect((wait.expire().json["changes"] as? [Any])?.isEmpty == true)
    }

    @Test(arguments: Backend.allCases) func replayPagesEveryRecordAndRefusesATokenItNeverIssued(_ backend: Backend) throws {
        let a = try Account(backend)
        for index in 0..<9 { a.push([Self.put("r\(index)", "v\(index)", at: 1, kind: index % 2 == 0 ? "even" : "odd")]) }
        a.push([Self.delete("r0", at: 2, kind: "even")])
        a.push([Self.member("add", "r1", "STAR", mutation: "s", kind: "odd")])
        let before = try a.hub.snapshot()
        var token = ""
        var seen: [String] = []
        var pages = 0
        repeat {
            let page = a.hub.call("GET", "\(a.base)/records/replay?limit=4\(token.isEmpty ? "" : "&after=\(token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")")", token: a.token)
            #expect(page.status == 200, "\(page.text)")
            let records = page.json["records"] as? [[String: Any]] ?? []
            seen += records.map { "\($0["kind"] as? String ?? "")/\($0["id"] as? String ?? "")" }
            if let star = records.first(where: { $0["id"] as? String == "r1" }) { #expect((star["sets"] as? [String: [String]]) == ["labels": ["STAR"]]) }
            token = page.json["next"] as? String ?? ""
            pages += 1
            if page.json["more"] as? Bool != true { break }
        } while pages < 10
        #expect(pages == 3)
        #expect(seen == ["even/r0", "even/r2", "even/r4", "even/r6", "even/r8", "odd/r1", "odd/r3", "odd/r5", "odd/r7"])
        #expect(try a.hub.snapshot().filter { !$0.hasPrefix("hub_meta") } == before.filter { !$0.hasPrefix("hub_meta") }, "replay touches nothing")
        let forged = a.hub.call("GET", "\(a.base)/records/replay?after=\(Data("even\u{0}r2".utf8).base64EncodedString()).0000000000000000", token: a.token)
        #expect(forged.status == 400 && forged.errorCode == "bad_request")
        #expect(a.hub.call("GET", "\(a.base)/records/replay?after=nonsense", token: a.token).status == 400)
    }

    /// A delete that meets a tombstone is `not_found`, yet its later time is kept: a
    /// put older than it (and newer than the first delete) loses, on the push and on
    /// the single-record endpoints alike, and a delete of a record the hub never had
    /// keeps its time too. Before, two deletes or a delete pushed again after a restore
    /// were forgotten and such a put brought the record back (stele simulate, seed 20050).
    @Test(arguments: Backend.allCases) func aDeleteThatMeetsATombstoneKeepsItsLaterTime(_ backend: Backend) throws {
        let a = try Account(backend)
        #expect(a.statuses([Self.put("x", "one", at: 10)]) == ["applied"])
        #expect(a.statuses([Self.delete("x", at: 100)]) == ["applied"])
        let second = a.push([Self.delete("x", at: 300)])
        let result = (second.json["results"] as? [[String: Any]])?.first
        #expect(result?["status"] as? String == "not_found")
        #expect((result?["seq"] as? NSNumber)?.int64Value == 3, "the later time is a change in the feed")
        #expect(a.statuses([Self.put("x", "between", at: 200)]) == ["stale"])
        #expect(a.get("note", "x").status == 404)
        let again = a.push([Self.delete("x", at: 250)])
        #expect((again.json["results"] as? [[String: Any]])?.first?["seq"] == nil, "an older delete changes nothing")

        // The single-record endpoints.
        let path = "\(a.base)/records/note/y"
        #expect(a.hub.call("DELETE", "\(path)?modifiedAt=300", token: a.token).status == 404, "absent: 404")
        let older = a.hub.call("PUT", path, json: ["payload": Data("v".utf8).base64EncodedString(), "modifiedAt": 200], token: a.token)
        #expect(older.status == 409 && older.errorCode == "stale")
        #expect(a.hub.call("PUT", path, json: ["payload": Data("v".utf8).base64EncodedString(), "modifiedAt": 400], token: a.token).status == 200)
        #expect(a.hub.call("DELETE", "\(path)?modifiedAt=500", token: a.token).status == 200)
        #expect(a.hub.call("DELETE", "\(path)?modifiedAt=700", token: a.token).status == 404, "a tombstone: 404")
        let between = a.hub.call("PUT", path, json: ["payload": Data("w".utf8).base64EncodedString(), "modifiedAt": 600], token: a.token)
        #expect(between.status == 409 && between.errorCode == "stale")
    }

    // MARK: - Single records

    /// A single record's read tells the history's epoch (`Stele-Hub-Epoch`), found or
    /// not: a 404 of another epoch than a client's cursor is no delete (seed 174011).
    @Test(arguments: Backend.allCases) func aSingleRecordsReadTellsTheHistorysEpoch(_ backend: Backend) throws {
        let a = try Account(backend)
        let first = try #require(a.hub.call("GET", "\(a.base)/records/changes?since=0", token: a.token).json["epoch"] as? String)
        let absent = a.get("note", "x")
        #expect(absent.status == 404 && absent.headers["Stele-Hub-Epoch"] == first)
        a.push([Self.put("x", "v", at: 1)])
        let found = a.get("note", "x")
        #expect(found.status == 200 && found.headers["Stele-Hub-Epoch"] == first)
        let next = try a.hub.storage.transaction { sql in try HubService.startNewEpoch(now: a.hub.now, sql) }
        #expect(a.get("note", "x").headers["Stele-Hub-Epoch"] == next.current)
        let gone = a.get("note", "y")
        #expect(gone.status == 404 && gone.headers["Stele-Hub-Epoch"] == next.current)
    }

    @Test(arguments: Backend.allCases) func singleRecordsReadWriteAndDelete(_ backend: Backend) throws {
        let a = try Account(backend)
        let path = "\(a.base)/records/note/\("a b/c".addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
        #expect(a.hub.call("GET", path, token: a.token).status == 404)
        let put = a.hub.call("PUT", path, json: ["payload": Data("v".utf8).base64EncodedString(), "modifiedAt": 10, "sets": ["labels": ["INBOX"]]], token: a.token)
        #expect(put.status == 200)
        #expect(put.json["id"] as? String == "a b/c")
        #expect((put.json["sets"] as? [String: [String]]) == ["labels": ["INBOX"]])
        let stale = a.hub.call("PUT", path, json: ["payload": Data("old".utf8).base64EncodedString(), "modifiedAt": 9], token: a.token)
        #expect(stale.status == 409 && stale.errorCode == "stale")
        #expect((stale.json["record"] as? [String: Any])?["modifiedAt"] as? Int == 10)
        #expect(a.hub.call("DELETE", "\(path)?modifiedAt=5", token: a.token).errorCode == "stale")
        #expect(a.hub.call("DELETE", "\(path)?modifiedAt=11", token: a.token).status == 200)
        #expect(a.hub.call("DELETE", "\(path)?modifiedAt=12", token: a.token).status == 404, "deleting a tombstone is 404")
        #expect(a.hub.call("GET", path, token: a.token).status == 404)
        // The single-record writes are in the feed like pushes.
        let (changes, _) = try a.pageAll()
        #expect(changes.count == 1 && changes[0]["payload"] is NSNull)
    }

    /// `stele-hub serve` takes each limit up to its largest (docs/hub-api.md "Limits"); at
    /// every largest at once the hub's arithmetic on them (milliseconds, sums of bytes, the
    /// push grouping) stays inside 63 bits: a login, a push from the edge of the clock
    /// window, a page, a frame to the mailbox and the status are all served.
    @Test(arguments: Backend.allCases) func aHubAtEveryLimitsLargestServes(_ backend: Backend) throws {
        let tenYears = 315_360_000
        let a = try Account(backend) { configuration in
            configuration.maximumBodyBytes = 1 << 30
            configuration.maximumFrameBytes = 1 << 30
            configuration.maximumMailboxBytes = 1 << 40
            configuration.maximumMutationsPerPush = 1_000_000
            configuration.maximumChangesPerPage = 1_000_000
            configuration.maximumClockAheadSeconds = tenYears
            configuration.sessionLifetimeSeconds = tenYears
            configuration.joinRequestLifetimeSeconds = tenYears
        }
        let now = a.hub.clock.milliseconds
        #expect(a.statuses([Self.put("x", "v", at: now + Int64(tenYears) * 1_000 - 1)]) == ["applied"])
        #expect(a.statuses([Self.put("y", "v", at: now + Int64(tenYears) * 1_000 + 1)]) == ["refused"])
        #expect(try a.pageAll().changes.count == 1)
        let device = Fixtures.identity(1).deviceID.hex
        #expect(a.hub.call("POST", "\(a.base)/relay/\(device)", body: [1, 2, 3], token: a.token).status == 202)
        #expect(a.hub.call("GET", "\(a.base)/status", token: a.token).status == 200)
        #expect(a.hub.call("GET", "\(a.base)/join-requests", token: a.token).status == 200)
    }

    // MARK: - Bad input

    /// A query whose escapes do not decode is refused, not read as written:
    /// `epoch=%ZZ` named an epoch no history has, and the client was told to
    /// replay everything (`409 history_rewound`, `commonHistoryId 0`).
    @Test(arguments: Backend.allCases) func aMalformedQueryIsRefusedNotReadAsWritten(_ backend: Backend) throws {
        let a = try Account(backend)
        a.push([Self.put("x", "v", at: 1)])
        for target in ["records/changes?epoch=%ZZ", "records/changes?epoch=%C3", "records/changes?since=0&epoch=%", "records/replay?after=%ZZ", "relay?after=%2&wait=0", "records/changes?%ZZ=1"] {
            let refused = a.hub.call("GET", "\(a.base)/\(target)", token: a.token)
            #expect(refused.status == 400 && refused.errorCode == "bad_request", "\(target): \(refused.text)")
            #expect(refused.errorMessage?.contains("not percent-encoded UTF-8") == true, "\(target): \(refused.text)")
        }
        // Well-formed escapes decode as before: an epoch of another history is 409, the right one pages.
        #expect(a.hub.call("GET", "\(a.base)/records/changes?epoch=%41", token: a.token).status == 409)
        let epoch = try #require(a.hub.call("GET", "\(a.base)/records/changes", token: a.token).json["epoch"] as? String)
        let escaped = try #require(epoch.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "")))
        #expect(a.hub.call("GET", "\(a.base)/records/changes?epoch=\(escaped)", token: a.token).status == 200)
    }

    /// The canonical spelling is read back for every length; setting any unused
    /// pad bit of it (one of the low bits of the last character with bits) is refused.
    @Test func everyCanonicalSpellingIsReadAndEveryOtherPadBitRefused() {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        for count in 0..<40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let canonical = Data(bytes).base64EncodedString()
            #expect(HubJSON.base64(canonical) == bytes, "\(count) bytes")
            guard count % 3 != 0 else { continue }
            var characters = Array(canonical)
            let place = characters.count - (count % 3 == 1 ? 3 : 2)
            let value = alphabet.firstIndex(of: characters[place]) ?? 0
            for bit in 0..<(count % 3 == 1 ? 4 : 2) {
                characters[place] = alphabet[value ^ (1 << bit)]
                #expect(HubJSON.base64(String(characters)) == nil, "\(count) bytes, pad bit \(bit): \(String(characters))")
            }
        }
    }

    /// Bytes have one spelling on the wire: standard padded base64 whose pad bits
    /// are zero (RFC 4648 §3.5). Foundation's decoder also reads "dR==" as "dQ=="
    /// ("u"); the hub refuses every other spelling, in a push, a PUT and any other
    /// body, and keeps nothing of it. A null payload in a PUT says to send DELETE.
    @Test(arguments: Backend.allCases) func bytesHaveOneSpellingAndANullPutSaysToDelete(_ backend: Backend) throws {
        let a = try Account(backend)
        let before = try a.hub.snapshot()
        #expect(Data(base64Encoded: "dR==").map { [UInt8]($0) } == [0x75], "Foundation alone takes the non-zero pad bits this test is about")
        for spelling in ["dR==", "dQ", "dQ==\n", " dQ==", "dQ=", "dQ===", "d-Q=", "dRF="] {
            var mutation = Self.put("x", "v", at: 1)
            mutation["payload"] = spelling
            let pushed = a.hub.call("POST", "\(a.base)/records/push", json: ["mutations": [mutation]], token: a.token)
            #expect(pushed.status == 400 && pushed.errorCode == "bad_request", "push \(spelling): \(pushed.text)")
            #expect(pushed.errorMessage?.contains("standard padded base64") == true, "\(pushed.text)")
            let put = a.hub.call("PUT", "\(a.base)/records/note/x", json: ["payload": spelling, "modifiedAt": 1], token: a.token)
            #expect(put.status == 400 && put.errorCode == "bad_request", "PUT \(spelling): \(put.text)")
            #expect(put.errorMessage?.contains("standard padded base64") == true, "\(put.text)")
        }
        #expect(try a.hub.snapshot() == before, "nothing of a refused body is kept")
        let null = a.hub.call("PUT", "\(a.base)/records/note/x", json: ["payload": NSNull(), "modifiedAt": 1], token: a.token)
        #expect(null.status == 400 && null.errorCode == "bad_request")
        #expect(null.errorMessage?.contains("send DELETE") == true, "\(null.text)")
        // The canonical spellings still land: no pad, one pad, two pads.
        for (id, spelling) in [("three", "dXZ3"), ("two", "dXY="), ("one", "dQ==")] {
            #expect(a.hub.call("PUT", "\(a.base)/records/note/\(id)", json: ["payload": spelling, "modifiedAt": 2], token: a.token).status == 200)
        }
        #expect(a.get("note", "one").json["payload"] as? String == "dQ==")
        #expect(HubJSON.base64("") == [], "no bytes is the empty string")
    }

    /// JSON has no comma before `]` or `}` (RFC 8259 §4, §5), and HUB-API answers
    /// malformed JSON `400`; Foundation's parser on Linux lets one through, so
    /// every body the hub reads is looked at first. A comma inside a string is text.
    @Test(arguments: Backend.allCases) func aTrailingCommaIsMalformedJSONEverywhere(_ backend: Backend) throws {
        let a = try Account(backend)
        let before = try a.hub.snapshot()
        let bodies: [(String, String, String)] = [
            ("POST", "records/push", #"{"mutations":[{"mutation":"m1","kind":"k","id":"i","op":"put","payload":"eA==","modifiedAt":1},]}"#),
            ("POST", "records/push", #"{"mutations":[],}"#),
            ("POST", "records/push", "{\"mutations\":[{\"mutation\":\"m2\",\"kind\":\"k\",\"id\":\"i\",\"op\":\"put\",\"payload\":\"eA==\",\"modifiedAt\":1 ,\n }]}"),
            ("PUT", "records/k/i", #"{"payload":"eA==","modifiedAt":1,}"#),
            ("PUT", "kinds/k", #"{"appendOnly":false,}"#),
        ]
        for (method, path, body) in bodies {
            let answer = a.hub.call(method, "\(a.base)/\(path)", body: Array(body.utf8), token: a.token)
            #expect(answer.status == 400, "\(body): \(answer.text)")
            #expect(answer.errorCode == "bad_request")
            #expect(answer.text.contains("comma"), "\(answer.text)")
        }
        #expect(try a.hub.snapshot() == before, "nothing of a refused body is applied")
        // Commas, brackets, quotes and backslashes inside strings are the record's text.
        let tricky = #"{"mutations":[{"mutation":"m3","kind":"k","id":"a,]\",}","op":"put","payload":"eA==","modifiedAt":1}]}"#
        let pushed = a.hub.call("POST", "\(a.base)/records/push", body: Array(tricky.utf8), token: a.token)
        #expect(pushed.status == 200, "\(pushed.text)")
        #expect(pushed.text.contains("applied"), "\(pushed.text)")
    }

    @Test func theTrailingCommaCheckReadsStringsAsText() {
        for (text, offset) in [("[1,]", 2), ("{\"a\":1 , \n}", 7), ("[[1],[2,],3]", 7), ("{\"a\":[1,\t]}", 7)] as [(String, Int)] {
            #expect(HubJSON.trailingComma(in: Array(text.utf8)) == offset, "\(text)")
        }
        for text in ["[1,2]", "{}", "[]", #"{"a":",]"}"#, #"{"a":"\",}"}"#, #"["\\",1]"#, #"[",",",}"]"#, ""] {
            #expect(HubJSON.trailingComma(in: Array(text.utf8)) == nil, "\(text)")
        }
    }

    @Test(arguments: Backend.allCases) func badPushesAreRefusedWholeNamingTheField(_ backend: Backend) throws {
        let a = try Account(backend) { $0.maximumRecordBytes = 16 }
        a.push([Self.put("keep", "v", at: 1)])
        let before = try a.hub.snapshot()
        let good = Self.put("new", "v", at: 2)
        var unknownOp = good
        unknownOp["op"] = "upsert"
        var noKind = good
        noKind["kind"] = nil
        var wrongTime = good
        wrongTime["modifiedAt"] = "yesterday"
        var fractionTime = good
        fractionTime["modifiedAt"] = 1.5
        var bigPayload = good
        bigPayload["payload"] = Data(repeating: 1, count: 17).base64EncodedString()
        var notBase64 = good
        notBase64["payload"] = "%%%"
        var longID = good
        longID["id"] = String(repeating: "i", count: 1_025)
        let cases: [(Any, String)] = [
            ([unknownOp], "op"), ([noKind], "kind"), ([wrongTime], "modifiedAt"), ([fractionTime], "modifiedAt"), ([bigPayload], "payload"),
            ([notBase64], "payload"), ([longID], "id"), ([Self.member("add", "keep", "X", mutation: "x").filter { $0.key != "member" }], "member"),
            ([["mutation": "s", "kind": "k", "id": "i", "op": "add", "member": "m", "modifiedAt": 1]], "set"),
            ([good, "not an object"], "mutations[1]"), (Array(repeating: good, count: 1_001), "1001"), ("a string", "mutations"),
        ]
        for (mutations, field) in cases {
            let answer = a.hub.call("POST", "\(a.base)/records/push", json: ["mutations": mutations], token: a.token)
            #expect(answer.status == 400, "\(field): \(answer.text)")
            #expect(answer.errorCode == "bad_request")
            #expect(answer.text.contains(field), "\(field): \(answer.text)")
        }
        // Too many mutations: the hub's limit is in the refusal, for the client to send fewer.
        let tooMany = a.hub.call("POST", "\(a.base)/records/push", json: ["mutations": Array(repeating: good, count: 1_001)], token: a.token)
        #expect(tooMany.text.contains("\"maximumMutations\":1000"), "\(tooMany.text)")
        #expect(a.hub.call("POST", "\(a.base)/records/push", json: [:], token: a.token).status == 400)
        #expect(a.hub.call("POST", "\(a.base)/records/push", body: Array("{no".utf8), token: a.token).status == 400)
        #expect(try a.hub.snapshot() == before, "nothing of a refused push is applied")
        // Wrong or missing tokens, as everywhere.
        #expect(a.hub.call("POST", "\(a.base)/records/push", json: ["mutations": [good]]).status == 401)
        #expect(a.hub.call("GET", "\(a.base)/records/changes?since=x", token: a.token).status == 400)
        #expect(a.hub.call("GET", "\(a.base)/records/changes?limit=0", token: a.token).status == 400)
        #expect(a.hub.call("PUT", "\(a.base)/records/note/x", json: ["payload": "AA==", "modifiedAt": true], token: a.token).status == 400)
        // A refused set member is named by its set and place.
        let emptyMember = a.hub.call("PUT", "\(a.base)/records/note/x", json: ["payload": "AA==", "modifiedAt": 5, "sets": ["labels": ["INBOX", ""]]], token: a.token)
        #expect(emptyMember.status == 400 && emptyMember.errorMessage?.contains("\"sets.labels[1]\"") == true, "\(emptyMember.text)")
        #expect(try a.hub.snapshot() == before)
        // Above the hub's page size a limit is that size (a client asking more still pages; reading moves its cursor).
        #expect(a.hub.call("GET", "\(a.base)/records/changes?limit=1001", token: a.token).status == 200)
    }
}
