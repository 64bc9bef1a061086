import Foundation
import Stele
import SteleSQL
import SteleSimulator

/// `stele namespace|put|get|delete|ls STORE ...`: reads and writes on a device's
/// store, as HUB-API.md's `stele` section gives them. Each opens the store, does
/// one thing and closes it; a `stele sync --watch` (or any other handle) running
/// on the same store picks the write up at its next advertisement. The stamp
/// floor is kept in the key store beside the store (`STORE.keys-floor`) unless
/// `--keys F` names the key ring, so a restored store never reissues a stamp.
enum StoreCommands {
    static let namespaceUsage = "usage: stele namespace STORE NS KIND [--keys F]   (KIND: causal, lww, log, appendOnly, messages, local)"
    static let putUsage = "usage: stele put STORE NS KEY VALUE [--keys F]"
    static let getUsage = "usage: stele get STORE NS KEY [--keys F]   (exits 1, printing nothing, when KEY is absent)"
    static let deleteUsage = "usage: stele delete STORE NS KEY [--keys F]"
    static let lsUsage = "usage: stele ls STORE NS [--keys F] [--json]"

    static func namespace(_ arguments: [String]) throws {
        let (parsed, replica) = try open(arguments, count: 3, usage: namespaceUsage, what: "a store, a namespace and its kind")
        let (name, kindText) = (parsed.positionals[1], parsed.positionals[2])
        guard let kind = NamespaceKind(rawValue: kindText) else {
            throw UsageError(message: "unknown kind '\(kindText)'" + hint(kindText, NamespaceKind.allCases.map(\.rawValue)), usage: namespaceUsage)
        }
        try storeErrors { _ = try replica.declare(name, kind) }
    }

    static func put(_ arguments: [String]) throws {
        let (parsed, replica) = try open(arguments, count: 4, usage: putUsage, what: "a store, a namespace, a key and a value")
        let (name, key, value) = (parsed.positionals[1], parsed.positionals[2], Array(parsed.positionals[3].utf8))
        try storeErrors {
            switch try replica.declaration(of: name).kind {
            case .causal: try replica.causal(name).put(key, value)
            case .lww: try replica.lww(name).put(key, value)
            case .appendOnly: try replica.appendOnly(name).put(key, value)
            case .local: try replica.local(name).put(key, value)
            case .log, .messages:
                throw InputError(message: "namespace \(name) is a \(try replica.declaration(of: name).kind) namespace: put takes causal, lww, appendOnly or local")
            }
        }
    }

    static func get(_ arguments: [String]) throws {
        let (parsed, replica) = try open(arguments, count: 3, usage: getUsage, what: "a store, a namespace and a key", readOnly: true)
        let (name, key) = (parsed.positionals[1], parsed.positionals[2])
        let value = try storeErrors { try read(replica, name, key) }
        guard let value else { throw ExitStatus(code: 1) }
        print(String(decoding: value, as: UTF8.self))
    }

    static func delete(_ arguments: [String]) throws {
        let (parsed, replica) = try open(arguments, count: 3, usage: deleteUsage, what: "a store, a namespace and a key")
        let (name, key) = (parsed.positionals[1], parsed.positionals[2])
        // The key rule of put: a key that cannot be written cannot be deleted either.
        guard (1...1_024).contains(key.utf8.count) else { throw InputError(message: "a key is 1 to 1,024 UTF-8 bytes; this one has \(key.utf8.count)") }
        try storeErrors {
            switch try replica.declaration(of: name).kind {
            case .causal: _ = try replica.causal(name).delete(key)
            case .lww: _ = try replica.lww(name).delete(key)
            case .local: try replica.local(name).delete(key)
            case .appendOnly: try replica.appendOnly(name).delete(key)
            case .log, .messages:
                throw InputError(message: "namespace \(name) is a \(try replica.declaration(of: name).kind) namespace: delete takes causal, lww or local")
            }
        }
    }

