import Foundation
import Stele
import SteleSimulator

/// The `stele` command line (DESIGN §10): thin; it parses, calls the libraries, prints.
struct Command {
    let name: String
    let summary: String
    let usage: String
    /// What `stele COMMAND --help` prints: the usage, and more where a command has more to say.
    var help: String?
    let run: ([String]) throws -> Void
}

@MainActor
func main() -> Int32 {
    let commands = [
        Command(name: "demo", summary: "a narrated story: three devices, an offline week, a restore from backup", usage: DemoCommand.usage, run: DemoCommand.run),
        Command(name: "scenario", summary: "run scenario files (docs/scenarios.md) in the simulator", usage: ScenarioCommand.usage, help: ScenarioCommand.help, run: ScenarioCommand.run),
        Command(name: "simulate", summary: "randomized fleets with faults, checked by the oracle; a failure names its seed", usage: SimulateCommand.usage, run: SimulateCommand.run),
        Command(name: "inspect", summary: "show a store's account, device, generation and namespaces (read-only)", usage: InspectCommand.usage, run: InspectCommand.run),
        Command(name: "pending", summary: "list a mirror store's queue of local intent: state, attempts, last error", usage: PendingCommand.usage, run: PendingCommand.run),
        Command(name: "ledger", summary: "show a ledger client's stamps, cursor, store identity, and whether sync is halted and why", usage: LedgerCommand.usage, run: LedgerCommand.run),
        Command(name: "bench", summary: "run the benchmark suite: figures as ratios to baselines run alongside", usage: BenchCommand.usage, run: BenchCommand.run),
        Command(name: "init", summary: "found an account on a hub with a new device", usage: DeviceCommands.initUsage, run: DeviceCommands.initialize),
        Command(name: "join", summary: "set up a new device and ask to join an account", usage: DeviceCommands.joinUsage, run: DeviceCommands.join),
        Command(name: "approve", summary: "approve a device that asked to join (compare its fingerprint)", usage: DeviceCommands.approveUsage, run: DeviceCommands.approve),
        Command(name: "revoke", summary: "take a device off the account and rotate the account key", usage: DeviceCommands.revokeUsage, run: DeviceCommands.revoke),
        Command(name: "sync", summary: "sync with the account's other devices through the hub (--watch: keep going)", usage: SyncCommands.syncUsage, run: SyncCommands.sync),
        Command(name: "status", summary: "generation, tombstones, state and who blocks collection", usage: SyncCommands.statusUsage, run: SyncCommands.status),
        Command(name: "namespace", summary: "declare a namespace in a store", usage: StoreCommands.namespaceUsage, run: StoreCommands.namespace),
        Command(name: "put", summary: "write a value in a store", usage: StoreCommands.putUsage, run: StoreCommands.put),
        Command(name: "get", summary: "read a value from a store (exit 1 when absent)", usage: StoreCommands.getUsage, run: StoreCommands.get),
        Command(name: "delete", summary: "delete a key in a store", usage: StoreCommands.deleteUsage, run: StoreCommands.delete),
        Command(name: "ls", summary: "list a namespace's live rows", usage: StoreCommands.lsUsage, run: StoreCommands.ls),
    ]
    let generalUsage = """
        usage: stele COMMAND [ARGUMENTS]

        commands:
        \(commands.map { "  " + $0.name.padding(toLength: 11, withPad: " ", startingAt: 0) + $0.summary }.joined(separator: "\n"))

        Run 'stele help COMMAND' (or 'stele COMMAND --help') for a command's arguments;
        'stele --version' for this build's version.
        """

    var arguments = Array(CommandLine.arguments.dropFirst())
    // First, before any thread starts: `sync` takes SIGINT and SIGTERM itself, and so does
    // `demo --hub`, which stops its processes and removes its folder when interrupted.
    // Every other command ends on them as any process does, even when started by a
    // process that had them blocked (`stele demo --hub` starts `stele put`, say).
    if arguments.first == "sync" || (arguments.first == "demo" && arguments.contains("--hub")) {
        TerminationSignals.block()
    } else {
        TerminationSignals.unblock()
    }
    guard let name = arguments.first else {
        printError(generalUsage)
        return 2
    }
    arguments.removeFirst()
    if ["--version", "version"].contains(name) {
        print("stele \(SteleVersion.current)")
        return 0
    }
    if ["help", "--help", "-h"].contains(name) {
        // `stele help COMMAND`: that command's help, as `stele COMMAND --help` gives it.
        if name == "help", let topic = arguments.first {
            guard let command = commands.first(where: { $0.name == topic }) else {
                printError("stele help: unknown command '\(topic)'" + Spelling.hint(topic, in: commands.map(\.name)) + "\n\n" + generalUsage)
                return 2
            }
            print(command.help ?? command.usage)
            return 0
        }
        print(generalUsage)
        return 0
    }
    guard let command = commands.first(where: { $0.name == name }) else {
        var message = "stele: unknown command '\(name)'"
        message += Spelling.hint(name, in: commands.map(\.name))
        printError(message + "\n\n" + generalUsage)
        return 2
    }
    if arguments.contains("--help") || arguments.contains("-h") {
        print(command.help ?? command.usage)
        return 0
    }
    do {
        try command.run(arguments)
        return 0
    } catch let error as UsageError {
        printError("stele \(name): \(error.message)\n\(error.usage)")
        return 2
    } catch let error as InputError {
        printError("stele \(name): \(error.message)")
        return 2
    } catch let status as ExitStatus {
        return status.code
    } catch {
        printError("stele \(name): \(error)")
        return 1
    }
}

let status = main()
if CommandLine.arguments.dropFirst().first == "sync" {
    // A sync's runtime is stopped and its status saved, but URLSession's threads may
    // still be finishing a request: exit()'s teardown of libcrypto and Foundation
    // under them can crash. Flush, then leave without that teardown.
    fflush(nil)
    _exit(status)
}
exit(status)
