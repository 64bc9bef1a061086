import Stele

/// A scenario file, parsed: every line checked before anything runs.
public struct Scenario: Sendable {
    public struct Line: Sendable {
        public let number: Int
        public let text: String
        public let statement: Statement
    }

    public let file: String
    public let lines: [Line]
}

/// A scenario that does not parse: the file, the line, and what is wrong with it.
public struct ScenarioParseError: Error, Sendable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let text: String
    public let message: String

    public var description: String { "\(file):\(line): \(message)\n    \(text)" }
}

/// Reads the scenario language of `SCENARIOS.md`: one statement per line, `#`
/// comments, bare-word names, double-quoted values with `\"` and `\\`, and
/// durations such as `15s` or `30d`. An unknown statement, a wrong number of
/// arguments, or a device or namespace not declared above is a parse error that
/// names the line.
public enum ScenarioParser {
    public static func parse(_ text: String, file: String = "scenario") throws -> Scenario {
        var state = ParseState(file: file)
        var lines: [Scenario.Line] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let text = String(raw).trimmingCharacters(in: .whitespaces)
            let tokens: [Token]
            do {
                tokens = try tokenize(text)
            } catch let message as Message {
                throw ScenarioParseError(file: file, line: number, text: text, message: message.text)
            }
            guard !tokens.isEmpty else { continue }
            do {
                lines.append(Scenario.Line(number: number, text: text, statement: try state.statement(tokens)))
            } catch let message as Message {
                throw ScenarioParseError(file: file, line: number, text: text, message: message.text)
            }
        }
        return Scenario(file: file, lines: lines)
    }

    struct Message: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    struct Token: Equatable {
        let text: String
        /// Written in quotes: a value, never a keyword or a name.
        let quoted: Bool
    }

    static func tokenize(_ line: String) throws -> [Token] {
        var tokens: [Token] = []
        var current = ""
        var inQuotes = false
        var hasToken = false
        var iterator = line.makeIterator()
        while let character = iterator.next() {
            if inQuotes {
                switch character {
                case "\\":
                    guard let escaped = iterator.next(), escaped == "\"" || escaped == "\\" else {
                        throw Message("inside quotes, a backslash escapes only \" and \\")
                    }
                    current.append(escaped)
                case "\"":
                    inQuotes = false
                    tokens.append(Token(text: current, quoted: true))
                    current = ""
                    hasToken = false
                default:
                    current.append(character)
                }
                continue
            }
            switch character {
            case "#":
                if hasToken { tokens.append(Token(text: current, quoted: false)) }
                return tokens
            case " ", "\t":
                if hasToken { tokens.append(Token(text: current, quoted: false)) }
                current = ""
                hasToken = false
            case "\"":
                guard !hasToken else { throw Message("a quote must start a value of its own") }
                inQuotes = true
            default:
                current.append(character)
                hasToken = true
            }
        }
        guard !inQuotes else { throw Message("a quoted value is not closed") }
        if hasToken { tokens.append(Token(text: current, quoted: false)) }
        return tokens
    }

    /// Durations: a number and `ms`, `s`, `m`, `h` or `d`.
    static func duration(_ text: String) -> Int64? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            let number = text.dropLast(suffix.count)
            guard let value = Int64(number), value >= 0 else { continue }
            return value.multipliedReportingOverflow(by: factor).overflow ? nil : value * factor
        }
        return nil
    }

    static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
    }
}

/// What the parser knows from the lines above: devices and namespaces.
struct ParseState {
    typealias Message = ScenarioParser.Message
    typealias Token = ScenarioParser.Token

    let file: String
    var devices: Set<String> = []
    var namespaces: [String: NamespaceKind] = [:]
    var hasFleet = false
    var backups: Set<String> = []
    /// Contact accounts (`contact NAME D1 D2`), each device of one, and each
    /// contact's conversations (`conversation NS with NAME`).
    var contacts: Set<String> = []
    var contactOf: [String: String] = [:]
    var conversations: [String: Set<String>] = [:]

    init(file: String) { self.file = file }

    /// Every statement keyword, for suggestions.
    static let keywords = [
        "fleet", "namespace", "join", "revoke", "offline", "online", "partition", "heal", "network", "sync", "advance", "gc",
        "backup", "restore", "crash", "anchor", "skew", "storage", "expect", "contact", "conversation",
    ]
    /// Every word that can follow `expect D` or `expect`, for suggestions.
    static let expectWords = [
        "converged", "resurrections", "lost-writes", "all", "tombstones", "generation", "status", "gc", "conflict", "stored", "message", "refused", "storage", "anchor",
        "delivered", "outbox", "no",
    ]

