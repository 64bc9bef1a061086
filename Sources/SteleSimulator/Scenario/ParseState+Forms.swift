import Stele

/// Reading the rest of a line as the arguments of the forms its keywords chose.
/// First by shape alone (keywords, fixed words, how many words), then each form
/// that has the shape, in table order, by what its arguments must be (a declared
/// device, a count...): the first whose arguments hold builds the statement.
/// When none has the shape, the error comes from the forms that went furthest.
extension ParseState {
    /// Where an argument's words lie in the line.
    struct Span {
        let slot: Slot
        let tokens: Range<Int>
    }

    /// How far a form got along the line before its shape broke.
    struct Miss {
        enum Reason {
            /// The line ended before the form's slot at `slot`.
            case missing
            /// The form ended; the line goes on.
            case extra
            /// The word at `consumed` is not what slot `slot` takes.
            case mismatch
        }

        let form: StatementForm
        let reason: Reason
        /// Words of the line read before the miss.
        let consumed: Int
        /// The form's slot that missed (its slot count for `extra`).
        let slot: Int
        /// Fixed words of the form that the line misspelled on the way.
        var misspelled: [(token: Int, keyword: String)] = []

        /// The line has the form's shape, but for misspelled keywords.
        var fitsButForMisspelling: Bool { reason == .mismatch && slot == form.slots.count }
    }

    mutating func statement(in forms: [StatementForm], _ tokens: ArraySlice<Token>, subject: String?) throws -> Statement {
        let prefix: [Argument] = subject.map { [.word($0)] } ?? []
        var failure: (progress: Int, message: Message)?
        for form in forms {
            let spans: [Span]
            switch shape(form, tokens, strict: false) {
            case .failure: continue
            case .success(let found): spans = found
            }
            var values = prefix
            do {
                for span in spans { values.append(try argument(span.slot, tokens[span.tokens])) }
            } catch let message as Message {
                // The form that read the most arguments before one failed says the most.
                if values.count > failure?.progress ?? -1 { failure = (values.count, message) }
                continue
            }
            let arguments = Arguments(values: values)
            try form.check?(&self, arguments)
            return form.build(arguments)
        }
        // Forms that broke off, ranked strictly (a form read by shape reads so here too).
        let misses = forms.compactMap { form in
            if case .failure(let error) = shape(form, tokens, strict: true) { error.miss } else { nil }
        }
        // A form the line fits but for a misspelled keyword says more than an
        // argument that failed in a form read by shape: `expect a n count aabsent`.
        if let fit = misses.first(where: \.fitsButForMisspelling), let misspelling = fit.misspelled.first {
            throw Message("unexpected word \(tokens[misspelling.token].text); did you mean '\(misspelling.keyword)'?; write \(fit.form.usage)")
        }
        if let failure { throw failure.message }
        throw missMessage(forms, misses, tokens)
    }

    /// Matches the line's words against the form's slots after its path:
    /// keywords and fixed words must be there, a list takes words up to the
    /// keyword after it. `strict` also holds a declared namespace to the kinds
    /// the slot allows, and lets a keyword match a near misspelling of it, for
    /// ranking forms that do not fit.
    func shape(_ form: StatementForm, _ tokens: ArraySlice<Token>, strict: Bool) -> Result<[Span], MissError> {
        var spans: [Span] = []
        var misspelled: [(token: Int, keyword: String)] = []
        var index = tokens.startIndex
        let slots = form.slots[form.pathLength...]
        func miss(_ reason: Miss.Reason, _ slot: Int) -> Result<[Span], MissError> {
            .failure(MissError(Miss(form: form, reason: reason, consumed: index - tokens.startIndex, slot: slot, misspelled: misspelled)))
        }
        for position in slots.indices {
            let slot = form.slots[position]
            if slot.isList {
                let rest = form.slots[(position + 1)...]
                let end: Int
                if let next = rest.first?.keyword {
                    end = tokens[index...].firstIndex { !$0.quoted && $0.text == next } ?? tokens.endIndex
                } else {
                    end = max(index, tokens.endIndex - rest.count)
                }
                guard end > index else { return miss(.missing, position) }
                spans.append(Span(slot: slot, tokens: index..<end))
                index = end
                continue
            }
            guard index < tokens.endIndex else { return miss(.missing, position) }
            let token = tokens[index]
            switch slot.kind {
            case .keyword(let word):
                if token.quoted || token.text != word {
                    guard strict, !token.quoted, Self.isNear(token.text, word) else { return miss(.mismatch, position) }
                    misspelled.append((index, word))
                }
            case .choice(let words, _):
                guard !token.quoted, words.contains(token.text) else { return miss(.mismatch, position) }
            case .namespace(let kinds):
                if strict, !token.quoted, let kind = namespaces[token.text], !kinds.contains(kind) { return miss(.mismatch, position) }
            default:
                break
            }
            if slot.keyword == nil { spans.append(Span(slot: slot, tokens: index..<(index + 1))) }
            index += 1
        }
        guard index == tokens.endIndex else { return miss(.extra, form.slots.count) }
        if !misspelled.isEmpty { return miss(.mismatch, form.slots.count) }
        return .success(spans)
    }

    struct MissError: Error {
        let miss: Miss
        init(_ miss: Miss) { self.miss = miss }
    }

