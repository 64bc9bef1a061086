import Stele

/// The hub statements and expectations of SCENARIOS.md ("Hub statements",
/// "Hub expectations"), one row each. In this grammar the line's subject is a
/// mirror client (`C put KIND ID VALUE`), declared with `client C`; the parser
/// reads a line here when it starts with `hub`, `client`, `rollup` or a clientSubject,
/// or names the hub or a client after `expect`, `skew`, `crash`, `backup` or `restore`.
extension ScenarioGrammar {
    /// The hub's language.
    static let hub = ScenarioGrammar(forms: hubStatements + clientActions + hubExpectations, subjectNoun: "client")

    /// Words that make a line the hub's.
    static let hubKeywords: Set<String> = ["hub", "client", "rollup"]

    /// The client a line is about (`C put ...`).
    private static let clientSubject = Slot(.subject, "C", "a client")
    private static let kind = Slot.name("KIND", "a kind")
    private static let id = Slot.name("ID", "a record id")
    private static let set = Slot.name("SET", "a set")
    private static let member = Slot.name("MEMBER", "a member")
    private static let group = Slot.name("G", "a group")

    static let hubStatements: [StatementForm] = [
        StatementForm(
            "hub",
            check: { state, _ in
                guard !state.hasHub else { throw Message("a scenario has one hub") }
                state.hasHub = true
            },
            build: { _ in .hub(.start) },
            print: { $0 == .hub(.start) ? [] : nil }),
        StatementForm(
            "hub", "kind", kind, "appendOnly",
            check: { state, _ in try state.needHub() },
            build: { .hub(.appendOnly(kind: $0.word(0))) },
            print: { if case .hub(.appendOnly(let kind)) = $0 { [.word(kind)] } else { nil } }),
        StatementForm(
            "client", .declaring("C", "a client name"),
            check: { state, arguments in
                try state.needHub()
                let name = arguments.word(0)
                guard !state.devices.contains(name), state.clients.insert(name).inserted else { throw Message("\(name) is named twice") }
            },
            build: { .hub(.client($0.word(0))) },
            print: { if case .hub(.client(let name)) = $0 { [.word(name)] } else { nil } }),
        StatementForm(
            "client", .declaring("C", "a client name"), "ledger",
            check: { state, arguments in
                try state.needHub()
                let name = arguments.word(0)
                guard !state.devices.contains(name), state.clients.insert(name).inserted else { throw Message("\(name) is named twice") }
                state.ledgerClients.insert(name)
            },
            build: { .hub(.ledgerClient($0.word(0))) },
            print: { if case .hub(.ledgerClient(let name)) = $0 { [.word(name)] } else { nil } }),
        StatementForm(
            "rollup", kind, set, member,
            check: { state, _ in try state.needHub() },
            build: { .hub(.rollup(kind: $0.word(0), set: $0.word(1), member: $0.word(2))) },
            print: { if case let .hub(.rollup(kind, set, member)) = $0 { [.word(kind), .word(set), .word(member)] } else { nil } }),
        StatementForm(
            "hub", "fail", "next", .count, "push", "with", .choice(HubStatement.PushFault.self, "CODE", noun: "failure"),
            check: { _, arguments in
                guard arguments.count(0) > 0 else { throw Message("hub fail next 0 push fails nothing; write 1 or more") }
            },
            build: { .hub(.failPushes(count: $0.count(0), $0.choice(1, as: HubStatement.PushFault.self))) },
            print: { if case let .hub(.failPushes(count, fault)) = $0 { [.count(count), .word(fault.rawValue)] } else { nil } }),
        StatementForm(
            "hub", "down",
            build: { _ in .hub(.down) },
            print: { $0 == .hub(.down) ? [] : nil }),
        StatementForm(
            "hub", "up",
            build: { _ in .hub(.up) },
            print: { $0 == .hub(.up) ? [] : nil }),
        StatementForm(
            "hub", "heal",
            build: { _ in .hub(.heal) },
            print: { $0 == .hub(.heal) ? [] : nil }),
        StatementForm(
            "hub", "backup", "as", .declaring("NAME", "a backup name"),
            check: { state, arguments in
                guard state.backups.insert(arguments.word(0)).inserted else { throw Message("a backup named \(arguments.word(0)) was taken above") }
                state.backupOwners[arguments.word(0)] = "the hub"
            },
            build: { .hub(.backup(label: $0.word(0))) },
            print: { if case .hub(.backup(let label)) = $0 { [.word(label)] } else { nil } }),
        StatementForm(
            "hub", "restore", "from", .backup,
            check: { state, arguments in try state.restoring(arguments.word(0), to: "the hub") },
            build: { .hub(.restore(label: $0.word(0))) },
            print: { if case .hub(.restore(let label)) = $0 { [.word(label)] } else { nil } }),
        StatementForm(
            "hub", "compact",
            check: { state, _ in try state.needHub() },
            build: { _ in .hub(.compact) },
            print: { $0 == .hub(.compact) ? [] : nil }),
        StatementForm(
            "hub", "revoke", .client,
            build: { .hub(.revoke(client: $0.word(0))) },
            print: { if case .hub(.revoke(let client)) = $0 { [.word(client)] } else { nil } }),
        StatementForm(
            "skew", .client, .signedDuration,
            build: { .hub(.skew(client: $0.word(0), milliseconds: $0.milliseconds(1))) },
            print: { if case let .hub(.skew(client, milliseconds)) = $0 { [.word(client), .milliseconds(milliseconds)] } else { nil } }),
        StatementForm(
            "crash", .client,
            build: { .hub(.crash(client: $0.word(0))) },
            print: { if case .hub(.crash(let client)) = $0 { [.word(client)] } else { nil } }),
        StatementForm(
            "backup", .client, "as", .declaring("NAME", "a backup name"),
            check: { state, arguments in
                guard state.backups.insert(arguments.word(1)).inserted else { throw Message("a backup named \(arguments.word(1)) was taken above") }
                state.backupOwners[arguments.word(1)] = arguments.word(0)
            },
            build: { .hub(.backupClient(client: $0.word(0), label: $0.word(1))) },
            print: { if case let .hub(.backupClient(client, label)) = $0 { [.word(client), .word(label)] } else { nil } }),
        StatementForm(
            "restore", .client, "from", .backup,
            check: { state, arguments in try state.restoring(arguments.word(1), to: arguments.word(0)) },
            build: { .hub(.restoreClient(client: $0.word(0), label: $0.word(1))) },
            print: { if case let .hub(.restoreClient(client, label)) = $0 { [.word(client), .word(label)] } else { nil } }),
    ]

