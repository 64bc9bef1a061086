import Stele

/// An expectation that did not hold (or a statement that could not run): the
/// file, the line, what was expected, what was found, and the seed to replay.
public struct ScenarioFailure: Error, Sendable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let text: String
    public let expected: String
    public let found: String
    public let seed: UInt64

    public var description: String {
        """
        FAIL \(file):\(line): \(text)
            expected: \(expected)
            found:    \(found)
            seed:     \(seed)
        """
    }
}

/// Runs a parsed scenario in a ``Simulation``, line by line.
public final class ScenarioRunner {
    public let scenario: Scenario
    public let seed: UInt64
    public let simulation: Simulation
    /// Whether barrier rounds may run (`gc on`); they arrive with tombstone collection.
    public private(set) var collectionAllowed = true
    /// Called before each line runs (for narration and progress).
    public var onLine: ((Scenario.Line) -> Void)?

    public init(scenario: Scenario, seed: UInt64 = 0, storage: Simulation.Storage = .inMemoryFiles) throws {
        self.scenario = scenario
        self.seed = seed
        simulation = try Simulation(seed: seed, storage: storage)
    }

    /// Runs every line.
    /// - Throws: ``ScenarioFailure`` at the first line that fails.
    public func run() throws {
        for line in scenario.lines {
            onLine?(line)
            do {
                try execute(line.statement)
            } catch let failure as Failure {
                throw ScenarioFailure(file: scenario.file, line: line.number, text: line.text, expected: failure.expected, found: failure.found, seed: seed)
            } catch {
                throw ScenarioFailure(file: scenario.file, line: line.number, text: line.text, expected: "the statement to run", found: "\(error)", seed: seed)
            }
        }
    }

    struct Failure: Error {
        init(expected: String, found: String) {
            self.expected = expected
            self.found = found
        }

        let expected: String
        let found: String
    }

    private func execute(_ statement: Statement) throws {
        switch statement {
        case let .operation(device, operation):
            try perform(device, operation)
        case .sync:
            if let moving = simulation.sync() {
                throw Failure(expected: "the fleet to settle within 1 h of virtual time", found: "still moving: \(moving)")
            }
            // The oracle judges at every settled sync it can (a device asleep or a
            // partition defers it); `expect resurrections` and `expect lost-writes`
            // insist on a check of their own.
            if simulation.whyOracleCannotCheck() == nil { try simulation.checkOracle() }
        case let .restore(_, label, _) where !simulation.hasBackup(label):
            throw Failure(expected: "a backup named \(label)", found: "no such backup; take it with backup D as \(label)")
        case .gc(let allowed):
            collectionAllowed = allowed
            try simulation.apply(statement)
        case .hub(let statement):
            try runHub(statement)
        case .expect(.hub(let expectation)):
            try checkHub(expectation)
        case .expect(let expectation):
            try simulation.observing { try check(expectation) }
        default:
            try simulation.apply(statement)
        }
    }

    private func perform(_ device: String, _ operation: WorkloadOperation) throws {
        let fired = simulation.device(device)?.storageFaultsFired ?? 0
        // A write refused by a storage fault the scenario forced is part of the
        // story (it did not happen); refused for any other reason, it fails.
        guard simulation.perform(device, operation) || (simulation.device(device)?.storageFaultsFired ?? 0) > fired else {
            throw Failure(expected: "\(device) to \(operation)", found: "its store refused the write" + (simulation.lastFailure.map { ": \($0)" } ?? ""))
        }
        // The rules may refuse a write (an edit of a deleted message is the story);
        // a message the device does not hold is a mistake in the scenario.
        if let refusal = simulation.lastRefusal, refusal.code == .messageMissing {
            throw Failure(expected: "\(device) to \(operation)", found: refusal.message)
        }
    }

    // MARK: - Expectations

    private func replica(_ name: String) throws -> Replica {
        guard let device = simulation.device(name) else { throw Failure(expected: "device \(name) on the roster", found: "\(name) is not on the roster") }
        return device.replica
    }

    private func read(_ replica: Replica, _ namespace: String, _ key: String) throws -> [UInt8]? {
        switch try replica.declaration(of: namespace).kind {
        case .causal: try replica.causal(namespace).get(key)
        case .lww: try replica.lww(namespace).get(key)
        case .appendOnly: try replica.appendOnly(namespace).get(key)
        case .local: try replica.local(namespace).get(key)
        case .log, .messages: nil
        }
    }

    private func show(_ bytes: [UInt8]?) -> String {
        bytes.map { "\"\(String(decoding: $0, as: UTF8.self))\"" } ?? "absent"
    }

