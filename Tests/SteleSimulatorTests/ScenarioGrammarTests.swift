import Testing
@testable import Stele
@testable import SteleSimulator

/// The grammar table (`ScenarioGrammar`): every row parses what it prints, for
/// arguments drawn at random from what each slot takes; the usage text lists
/// every row; a misspelled keyword of any row is named in the error's hint.
@Suite struct ScenarioGrammarTests {
    static let grammar = ScenarioGrammar.standard

    /// A line's context: the preamble's declarations, as the parser holds them.
    static func state(after preamble: String, in grammar: ScenarioGrammar) throws -> ParseState {
        var state = ParseState(file: "preamble", grammar: grammar)
        for line in preamble.split(separator: "\n") { _ = try state.statement(try ScenarioParser.tokenize(String(line))) }
        return state
    }

    /// One drawn line of a form: its arguments, and the preamble it parses after
    /// (empty for `fleet`, which a scenario says once).
    struct Draw {
        let form: StatementForm
        let arguments: [Argument]
        let preamble: String
        var statement: Statement { form.build(Arguments(values: arguments)) }
    }

    /// Draws arguments for every slot of `form` from what the context declares
    /// (fresh names where the line declares one), until the row's own check
    /// accepts them after the preamble, or in an empty scenario.
    static func draw(_ form: StatementForm, _ random: inout SplitMix64, grammar: ScenarioGrammar = grammar) throws -> Draw {
        let preamble = StatementPrintingTests.preamble
        let declared = try state(after: preamble, in: grammar)
        // After the preamble first (a restore must draw the device its backup was taken of), then alone.
        for (context, text) in [(declared, preamble), (ParseState(file: "empty", grammar: grammar), "")] {
            for _ in 0..<100 {
                let arguments = drawArguments(form, context.devices.isEmpty ? declared : context, &random)
                var state = context
                do {
                    try form.check?(&state, Arguments(values: arguments))
                    return Draw(form: form, arguments: arguments, preamble: text)
                } catch {
                    continue
                }
            }
        }
        Issue.record("no arguments drawn for \(form.usage) pass its check")
        throw CancellationError()
    }

