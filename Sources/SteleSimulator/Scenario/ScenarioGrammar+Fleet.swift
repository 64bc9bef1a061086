import Stele

/// The fleet statements of SCENARIOS.md, and the ones added since, one row each.
extension ScenarioGrammar {
    typealias Message = ScenarioParser.Message

    static let fleetStatements: [StatementForm] = [
        StatementForm(
            "fleet", .declaringDevices,
            check: { state, arguments in
                guard !state.hasFleet else { throw Message("a scenario has one fleet; add devices with join") }
                for name in arguments.words(0) {
                    guard state.devices.insert(name).inserted else { throw Message("device \(name) is named twice") }
                }
                state.hasFleet = true
            },
            build: { .fleet($0.words(0)) },
            print: { if case .fleet(let devices) = $0 { [.words(devices)] } else { nil } }),
        StatementForm(
            "namespace", .declaring("NS", "a namespace name"), .choice(NamespaceKind.self, "KIND", noun: "kind"),
            check: { state, arguments in
                let name = arguments.word(0)
                guard state.namespaces[name] == nil else { throw Message("namespace \(name) is declared twice") }
                state.namespaces[name] = arguments.choice(1, as: NamespaceKind.self)
            },
            build: { .namespace($0.word(0), $0.choice(1, as: NamespaceKind.self)) },
            print: { if case let .namespace(name, kind) = $0 { [.word(name), .word(kind.rawValue)] } else { nil } }),
        StatementForm(
            "join", .declaring("D", "a device name"),
            check: { state, arguments in
                guard state.hasFleet else { throw Message("join needs a fleet first") }
                guard state.devices.insert(arguments.word(0)).inserted else { throw Message("device \(arguments.word(0)) is already on the roster") }
            },
            build: { .join($0.word(0)) },
            print: { if case .join(let device) = $0 { [.word(device)] } else { nil } }),
        StatementForm(
            "revoke", .device,
            build: { .revoke($0.word(0)) },
            print: { if case .revoke(let device) = $0 { [.word(device)] } else { nil } }),
    ] + deviceActions + network + [
        StatementForm(
            "sync",
            build: { _ in .sync },
            print: { $0 == .sync ? [] : nil }),
        StatementForm(
            "advance", .duration(),
            build: { .advance($0.milliseconds(0)) },
            print: { if case .advance(let milliseconds) = $0 { [.milliseconds(milliseconds)] } else { nil } }),
        StatementForm(
            "gc", .choice("on", "off"),
            build: { .gc($0.word(0) == "on") },
            print: { if case .gc(let on) = $0 { [.word(on ? "on" : "off")] } else { nil } }),
    ] + storage + anchor + [
        // Added: a device's wall clock runs ahead or behind (`skew D 5m`, `skew D -2h`).
        StatementForm(
            "skew", .device, .signedDuration,
            build: { .skew(device: $0.word(0), milliseconds: $0.milliseconds(1)) },
            print: { if case let .skew(device, milliseconds) = $0 { [.word(device), .milliseconds(milliseconds)] } else { nil } }),
    ] + contacts

