import Stele

/// What the parser knows from the lines above (devices, namespaces, backups,
/// contacts and their conversations), and how it reads the next line: it walks
/// the grammar's dispatch tree along the line's keywords to the forms that may
/// write it, then reads the rest as their arguments (`ParseState+Forms.swift`).
struct ParseState {
    typealias Message = ScenarioParser.Message
    typealias Token = ScenarioParser.Token

    let file: String
    private(set) var grammar: ScenarioGrammar
    var devices: Set<String> = []
    /// The hub's mirror clients (`client C`), and whether the hub was started.
    var clients: Set<String> = []
    /// The clients among them that are ledger clients (`client C ledger`).
    var ledgerClients: Set<String> = []
    var hasHub = false
    var namespaces: [String: NamespaceKind] = [:]
    var hasFleet = false
    var backups: Set<String> = []
    /// What each backup was taken of: a device's or client's name, "the hub", "the anchor".
    var backupOwners: [String: String] = [:]
    /// Contact accounts (`contact NAME D1 D2`), each device of one, and each
    /// contact's conversations (`conversation NS with NAME`).
    var contacts: Set<String> = []
    var contactOf: [String: String] = [:]
    var conversations: [String: Set<String>] = [:]

    init(file: String, grammar: ScenarioGrammar = .standard) {
        self.file = file
        self.grammar = grammar
    }

    /// The statement `tokens` write, after the lines above.
    /// - Throws: ``ScenarioParser/Message`` saying what is wrong and how to write it.
    mutating func statement(_ tokens: [Token]) throws -> Statement {
        guard !tokens[0].quoted else { throw Message("a line starts with a statement, not a quoted value") }
        if isHubLine(tokens) {
            // The hub's lines are read in the hub's grammar, whose subject is a client.
            let fleet = grammar
            grammar = .hub
            defer { grammar = fleet }
            return try walk(tokens, subjects: clients)
        }
        return try walk(tokens, subjects: devices)
    }

    /// Whether the line is the hub's: it starts with `hub`, `client`, `rollup` or
    /// a client, or names the hub or a client right after its first word.
    private func isHubLine(_ tokens: [Token]) -> Bool {
        let first = tokens[0].text
        if ScenarioGrammar.hubKeywords.contains(first) || clients.contains(first) { return true }
        guard tokens.count > 1, !tokens[1].quoted, ["expect", "skew", "crash", "backup", "restore"].contains(first) else { return false }
        return clients.contains(tokens[1].text) || (first == "expect" && tokens[1].text == "hub")
    }

    /// Walks the grammar's dispatch tree along the line, with `subjects` the names a line may be about.
    private mutating func walk(_ tokens: [Token], subjects: Set<String>) throws -> Statement {
        var node = 0
        var index = 0
        var subject: String?
        while true {
            let here = grammar.nodes[node]
            let word = index < tokens.count && !tokens[index].quoted ? tokens[index].text : nil
            if let word, let next = here.node(after: word) {
                (node, index) = (next, index + 1)
                continue
            }
            if let word, let next = here.subject, subjects.contains(word) {
                (node, index, subject) = (next, index + 1, word)
                continue
            }
            guard !here.forms.isEmpty, !isMisspelledKeyword(tokens, at: index, in: here) else {
                throw unknownWord(tokens, at: index, in: node)
            }
            if here.startsWithDevice, let subject, let contact = contactOf[subject] {
                try checkContactAction(subject, of: contact, here, tokens.dropFirst(index).first)
            }
            return try statement(in: here.forms.map { grammar.forms[$0] }, tokens[index...], subject: subject)
        }
    }

    /// A word where a keyword could go that is neither the keyword nor what the
    /// forms here would read (a declared namespace), but close to a keyword:
    /// `expect a sttus current`.
    private func isMisspelledKeyword(_ tokens: [Token], at index: Int, in node: ScenarioGrammar.Node) -> Bool {
        guard index < tokens.count, node.words.contains(where: { Self.isNear(tokens[index].text, $0) }) else { return false }
        let first = grammar.forms[node.forms[0]].slots[grammar.forms[node.forms[0]].pathLength]
        return (try? argument(first, tokens[index...index])) == nil
    }

    /// A contact's device holds its conversations with this account and nothing else.
    private func checkContactAction(_ device: String, of contact: String, _ node: ScenarioGrammar.Node, _ namespace: Token?) throws {
        guard node.forms.allSatisfy({ grammar.forms[$0].isMessageAction }) else {
            throw Message("\(device) is a device of contact \(contact): it may only \(Slot.list(grammar.messageActions, "or")) in a conversation")
        }
        guard let namespace, conversations[contact, default: []].contains(namespace.text) else {
            throw Message("\(namespace?.text ?? "that") is no conversation with \(contact); declare it with conversation NS with \(contact)")
        }
    }

