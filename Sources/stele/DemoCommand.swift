import Foundation
import SteleSimulator

/// `stele demo`: the narrated story of ``DemoStory``. Exits 1 if the oracle
/// found a resurrection or a lost write. `stele demo --hub`: ``HubDemo``, with
/// real processes.
enum DemoCommand {
    static let usage = "usage: stele demo [--seed N] [--keep DIR] | stele demo --hub   (--keep: the devices' stores for stele inspect; --hub: the same kind of story with a real hub and device processes)"

    static func run(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--hub"], options: ["--seed", "--keep"], usage: usage)
        guard parsed.positionals.isEmpty else { throw UsageError(message: "demo takes no arguments", usage: usage) }
        if parsed.has("--hub") {
            guard parsed.options["--seed"] == nil, parsed.options["--keep"] == nil else {
                throw UsageError(message: "--seed and --keep are for the simulated story; --hub runs real processes", usage: usage)
            }
            var demo = try HubDemo(say: { line in
                print(line)
                fflush(nil)
            })
            guard try demo.tell() else { throw ExitStatus(code: 1) }
            return
        }
        var seed: UInt64 = 2_026
        if let text = parsed.options["--seed"] {
            guard let value = UInt64(text) else { throw UsageError(message: "--seed needs a whole number, got \(text)", usage: usage) }
            seed = value
        }
        let keep = parsed.options["--keep"]
        if let keep {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: keep, isDirectory: &isFolder), !isFolder.boolValue {
                throw InputError(message: "--keep \(keep): that is a file; name a folder (it is made if missing)")
            }
            // Never over what is there: a store of the same name may be someone's data.
            for name in ["phone", "laptop", "tablet"] {
                let path = (keep as NSString).appendingPathComponent("\(name).stele")
                for suffix in ["", "-wal", "-shm", ".keys-floor"] where FileManager.default.fileExists(atPath: path + suffix) {
                    throw InputError(message: "--keep \(keep) already holds \(name).stele\(suffix); the demo writes over nothing: name an empty or new folder")
                }
            }
            // Made now, so a folder that cannot be made fails before the story, not after it.
            do {
                try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
            } catch {
                throw InputError(message: "--keep \(keep): cannot make that folder (check the path and its permissions)")
            }
            guard FileManager.default.isWritableFile(atPath: keep) else {
                throw InputError(message: "--keep \(keep): the folder is not writable; name one you can write to")
            }
        }
        guard
            try DemoStory(
                seed: seed, keep: keep,
                say: { line in
                    print(line)
                    fflush(nil)
                }
            ).tell()
        else {
            throw InputError(message: "the oracle found a broken guarantee; report this run with its seed \(seed)")
        }
    }
}
