// The last outcome of a sync is kept with the profile's state, whoever ran it, so `status`
// (and the TUI's profile list) show a failed scheduled run, not only the last good one.

@testable import BackupApp
import BackupTestSupport
import Foundation
import XCTest

final class LastOutcomeTests: XCTestCase {
    func testAFailedRunIsKeptAndAnotherThatCompletesReplacesIt() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        try f.write("a.txt", "alpha")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        let away = f.dir.path("away")
        try FileManager.default.moveItem(atPath: f.source, toPath: away)
        XCTAssertEqual(try f.run("sync").status, 1)

        let failed = try f.run("status", "--json")
        let status = failed.jsonLines.first { $0["event"] as? String == "status" }
        let outcome = status?["last_outcome"] as? [String: Any]
        XCTAssertEqual(outcome?["status"] as? String, "failed", failed.stdout)
        XCTAssertTrue((outcome?["message"] as? String)?.contains("the source folder \(f.source) does not exist") == true, failed.stdout)
        XCTAssertNotNil(status?["last_sync"] as? String, "the last good sync is still told")
        XCTAssertEqual(failed.status, 0, "status answers while the source is away")
        XCTAssertEqual(status?["would"] as? String, "failed")
        XCTAssertEqual(status?["error"] as? String, "local")
        XCTAssertTrue(status?["local_files"] is NSNull)

        try FileManager.default.moveItem(atPath: away, toPath: f.source)
        try f.write("b.txt", "bravo")
        XCTAssertEqual(try f.run("sync").status, 0)
        let text = try f.run("status").stdout
        XCTAssertTrue(text.contains("last run  completed "), text)
        XCTAssertTrue(text.contains(": 1 file uploaded, 0 deleted"), text)
    }

    func testADryRunOrARunKeptOutByAnotherIsNoOutcome() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        try f.write("a.txt", "alpha")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("sync", "--dry-run").status, 3, "no consent yet: it would not run")
        XCTAssertTrue(try f.run("status").stdout.contains("last run  none recorded"))
    }

    func testAStoredOutcomeReadsBackAndAnythingElseIsNone() {
        let outcome = LastOutcome(kind: .unavailable, at: Date(timeIntervalSince1970: 1_800_000_000.5), words: "held: moving\nthe disk")
        let back = LastOutcome(stored: outcome.stored)
        XCTAssertEqual(back?.kind, .unavailable)
        XCTAssertEqual(back?.at, outcome.at)
        XCTAssertEqual(back?.words, "held: moving the disk", "one line")
        for bad in ["", "exploded 1 x", "failed nan words", "failed", "completed 12"] {
            XCTAssertNil(LastOutcome(stored: bad), bad)
        }
    }
}
