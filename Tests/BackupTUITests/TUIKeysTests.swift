// The keys as users of htop, tig, lazygit and mc expect them, in the real binary in tmux: a
// text field edits at its cursor (←/→/Home/End, Ctrl-A/E/W), `?` and `q` are typed there and
// F1 opens help; `~` is the home folder; an Alt chord or an unknown escape sequence never acts
// as Esc; at 40x12 the footer keeps help and quit; with TERM=dumb the commands run scripted.

import BackupTestSupport
import Foundation
import XCTest

final class TUIKeysTests: XCTestCase {
    private typealias Home = TUIEndToEndTests.Home

    private func tmux(_ home: Home, width: Int = 100, height: Int = 30, _ arguments: [String] = [], extra: [String: String] = [:]) throws -> Tmux {
        let tmux = try Tmux(width: width, height: height, arguments: arguments,
                            environment: home.environment.merging(extra) { _, new in new }, directory: home.dir.path)
        addTeardownBlock { tmux.kill() }
        return tmux
    }

    func testTheFirstRunFormEditsAtTheCursorTypesQuestionMarksAndTakesTildeAsHome() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.dir.makeFolder("home/Documents")
        try home.dir.write("home/Documents/letter.txt", Data("dear".utf8))
        let tmux = try tmux(home)
        try tmux.wait(for: "set up your first backup")
        // "~/Dcuments", fixed at the cursor: ← eight times, → once, then the missing "o".
        try tmux.type("~/Dcuments")
        for _ in 0..<8 { try tmux.press("Left") }
        try tmux.press("Right")
        try tmux.type("o")
        // A word typed after End and taken back with Ctrl-W; "?" and "q" are typed, not acted on.
        try tmux.press("End")
        try tmux.type("/extra?q")
        var screen = try tmux.wait(for: "~/Documents/extra?q")
        XCTAssertTrue(screen.contains("F1 help"), screen)
        XCTAssertFalse(screen.contains("Help"), "? opened help from a text field")
        try tmux.press("C-w")
        try tmux.wait(for: "Ctrl-W to take back one path component") { screen in
            screen.split(separator: "\n").contains { $0.trimmingCharacters(in: .whitespaces) == "Source    ~/Documents/" }
        }
        try tmux.press("BSpace")
        // Home then Ctrl-E: the cursor is at the end again; Delete there removes nothing.
        try tmux.press("Home", "C-e", "DC")
        try tmux.press("F1")
        screen = try tmux.wait(for: "Text fields")
        XCTAssertTrue(screen.contains("delete the word or path component before the cursor"), screen)
        try tmux.press("Escape")
        try tmux.wait(for: "set up your first backup")
        try tmux.press("Tab")
        try tmux.type(home.remote)
        try tmux.press("Tab", "Tab", "Space")
        try tmux.wait(for: "[x] Allow the first upload")
        try tmux.press("Enter")
        try tmux.wait(for: "Completed: 1 file uploaded")
        let config = try String(contentsOfFile: home.dir.path("config/backup/config"), encoding: .utf8)
        XCTAssertTrue(config.contains("source = \(home.dir.path("home/Documents"))\n"), "~ is $HOME: \(config)")
        XCTAssertEqual(FileManager.default.contents(atPath: home.remote + "/letter.txt"), Data("dear".utf8))
        try tmux.press("F10")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testAnAltChordOrAnUnknownEscapeSequenceNeverActsAsEsc() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let tmux = try tmux(home)
        try tmux.wait(for: "synced ")
        try tmux.press("Enter")
        try tmux.wait(for: "papers (required): papers/")
        try tmux.press("M-b", "M-[")
        // An escape sequence no terminal description has: Esc [ 9 9 ~.
        try tmux.run(["send-keys", "-t", "backup", "-H", "1b", "5b", "39", "39", "7e"])
        try tmux.press("M-x")
        usleep(300_000)
        let still = try tmux.screen()
        XCTAssertTrue(still.contains("papers (required): papers/"), "an Alt chord went back:\n\(still)")
        XCTAssertFalse(still.contains("~") && still.contains("99"), "the sequence's tail was typed or shown:\n\(still)")
        // A plain Esc still goes back.
        try tmux.press("Escape")
        try tmux.wait(for: "▸ default")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testTheProfileListSaysWhatTheNextSyncWouldDoAndLooksAgainAfterASync() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        try home.write("new-notes.txt", "twelve bytes")
        try FileManager.default.removeItem(atPath: home.source + "/todo.txt")
        let before = home.tree(home.remote)
        let tmux = try tmux(home)
        let listed = try tmux.waitAll(["▸ default", "Next sync", "1 file to upload (12 B), 1 to delete from the remote"])
        XCTAssertFalse(listed.contains("looking (a dry run"), listed)
        XCTAssertEqual(home.tree(home.remote), before, "looking wrote to the remote")
        try tmux.press("s")
        try tmux.wait(for: "Completed: 1 file uploaded")
        try tmux.press("Escape")
        try tmux.waitAll(["▸ default", "Next sync", "nothing to upload or delete"])
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testSlashFindsALineInTheHelpAndSaysWhenNoneHasIt() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let tmux = try tmux(home, width: 100, height: 20)
        try tmux.wait(for: "▸ default")
        try tmux.press("?")
        let first = try tmux.waitAll(["Profiles", "/ find"])
        XCTAssertFalse(first.contains("paint the whole screen again"), "the last section starts below the first page: \(first)")
        try tmux.press("/")
        try tmux.wait(for: "Line contains:")
        try tmux.type("paint the whole")
        try tmux.press("Enter")
        // The page scrolled to the line (as far as the last page goes): the first lines are gone.
        let found = try tmux.wait(for: "paint the whole screen again")
        XCTAssertFalse(found.contains("select the previous profile"), found)
        try tmux.press("/")
        try tmux.wait(for: "Line contains:")
        try tmux.press("C-u")
        try tmux.type("no such words anywhere")
        try tmux.press("Enter")
        try tmux.wait(for: "No line has \"no such words anywhere\" in it.")
        try tmux.press("q")
        try tmux.wait(for: "▸ default")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testAtFortyByTwelveTheFooterKeepsHelpAndQuit() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let tmux = try tmux(home, width: 40, height: 12)
        // The whole frame: a capture can come while curses is still writing its rows.
        let screen = try tmux.wait(for: "the footer") { $0.contains("▸ default") && $0.contains(" quit") }
        let footer = screen.split(separator: "\n", omittingEmptySubsequences: false).last { !$0.isEmpty } ?? ""
        XCTAssertTrue(footer.hasSuffix("? help  q quit"), "footer at 40x12: \(footer)")
        for line in screen.split(separator: "\n") { XCTAssertLessThanOrEqual(line.count, 40, String(line)) }
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testWithTERMDumbTheCommandsRunScripted() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.write("a.txt", "alpha")
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote]), 0)
        // A real terminal, but one that cannot draw a screen: the sync runs as in a script.
        let tmux = try tmux(home, ["sync", "--yes"], extra: ["TERM": "dumb"])
        let screen = try tmux.wait(for: "[backup exited 0]")
        XCTAssertTrue(screen.contains("synced \"default\": 1 file(s) uploaded"), screen)
        XCTAssertFalse(screen.contains("Esc back"), "a screen was drawn:\n\(screen)")
        XCTAssertEqual(FileManager.default.contents(atPath: home.remote + "/a.txt"), Data("alpha".utf8))
    }

    func testListsPageAndEndAndSlashFindsAProfile() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        for name in ["alpha", "bravo", "charlie", "delta"] {
            let source = try home.dir.makeFolder("sources/\(name)")
            let remote = try home.dir.makeFolder("remotes/\(name == "charlie" ? "nas-vault" : name)")
            XCTAssertEqual(try home.scripted(["init", "--profile", name, "--source", source, "--remote", remote]), 0)
        }
        let tmux = try tmux(home, width: 60, height: 16)
        try tmux.wait(for: "▸ alpha")
        try tmux.press("End")
        try tmux.wait(for: "▸ delta")
        try tmux.press("Home")
        try tmux.wait(for: "▸ alpha")
        try tmux.press("/")
        try tmux.wait(for: "Find a profile")
        try tmux.type("VAULT")
        try tmux.press("Enter")
        try tmux.wait(for: "▸ charlie")
        // Help is longer than the screen: End shows its last table, Home its first, PgDn pages.
        try tmux.press("?")
        try tmux.wait(for: "Profiles")
        try tmux.press("End")
        let end = try tmux.wait(for: "Everywhere")
        XCTAssertFalse(end.contains("select the previous profile"), end)
        try tmux.press("Home")
        try tmux.wait(for: "select the previous profile")
        try tmux.press("PageDown")
        // Read once the page has moved (a capture right after the key can come before the redraw).
        try tmux.wait(for: "the help to page down") { !$0.contains("select the previous profile") && $0.contains("Esc close") }
        // (Esc and q in one write would read as Alt-q, which does nothing.)
        try tmux.press("Escape")
        try tmux.wait(for: "▸ charlie")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testTheProfileListShowsAFailedScheduledRunAndARunningOneOnItsOwn() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let tmux = try tmux(home)
        try tmux.wait(for: "Last run   completed ")
        // A scheduled run fails meanwhile (its source is not there): the list shows it unasked.
        try FileManager.default.moveItem(atPath: home.source, toPath: home.dir.path("source-away"))
        XCTAssertEqual(try home.scripted(["sync"]), 1)
        let failed = try tmux.waitAll(["last attempt failed", "Last run   last attempt failed ", " quit"])
        XCTAssertTrue(failed.contains("Last run   last attempt failed "), failed)
        XCTAssertTrue(failed.contains(": the source folder "), failed)
        // Another process runs a sync of it (holds its lock): the list says so, and then not.
        let lock = home.dir.path("state/backup/profiles/default/lock")
        let lockPath = FileManager.default.fileExists(atPath: lock) ? lock : try XCTUnwrap(
            FileManager.default.enumerator(atPath: home.dir.path("state"))?.compactMap { $0 as? String }.first { $0.hasSuffix("/lock") }
                .map { home.dir.path("state/" + $0) })
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        holder.arguments = [lockPath, "sleep", "4"]
        try holder.run()
        try tmux.wait(for: "running now")
        holder.waitUntilExit()
        let after = try tmux.wait(for: "the list to read the lock again") { !$0.contains("running now") }
        XCTAssertTrue(after.contains("last attempt failed"), after)
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testEveryNoteOfASyncIsBehindAKeyInFull() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.write("a.txt", "alpha")
        // Special files are skipped with a note each; one name is longer than a row.
        let long = "pipe-" + String(repeating: "long-name-", count: 14) + "END"
        for name in (1...11).map({ "fifo-\($0)" }) + [long] {
            XCTAssertEqual(mkfifo(home.source + "/" + name, 0o600), 0)
        }
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote]), 0)
        let tmux = try tmux(home, ["sync", "--yes"])
        let done = try tmux.waitAll(["Completed: 1 file uploaded", "v notes"])
        XCTAssertTrue(done.contains("Notes    12 (v shows them all)"), done)
        XCTAssertTrue(done.contains("v notes"), done)
        try tmux.press("v")
        let notes = try tmux.waitAll(["12 notes:", "END", " quit"])
        for index in 1...11 { XCTAssertTrue(notes.contains("skipped fifo-\(index): it is a FIFO"), notes) }
        XCTAssertTrue(notes.contains("END"), "the long note is there in full:\n\(notes)")
        try tmux.press("Escape")
        try tmux.wait(for: "Completed: 1 file uploaded")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testADryRunListsWhatTheNextSyncWouldUploadAndDeleteAndWritesNothing() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        try home.write("new-notes.txt", "not backed up yet")
        try FileManager.default.removeItem(atPath: home.source + "/todo.txt")
        let before = home.tree(home.remote)
        let tmux = try tmux(home)
        let list = try tmux.wait(for: "▸ default")
        XCTAssertTrue(list.contains("d dry run"), list)
        try tmux.press("d")
        let plan = try tmux.waitAll(["The next sync would upload 1 file", "+ new-notes.txt", "− todo.txt", " quit"])
        XCTAssertTrue(plan.contains("+ new-notes.txt"), plan)
        XCTAssertTrue(plan.contains("− todo.txt"), plan)
        XCTAssertTrue(plan.replacingOccurrences(of: "\n ", with: " ").contains("and delete 1 file from the remote"), plan)
        XCTAssertEqual(home.tree(home.remote), before, "the dry run wrote to the remote")
        // s runs the sync it showed.
        try tmux.press("s")
        try tmux.wait(for: "Completed: 1 file uploaded")
        XCTAssertNil(home.tree(home.remote)["todo.txt"])
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testANewProfileMadeInTheInterfaceTakesTheGroupsOfTheBackupOnItsRemote() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let source = try home.dir.makeFolder("new-machine")
        let tmux = try tmux(home)
        try tmux.wait(for: "▸ default")
        try tmux.press("n")
        try tmux.wait(for: "new profile")
        try tmux.type("laptop")
        try tmux.press("Tab")
        try tmux.type(source)
        try tmux.press("Tab")
        try tmux.type(home.remote)
        for _ in 0..<13 { try tmux.press("Tab") }  // to [ Save ]
        try tmux.wait(for: "Enter saves the profile")
        try tmux.press("Enter")
        // Saved, with the groups it took said; the form shows them, and so does the list.
        let saved = try tmux.waitAll(["Saved profile \"laptop\"", "Esc goes back"])
        XCTAssertTrue(saved.contains("papers (required): papers/"), saved)
        XCTAssertTrue(saved.replacingOccurrences(of: "\n ", with: " ").contains("Took the groups of the backup"), saved)
        try tmux.press("Escape")
        try tmux.wait(for: "laptop   never synced")
        let config = try String(contentsOfFile: home.dir.path("config/backup/config"), encoding: .utf8)
        let section = config.components(separatedBy: "[laptop]").last ?? ""
        XCTAssertTrue(section.contains("papers/"), "the backup's groups were not taken:\n\(config)")
        XCTAssertTrue(section.contains("photos/"), config)
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    /// The sample backed up, and the interface at the choice of what to restore into
    /// `restored` (r, the target typed): nothing is downloaded yet.
    private func atTheRestoreChoice(after change: (Home) throws -> Void = { _ in }) throws -> (Home, Tmux, target: String, screen: String) {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        try change(home)
        let target = home.dir.path("restored")
        let tmux = try tmux(home)
        try tmux.wait(for: "▸ default")
        try tmux.press("r")
        try tmux.wait(for: "Into which folder?")
        try tmux.press("C-u")
        try tmux.type(target)
        try tmux.press("Enter")
        return (home, tmux, target, try tmux.waitAll(["[x] ! papers", "(other files)", "f files"]))
    }

    func testGroupsAreChosenBeforeAnythingIsDownloaded() throws {
        let (home, tmux, target, pick) = try atTheRestoreChoice()
        XCTAssertTrue(pick.contains("[x] ! papers"), pick)
        XCTAssertTrue(pick.contains("[x]   photos"), pick)
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + "/photos"), "downloaded before the choice")
        try tmux.press("Down")
        try tmux.press("Space")
        try tmux.wait(for: "[ ]   photos")
        try tmux.press("Enter")
        try tmux.wait(for: "Place group \"papers (required)\"?")
        try tmux.press("p")
        try tmux.wait(for: "Place group \"(other files)\"?")
        try tmux.press("p")
        let done = try tmux.wait(for: "Completed:")
        XCTAssertFalse(done.contains("photos"), "the group left out is not in the plan:\n\(done)")
        XCTAssertEqual(Set(home.tree(target).keys), ["papers/tax-1.txt", "papers/tax-2.txt", "papers/tax-3.txt", "todo.txt"])
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testSomeFilesAndFoldersAreChosenBeforeAnythingIsDownloaded() throws {
        let (home, tmux, target, _) = try atTheRestoreChoice()
        try tmux.press("f")
        try tmux.wait(for: "files and folders to restore")
        try tmux.press("a")
        try tmux.type("photos")
        try tmux.press("Enter")
        try tmux.wait(for: "> photos")
        try tmux.press("a")
        try tmux.type("papers/tax-2.txt")
        try tmux.press("Enter")
        try tmux.wait(for: "> papers/tax-2.txt")
        try tmux.press("Escape")
        try tmux.wait(for: "Only: photos · papers/tax-2.txt")
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + "/photos"), "downloaded before the choice")
        try tmux.press("Enter")
        try tmux.wait(for: "Place group \"papers (required)\"?")
        try tmux.press("a")
        try tmux.wait(for: "Completed:")
        XCTAssertEqual(Set(home.tree(target).keys), ["papers/tax-2.txt", "photos/beach.jpg", "photos/写真.jpg"])
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testTheBackupAsOfADateIsChosenBeforeAnythingIsDownloaded() throws {
        var before = ""
        let (home, tmux, target, _) = try atTheRestoreChoice { home in
            Thread.sleep(forTimeInterval: 1.1)
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime]
            before = formatter.string(from: Date())
            Thread.sleep(forTimeInterval: 1.1)
            try home.write("todo.txt", "call the plumber, then the roofer")
            try FileManager.default.removeItem(atPath: home.source + "/papers/tax-3.txt")
            XCTAssertEqual(try home.scripted(["sync", "--json"]), 0)
        }
        try tmux.wait(for: "d as of")
        try tmux.press("d")
        try tmux.wait(for: "Restore as of")
        try tmux.type("last tuesday")
        try tmux.press("Enter")
        try tmux.wait(for: "is not a date or time")
        try tmux.press("d")
        try tmux.wait(for: "Restore as of")
        try tmux.press("C-u")
        try tmux.type(before)
        try tmux.press("Enter")
        try tmux.wait(for: "As of: ")
        XCTAssertFalse(FileManager.default.fileExists(atPath: target + "/todo.txt"), "downloaded before the choice")
        try tmux.press("Enter")
        try tmux.wait(for: "Place group \"papers (required)\"?")
        try tmux.press("a")
        try tmux.wait(for: "Completed:")
        let restored = home.tree(target)
        XCTAssertEqual(restored["todo.txt"], Data("call the plumber".utf8), "not the content of then")
        XCTAssertEqual(restored["papers/tax-3.txt"], Data("tax year 3".utf8), "a file deleted since is of that tree")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testVerifyComparesTheListingThenReadsEveryFileAndNamesTheDamage() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        // A file changed on the remote at its own size: only reading it shows it.
        let damaged = home.remote + "/papers/tax-2.txt"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: damaged))
        bytes[0] ^= 0x20
        try bytes.write(to: URL(fileURLWithPath: damaged))
        let before = home.tree(home.remote)
        let tmux = try tmux(home)
        try tmux.wait(for: "▸ default")
        try tmux.press("V")
        let listing = try tmux.waitAll(["Nothing is missing", "r read all"])
        XCTAssertTrue(listing.contains("the listing was compared"), listing)
        try tmux.press("r")
        let read = try tmux.waitAll(["1 file missing", "hashMismatch: papers/tax-2.txt"])
        XCTAssertTrue(read.contains("5 read and checked"), read)
        try tmux.press("v")
        try tmux.wait(for: "does not hold the bytes")
        XCTAssertEqual(home.tree(home.remote), before, "verify wrote to the remote")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 5)
    }

    func testAtFortyByTwelveTheFirstRunFormKeepsTheFocusedFieldInView() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        let tmux = try tmux(home, width: 40, height: 12)
        try tmux.wait(for: "Source")
        try tmux.press("Tab", "Tab", "Tab")
        let screen = try tmux.wait(for: "[ ] Allow the first upload")
        XCTAssertTrue(screen.contains("? help"), screen)
        try tmux.press("Space")
        try tmux.wait(for: "[x] Allow the first upload")
        try tmux.press("F10")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testDeletingAProfileAsksFirstAndLeavesItsBackupAlone() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let before = home.tree(home.remote)
        let state = home.dir.path("state/backup")
        let tmux = try tmux(home)
        try tmux.wait(for: "▸ default")
        try tmux.press("x")
        try tmux.wait(for: "Delete profile \"default\"?")
        try tmux.press("n")
        try tmux.wait(for: "Backed up")
        XCTAssertTrue(try String(contentsOfFile: home.dir.path("config/backup/config"), encoding: .utf8).contains("[default]"))
        try tmux.press("x")
        try tmux.wait(for: "Delete profile \"default\"?")
        try tmux.press("y")
        try tmux.wait(for: "Deleted profile \"default\"")
        let config = try String(contentsOfFile: home.dir.path("config/backup/config"), encoding: .utf8)
        XCTAssertFalse(config.contains("[default]"), config)
        XCTAssertEqual(home.tree(home.remote), before, "the backup was touched")
        let left = (try? FileManager.default.subpathsOfDirectory(atPath: state)) ?? []
        XCTAssertFalse(left.contains { $0.contains("default") }, "its state stayed: \(left)")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testEditingTheConfigRunsTheEditorAndReadsTheProfilesAgain() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        // An "editor" that adds a line to the last section (the profile's), then one that breaks the file.
        let adds = home.dir.path("adds.sh")
        try Data("#!/bin/sh\necho 'exclude = *.tmp' >> \"$1\"\n".utf8).write(to: URL(fileURLWithPath: adds))
        chmod(adds, 0o755)
        let tmux = try tmux(home, extra: ["EDITOR": adds])
        try tmux.wait(for: "▸ default")
        try tmux.press("E")
        try tmux.wait(for: "▸ default")
        let config = try String(contentsOfFile: home.dir.path("config/backup/config"), encoding: .utf8)
        XCTAssertTrue(config.hasSuffix("exclude = *.tmp\n"), config)
        try tmux.press("Enter")
        let shown = try tmux.wait(for: "*.tmp")
        XCTAssertTrue(shown.contains("profile \"default\""), shown)
        try tmux.press("Escape")
        try tmux.wait(for: "▸ default")
        // The terminal came back whole: the screen is drawn, keys work, and q quits.
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testAtFortyByTwelveTheDryRunAndTheGroupChoiceShowTheirLists() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        try home.write("new-notes.txt", "not backed up yet")
        try FileManager.default.removeItem(atPath: home.source + "/todo.txt")
        let tmux = try tmux(home, width: 40, height: 12)
        try tmux.wait(for: "▸ default")
        try tmux.press("d")
        let plan = try tmux.waitAll(["+ new-notes.txt", "− todo.txt"])
        XCTAssertTrue(plan.contains("− todo.txt"), plan)
        try tmux.press("Escape")
        try tmux.wait(for: "▸ default")
        try tmux.press("r")
        try tmux.wait(for: "Into which folder?")
        try tmux.press("C-u")
        try tmux.type(home.dir.path("out"))
        try tmux.press("Enter")
        let pick = try tmux.wait(for: "[x]   photos")
        XCTAssertTrue(pick.contains("[x] ! papers"), pick)
        try tmux.press("F10")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testABackupIsRestoredFromItsRemoteWithNoProfile() throws {
        let old = try Home()
        addTeardownBlock { old.dir.cleanup() }
        try old.backUpSample()
        // A new machine: no config, no state; only the remote.
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        let target = home.dir.path("restored")
        let tmux = try tmux(home)
        // The first run offers to set a profile up; Esc leads to the (empty) list.
        try tmux.wait(for: "set up your first backup")
        try tmux.press("Escape")
        let empty = try tmux.wait(for: "No profiles yet")
        XCTAssertTrue(empty.contains("o restore a remote"), empty)
        try tmux.press("o")
        try tmux.wait(for: "Restore from a remote")
        try tmux.type(old.remote)
        try tmux.press("Enter")
        try tmux.wait(for: "Into which folder?")
        try tmux.type(target)
        try tmux.press("Enter")
        try tmux.wait(for: "[x] ! papers")
        try tmux.press("Enter")
        for group in ["papers (required)", "photos", "(other files)"] {
            try tmux.wait(for: "Place group \"\(group)\"?")
            try tmux.press("p")
        }
        try tmux.wait(for: "Completed:")
        XCTAssertEqual(home.tree(target), old.tree(old.source))
        XCTAssertFalse(FileManager.default.fileExists(atPath: home.dir.path("config/backup/config")), "a profile was written")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testResumingWithAnotherTargetAsksWhichOne() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let first = home.dir.path("first")
        let other = home.dir.path("other")
        // An unfinished restore into `first`: the optional groups are rejected.
        let partial = try tmux(home, ["restore", "--to", first])
        try partial.wait(for: "Place group \"papers (required)\"?")
        try partial.press("p")
        try partial.wait(for: "Place group \"photos\"?")
        try partial.press("r")
        try partial.wait(for: "Place group \"(other files)\"?")
        try partial.press("r")
        try partial.wait(for: "Incomplete:")
        try partial.press("q")
        _ = try partial.exitStatus()

        let tmux = try tmux(home, ["restore", "--resume", "--to", other])
        let asked = try tmux.waitAll(["n starts a new restore", "n new restore"])
        let words = asked.replacingOccurrences(of: "\n ", with: " ")
        XCTAssertTrue(words.contains("The unfinished restore goes into \(first), not \(other)"), asked)
        XCTAssertTrue(asked.contains("Into     \(first)"), "the screen shows the record's folder:\n\(asked)")
        XCTAssertTrue(asked.contains("n new restore"), asked)
        // Enter continues into the recorded folder, not the one asked for.
        try tmux.press("Enter")
        try tmux.wait(for: "Place group \"photos\"?")
        try tmux.press("p")
        try tmux.wait(for: "Place group \"(other files)\"?")
        try tmux.press("p")
        try tmux.wait(for: "Completed:")
        XCTAssertNotNil(home.tree(first)["photos/beach.jpg"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: other), "the other folder was written")
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    func testSlashFindsAFileInALongDryRun() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.write("first.txt", "backed up")
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote]), 0)
        XCTAssertEqual(try home.scripted(["sync", "--yes"]), 0)
        for index in 0..<200 { try home.write(String(format: "f%03d.txt", index), "x") }
        try home.write("zz/needle-file.txt", "found")
        let tmux = try tmux(home, width: 60, height: 16)
        try tmux.wait(for: "▸ default")
        try tmux.press("d")
        let first = try tmux.wait(for: "+ f000.txt")
        XCTAssertFalse(first.contains("needle"), first)
        try tmux.press("/")
        try tmux.wait(for: "Find a file")
        try tmux.type("NEEDLE")
        try tmux.press("Enter")
        try tmux.wait(for: "+ zz/needle-file.txt")
        try tmux.press("/")
        try tmux.press("C-u")
        try tmux.type("nowhere")
        try tmux.press("Enter")
        try tmux.wait(for: "has \"nowhere\" in its path")
        try tmux.press("F10")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }
}
