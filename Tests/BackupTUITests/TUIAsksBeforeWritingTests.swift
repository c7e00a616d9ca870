// Nothing writes without the person asking for that write, in the real binary in tmux: Enter
// on a profile shows it (and `s` syncs); clearing a hold from the sync screen only clears it
// (and `s` syncs); placing a group over a local file that differs asks a second time, keeps
// the local file by default and overwrites it only on `o`. And the words it says of a run are
// what happened (the marker apart, credentials before the scan); Ctrl-L paints it all again.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class TUIAsksBeforeWritingTests: XCTestCase {
    private typealias Home = TUIEndToEndTests.Home

    private func backedUp() throws -> Home {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        return home
    }

    private func tmux(_ home: Home, _ arguments: [String], extra: [String: String] = [:]) throws -> Tmux {
        let tmux = try Tmux(width: 100, height: 30, arguments: arguments,
                            environment: home.environment.merging(extra) { _, new in new }, directory: home.dir.path)
        addTeardownBlock { tmux.kill() }
        return tmux
    }

    private func onRemote(_ home: Home, _ path: String) -> Bool {
        FileManager.default.fileExists(atPath: home.remote + "/" + path)
    }

    /// `s` runs the sync that nothing before it started: new.txt lands, and the TUI quits with 0.
    private func syncsOnS(_ tmux: Tmux, _ home: Home, file: StaticString = #filePath, line: UInt = #line) throws {
        try tmux.press("s")
        try tmux.wait(for: "Completed: 1 file uploaded", file: file, line: line)
        XCTAssertTrue(onRemote(home, "new.txt"), file: file, line: line)
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(file: file, line: line), 0, file: file, line: line)
    }

    func testEnterOnAProfileShowsItAndSyncsNothing() throws {
        let home = try backedUp()
        try home.write("new.txt", "not backed up yet")
        let tmux = try tmux(home, [])
        try tmux.wait(for: "synced ")
        try tmux.press("Enter")
        let shown = try tmux.wait(for: "papers (required): papers/")
        XCTAssertTrue(shown.contains("profile \"default\""), shown)
        XCTAssertTrue(shown.contains(home.remote), shown)
        XCTAssertFalse(shown.contains("Syncing") || shown.contains("Completed"), shown)
        XCTAssertFalse(onRemote(home, "new.txt"), "Enter started a sync")
        try syncsOnS(tmux, home)
    }

    func testClearingAHoldFromTheSyncScreenOnlyClearsIt() throws {
        let home = try backedUp()
        try home.write("new.txt", "not backed up yet")
        XCTAssertEqual(try home.scripted(["hold", "set", "moving the disk"]), 0)
        let tmux = try tmux(home, ["sync"])
        try tmux.wait(for: "Not synced")
        try tmux.press("h")
        try tmux.wait(for: "moving the disk")
        try tmux.press("c")
        try tmux.wait(for: "No write hold is set")
        try tmux.press("Escape")
        let back = try tmux.wait(for: "The hold is cleared now")
        XCTAssertTrue(back.contains("run the sync again"), back)
        XCTAssertFalse(onRemote(home, "new.txt"), "clearing the hold started the sync")
        try syncsOnS(tmux, home)
    }

    func testAHoldSetWhileTheSyncRunsSaysWhatWasUploadedBeforeIt() throws {
        // A throttled WebDAV server: the second, larger file is still uploading when the hold
        // is set from another process; the run stops before the marker and says what it wrote.
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try home.dir.makeFolder("webdav-root"), extraArguments: ["--bwlimit", "200k"])
        addTeardownBlock { server.stop() }
        try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
        try home.write("a.txt", "small")
        try home.write("b.bin", String(repeating: "0123456789abcdef", count: 65_536))
        let password = ["BACKUP_PASSWORD": server.secret]
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", "webdav://\(server.user)@127.0.0.1:\(server.port)/backup"]), 0)
        let configPath = home.dir.path("config/backup/config")
        let config = try String(contentsOfFile: configPath, encoding: .utf8)
        try (config + "transfers = 1\n").write(toFile: configPath, atomically: true, encoding: .utf8)

        let tmux = try tmux(home, ["sync", "--yes"], extra: password)
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: server.root + "/backup/a.txt") && Date() < deadline { usleep(10_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: server.root + "/backup/a.txt"), "the first upload never landed")
        XCTAssertEqual(try home.scripted(["hold", "set", "swapping the disk"]), 0)
        let stopped = try tmux.wait(for: "Stopped by the write hold")
        let words = stopped.replacingOccurrences(of: "\n ", with: " ")
        XCTAssertTrue(words.contains("Stopped by the write hold (swapping the disk) after 2 files uploaded (1.0 MiB)"), stopped)
        XCTAssertFalse(words.contains("nothing was written"), stopped)
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.root + "/backup/" + SyncEngine.defaultMarkerPath), "the marker was written after the hold")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 3)
    }

    func testPlacingOverADifferingLocalFileAsksAgainKeepsMineByDefaultAndOverwritesOnlyOnO() throws {
        let home = try backedUp()
        let target = home.dir.path("restored")
        try home.dir.write("restored/papers/tax-1.txt", Data("my own edit".utf8))
        let tmux = try tmux(home, ["restore", "--to", target])
        try tmux.wait(for: "Place group \"papers (required)\"?")
        try tmux.press("p")
        let asked = try tmux.wait(for: "Overwrite your files in \"papers (required)\"?")
        XCTAssertTrue(asked.contains("papers/tax-1.txt"), asked)
        XCTAssertTrue(asked.contains("k keep mine"), asked)
        try tmux.press("Enter")
        try tmux.wait(for: "Place group \"photos\"?")
        try tmux.press("p")
        try tmux.wait(for: "Place group \"(other files)\"?")
        try tmux.press("p")
        try tmux.wait(for: "Incomplete:")
        try tmux.press("q")
        _ = try tmux.exitStatus()
        XCTAssertEqual(FileManager.default.contents(atPath: target + "/papers/tax-1.txt"), Data("my own edit".utf8), "keep mine replaced it")
        XCTAssertEqual(FileManager.default.contents(atPath: target + "/papers/tax-2.txt"), Data("tax year 2".utf8))
        XCTAssertEqual(FileManager.default.contents(atPath: target + "/todo.txt"), Data("call the plumber".utf8))

        // Asked again on --resume: Esc goes back to the group's question, `o` overwrites.
        let resume = try self.tmux(home, ["restore", "--resume", "--to", target])
        try resume.wait(for: "The record of the unfinished restore:")
        try resume.press("Enter")
        try resume.wait(for: "Place group \"papers (required)\"?")
        try resume.press("p")
        try resume.wait(for: "Overwrite your files in \"papers (required)\"?")
        try resume.press("Escape")
        try resume.wait(for: "Place group \"papers (required)\"?")
        XCTAssertEqual(FileManager.default.contents(atPath: target + "/papers/tax-1.txt"), Data("my own edit".utf8))
        try resume.press("p")
        try resume.wait(for: "Overwrite your files in \"papers (required)\"?")
        try resume.press("o")
        try resume.wait(for: "Completed:")
        try resume.press("q")
        XCTAssertEqual(try resume.exitStatus(), 0)
        XCTAssertEqual(home.tree(target), home.tree(home.source))
    }
}

