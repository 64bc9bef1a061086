import Stele

/// The scenario statements that change the world, carried out on a simulation:
/// `ScenarioRunner` runs a file's lines through it, `SimulationRun` the
/// statements it draws, so a run's transcript is the program it ran.
extension Simulation {
    /// Carries out `statement`. Writes, `sync` and `expect` are the caller's:
    /// what a refused write or an unsettled fleet means differs between a
    /// scenario (a failure) and a randomized run (part of the story).
    /// - Throws: what the simulation throws, or ``SimulationInputError`` for a
    ///   statement that is the caller's, a restore from a backup never taken, a
    ///   device never added, or network conditions out of range.
    func apply(_ statement: Statement) throws {
        switch statement {
        case .fleet(let names):
            for name in names { try addDevice(name) }
        case let .namespace(name, kind):
            try declare(name, kind)
        case .join(let name):
            try addDevice(name)
        case .revoke(let name):
            try revoke(name)
        case let .contact(name, devices):
            try addContact(name, devices: devices)
        case let .conversation(namespace, contact):
            try addConversation(namespace, with: contact)
        case .offline(let names):
            for name in names { try setOnline(name, false) }
        case .online(let names):
            for name in names { try setOnline(name, true) }
        case let .partition(left, right):
            try partition([left, right])
        case .heal:
            heal()
        case .networkLoss(let percent):
            network = try VirtualNetwork.Conditions(delayMilliseconds: network.delayMilliseconds, lossPercent: percent, duplicatePercent: network.duplicatePercent)
        case .networkDuplicate(let percent):
            network = try VirtualNetwork.Conditions(delayMilliseconds: network.delayMilliseconds, lossPercent: network.lossPercent, duplicatePercent: percent)
        case let .networkDelay(low, high):
            guard low <= high else { throw SimulationInputError(message: "the network delay's minimum (\(low) ms) is above its maximum (\(high) ms)") }
            network = try VirtualNetwork.Conditions(delayMilliseconds: low...high, lossPercent: network.lossPercent, duplicatePercent: network.duplicatePercent)
        case .advance(let milliseconds):
            advance(byMilliseconds: milliseconds)
        case .gc(let allowed):
            setCollection(allowed)
        case let .backup(device, label):
            try backup(device, as: label)
        case let .restore(device, label, withKeys):
            try restore(device, from: label, withKeys: withKeys)
        case .crash(let name):
            try crash(name)
        case .anchor(.down):
            anchorSubstrate.isDown = true
        case .anchor(.up):
            anchorSubstrate.isDown = false
        case .anchor(.heal):
            anchorSubstrate.isDown = false
            anchorSubstrate.failNextWrite = false
            anchorSubstrate.delayNextWriteMilliseconds = nil
        case .anchor(.failNextWrite):
            anchorSubstrate.failNextWrite = true
        case .anchor(.delayNextWrite(let milliseconds)):
            anchorSubstrate.delayNextWriteMilliseconds = milliseconds
        case .anchor(.backup(let label)):
            anchorBackups[label] = .some(anchors.bytes(of: account))
        case .anchor(.restore(let label)):
            guard let kept = anchorBackups[label] else { throw SimulationInputError(message: "no anchor backup named \(label); take one with anchor backup as \(label)") }
            if let kept { anchors.replace(kept, of: account) } else { anchors.remove(of: account) }
        case let .skew(device, milliseconds):
            try skew(device, byMilliseconds: milliseconds)
        case let .storageFault(device, fault, after):
            try failStorage(device, with: fault, afterSteps: after)
        case .hub(.start):
            try startHub()
        case .hub(let statement):
            guard let hub else { throw SimulationInputError(message: "no hub; start it with hub") }
            try hub.apply(statement)
        case .operation, .sync, .expect:
            throw SimulationInputError(message: "\(statement) is carried out by the scenario or run that holds it")
        }
    }
}