    /// `all` is every device on the roster, online or not (SCENARIOS.md).
    private func names(_ target: Expectation.Target) -> [String] {
        switch target {
        case .device(let name): [name]
        case .all: simulation.devices.map(\.name)
        }
    }

    private func check(_ expectation: Expectation) throws {
        switch expectation {
        case let .value(target, namespace, key, value):
            let wanted = value.map { Array($0.utf8) }
            for name in names(target) {
                let found = try read(try replica(name), namespace, key)
                guard found == wanted else {
                    throw Failure(expected: "\(name) reads \(key) as \(show(wanted))", found: "\(name) reads \(show(found))")
                }
            }
        case let .groupEmpty(target, namespace, group):
            for name in names(target) {
                let live = try replica(name).log(namespace).live(group: group)
                guard live.isEmpty else { throw Failure(expected: "no live event in \(group) on \(name)", found: "\(live.count) live events on \(name)") }
            }
        case let .count(device, namespace, count):
            let store = try replica(device)
            let found: Int =
                switch try store.declaration(of: namespace).kind {
                case .causal: try store.causal(namespace).count()
                case .lww: try store.lww(namespace).count()
                case .appendOnly: try store.appendOnly(namespace).count()
                case .local: try store.local(namespace).count()
                case .log: try store.log(namespace).count()
                case .messages: try store.messages(namespace).count()
                }
            guard found == count else { throw Failure(expected: "\(count) live rows", found: "\(found)") }
        case let .stored(device, namespace, group, count):
            let found = try replica(device).log(namespace).storedEventCount(group: group)
            guard found == count else { throw Failure(expected: "\(count) stored events of \(group)", found: "\(found)") }
        case let .message(device, namespace, message, state):
            let row = try replica(device).messages(namespace).message(message)
            let found: String =
                switch row {
                case nil: "absent"
                case let row? where row.isDeleted: "deleted"
                case let row?: "= \(show(row.body))"
                }
            let wanted: String =
                switch state {
                case .text(let text): "= \(show(Array(text.utf8)))"
                case .deleted: "deleted"
                case .absent: "absent"
                }
            guard found == wanted else { throw Failure(expected: "\(device) shows \(message) \(wanted)", found: "\(device) shows it \(found)") }
        case let .tombstones(device, namespace, count):
            let report = try replica(device).report()
            let found = report.namespaces.filter { namespace == nil || $0.name == namespace }.reduce(0) { $0 + $1.tombstones }
            guard found == count else { throw Failure(expected: "\(count) tombstones", found: "\(found)") }
        case let .generation(device, generation):
            let found = try replica(device).generation
            guard found == generation else { throw Failure(expected: "generation \(generation)", found: "generation \(found)") }
        case let .status(device, state):
            guard let found = simulation.device(device) else { throw Failure(expected: "device \(device)", found: "not on the roster") }
            let status = found.node.recoveryStatus
            guard Expectation.Status(status) == state else { throw Failure(expected: "status \(state.rawValue)", found: "status \(status)") }
        case let .gcBlockedBy(device, blockers):
            guard let found = simulation.device(device) else { throw Failure(expected: "device \(device)", found: "not on the roster") }
            let names = found.node.blockingCollection.compactMap { id in simulation.everyDevice.first { $0.id == id }?.name }.sorted()
            guard names == blockers.sorted() else {
                throw Failure(
                    expected: "collection blocked by \(blockers.sorted().joined(separator: " "))",
                    found: names.isEmpty ? "blocked by nobody" : "blocked by \(names.joined(separator: " "))")
            }
        case let .conflict(device, namespace, key, raised):
            guard let found = simulation.device(device) else { throw Failure(expected: "device \(device)", found: "not on the roster") }
            let reported = found.conflicts.contains(where: { $0.namespace == namespace && $0.key == key })
            guard reported == raised else {
                throw Failure(
                    expected: raised ? "a conflict reported for \(key)" : "no conflict reported for \(key)",
                    found: found.conflicts.isEmpty ? "no conflict" : "conflicts for \(found.conflicts.map(\.key))")
            }
        case let .refused(device, sender):
            guard let receiver = simulation.device(device), let other = simulation.device(sender) else {
                throw Failure(expected: "devices \(device) and \(sender)", found: "not in this simulation")
            }
            guard receiver.refusedSenders.contains(other.id) else {
                throw Failure(expected: "\(device) refused frames from \(sender)", found: "it refused none")
            }
        case let .anchorReadable(device, readable):
            guard let found = simulation.device(device) else { throw Failure(expected: "device \(device)", found: "not in this simulation") }
            let opens = simulation.canReadAnchor(found)
            guard opens == readable else {
                throw Failure(
                    expected: "\(device)'s account keys \(readable ? "open" : "do not open") the anchor",
                    found: opens ? "they open it" : "they do not (or there is no anchor)")
            }
        case let .delivered(device, namespace, message):
            guard let row = try replica(device).messages(namespace).message(message) else {
                throw Failure(expected: "\(device) holds message \(message) delivered", found: "it does not hold \(message)")
            }
            guard row.isDelivered else { throw Failure(expected: "\(message) delivered on \(device)", found: "no receipt for its post on \(device)") }
        case let .outbox(device, namespace, count):
            let found = try replica(device).messages(namespace).outboxCount()
            guard found == count else { throw Failure(expected: "\(count) messages owing a delivery on \(device)", found: "\(found)") }
        case let .storageFailed(device, count):
            guard let found = simulation.device(device)?.storageFaultsFired else { throw Failure(expected: "device \(device)", found: "not in this simulation") }
            guard found == count else { throw Failure(expected: "\(count) storage faults fired on \(device)", found: "\(found)") }
        case .converged:
            let online = simulation.devices.filter(\.isOnline)
            guard let first = online.first else { return }
            let reference = try SimulationState.snapshot(first.replica, simulation.namespaces)
            for device in online.dropFirst() {
                let state = try SimulationState.snapshot(device.replica, simulation.namespaces)
                guard state == reference else {
                    throw Failure(expected: "\(device.name) identical to \(first.name)", found: SimulationState.difference(reference, state))
                }
            }
        case .resurrections(let count):
            try checkOracle(expecting: "\(count) resurrections")
            guard simulation.oracle.resurrections == count else {
                throw Failure(expected: "\(count) resurrections", found: "\(simulation.oracle.resurrections): \(simulation.oracle.findings.prefix(3).joined(separator: "; "))")
            }
        case .hub(let expectation):
            try checkHub(expectation)
        case .lostWrites(let count):
            try checkOracle(expecting: "\(count) lost writes")
            guard simulation.oracle.lostWrites == count else {
                throw Failure(expected: "\(count) lost writes", found: "\(simulation.oracle.lostWrites): \(simulation.oracle.findings.prefix(3).joined(separator: "; "))")
            }
        }
    }
}