    /// The line stops, or goes on with a word, where no form of the grammar does.
    private func unknownWord(_ tokens: [Token], at index: Int, in node: Int) -> Message {
        let here = grammar.nodes[node]
        let said = tokens.prefix(index).map(\.text).joined(separator: " ")
        let continuations = Slot.list(grammar.continuations(of: node), "or")
        guard index < tokens.count else {
            if here.path.count == 1, here.startsWithDevice {
                return Message("what should \(said) do? \(Slot.list(here.words, "or"))")
            }
            return Message("\(said) what? write \(continuations)")
        }
        let word = tokens[index].text
        if let subject = here.subject, index + 1 < tokens.count, grammar.nodes[subject].node(after: tokens[index + 1].text) != nil {
            // `c put notes k v`: the shape of a device's line, with a device not declared.
            if grammar.subjectNoun == "client" || !clients.isEmpty {
                return Message("unknown device or client \(word)" + Spelling.hint(word, in: devices.union(clients)) + "; declare it with fleet, join or client first")
            }
            return Message("unknown device \(word)" + Spelling.hint(word, in: devices) + "; declare it with fleet or join first")
        }
        if node == 0 {
            return Message("unknown statement \(word)" + Spelling.hint(word, in: here.words + devices + clients))
        }
        if here.path.count == 1, here.startsWithDevice {
            return Message("unknown action \(word) for \(grammar.subjectNoun) \(said)" + Self.hint(word, in: here.words) + "; use \(here.words.joined(separator: ", "))")
        }
        if let subject = here.subject {
            let words = here.words + grammar.nodes[subject].words
            let names = grammar.subjectNoun == "client" ? clients : devices
            return Message("unknown \(grammar.subjectNoun) \(word)" + Spelling.hint(word, in: Array(names) + words) + "; write \(continuations)")
        }
        let hint = Self.hint(word, in: here.words)
        // Where forms read the rest too, the list would be every form under here: the hint says enough.
        return Message("unknown word \(word) after \(said)" + hint + (here.forms.isEmpty ? "; write: \(continuations)" : ""))
    }

    // MARK: - Arguments

    func device(_ name: String) throws {
        guard devices.contains(name) else { throw Message("unknown device \(name)" + Spelling.hint(name, in: devices) + "; declare it with fleet or join first") }
    }

    func client(_ name: String) throws {
        guard clients.contains(name) else { throw Message("unknown client \(name)" + Spelling.hint(name, in: clients) + "; declare it with client C first") }
    }

    /// A hub statement needs the hub started above.
    /// A statement only a mirror client makes (its app writes through Stele's store).
    func needMirrorClient(_ name: String, _ what: String) throws {
        guard !ledgerClients.contains(name) else {
            throw Message("\(name) is a ledger client, which has no \(what): its app writes its own store with \(name) app put KIND ID VALUE and \(name) app delete KIND ID")
        }
    }

    /// A statement only a ledger client makes (its app owns its store).
    func needLedgerClient(_ name: String, _ what: String) throws {
        guard ledgerClients.contains(name) else {
            throw Message("\(name) is a mirror client, which has no \(what); declare a ledger client with client \(name) ledger")
        }
    }

    func needHub() throws {
        guard hasHub else { throw Message("start the hub first: write hub") }
    }

    func conversation(_ name: String) throws {
        guard conversations.values.contains(where: { $0.contains(name) }) else {
            throw Message("\(name) is no conversation" + Spelling.hint(name, in: conversations.values.flatMap { $0 }) + "; declare it with conversation NS with NAME first")
        }
    }

    func namespace(_ name: String, kinds: [NamespaceKind]) throws {
        guard let kind = namespaces[name] else { throw Message("unknown namespace \(name)" + Spelling.hint(name, in: namespaces.keys) + "; declare it with namespace NS KIND first") }
        guard kinds.contains(kind) else { throw kindMessage(name, kind, kinds) }
    }

    func kindMessage(_ name: String, _ kind: NamespaceKind, _ kinds: [NamespaceKind]) -> Message {
        Message("namespace \(name) is \(kind.rawValue); this statement needs \(kinds.map(\.rawValue).joined(separator: " or "))")
    }

    func backup(_ name: String) throws {
        guard backups.contains(name) else {
            throw Message(
                "no backup named \(name) above\(Spelling.hint(name, in: backups)); take it first: backup D as \(name), backup C as \(name), hub backup as \(name) or anchor backup as \(name)")
        }
    }

    /// A backup is put back where it was taken: `subject` (a device, a client, "the
    /// hub", "the anchor") restores only a backup of its own.
    func restoring(_ name: String, to subject: String) throws {
        guard let owner = backupOwners[name], owner != subject else { return }
        throw Message("backup \(name) was taken of \(owner), not of \(subject); put it back where it was taken, or take a backup of \(subject) first")
    }

    func contact(_ name: String) throws {
        guard contacts.contains(name) else {
            throw Message("unknown contact \(name)" + Spelling.hint(name, in: contacts) + "; declare it with contact NAME D1 D2 first")
        }
    }

    /// SCENARIOS.md: names (devices, namespaces, keys, groups, backups) are bare words.
    func name(_ token: Token, _ noun: String) throws {
        guard !token.quoted else { throw Message("\(noun) is a bare word, not a quoted value: letters, digits, -, _ and .") }
        guard ScenarioParser.isName(token.text) else { throw Message("\(token.text) is not a name; names are letters, digits, -, _ and .") }
    }

    func number(_ text: String) throws -> Int {
        guard let value = Int(text), value >= 0 else { throw Message("\(text) is not a count; write a whole number from 0") }
        return value
    }

    func duration(_ text: String) throws -> Int64 {
        guard let value = ScenarioParser.duration(text) else { throw Message("\(text) is not a duration; write a number and ms, s, m, h or d") }
        return value
    }

    func percent(_ text: String) throws -> Double {
        guard let percent = Double(text.hasSuffix("%") ? String(text.dropLast()) : text), (0...100).contains(percent) else {
            throw Message("\(text) is not a percentage from 0 to 100")
        }
        return percent
    }
}
