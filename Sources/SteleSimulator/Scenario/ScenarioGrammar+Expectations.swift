import Stele

/// The expectations of SCENARIOS.md, and the ones added since, one row each.
/// Rows that share a path are tried in this order: `expect D NS count N` before
/// `expect D NS KEY absent`, so a key named `count` still reads as a key when
/// what follows is no count.
extension ScenarioGrammar {
    static let expectations: [StatementForm] = fleetWide + values + [
        StatementForm(
            "expect", .subject, "stored", .namespace(.log), .name("GROUP", "a group"), .count,
            build: { .expect(.stored(device: $0.word(0), namespace: $0.word(1), group: $0.word(2), count: $0.count(3))) },
            print: {
                if case let .expect(.stored(device, namespace, group, count)) = $0 { [.word(device), .word(namespace), .word(group), .count(count)] } else { nil }
            }),
    ] + messages + collection + [
        StatementForm(
            "expect", .subject, "conflict", .namespace(.causal, .lww, .appendOnly), .name("KEY", "a key"),
            build: { .expect(.conflict(device: $0.word(0), namespace: $0.word(1), key: $0.word(2), raised: true)) },
            print: { if case let .expect(.conflict(device, namespace, key, true)) = $0 { [.word(device), .word(namespace), .word(key)] } else { nil } }),
        // Added: D raised no conflict event for KEY.
        StatementForm(
            "expect", .subject, "no", "conflict", .namespace(.causal, .lww, .appendOnly), .name("KEY", "a key"),
            build: { .expect(.conflict(device: $0.word(0), namespace: $0.word(1), key: $0.word(2), raised: false)) },
            print: { if case let .expect(.conflict(device, namespace, key, false)) = $0 { [.word(device), .word(namespace), .word(key)] } else { nil } }),
        // Added: D refused frames from D2, a device not on its roster.
        StatementForm(
            "expect", .subject, "refused", Slot(.device, "D2", "a device"),
            build: { .expect(.refused(device: $0.word(0), sender: $0.word(1))) },
            print: { if case let .expect(.refused(device, sender)) = $0 { [.word(device), .word(sender)] } else { nil } }),
        // Added: whether the account keys D holds open the anchor (a revoked
        // device's old key must not open one written after the rotation).
        StatementForm(
            "expect", .subject, "anchor", .choice("readable", "unreadable"),
            build: { .expect(.anchorReadable(device: $0.word(0), readable: $0.word(1) == "readable")) },
            print: { if case let .expect(.anchorReadable(device, readable)) = $0 { [.word(device), .word(readable ? "readable" : "unreadable")] } else { nil } }),
        // Added: N forced storage faults have fired on D's store.
        StatementForm(
            "expect", .subject, "storage", "failed", .count,
            build: { .expect(.storageFailed(device: $0.word(0), count: $0.count(1))) },
            print: { if case let .expect(.storageFailed(device, count)) = $0 { [.word(device), .count(count)] } else { nil } }),
        // Added: a receipt from the contact marks the message delivered on D.
        StatementForm(
            "expect", .subject, "delivered", .conversation, .name("MSG", "a message"),
            build: { .expect(.delivered(device: $0.word(0), namespace: $0.word(1), message: $0.word(2))) },
            print: { if case let .expect(.delivered(device, namespace, message)) = $0 { [.word(device), .word(namespace), .word(message)] } else { nil } }),
        // Added: N messages of the conversation still owe the contact a delivery on D.
        StatementForm(
            "expect", .subject, "outbox", .conversation, .count,
            build: { .expect(.outbox(device: $0.word(0), namespace: $0.word(1), count: $0.count(2))) },
            print: { if case let .expect(.outbox(device, namespace, count)) = $0 { [.word(device), .word(namespace), .count(count)] } else { nil } }),
    ]

    /// What the oracle and the whole fleet say.
    static let fleetWide: [StatementForm] = [
        StatementForm(
            "expect", "converged",
            build: { _ in .expect(.converged) },
            print: { $0 == .expect(.converged) ? [] : nil }),
        StatementForm(
            "expect", "resurrections", .count,
            build: { .expect(.resurrections($0.count(0))) },
            print: { if case .expect(.resurrections(let count)) = $0 { [.count(count)] } else { nil } }),
        StatementForm(
            "expect", "lost-writes", .count,
            build: { .expect(.lostWrites($0.count(0))) },
            print: { if case .expect(.lostWrites(let count)) = $0 { [.count(count)] } else { nil } }),
    ]

