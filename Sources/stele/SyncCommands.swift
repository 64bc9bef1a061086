import Foundation
import Stele
import Synchronization

/// `stele sync` and `stele status` (HUB-API.md "stele as a device").
enum SyncCommands {
    static let syncUsage = "usage: stele sync STORE [--watch] [--timeout DURATION] [--trace] [--keys F] [--hub URL]   (DURATION: 30s, 2m, 500ms; default 30s; --trace: every node event on standard error)"
    static let statusUsage = "usage: stele status STORE [--json] [--keys F] [--hub URL]"

    /// "1 tombstone", "2 tombstones", as the runtime's status says it.
    static func tombstones(_ count: Int) -> String { "\(count) tombstone\(count == 1 ? "" : "s")" }

    /// One pass until in sync with every sibling (exit 0), or until the timeout
    /// (exit 1, saying who is not in sync); with `--watch`, keeps the device
    /// online until SIGINT or SIGTERM.
    static func sync(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--watch", "--trace"], options: ["--timeout", "--keys", "--hub"], usage: syncUsage)
        if parsed.has("--watch"), let timeout = parsed.options["--timeout"] {
            throw UsageError(message: "--timeout \(timeout) ends a one-pass sync; --watch keeps going until stopped (Ctrl-C): give one of them", usage: syncUsage)
        }
        guard parsed.positionals.count == 1 else {
            throw UsageError(message: "expected one store path, got \(parsed.positionals.count) arguments", usage: syncUsage)
        }
        let timeout = try parsed.options["--timeout"].map { text in
            guard let value = seconds(of: text), value > 0 else { throw UsageError(message: "--timeout takes a duration like 30s, 2m or 500ms, not '\(text)'", usage: syncUsage) }
            return value
        } ?? 30
        let files = DeviceFiles(store: parsed.positionals[0], keys: parsed.options["--keys"])
        let replica = try files.replica()
        let client = try files.client(replica, hub: parsed.options["--hub"])
        let runtime: FleetRuntime
        do {
            runtime = try FleetRuntime(replica: replica, keyStore: files.keys, client: client, configuration: configuration())
        } catch let error as FleetRuntimeError {
            throw InputError(message: error.message)
        }
        // Whatever prints beside the runtime ends before the process does: exit()
        // while a thread still writes tears libraries down under it.
        let printers = DispatchGroup()
        defer { _ = printers.wait(timeout: .now() + 5) }
        if parsed.has("--trace") {
            let events = runtime.events()
            let started = DispatchTime.now().uptimeNanoseconds
            printers.enter()
            Task.detached {
                for await event in events {
                    let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
                    FileHandle.standardError.write(Data(String(format: "%9.3f s  %@\n", seconds, event.description).utf8))
                }
                printers.leave()
            }
        }
        // A one-pass sync keeps the troubles it hears, for its message if it times out.
        let heard = HeardTroubles()
        if !parsed.has("--watch") {
            let events = runtime.events()
            printers.enter()
            Task.detached {
                for await event in events { heard.note(event) }
                printers.leave()
            }
        }
        runtime.start()
        if parsed.has("--watch") {
            try watch(runtime, files, printers: printers)
        } else {
            try once(runtime, files, timeoutSeconds: timeout, heard: heard)
        }
    }

    /// What a sibling's frames said was wrong (a namespace it does not advertise, a
    /// generation gap, refused records or seals): a sync that times out names these,
    /// which say more than "not heard agreeing". Each line once, at most eight.
    final class HeardTroubles: Sendable {
        private let lines = Mutex<[String]>([])
        static let kinds: Set<FleetEvent.Kind> = [.undeclaredNamespace, .generationGap, .rejectedRecords, .rejectedSeal, .unknownDevice]

        func note(_ event: FleetEvent) {
            guard Self.kinds.contains(event.kind) else { return }
            lines.withLock { lines in
                if lines.count < 8, !lines.contains(event.description) { lines.append(event.description) }
            }
        }

        var all: [String] { lines.withLock { $0 } }
    }

    /// The runtime's pacing; `STELE_FAST_PACE=1` (the end-to-end tests) makes every
    /// timer short, so a story through real processes takes seconds, not minutes.
    static func configuration() -> FleetRuntime.Configuration {
        ProcessInfo.processInfo.environment["STELE_FAST_PACE"] == "1" ? .quick : FleetRuntime.Configuration()
    }

