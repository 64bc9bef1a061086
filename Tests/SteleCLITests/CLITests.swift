import Foundation
import SteleBench
import SteleSQL
import SteleSimulator
import Testing
import TestSupport
@testable import Stele

/// The `stele` command line, run end to end as a subprocess.
@Suite struct CLITests {
    struct Run {
        let status: Int32
        let output: String
        let error: String
    }

    /// The built `stele` binary: beside the test bundle in the build directory.
    static var binary: URL {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("stele")
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/stele")
    }

    static func stele(_ arguments: String...) throws -> Run { try stele(arguments) }

    static func stele(_ arguments: [String]) throws -> Run {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, output: String(decoding: outputData, as: UTF8.self), error: String(decoding: errorData, as: UTF8.self))
    }

    /// A store with one namespace of each replicated kind and some deletes.
    static func makeStore(_ path: String) throws -> Replica {
        let replica = try Replica.create(at: path, account: Fixtures.account(), device: Fixtures.device(1))
        let notes = try replica.causal("notes")
        try notes.put("a", "1".bytes)
        try notes.put("b", "2".bytes)
        try notes.delete("a")
        try replica.log("memory").append(group: "c1", body: "hi".bytes)
        try replica.lww("flags").put("x", [1])
        return replica
    }

    @Test func inspectShowsIdentityGenerationAndNamespaces() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        _ = try Self.makeStore(path)
        let before = fileBytes(path)
        let beside = [path + "-wal", path + "-shm"]
        #expect(beside.allSatisfy { !FileManager.default.fileExists(atPath: $0) }, "the store was left open")
        let run = try Self.stele("inspect", path)
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.contains(Fixtures.account().hex))
        #expect(run.output.contains(Fixtures.device(1).hex))
        #expect(Self.row("generation", in: run.output) == "0")
        #expect(Self.row("last collection", in: run.output) == "never")
        #expect(Self.row("acked round", in: run.output) == "none")
        let notesLine = try #require(run.output.split(separator: "\n").first { $0.hasPrefix("notes") })
        #expect(notesLine.split(separator: " ").map(String.init).prefix(4) == ["notes", "causal", "1", "1"])
        #expect(fileBytes(path) == before)
        // Reading leaves nothing beside the store that was not there.
        #expect(beside.allSatisfy { !FileManager.default.fileExists(atPath: $0) }, "inspect left the WAL files behind")
    }

    @Test func inspectListsTheLiveKeysOfANamespace() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        do {
            let replica = try Self.makeStore(path)
            try replica.messages("chat").post("m1", body: "hello".bytes, author: "ana")
        }
        let before = fileBytes(path)
        let notes = try Self.stele("inspect", path, "--keys", "notes")
        #expect(notes.status == 0, "\(notes.error)")
        // b is live; a was deleted.
        #expect(Self.row("b", in: notes.output) == "1 bytes")
        #expect(Self.row("a", in: notes.output) == nil)
        let memory = try Self.stele("inspect", path, "--keys", "memory")
        #expect(memory.output.contains("group c1, 2 bytes"), "\(memory.output)")
        let chat = try Self.stele("inspect", path, "--keys", "chat", "--json")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(chat.output.utf8)) as? [[String: Any]])
        #expect(entries.map { $0["key"] as? String } == ["m1"])
        #expect(entries.first?["detail"] as? String == "by ana, 5 bytes")
        let typo = try Self.stele("inspect", path, "--keys", "ntoes")
        #expect(typo.status == 2)
        #expect(typo.error.contains("declares no namespace ntoes") && typo.error.contains("did you mean 'notes'?"), "\(typo.error)")
        #expect(try Self.stele("inspect", path, "--keys").status == 2)
        #expect(fileBytes(path) == before)
    }

    /// The value column of the table row named `key`.
    static func row(_ key: String, in output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(key + " ") }.map { String($0.dropFirst(key.count)).trimmingCharacters(in: .whitespaces) }
    }

    @Test func inspectShowsTheLastCollectionAndTheAckedRound() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        do {
            let replica = try Self.makeStore(path)
            var generator = SeededGenerator(seed: 3)
            let round = RoundNonce.generate(using: &generator)
            let digest = try replica.contentDigest()
            try replica.recordAck(round: round, digest: digest, generation: 1)
            #expect(try replica.commit(round: round, digest: digest, generation: 1) == .collected(1))
        }
        let run = try Self.stele("inspect", path)
        #expect(run.status == 0, "\(run.error)")
        #expect(Self.row("generation", in: run.output) == "1")
        #expect(Self.row("last collection", in: run.output)?.hasSuffix("(1 tombstones dropped)") == true)
        #expect(Self.row("acked round", in: run.output)?.hasSuffix("(to generation 1)") == true)
        let json = try Self.stele("inspect", path, "--json")
        let report = try JSONDecoder().decode(StoreReport.self, from: Data(json.output.utf8))
        #expect(report.lastCollectionCount == 1)
        #expect(report.lastCollectionMilliseconds != nil)
        #expect(report.ackedGeneration == 1)
        #expect(report.namespaces.allSatisfy { $0.tombstones == 0 })
    }

    @Test func inspectJSONIsMachineReadable() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("device.stele")
        _ = try Self.makeStore(path)
        let run = try Self.stele("inspect", path, "--json")
        #expect(run.status == 0, "\(run.error)")
        let report = try JSONDecoder().decode(StoreReport.self, from: Data(run.output.utf8))
        #expect(report.account == Fixtures.account().hex)
        #expect(report.generation == 0)
        let byName = Dictionary(uniqueKeysWithValues: report.namespaces.map { ($0.name, $0) })
        #expect(byName["notes"]?.live == 1)
        #expect(byName["notes"]?.tombstones == 1)
        #expect(byName["memory"]?.kind == "log")
        #expect(byName["flags"]?.kind == "lww")
        #expect((byName["notes"]?.bytes ?? 0) > 0)
    }

    @Test func inspectOfAMissingStoreIsAOneLineErrorWithStatus2() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("nope.stele")
        let run = try Self.stele("inspect", path)
        #expect(run.status == 2)
        #expect(run.error.contains("no Stele store at \(path)"))
        #expect(run.error.split(separator: "\n").count == 1)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func inspectOfAFolderSaysItIsAFolder() throws {
        let directory = try TemporaryDirectory()
        let run = try Self.stele("inspect", directory.path)
        #expect(run.status == 2)
        #expect(run.error.contains("\(directory.path) is a folder, not a Stele store"), "\(run.error)")
        #expect(run.error.split(separator: "\n").count == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test func inspectOfAForeignFileIsRefusedAndTheFileIsUntouched() throws {
        let directory = try TemporaryDirectory()
        let sqlitePath = directory.file("other.db")
        do {
            let other = try Connection(path: sqlitePath, configuration: Connection.Configuration(journalMode: "DELETE"))
            try other.executeScript("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
        }
        let textPath = directory.file("notes.txt")
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: textPath))
        for path in [sqlitePath, textPath] {
            let before = fileBytes(path)
            let run = try Self.stele("inspect", path)
            #expect(run.status == 2)
            #expect(run.error.contains("is not a Stele store"), "\(run.error)")
            #expect(run.error.split(separator: "\n").count == 1)
            #expect(fileBytes(path) == before)
        }
    }

    @Test func usageErrorsExitWith2AndSuggestTheFix() throws {
        let typo = try Self.stele("inspect", "x.stele", "--jsn")
        #expect(typo.status == 2)
        #expect(typo.error.contains("unknown option '--jsn'; did you mean '--json'?"))
        #expect(typo.error.contains("usage: stele inspect"))

        let missing = try Self.stele("inspect")
        #expect(missing.status == 2)
        #expect(missing.error.contains("usage: stele inspect"))

        let command = try Self.stele("inspekt", "x")
        #expect(command.status == 2)
        #expect(command.error.contains("did you mean 'inspect'?"))

        let none = try Self.stele()
        #expect(none.status == 2)
        #expect(none.error.contains("usage: stele COMMAND"))

        let bench = try Self.stele("bench", "local.pot")
        #expect(bench.status == 2)
        #expect(bench.error.contains("did you mean 'local.put'?"))
    }

    @Test func helpExitsWith0() throws {
        let general = try Self.stele("--help")
        #expect(general.status == 0)
        #expect(general.output.contains("inspect"))
        let inspect = try Self.stele("inspect", "--help")
        #expect(inspect.status == 0)
        #expect(inspect.output.contains("usage: stele inspect STORE [--json]"))
        // `stele help COMMAND` gives what `stele COMMAND --help` gives; a typo is a usage error.
        let helpInspect = try Self.stele("help", "inspect")
        #expect(helpInspect.status == 0)
        #expect(helpInspect.output == inspect.output)
        #expect(try Self.stele("help", "sync").output == (try Self.stele("sync", "--help")).output)
        // The version, as a newcomer filing a bug is asked for it.
        for spelling in ["--version", "version"] {
            let version = try Self.stele(spelling)
            #expect(version.status == 0 && version.output == "stele \(SteleVersion.current)\n", "\(spelling): \(version.output)")
        }
        #expect(general.output.contains("stele --version"))
        let typo = try Self.stele("help", "snyc")
        #expect(typo.status == 2)
        #expect(typo.error.contains("unknown command 'snyc'; did you mean") && typo.error.contains("'sync'"), "\(typo.error)")
    }

    /// `stele scenario --help` lists every statement form of the grammar, one a line.
    @Test func scenarioHelpListsEveryStatementForm() throws {
        let help = try Self.stele("scenario", "--help")
        #expect(help.status == 0)
        #expect(help.output.hasPrefix("usage: stele scenario FILE..."))
        let lines = Set(help.output.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        let forms = ScenarioGrammar.usage.split(separator: "\n").map(String.init)
        #expect(forms.count >= 60)
        for form in forms { #expect(lines.contains(form), "\(form)") }
        // A usage error still prints the one-line usage, not the whole grammar.
        let none = try Self.stele("scenario")
        #expect(none.status == 2)
        #expect(!none.error.contains("D put NS KEY VALUE"))
    }

    @Test func demoTellsItsStoryAndEndsWithACleanVerdict() throws {
        let run = try Self.stele("demo")
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.contains("tablet shows old-plan=(deleted)"))
        #expect(run.output.contains("every device shows groceries=\"milk, eggs\""))
        #expect(run.output.contains("phone shows packing=\"passport\""))
        #expect(run.output.contains("counts 0 resurrections and 0 lost writes"))
        // The week is seen to pass, and the story ends with what to try next.
        #expect((1...7).allSatisfy { run.output.contains("day \($0) of 7 in the drawer") })
        #expect(run.output.contains("Next: stele demo --hub"))
        #expect(try Self.stele("demo", "--seed", "x").status == 2)
        #expect(try Self.stele("demo", "--hub", "--keep", "somewhere").status == 2)

        // --keep leaves the three stores for stele inspect.
        let directory = try TemporaryDirectory()
        let folder = directory.file("stores")
        let kept = try Self.stele("demo", "--keep", folder)
        #expect(kept.status == 0, "\(kept.error)")
        #expect(kept.output.contains("stele inspect \(folder)/phone.stele"))
        let inspect = try Self.stele("inspect", folder + "/tablet.stele")
        #expect(inspect.status == 0, "\(inspect.error)")
        #expect(inspect.output.contains("packing") || inspect.output.contains("notes"), "\(inspect.output)")
        // A file where the folder should be is refused before the story runs.
        let file = directory.file("a-file")
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        let refused = try Self.stele("demo", "--keep", file)
        #expect(refused.status == 2 && refused.error.contains("that is a file"), "\(refused.error)")
        // Never over stores that are there: a second --keep into the same folder is refused and changes nothing.
        let before = try Data(contentsOf: URL(fileURLWithPath: folder + "/phone.stele"))
        let again = try Self.stele("demo", "--keep", folder)
        #expect(again.status == 2 && again.error.contains("already holds phone.stele"), "\(again.error)")
        #expect(!again.output.contains("Verdict"), "the story ran before the refusal")
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/phone.stele")) == before)
    }

    /// The suite's JSON shape and fixed names (speed itself is never asserted).
    @Test func benchJSONListsEveryFigureByItsFixedName() throws {
        let run = try Self.stele("bench", "--quick", "--json")
        #expect(run.status == 0, "\(run.error)")
        // The tests run a debug build: it says its figures compare with nothing.
        #expect(run.error.contains("this is a debug build; its figures are not comparable"), "\(run.error)")
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [[String: Any]])
        let names = figures.compactMap { $0["name"] as? String }
        #expect(names == BenchmarkSuite.figureNames)
        // The names the issues fix, which tools read.
        for name in ["local.put", "local.delete", "local.tombstone_bytes", "sync.digest_overhead"] { #expect(names.contains(name)) }
        for figure in figures {
            #expect(figure["value"] is Double)
            #expect(figure["unit"] is String)
        }
        let put = try #require(figures.first { $0["name"] as? String == "local.put" })
        let value = try #require(put["value"] as? Double)
        let baseline = try #require(put["baseline"] as? Double)
        let ratio = try #require(put["ratio"] as? Double)
        #expect(abs(ratio - value / baseline) < 1e-9)
        #expect(figures.first { $0["name"] as? String == "local.tombstone_bytes" }?["baseline"] == nil)
    }

    // MARK: - scenario and simulate

    static func scenarioFile(_ directory: TemporaryDirectory, _ name: String, _ text: String) throws -> String {
        let path = directory.file(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func scenarioPassesAndFailsWithTheLineAndSeed() throws {
        let directory = try TemporaryDirectory()
        let good = try Self.scenarioFile(directory, "good.scenario", "fleet a b\nnamespace n causal\na put n k \"1\"\nsync\nexpect all n k = \"1\"\n")
        let bad = try Self.scenarioFile(directory, "bad.scenario", "fleet a b\nnamespace n causal\na put n k \"1\"\nsync\nexpect b n k absent\n")
        let pass = try Self.stele("scenario", good)
        #expect(pass.status == 0, "\(pass.error)")
        #expect(pass.output.contains("PASS \(good) (5 statements, seed 0)"))

        let fail = try Self.stele("scenario", good, bad, "--seed", "9")
        #expect(fail.status == 1)
        #expect(fail.output.contains("PASS \(good)"))
        #expect(fail.error.contains("FAIL \(bad):5: expect b n k absent"), "\(fail.error)")
        #expect(fail.error.contains("expected: b reads k as absent"))
        #expect(fail.error.contains("found:    b reads \"1\""))
        #expect(fail.error.contains("seed:     9"))
    }

    @Test func aScenarioTypoIsReportedBeforeAnyFileRuns() throws {
        let directory = try TemporaryDirectory()
        let good = try Self.scenarioFile(directory, "good.scenario", "fleet a b\nsync\n")
        let typo = try Self.scenarioFile(directory, "typo.scenario", "fleet a b\n\nsnyc\n")
        let run = try Self.stele("scenario", good, typo)
        #expect(run.status == 2)
        #expect(!run.output.contains("PASS"))
        #expect(run.error.contains("\(typo):3: unknown statement snyc; did you mean 'sync'?"), "\(run.error)")

        let missing = try Self.stele("scenario", directory.file("nowhere.scenario"))
        #expect(missing.status == 2)
        #expect(missing.error.contains("cannot read"))
        #expect(try Self.stele("scenario").status == 2)
        #expect(try Self.stele("scenario", good, "--seed", "-1").status == 2)
    }

    @Test func scenarioTracesWithoutHeartbeatsAndFiltersByDeviceAndKind() throws {
        let directory = try TemporaryDirectory()
        let file = try Self.scenarioFile(directory, "trace.scenario", "fleet a b\nnamespace n causal\na put n k \"1\"\nsync\nadvance 90s\nexpect all n k = \"1\"\n")
        let lines = { (run: Run) in run.output.split(separator: "\n").filter { $0.contains(" s  ") } }
        let all = try Self.stele("scenario", file, "--trace-all")
        #expect(all.status == 0, "\(all.error)")
        #expect(lines(all).contains { $0.contains(" inSync") }, "the periodic advertisements should show: \(all.output)")
        let trace = try Self.stele("scenario", file, "--trace")
        #expect(trace.status == 0)
        #expect(!lines(trace).isEmpty && !lines(trace).contains { $0.contains(" inSync") }, "\(trace.output)")
        #expect(lines(trace).count < lines(all).count)
        let onlyB = try Self.stele("scenario", file, "--trace-all", "--trace-device", "b")
        #expect(!lines(onlyB).isEmpty && lines(onlyB).allSatisfy { $0.contains("  b  ") }, "\(onlyB.output)")
        let sessions = try Self.stele("scenario", file, "--trace-kind", "sessionStarted")
        #expect(!lines(sessions).isEmpty && lines(sessions).allSatisfy { $0.contains("  sessionStarted") }, "\(sessions.output)")
        let nobody = try Self.stele("scenario", file, "--trace-device", "zed")
        #expect(nobody.status == 0 && lines(nobody).isEmpty)
        #expect(nobody.error.contains("has no device of that name"), "\(nobody.error)")
        let typo = try Self.stele("scenario", file, "--trace-kind", "sessionStrated")
        #expect(typo.status == 2)
        #expect(typo.error.contains("did you mean"), "\(typo.error)")
    }

    @Test func simulateSummarizesAndReplaysASeed() throws {
        let directory = try TemporaryDirectory()
        let report = directory.file("timeline.svg")
        let transcript = directory.file("run.scenario")
        let run = try Self.stele("simulate", "--seed", "3", "--steps", "40", "--devices", "3", "--report", report, "--scenario", transcript)
        #expect(run.status == 0, "\(run.error)")
        for label in ["runs", "operations", "frames", "wall time", "faults", "resurrections       0", "lost writes         0", "convergence", "tombstones left", "failures            none"] {
            #expect(run.output.contains(label), "\(label) missing: \(run.output)")
        }
        // The run's transcript replays as a scenario under the same seed.
        #expect(run.output.contains("stele scenario \(transcript) --seed 3"))
        let replay = try Self.stele("scenario", transcript, "--seed", "3")
        #expect(replay.status == 0, "\(replay.error)")
        let svg = try String(contentsOfFile: report, encoding: .utf8)
        #expect(svg.hasPrefix("<svg"))
        #expect(svg.contains("d0"))
        #expect(svg.contains("virtual time") && svg.contains("none once revoked"), "the axis and the whole legend")

        let json = try Self.stele("simulate", "--seed", "3", "--steps", "40", "--json")
        let again = try Self.stele("simulate", "--seed", "3", "--steps", "40", "--json")
        #expect(json.status == 0)
        // Everything but the wall time is the same for the same seed.
        let timeless = { (output: String) in output.split(separator: "\n").filter { !$0.contains("\"wallSeconds\"") } }
        #expect(timeless(json.output) == timeless(again.output), "the same seed ran differently")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        #expect(summary["runs"] as? Int == 1)
        // What the run did and how long it took, for throughput: simulated writes per wall second.
        #expect((summary["operations"] as? Int ?? 0) > 0)
        #expect((summary["wallSeconds"] as? Double ?? 0) > 0)
        #expect(summary["resurrections"] as? Int == 0)
        // The SHA-256 of every frame delivered: equal for the same seed, different for another.
        let digest = try #require(summary["wireDigest"] as? String)
        #expect(digest.count == 64 && digest.allSatisfy(\.isHexDigit))
        let other = try Self.stele("simulate", "--seed", "4", "--steps", "40", "--json")
        let otherSummary = try #require(try JSONSerialization.jsonObject(with: Data(other.output.utf8)) as? [String: Any])
        #expect(otherSummary["wireDigest"] as? String != digest)

        // Runs at once on several threads are the runs made one by one, in seed order.
        let alone = try Self.stele("simulate", "--seed", "3", "--seeds", "4", "--steps", "40", "--jobs", "1", "--json")
        let together = try Self.stele("simulate", "--seed", "3", "--seeds", "4", "--steps", "40", "--jobs", "3", "--json")
        #expect(alone.status == 0 && together.status == 0, "\(together.error)")
        #expect(timeless(alone.output) == timeless(together.output), "--jobs changed what the runs did")
        let four = try #require(try JSONSerialization.jsonObject(with: Data(together.output.utf8)) as? [String: Any])
        #expect(four["runs"] as? Int == 4)
    }

    @Test func simulateRefusesNonsenseWithUsageAndStatus2() throws {
        for arguments in [
            ["--seeds", "0"], ["--seeds", "many"], ["--jobs", "0"], ["--jobs", "all"], ["--devices", "-3"], ["--steps", "1e3"], ["--faults", "loss,flood"], ["--seed"],
            ["--sed", "4"], ["extra.scenario"],
        ] {
            let run = try Self.stele(["simulate"] + arguments)
            #expect(run.status == 2, "\(arguments)")
            #expect(run.error.contains("usage: stele simulate"), "\(arguments): \(run.error)")
        }
        let typo = try Self.stele("simulate", "--faults", "los")
        #expect(typo.error.contains("unknown fault 'los'; did you mean 'loss'?"))
        // Spaces around the names, as typed inside a shell's quotes, are no part of them.
        let spaced = try Self.stele("simulate", "--faults", " loss, dup ", "--steps", "20", "--json")
        #expect(spaced.status == 0, "\(spaced.error)")
        #expect(try Self.stele("simulate", "--faults", "loss, ", "--steps", "20").error.contains("names no fault"))
        // Said before any run: hub faults without a hub, an empty list, files that cannot be written.
        let directory = try TemporaryDirectory()
        for (arguments, message) in [
            (["--faults", "hub,crash"], "needs a hub"), (["--faults", ""], "names no fault"), (["--faults", "loss,"], "names no fault"),
            (["--report", directory.path], "is a folder"), (["--scenario", directory.file("no/such/folder/x.scenario")], "does not exist"),
        ] {
            let started = Date()
            let run = try Self.stele(["simulate", "--steps", "3000", "--seeds", "50"] + arguments)
            #expect(run.status == 2, "\(arguments)")
            #expect(run.error.contains(message), "\(arguments): \(run.error)")
            #expect(Date().timeIntervalSince(started) < 10, "\(arguments): the runs went first")
        }
    }
}