    /// `D put NS KEY VALUE` and the other writes a device makes.
    static let deviceActions: [StatementForm] = [
        StatementForm(
            .subject, "put", .namespace(.causal, .lww, .appendOnly, .local), .name("KEY", "a key"), .value("VALUE", "a value"),
            build: { .operation(device: $0.word(0), .put(namespace: $0.word(1), key: $0.word(2), value: $0.word(3))) },
            print: { if case let .operation(device, .put(namespace, key, value)) = $0 { [.word(device), .word(namespace), .word(key), .word(value)] } else { nil } }),
        StatementForm(
            .subject, "delete", .namespace(.causal, .lww, .local), .name("KEY", "a key"),
            build: { .operation(device: $0.word(0), .delete(namespace: $0.word(1), key: $0.word(2))) },
            print: { if case let .operation(device, .delete(namespace, key)) = $0 { [.word(device), .word(namespace), .word(key)] } else { nil } }),
        StatementForm(
            .subject, "append", .namespace(.log), .name("GROUP", "a group"), .value("VALUE", "a value"),
            build: { .operation(device: $0.word(0), .append(namespace: $0.word(1), group: $0.word(2), value: $0.word(3))) },
            print: { if case let .operation(device, .append(namespace, group, value)) = $0 { [.word(device), .word(namespace), .word(group), .word(value)] } else { nil } }),
        StatementForm(
            .subject, "bury", .namespace(.log), .name("GROUP", "a group"),
            build: { .operation(device: $0.word(0), .bury(namespace: $0.word(1), group: $0.word(2))) },
            print: { if case let .operation(device, .bury(namespace, group)) = $0 { [.word(device), .word(namespace), .word(group)] } else { nil } }),
        StatementForm(
            .subject, "post", .namespace(.messages), .name("MSG", "a message"), .value("TEXT", "a text"),
            build: { .operation(device: $0.word(0), .post(namespace: $0.word(1), message: $0.word(2), text: $0.word(3))) },
            print: { if case let .operation(device, .post(namespace, message, text)) = $0 { [.word(device), .word(namespace), .word(message), .word(text)] } else { nil } }),
        StatementForm(
            .subject, "edit", .namespace(.messages), .name("MSG", "a message"), .value("TEXT", "a text"),
            build: { .operation(device: $0.word(0), .edit(namespace: $0.word(1), message: $0.word(2), text: $0.word(3))) },
            print: { if case let .operation(device, .edit(namespace, message, text)) = $0 { [.word(device), .word(namespace), .word(message), .word(text)] } else { nil } }),
        StatementForm(
            .subject, "unsend", .namespace(.messages), .name("MSG", "a message"), .choice("me", "everyone"),
            build: { .operation(device: $0.word(0), .unsend(namespace: $0.word(1), message: $0.word(2), scope: $0.word(3) == "everyone" ? .everyone : .me)) },
            print: {
                if case let .operation(device, .unsend(namespace, message, scope)) = $0 {
                    [.word(device), .word(namespace), .word(message), .word(scope == .everyone ? "everyone" : "me")]
                } else { nil }
            }),
        StatementForm(
            .subject, "react", .namespace(.messages), .name("MSG", "a message"), .emoji,
            build: { .operation(device: $0.word(0), .react(namespace: $0.word(1), message: $0.word(2), emoji: $0.word(3))) },
            print: { if case let .operation(device, .react(namespace, message, emoji)) = $0 { [.word(device), .word(namespace), .word(message), .word(emoji)] } else { nil } }),
        StatementForm(
            .subject, "unreact", .namespace(.messages), .name("MSG", "a message"), .emoji,
            build: { .operation(device: $0.word(0), .unreact(namespace: $0.word(1), message: $0.word(2), emoji: $0.word(3))) },
            print: { if case let .operation(device, .unreact(namespace, message, emoji)) = $0 { [.word(device), .word(namespace), .word(message), .word(emoji)] } else { nil } }),
    ]

    /// Who can reach whom, and how well.
    static let network: [StatementForm] = [
        StatementForm(
            "offline", .devices(),
            build: { .offline($0.words(0)) },
            print: { if case .offline(let devices) = $0 { [.words(devices)] } else { nil } }),
        StatementForm(
            "online", .devices(),
            build: { .online($0.words(0)) },
            print: { if case .online(let devices) = $0 { [.words(devices)] } else { nil } }),
        StatementForm(
            "partition", .devices(), "/", .devices(), needs: "two sides",
            check: { _, arguments in
                guard Set(arguments.words(0)).isDisjoint(with: arguments.words(1)) else { throw Message("a device cannot be on both sides of a partition") }
            },
            build: { .partition($0.words(0), $0.words(1)) },
            print: { if case let .partition(left, right) = $0 { [.words(left), .words(right)] } else { nil } }),
        StatementForm(
            "heal",
            build: { _ in .heal },
            print: { $0 == .heal ? [] : nil }),
        StatementForm(
            "network", "loss", .percent,
            build: { .networkLoss($0.percent(0)) },
            print: { if case .networkLoss(let percent) = $0 { [.percent(percent)] } else { nil } }),
        StatementForm(
            "network", "duplicate", .percent,
            build: { .networkDuplicate($0.percent(0)) },
            print: { if case .networkDuplicate(let percent) = $0 { [.percent(percent)] } else { nil } }),
        StatementForm(
            "network", "delay", .duration("MIN"), .duration("MAX"),
            check: { _, arguments in
                guard arguments.milliseconds(0) <= arguments.milliseconds(1) else { throw Message("the delay's minimum is above its maximum") }
            },
            build: { .networkDelay(min: $0.milliseconds(0), max: $0.milliseconds(1)) },
            print: { if case let .networkDelay(low, high) = $0 { [.milliseconds(low), .milliseconds(high)] } else { nil } }),
    ]