    static func ls(_ arguments: [String]) throws {
        let (parsed, replica) = try open(arguments, count: 2, usage: lsUsage, what: "a store and a namespace", flags: ["--json"], readOnly: true)
        let name = parsed.positionals[1]
        let entries: [(key: String, value: [UInt8])] = try storeErrors {
            switch try replica.declaration(of: name).kind {
            case .causal: try replica.causal(name).entries()
            case .lww: try replica.lww(name).entries()
            case .appendOnly: try replica.appendOnly(name).entries()
            case .local: try replica.local(name).entries()
            case .log, .messages:
                throw InputError(message: "namespace \(name) is a \(try replica.declaration(of: name).kind) namespace: ls lists causal, lww, appendOnly and local ones")
            }
        }
        if parsed.has("--json") {
            // Written pair by pair: two keys that differ only in their Unicode spelling ("é"
            // as one character or two) are two rows of the store, and one Swift dictionary
            // would hold only one of them.
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes]
            let pairs = try entries.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }.map { entry in
                let key = String(decoding: try encoder.encode(entry.key), as: UTF8.self)
                let value = String(decoding: try encoder.encode(String(decoding: entry.value, as: UTF8.self)), as: UTF8.self)
                return "  \(key) : \(value)"
            }
            print(pairs.isEmpty ? "{\n\n}" : "{\n" + pairs.joined(separator: ",\n") + "\n}")
        } else {
            // One row a line: a tab, a line break or a terminal's escape inside a key or a
            // value is written escaped (`\t`, `\n`, `\u{1B}`), so lines stay rows.
            for entry in entries { print("\(Self.visible(entry.key))\t\(Self.visible(String(decoding: entry.value, as: UTF8.self)))") }
        }
    }

    // MARK: - Shared

    /// Text with its control and format characters written as escapes, and a backslash as two.
    static func visible(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\t": out += "\\t"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            default:
                // Control characters, and format characters (bidirectional overrides among
                // them) but the joiner emoji are made of.
                if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format && scalar.value != 0x200D {
                    out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    private static func read(_ replica: Replica, _ name: String, _ key: String) throws -> [UInt8]? {
        switch try replica.declaration(of: name).kind {
        case .causal: try replica.causal(name).get(key)
        case .lww: try replica.lww(name).get(key)
        case .appendOnly: try replica.appendOnly(name).get(key)
        case .local: try replica.local(name).get(key)
        case .log, .messages:
            throw InputError(message: "namespace \(name) is a \(try replica.declaration(of: name).kind) namespace: get reads causal, lww, appendOnly and local ones")
        }
    }

    /// Parses the arguments and opens the store (read-only for reads). The stamp
    /// floor lives with the key ring: `--keys F`, or `STORE.keys` beside the store.
    private static func open(
        _ arguments: [String], count: Int, usage: String, what: String, flags: Set<String> = [], readOnly: Bool = false
    ) throws -> (ParsedArguments, Replica) {
        let parsed = try ParsedArguments(arguments, flags: flags, options: ["--keys"], usage: usage)
        guard parsed.positionals.count == count else {
            throw UsageError(message: "expected \(what), got \(parsed.positionals.count) argument\(parsed.positionals.count == 1 ? "" : "s")", usage: usage)
        }
        let path = parsed.positionals[0]
        if let given = parsed.options["--keys"] {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: given, isDirectory: &isFolder), isFolder.boolValue {
                throw UsageError(message: "--keys \(given) is a folder; name the key ring's file (STORE.keys by default)", usage: usage)
            }
        }
        let keys = FileKeyStore(path: parsed.options["--keys"] ?? path + ".keys")
        let replica = try storeErrors {
            try Replica.open(at: path, options: Replica.Options(readOnly: readOnly, stampFloor: readOnly ? nil : keys))
        }
        return (parsed, replica)
    }

    /// The store's and the key store's errors are the input's fault: one line, exit 2.
    private static func storeErrors<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as ReplicaError {
            throw InputError(message: error.message)
        } catch let error as KeyStoreError {
            throw InputError(message: error.message)
        } catch let error as SQLiteError {
            throw storeFailure(error) ?? error
        }
    }

    private static func hint(_ word: String, _ candidates: [String]) -> String {
        let suggestion = Spelling.hint(word, in: candidates)
        return suggestion.isEmpty ? "; use \(candidates.joined(separator: ", "))" : suggestion
    }
}