    mutating func statement(_ tokens: [Token]) throws -> Statement {
        let words = tokens.map(\.text)
        let keyword = words[0]
        guard !tokens[0].quoted else { throw Message("a line starts with a statement, not a quoted value") }
        switch keyword {
        case "fleet":
            guard words.count >= 2 else { throw Message("fleet needs at least one device: fleet D1 D2 ...") }
            guard !hasFleet else { throw Message("a scenario has one fleet; add devices with join") }
            for name in words.dropFirst() {
                try checkName(name, "device")
                guard devices.insert(name).inserted else { throw Message("device \(name) is named twice") }
            }
            hasFleet = true
            return .fleet(Array(words.dropFirst()))
        case "namespace":
            try arity(words, 3, "namespace NS KIND")
            try checkName(words[1], "namespace")
            guard let kind = NamespaceKind(rawValue: words[2]) else {
                throw Message("unknown kind \(words[2])" + Spelling.hint(words[2], in: NamespaceKind.allCases.map(\.rawValue)) + "; use causal, lww, log, messages, local or appendOnly")
            }
            guard namespaces[words[1]] == nil else { throw Message("namespace \(words[1]) is declared twice") }
            namespaces[words[1]] = kind
            return .namespace(words[1], kind)
        case "join":
            try arity(words, 2, "join D")
            try checkName(words[1], "device")
            guard hasFleet else { throw Message("join needs a fleet first") }
            guard devices.insert(words[1]).inserted else { throw Message("device \(words[1]) is already on the roster") }
            return .join(words[1])
        case "revoke":
            try arity(words, 2, "revoke D")
            try device(words[1])
            return .revoke(words[1])
        case "offline", "online":
            guard words.count >= 2 else { throw Message("\(keyword) needs at least one device") }
            for name in words.dropFirst() { try device(name) }
            return keyword == "offline" ? .offline(Array(words.dropFirst())) : .online(Array(words.dropFirst()))
        case "partition":
            guard let slash = words.firstIndex(of: "/"), slash > 1, slash < words.count - 1 else {
                throw Message("partition needs two sides: partition D1 D2 / D3")
            }
            let left = Array(words[1..<slash])
            let right = Array(words[(slash + 1)...])
            for name in left + right { try device(name) }
            guard Set(left).isDisjoint(with: right) else { throw Message("a device cannot be on both sides of a partition") }
            return .partition(left, right)
        case "heal":
            try arity(words, 1, "heal")
            return .heal
        case "network":
            return try network(words)
        case "sync":
            try arity(words, 1, "sync")
            return .sync
        case "advance":
            try arity(words, 2, "advance DURATION")
            return .advance(try duration(words[1]))
        case "gc":
            try arity(words, 2, "gc on|off")
            guard ["on", "off"].contains(words[1]) else { throw Message("gc takes on or off") }
            return .gc(words[1] == "on")
        case "backup":
            try arity(words, 4, "backup D as NAME")
            guard words[2] == "as" else { throw Message("write: backup D as NAME") }
            try device(words[1])
            try checkName(words[3], "backup")
            backups.insert(words[3])
            return .backup(device: words[1], label: words[3])
        case "restore":
            // Added: `restore D from NAME with keys` rolls the key store back too (the stamp floor's limit).
            let form = "restore D from NAME [with keys]"
            guard words.count == 4 || (words.count == 6 && words[4] == "with" && words[5] == "keys") else { throw Message("write: \(form)") }
            guard words[2] == "from" else { throw Message("write: \(form)") }
            try device(words[1])
            guard backups.contains(words[3]) else { throw Message("no backup named \(words[3]) above; take it first with backup D as \(words[3])") }
            return .restore(device: words[1], label: words[3], withKeys: words.count == 6)
        case "crash":
            try arity(words, 2, "crash D")
            try device(words[1])
            return .crash(words[1])
        case "anchor":
            return try anchor(words)
        case "skew":
            try arity(words, 3, "skew D [-]DURATION")
            try device(words[1])
            let negative = words[2].hasPrefix("-")
            let amount = try duration(negative ? String(words[2].dropFirst()) : words[2])
            return .skew(device: words[1], milliseconds: negative ? -amount : amount)
        case "storage":
            let form = "storage D fail busy|ioerr|full [after N]"
            guard words.count == 4 || (words.count == 6 && words[4] == "after") else { throw Message("write: \(form)") }
            try device(words[1])
            guard words[2] == "fail", let fault = StorageFault(rawValue: words[3]) else { throw Message("write: \(form)") }
            return .storageFault(device: words[1], fault, afterSteps: words.count == 6 ? try number(words[5]) : 0)
        case "contact":
            // Added: another account with its own devices, roster and key.
            guard words.count >= 3 else { throw Message("contact needs a name and at least one device: contact NAME D1 D2 ...") }
            try checkName(words[1], "contact")
            guard !contacts.contains(words[1]) else { throw Message("contact \(words[1]) is declared twice") }
            for name in words.dropFirst(2) {
                try checkName(name, "device")
                guard devices.insert(name).inserted else { throw Message("device \(name) is named twice") }
                contactOf[name] = words[1]
            }
            contacts.insert(words[1])
            return .contact(name: words[1], devices: Array(words.dropFirst(2)))
        case "conversation":
            // Added: a messages namespace bound to a contact on both sides.
            guard words.count == 4, words[2] == "with" else { throw Message("write: conversation NS with NAME") }
            try checkName(words[1], "namespace")
            guard contacts.contains(words[3]) else {
                throw Message("unknown contact \(words[3])" + Spelling.hint(words[3], in: contacts) + "; declare it with contact NAME D1 D2 first")
            }
            if let kind = namespaces[words[1]], kind != .messages {
                throw Message("namespace \(words[1]) is \(kind.rawValue); a conversation is a messages namespace")
            }
            guard !conversations.values.contains(where: { $0.contains(words[1]) }) else {
                throw Message("\(words[1]) is a conversation already; a conversation keeps its contact for life")
            }
            namespaces[words[1]] = .messages
            conversations[words[3], default: []].insert(words[1])
            return .conversation(namespace: words[1], contact: words[3])
        case "expect":
            return .expect(try expectation(tokens))
        case "hub", "client":
            throw Message("hub statements come with the hub; this build runs fleet scenarios only")
        default:
            if devices.contains(keyword) { return try deviceStatement(tokens) }
            if words.count >= 2, ["put", "delete", "append", "bury", "post", "edit", "unsend", "react", "unreact"].contains(words[1]) {
                throw Message("unknown device \(keyword); declare it with fleet or join first")
            }
            throw Message("unknown statement \(keyword)" + Spelling.hint(keyword, in: ParseState.keywords + devices))
        }
    }