    /// What a mirror client does: `C put KIND ID VALUE`, triage, flushes, pulls, crashes.
    static let clientActions: [StatementForm] = [
        StatementForm(
            clientSubject, "put", kind, id, .value("VALUE", "a value"),
            check: { state, arguments in try state.needMirrorClient(arguments.word(0), "put of its own") },
            build: { .hub(.put(client: $0.word(0), kind: $0.word(1), id: $0.word(2), value: $0.word(3), group: nil)) },
            print: { if case let .hub(.put(client, kind, id, value, nil)) = $0 { [.word(client), .word(kind), .word(id), .word(value)] } else { nil } }),
        StatementForm(
            clientSubject, "put", kind, id, .value("VALUE", "a value"), "group", group,
            check: { state, arguments in try state.needMirrorClient(arguments.word(0), "put of its own") },
            build: { .hub(.put(client: $0.word(0), kind: $0.word(1), id: $0.word(2), value: $0.word(3), group: $0.word(4))) },
            print: {
                if case let .hub(.put(client, kind, id, value, group?)) = $0 { [.word(client), .word(kind), .word(id), .word(value), .word(group)] } else { nil }
            }),
        StatementForm(
            clientSubject, "delete", kind, id,
            check: { state, arguments in try state.needMirrorClient(arguments.word(0), "delete of its own") },
            build: { .hub(.delete(client: $0.word(0), kind: $0.word(1), id: $0.word(2))) },
            print: { if case let .hub(.delete(client, kind, id)) = $0 { [.word(client), .word(kind), .word(id)] } else { nil } }),
        memberForm("add", add: true),
        memberForm("remove", add: false),
        groupForm("remove-group", add: false),
        groupForm("add-group", add: true),
    ] + HubStatement.ClientStep.allCases.map { step in
        StatementForm(
            clientSubject, Slot(stringLiteral: step.rawValue),
            check: { state, arguments in if step == .undo { try state.needMirrorClient(arguments.word(0), "undo") } },
            build: { .hub(.step(client: $0.word(0), step)) },
            print: { if case let .hub(.step(client, done)) = $0, done == step { [.word(client)] } else { nil } })
    } + [
        StatementForm(
            clientSubject, "app", "put", kind, id, .value("VALUE", "a value"),
            check: { state, arguments in try state.needLedgerClient(arguments.word(0), "app of its own (its writes go through Stele's store: C put)") },
            build: { .hub(.appWrite(client: $0.word(0), kind: $0.word(1), id: $0.word(2), value: $0.word(3))) },
            print: { if case let .hub(.appWrite(client, kind, id, value?)) = $0 { [.word(client), .word(kind), .word(id), .word(value)] } else { nil } }),
        StatementForm(
            clientSubject, "app", "delete", kind, id,
            check: { state, arguments in try state.needLedgerClient(arguments.word(0), "app of its own (its writes go through Stele's store: C delete)") },
            build: { .hub(.appWrite(client: $0.word(0), kind: $0.word(1), id: $0.word(2), value: nil)) },
            print: { if case let .hub(.appWrite(client, kind, id, nil)) = $0 { [.word(client), .word(kind), .word(id)] } else { nil } }),
        StatementForm(
            clientSubject, "corrupt", "ledger",
            check: { state, arguments in try state.needLedgerClient(arguments.word(0), "ledger") },
            build: { .hub(.corruptLedger(client: $0.word(0))) },
            print: { if case .hub(.corruptLedger(let client)) = $0 { [.word(client)] } else { nil } }),
        StatementForm(
            clientSubject, "wipe", "keeping", "identity",
            check: { state, arguments in try state.needLedgerClient(arguments.word(0), "app store of its own") },
            build: { .hub(.wipeKeepingIdentity(client: $0.word(0))) },
            print: { if case .hub(.wipeKeepingIdentity(let client)) = $0 { [.word(client)] } else { nil } }),
        StatementForm(
            clientSubject, "crash", .choice(MirrorDriver.CrashPoint.self, "POINT", noun: "crash point"),
            build: { .hub(.crashAt(client: $0.word(0), $0.choice(1, as: MirrorDriver.CrashPoint.self))) },
            print: { if case let .hub(.crashAt(client, point)) = $0 { [.word(client), .word(point.rawValue)] } else { nil } }),
    ]

