// Issue 11's guards and the remote folder's creation, end to end with the built binary: an
// unmounted disk (item 8), nothing written by looking (item 10), who creates the remote folder
// (item 13), and two profiles on one remote (item 14).

import BackupTestSupport
import Foundation
import XCTest

final class GuardEndToEndTests: XCTestCase {
    private func fixture() throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        return f
    }

    private func assertCompleted(_ result: CLIResult, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr, file: file, line: line)
        XCTAssertEqual(result.result?["status"] as? String, "completed", result.stdout, file: file, line: line)
    }

    /// Every entry of `folder`, hidden ones included.
    private func entries(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
    }

    // MARK: Item 8

    func testIssue11Item08AnUnmountedDiskGetsNothingUntilAllowed() throws {
        let f = try fixture()
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        for i in 0..<5 { try f.write("f\(i).txt", "\(i)") }
        assertCompleted(try f.run("sync", "--yes", "--json"))
        // The disk is unmounted: the bare mount point is an empty folder on the system disk.
        for name in try entries(f.remote) { try FileManager.default.removeItem(atPath: f.remote + "/" + name) }

        let refused = try f.run("sync", "--json")
        XCTAssertEqual(refused.status, 3, refused.stdout + refused.stderr)
        XCTAssertEqual(refused.result?["reason"] as? String, "remoteMissing")
        XCTAssertEqual(try entries(f.remote), [], "nothing written onto the mount point, not even a volume id")
        let human = try f.run("sync")
        XCTAssertEqual(human.status, 3)
        XCTAssertTrue(human.stdout.contains("--allow-missing-remote"), human.stdout)
        let status = try f.run("status", "--json")
        XCTAssertEqual(status.jsonLines.first { $0["event"] as? String == "status" }?["would"] as? String, "remoteMissing")

        let allowed = try f.run("sync", "--allow-missing-remote", "--json")
        assertCompleted(allowed)
        XCTAssertEqual(allowed.result?["uploaded"] as? Int, 5)
    }

    // MARK: Item 10

    func testIssue11Item10ProbeDryRunStatusAndRefusedRunsWriteNoVolumeId() throws {
        let f = try fixture()
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("probe").status, 0)
        XCTAssertEqual(try f.run("sync", "--dry-run", "--yes").status, 0)
        XCTAssertEqual(try f.run("status").status, 0)
        XCTAssertEqual(try f.run("sync").status, 3, "no consent yet")
        XCTAssertEqual(try entries(f.remote), [], "looking at the remote wrote to it")

        // A run refused by the empty guard writes nothing either.
        let other = try fixture()
        XCTAssertEqual(try other.run("init", "--source", other.source, "--remote", other.remote).status, 0)
        try other.dir.write("remote/photos/1.jpg", Data("jpeg".utf8))
        XCTAssertEqual(try other.run("sync", "--yes").status, 3)
        XCTAssertEqual(try entries(other.remote), ["photos"])

        // The first run that writes makes the volume id.
        assertCompleted(try f.run("sync", "--yes", "--json"))
        XCTAssertEqual(try entries(f.remote), [".backup-marker", ".backup-volume-id", "a.txt"])
    }

    // MARK: Item 13

    func testIssue11Item13InitCreatesTheLastFolderOfAFolderRemoteOnlyUnderAnExistingParent() throws {
        let f = try fixture()
        let remote = f.remote + "/laptop"
        let created = try f.run("init", "--source", f.source, "--remote", remote)
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: remote))
        XCTAssertTrue(created.stdout.contains("created the remote folder \(remote) on the filesystem mounted at /"), created.stdout)
        try f.write("a.txt", "a")
        assertCompleted(try f.run("sync", "--yes", "--json"))

        // A missing parent is usually an unmounted disk: nothing is created, nothing written.
        let missing = f.dir.path("not-mounted/laptop")
        let refused = try f.run("init", "--profile", "other", "--source", f.source, "--remote", missing)
        XCTAssertEqual(refused.status, 2)
        XCTAssertTrue(refused.stderr.contains("neither does its parent"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.dir.path("not-mounted")))

        // A sync never creates the folder: a vanished one is not available.
        try FileManager.default.removeItem(atPath: remote)
        let vanished = try f.run("sync", "--json")
        XCTAssertNotEqual(vanished.status, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: remote))
    }

    func testIssue11Item13InitCreatesAWebDAVRemoteFolderSoTheFirstSyncWorks() throws {
        let f = try fixture()
        let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        try FileManager.default.createDirectory(atPath: server.root + "/backups", withIntermediateDirectories: true)
        f.extraEnvironment = ["BACKUP_PASSWORD": server.secret]
        let remote = "webdav://\(server.user)@127.0.0.1:\(server.port)/backups/laptop"
        let created = try f.run("init", "--source", f.source, "--remote", remote)
        XCTAssertEqual(created.status, 0, created.stderr)
        XCTAssertTrue(created.stdout.contains("created the remote folder"), created.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: server.root + "/backups/laptop"))
        try f.write("a.txt", "a")
        assertCompleted(try f.run("sync", "--yes", "--json"))
        // Again over an existing folder: nothing to create, no note.
        let again = try f.run("init", "--force", "--source", f.source, "--remote", remote)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertFalse(again.stdout.contains("created"), again.stdout)
    }

    // MARK: Item 14

    func testIssue11Item14TwoProfilesOnOneRemoteRefuseEachOtherUntilTakenOver() throws {
        let f = try fixture()
        let desktopSource = try f.dir.makeFolder("desktop-source")
        XCTAssertEqual(try f.run("init", "--profile", "laptop", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("init", "--profile", "desktop", "--source", desktopSource, "--remote", f.remote).status, 0)
        let config = try String(contentsOfFile: f.dir.path("config/backup/config"), encoding: .utf8)
        XCTAssertTrue(config.contains("writer = laptop@"), config)
        try f.write("laptop.txt", "l")
        try f.dir.write("desktop-source/desktop.txt", Data("d".utf8))
        assertCompleted(try f.run("sync", "--profile", "laptop", "--yes", "--json"))

        let refused = try f.run("sync", "--profile", "desktop", "--yes", "--json")
        XCTAssertEqual(refused.status, 3, refused.stdout)
        XCTAssertEqual(refused.result?["reason"] as? String, "otherWriter")
        XCTAssertTrue((refused.result?["writer"] as? String)?.hasPrefix("laptop@") ?? false, refused.stdout)
        XCTAssertEqual(try f.tree(f.remote)["laptop.txt"], Data("l".utf8), "the laptop's file is kept")
        XCTAssertNil(try f.tree(f.remote)["desktop.txt"])
        let human = try f.run("sync", "--profile", "desktop")
        XCTAssertTrue(human.stdout.contains("laptop@") && human.stdout.contains("--take-over"), human.stdout)
        assertCompleted(try f.run("sync", "--profile", "laptop", "--json"))

        assertCompleted(try f.run("sync", "--profile", "desktop", "--take-over", "--json"))
        XCTAssertEqual(try f.tree(f.remote)["desktop.txt"], Data("d".utf8))
        let laptopNow = try f.run("sync", "--profile", "laptop", "--json")
        XCTAssertEqual(laptopNow.result?["reason"] as? String, "otherWriter")
        XCTAssertTrue((laptopNow.result?["writer"] as? String)?.hasPrefix("desktop@") ?? false, laptopNow.stdout)
    }

    func testIssue11Item14ANewMachineRestoresThenSyncsWithoutAFlag() throws {
        let old = try fixture()
        XCTAssertEqual(try old.run("init", "--source", old.source, "--remote", old.remote).status, 0)
        try old.write("docs/a.txt", "a")
        try old.write("b.txt", "b")
        assertCompleted(try old.run("sync", "--yes", "--json"))

        let new = try fixture()
        XCTAssertEqual(try new.run("init", "--source", new.source, "--remote", old.remote).status, 0)
        let restored = try new.run("restore", "--json")
        XCTAssertEqual(restored.status, 0, restored.stdout + restored.stderr)
        let synced = try new.run("sync", "--yes", "--json")
        assertCompleted(synced)
        XCTAssertEqual(synced.result?["uploaded"] as? Int, 0, "what was restored is not uploaded again")
        XCTAssertEqual(synced.result?["marker_uploaded"] as? Bool, true, "the marker now names the new machine")
        // The old machine is now the other writer.
        XCTAssertEqual(try old.run("sync", "--json").result?["reason"] as? String, "otherWriter")
    }
}