    static func drawArguments(_ form: StatementForm, _ state: ParseState, _ random: inout SplitMix64) -> [Argument] {
        func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }
        func some(_ items: [String]) -> [String] { Array(items.shuffled(using: &random).prefix(Int.random(in: 1...items.count, using: &random))) }
        func fresh() -> String { "n" + String(Int.random(in: 0..<1_000_000, using: &random)) + pick(["", "-x", "_y", ".z"]) }
        let fleet = state.devices.filter { state.contactOf[$0] == nil }.sorted()
        // A contact's device may act in its conversation: draw that too.
        let byContact = form.isMessageAction && Bool.random(using: &random)
        let subject = byContact ? pick(state.contactOf.keys.sorted()) : pick(fleet)
        var arguments: [Argument] = []
        for slot in form.slots where slot.keyword == nil {
            let argument: Argument
            switch slot.kind {
            case .keyword: preconditionFailure("keywords take no argument")
            case .subject: argument = .word(subject)
            case .device: argument = .word(pick(state.devices.sorted()))
            case .client: argument = .word(pick(state.clients.sorted()))
            case .devices: argument = .words(some(fleet))
            case .declaring: argument = .word(fresh())
            case .declaringDevices: argument = .words((0..<Int.random(in: 1...3, using: &random)).map { _ in fresh() })
            case .name: argument = .word(pick(names))
            case .namespace(let kinds):
                let candidates = state.namespaces.filter { kinds.contains($0.value) }.keys.sorted()
                argument = .word(byContact ? pick(state.conversations[state.contactOf[subject] ?? "", default: []].sorted()) : pick(candidates))
            case .conversation: argument = .word(pick(state.conversations.values.flatMap { $0 }.sorted()))
            case .backup: argument = .word(pick(state.backups.sorted()))
            case .contact: argument = .word(pick(state.contacts.sorted()))
            case .value, .token: argument = .word(value(&random))
            case .duration(let signed):
                let magnitude = Int64.random(in: 0...1_000_000_000_000, using: &random)
                argument = .milliseconds(signed && Bool.random(using: &random) ? -magnitude : magnitude)
            case .percent: argument = .percent(pick([0, 100, 12, 37.5, Double.random(in: 0...100, using: &random)]))
            case .count: argument = .count(pick([0, 1, Int.random(in: 0..<100_000, using: &random)]))
            case .choice(let words, _): argument = .word(pick(words))
            }
            arguments.append(argument)
        }
        return arguments
    }

    /// Names, among them the grammar's own words where a name may stand.
    static let names = ["k", "k-2", "x.y", "Z_9", "absent", "count", "empty", "deleted", "me", "everyone", "on", "with", "after", "keys"]

    /// A value of up to six pieces: spaces, quotes, backslashes, `#`, `=`, tabs, non-ASCII.
    static func value(_ random: inout SplitMix64) -> String {
        let pieces = ["a", "Z", "9", " ", "\"", "\\", "#", "=", "\t", "ü", "👍", "two words", "-"]
        return (0..<Int.random(in: 0...6, using: &random)).map { _ in pieces[Int.random(in: 0..<pieces.count, using: &random)] }.joined()
    }

    /// Lines that do not parse back as the statement they print.
    static func roundTripFailures(_ grammar: ScenarioGrammar, seed: UInt64, perForm: Int) throws -> (failures: [String], printed: [String]) {
        var random = SplitMix64(seed: seed)
        var failures: [String] = []
        var printed: [String] = []
        for form in grammar.forms {
            for _ in 0..<perForm {
                let drawn = try draw(form, &random, grammar: grammar)
                let statement = drawn.statement
                let line = grammar.line(for: statement)
                printed.append(line)
                do {
                    let parsed = try ScenarioParser.parse(drawn.preamble + "\n" + line, file: "drawn", grammar: grammar)
                    if parsed.lines.last?.statement != statement { failures.append("\(form.usage): \(line) reads as \(parsed.lines.last.map { "\($0.statement)" } ?? "nothing")") }
                } catch {
                    failures.append("\(form.usage): \(line): \(error)")
                }
            }
        }
        return (failures, printed)
    }

    /// `parse(print(s)) == s` for statements of every row, with drawn arguments.
    @Test(arguments: [UInt64(1), 2, 3])
    func everyFormParsesWhatItPrints(seed: UInt64) throws {
        let (failures, printed) = try Self.roundTripFailures(Self.grammar, seed: seed, perForm: 12)
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(printed.count >= 700)
        // The draw reached quoted values with spaces and both escapes.
        #expect(printed.contains { $0.contains("\\\"") })
        #expect(printed.contains { $0.contains("\\\\") })
        #expect(printed.contains { $0.contains("two words") })
    }

    /// Each row prints the statements it builds (no other row steals them), so
    /// each row's printer is exercised by the draw above.
    @Test func everyFormPrintsWhatItBuilds() throws {
        var random = SplitMix64(seed: 9)
        for (index, form) in Self.grammar.forms.enumerated() {
            var own = 0
            for _ in 0..<12 {
                let statement = try Self.draw(form, &random).statement
                if Self.grammar.forms.firstIndex(where: { $0.arguments(statement) != nil }) == index { own += 1 }
            }
            #expect(own > 0, "\(form.usage) prints none of its statements")
        }
    }

    /// The check can fail: a row that prints the emoji of `unreact` as another,
    /// or a value without its backslashes, is caught by the round trip.
    @Test func aLossyRowIsCaught() throws {
        let lossyEmoji = Self.replacing("D unreact NS MSG EMOJI") { form in
            StatementForm(form.slots, needs: form.needs, check: form.check, build: form.build) { statement in
                guard case let .operation(device, .unreact(namespace, message, _)) = statement else { return nil }
                return [.word(device), .word(namespace), .word(message), .word("👍")]
            }
        }
        let lossyValue = Self.replacing("D put NS KEY VALUE") { form in
            StatementForm(form.slots, needs: form.needs, check: form.check, build: form.build) { statement in
                guard case let .operation(device, .put(namespace, key, value)) = statement else { return nil }
                return [.word(device), .word(namespace), .word(key), .word(value.replacingOccurrences(of: "\\", with: ""))]
            }
        }
        for grammar in [lossyEmoji, lossyValue] {
            let (failures, _) = try Self.roundTripFailures(grammar, seed: 4, perForm: 12)
            #expect(!failures.isEmpty)
        }
    }

    /// The standard grammar with the row of `usage` rewritten.
    static func replacing(_ usage: String, _ rewrite: (StatementForm) -> StatementForm) -> ScenarioGrammar {
        #expect(grammar.forms.contains { $0.usage == usage })
        return ScenarioGrammar(forms: grammar.forms.map { $0.usage == usage ? rewrite($0) : $0 })
    }

    /// `stele scenario --help` lists this text: every row, one a line, none twice.
    @Test func theUsageListsEveryFormOnceALine() {
        let lines = ScenarioGrammar.usage.split(separator: "\n").map(String.init)
        #expect(lines == (Self.grammar.forms + ScenarioGrammar.hub.forms).map(\.usage))
        #expect(Set(lines).count == lines.count)
        #expect(lines.count >= 60)
        for core in ["C put KIND ID VALUE group G", "expect C group KIND G SET has MEMBER", "hub fail next N push with CODE", "fleet D1 D2 ...", "D put NS KEY VALUE", "partition D... / D...", "anchor delay next write DURATION", "expect all NS GROUP empty", "expect D status STATE", "expect D gc blocked by D2..."] {
            #expect(lines.contains(core), "\(core)")
        }
    }

    /// A misspelled keyword, or chosen word, of every row is named back: the
    /// root's statements, a device's actions, `expect`'s words, and the fixed
    /// words inside a form (`as`, `from`, `absent`, `on`...). One-letter words
    /// (`=`, `/`) have no misspelling that is not another word.
    @Test func aMisspelledKeywordOfEveryFormGetsAHintNamingIt() throws {
        var random = SplitMix64(seed: 5)
        var checked = 0
        for form in Self.grammar.forms {
            let drawn = try Self.draw(form, &random)
            let words = form.words(drawn.arguments)
            for (position, slot) in form.slots.enumerated() {
                let intended: String
                switch slot.kind {
                case .keyword(let word): intended = word
                case .choice: intended = words[position]
                default: continue
                }
                guard intended.count > 1 else { continue }
                var misspelled = words
                misspelled[position] = String(intended.first!) + intended
                let line = misspelled.joined(separator: " ")
                do {
                    _ = try ScenarioParser.parse(drawn.preamble + "\n" + line, file: "typo")
                    Issue.record("\(line) parsed")
                } catch let error as ScenarioParseError {
                    // The intended word is named (alone, or with another as close).
                    let hint = error.message.components(separatedBy: "did you mean ").dropFirst().first ?? ""
                    #expect(hint.contains("'\(intended)'"), "\(line): \(error.message)")
                }
                checked += 1
            }
        }
        #expect(checked >= 90)
    }

    /// `expect D status STATE` reads a typed state, and each state prints back.
    @Test func statusIsTyped() throws {
        for state in SteleSimulator.Expectation.Status.allCases {
            let parsed = try ScenarioParser.parse("fleet a\nexpect a status \(state.rawValue)")
            #expect(parsed.lines.last?.statement == .expect(.status(device: "a", state: state)))
        }
        #expect(SteleSimulator.Expectation.Status(RecoveryStatus.stuck("no sibling answers")) == .stuck)
        #expect(SteleSimulator.Expectation.Status(RecoveryStatus.rolledBack) == .rolledBack)
    }
}
