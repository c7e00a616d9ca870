// The built binary against hostile text: file names that carry terminal escapes (a screen
// clear, an OSC 52 clipboard write, a bidi override, a line break) reach the terminal as
// visible escapes, and --json still carries them exactly.

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
}