extension ScenarioRunner {
    /// Runs the oracle now: a check that cannot run (a device offline, a
    /// partition, a fleet still moving) or a store it cannot read fails the
    /// expectation, never passes it.
    fileprivate func checkOracle(expecting expected: String) throws {
        do {
            try simulation.checkOracle()
        } catch let error as OracleCannotCheck {
            throw Failure(expected: expected, found: "\(error); bring every device online and sync before this line")
        }
        if simulation.oracle.unreadable > 0 {
            throw Failure(expected: expected, found: "the oracle could not read a store: \(simulation.oracle.findings.filter { $0.hasPrefix("unreadable") }.prefix(2).joined(separator: "; "))")
        }
    }
}

/// What a device shows: digests and visible rows of every namespace.
enum SimulationState {
    static func snapshot(_ replica: Replica, _ namespaces: [(name: String, kind: NamespaceKind)]) throws -> [String] {
        var lines: [String] = []
        for namespace in namespaces {
            if namespace.kind.isReplicated { lines.append("\(namespace.name) digest \(try replica.digest(of: namespace.name))") }
            switch namespace.kind {
            case .causal: lines += try replica.causal(namespace.name).entries().map { "\(namespace.name) \($0.key)=\($0.value)" }
            case .lww: lines += try replica.lww(namespace.name).entries().map { "\(namespace.name) \($0.key)=\($0.value)" }
            case .appendOnly: lines += try replica.appendOnly(namespace.name).entries().map { "\(namespace.name) \($0.key)=\($0.value)" }
            case .log: lines += try replica.log(namespace.name).live().map { "\(namespace.name) \($0.group) \($0.id)" }
            case .messages:
                lines += try replica.messages(namespace.name).messages().map { row in
                    let reactions = row.shownReactions.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
                    return "\(namespace.name) \(row.message)=\(String(decoding: row.body, as: UTF8.self)) [\(reactions)]"
                }
            case .local: break
            }
        }
        return lines
    }

    static func difference(_ a: [String], _ b: [String]) -> String {
        let onlyA = Set(a).subtracting(b).sorted().prefix(2)
        let onlyB = Set(b).subtracting(a).sorted().prefix(2)
        return "differs: " + (onlyA.map { "-\($0)" } + onlyB.map { "+\($0)" }).joined(separator: ", ")
    }
}

extension Expectation.Status {
    /// The state a device's recovery status names (a stuck device's reason aside).
    init(_ status: RecoveryStatus) {
        switch status {
        case .current: self = .current
        case .behind: self = .behind
        case .rolledBack: self = .rolledBack
        case .recovering: self = .recovering
        case .stuck: self = .stuck
        }
    }
}
