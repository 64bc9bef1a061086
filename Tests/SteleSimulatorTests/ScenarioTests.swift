import Foundation
import Testing
@testable import SteleSimulator

/// The scenario language (SCENARIOS.md): every shipped scenario passes under
/// several seeds, every kind of bad input is a parse error naming its line, and
/// a failing expectation says where, what and with which seed.
@Suite struct ScenarioTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Scenarios")

    static var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".scenario") }.sorted()
    }

    @Test func theSeedsTracesAreShipped() {
        // The issue's minimum: 000 §1, §3 both orders, §5 both cases, and a restore story.
        for name in [
            "000-1-deleted-conversation", "000-3-tombstone-arrives-first", "000-3-event-arrives-first", "000-5-delete-saw-the-edit",
            "000-5-delete-raced-the-edit", "restore-from-backup",
        ] {
            #expect(Self.files.contains("\(name).scenario"), "\(name) is missing")
        }
    }

    @Test(arguments: files)
    func everyShippedScenarioPasses(file: String) throws {
        let text = try String(contentsOf: Self.directory.appendingPathComponent(file), encoding: .utf8)
        let scenario = try ScenarioParser.parse(text, file: file)
        // One seed: the network timing of other seeds is what the sweeps of scripts/test vary.
        for seed: UInt64 in [0] {
            let runner = try ScenarioRunner(scenario: scenario, seed: seed)
            do {
                try runner.run()
            } catch let failure as ScenarioFailure {
                Issue.record("\(failure)")
            }
        }
    }

    // MARK: - Parsing

    @Test func theSpecsExampleParsesAndPasses() throws {
        let text = """
            # 000 §1: the phone deletes a conversation while the iPad sleeps.
            fleet phone ipad
            namespace memory log
            phone append memory c1 "hello"
            phone append memory c1 "how are you"
            sync
            offline ipad
            phone bury memory c1
            online ipad
            sync
            expect all memory c1 empty
            expect ipad stored memory c1 0
            expect resurrections 0
            """
        let scenario = try ScenarioParser.parse(text)
        #expect(scenario.lines.count == 12)
        #expect(scenario.lines[0].number == 2)
        try ScenarioRunner(scenario: scenario).run()
    }

    /// A file saved on Windows (CRLF) or with lone CRs reads as the same lines,
    /// numbered alike, and a parse error names its line without the CR.
    @Test(arguments: ["\r\n", "\r"]) func aFileWithOtherLineEndsReadsTheSame(ending: String) throws {
        let lines = ["# the phone deletes while the iPad sleeps", "fleet phone ipad", "namespace memory log", "", "phone append memory c1 \"hello\"",
            "sync", "offline ipad", "phone bury memory c1", "online ipad", "sync", "expect all memory c1 empty"]
        let unix = try ScenarioParser.parse(lines.joined(separator: "\n"))
        let other = try ScenarioParser.parse(lines.joined(separator: ending) + ending)
        #expect(other.lines.map(\.number) == unix.lines.map(\.number))
        #expect(other.lines.map(\.text) == unix.lines.map(\.text))
        try ScenarioRunner(scenario: other).run()
        let typo = #expect(throws: ScenarioParseError.self) { try ScenarioParser.parse(["fleet a b", "sync", "snyc"].joined(separator: ending)) }
        #expect(typo?.line == 3)
        #expect(typo?.text == "snyc")
    }

    @Test func everyFleetStatementAndExpectationParses() throws {
        let text = """
            fleet a b c
            namespace notes causal
            namespace flags lww
            namespace memory log
            namespace chat messages
            namespace cache local
            join d
            revoke d
            a put notes k "buy \\"milk\\" \\\\ now"
            a delete notes k
            a append memory g hello
            a bury memory g
            a post chat m1 "hi there"
            a edit chat m1 "hi"
            a unsend chat m1 me
            a unsend chat m1 everyone
            a react chat m1 👍
            a unreact chat m1 👍
            offline a b
            online a b
            partition a / b c
            heal
            network loss 10
            network duplicate 5%
            network delay 10ms 2s
            sync
            advance 30d
            gc off
            gc on
            backup a as monday
            restore a from monday
            crash a
            anchor down
            anchor up
            anchor fail next write
            anchor delay next write 15s
            expect a notes k = "v"
            expect a notes k absent
            expect all notes k = "v"
            expect all notes k absent
            expect a memory g empty
            expect all memory g empty
            expect a notes count 3
            expect a stored memory g 2
            expect a message chat m1 = "hi"
            expect a message chat m1 deleted
            expect a message chat m1 absent
            expect a tombstones notes 1
            expect a tombstones 4
            expect a generation 0
            expect a status current
            expect a gc blocked by b c
            expect a conflict notes k
            contact bob b1 b2
            conversation talk with bob
            b1 post talk m9 "hi"
            expect a delivered talk m9
            expect b2 outbox talk 0
            expect converged
            expect resurrections 0
            expect lost-writes 0
            """
        let scenario = try ScenarioParser.parse(text)
        #expect(scenario.lines.count == 61)
        #expect(scenario.lines[53].statement == .contact(name: "bob", devices: ["b1", "b2"]))
        #expect(scenario.lines[54].statement == .conversation(namespace: "talk", contact: "bob"))
        #expect(scenario.lines[55].statement == .operation(device: "b1", .post(namespace: "talk", message: "m9", text: "hi")))
        #expect(scenario.lines[56].statement == .expect(.delivered(device: "a", namespace: "talk", message: "m9")))
        #expect(scenario.lines[57].statement == .expect(.outbox(device: "b2", namespace: "talk", count: 0)))
        #expect(scenario.lines[8].statement == .operation(device: "a", .put(namespace: "notes", key: "k", value: "buy \"milk\" \\ now")))
        #expect(scenario.lines[20].statement == .partition(["a"], ["b", "c"]))
        #expect(scenario.lines[24].statement == .networkDelay(min: 10, max: 2_000))
        #expect(scenario.lines[26].statement == .advance(30 * 86_400_000))
        #expect(scenario.lines[35].statement == .anchor(.delayNextWrite(15_000)))
        #expect(scenario.lines[51].statement == .expect(.gcBlockedBy(device: "a", devices: ["b", "c"])))
    }

    /// (scenario text, the line the error names, a fragment of its message)
    static let badScenarios: [(String, Int, String)] = [
        ("fleet a b\nfrobnicate a", 2, "unknown statement frobnicate"),
        ("fleet a b\nnamespace n causal\nsync\npartiton a / b", 4, "unknown statement partiton; did you mean 'partition'?"),
        ("fleet a b\nnamespace notes causal\na put notes k", 3, "write D put NS KEY VALUE"),
        ("fleet a b\nnamespace notes causal\nc put notes k v", 3, "unknown device c"),
        ("fleet a b\nnamespace notes causal\na put note k v", 3, "unknown namespace note; did you mean 'notes'?"),
        ("fleet a\na put notes k v", 2, "unknown namespace notes"),
        ("fleet a\nadvance 10x", 2, "10x is not a duration"),
        ("fleet a\nadvance 10", 2, "10 is not a duration"),
        ("fleet a\nnamespace n causal\na put n k \"open", 3, "a quoted value is not closed"),
        ("fleet a\nnamespace n causal\na put n k \"a\\nb\"", 3, "a backslash escapes only"),
        ("fleet a\nnamespace m log\na put m k v", 3, "namespace m is log"),
        ("fleet a\nnamespace n causal\nrestore a from monday", 3, "no backup named monday"),
        ("fleet a\nnamespace n causal\nexpect convergd", 3, "did you mean 'converged'?"),
        ("fleet a\nnamespace n causal\na pt n k v", 3, "unknown action pt for device a; did you mean 'put'?"),
        // Two words as close: both are named.
        ("fleet a\nnamespace n causal\na pot n k v", 3, "unknown action pot for device a; did you mean 'post' or 'put'?"),
        ("fleet a\nnamespace n cuasal", 2, "unknown kind cuasal; did you mean 'causal'?"),
        ("fleet a b\npartition a b", 2, "partition needs two sides"),
        ("fleet a b\npartition a / a b", 2, "both sides"),
        ("fleet a\nnetwork loss 150", 2, "not a percentage"),
        ("fleet a\nnetwork delay 2s 1s", 2, "minimum is above its maximum"),
        ("fleet a\nfleet b", 2, "a scenario has one fleet"),
        ("fleet a a", 1, "device a is named twice"),
        ("fleet a\njoin a", 2, "already on the roster"),
        ("fleet a\nnamespace n causal\nnamespace n lww", 3, "declared twice"),
        ("fleet a\ngc maybe", 2, "gc takes on or off"),
        ("fleet a\nexpect a status sleepy", 2, "unknown status sleepy"),
        ("fleet a\nnamespace n causal\nexpect a n k == v", 3, "end with = VALUE or absent"),
        ("fleet a\nnamespace n causal\nexpect a n count many", 3, "many is not a count"),
        ("fleet a\nhub\nhub", 3, "a scenario has one hub"),
        ("fleet a\nclient c", 2, "start the hub first: write hub"),
        ("hub\nclient a\nclient a", 3, "a is named twice"),
        ("fleet a\nhub\nclient a", 3, "a is named twice"),
        ("hub\nclient c\nc crash mid-send", 3, "unknown crash point mid-send"),
        ("hub\nclient c\nhub fail next 2 push with 418", 3, "unknown failure 418"),
        ("hub\nclient c\nexpect c pendign 1", 3, "pendign"),
        ("hub\nclient c\nc put note n1", 3, "end with VALUE or VALUE group G"),
        ("hub\nclient phone\nphon sync", 3, "unknown statement phon; did you mean 'phone'?"),
        ("hub\nclient phone\nphon put note n1 \"v\"", 3, "unknown device or client phon; did you mean 'phone'?"),
        ("hub\nclient c\nexpect hub pushes d 1", 3, "unknown client d"),
        ("hub\nclient c ledger\nc put note n1 \"v\"", 3, "c is a ledger client, which has no put of its own"),
        ("hub\nclient c ledger\nc undo", 3, "c is a ledger client, which has no undo"),
        ("hub\nclient c ledger\nc add mail m1 labels INBOX", 3, "c is a ledger client, which has no sets"),
        ("hub\nclient c\nc app put note n1 \"v\"", 3, "c is a mirror client, which has no app of its own"),
        ("hub\nclient c\nc corrupt ledger", 3, "c is a mirror client, which has no ledger"),
        ("hub\nclient c\nc wipe keeping identity", 3, "c is a mirror client"),
        ("hub\nclient c ledger\nc app put note n1", 3, "VALUE"),
        ("hub\nclient c ledger\nclient c", 3, "c is named twice"),
        ("client c ledger", 1, "start the hub first: write hub"),
        ("hub\nhub compact now", 2, "compact takes no arguments: write hub compact"),
        ("hub\nclient c\nhub revoke nobody", 3, "unknown client nobody"),
        ("hub\nclient c\nexpect hub horizon held by x", 3, "unknown client x"),
        ("hub\nexpect hub warns", 2, "write expect hub warns TEXT"),
        ("hub\nclient c\nrestore c from nowhere", 3, "no backup named nowhere"),
        ("fleet a\nanchor sideways", 2, "anchor down, anchor up"),
        ("fleet a\nstorage a fail melted", 2, "storage D fail busy|ioerr|full"),
        ("fleet a\nskew a 5", 2, "5 is not a duration"),
        ("fleet a\nnamespace n causal\na put n \"\" v", 3, "quoted"),
        ("fleet a\nnamespace n causal\na put n bad/key v", 3, "bad/key is not a name"),
        ("fleet a\nnamespace m log\nexpect a m g full", 3, "expect D NS GROUP empty"),
        ("fleet a\nnamespace m messages\na unsend m x someone", 3, "unsend takes me or everyone"),
        ("fleet a\ncontact bob", 2, "contact needs a name and at least one device"),
        ("fleet a\ncontact bob a", 2, "device a is named twice"),
        ("fleet a\ncontact bob b1\ncontact bob b2", 3, "contact bob is declared twice"),
        ("fleet a\ncontact bob b1\nconversation chat bob", 3, "write: conversation NS with NAME"),
        ("fleet a\ncontact bob b1\nconversation chat with bbo", 3, "unknown contact bbo; did you mean 'bob'?"),
        ("fleet a\nnamespace n causal\ncontact bob b1\nconversation n with bob", 4, "a conversation is a messages namespace"),
        ("fleet a\ncontact bob b1\nconversation chat with bob\nconversation chat with bob", 4, "is a conversation already"),
        ("fleet a\nnamespace n causal\ncontact bob b1\nb1 put n k v", 4, "b1 is a device of contact bob"),
        ("fleet a\nnamespace m messages\ncontact bob b1\nb1 post m x hi", 4, "m is no conversation with bob"),
        ("fleet a\nnamespace m messages\nexpect a outbox m 1", 3, "m is no conversation"),
        ("fleet a\ncontact bob b1\nconversation chat with bob\nexpect a delivered cht m1", 4, "cht is no conversation; did you mean 'chat'?"),
        ("fleet a\ncontact bob b1\nconversation chat with bob\nexpect a outbox chat lots", 4, "lots is not a count; write a whole number"),
        // A # glued to a word would cut the value without a word.
        ("fleet a\nnamespace n causal\na put n k v#x", 3, "a # inside the word v#"),
        ("fleet a\nnamespace n causal\na put n k v # a comment\na put n k w#", 4, "quote the value"),
        // A backup goes back where it was taken, and the hint names every way to take one.
        ("fleet a b\nbackup b as bb\nrestore a from bb", 3, "backup bb was taken of b, not of a"),
        ("fleet a\nhub\nclient c\nbackup c as cb\nhub restore from cb", 5, "backup cb was taken of c, not of the hub"),
        ("fleet a\nhub\nhub backup as hb\nrestore a from hb", 4, "backup hb was taken of the hub, not of a"),
        ("fleet a\nanchor backup as ab\nhub\nhub restore from ab", 4, "taken of the anchor"),
        ("hub\nhub restore from nothing", 2, "hub backup as nothing"),
        ("hub\nclient c\nhub fail next 0 push with 500", 3, "fails nothing"),
    ]

    /// A sync that cannot settle because collection is off names it: with `gc off`
    /// a device restored below the anchor does not recover, and the fleet stays apart.
    @Test func aSyncThatCannotSettleWithCollectionOffSaysSo() throws {
        let text = """
            fleet a b
            namespace n causal
            a put n k "v"
            sync
            backup b as old
            a delete n k
            sync
            expect a generation 1
            gc off
            restore b from old
            sync
            """
        do {
            try ScenarioRunner(scenario: try ScenarioParser.parse(text, file: "off.scenario")).run()
            Issue.record("a fleet split by a generation gap settled with collection off")
        } catch let failure as ScenarioFailure {
            #expect(failure.line == 11, "\(failure)")
            #expect(failure.found.contains("generations") && failure.found.contains("gc off"), "\(failure)")
        }
    }

    @Test(arguments: badScenarios.indices)
    func badInputIsAParseErrorNamingTheLine(index: Int) {
        let (text, line, fragment) = Self.badScenarios[index]
        do {
            _ = try ScenarioParser.parse(text, file: "bad.scenario")
            Issue.record("parsed: \(text)")
        } catch let error as ScenarioParseError {
            #expect(error.line == line, "\(error)")
            #expect(error.file == "bad.scenario")
            #expect(error.description.contains(fragment), "\(error)")
            #expect(error.description.hasPrefix("bad.scenario:\(line): "))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func aParseErrorStopsTheFileBeforeAnythingRuns() {
        // Line 3 would run (and fail); line 5 is a typo: the typo is what is reported.
        let text = "fleet a b\nnamespace n causal\nexpect a n k = \"never\"\nsync\nsnyc"
        #expect(throws: ScenarioParseError.self) { try ScenarioParser.parse(text) }
    }

    // MARK: - Running

    @Test func aFailingExpectationNamesTheFileLineStatementValuesAndSeed() throws {
        let text = """
            fleet a b
            namespace notes causal
            a put notes k "1"
            sync
            expect b notes k = "2"
            """
        let runner = try ScenarioRunner(scenario: try ScenarioParser.parse(text, file: "wrong.scenario"), seed: 77)
        do {
            try runner.run()
            Issue.record("a false expectation passed")
        } catch let failure as ScenarioFailure {
            #expect(failure.file == "wrong.scenario")
            #expect(failure.line == 5)
            #expect(failure.text == "expect b notes k = \"2\"")
            #expect(failure.expected == "b reads k as \"2\"")
            #expect(failure.found == "b reads \"1\"")
            #expect(failure.seed == 77)
            #expect(failure.description.contains("FAIL wrong.scenario:5: expect b notes k = \"2\""))
        }
    }

    /// Each expectation can fail: a false claim of every form is caught.
    @Test(arguments: [
        "expect a notes k absent",
        "expect all notes gone = \"x\"",
        "expect a notes count 2",
        "expect a memory g empty",
        "expect a stored memory g 0",
        // The barrier collects the tombstone during sync: one is left nowhere.
        "expect a tombstones notes 1",
        "expect a tombstones 1",
        "expect a generation 0",
        "expect a status rolled-back",
        "expect a status behind",
        "expect a conflict notes k",
        "expect a refused b",
        "expect a storage failed 1",
        "expect resurrections 1",
        "expect lost-writes 1",
        "expect a gc blocked by b",
    ])
    func aFalseExpectationFails(claim: String) throws {
        let text = """
            fleet a b
            namespace notes causal
            namespace memory log
            a put notes k "1"
            a put notes gone "1"
            a delete notes gone
            a append memory g "e"
            sync
            \(claim)
            """
        let runner = try ScenarioRunner(scenario: try ScenarioParser.parse(text))
        #expect(throws: ScenarioFailure.self, "\(claim)") { try runner.run() }
    }

    @Test func expectConvergedFailsWhileDevicesDiffer() throws {
        let text = """
            fleet a b
            namespace notes causal
            partition a / b
            a put notes k "1"
            expect converged
            """
        let runner = try ScenarioRunner(scenario: try ScenarioParser.parse(text))
        #expect(throws: ScenarioFailure.self) { try runner.run() }
    }

    @Test func aSyncThatCannotSettleFailsNamingWhatStillMoves() throws {
        let text = """
            fleet a b
            namespace notes causal
            network loss 100
            a put notes k "1"
            sync
            """
        let runner = try ScenarioRunner(scenario: try ScenarioParser.parse(text))
        do {
            try runner.run()
            Issue.record("a fleet that cannot talk settled")
        } catch let failure as ScenarioFailure {
            #expect(failure.line == 5)
            #expect(failure.found.contains("a and b still differ"), "\(failure)")
        }
    }

    @Test func allMeansEveryDeviceOnTheRosterOnlineOrNot() throws {
        let offline = """
            fleet a b
            namespace notes causal
            offline b
            a put notes k "1"
            expect all notes k = "1"
            """
        #expect(throws: ScenarioFailure.self) { try ScenarioRunner(scenario: try ScenarioParser.parse(offline)).run() }
        let revoked = """
            fleet a b
            namespace notes causal
            revoke b
            a put notes k "1"
            sync
            expect all notes k = "1"
            expect b notes k absent
            """
        try ScenarioRunner(scenario: try ScenarioParser.parse(revoked)).run()
    }

    /// A message statement naming a message the device does not hold is a
    /// failure that says so (a typo must not pass silently); an edit after a
    /// delete is the fold's rule (000 §6), so the story goes on and it stays deleted.
    @Test func messageStatementsNameWhatTheStoreRefused() throws {
        let typo = """
            fleet a b
            namespace chat messages
            a post chat m1 "hello"
            a edit chat m2 "typo"
            """
        do {
            try ScenarioRunner(scenario: try ScenarioParser.parse(typo)).run()
            Issue.record("an edit of a message no device holds ran")
        } catch let failure as ScenarioFailure {
            #expect(failure.line == 4)
            #expect(failure.found.contains("message m2 is not in chat"), "\(failure)")
        }
        let absorbing = """
            fleet a b
            namespace chat messages
            gc off
            a post chat m1 "hello"
            a unsend chat m1 me
            a edit chat m1 "after the delete"
            a react chat m1 x
            sync
            expect b message chat m1 deleted
            expect a message chat m1 deleted
            """
        try ScenarioRunner(scenario: try ScenarioParser.parse(absorbing)).run()
        // The language refuses a messages statement on another kind, and a bad scope, before running.
        for text in ["fleet a\nnamespace notes causal\na post notes m1 x", "fleet a\nnamespace chat messages\na unsend chat m1 all"] {
            #expect(throws: ScenarioParseError.self) { try ScenarioParser.parse(text) }
        }
    }
}
