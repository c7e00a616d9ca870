// Restore against a damaged or hostile folder remote and a tampered local side, through the
// real binary: what is refused, what exit status says so, and that nothing outside the target
// changes. (The hostile WebDAV server's attacks are in HostileRemoteTests.)

import BackupApp
import BackupEngine
import BackupTestSupport
import BackupTree
import Foundation
import XCTest

final class RestoreHardeningTests: XCTestCase {
    private func backedUp(_ files: [(String, String)], _ extra: [String] = []) throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        XCTAssertEqual(try f.run(["init", "--source", f.source, "--remote", f.remote] + extra).status, 0)
        for (path, text) in files { try f.write(path, text) }
        let synced = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(synced.status, 0, synced.stderr)
        return f
    }

    private var recordPath: (CLIFixture) -> String { { $0.dir.path("state/backup/default/restore.db") } }

    /// Runs SQL on the restore record, as someone editing it by hand would.
    private func editRecord(_ path: String, _ sql: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()", path, sql]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "python3 could not edit the record")
    }

    // MARK: The record's stored target (item 5, record version 2)

    func testResumeContinuesIntoTheStoredTargetNotTheProfileSource() throws {
        let f = try backedUp([("papers/a.txt", "alpha"), ("papers/b.txt", "bravo")], ["--group", "papers=papers/,required"])
        let target = f.dir.path("restored")
        try f.dir.write("restored/papers/a.txt", Data("a local edit".utf8))  // a conflict: the group waits
        let first = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(first.status, 4, first.stdout + first.stderr)
        let sourceBefore = try f.tree(f.source)

        let resumed = try f.run("restore", "--resume", "--overwrite", "--json")
        XCTAssertEqual(resumed.status, 0, resumed.stdout + resumed.stderr)
        XCTAssertEqual(resumed.result?["target"] as? String, target)
        XCTAssertEqual(try f.tree(target), ["papers/a.txt": Data("alpha".utf8), "papers/b.txt": Data("bravo".utf8)])
        XCTAssertEqual(try f.tree(f.source), sourceBefore, "the resume wrote into the profile's source")
    }

    func testResumeWithAnotherTargetIsRefusedWithTheCommandThatContinues() throws {
        let f = try backedUp([("papers/a.txt", "alpha")], ["--group", "papers=papers/,required"])
        let target = f.dir.path("restored")
        try f.dir.write("restored/papers/a.txt", Data("a local edit".utf8))
        XCTAssertEqual(try f.run("restore", "--to", target).status, 4)

        let elsewhere = f.dir.path("elsewhere")
        let refused = try f.run("restore", "--to", elsewhere, "--resume")
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(refused.stderr.contains(target), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("backup restore --profile default --to \(target) --resume"), "the whole command: \(refused.stderr)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: elsewhere), "a refused resume created its --to")
    }

    func testTheResumeCommandIsWholeAndQuotedForTheShell() {
        let profile = Profile(name: "work", source: "/home/alice", remote: "/mnt/backup")
        XCTAssertEqual(BackupApp.resumeCommand(profile: profile, remoteURL: nil, target: "/home/alice"),
                       "backup restore --profile work --resume", "into the source, --to says nothing")
        XCTAssertEqual(BackupApp.resumeCommand(profile: profile, remoteURL: nil, target: "/tmp/it's here"),
                       "backup restore --profile work --to '/tmp/it'\\''s here' --resume")
        XCTAssertEqual(BackupApp.resumeCommand(profile: nil, remoteURL: "/mnt/other disk", target: "/srv/restored"),
                       "backup restore --remote '/mnt/other disk' --to /srv/restored --resume")
    }

    func testTheRecordNamesNoLocalPath() throws {
        let f = try backedUp([("papers/a.txt", "alpha")], ["--group", "papers=papers/,required"])
        let target = f.dir.path("restored")
        try f.dir.write("restored/papers/a.txt", Data("a local edit".utf8))
        XCTAssertEqual(try f.run("restore", "--to", target).status, 4)
        let record = try RestoreRecord(path: recordPath(f))
        XCTAssertEqual(try record.target(), target)
        for recorded in try record.files() {
            XCTAssertFalse(recorded.file.placePath.hasPrefix("/"), recorded.file.placePath)
            XCTAssertFalse(recorded.file.placePath.contains(target), recorded.file.placePath)
        }
    }

    func testAnEditedPlacePathInTheRecordCannotWriteOutsideTheTarget() throws {
        let f = try backedUp([("papers/a.txt", "alpha")], ["--group", "papers=papers/,required"])
        let target = f.dir.path("restored")
        try f.dir.write("restored/papers/a.txt", Data("a local edit".utf8))
        XCTAssertEqual(try f.run("restore", "--to", target).status, 4)
        try editRecord(recordPath(f), "UPDATE restore_files SET place_path = '../escaped.txt', status = 0;")

        let resumed = try f.run("restore", "--resume", "--overwrite", "--json")
        XCTAssertEqual(resumed.status, 5, resumed.stdout + resumed.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.dir.path("escaped.txt")), "the edited record wrote outside the target")
        XCTAssertTrue(resumed.stdout.contains("refusedPath"), resumed.stdout)
    }

    // MARK: Files staged by an earlier run (item 5)

    func testAStagedFileChangedBetweenRunsIsCheckedAgainBeforeItIsPlaced() throws {
        let f = try backedUp([("papers/a.txt", "alpha")], ["--group", "papers=papers/,required"])
        let target = f.dir.path("restored")
        try f.dir.write("restored/papers/a.txt", Data("a local edit".utf8))
        XCTAssertEqual(try f.run("restore", "--to", target).status, 4)
        // The staged copy is swapped for other bytes of the same size.
        let staged = target + "/.backup-staging/papers/a.txt"
        XCTAssertEqual(FileManager.default.contents(atPath: staged), Data("alpha".utf8))
        try Data("ALPHA".utf8).write(to: URL(fileURLWithPath: staged))

        let resumed = try f.run("restore", "--resume", "--overwrite")
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
        XCTAssertEqual(FileManager.default.contents(atPath: target + "/papers/a.txt"), Data("alpha".utf8),
                       "a staged file changed since the last run was placed without being checked")
    }

    // MARK: Symlinked staging (item 2)

    func testALinkAtTheStagingFolderIsNeverWrittenThrough() throws {
        let f = try backedUp([("papers/a.txt", "alpha"), ("b.txt", "bravo")])
        let target = f.dir.path("restored")
        try f.dir.makeFolder("restored")
        try f.dir.makeFolder("outside")
        XCTAssertEqual(symlink(f.dir.path("outside"), target + "/.backup-staging"), 0)
        let result = try f.run("restore", "--to", target, "--json")
        XCTAssertNotEqual(result.status, 0, result.stdout)
        XCTAssertEqual(try f.dir.entries(under: "outside"), [], "a download went through the link")
    }

    func testALinkInsideTheStagingFolderIsNeverWrittenThrough() throws {
        let f = try backedUp([("papers/a.txt", "alpha"), ("b.txt", "bravo")])
        let target = f.dir.path("restored")
        try f.dir.makeFolder("restored/.backup-staging")
        try f.dir.makeFolder("outside")
        XCTAssertEqual(symlink(f.dir.path("outside"), target + "/.backup-staging/papers"), 0)
        let result = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(result.status, 5, result.stdout + result.stderr)
        XCTAssertEqual(try f.dir.entries(under: "outside"), [], "a download went through the link")
        XCTAssertEqual(FileManager.default.contents(atPath: target + "/b.txt"), Data("bravo".utf8), "the other files are restored")
    }

    // MARK: Checked bodies (items 3, 4)

    func testAHashMismatchIsReportedInTextAndJSONWithExit5AndNotPlaced() throws {
        let f = try backedUp([("a.txt", "alpha"), ("b.txt", "bravo")])
        try Data("ALPHA".utf8).write(to: URL(fileURLWithPath: f.remote + "/a.txt"))  // damaged, same size

        let text = try f.run("restore", "--to", f.dir.path("t1"))
        XCTAssertEqual(text.status, 5, text.stderr)
        XCTAssertTrue(text.stderr.contains("hash mismatch") && text.stderr.contains("a.txt"), text.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.dir.path("t1/a.txt")), "a damaged file was placed")
        XCTAssertEqual(FileManager.default.contents(atPath: f.dir.path("t1/b.txt")), Data("bravo".utf8))

        let json = try f.run("restore", "--to", f.dir.path("t2"), "--json")
        XCTAssertEqual(json.status, 5)
        let errors = json.jsonLines.filter { $0["event"] as? String == "error" }
        XCTAssertEqual(errors.first?["error"] as? String, "hashMismatch", json.stdout)
        XCTAssertEqual(errors.first?["path"] as? String, "a.txt", json.stdout)
    }

    func testAListedTotalLargerThanTheFreeSpaceIsRefusedBeforeAnyDownload() throws {
        let f = try backedUp([("a.txt", "alpha")])
        // A sparse file the remote lists at 15 TiB: no disk here has that free.
        let fd = open(f.remote + "/huge.bin", O_WRONLY | O_CREAT, 0o644)
        XCTAssertEqual(ftruncate(fd, 15 << 40), 0)
        close(fd)
        let target = f.dir.path("restored")
        let result = try f.run("restore", "--to", target)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("free"), result.stderr)
        XCTAssertEqual(try f.tree(target), [:], "something was downloaded")
    }

    func testAMarkerLargerThanTheBackupCanNeedIsRefusedWithExit5() throws {
        let f = try backedUp([("a.txt", "alpha")])
        // Valid marker lines, 16 MiB of them once inflated (the limit is 8 MiB and 1 KiB per
        // listed file), for a remote of two files; each line names its own path, so only the
        // size can refuse them.
        var lines = Data()
        var index = 0
        while lines.count < 16 << 20 {
            lines.append(Data("H \(String(repeating: "0", count: 64)) x\(String(format: "%09d", index))\n".utf8))
            index += 1
        }
        var marker = Data("BKMARK".utf8)
        marker.append(1)
        marker.append(try Zlib.compress(lines))
        try marker.write(to: URL(fileURLWithPath: f.remote + "/" + SyncEngine.defaultMarkerPath))
        let (result, peak) = try f.runMeasuringPeakMemory(["restore", "--to", f.dir.path("restored")])
        XCTAssertEqual(result.status, 5, result.stderr)
        XCTAssertTrue(result.stderr.contains("marker"), result.stderr)
        XCTAssertGreaterThan(peak, 0)
        XCTAssertLessThan(peak, 80 << 10, "the refused marker was inflated into memory (peak \(peak) KiB)")
    }

    func testAMarkerFileLargerThanTheBackupCanNeedIsNotReadAtAll() throws {
        let f = try backedUp([("a.txt", "alpha")])
        // 64 MiB of marker for a remote of two files: refused from its listed size alone.
        let fd = open(f.remote + "/" + SyncEngine.defaultMarkerPath, O_WRONLY | O_TRUNC)
        XCTAssertEqual(write(fd, "BKMARK\u{1}", 7), 7)
        XCTAssertEqual(ftruncate(fd, 64 << 20), 0)
        close(fd)
        let (result, peak) = try f.runMeasuringPeakMemory(["restore", "--to", f.dir.path("restored")])
        XCTAssertEqual(result.status, 5, result.stderr)
        XCTAssertTrue((result.stdout + result.stderr).contains("damaged or was not written by backup"), result.stdout + result.stderr)
        XCTAssertLessThan(peak, 60 << 10, "the marker was read into memory (peak \(peak) KiB)")
    }

    // MARK: Leftovers after kills (item 12)

    func testACompletedRestoreAfterTenKillsLeavesExactlyTheRestoredTree() throws {
        var files: [(String, String)] = []
        for i in 0..<60 { files.append(("d\(i % 6)/f\(i).bin", String(repeating: "\(i)-", count: 40_000))) }
        let f = try backedUp(files)
        let target = f.dir.path("restored")
        var generator = SystemRandomNumberGenerator()
        for round in 0..<10 {
            let (process, out, _) = try f.process(["restore", "--to", target, "--json"] + (round == 0 ? [] : ["--resume"]))
            try process.run()
            usleep(UInt32.random(in: 20_000...250_000, using: &generator))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            _ = out.fileHandleForReading.readDataToEndOfFile()
        }
        // What a kill in the middle of a download leaves (too quick here to hit by chance).
        try f.dir.write("restored/.backup-staging/d1/.backup-tmp.0123abcd", Data("half a download".utf8))
        var final = try f.run("restore", "--to", target, "--resume")
        if final.stderr.contains("no restore to resume") { final = try f.run("restore", "--to", target) }
        XCTAssertEqual(final.status, 0, final.stderr)
        XCTAssertEqual(try f.tree(target), try f.tree(f.source))
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + "/" + RestoreTarget.stagingName), "staging left behind")
        let everything = FileManager.default.enumerator(atPath: target)?.allObjects as? [String] ?? []
        XCTAssertEqual(everything.filter { $0.contains(".backup-tmp") }, [], "temporary files left behind")
    }
}

