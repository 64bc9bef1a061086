import Stele

/// The scenario language of `SCENARIOS.md` as one table of statement forms
/// (``StatementForm``): the parser's dispatch, its "did you mean" words, the
/// usage text and `Statement.description` are all read off the rows. A new
/// statement (the hub's, say) is a new row.
public struct ScenarioGrammar: Sendable {
    /// The rows, in the order the usage text lists them and the parser tries
    /// the forms that share a path.
    let forms: [StatementForm]
    /// The dispatch tree over the forms' paths; node 0 is the start of a line.
    let nodes: [Node]
    /// What a line's subject is in this grammar: a device, or the hub's client.
    let subjectNoun: String

    /// A point of the dispatch tree: the words read so far choose it.
    struct Node: Sendable {
        /// The path that leads here, as the usage text writes it (`expect D gc`).
        var path: [Slot] = []
        /// The keywords that may come next, in table order, each with its node.
        var keywords: [(word: String, node: Int)] = []
        /// The node after a device the line is about (`D put`, `expect D status`).
        var subject: Int?
        /// The forms whose path ends here: the rest of the line is their arguments.
        var forms: [Int] = []

        func node(after word: String) -> Int? { keywords.first { $0.word == word }?.node }
        var words: [String] { keywords.map(\.word) }
        /// Whether the path starts with the device the line is about (`D put`).
        var startsWithDevice: Bool { path.first?.kind == .subject }
    }

    /// The grammar of these forms. Forms whose paths are equal share a node.
    init(forms: [StatementForm], subjectNoun: String = "device") {
        self.subjectNoun = subjectNoun
        var nodes = [Node()]
        for (index, form) in forms.enumerated() {
            var current = 0
            for slot in form.slots.prefix(form.pathLength) {
                let existing = slot.keyword.map { nodes[current].node(after: $0) } ?? nodes[current].subject
                if let existing {
                    current = existing
                    continue
                }
                var node = Node()
                node.path = nodes[current].path + [slot]
                nodes.append(node)
                if let word = slot.keyword {
                    nodes[current].keywords.append((word, nodes.count - 1))
                } else {
                    nodes[current].subject = nodes.count - 1
                }
                current = nodes.count - 1
            }
            nodes[current].forms.append(index)
            for (position, slot) in form.slots.enumerated() where slot.isList {
                // A list ends at the keyword after it, or leaves room for what follows.
                let rest = form.slots[(position + 1)...]
                precondition(rest.first?.keyword != nil || !rest.contains(where: \.isList), "\(form.usage): two lists need a keyword between them")
            }
        }
        self.forms = forms
        self.nodes = nodes
        precondition(Set(forms.map(\.usage)).count == forms.count, "two forms print alike")
    }

    /// The language the simulator runs: fleet statements and expectations.
    static let standard = ScenarioGrammar(forms: fleetStatements + expectations)

    /// Every statement form, one per line (`D put NS KEY VALUE`), as
    /// `stele scenario --help` lists them.
    public static var usage: String { standard.usage + "\n" + hub.usage }

    var usage: String { forms.map(\.usage).joined(separator: "\n") }

    /// The words that may start a line, for suggestions.
    var statementKeywords: [String] { nodes[0].words }

    /// The actions a device may take (`put`, `delete`, ...), for suggestions.
    var actions: [String] { nodes[0].subject.map { nodes[$0].words } ?? [] }

    /// The actions whose every form works in a messages namespace: all a
    /// contact's device may do, in its conversation.
    var messageActions: [String] {
        guard let subject = nodes[0].subject else { return [] }
        return nodes[subject].keywords.filter { formsUnder($0.node).allSatisfy(\.isMessageAction) }.map(\.word)
    }

    /// Every form whose path passes through `node`.
    func formsUnder(_ node: Int) -> [StatementForm] {
        let here = nodes[node]
        return here.forms.map { forms[$0] } + here.keywords.flatMap { formsUnder($0.node) } + (here.subject.map(formsUnder) ?? [])
    }

    /// What may follow `node`, one entry each: a form's usage where one form
    /// follows (`anchor down`), else its path and `...` (`expect all ...`).
    func continuations(of node: Int) -> [String] {
        let here = nodes[node]
        let next = here.keywords.map(\.node) + (here.subject.map { [$0] } ?? [])
        return here.forms.map { forms[$0].usage }
            + next.map { child in
                let under = formsUnder(child)
                return under.count == 1 ? under[0].usage : Slot.usage(nodes[child].path[...]) + " ..."
            }
    }

    /// The line that writes `statement`, from slot `start` of its form on.
    func line(for statement: Statement, from start: Int = 0) -> String {
        guard let line = printed(statement, from: start) else { preconditionFailure("no form of the scenario grammar prints this statement") }
        return line
    }

    /// The line that writes `statement`, or `nil` when no form of this grammar does.
    func printed(_ statement: Statement, from start: Int = 0) -> String? {
        for form in forms {
            if let arguments = form.arguments(statement) { return form.line(arguments, from: start) }
        }
        return nil
    }
}

extension StatementForm {
    /// A device action in a messages namespace (`D post NS MSG TEXT`).
    var isMessageAction: Bool {
        slots.first?.kind == .subject && slots.contains { $0.kind == .namespace([.messages]) }
    }
}
