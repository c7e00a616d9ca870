// A python fixture script of Tests/Fixtures run as a child process, as HostileWebDAV and
// FaultProxy run theirs: `/usr/bin/env python3 SCRIPT ARGUMENTS…`, which serves on 127.0.0.1,
// prints `PORT <n>` as its first line, then answers each JSON command line on its stdin with
// one JSON line on its stdout. Its stderr is the test's. Stopped on stop() or deinit.

import Foundation
import XCTest

/// A running fixture script and its command channel.
final class PythonFixture: @unchecked Sendable {
    // @unchecked: `process`, `input` and `output` are set once in init; `buffered` is touched
    // only by init and, after it, under `lock` in request(_:), which also keeps one command's
    // line and its answer's line together when several tasks send commands.

    /// The port the script said it serves on.
    let port: Int
    private let process: Process
    private let input: FileHandle
    private let output: FileHandle
    private let lock = NSLock()
    private var buffered = Data()

    /// Starts Tests/Fixtures/`script` with `arguments`, its environment the test's plus
    /// `environment` (secrets go there, never in argv), and reads its `PORT <n>` line. Fails the
    /// calling test, naming the fixture as `what` ("fault proxy"), when python3 or the script is
    /// missing or it does not say its port.
    static func start(
        script: String, arguments: [String] = [], environment: [String: String] = [:], what: String,
        file: StaticString = #filePath, line: UInt = #line
    ) throws -> PythonFixture {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/" + script).path
        return try PythonFixture(path: path, arguments: arguments, environment: environment, what: what, file: file, line: line)
    }

    private init(path: String, arguments: [String], environment: [String: String], what: String, file: StaticString, line: UInt)
        throws
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", path] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        do {
            try process.run()
        } catch {
            XCTFail("python3 could not start the \(what) \(path): \(error)", file: file, line: line)
            throw error
        }
        self.process = process
        input = stdin.fileHandleForWriting
        output = stdout.fileHandleForReading
        let first = Self.readLine(output, &buffered)
        guard let first, first.hasPrefix("PORT "), let port = Int(first.dropFirst(5)) else {
            XCTFail("the \(what) did not start (said \(String(describing: first)))", file: file, line: line)
            process.terminate()
            throw RcloneServer.ServerError(message: "\(what) did not start")
        }
        self.port = port
    }

    deinit { stop() }

    /// Sends `command` as one JSON line and returns the script's one-line JSON answer; empty
    /// when it gave none (it ended, or the line was not a JSON object).
    @discardableResult
    func request(_ command: [String: Any]) -> [String: Any] {
        lock.lock()
        defer { lock.unlock() }
        guard let data = try? JSONSerialization.data(withJSONObject: command) else { return [:] }
        input.write(data + Data("\n".utf8))
        guard let line = Self.readLine(output, &buffered) else { return [:] }
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
    }

    /// Closes its stdin and terminates it; calling it again does nothing.
    func stop() {
        if process.isRunning {
            try? input.close()
            process.terminate()
        }
        process.waitUntilExit()
    }

    /// The next line of `handle`, read through `buffered`; nil at the end of the output.
    private static func readLine(_ handle: FileHandle, _ buffered: inout Data) -> String? {
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
                buffered.removeSubrange(buffered.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffered.append(chunk)
        }
    }
}