    private mutating func deviceStatement(_ tokens: [Token]) throws -> Statement {
        let words = tokens.map(\.text)
        let name = words[0]
        guard words.count >= 2 else { throw Message("what should \(name) do? put, delete, append, bury, post, edit, unsend, react or unreact") }
        if let contact = contactOf[name] {
            // A contact's device holds its conversations with this account and nothing else.
            guard ["post", "edit", "unsend", "react", "unreact"].contains(words[1]) else {
                throw Message("\(name) is a device of contact \(contact): it posts, edits, unsends, reacts and unreacts in a conversation")
            }
            guard words.count >= 3, conversations[contact, default: []].contains(words[2]) else {
                throw Message("\(words.count >= 3 ? words[2] : "that") is no conversation with \(contact); declare it with conversation NS with \(contact)")
            }
        }
        switch words[1] {
        case "put":
            try arity(words, 5, "D put NS KEY VALUE")
            try namespace(words[2], kinds: [.causal, .lww, .appendOnly, .local])
            try key(tokens[3])
            return .operation(device: name, .put(namespace: words[2], key: words[3], value: words[4]))
        case "delete":
            try arity(words, 4, "D delete NS KEY")
            try namespace(words[2], kinds: [.causal, .lww, .local])
            try key(tokens[3])
            return .operation(device: name, .delete(namespace: words[2], key: words[3]))
        case "append":
            try arity(words, 5, "D append NS GROUP VALUE")
            try namespace(words[2], kinds: [.log])
            try key(tokens[3])
            return .operation(device: name, .append(namespace: words[2], group: words[3], value: words[4]))
        case "bury":
            try arity(words, 4, "D bury NS GROUP")
            try namespace(words[2], kinds: [.log])
            try key(tokens[3])
            return .operation(device: name, .bury(namespace: words[2], group: words[3]))
        case "post", "edit":
            try arity(words, 5, "D \(words[1]) NS MSG TEXT")
            try namespace(words[2], kinds: [.messages])
            try key(tokens[3])
            return .operation(device: name, words[1] == "post" ? .post(namespace: words[2], message: words[3], text: words[4]) : .edit(namespace: words[2], message: words[3], text: words[4]))
        case "unsend":
            try arity(words, 5, "D unsend NS MSG me|everyone")
            try namespace(words[2], kinds: [.messages])
            guard ["me", "everyone"].contains(words[4]) else { throw Message("unsend takes me or everyone") }
            return .operation(device: name, .unsend(namespace: words[2], message: words[3], scope: words[4] == "everyone" ? .everyone : .me))
        case "react", "unreact":
            try arity(words, 5, "D \(words[1]) NS MSG EMOJI")
            try namespace(words[2], kinds: [.messages])
            return .operation(device: name, words[1] == "react" ? .react(namespace: words[2], message: words[3], emoji: words[4]) : .unreact(namespace: words[2], message: words[3], emoji: words[4]))
        default:
            let actions = ["put", "delete", "append", "bury", "post", "edit", "unsend", "react", "unreact"]
            throw Message("unknown action \(words[1]) for device \(name)" + Spelling.hint(words[1], in: actions) + "; use \(actions.joined(separator: ", "))")
        }
    }