    /// What a device (or every device on the roster) reads.
    static let values: [StatementForm] = [
        StatementForm(
            "expect", "all", .namespace(.causal, .lww, .appendOnly, .local), .name("KEY", "a key"), "=", .value("VALUE", "a value"),
            build: { .expect(.value(.all, namespace: $0.word(0), key: $0.word(1), value: $0.word(2))) },
            print: { if case let .expect(.value(.all, namespace, key, value?)) = $0 { [.word(namespace), .word(key), .word(value)] } else { nil } }),
        StatementForm(
            "expect", "all", .namespace(.causal, .lww, .appendOnly, .local), .name("KEY", "a key"), "absent",
            build: { .expect(.value(.all, namespace: $0.word(0), key: $0.word(1), value: nil)) },
            print: { if case let .expect(.value(.all, namespace, key, nil)) = $0 { [.word(namespace), .word(key)] } else { nil } }),
        // SCENARIOS.md's own example writes `expect all memory c1 empty`.
        StatementForm(
            "expect", "all", .namespace(.log), .name("GROUP", "a group"), "empty",
            build: { .expect(.groupEmpty(.all, namespace: $0.word(0), group: $0.word(1))) },
            print: { if case let .expect(.groupEmpty(.all, namespace, group)) = $0 { [.word(namespace), .word(group)] } else { nil } }),
        StatementForm(
            "expect", .subject, .namespace(), "count", .count,
            build: { .expect(.count(device: $0.word(0), namespace: $0.word(1), count: $0.count(2))) },
            print: { if case let .expect(.count(device, namespace, count)) = $0 { [.word(device), .word(namespace), .count(count)] } else { nil } }),
        StatementForm(
            "expect", .subject, .namespace(.causal, .lww, .appendOnly, .local), .name("KEY", "a key"), "=", .value("VALUE", "a value"),
            build: { .expect(.value(.device($0.word(0)), namespace: $0.word(1), key: $0.word(2), value: $0.word(3))) },
            print: {
                if case let .expect(.value(.device(device), namespace, key, value?)) = $0 { [.word(device), .word(namespace), .word(key), .word(value)] } else { nil }
            }),
        StatementForm(
            "expect", .subject, .namespace(.causal, .lww, .appendOnly, .local), .name("KEY", "a key"), "absent",
            build: { .expect(.value(.device($0.word(0)), namespace: $0.word(1), key: $0.word(2), value: nil)) },
            print: { if case let .expect(.value(.device(device), namespace, key, nil)) = $0 { [.word(device), .word(namespace), .word(key)] } else { nil } }),
        StatementForm(
            "expect", .subject, .namespace(.log), .name("GROUP", "a group"), "empty",
            build: { .expect(.groupEmpty(.device($0.word(0)), namespace: $0.word(1), group: $0.word(2))) },
            print: { if case let .expect(.groupEmpty(.device(device), namespace, group)) = $0 { [.word(device), .word(namespace), .word(group)] } else { nil } }),
    ]

    /// The folded message as a device shows it.
    static let messages: [StatementForm] = [
        StatementForm(
            "expect", .subject, "message", .namespace(.messages), .name("MSG", "a message"), "=", .value("TEXT", "a text"),
            build: { .expect(.message(device: $0.word(0), namespace: $0.word(1), message: $0.word(2), .text($0.word(3)))) },
            print: {
                if case let .expect(.message(device, namespace, message, .text(text))) = $0 { [.word(device), .word(namespace), .word(message), .word(text)] } else { nil }
            }),
        StatementForm(
            "expect", .subject, "message", .namespace(.messages), .name("MSG", "a message"), "deleted",
            build: { .expect(.message(device: $0.word(0), namespace: $0.word(1), message: $0.word(2), .deleted)) },
            print: { if case let .expect(.message(device, namespace, message, .deleted)) = $0 { [.word(device), .word(namespace), .word(message)] } else { nil } }),
        StatementForm(
            "expect", .subject, "message", .namespace(.messages), .name("MSG", "a message"), "absent",
            build: { .expect(.message(device: $0.word(0), namespace: $0.word(1), message: $0.word(2), .absent)) },
            print: { if case let .expect(.message(device, namespace, message, .absent)) = $0 { [.word(device), .word(namespace), .word(message)] } else { nil } }),
    ]

    /// Tombstones, generations, recovery and what blocks collection (DESIGN §6).
    static let collection: [StatementForm] = [
        StatementForm(
            "expect", .subject, "tombstones", .count,
            build: { .expect(.tombstones(device: $0.word(0), namespace: nil, count: $0.count(1))) },
            print: { if case let .expect(.tombstones(device, nil, count)) = $0 { [.word(device), .count(count)] } else { nil } }),
        StatementForm(
            "expect", .subject, "tombstones", .namespace(), .count,
            build: { .expect(.tombstones(device: $0.word(0), namespace: $0.word(1), count: $0.count(2))) },
            print: { if case let .expect(.tombstones(device, namespace?, count)) = $0 { [.word(device), .word(namespace), .count(count)] } else { nil } }),
        StatementForm(
            "expect", .subject, "generation", .count,
            build: { .expect(.generation(device: $0.word(0), generation: UInt64($0.count(1)))) },
            print: {
                if case let .expect(.generation(device, generation)) = $0 { [.word(device), .count(Int(clamping: generation))] } else { nil }
            }),
        StatementForm(
            "expect", .subject, "status", .choice(Expectation.Status.self, "STATE", noun: "status"),
            build: { .expect(.status(device: $0.word(0), state: $0.choice(1, as: Expectation.Status.self))) },
            print: { if case let .expect(.status(device, state)) = $0 { [.word(device), .word(state.rawValue)] } else { nil } }),
        StatementForm(
            "expect", .subject, "gc", "blocked", "by", .devices("D2..."),
            build: { .expect(.gcBlockedBy(device: $0.word(0), devices: $0.words(1))) },
            print: { if case let .expect(.gcBlockedBy(device, devices)) = $0 { [.word(device), .words(devices)] } else { nil } }),
    ]
}
