// The jobs wrap every provider (byte counting, the early listing): what the engine asks of a
// provider beyond reading and writing must reach it through the wrappers, from the binary.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class WrappedStorageTests: XCTestCase {
    private func backedUp() throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        try f.write("a.txt", "alpha")
        try f.write("sub/b.txt", "bravo")
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        return f
    }

    /// Sets a file's modification time `seconds` into the past.
    private func age(_ path: String, by seconds: Int) {
        var times = [timespec(tv_sec: time(nil) - seconds, tv_nsec: 0), timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
    }

    func testASyncFromTheBinarySweepsStaleTemporariesOfAFolderRemote() throws {
        let f = try backedUp()
        for stale in ["/.backup-tmp.deadbeef", "/sub/.backup-tmp.cafe"] {
            try Data("left by a killed run".utf8).write(to: URL(fileURLWithPath: f.remote + stale))
            age(f.remote + stale, by: 3 * 3600)
        }
        try Data("a live upload".utf8).write(to: URL(fileURLWithPath: f.remote + "/.backup-tmp.fresh"))
        XCTAssertEqual(try f.run("sync", "--dry-run").status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: f.remote + "/.backup-tmp.deadbeef"), "a preview swept")
        try f.write("a.txt", "alpha, changed")
        let result = try f.run("sync")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.remote + "/.backup-tmp.deadbeef"), "not swept")
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.remote + "/sub/.backup-tmp.cafe"), "not swept")
        XCTAssertTrue(FileManager.default.fileExists(atPath: f.remote + "/.backup-tmp.fresh"), "a fresh temporary was swept")
    }

    func testOlderFormFolderIdsInTheStateUploadNothingAgainFromTheBinary() throws {
        let f = try backedUp()
        // The ids a state written before <mtime ns>:<size> holds: <inode>:<mtime ns>.
        let script = """
            import os, sqlite3, sys
            db = sqlite3.connect(sys.argv[1]); root = sys.argv[2]
            for path, in db.execute("SELECT path FROM entries").fetchall():
                st = os.lstat(os.path.join(root, path))
                db.execute("UPDATE entries SET remote_id = ? WHERE path = ?", (f"{st.st_ino}:{st.st_mtime_ns}", path))
            db.commit()
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, f.dir.path("state/backup/default/sync.db"), f.remote]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        let result = try f.run("sync", "--json")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.result?["uploaded"] as? Int, 0, "old-form ids made the binary upload again: \(result.stdout)")
    }
}

/// The remote-missing guard, as a user meets it: the disk behind a mount point is gone, and
/// what is there instead is not the backup.
final class RemoteMissingGuardTests: XCTestCase {
    private func synced() throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        for i in 0..<5 { try f.write("f\(i).txt", "file \(i)") }
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        return f
    }

    /// Empties the remote as an unmount does, volume id and marker included.
    private func unmount(_ f: CLIFixture) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: f.remote) {
            try FileManager.default.removeItem(atPath: f.remote + "/" + name)
        }
    }

    func testAnUnmountedMountPointWithAStrayFileIsRemoteMissingAndTheFileStays() throws {
        let f = try synced()
        try unmount(f)
        try Data("stray".utf8).write(to: URL(fileURLWithPath: f.remote + "/README"))
        let result = try f.run("sync", "--json")
        XCTAssertEqual(result.status, 3, result.stdout + result.stderr)
        XCTAssertEqual(result.result?["reason"] as? String, "remoteMissing")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: f.remote), ["README"], "something was written or deleted")
    }

    func testAnotherDiskMountedInItsPlaceIsRemoteMissingAndItsFilesStay() throws {
        let f = try synced()
        try unmount(f)
        for i in 1...3 { try Data("precious \(i)".utf8).write(to: URL(fileURLWithPath: f.remote + "/photo\(i).jpg")) }
        let result = try f.run("sync", "--json")
        XCTAssertEqual(result.status, 3, result.stdout + result.stderr)
        XCTAssertEqual(result.result?["reason"] as? String, "remoteMissing")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: f.remote).sorted(), ["photo1.jpg", "photo2.jpg", "photo3.jpg"])
        // On purpose, for one run: the backup is written there (the photos are not this backup's).
        let allowed = try f.run("sync", "--allow-missing-remote", "--json")
        XCTAssertEqual(allowed.status, 0, allowed.stdout + allowed.stderr)
    }
}
