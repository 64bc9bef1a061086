import Foundation
import Synchronization

/// The package's executables run as a user runs them: found beside the test
/// bundle, run to the end, or left running in the background and signalled.
public enum ChildProcess {
    /// What a finished run printed and how it ended.
    public struct Run: Sendable, CustomStringConvertible {
        /// The exit status, or the signal that ended the process (``killedBySignal``).
        public let status: Int32
        public let output: String
        public let error: String
        public var killedBySignal = false
        public var description: String { "\(killedBySignal ? "killed by signal" : "exit") \(status)\n--- stdout\n\(output)\n--- stderr\n\(error)" }
    }

    /// The built executable `name`: beside the test bundle, else under `.build/debug`.
    public static func binary(_ name: String) -> URL {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/\(name)")
    }

    /// Runs `name` with `arguments` to the end (killed after `timeoutSeconds`).
    public static func run(_ name: String, _ arguments: [String], environment: [String: String] = [:], timeoutSeconds: Double = 60) throws -> Run {
        let running = try Background(name, arguments, environment: environment)
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while running.isRunning && Date() < deadline { usleep(10_000) }
        if running.isRunning { _ = running.signal(SIGKILL) }
        return running.finish()
    }

    /// A process left running: its output is collected as it comes.
    public final class Background: @unchecked Sendable {  // safe: `process` is only read after run(); the logs are Mutex-guarded
        // @unchecked Sendable: `process` is set up before `run()` and afterwards only
        // read (its own methods are thread-safe); the output logs are Mutex-guarded.
        public let process = Process()
        private let output = ByteLog()
        private let errors = ByteLog()
        private let outputPipe = Pipe()
        private let errorPipe = Pipe()

        public init(_ name: String, _ arguments: [String], environment: [String: String] = [:]) throws {
            process.executableURL = ChildProcess.binary(name)
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            process.standardOutput = outputPipe
            process.standardError = errorPipe
            let (output, errors) = (self.output, self.errors)
            outputPipe.fileHandleForReading.readabilityHandler = { output.append($0.availableData) }
            errorPipe.fileHandleForReading.readabilityHandler = { errors.append($0.availableData) }
            try process.run()
        }

        public var isRunning: Bool { process.isRunning }
        public var outputText: String { output.text }
        public var errorText: String { errors.text }

        /// Waits until standard output (or error) contains `text`; `false` after `timeoutSeconds`.
        public func waitFor(_ text: String, inErrors: Bool = false, timeoutSeconds: Double = 20) -> Bool {
            let deadline = Date().addingTimeInterval(timeoutSeconds)
            while Date() < deadline {
                if (inErrors ? errorText : outputText).contains(text) { return true }
                if !isRunning { return (inErrors ? errorText : outputText).contains(text) }
                usleep(10_000)
            }
            return false
        }

        /// Sends `number` and waits for the process to end; returns its status, or
        /// -1 when it had not ended 30 s later (it is then killed: a test never hangs).
        @discardableResult
        public func signal(_ number: Int32) -> Int32 {
            if process.isRunning { kill(process.processIdentifier, number) }
            let deadline = Date().addingTimeInterval(30)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            guard !process.isRunning else {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return -1
            }
            return process.terminationStatus
        }

        /// Waits for the end (up to `timeoutSeconds`; then SIGKILL) and returns the run.
        public func finish(timeoutSeconds: Double = 30) -> Run {
            let deadline = Date().addingTimeInterval(timeoutSeconds)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            // What the pipes still hold once the writer is gone.
            outputPipe.fileHandleForReading.readabilityHandler = nil
            errorPipe.fileHandleForReading.readabilityHandler = nil
            let restOut = outputPipe.fileHandleForReading.readDataToEndOfFile()
            let restErr = errorPipe.fileHandleForReading.readDataToEndOfFile()
            output.append(restOut)
            errors.append(restErr)
            return Run(status: process.terminationStatus, output: outputText, error: errorText, killedBySignal: process.terminationReason == .uncaughtSignal)
        }

        deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
    }

    /// A loopback port nothing listens on now.
    public static func freePort() throws -> UInt16 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ChildProcessError("socket() failed") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw ChildProcessError("bind() failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return UInt16(bigEndian: address.sin_port)
    }
}

/// Bytes a process wrote, gathered from its pipe's handler thread.
public final class ByteLog: Sendable {
    private let bytes = Mutex<[UInt8]>([])
    public init() {}
    public func append(_ data: Data) { bytes.withLock { $0.append(contentsOf: data) } }
    public var text: String { bytes.withLock { String(decoding: $0, as: UTF8.self) } }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