    private static func once(_ runtime: FleetRuntime, _ files: DeviceFiles, timeoutSeconds: Double, heard: HeardTroubles) throws {
        let done = DispatchSemaphore(value: 0)
        let box = StatusBox(runtime.status)
        let interrupted = Atomic<Bool>(false)
        TerminationSignals.onSignal { _ in
            interrupted.store(true, ordering: .relaxed)
            done.signal()
        }
        Task.detached {
            box.set(await runtime.waitUntilInSync(timeoutSeconds: timeoutSeconds))
            done.signal()
        }
        done.wait()
        let status = box.value
        runtime.stop()
        SavedStatus(status).save(to: files.statusPath)
        if interrupted.load(ordering: .relaxed) {
            printError("stele sync: interrupted before the device was in sync: \(status)")
            throw ExitStatus(code: 1)
        }
        if status.inSync {
            let siblings = max(0, ((try? files.ring())?.roster?.members.count ?? 1) - 1)
            print("in sync\(siblings == 0 ? " (no other device yet)" : " with \(siblings) device\(siblings == 1 ? "" : "s")") · generation \(status.collection.generation) · \(Self.tombstones(status.collection.tombstones.values.reduce(0, +)))")
            return
        }
        if let error = status.error, error.isFatal {
            printError("stele sync: \(error.message)")
        } else {
            printError("stele sync: not in sync after \(format(timeoutSeconds)): \(status)")
            let troubles = heard.all
            if !status.siblingsOutOfSync.isEmpty {
                printError(
                    "  not heard agreeing: \(status.siblingsOutOfSync.map(\.hex).joined(separator: ", "))"
                        + (troubles.isEmpty ? " (are they running stele sync?)" : " (what was heard is below)"))
            }
            for trouble in troubles { printError("  heard: \(trouble)") }
        }
        throw ExitStatus(code: 1)
    }

    private static func watch(_ runtime: FleetRuntime, _ files: DeviceFiles, printers: DispatchGroup) throws {
        // SIGINT and SIGTERM have been blocked since the process began (main.swift): none is lost.
        let stopping = DispatchSemaphore(value: 0)
        TerminationSignals.onSignal { _ in stopping.signal() }
        let terminal = isatty(STDOUT_FILENO) == 1
        let fatal = StatusBox(runtime.status)
        let updates = runtime.statusUpdates()
        let path = files.statusPath
        printers.enter()
        Task.detached {
            defer { printers.leave() }
            var last = ""
            var lastSaved = ""
            for await status in updates {
                let line = status.description
                if line != last {
                    // Straight to the descriptor: a watcher of a pipe sees each line as it comes.
                    FileHandle.standardOutput.write(Data((terminal ? "\r\u{1B}[K\(line)" : "\(line)\n").utf8))
                    last = line
                }
                // Saved for `stele status` whenever what it says changed (the runtime
                // publishes at most every 50 ms).
                if line != lastSaved || status.connection == .stopped {
                    SavedStatus(status).save(to: path)
                    lastSaved = line
                }
                if status.connection == .stopped {
                    fatal.set(status)
                    stopping.signal()
                }
            }
        }
        stopping.wait()
        runtime.stop()
        // The stopped status ends the stream: the printer saves it and finishes.
        _ = printers.wait(timeout: .now() + 5)
        if terminal { print("") }
        if let error = fatal.value.error, error.isFatal {
            printError("stele sync: \(error.message)")
            throw ExitStatus(code: 1)
        }
    }

    private static func format(_ seconds: Double) -> String {
        seconds < 1 ? "\(Int(seconds * 1000))ms" : seconds == seconds.rounded() ? "\(Int(seconds))s" : String(format: "%.1fs", seconds)
    }

    // MARK: - status

