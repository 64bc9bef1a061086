import Stele

/// `expect` lines: what a scenario says must hold.
extension ParseState {
    func expectation(_ tokens: [Token]) throws -> Expectation {
        let words = tokens.map(\.text)
        guard words.count >= 2 else { throw Message("expect what?") }
        switch words[1] {
        case "converged":
            try arity(words, 2, "expect converged")
            return .converged
        case "resurrections", "lost-writes":
            try arity(words, 3, "expect \(words[1]) N")
            let count = try number(words[2])
            return words[1] == "resurrections" ? .resurrections(count) : .lostWrites(count)
        case "all":
            guard words.count >= 5 else { throw Message("write: expect all NS KEY = VALUE, expect all NS KEY absent, or expect all NS GROUP empty") }
            if namespaces[words[2]] == .log {
                // SCENARIOS.md's own example writes `expect all memory c1 empty`.
                guard words.count == 5, words[4] == "empty", !tokens[4].quoted else { throw Message("for a log namespace write: expect all NS GROUP empty") }
                return .groupEmpty(.all, namespace: words[2], group: words[3])
            }
            try namespace(words[2], kinds: [.causal, .lww, .appendOnly, .local])
            return .value(.all, namespace: words[2], key: words[3], value: try valueOrAbsent(tokens, from: 4))
        default:
            break
        }
        let name = words[1]
        guard devices.contains(name) else {
            throw Message("unknown device \(name)" + Spelling.hint(name, in: Array(devices) + ParseState.expectWords) + "; write expect D ..., expect all ..., or expect converged")
        }
        guard words.count >= 3 else { throw Message("expect \(name) what?") }
        switch words[2] {
        case "tombstones":
            if words.count == 4 { return .tombstones(device: name, namespace: nil, count: try number(words[3])) }
            try arity(words, 5, "expect D tombstones [NS] N")
            try namespace(words[3], kinds: NamespaceKind.allCases)
            return .tombstones(device: name, namespace: words[3], count: try number(words[4]))
        case "generation":
            try arity(words, 4, "expect D generation N")
            return .generation(device: name, generation: UInt64(try number(words[3])))
        case "status":
            try arity(words, 4, "expect D status STATE")
            guard ["current", "behind", "rolled-back", "recovering", "stuck"].contains(words[3]) else {
                throw Message("unknown status \(words[3]); use current, behind, rolled-back, recovering or stuck")
            }
            return .status(device: name, state: words[3])
        case "gc":
            guard words.count >= 6, words[3] == "blocked", words[4] == "by" else { throw Message("write: expect D gc blocked by D2 ...") }
            for other in words[5...] { try device(other) }
            return .gcBlockedBy(device: name, devices: Array(words[5...]))
        case "refused":
            // Added: D refused frames from D2, a device not on its roster.
            try arity(words, 4, "expect D refused D2")
            try device(words[3])
            return .refused(device: name, sender: words[3])
        case "anchor":
            // Added: whether the account keys D holds open the anchor (a revoked
            // device's old key must not open one written after the rotation).
            try arity(words, 4, "expect D anchor readable|unreadable")
            guard ["readable", "unreadable"].contains(words[3]) else { throw Message("write: expect D anchor readable, or expect D anchor unreadable") }
            return .anchorReadable(device: name, readable: words[3] == "readable")
        case "storage":
            // Added: N forced storage faults have fired on D's store.
            guard words.count == 5, words[3] == "failed" else { throw Message("write: expect D storage failed N") }
            return .storageFailed(device: name, count: try number(words[4]))
        case "conflict":
            try arity(words, 5, "expect D conflict NS KEY")
            try namespace(words[3], kinds: [.causal, .lww, .appendOnly])
            return .conflict(device: name, namespace: words[3], key: words[4], raised: true)
        case "no":
            // Added: `expect D no conflict NS KEY`, D raised no conflict event for KEY.
            guard words.count == 6, words[3] == "conflict" else { throw Message("write: expect D no conflict NS KEY") }
            try namespace(words[4], kinds: [.causal, .lww, .appendOnly])
            return .conflict(device: name, namespace: words[4], key: words[5], raised: false)
        case "stored":
            try arity(words, 6, "expect D stored NS GROUP N")
            try namespace(words[3], kinds: [.log])
            return .stored(device: name, namespace: words[3], group: words[4], count: try number(words[5]))
        case "delivered":
            // Added: a receipt from the contact marks the message delivered on D.
            try arity(words, 5, "expect D delivered NS MSG")
            try conversation(words[3])
            return .delivered(device: name, namespace: words[3], message: words[4])
        case "outbox":
            // Added: N messages of the conversation still owe the contact a delivery on D.
            try arity(words, 5, "expect D outbox NS N")
            try conversation(words[3])
            return .outbox(device: name, namespace: words[3], count: try number(words[4]))
        case "message":
            guard words.count >= 6 else { throw Message("write: expect D message NS MSG = TEXT, deleted or absent") }
            try namespace(words[3], kinds: [.messages])
            let state: Expectation.MessageState
            switch (words[5], tokens[5].quoted, words.count) {
            case ("=", false, 7): state = .text(words[6])
            case ("deleted", false, 6): state = .deleted
            case ("absent", false, 6): state = .absent
            default: throw Message("write: expect D message NS MSG = TEXT, deleted or absent")
            }
            return .message(device: name, namespace: words[3], message: words[4], state)
        default:
            let namespaceName = words[2]
            guard let kind = namespaces[namespaceName] else {
                throw Message("unknown namespace \(namespaceName)" + Spelling.hint(namespaceName, in: namespaces.keys) + "; declare it with namespace NS KIND first")
            }
            guard words.count >= 5 else { throw Message("expect \(name) \(namespaceName) what?") }
            if words[3] == "count", words.count == 5, !tokens[3].quoted {
                return .count(device: name, namespace: namespaceName, count: try number(words[4]))
            }
            if kind == .log {
                guard words.count == 5, words[4] == "empty" else { throw Message("for a log namespace write: expect D NS GROUP empty, or expect D NS count N") }
                return .groupEmpty(.device(name), namespace: namespaceName, group: words[3])
            }
            try namespace(namespaceName, kinds: [.causal, .lww, .appendOnly, .local])
            return .value(.device(name), namespace: namespaceName, key: words[3], value: try valueOrAbsent(tokens, from: 4))
        }
    }
}
