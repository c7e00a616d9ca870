// The profile's on_failure and on_success commands after `backup sync`: on_failure runs for
// every non-zero exit (a guard and the hold included) with the result JSON on its standard
// input and BACKUP_STATUS, BACKUP_EXIT and BACKUP_PROFILE set, never after a success;
// on_success only after one. The command's output never mixes into the JSON lines, and its
// own failure is said without changing the sync's exit status.

import BackupTestSupport
import Foundation
import XCTest

final class NotificationEndToEndTests: XCTestCase {
    private func setKey(_ f: CLIFixture, _ line: String) throws {
        let path = f.dir.path("config/backup/config")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try (text + line + "\n").write(toFile: path, atomically: false, encoding: .utf8)
    }

    /// A profile whose hooks write what they were given to `failure.*` and `success.*`.
    private func profileWithHooks() throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        let out = f.dir.path("")
        try setKey(f, "on_failure = cat > \(out)/failure.json; echo \"$BACKUP_STATUS $BACKUP_EXIT $BACKUP_PROFILE\" > \(out)/failure.env; echo noise")
        try setKey(f, "on_success = cat > \(out)/success.json; echo \"$BACKUP_STATUS $BACKUP_EXIT $BACKUP_PROFILE\" > \(out)/success.env; echo noise")
        return f
    }

    private func json(_ path: String) throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any], path)
    }

    private func text(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    func testOnSuccessRunsAfterASuccessfulSyncAndOnFailureDoesNot() throws {
        let f = try profileWithHooks()
        let sync = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(sync.status, 0, sync.stdout + sync.stderr)
        XCTAssertFalse(sync.stdout.contains("noise"), "the command's output went into the JSON lines")
        XCTAssertEqual(sync.result?["status"] as? String, "completed")
        let given = try json(f.dir.path("success.json"))
        XCTAssertEqual(given["status"] as? String, "completed")
        XCTAssertEqual(given["uploaded"] as? Int, 1)
        XCTAssertEqual(given["exit"] as? Int, 0)
        XCTAssertEqual(given["profile"] as? String, "default")
        XCTAssertEqual(text(f.dir.path("success.env")), "completed 0 default\n")
        XCTAssertNil(text(f.dir.path("failure.json")), "on_failure ran after a success")
    }

    func testOnFailureRunsForAGuardAndTheHoldWithTheResultOnItsInput() throws {
        let f = try profileWithHooks()
        // The first sync without --yes: the consent gate (exit 3).
        let gated = try f.run("sync")
        XCTAssertEqual(gated.status, 3, gated.stdout + gated.stderr)
        let first = try json(f.dir.path("failure.json"))
        XCTAssertEqual(first["status"] as? String, "unavailable")
        XCTAssertEqual(first["exit"] as? Int, 3)
        XCTAssertNotNil(first["reason"] as? String)
        XCTAssertEqual(text(f.dir.path("failure.env")), "unavailable 3 default\n")
        XCTAssertNil(text(f.dir.path("success.json")), "on_success ran after a refused run")

        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        try FileManager.default.removeItem(atPath: f.dir.path("failure.json"))
        XCTAssertEqual(try f.run("hold", "set", "moving house").status, 0)
        let held = try f.run("sync", "--json")
        XCTAssertEqual(held.status, 3, held.stdout + held.stderr)
        let second = try json(f.dir.path("failure.json"))
        XCTAssertEqual(second["reason"] as? String, held.result?["reason"] as? String)
        XCTAssertEqual(second["exit"] as? Int, 3)
    }

    func testOnFailureRunsWhenTheSyncFailsOutrightAndItsOwnFailureIsSaidNotPassedOn() throws {
        let f = try profileWithHooks()
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        // A remote that is now a file: the run fails (exit 1 or 3, whichever the engine says).
        try FileManager.default.removeItem(atPath: f.remote)
        try Data("not a folder".utf8).write(to: URL(fileURLWithPath: f.remote))
        let failed = try f.run("sync", "--json")
        XCTAssertNotEqual(failed.status, 0)
        let given = try json(f.dir.path("failure.json"))
        XCTAssertEqual(given["exit"] as? Int, Int(failed.status))
        XCTAssertEqual(given["status"] as? String, failed.result?["status"] as? String)

        // A hook that fails itself: said on standard error; the sync's status stands.
        try FileManager.default.removeItem(atPath: f.remote)
        try FileManager.default.createDirectory(atPath: f.remote, withIntermediateDirectories: true)
        let path = f.dir.path("config/backup/config")
        let config = try String(contentsOfFile: path, encoding: .utf8)
            .split(separator: "\n").filter { !$0.hasPrefix("on_success") }.joined(separator: "\n") + "\non_success = exit 7\n"
        try config.write(toFile: path, atomically: false, encoding: .utf8)
        let sync = try f.run("sync", "--yes", "--allow-missing-remote")
        XCTAssertEqual(sync.status, 0, sync.stdout + sync.stderr)
        XCTAssertTrue(sync.stderr.contains("on_success exited with status 7"), sync.stderr)
    }
}
