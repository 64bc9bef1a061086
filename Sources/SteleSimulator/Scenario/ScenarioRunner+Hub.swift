import Stele

/// The hub's statements and expectations (SCENARIOS.md "Hub statements", "Hub expectations").
extension ScenarioRunner {
    func runHub(_ statement: HubStatement) throws {
        if statement == .start {
            try simulation.startHub()
            return
        }
        guard let hub = simulation.hub else { throw Failure(expected: "a hub", found: "no hub; start it with hub") }
        if let name = statement.client, hub.client(name) == nil, hub.ledgerClient(name) == nil { throw Failure(expected: "client \(name)", found: "no such client") }
        try hub.apply(statement)
    }

    private func client(_ name: String) throws -> SimulatedClient {
        guard let client = simulation.hub?.client(name) else { throw Failure(expected: "client \(name)", found: "no such client; declare it with client \(name)") }
        return client
    }

    private func show(_ bytes: [UInt8]?) -> String {
        bytes.map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "absent"
    }

    func checkHub(_ expectation: HubExpectation) throws {
        guard let hub = simulation.hub else { throw Failure(expected: "a hub", found: "no hub; start it with hub") }
        if let name = expectation.client, let ledger = hub.ledgerClient(name) { return try checkLedger(expectation, ledger) }
        switch expectation {
        case let .value(name, kind, id, value):
            let found = try client(name).store.value(kind: kind, id: id)
            guard found == value.map({ Array($0.utf8) }) else { throw Failure(expected: show(value.map { Array($0.utf8) }), found: show(found)) }
        case let .member(name, kind, id, set, member, has):
            let found = try client(name).store.holds(kind: kind, id: id, set: set, member: member)
            guard found == has else {
                throw Failure(expected: "\(id) \(has ? "has" : "lacks") \(member)", found: "\(set) = \(try client(name).store.members(kind: kind, id: id, set: set))")
            }
        case let .group(name, kind, group, set, member, has):
            let found = try client(name).store.rollup(kind: kind, group: group, set: set, member: member)
            guard found == has else {
                throw Failure(expected: "group \(group) \(has ? "has" : "lacks") \(member)", found: found.map { $0 ? "has" : "lacks" } ?? "no rollup row for the group")
            }
        case let .queue(name, which, count):
            let counts = try client(name).store.queueCounts()
            let found =
                switch which {
                case .pending: counts.pending + counts.inFlight
                case .inFlight: counts.inFlight
                case .failed: counts.failed
                }
            guard found == count else {
                throw Failure(expected: "\(count) \(which.rawValue)", found: "\(found) (pending \(counts.pending), in flight \(counts.inFlight), failed \(counts.failed))")
            }
        case let .hubValue(kind, id, value):
            let found = try hub.value(kind: kind, id: id)
            guard found == value.map({ Array($0.utf8) }) else { throw Failure(expected: show(value.map { Array($0.utf8) }), found: show(found)) }
        case let .hubMember(kind, id, set, member, has):
            let found = try hub.holds(kind: kind, id: id, set: set, member: member)
            guard found == has else { throw Failure(expected: "\(id) \(has ? "has" : "lacks") \(member) on the hub", found: found ? "has" : "lacks") }
        case let .pushes(name, count):
            _ = try client(name)
            let found = hub.pushesReceived[name, default: 0]
            guard found == count else { throw Failure(expected: "\(count) pushes from \(name)", found: "\(found)") }
        case .tombstones(let count):
            let found = try hub.tombstones()
            guard found == count else { throw Failure(expected: "\(count) tombstones on the hub", found: "\(found)") }
        case let .warns(text):
            let warnings = try hub.statusWarnings()
            guard warnings.contains(where: { $0.contains(text) }) else {
                throw Failure(expected: "a status warning with \"\(text)\"", found: warnings.isEmpty ? "no warning" : warnings.joined(separator: " | "))
            }
        case .clientsAgree:
            // The oracle has watched every push and answer since the hub started.
            let oracle = hub.oracle
            try oracle.check(hub)
            guard oracle.failures == 0 else {
                throw Failure(expected: "every client agreeing with the hub", found: "\(oracle.failures) findings: \(oracle.findings.prefix(3).joined(separator: "; "))")
            }
        case let .horizonHeldBy(name):
            let found = try hub.horizonHolder()
            guard found == name else { throw Failure(expected: "the horizon held by \(name)", found: found.map { "held by \($0)" } ?? "held by no client") }
        case let .conflict(name, kind, id):
            let conflicts = try client(name).store.conflicts()
            guard conflicts.contains(where: { $0.kind == kind && $0.id == id }) else {
                throw Failure(expected: "a conflict event for \(kind) \(id)", found: conflicts.isEmpty ? "none" : conflicts.map { "\($0.kind) \($0.id)" }.joined(separator: ", "))
            }
        case let .halted(name, halted):
            // A mirror client never halts: every failure it meets is retried or ends as a failed mutation.
            _ = try client(name)
            guard !halted else { throw Failure(expected: "\(name) halted", found: "running (a mirror client does not halt)") }
        }
    }

    /// A ledger client's expectations: its app's store, its ledger's outbox and conflicts, its halt.
    private func checkLedger(_ expectation: HubExpectation, _ client: SimulatedLedgerClient) throws {
        switch expectation {
        case let .value(_, kind, id, value):
            let found = try client.source.payload(kind: kind, id: id)
            guard found == value.map({ Array($0.utf8) }) else { throw Failure(expected: show(value.map { Array($0.utf8) }), found: show(found)) }
        case let .queue(name, which, count):
            let outbox = try client.ledger.status()
            let found =
                switch which {
                case .pending: outbox.pending
                case .inFlight: 0
                case .failed: outbox.failed
                }
            guard found == count else { throw Failure(expected: "\(count) \(which.rawValue) in \(name)'s outbox", found: "\(found) (pending \(outbox.pending), failed \(outbox.failed))") }
        case let .conflict(_, kind, id):
            let conflicts = try client.ledger.conflicts()
            guard conflicts.contains(where: { $0.kind == kind && $0.id == id }) else {
                throw Failure(expected: "a conflict event for \(kind) \(id)", found: conflicts.isEmpty ? "none" : conflicts.map { "\($0.kind) \($0.id)" }.joined(separator: ", "))
            }
        case let .halted(name, halted):
            let halt = client.ledger.halt
            guard (halt != nil) == halted else {
                throw Failure(expected: halted ? "\(name) halted" : "\(name) not halted", found: halt.map { "halted: \($0.message)" } ?? "running")
            }
        case let .member(name, _, _, _, _, _), let .group(name, _, _, _, _, _):
            throw Failure(expected: "a set of \(name)'s", found: "\(name) is a ledger client, which keeps no sets")
        case let .pushes(name, count):
            let found = client.hub.pushesReceived[name, default: 0]
            guard found == count else { throw Failure(expected: "\(count) pushes from \(name)", found: "\(found)") }
        case .hubValue, .hubMember, .tombstones, .horizonHeldBy, .warns, .clientsAgree:
            // About the hub alone: checkHub judges them.
            break
        }
    }
}

extension HubExpectation {
    /// The client an expectation is about, if any.
    var client: String? {
        switch self {
        case .value(let client, _, _, _), .member(let client, _, _, _, _, _), .group(let client, _, _, _, _, _), .queue(let client, _, _), .pushes(let client, _),
            .conflict(let client, _, _), .halted(let client, _):
            client
        case .hubValue, .hubMember, .tombstones, .horizonHeldBy, .warns, .clientsAgree:
            nil
        }
    }
}