    func network(_ words: [String]) throws -> Statement {
        guard words.count >= 2 else { throw Message("network loss P, network duplicate P or network delay MIN MAX") }
        switch words[1] {
        case "loss", "duplicate":
            try arity(words, 3, "network \(words[1]) P")
            guard let percent = Double(words[2].hasSuffix("%") ? String(words[2].dropLast()) : words[2]), (0...100).contains(percent) else {
                throw Message("\(words[2]) is not a percentage from 0 to 100")
            }
            return words[1] == "loss" ? .networkLoss(percent) : .networkDuplicate(percent)
        case "delay":
            try arity(words, 4, "network delay MIN MAX")
            let low = try duration(words[2])
            let high = try duration(words[3])
            guard low <= high else { throw Message("the delay's minimum is above its maximum") }
            return .networkDelay(min: low, max: high)
        default:
            throw Message("unknown network setting \(words[1]); use loss, duplicate or delay")
        }
    }

    func anchor(_ words: [String]) throws -> Statement {
        switch Array(words.dropFirst()) {
        case ["down"]: return .anchor(.down)
        case ["up"]: return .anchor(.up)
        case ["fail", "next", "write"]: return .anchor(.failNextWrite)
        default:
            if words.count == 5, words[1...3] == ["delay", "next", "write"] { return .anchor(.delayNextWrite(try duration(words[4]))) }
            throw Message("write: anchor down, anchor up, anchor fail next write, or anchor delay next write DURATION")
        }
    }

    func valueOrAbsent(_ tokens: [Token], from index: Int) throws -> String? {
        let rest = Array(tokens[index...])
        if rest.count == 1, rest[0].text == "absent", !rest[0].quoted { return nil }
        guard rest.count == 2, rest[0].text == "=", !rest[0].quoted else { throw Message("end with = VALUE or absent") }
        return rest[1].text
    }

    func arity(_ words: [String], _ count: Int, _ form: String) throws {
        guard words.count == count else {
            throw Message("\(words[0]) takes \(count - 1) argument\(count == 2 ? "" : "s"), got \(words.count - 1): write \(form)")
        }
    }

    func device(_ name: String) throws {
        guard devices.contains(name) else { throw Message("unknown device \(name)" + Spelling.hint(name, in: devices) + "; declare it with fleet or join first") }
    }

    func conversation(_ name: String) throws {
        guard conversations.values.contains(where: { $0.contains(name) }) else {
            throw Message("\(name) is no conversation" + Spelling.hint(name, in: conversations.values.flatMap { $0 }) + "; declare it with conversation NS with NAME first")
        }
    }

    func namespace(_ name: String, kinds: [NamespaceKind]) throws {
        guard let kind = namespaces[name] else { throw Message("unknown namespace \(name)" + Spelling.hint(name, in: namespaces.keys) + "; declare it with namespace NS KIND first") }
        guard kinds.contains(kind) else {
            throw Message("namespace \(name) is \(kind.rawValue); this statement needs \(kinds.map(\.rawValue).joined(separator: " or "))")
        }
    }

    func key(_ token: Token) throws {
        // SCENARIOS.md: keys and groups are names, bare words.
        guard !token.quoted else { throw Message("a key is a bare word, not a quoted value: letters, digits, -, _ and .") }
        guard ScenarioParser.isName(token.text) else { throw Message("\(token.text) is not a name; names are letters, digits, -, _ and .") }
    }

    func checkName(_ name: String, _ what: String) throws {
        guard ScenarioParser.isName(name) else { throw Message("\(name) is not a \(what) name; names are letters, digits, -, _ and .") }
    }

    func number(_ text: String) throws -> Int {
        guard let value = Int(text), value >= 0 else { throw Message("\(text) is not a count") }
        return value
    }

    func duration(_ text: String) throws -> Int64 {
        guard let value = ScenarioParser.duration(text) else { throw Message("\(text) is not a duration; write a number and ms, s, m, h or d") }
        return value
    }
}
