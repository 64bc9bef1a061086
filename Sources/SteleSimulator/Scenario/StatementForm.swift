import Stele

/// One form of a scenario statement, a row of ``ScenarioGrammar``: the line's
/// words in order (fixed keywords and typed arguments), how the arguments make
/// the statement, and how the statement gives them back to be printed. The
/// parser, the usage text, the spelling hints and `Statement.description` are
/// all read off these rows, so a form is written down once.
struct StatementForm: Sendable {
    /// The line, word by word.
    let slots: [Slot]
    /// What the form takes, for an error about the number of words, when the
    /// arguments' nouns say it badly (`partition` takes "two sides").
    let needs: String?
    /// What the slots cannot see one at a time: declarations the line makes,
    /// rules across its arguments. Throws ``ScenarioParser/Message``.
    let check: (@Sendable (inout ParseState, Arguments) throws -> Void)?
    /// The statement the arguments make (every argument already checked).
    let build: @Sendable (Arguments) -> Statement
    /// The arguments that print `statement` in this form, or `nil` when the
    /// statement is written in another form.
    let arguments: @Sendable (Statement) -> [Argument]?

    init(
        _ slots: Slot..., needs: String? = nil, check: (@Sendable (inout ParseState, Arguments) throws -> Void)? = nil,
        build: @escaping @Sendable (Arguments) -> Statement, print arguments: @escaping @Sendable (Statement) -> [Argument]?
    ) {
        self.init(slots, needs: needs, check: check, build: build, print: arguments)
    }

    init(
        _ slots: [Slot], needs: String? = nil, check: (@Sendable (inout ParseState, Arguments) throws -> Void)? = nil,
        build: @escaping @Sendable (Arguments) -> Statement, print arguments: @escaping @Sendable (Statement) -> [Argument]?
    ) {
        self.slots = slots
        self.needs = needs
        self.check = check
        self.build = build
        self.arguments = arguments
    }

    /// The form as `stele scenario --help` lists it: `D put NS KEY VALUE`.
    var usage: String { Slot.usage(slots[...]) }

    /// How many leading slots choose the form (keywords, and the device a line
    /// is about): the path the parser walks before it reads arguments.
    var pathLength: Int { slots.prefix { $0.isPath }.count }

    /// The keyword the parser names in an error: the last one of the path.
    var keyword: String {
        slots.prefix(pathLength).reversed().compactMap(\.keyword).first ?? usage
    }

    /// What the arguments after the path are, for an error about their number:
    /// "a namespace, a key and a value".
    var argumentNouns: String {
        if let needs { return needs }
        let nouns = slots.dropFirst(pathLength).compactMap { $0.keyword == nil ? $0.noun : nil }
        return nouns.isEmpty ? "" : Slot.list(nouns, "and")
    }

    /// The line that writes `arguments` in this form, from slot `start` on
    /// (`1` leaves out the first word: the device of an operation, or `expect`).
    func line(_ arguments: [Argument], from start: Int = 0) -> String {
        words(arguments).dropFirst(start).joined(separator: " ")
    }

    /// What each slot writes for `arguments`: a keyword, or an argument as the line writes it.
    func words(_ arguments: [Argument]) -> [String] {
        var remaining = arguments[...]
        let words = slots.map { slot in
            if let keyword = slot.keyword { return keyword }
            guard let argument = remaining.popFirst() else { preconditionFailure("\(usage) prints with too few arguments") }
            return slot.print(argument)
        }
        precondition(remaining.isEmpty, "\(usage) prints with too many arguments")
        return words
    }
}

/// One word of a statement form: a fixed keyword, or an argument of a kind.
struct Slot: Sendable, ExpressibleByStringLiteral {
    enum Kind: Sendable, Equatable {
        /// A fixed word.
        case keyword(String)
        /// The device a line is about (`D put ...`, `expect D status ...`): a
        /// device declared above, read as part of the path that chooses the form.
        case subject
        /// A device declared above.
        case device
        /// A hub client declared above (`client C`).
        case client
        /// One or more devices declared above.
        case devices
        /// A name the line declares (a namespace, a backup, a contact).
        case declaring
        /// One or more device names the line declares.
        case declaringDevices
        /// A bare-word name: a key, a group, a message.
        case name
        /// A namespace declared above, of one of these kinds.
        case namespace([NamespaceKind])
        /// A namespace bound to a contact (`conversation NS with NAME`).
        case conversation
        /// A backup taken above (`backup D as NAME`).
        case backup
        /// A contact declared above.
        case contact
        /// Any token; printed in quotes.
        case value
        /// Any token; printed bare unless it needs quotes (an emoji).
        case token
        /// A duration (`15s`); a signed one may start with `-` (`skew D -2h`).
        case duration(signed: Bool)
        /// A percentage from 0 to 100, `%` optional.
        case percent
        /// A whole number from 0.
        case count
        /// One of these words; `noun` names what they are in an error
        /// ("unknown status sleepy"), or the error says what the keyword takes.
        case choice([String], noun: String?)
    }

    let kind: Kind
    /// How the usage text writes it: `NS`, `KEY`, `D...`, `on|off`.
    let placeholder: String
    /// How an error names it: "a namespace", "at least one device".
    let noun: String

    init(_ kind: Kind, _ placeholder: String, _ noun: String) {
        self.kind = kind
        self.placeholder = placeholder
        self.noun = noun
    }

    init(stringLiteral word: String) { self.init(.keyword(word), word, word) }

