// The built `backup` binary, end to end, in temporary XDG homes: what a person or a cron job
// does, with the exit codes and JSON lines a script relies on.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class EndToEndTests: XCTestCase {
    private func initialised(_ extra: [String] = []) throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let result = try f.run(["init", "--source", f.source, "--remote", f.remote] + extra)
        XCTAssertEqual(result.status, 0, result.stderr)
        return f
    }

    private func uploaded(_ result: CLIResult, file: StaticString = #filePath, line: UInt = #line) -> Int {
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr, file: file, line: line)
        XCTAssertEqual(result.result?["status"] as? String, "completed", file: file, line: line)
        return result.result?["uploaded"] as? Int ?? -1
    }

    func testInitWritesAPrivateConfig() throws {
        let f = try initialised(["--group", "papers=docs/,required", "--exclude", "*.tmp"])
        let config = f.dir.path("config/backup/config")
        let text = try String(contentsOfFile: config, encoding: .utf8)
        XCTAssertTrue(text.contains("source = \(f.source)"))
        XCTAssertTrue(text.contains("group.papers = docs/"))
        XCTAssertTrue(text.contains("group.papers.required = yes"))
        XCTAssertTrue(text.contains("exclude = *.tmp"))
        let mode = (try FileManager.default.attributesOfItem(atPath: config)[.posixPermissions] as? NSNumber)?.intValue
        XCTAssertEqual(mode, 0o600)
    }

    func testFirstSyncNeedsConsentThenOnlyChangesUpload() throws {
        let f = try initialised()
        for i in 0..<5 { try f.write("dir\(i % 2)/file\(i).txt", "content \(i)") }

        let refused = try f.run("sync", "--json")
        XCTAssertEqual(refused.status, 3)
        XCTAssertEqual(refused.result?["reason"] as? String, "needsConsent")
        XCTAssertEqual(try f.tree(f.remote), [:], "nothing written without consent")

        XCTAssertEqual(uploaded(try f.run("sync", "--yes", "--json")), 5, "five files (the marker is counted apart)")
        XCTAssertEqual(uploaded(try f.run("sync", "--json")), 0, "consent is remembered; nothing changed")

        try f.write("dir1/file3.txt", "changed")
        let changed = try f.run("sync", "--json")
        XCTAssertEqual(uploaded(changed), 1, "only the change")
        XCTAssertEqual(changed.result?["marker_uploaded"] as? Bool, true)
        XCTAssertEqual(changed.result?["hashed"] as? Int, 1, "only the changed file is reread")
        XCTAssertEqual(try f.tree(f.remote)["dir1/file3.txt"], Data("changed".utf8))
        XCTAssertTrue(changed.jsonLines.contains { $0["event"] as? String == "progress" })
    }

    func testAFirstSyncReadsEachFileOnceAsItIsSentAndTheNextReadsNone() throws {
        let f = try initialised()
        var texts: [String: String] = [:]
        for i in 0..<300 {
            let path = "d\(i % 7)/f\(i).txt"
            texts[path] = "content \(i) " + String(repeating: "z", count: i * 31)
            try f.write(path, texts[path] ?? "")
        }
        // A preview reads in its scan: it uploads nothing that could read for it.
        let preview = try f.run("sync", "--dry-run", "--json")
        XCTAssertEqual(preview.jsonLines.first { $0["event"] as? String == "scanned" }?["hashed"] as? Int, 300, preview.stdout)

        let first = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(uploaded(first), 300)
        XCTAssertEqual(first.jsonLines.first { $0["event"] as? String == "scanned" }?["hashed"] as? Int, 0,
                       "a first sync's scan reads no file: each is read once, by its upload")
        XCTAssertEqual(first.result?["hashed"] as? Int, 300, "every file was hashed, as it was sent")
        XCTAssertEqual(first.jsonLines.first { $0["event"] as? String == "scanned" }?["hashed_when_sent"] as? Int, 300)
        XCTAssertEqual(preview.jsonLines.first { $0["event"] as? String == "scanned" }?["hashed_when_sent"] as? Int, 0)
        let state = try StateStore(path: f.dir.path("state/backup/default/sync.db"))
        let entries = try state.entries()
        let prints = try state.fingerprints()
        for (path, text) in texts {
            let hash = SHA256Hasher.hex(Data(text.utf8))
            XCTAssertEqual(entries[path]?.hash, hash, "\(path): the state records the hash of what was sent")
            XCTAssertEqual(prints[path]?.hash, hash, "\(path): the fingerprint cache holds it for the next scan")
        }
        XCTAssertEqual(try f.run("verify", "--read-data").status, 0, "the marker's hashes are the remote files' own")

        let next = try f.run("sync", "--json")
        XCTAssertEqual(uploaded(next), 0)
        XCTAssertEqual(next.result?["hashed"] as? Int, 0, "the fingerprints the uploads left spare every read")

        // Once the state holds hashes, a new file is read by the scan as before.
        try f.write("later.txt", "later")
        let later = try f.run("sync", "--json")
        XCTAssertEqual(uploaded(later), 1)
        XCTAssertEqual(later.jsonLines.first { $0["event"] as? String == "scanned" }?["hashed"] as? Int, 1)
        XCTAssertEqual(try StateStore(path: f.dir.path("state/backup/default/sync.db")).entries()["later.txt"]?.hash,
                       SHA256Hasher.hex(Data("later".utf8)))
    }

    /// The marker is made into a temporary file beside the state and uploaded from there; the
    /// file is gone afterwards, whether its upload landed or failed.
    func testTheMarkersTemporaryFileIsRemovedWhetherItsUploadLandsOrFails() throws {
        let f = try initialised()
        for i in 0..<20 { try f.write("d\(i % 3)/f\(i).txt", "content \(i)") }
        func leftovers() throws -> [String] {
            let state = f.dir.path("state")
            return (FileManager.default.enumerator(atPath: state)?.allObjects as? [String] ?? []).filter { $0.contains(".marker-upload.") }
        }
        XCTAssertEqual(uploaded(try f.run("sync", "--yes", "--json")), 20)
        XCTAssertEqual(try leftovers(), [])
        let restored = f.dir.path("restored")
        XCTAssertEqual(try f.run("restore", "--to", restored, "--json").status, 0, "the marker uploaded from the file is whole")
        XCTAssertEqual(try f.tree(restored)["d2/f5.txt"], Data("content 5".utf8))

        // A folder where the marker goes: its upload fails.
        try f.write("d0/new.txt", "new")
        let marker = f.remote + "/" + SyncEngine.defaultMarkerPath
        try FileManager.default.removeItem(atPath: marker)
        try FileManager.default.createDirectory(atPath: marker + "/in the way", withIntermediateDirectories: true)
        let failed = try f.run("sync", "--yes", "--json")
        XCTAssertNotEqual(failed.status, 0, failed.stdout + failed.stderr)
        XCTAssertEqual(try leftovers(), [])
    }

    func testRemovingMostOfTheSourceIsShrinkSuspectedAndDeletesNothing() throws {
        let f = try initialised()
        for i in 0..<10 { try f.write("f\(i).txt", "\(i)") }
        _ = uploaded(try f.run("sync", "--yes", "--json"))
        for i in 0..<8 { try FileManager.default.removeItem(atPath: f.source + "/f\(i).txt") }

        let result = try f.run("sync", "--json")
        XCTAssertEqual(result.status, 3)
        XCTAssertEqual(result.result?["reason"] as? String, "shrinkSuspected")
        XCTAssertEqual(try f.tree(f.remote).keys.filter { !$0.hasPrefix(".backup") }.count, 10, "nothing deleted")
        let human = try f.run("sync")
        XCTAssertTrue(human.stdout.contains("--allow-shrink"), human.stdout)

        let allowed = try f.run("sync", "--allow-shrink", "--json")
        XCTAssertEqual(allowed.result?["deleted"] as? Int, 8)
    }

    func testEmptySourceOnAFreshStateOverAnExistingBackupIsRestorePending() throws {
        let first = try initialised()
        for i in 0..<3 { try first.write("f\(i).txt", "\(i)") }
        _ = uploaded(try first.run("sync", "--yes", "--json"))

        // A new machine: empty source, fresh state, same remote.
        let second = try CLIFixture()
        addTeardownBlock { second.dir.cleanup() }
        XCTAssertEqual(try second.run("init", "--source", second.source, "--remote", first.remote).status, 0)
        let result = try second.run("sync", "--yes", "--json")
        XCTAssertEqual(result.status, 3)
        XCTAssertEqual(result.result?["reason"] as? String, "restorePending")
        XCTAssertEqual(try first.tree(first.remote).keys.filter { !$0.hasPrefix(".backup") }.count, 3)
    }

    func testHoldSetStopsSyncsAndClearLetsThemRun() throws {
        let f = try initialised()
        try f.write("a.txt", "a")
        XCTAssertEqual(try f.run("hold", "set", "disk swap").status, 0)
        XCTAssertTrue(try f.run("hold").stdout.contains("disk swap"))
        let held = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(held.status, 3)
        XCTAssertEqual(held.result?["reason"] as? String, "writeHeld")
        XCTAssertEqual(try f.tree(f.remote), [:])
        XCTAssertEqual(try f.run("hold", "clear").status, 0)
        XCTAssertEqual(uploaded(try f.run("sync", "--yes", "--json")), 1)
    }

    func testRestoreToANewFolderIsByteIdenticalIncludingANameThatIsNotUTF8() throws {
        let f = try initialised(["--group", "docs=docs/,required"])
        try f.write("docs/report.txt", "quarterly")
        try f.write("photos/日本.jpg", String(repeating: "jpeg", count: 1000))
        let latin1 = FileName.string(fromBytes: Array("caf".utf8) + [0xE9] + Array(".txt".utf8))
        let fd = FileName.withCString(f.source + "/" + latin1) { open($0, O_WRONLY | O_CREAT, 0o644) }
        XCTAssertEqual(write(fd, "latin-1 name", 12), 12)
        close(fd)
        _ = uploaded(try f.run("sync", "--yes", "--json"))

        let target = f.dir.path("restored")
        let result = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.result?["placed"] as? Int, 3)
        XCTAssertEqual(try f.tree(target), try f.tree(f.source))
        XCTAssertNotNil(try f.tree(target)[latin1])

        // A new machine with no profile restores from the remote URL alone.
        let other = f.dir.path("other")
        let bare = try f.run("restore", "--remote", f.remote, "--to", other, "--json")
        XCTAssertEqual(bare.status, 0, bare.stderr)
        XCTAssertEqual(try f.tree(other), try f.tree(f.source))
    }

    func testResumeAfterKillDashNineMidRestore() throws {
        let f = try initialised()
        for i in 0..<1500 { try f.write("d\(i % 15)/f\(i).bin", String(repeating: "\(i)", count: 2000)) }
        _ = uploaded(try f.run("sync", "--yes", "--json"))
        let target = f.dir.path("restored")

        let (process, out, _) = try f.process(["restore", "--to", target, "--json"])
        try process.run()
        // Kill once files are being placed, at no particular point.
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && process.isRunning {
            let placed = (try? FileManager.default.contentsOfDirectory(atPath: target))?.filter { $0.hasPrefix("d") }.count ?? 0
            if placed >= 3 { break }
            usleep(2000)
        }
        let killedMidway = process.isRunning
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        _ = out.fileHandleForReading.readDataToEndOfFile()
        XCTAssertTrue(killedMidway, "the restore ended before it could be killed; make the tree bigger")

        let resumed = try f.run("restore", "--to", target, "--resume", "--json")
        XCTAssertEqual(resumed.status, 0, resumed.stdout + resumed.stderr)
        XCTAssertEqual(try f.tree(target), try f.tree(f.source))
    }

    func testRestoreIntoTheSourceSeedsTheStateSoTheNextSyncUploadsNothing() throws {
        let f = try initialised()
        for i in 0..<4 { try f.write("f\(i).txt", "\(i)") }
        _ = uploaded(try f.run("sync", "--yes", "--json"))
        // Lose the source and the state (a new disk): restore into the source.
        try FileManager.default.removeItem(atPath: f.source)
        try FileManager.default.createDirectory(atPath: f.source, withIntermediateDirectories: true)
        XCTAssertEqual(try f.run("forget").status, 0)
        XCTAssertEqual(try f.run("restore", "--json").status, 0)
        // Forgetting the state forgot the consent too: writing needs it again.
        let next = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(uploaded(next), 0, next.stdout)
        XCTAssertEqual(next.result?["hashed"] as? Int, 0, "the restore's fingerprints spare the reread")
    }

    func testABadConfigNamesTheFileTheLineAndTheKey() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let config = try f.dir.write("bad.cfg", Data("[default]\nsource = /x\nremote = /y\ncolour = blue\n".utf8))
        let result = try f.run("--config", config, "sync")
        XCTAssertEqual(result.status, 2)
        XCTAssertTrue(result.stderr.hasPrefix("backup: \(config):4: unknown key \"colour\" in [default]; known keys: source, remote"), result.stderr)
        XCTAssertEqual(try f.tree(f.remote), [:])
    }

    func testAnUnreadableFolderNeverDeletesWhatTheBackupHoldsOfIt() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        f.asNobody = true
        for folder in ["", "home", "source", "remote"] { chmod(f.dir.path(folder), 0o777) }
        try f.write("open/a.txt", "a")
        try f.write("private/notes.txt", "secret notes")
        try f.write("private/disk.img", "size compared")
        try f.write("private/deep/more.txt", "more")
        for path in ["source/open", "source/private", "source/private/deep"] { chmod(f.dir.path(path), 0o777) }
        for path in ["source/open/a.txt", "source/private/notes.txt", "source/private/disk.img", "source/private/deep/more.txt"] {
            chmod(f.dir.path(path), 0o666)
        }
        let initialised = try f.run("init", "--source", f.source, "--remote", f.remote)
        XCTAssertEqual(initialised.status, 0, initialised.stderr)
        let config = f.dir.path("config/backup/config")
        var text = try String(contentsOfFile: config, encoding: .utf8)
        text += "size_compared = *.img\n"
        try text.write(toFile: config, atomically: true, encoding: .utf8)
        let first = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(first.result?["uploaded"] as? Int, 4, first.stdout + first.stderr)

        // The folder becomes unreadable (a permission change, a mount gone wrong).
        chmod(f.dir.path("source/private"), 0o000)
        defer { chmod(f.dir.path("source/private"), 0o777) }
        let second = try f.run("sync", "--json", "--allow-shrink")
        XCTAssertEqual(second.status, 0, second.stdout + second.stderr)
        XCTAssertEqual(second.result?["deleted"] as? Int, 0, "nothing below the unreadable folder is deleted")
        XCTAssertTrue(second.jsonLines.contains { $0["event"] as? String == "note" && ($0["path"] as? String ?? "").hasPrefix("private") },
                      "the unreadable folder is reported")
        let remote = try f.tree(f.remote)
        for path in ["private/notes.txt", "private/disk.img", "private/deep/more.txt"] { XCTAssertNotNil(remote[path], path) }
    }

    func testSyncKilledDashNineLosesAtMostTheWritesInFlight() throws {
        let f = try initialised()
        for i in 0..<2000 { try f.write("d\(i % 20)/f\(i).bin", String(repeating: "y", count: 3000)) }
        let (process, out, _) = try f.process(["sync", "--yes", "--json"])
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && process.isRunning {
            if ((try? FileManager.default.contentsOfDirectory(atPath: f.remote)) ?? []).count >= 5 { break }
            usleep(1000)
        }
        XCTAssertTrue(process.isRunning, "the sync ended before it could be killed")
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        _ = out.fileHandleForReading.readDataToEndOfFile()

        // Every file the state records is on the remote with its size; at most the uploads in
        // flight (transfers, 4) are on the remote but not yet recorded.
        let state = try StateStore(path: f.dir.path("state/backup/default/sync.db"))
        let recorded = try state.entries()
        // (A killed upload leaves its temporary file; the listing never shows it.)
        let isOurs = { (path: String) in path.hasPrefix(".backup") || path.contains("/.backup-tmp.") }
        let remote = try f.tree(f.remote).filter { !isOurs($0.key) }
        for (path, entry) in recorded { XCTAssertEqual(Int64(remote[path]?.count ?? -1), entry.size, path) }
        XCTAssertLessThanOrEqual(Set(remote.keys).subtracting(recorded.keys).count, 4)
        XCTAssertLessThan(recorded.count, 2000, "killed midway")

        let next = try f.run("sync", "--json")
        XCTAssertEqual(next.status, 0, next.stderr)
        XCTAssertLessThanOrEqual(next.result?["uploaded"] as? Int ?? 9999, 2000 - recorded.count + 4)
        XCTAssertEqual(try f.tree(f.remote).keys.filter { !isOurs($0) }.count, 2000)
    }

    func testErrorsInJSONModeEndWithAResultLine() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let result = try f.run("sync", "--json")
        XCTAssertEqual(result.status, 2)
        XCTAssertEqual(result.result?["status"] as? String, "failed")
        XCTAssertEqual(result.result?["error"] as? String, "usage")
        XCTAssertEqual(result.result?["exit"] as? Int, 2)
        XCTAssertTrue((result.result?["message"] as? String)?.contains("backup init") ?? false)
    }

    func testUsageErrorsExitTwo() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let unknown = try f.run("sync", "--frobnicate")
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.contains("unknown option --frobnicate"), unknown.stderr)
        XCTAssertEqual(try f.run("restore", "--place", "sometimes").status, 2)
        // init creates a missing remote folder only under an existing parent (issue 11, item 13).
        let missingRemote = try f.run("init", "--source", f.source, "--remote", f.dir.path("not-mounted/backup"))
        XCTAssertEqual(missingRemote.status, 2)
        XCTAssertTrue(missingRemote.stderr.contains("does not exist"), missingRemote.stderr)
        let noProfile = try f.run("sync")
        XCTAssertEqual(noProfile.status, 2)
        XCTAssertTrue(noProfile.stderr.contains("backup init"), noProfile.stderr)
    }

    func testASecondRunOfOneProfileExitsThreeNamingTheFirst() throws {
        let f = try initialised()
        // Hold the profile's lock as a running backup would.
        let lockPath = f.dir.path("state/backup/default/lock")
        try FileManager.default.createDirectory(atPath: f.dir.path("state/backup/default"), withIntermediateDirectories: true)
        let fd = open(lockPath, O_RDWR | O_CREAT, 0o600)
        XCTAssertEqual(flock(fd, LOCK_EX), 0)
        _ = "4242\n".withCString { write(fd, $0, 5) }
        defer { close(fd) }
        let result = try f.run("sync", "--yes")
        XCTAssertEqual(result.status, 3)
        XCTAssertTrue(result.stderr.contains("pid 4242"), result.stderr)
    }

    func testInterruptedSyncExits130AndTheNextRunContinues() throws {
        let f = try initialised()
        for i in 0..<3000 { try f.write("d\(i % 30)/f\(i).bin", String(repeating: "x", count: 3000)) }
        let (process, out, _) = try f.process(["sync", "--yes", "--json"])
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline && process.isRunning {
            if ((try? FileManager.default.contentsOfDirectory(atPath: f.remote)) ?? []).count >= 3 { break }
            usleep(2000)
        }
        XCTAssertTrue(process.isRunning, "the sync ended before it could be interrupted")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        _ = out.fileHandleForReading.readDataToEndOfFile()
        XCTAssertEqual(process.terminationStatus, 130)
        let next = try f.run("sync", "--json")
        XCTAssertEqual(next.status, 0, next.stderr)
        XCTAssertLessThan(next.result?["uploaded"] as? Int ?? 0, 3001, "the first run's uploads are not repeated")
        XCTAssertEqual(try f.tree(f.remote).keys.filter { !$0.hasPrefix(".backup") }.count, 3000)
    }
}