    private static func memberForm(_ word: String, add: Bool) -> StatementForm {
        StatementForm(
            clientSubject, Slot(stringLiteral: word), kind, id, set, member,
            check: { state, arguments in try state.needMirrorClient(arguments.word(0), "sets") },
            build: { .hub(.member(client: $0.word(0), add: add, kind: $0.word(1), id: $0.word(2), set: $0.word(3), member: $0.word(4))) },
            print: {
                if case let .hub(.member(client, adds, kind, id, set, member)) = $0, adds == add {
                    [.word(client), .word(kind), .word(id), .word(set), .word(member)]
                } else { nil }
            })
    }

    private static func groupForm(_ word: String, add: Bool) -> StatementForm {
        StatementForm(
            clientSubject, Slot(stringLiteral: word), kind, group, set, member,
            check: { state, arguments in try state.needMirrorClient(arguments.word(0), "sets") },
            build: { .hub(.groupMember(client: $0.word(0), add: add, kind: $0.word(1), group: $0.word(2), set: $0.word(3), member: $0.word(4))) },
            print: {
                if case let .hub(.groupMember(client, adds, kind, group, set, member)) = $0, adds == add {
                    [.word(client), .word(kind), .word(group), .word(set), .word(member)]
                } else { nil }
            })
    }