    /// Backups, restores, crashes and forced storage faults.
    static let storage: [StatementForm] = [
        StatementForm(
            "backup", .device, "as", .declaring("NAME", "a backup name"),
            check: { state, arguments in
                state.backups.insert(arguments.word(1))
                state.backupOwners[arguments.word(1)] = arguments.word(0)
            },
            build: { .backup(device: $0.word(0), label: $0.word(1)) },
            print: { if case let .backup(device, label) = $0 { [.word(device), .word(label)] } else { nil } }),
        StatementForm(
            "restore", .device, "from", .backup,
            check: { state, arguments in try state.restoring(arguments.word(1), to: arguments.word(0)) },
            build: { .restore(device: $0.word(0), label: $0.word(1), withKeys: false) },
            print: { if case let .restore(device, label, false) = $0 { [.word(device), .word(label)] } else { nil } }),
        // Added: the key store (and its stamp floor) rolled back with the replica.
        StatementForm(
            "restore", .device, "from", .backup, "with", "keys",
            check: { state, arguments in try state.restoring(arguments.word(1), to: arguments.word(0)) },
            build: { .restore(device: $0.word(0), label: $0.word(1), withKeys: true) },
            print: { if case let .restore(device, label, true) = $0 { [.word(device), .word(label)] } else { nil } }),
        StatementForm(
            "crash", .device,
            build: { .crash($0.word(0)) },
            print: { if case .crash(let device) = $0 { [.word(device)] } else { nil } }),
        // Added: the device's next storage step fails, or the one after N more.
        StatementForm(
            "storage", .device, "fail", .choice(StorageFault.self),
            build: { .storageFault(device: $0.word(0), $0.choice(1, as: StorageFault.self), afterSteps: 0) },
            print: { if case let .storageFault(device, fault, 0) = $0 { [.word(device), .word(fault.rawValue)] } else { nil } }),
        StatementForm(
            "storage", .device, "fail", .choice(StorageFault.self), "after", .count,
            build: { .storageFault(device: $0.word(0), $0.choice(1, as: StorageFault.self), afterSteps: $0.count(2)) },
            print: { if case let .storageFault(device, fault, after) = $0, after > 0 { [.word(device), .word(fault.rawValue), .count(after)] } else { nil } }),
    ]

    /// The anchor substrate's faults.
    static let anchor: [StatementForm] = [
        StatementForm(
            "anchor", "down",
            build: { _ in .anchor(.down) },
            print: { $0 == .anchor(.down) ? [] : nil }),
        StatementForm(
            "anchor", "up",
            build: { _ in .anchor(.up) },
            print: { $0 == .anchor(.up) ? [] : nil }),
        StatementForm(
            "anchor", "heal",
            build: { _ in .anchor(.heal) },
            print: { $0 == .anchor(.heal) ? [] : nil }),
        StatementForm(
            "anchor", "fail", "next", "write",
            build: { _ in .anchor(.failNextWrite) },
            print: { $0 == .anchor(.failNextWrite) ? [] : nil }),
        StatementForm(
            "anchor", "delay", "next", "write", .duration(),
            build: { .anchor(.delayNextWrite($0.milliseconds(0))) },
            print: { if case .anchor(.delayNextWrite(let milliseconds)) = $0 { [.milliseconds(milliseconds)] } else { nil } }),
        StatementForm(
            "anchor", "backup", "as", .declaring("NAME", "a backup name"),
            check: { state, arguments in
                guard state.backups.insert(arguments.word(0)).inserted else { throw Message("a backup named \(arguments.word(0)) was taken above") }
                state.backupOwners[arguments.word(0)] = "the anchor"
            },
            build: { .anchor(.backup(label: $0.word(0))) },
            print: { if case .anchor(.backup(let label)) = $0 { [.word(label)] } else { nil } }),
        StatementForm(
            "anchor", "restore", "from", .backup,
            check: { state, arguments in try state.restoring(arguments.word(0), to: "the anchor") },
            build: { .anchor(.restore(label: $0.word(0))) },
            print: { if case .anchor(.restore(let label)) = $0 { [.word(label)] } else { nil } }),
    ]

    /// Added: other accounts, and the conversations this one has with them.
    static let contacts: [StatementForm] = [
        StatementForm(
            "contact", .declaring("NAME", "a name"), .declaringDevices,
            check: { state, arguments in
                let contact = arguments.word(0)
                guard !state.contacts.contains(contact) else { throw Message("contact \(contact) is declared twice") }
                for name in arguments.words(1) {
                    guard state.devices.insert(name).inserted else { throw Message("device \(name) is named twice") }
                    state.contactOf[name] = contact
                }
                state.contacts.insert(contact)
            },
            build: { .contact(name: $0.word(0), devices: $0.words(1)) },
            print: { if case let .contact(name, devices) = $0 { [.word(name), .words(devices)] } else { nil } }),
        StatementForm(
            "conversation", .declaring("NS", "a namespace name"), "with", .contact,
            check: { state, arguments in
                let (namespace, contact) = (arguments.word(0), arguments.word(1))
                if let kind = state.namespaces[namespace], kind != .messages {
                    throw Message("namespace \(namespace) is \(kind.rawValue); a conversation is a messages namespace")
                }
                guard !state.conversations.values.contains(where: { $0.contains(namespace) }) else {
                    throw Message("\(namespace) is a conversation already; a conversation keeps its contact for life")
                }
                state.namespaces[namespace] = .messages
                state.conversations[contact, default: []].insert(namespace)
            },
            build: { .conversation(namespace: $0.word(0), contact: $0.word(1)) },
            print: { if case let .conversation(namespace, contact) = $0 { [.word(namespace), .word(contact)] } else { nil } }),
    ]
}