    /// A misspelling of `keyword`, not another short word: within two edits,
    /// and fewer edits than the keyword has letters (`=` is near nothing).
    static func isNear(_ word: String, _ keyword: String) -> Bool {
        Spelling.editDistance(word, keyword) <= min(2, keyword.count - 1)
    }

    /// `"; did you mean 'x'?"` for a near misspelling of a fixed word, or nothing.
    static func hint(_ word: String, in keywords: [String]) -> String {
        Spelling.hint(word, in: keywords.filter { isNear(word, $0) })
    }

    /// The line's words checked as what `slot` takes.
    /// - Throws: ``ScenarioParser/Message`` naming the word and what it should be.
    func argument(_ slot: Slot, _ tokens: ArraySlice<Token>) throws -> Argument {
        switch slot.kind {
        case .value, .token:
            return .word(tokens[tokens.startIndex].text)
        case .devices, .declaringDevices:
            for token in tokens {
                try name(token, "a device")
                if slot.kind == .devices { try device(token.text) }
            }
            return .words(tokens.map(\.text))
        case .duration, .percent, .count:
            let token = tokens[tokens.startIndex]
            guard !token.quoted else { throw Message("\(slot.noun) is written bare, not in quotes") }
            switch slot.kind {
            case .duration(let signed):
                let negative = signed && token.text.hasPrefix("-")
                let magnitude = try duration(negative ? String(token.text.dropFirst()) : token.text)
                return .milliseconds(negative ? -magnitude : magnitude)
            case .percent: return .percent(try percent(token.text))
            default: return .count(try number(token.text))
            }
        case .keyword, .subject:
            preconditionFailure("\(slot.placeholder) is read on the path")
        case .device, .client, .declaring, .name, .namespace, .conversation, .backup, .contact, .choice:
            let token = tokens[tokens.startIndex]
            try name(token, slot.noun)
            switch slot.kind {
            case .device: try device(token.text)
            case .client: try client(token.text)
            case .namespace(let kinds): try namespace(token.text, kinds: kinds)
            case .conversation: try conversation(token.text)
            case .backup: try backup(token.text)
            case .contact: try contact(token.text)
            default: break
            }
            return .word(token.text)
        }
    }

    /// Why no form has the line's shape, from the forms that read furthest.
    func missMessage(_ forms: [StatementForm], _ misses: [Miss], _ tokens: ArraySlice<Token>) -> Message {
        let furthest = misses.map(\.consumed).max() ?? 0
        let best = misses.filter { $0.consumed == furthest }
        let first = best[0]
        let usages = Slot.list(best.map(\.form.usage), "or")
        let token = tokens.dropFirst(first.consumed).first
        if let misspelling = first.misspelled.first {
            let word = tokens[misspelling.token].text
            return Message("unexpected word \(word); did you mean '\(misspelling.keyword)'?; write \(usages)")
        }
        let slots = best.map { $0.slot < $0.form.slots.count ? $0.form.slots[$0.slot] : nil }
        let sameSlot = slots.allSatisfy { $0?.kind == slots[0]?.kind }
        switch first.reason {
        case .missing where forms.count == 1, .extra where forms.count == 1:
            let nouns = first.form.argumentNouns
            return Message(nouns.isEmpty ? "\(first.form.keyword) takes no arguments: write \(usages)" : "\(first.form.keyword) needs \(nouns): write \(usages)")
        case .mismatch where sameSlot, .missing where best.count == 1, .extra where best.count == 1:
            guard let slot = slots[0], let token else { return Message("write: \(Slot.list(forms.map(\.usage), "or"))") }
            return mismatchMessage(slot, token, first.form, usages)
        default:
            // The forms part here: say how each goes on (`= VALUE or absent`).
            guard best.allSatisfy({ $0.reason != .extra }) else { return Message("write: \(Slot.list(forms.map(\.usage), "or"))") }
            var seen: Set<String> = []
            let tails = best.map { Slot.usage($0.form.slots[$0.slot...]) }.filter { seen.insert($0).inserted }
            let next = slots.compactMap { $0 }.flatMap(\.words)
            return Message("end with \(Slot.list(tails, "or"))" + (token.map { Self.hint($0.text, in: next) } ?? ""))
        }
    }

    /// The word at `slot` is not what it takes.
    private func mismatchMessage(_ slot: Slot, _ token: Token, _ form: StatementForm, _ usages: String) -> Message {
        let hint = Self.hint(token.text, in: slot.words)
        switch slot.kind {
        case .choice(let words, let noun?):
            return Message("unknown \(noun) \(token.text)" + hint + "; use \(Slot.list(words, "or"))")
        case .choice(let words, nil):
            return Message("\(form.keyword) takes \(Slot.list(words, "or")), not \(token.text)" + hint + "; write \(usages)")
        case .namespace(let kinds):
            if let kind = namespaces[token.text] { return kindMessage(token.text, kind, kinds) }
            return Message("write: \(usages)")
        default:
            return Message("unexpected word \(token.text)" + hint + "; write: \(usages)")
        }
    }
}

extension Slot {
    /// The fixed words it takes, if any.
    var words: [String] {
        switch kind {
        case .keyword(let word): [word]
        case .choice(let words, _): words
        default: []
        }
    }
}