    /// The device's account, generation, tombstones, state and who blocks
    /// collection: the store's own facts, the anchor's generation read from the
    /// hub (a device behind it is behind, or rolled back), and what the last
    /// `stele sync` saw of its siblings.
    static func status(_ arguments: [String]) throws {
        let parsed = try ParsedArguments(arguments, flags: ["--json"], options: ["--keys", "--hub"], usage: statusUsage)
        guard parsed.positionals.count == 1 else {
            throw UsageError(message: "expected one store path, got \(parsed.positionals.count) arguments", usage: statusUsage)
        }
        let files = DeviceFiles(store: parsed.positionals[0], keys: parsed.options["--keys"])
        let replica = try files.replica(readOnly: true)
        let ring = try files.ring()
        let hub = try? files.hub(parsed.options["--hub"])
        let tombstones = ((try? replica.tombstoneCounts()) ?? [:]).filter { $0.value > 0 }
        let saved = SavedStatus.load(from: files.statusPath)
        let members = (ring.roster?.members ?? []).subtracting([replica.device]).map(\.hex).sorted()
        // The anchor's generation, if the hub answers quickly.
        var anchorGeneration: UInt64?
        var hubNote: String?
        // The account as the hub sees it: its record history, the tombstone horizon and who holds
        // it back, and every stuck condition (HUB-API status).
        var hubStatus: [String: Any]?
        if let hub {
            let client = HubClient(hub: hub, account: replica.account, identity: ring.identity, timeoutSeconds: 3)
            do {
                let answer = try client.send("GET", "\(client.accountPath)/anchor")
                if answer.status == 200 { anchorGeneration = answer.headers["stele-generation"].flatMap(UInt64.init) }
                if answer.status != 200 && answer.status != 404 { hubNote = "the hub refused: \(answer.status) \(answer.refusal?.code ?? "")" }
                let status = try client.send("GET", "\(client.accountPath)/status")
                if status.status == 200, let object = (try? JSONSerialization.jsonObject(with: Data(status.body))) as? [String: Any] {
                    hubStatus = object.filter { ["epoch", "historyId", "horizon", "horizonHeldBy", "tombstones", "tombstonesCollected", "oldestPendingFrame", "warnings"].contains($0.key) }
                }
            } catch {
                hubNote = "hub unreachable: \(error)"
            }
        }
        var state = saved?.state ?? "current"
        if let anchorGeneration, anchorGeneration > replica.generation, state == "current" { state = "behind" }
        let total = tombstones.values.reduce(0, +)
        let blockedBy = total == 0 ? [] : (saved?.blockedBy ?? members)
        if parsed.has("--json") {
            var object: [String: Any] = [
                "account": replica.account.hex, "device": replica.device.hex, "hub": hub?.absoluteString ?? NSNull(), "generation": replica.generation,
                "tombstones": total, "tombstonesByNamespace": tombstones, "state": state, "blockedBy": blockedBy, "siblings": members,
                "anchorGeneration": anchorGeneration.map { $0 as Any } ?? NSNull(), "member": ring.roster?.members.contains(replica.device) == true,
            ]
            if let saved {
                object["lastSync"] = ["at": Int64(saved.savedAt.timeIntervalSince1970 * 1000), "inSync": saved.inSync, "siblingsOutOfSync": saved.siblingsOutOfSync, "error": saved.error ?? NSNull()]
            }
            if let hubNote { object["hubNote"] = hubNote }
            if let hubStatus { object["hubStatus"] = hubStatus }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        print("account      \(replica.account.hex)")
        print("device       \(replica.device.hex)")
        print("hub          \(hub?.absoluteString ?? "none set")\(hubNote.map { " (\($0))" } ?? "")")
        print("state        \(state)")
        print("generation   \(replica.generation)\(anchorGeneration.map { " (anchor on the hub: \($0))" } ?? "")")
        print("tombstones   \(total)\(tombstones.isEmpty ? "" : " (" + tombstones.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")")")
        print("siblings     \(members.isEmpty ? "none" : members.map { String($0.prefix(16)) }.joined(separator: ", "))")
        if !blockedBy.isEmpty { print("blocked by   \(blockedBy.map { String($0.prefix(16)) }.joined(separator: ", ")) (collection waits to hear them agree)") }
        if let saved {
            print("last sync    \(ISO8601DateFormatter().string(from: saved.savedAt)): \(saved.inSync ? "in sync" : saved.connection)\(saved.error.map { " · \($0)" } ?? "")")
        } else {
            print("last sync    never (run stele sync \(files.store))")
        }
        if let hubStatus {
            let number = { (key: String) in (hubStatus[key] as? NSNumber)?.int64Value ?? 0 }
            print("hub history  epoch \(hubStatus["epoch"] as? String ?? "?"), history id \(number("historyId")), \(Self.tombstones(Int(number("tombstones")))) kept, \(number("tombstonesCollected")) collected")
            if let holder = hubStatus["horizonHeldBy"] as? [String: Any], let device = holder["device"] as? String {
                let since = (holder["since"] as? NSNumber).map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: $0.doubleValue / 1000)) }.map { "last pulled \($0)" } ?? "never pulled"
                print("hub horizon  \(number("horizon")), held by \(device.prefix(16))\((holder["name"] as? String).map { " (\($0))" } ?? "") at cursor \((holder["cursor"] as? NSNumber)?.int64Value ?? 0), \(since)")
            }
            for warning in hubStatus["warnings"] as? [String] ?? [] { print("hub warns    \(warning)") }
        }
    }
}

/// A status handed from the waiting task to the main thread.
final class StatusBox: Sendable {
    private let state: Mutex<FleetRuntimeStatus>
    init(_ initial: FleetRuntimeStatus) { state = Mutex(initial) }
    func set(_ status: FleetRuntimeStatus) { state.withLock { $0 = status } }
    var value: FleetRuntimeStatus { state.withLock { $0 } }
}