final class RestoreMessagesTests: XCTestCase {
    func testAnIncompleteRestoreWithoutAProfileNamesTheWholeCommandThatContinues() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote, "--group", "papers=papers/,required").status, 0)
        try f.write("papers/a.txt", "alpha")
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        let target = f.dir.path("bare")
        try f.dir.write("bare/papers/a.txt", Data("a local edit".utf8))  // a conflict: the group waits
        let result = try f.run("restore", "--remote", f.remote, "--to", target)
        XCTAssertEqual(result.status, 4, result.stdout + result.stderr)
        let command = "backup restore --remote \(f.remote) --to \(target) --resume"
        XCTAssertTrue((result.stdout + result.stderr).contains(command), result.stdout + result.stderr)
        let continued = try f.run(["restore", "--remote", f.remote, "--to", target, "--resume", "--overwrite"])
        XCTAssertEqual(continued.status, 0, continued.stdout + continued.stderr)
    }

    func testAFolderLinkInTheTargetIsReportedNotRetriedSilently() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        try f.write("docs/a.txt", "alpha")
        try f.write("b.txt", "bravo")
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        let target = f.dir.path("restored")
        try f.dir.makeFolder("restored")
        try f.dir.makeFolder("outside")
        XCTAssertEqual(symlink(f.dir.path("outside"), target + "/docs"), 0)
        let result = try f.run("restore", "--to", target, "--overwrite", "--json")
        let errors = result.jsonLines.filter { $0["event"] as? String == "error" }
        XCTAssertEqual(errors.compactMap { $0["path"] as? String }, ["docs/a.txt"], result.stdout)
        XCTAssertTrue((errors.first?["message"] as? String ?? "").contains("link"), result.stdout)
        XCTAssertEqual(try f.dir.entries(under: "outside"), [], "written through the link")
    }
}