    static let subject = Slot(.subject, "D", "a device")
    static let device = Slot(.device, "D", "a device")
    static let client = Slot(.client, "C", "a client")
    static func devices(_ placeholder: String = "D...") -> Slot { Slot(.devices, placeholder, "at least one device") }
    static func declaring(_ placeholder: String, _ noun: String) -> Slot { Slot(.declaring, placeholder, noun) }
    static let declaringDevices = Slot(.declaringDevices, "D1 D2 ...", "at least one device")
    static func name(_ placeholder: String, _ noun: String) -> Slot { Slot(.name, placeholder, noun) }
    static func namespace(_ kinds: NamespaceKind...) -> Slot { Slot(.namespace(kinds.isEmpty ? NamespaceKind.allCases : kinds), "NS", "a namespace") }
    static let conversation = Slot(.conversation, "NS", "a conversation")
    static let backup = Slot(.backup, "NAME", "a backup")
    static let contact = Slot(.contact, "NAME", "a contact")
    static func value(_ placeholder: String, _ noun: String) -> Slot { Slot(.value, placeholder, noun) }
    static let emoji = Slot(.token, "EMOJI", "an emoji")
    static func duration(_ placeholder: String = "DURATION") -> Slot { Slot(.duration(signed: false), placeholder, "a duration") }
    static let signedDuration = Slot(.duration(signed: true), "[-]DURATION", "a duration")
    static let percent = Slot(.percent, "P", "a percentage")
    static let count = Slot(.count, "N", "a count")
    /// One of a few words, written `on|off`.
    static func choice(_ words: String...) -> Slot { Slot(.choice(words, noun: nil), words.joined(separator: "|"), list(words, "or")) }
    /// One of an enumeration's raw values, written `busy|ioerr|full`.
    static func choice<Choice: RawRepresentable & CaseIterable>(_ type: Choice.Type) -> Slot where Choice.RawValue == String {
        let words = type.allCases.map(\.rawValue)
        return Slot(.choice(words, noun: nil), words.joined(separator: "|"), list(words, "or"))
    }
    /// One of an enumeration's raw values, written as `placeholder`.
    static func choice<Choice: RawRepresentable & CaseIterable>(_ type: Choice.Type, _ placeholder: String, noun: String) -> Slot
    where Choice.RawValue == String {
        Slot(.choice(type.allCases.map(\.rawValue), noun: noun), placeholder, "a \(noun)")
    }

    /// The fixed word, when this slot is one.
    var keyword: String? {
        if case .keyword(let word) = kind { word } else { nil }
    }

    var isPath: Bool {
        switch kind {
        case .keyword, .subject: true
        default: false
        }
    }

    /// Whether it takes one word or more.
    var isList: Bool { kind == .devices || kind == .declaringDevices }

    /// Slots as the usage text writes them.
    static func usage(_ slots: ArraySlice<Slot>) -> String { slots.map(\.placeholder).joined(separator: " ") }

    /// `a, b or c`.
    static func list(_ items: [String], _ conjunction: String) -> String {
        items.count < 2 ? items.joined() : items.dropLast().joined(separator: ", ") + " \(conjunction) " + items[items.count - 1]
    }

    /// The argument as the line writes it.
    func print(_ argument: Argument) -> String {
        switch (kind, argument) {
        case (.value, .word(let text)): Self.quoted(text)
        case (.token, .word(let text)): Self.isBare(text) ? text : Self.quoted(text)
        case (_, .word(let word)): word
        case (_, .words(let words)): words.joined(separator: " ")
        case (_, .milliseconds(let milliseconds)): "\(milliseconds < 0 ? "-" : "")\(milliseconds.magnitude)ms"
        case (_, .percent(let percent)): percent.rounded() == percent && abs(percent) < 1e15 ? String(Int64(percent)) : String(percent)
        case (_, .count(let count)): String(count)
        }
    }

    /// A value in scenario quotes, with `\"` and `\\` escaped.
    static func quoted(_ value: String) -> String {
        "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// Whether the tokenizer reads `text` back unquoted as itself.
    static func isBare(_ text: String) -> Bool {
        !text.isEmpty && !text.contains(where: { $0 == " " || $0 == "\t" || $0 == "\"" || $0 == "#" || $0.isNewline })
    }
}

/// A checked argument of a statement form, as the row's `build` reads it and its
/// `print` gives it back.
enum Argument: Sendable, Equatable {
    /// A name, a value, or a chosen word.
    case word(String)
    /// A list of devices.
    case words([String])
    case milliseconds(Int64)
    case percent(Double)
    case count(Int)
}

/// A form's arguments, in the order of its non-keyword slots.
struct Arguments: Sendable {
    let values: [Argument]

    func word(_ index: Int) -> String {
        guard case .word(let word) = values[index] else { preconditionFailure("argument \(index) is not a word") }
        return word
    }

    func words(_ index: Int) -> [String] {
        guard case .words(let words) = values[index] else { preconditionFailure("argument \(index) is not a list") }
        return words
    }

    func milliseconds(_ index: Int) -> Int64 {
        guard case .milliseconds(let milliseconds) = values[index] else { preconditionFailure("argument \(index) is not a duration") }
        return milliseconds
    }

    func percent(_ index: Int) -> Double {
        guard case .percent(let percent) = values[index] else { preconditionFailure("argument \(index) is not a percentage") }
        return percent
    }

    func count(_ index: Int) -> Int {
        guard case .count(let count) = values[index] else { preconditionFailure("argument \(index) is not a count") }
        return count
    }

    /// A chosen word as the enumeration it names (the slot allowed only its raw values).
    func choice<Choice: RawRepresentable>(_ index: Int, as type: Choice.Type) -> Choice where Choice.RawValue == String {
        guard let choice = Choice(rawValue: word(index)) else { preconditionFailure("argument \(index) is no \(type)") }
        return choice
    }
}
