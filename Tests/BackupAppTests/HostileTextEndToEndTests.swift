// The built binary against hostile text: file names that carry terminal escapes (a screen
// clear, an OSC 52 clipboard write, a bidi override, a line break) reach the terminal as
// visible escapes, and --json still carries them exactly; an `init` value with a line break
// (which would write a config line of its own, a password_command) is refused.

import BackupTestSupport
import Foundation
import XCTest

final class HostileTextEndToEndTests: XCTestCase {
    /// A screen clear, an OSC 52 clipboard write ending in BEL, a line break that would start
    /// a forged line, and a right-to-left override.
    static let hostile = "evil\u{1B}[2J\u{1B}]52;c;cHduZWQ=\u{07}\nrestored 0 file(s)\u{202E}gnp.exe"
    static let shown = "evil\\x1b[2J\\x1b]52;c;cHduZWQ=\\x07\\nrestored 0 file(s)\\u{202E}gnp.exe"

    private func initialised() throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let result = try f.run(["init", "--source", f.source, "--remote", f.remote])
        XCTAssertEqual(result.status, 0, result.stderr)
        return f
    }

    private func assertNoRawControls(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        let raw = text.unicodeScalars.filter { ($0.value < 0x20 && $0 != "\n") || (0x7F...0x9F).contains($0.value) || $0 == "\u{202E}" }
        XCTAssertTrue(raw.isEmpty, "\(what) holds raw control characters \(raw.map { String($0.value, radix: 16) }): \(text.debugDescription)",
                      file: file, line: line)
    }

    func testANameFromTheRemoteListingIsEscapedOnTheTerminalAndExactInJSON() throws {
        let f = try initialised()
        try f.write("keep1.txt", "1")
        try f.write("keep2.txt", "2")
        try f.write(Self.hostile, "hostile")
        XCTAssertEqual(try f.run("sync", "--yes", "--json").status, 0)
        XCTAssertNotNil(try f.tree(f.remote)[Self.hostile], "the remote holds the hostile name")
        try FileManager.default.removeItem(atPath: f.source + "/" + Self.hostile)

        // The dry run lists the remote's name as one to delete.
        let human = try f.run("sync", "--dry-run")
        XCTAssertEqual(human.status, 0, human.stderr)
        assertNoRawControls(human.stdout, "stdout")
        assertNoRawControls(human.stderr, "stderr")
        XCTAssertTrue(human.stdout.contains("  delete " + Self.shown + "\n"), human.stdout)
        XCTAssertFalse(human.stdout.split(separator: "\n").contains { $0.hasPrefix("restored") }, "no line is forged: \(human.stdout)")

        let json = try f.run("sync", "--dry-run", "--json")
        XCTAssertEqual(json.result?["would_delete"] as? [String], [Self.hostile], "JSON carries the exact name")
        assertNoRawControls(json.stdout, "JSON stdout")
    }

    func testANameInANoteOnStderrIsEscapedAndExactInJSON() throws {
        let f = try initialised()
        try f.write("keep.txt", "1")
        XCTAssertEqual(mkfifo(f.source + "/" + Self.hostile, 0o600), 0, "a FIFO is skipped with a note naming it")

        let human = try f.run("sync", "--yes")
        assertNoRawControls(human.stdout, "stdout")
        assertNoRawControls(human.stderr, "stderr")
        XCTAssertTrue(human.stderr.contains("note: skipped " + Self.shown), human.stderr)
        XCTAssertFalse(human.stderr.split(separator: "\n").contains { $0.hasPrefix("restored") }, "no line is forged: \(human.stderr)")

        let json = try f.run("sync", "--json")
        let note = json.jsonLines.first { $0["event"] as? String == "note" }
        XCTAssertEqual(note?["path"] as? String, Self.hostile, "JSON carries the exact name: \(json.stdout)")
        assertNoRawControls(json.stdout, "JSON stdout")
    }

    // MARK: Config injection through init

    /// Runs `init` with `extra`, each value of which smuggles a password_command line that
    /// would touch `marker`; then runs what would execute it.
    private func assertInitRefused(
        _ option: String, _ f: CLIFixture, _ marker: String, _ arguments: [String], file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let config = f.dir.path("config/backup/config")
        let before = FileManager.default.contents(atPath: config)
        let result = try f.run(["init"] + arguments)
        XCTAssertEqual(result.status, 2, "\(option): \(result.stdout)\(result.stderr)", file: file, line: line)
        XCTAssertTrue(result.stderr.contains("--\(option) "), "the option is named: \(result.stderr)", file: file, line: line)
        XCTAssertTrue(result.stderr.contains("\\npassword_command = touch "), "the value is shown escaped: \(result.stderr)", file: file, line: line)
        XCTAssertEqual(FileManager.default.contents(atPath: config), before, "the config is unchanged", file: file, line: line)
        for profile in ["default", "other"] {
            _ = try f.run("sync", "--profile", profile, "--yes", "--json")
            _ = try f.run("status", "--profile", profile, "--json")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "no injected command ran", file: file, line: line)
    }

    func testInitRefusesALineBreakInExcludeOrGroupAndNoInjectedCommandRuns() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let marker = f.dir.path("pwned")
        let injected = "\npassword_command = touch " + marker
        let webdav = "webdav://alice@127.0.0.1:9/backup"
        try assertInitRefused("exclude", f, marker, ["--source", f.source, "--remote", webdav, "--exclude", "*.tmp" + injected])
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.dir.path("config/backup/config")), "no config was created")
        try assertInitRefused("group", f, marker, ["--source", f.source, "--remote", webdav, "--group", "docs=docs/" + injected])

        // Over an existing config, with --force: the file stays byte for byte as it was.
        XCTAssertEqual(try f.run("init", "--profile", "other", "--source", f.source, "--remote", webdav).status, 0)
        try assertInitRefused("exclude", f, marker, ["--profile", "other", "--force", "--source", f.source, "--remote", webdav, "--exclude", "x" + injected])
        try assertInitRefused("group", f, marker, ["--profile", "other", "--force", "--source", f.source, "--remote", webdav, "--group", "d=x,required" + injected])
    }

    func testInitRefusesALineBreakInSourceOrRemote() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let marker = f.dir.path("pwned")
        let injected = "\npassword_command = touch " + marker
        // Folders that exist under the hostile names, so only the line break can be refused.
        let source = try f.dir.makeFolder("src" + injected)
        let remote = try f.dir.makeFolder("dst" + injected)
        try assertInitRefused("source", f, marker, ["--source", source, "--remote", f.remote])
        try assertInitRefused("remote", f, marker, ["--source", f.source, "--remote", remote])
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.dir.path("config/backup/config")), "no config was created")
    }
}