/// What the TUI says of a run is what happened, in the real binary in tmux.
final class TUITruthfulWordsTests: XCTestCase {
    private func freshHome() throws -> TUIEndToEndTests.Home {
        let home = try TUIEndToEndTests.Home()
        addTeardownBlock { home.dir.cleanup() }
        return home
    }

    private func tmux(_ home: TUIEndToEndTests.Home, _ arguments: [String]) throws -> Tmux {
        let tmux = try Tmux(width: 100, height: 30, arguments: arguments, environment: home.environment, directory: home.dir.path)
        addTeardownBlock { tmux.kill() }
        return tmux
    }

    /// A profile over one 6-byte file and a folder remote, its first sync running in tmux.
    private func syncingASixByteFile() throws -> Tmux {
        let home = try freshHome()
        try home.write("tiny.txt", "sixby\n")
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote]), 0)
        return try tmux(home, ["sync", "--yes"])
    }

    func testMissingCredentialsAreSaidBeforeTheSourceIsScanned() throws {
        let home = try freshHome()
        for i in 0..<200 { try home.write("docs/file\(i).txt", "contents \(i)") }
        // No BACKUP_PASSWORD and no password_command: the run cannot list or write; nothing
        // listens on port 9 either, and nothing tries it.
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", "webdav://alice@127.0.0.1:9/backup"]), 0)
        let tmux = try tmux(home, ["sync", "--yes"])
        let screen = try tmux.wait(for: "there are no credentials")
        XCTAssertTrue(screen.contains("Not synced"), screen)
        XCTAssertFalse(screen.contains("Scanned"), "the source was scanned for a run that could not start: \(screen)")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 3)
    }

    /// The hold screen shows the hold as it is now: one set or cleared by another process
    /// (`backup hold`, a script) while it is open replaces what it showed, reason and all.
    func testTheHoldScreenShowsAHoldAnotherProcessSetsOrClears() throws {
        let home = try freshHome()
        try home.backUpSample()
        let tmux = try tmux(home, [])
        try tmux.wait(for: "▸ default")
        try tmux.press("h")
        try tmux.wait(for: "No write hold is set on \"default\".")
        XCTAssertEqual(try home.scripted(["hold", "set", "moving the NAS"]), 0)
        try tmux.waitAll(["The write hold is set on \"default\":", "moving the NAS"], timeout: 10)
        XCTAssertEqual(try home.scripted(["hold", "set", "checking the disk"]), 0)
        let changed = try tmux.wait(for: "checking the disk", timeout: 10)
        XCTAssertFalse(changed.contains("moving the NAS"), "the old reason stays on screen: \(changed)")
        XCTAssertEqual(try home.scripted(["hold", "clear"]), 0)
        let cleared = try tmux.wait(for: "No write hold is set on \"default\".", timeout: 10)
        XCTAssertFalse(cleared.contains("checking the disk"), cleared)
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testCtrlLPaintsTheWholeScreenAgainAfterAnotherProgramWroteOverIt() throws {
        let home = try freshHome()
        try home.backUpSample()
        let tmux = try tmux(home, [])
        // The whole frame, down to the footer (a capture can come while curses writes it).
        let before = try tmux.waitAll(["synced ", "Hold       none", "Next sync  nothing to upload or delete", " q quit"])
        // Another program writes straight to the terminal, over the interface.
        let tty = try tmux.format("#{pane_tty}")
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: tty))
        handle.write(Data("\u{1B}[5;3HSCRIBBLED-OVER-BY-SOMETHING-ELSE".utf8))
        try handle.close()
        try tmux.wait(for: "SCRIBBLED-OVER")
        try tmux.press("C-l")
        let after = try tmux.wait(for: "the scribble to go") { !$0.contains("SCRIBBLED") && $0.contains("synced ") && $0.contains(" q quit") }
        XCTAssertEqual(after, before, "the repainted screen is the one drawn before")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testQuittingLeavesTheLastJobsOutcomeOnTheTerminal() throws {
        let tmux = try syncingASixByteFile()
        try tmux.wait(for: "Completed:")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
        let after = try tmux.screen()
        let summary = after.split(separator: "\n").filter { $0.hasPrefix("backup: ") }
        XCTAssertEqual(summary.count, 1, after)
        XCTAssertTrue(summary.first?.hasPrefix("backup: sync \"default\": Completed: 1 file uploaded (6 B), 0 deleted, 0 unchanged.") == true, after)
        XCTAssertEqual(try tmux.format("#{alternate_on}"), "0", "the interface's screen is gone")
    }

    func testASixByteFileIsReportedAsSixBytesAndTheMarkerApart() throws {
        let tmux = try syncingASixByteFile()
        let done = try tmux.wait(for: "unchanged.").replacingOccurrences(of: "\n ", with: " ")
        XCTAssertTrue(done.contains("Completed: 1 file uploaded (6 B), 0 deleted, 0 unchanged."), done)
        XCTAssertTrue(done.contains("The backup's marker was written ("), done)
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }
}