    static let hubExpectations: [StatementForm] = [
        StatementForm(
            "expect", "hub", "pushes", .client, .count,
            build: { .expect(.hub(.pushes(client: $0.word(0), count: $0.count(1)))) },
            print: { if case let .expect(.hub(.pushes(client, count))) = $0 { [.word(client), .count(count)] } else { nil } }),
        StatementForm(
            "expect", "hub", "tombstones", .count,
            build: { .expect(.hub(.tombstones($0.count(0)))) },
            print: { if case let .expect(.hub(.tombstones(count))) = $0 { [.count(count)] } else { nil } }),
        StatementForm(
            "expect", "hub", "horizon", "held", "by", .client,
            build: { .expect(.hub(.horizonHeldBy(client: $0.word(0)))) },
            print: { if case let .expect(.hub(.horizonHeldBy(client))) = $0 { [.word(client)] } else { nil } }),
        StatementForm(
            "expect", "hub", "clients", "agree",
            build: { _ in .expect(.hub(.clientsAgree)) },
            print: { $0 == .expect(.hub(.clientsAgree)) ? [] : nil }),
        StatementForm(
            "expect", "hub", "warns", .value("TEXT", "a part of a warning"),
            build: { .expect(.hub(.warns($0.word(0)))) },
            print: { if case let .expect(.hub(.warns(text))) = $0 { [.word(text)] } else { nil } }),
        StatementForm(
            "expect", "hub", kind, id, "=", .value("VALUE", "a value"),
            build: { .expect(.hub(.hubValue(kind: $0.word(0), id: $0.word(1), value: $0.word(2)))) },
            print: { if case let .expect(.hub(.hubValue(kind, id, value?))) = $0 { [.word(kind), .word(id), .word(value)] } else { nil } }),
        StatementForm(
            "expect", "hub", kind, id, "absent",
            build: { .expect(.hub(.hubValue(kind: $0.word(0), id: $0.word(1), value: nil))) },
            print: { if case let .expect(.hub(.hubValue(kind, id, nil))) = $0 { [.word(kind), .word(id)] } else { nil } }),
        StatementForm(
            "expect", "hub", kind, id, set, "has", member,
            build: { .expect(.hub(.hubMember(kind: $0.word(0), id: $0.word(1), set: $0.word(2), member: $0.word(3), has: true))) },
            print: { if case let .expect(.hub(.hubMember(kind, id, set, member, true))) = $0 { [.word(kind), .word(id), .word(set), .word(member)] } else { nil } }),
        StatementForm(
            "expect", "hub", kind, id, set, "lacks", member,
            build: { .expect(.hub(.hubMember(kind: $0.word(0), id: $0.word(1), set: $0.word(2), member: $0.word(3), has: false))) },
            print: { if case let .expect(.hub(.hubMember(kind, id, set, member, false))) = $0 { [.word(kind), .word(id), .word(set), .word(member)] } else { nil } }),
    ] + HubExpectation.Queue.allCases.map { queue in
        StatementForm(
            "expect", clientSubject, Slot(stringLiteral: queue.rawValue), .count,
            build: { .expect(.hub(.queue(client: $0.word(0), queue, count: $0.count(1)))) },
            print: { if case let .expect(.hub(.queue(client, which, count))) = $0, which == queue { [.word(client), .count(count)] } else { nil } })
    } + [
        StatementForm(
            "expect", clientSubject, "halted",
            build: { .expect(.hub(.halted(client: $0.word(0), true))) },
            print: { if case let .expect(.hub(.halted(client, true))) = $0 { [.word(client)] } else { nil } }),
        StatementForm(
            "expect", clientSubject, "not", "halted",
            build: { .expect(.hub(.halted(client: $0.word(0), false))) },
            print: { if case let .expect(.hub(.halted(client, false))) = $0 { [.word(client)] } else { nil } }),
        StatementForm(
            "expect", clientSubject, "conflict", kind, id,
            build: { .expect(.hub(.conflict(client: $0.word(0), kind: $0.word(1), id: $0.word(2)))) },
            print: { if case let .expect(.hub(.conflict(client, kind, id))) = $0 { [.word(client), .word(kind), .word(id)] } else { nil } }),
        StatementForm(
            "expect", clientSubject, "group", kind, group, set, "has", member,
            build: { .expect(.hub(.group(client: $0.word(0), kind: $0.word(1), group: $0.word(2), set: $0.word(3), member: $0.word(4), has: true))) },
            print: {
                if case let .expect(.hub(.group(client, kind, group, set, member, true))) = $0 { [.word(client), .word(kind), .word(group), .word(set), .word(member)] }
                else { nil }
            }),
        StatementForm(
            "expect", clientSubject, "group", kind, group, set, "lacks", member,
            build: { .expect(.hub(.group(client: $0.word(0), kind: $0.word(1), group: $0.word(2), set: $0.word(3), member: $0.word(4), has: false))) },
            print: {
                if case let .expect(.hub(.group(client, kind, group, set, member, false))) = $0 { [.word(client), .word(kind), .word(group), .word(set), .word(member)] }
                else { nil }
            }),
        StatementForm(
            "expect", clientSubject, kind, id, "=", .value("VALUE", "a value"),
            build: { .expect(.hub(.value(client: $0.word(0), kind: $0.word(1), id: $0.word(2), value: $0.word(3)))) },
            print: { if case let .expect(.hub(.value(client, kind, id, value?))) = $0 { [.word(client), .word(kind), .word(id), .word(value)] } else { nil } }),
        StatementForm(
            "expect", clientSubject, kind, id, "absent",
            build: { .expect(.hub(.value(client: $0.word(0), kind: $0.word(1), id: $0.word(2), value: nil))) },
            print: { if case let .expect(.hub(.value(client, kind, id, nil))) = $0 { [.word(client), .word(kind), .word(id)] } else { nil } }),
        StatementForm(
            "expect", clientSubject, kind, id, set, "has", member,
            build: { .expect(.hub(.member(client: $0.word(0), kind: $0.word(1), id: $0.word(2), set: $0.word(3), member: $0.word(4), has: true))) },
            print: {
                if case let .expect(.hub(.member(client, kind, id, set, member, true))) = $0 { [.word(client), .word(kind), .word(id), .word(set), .word(member)] } else { nil }
            }),
        StatementForm(
            "expect", clientSubject, kind, id, set, "lacks", member,
            build: { .expect(.hub(.member(client: $0.word(0), kind: $0.word(1), id: $0.word(2), set: $0.word(3), member: $0.word(4), has: false))) },
            print: {
                if case let .expect(.hub(.member(client, kind, id, set, member, false))) = $0 { [.word(client), .word(kind), .word(id), .word(set), .word(member)] }
                else { nil }
            }),
    ]
}
