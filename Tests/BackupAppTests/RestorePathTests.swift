// Restoring some files and folders of a backup (`backup restore --path`), through the built
// binary: a file, or a folder with everything in it, and nothing else; the folders above a
// chosen file come with their modes; a path the backup does not hold, or one that climbs out,
// is refused with exit status 2 and the earlier record left as it was; --resume takes none.

import BackupTestSupport
import Foundation
import XCTest

final class RestorePathTests: XCTestCase {
    private func backedUp() throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote, "--group", "papers=papers/,required").status, 0)
        try f.write("papers/2023/tax.txt", "tax 2023")
        try f.write("papers/2024/tax.txt", "tax 2024")
        try f.write("photos/beach.jpg", "sand")
        try f.write("photos/trip/hill.jpg", "grass")
        try f.write("notes.txt", "call back")
        chmod(f.source + "/papers/2024", 0o750)
        let synced = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(synced.status, 0, synced.stdout + synced.stderr)
        return f
    }

    func testAChosenFileAndAChosenFolderAreRestoredAndNothingElse() throws {
        let f = try backedUp()
        let target = f.dir.path("restored")
        let result = try f.run("restore", "--to", target, "--path", "papers/2024/tax.txt", "--path", "photos/", "--json")
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertEqual(result.result?["placed"] as? Int, 3, result.stdout)
        let restored = try f.tree(target)
        XCTAssertEqual(Set(restored.keys), ["papers/2024/tax.txt", "photos/beach.jpg", "photos/trip/hill.jpg"])
        XCTAssertEqual(restored["photos/trip/hill.jpg"], Data("grass".utf8))
        // The folder above the chosen file keeps its mode; its sibling folder was not chosen.
        var info = stat()
        XCTAssertEqual(stat(target + "/papers/2024", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o750)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + "/papers/2023"))
    }

    func testAPathTheBackupDoesNotHoldOrOneThatClimbsOutIsRefusedAndTheRecordKept() throws {
        let f = try backedUp()
        let target = f.dir.path("restored")
        // An unfinished restore first: its record must survive the refusals below.
        let first = try f.run("restore", "--to", target, "--path", "notes.txt", "--json")
        XCTAssertEqual(first.status, 0, first.stderr)

        let missing = try f.run("restore", "--to", f.dir.path("other"), "--path", "papers/2025", "--path", "nope.txt")
        XCTAssertEqual(missing.status, 2, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("holds nothing at \"papers/2025\", \"nope.txt\""), missing.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.dir.path("other/papers")))

        for bad in ["../etc", "papers/../notes.txt", "./notes.txt", "a//b"] {
            let climbing = try f.run("restore", "--to", f.dir.path("other"), "--path", bad)
            XCTAssertEqual(climbing.status, 2, "\(bad): \(climbing.stderr)")
            XCTAssertTrue(climbing.stderr.contains("must be paths inside the backup"), climbing.stderr)
        }
        let resume = try f.run("restore", "--resume", "--path", "notes.txt")
        XCTAssertEqual(resume.status, 2, resume.stderr)
        XCTAssertTrue(resume.stderr.contains("--resume continues the recorded one"), resume.stderr)
        XCTAssertEqual(try f.tree(target), ["notes.txt": Data("call back".utf8)])
    }
}
