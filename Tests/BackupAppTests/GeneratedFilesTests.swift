// The committed man page and completion scripts are exactly what the binary generates from
// the command tree, byte for byte, so neither can drift from what the binary does. After
// changing the tree or Sources/BackupCLI/Generators.swift, re-record them and commit the
// result with the change:
//
//     BACKUP_RECORD=1 swift test --disable-swift-testing --filter GeneratedFilesTests
//
// (or `make generate`). A recording run fails once for each file it rewrote, so record
// mode left on can never pass silently.

import BackupCLI
import Foundation
import XCTest

final class GeneratedFilesTests: XCTestCase {
    func testManPageIsWhatTheBinaryGenerates() throws {
        try checkGenerated("man/backup.1", by: ["generate-manual"])
    }

    func testBashCompletionIsWhatTheBinaryGenerates() throws {
        try checkGenerated("completions/backup.bash", by: ["generate-completions", "bash"])
    }

    func testZshCompletionIsWhatTheBinaryGenerates() throws {
        try checkGenerated("completions/_backup", by: ["generate-completions", "zsh"])
    }

    func testFishCompletionIsWhatTheBinaryGenerates() throws {
        try checkGenerated("completions/backup.fish", by: ["generate-completions", "fish"])
    }

    func testAnotherShellIsAUsageError() throws {
        let result = try Tools.run(Tools.backup, ["generate-completions", "tcsh"])
        XCTAssertEqual(result.status, 2, result.stderr)
        XCTAssertEqual(result.stdout, "")
        XCTAssertTrue(result.stderr.contains("bash, zsh or fish"), result.stderr)
    }

    func testEveryOptionOfTheTreeIsInEveryGeneratedFile() throws {
        let files = try ["man/backup.1", "completions/backup.bash", "completions/_backup", "completions/backup.fish"]
            .map { ($0, try Tools.committed($0)) }
        for command in Tools.visibleCommands {
            for option in command.spec.options + CommandTree.globalOptions {
                for (name, text) in files {
                    let spelled = name.hasSuffix(".1") ? "Fl -\(option.name)" : option.name
                    XCTAssertTrue(text.contains(spelled), "\(name) lacks --\(option.name) of `\(command.name)`")
                }
            }
        }
    }

    func testHiddenCommandsAreLeftOut() throws {
        let hidden = CommandTree.root.subcommands.filter(\.hidden).map(\.name)
        XCTAssertEqual(hidden.sorted(), ["generate-completions", "generate-manual", "generate-unit"])
        for name in ["man/backup.1", "completions/backup.bash", "completions/_backup", "completions/backup.fish"] {
            // The scripts' header comment says which command made them; only that may name it.
            let text = try Tools.committed(name).split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n")
            for command in hidden {
                XCTAssertFalse(text.contains(command), "\(name) mentions the hidden command \(command)")
            }
        }
    }

    func testInstallPutsEachFileWhereTheSystemLooks() throws {
        let destination = try Tools.temporaryFolder("backup-install")
        defer { try? FileManager.default.removeItem(at: destination) }
        let result = try Tools.run(
            "/usr/bin/env", ["make", "-s", "install-data", "DESTDIR=\(destination.path)", "PREFIX=/opt/backup"],
            directory: Tools.packageRoot)
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        let prefix = destination.path + "/opt/backup/share/"
        let expected = [
            "man/man1/backup.1": "man/backup.1",
            "bash-completion/completions/backup": "completions/backup.bash",
            "zsh/site-functions/_backup": "completions/_backup",
            "fish/vendor_completions.d/backup.fish": "completions/backup.fish",
        ]
        for (installed, committed) in expected {
            let data = FileManager.default.contents(atPath: prefix + installed)
            XCTAssertEqual(data, Data(try Tools.committed(committed).utf8), "\(installed) is not \(committed)")
        }
    }

    /// Compares the committed file with the binary's output; records it under BACKUP_RECORD=1.
    private func checkGenerated(_ path: String, by arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let result = try Tools.run(Tools.backup, arguments)
        XCTAssertEqual(result.status, 0, result.stderr, file: file, line: line)
        XCTAssertEqual(result.stderr, "", file: file, line: line)
        let url = Tools.packageRoot.appendingPathComponent(path)
        let committed = FileManager.default.contents(atPath: url.path).map { String(decoding: $0, as: UTF8.self) }
        if committed == result.stdout { return }
        if ProcessInfo.processInfo.environment["BACKUP_RECORD"] == "1" {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(result.stdout.utf8).write(to: url)
            XCTFail("recorded \(path); run the tests again without BACKUP_RECORD", file: file, line: line)
            return
        }
        let committedLines = (committed ?? "").split(separator: "\n", omittingEmptySubsequences: false)
        let generatedLines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let first = zip(committedLines, generatedLines).enumerated().first { $0.element.0 != $0.element.1 }?.offset
            ?? min(committedLines.count, generatedLines.count)
        XCTFail("""
            \(path) differs from `backup \(arguments.joined(separator: " "))` (first at line \(first + 1)): \
            the command tree or Generators.swift changed without regenerating. \
            Run `BACKUP_RECORD=1 swift test --disable-swift-testing --filter GeneratedFilesTests` (or `make generate`) \
            and commit the files.
              committed: \(first < committedLines.count ? String(committedLines[first]) : "<end of file>")
              generated: \(first < generatedLines.count ? String(generatedLines[first]) : "<end of output>")
            """, file: file, line: line)
    }
}

/// What the tests of the generated files share: the package folder, the built binary, the
/// tree's visible commands, and running tools with a deadline.
enum Tools {
    /// The package folder (this file is Tests/BackupAppTests/GeneratedFilesTests.swift).
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The `backup` binary `swift test` built beside the test bundle.
    static var backup: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("backup").path
    }

    /// A committed file of the package, as text.
    static func committed(_ path: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    /// Each command a person can type (hidden ones left out), with its full name.
    static var visibleCommands: [(name: String, spec: CommandSpec)] {
        var result: [(String, CommandSpec)] = []
        func visit(_ spec: CommandSpec, _ name: String) {
            result.append((name, spec))
            for sub in spec.subcommands where !sub.hidden { visit(sub, name + " " + sub.name) }
        }
        visit(CommandTree.root, "backup")
        return result
    }

    static func temporaryFolder(_ prefix: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The path of `name` on PATH, nil when it is not installed.
    static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    struct Timeout: Error, CustomStringConvertible {
        let command: String
        var description: String { "\(command) did not finish in time and was stopped" }
    }

    /// Runs `executable` to the end (killing it after `timeout` seconds), output captured in
    /// files so a hung process cannot block the reading.
    static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: URL? = nil,
        timeout: Double = 60
    ) throws -> Result {
        let folder = try temporaryFolder("backup-run")
        defer { try? FileManager.default.removeItem(at: folder) }
        let outURL = folder.appendingPathComponent("stdout")
        let errURL = folder.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.currentDirectoryURL = directory ?? packageRoot
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: outURL)
        process.standardError = try FileHandle(forWritingTo: errURL)
        let finished = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in finished.signal() }
        try process.run()
        if finished.wait(timeout: .now() + timeout) == .timedOut {
            process.interrupt()
            kill(process.processIdentifier, SIGKILL)
            finished.wait()
            throw Timeout(command: ([executable] + arguments).joined(separator: " "))
        }
        return Result(
            status: process.terminationStatus,
            stdout: String(decoding: (try? Data(contentsOf: outURL)) ?? Data(), as: UTF8.self),
            stderr: String(decoding: (try? Data(contentsOf: errURL)) ?? Data(), as: UTF8.self))
    }
}
