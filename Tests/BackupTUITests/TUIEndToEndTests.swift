// The real binary in tmux at 100x30 and 60x20, driven as a person would: the first run with
// a folder remote, a sync whose bar moves and ends completed, a resize in the middle of a
// sync, a restore whose optional group is rejected at its prompt and placed on --resume,
// `q` in the middle of a restore and --resume finishing it, and the terminal given back
// after Ctrl-C and after a crash. Every assertion reads capture-pane text.

import BackupEngine
import BackupTerminal
import BackupTestSupport
import Foundation
import XCTest

final class TUIEndToEndTests: XCTestCase {
    static let sizes = [(width: 100, height: 30), (width: 60, height: 20)]

    /// An isolated home: config, state, a source and a folder remote.
    final class Home {
        let dir: TempDir
        var source: String { dir.path("source") }
        var remote: String { dir.path("remote") }

        init() throws {
            dir = try TempDir("backup-tui-e2e")
            try dir.makeFolder("source")
            try dir.makeFolder("remote")
            try dir.makeFolder("home")
        }

        var environment: [String: String] {
            ["HOME": dir.path("home"), "XDG_CONFIG_HOME": dir.path("config"), "XDG_STATE_HOME": dir.path("state")]
        }

        /// Runs the binary scripted (no terminal) to the end; returns its exit status.
        @discardableResult
        func scripted(_ arguments: [String], extra: [String: String] = [:]) throws -> Int32 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Tmux.binary)
            process.arguments = arguments
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }.merging(extra) { _, new in new }
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus
        }

        func write(_ relative: String, _ text: String) throws {
            try dir.write("source/" + relative, Data(text.utf8))
        }

        /// Every file under the fixture's `folder` (config, state, home), read as text (binary
        /// bytes decoded loosely): where a secret must not be.
        func everything(under folder: String) -> String {
            guard let walker = FileManager.default.enumerator(atPath: dir.path(folder)) else { return "" }
            var text = ""
            for case let relative as String in walker {
                if let data = FileManager.default.contents(atPath: dir.path(folder) + "/" + relative) { text += String(decoding: data, as: UTF8.self) }
            }
            return text
        }

        /// The sample backup most tests start from, synced to the folder remote: papers
        /// (required, three files), photos (two, one with a wide name) and todo.txt.
        func backUpSample() throws {
            for i in 1...3 { try write("papers/tax-\(i).txt", "tax year \(i)") }
            try write("photos/beach.jpg", String(repeating: "sand", count: 5000))
            try write("photos/写真.jpg", String(repeating: "山", count: 3000))
            try write("todo.txt", "call the plumber")
            for arguments in [["init", "--source", source, "--remote", remote, "--group", "papers=papers/,required", "--group", "photos=photos/"],
                              ["sync", "--yes", "--json"]] {
                let status = try scripted(arguments)
                guard status == 0 else {
                    throw NSError(domain: "backup", code: Int(status), userInfo: [NSLocalizedDescriptionKey: "\(arguments) exited \(status)"])
                }
            }
        }

        /// `count` small files in folders of 100.
        func manyFiles(_ count: Int) throws {
            for i in 0..<count {
                try write(String(format: "d%03d/file%05d.txt", i / 100, i), "content of file \(i)\n")
            }
        }

        /// Regular files under `folder` (relative path → contents), the staging area left out.
        func tree(_ folder: String) -> [String: Data] {
            var result: [String: Data] = [:]
            guard let walker = FileManager.default.enumerator(atPath: folder) else { return result }
            while let relative = walker.nextObject() as? String {
                var isFolder: ObjCBool = false
                let path = folder + "/" + relative
                if relative.hasPrefix(".backup") || relative.contains("/.backup") { continue }
                if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue {
                    result[relative] = FileManager.default.contents(atPath: path)
                }
            }
            return result
        }
    }

    private func home() throws -> Home {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        return home
    }

    private func tmux(_ home: Home, _ size: (width: Int, height: Int), _ arguments: [String], extra: [String: String] = [:]) throws -> Tmux {
        let tmux = try Tmux(width: size.width, height: size.height, arguments: arguments,
                            environment: home.environment.merging(extra) { _, new in new }, directory: home.dir.path)
        addTeardownBlock { tmux.kill() }
        return tmux
    }

    /// The percentage the first progress bar on the screen shows, if any.
    private static func barPercent(_ screen: String) -> Int? {
        for line in screen.split(separator: "\n") where line.contains("█") || line.contains("░") {
            guard let percent = line.split(separator: " ").last, percent.hasSuffix("%") else { continue }
            return Int(percent.dropLast())
        }
        return nil
    }

    // MARK: First run

    func testFirstRunSetsUpAFolderRemoteAndRunsTheFirstSync() throws {
        for size in Self.sizes {
            let home = try home()
            try home.write("notes/今日のメモ.txt", "first backup")
            try home.write("report.txt", "quarterly figures")
            let tmux = try tmux(home, size, [])
            try tmux.wait(for: "set up your first backup")
            try tmux.type(home.source)
            try tmux.press("Tab")
            try tmux.type(home.remote)
            try tmux.press("Tab", "Tab", "Space")
            try tmux.wait(for: "[x] Allow the first upload")
            try tmux.press("Enter")
            let done = try tmux.wait(for: "Completed: 2 files uploaded")
            XCTAssertTrue(done.contains("100%"), done)
            XCTAssertEqual(home.tree(home.remote)["notes/今日のメモ.txt"], Data("first backup".utf8), "\(size)")
            let config = try String(contentsOfFile: home.dir.path("config/backup/config"), encoding: .utf8)
            XCTAssertTrue(config.contains("remote = \(home.remote)"), config)

            try tmux.press("Escape")
            let profiles = try tmux.wait(for: "▸ default")
            XCTAssertTrue(profiles.contains("synced "), profiles)
            try tmux.press("q")
            XCTAssertEqual(try tmux.exitStatus(), 0, "\(size)")
        }
    }

    // MARK: Sync

    func testSyncShowsAMovingBarAndEndsCompleted() throws {
        for size in Self.sizes {
            let home = try home()
            try home.manyFiles(3000)
            XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote]), 0)
            let tmux = try tmux(home, size, ["sync", "--yes"])
            var seen = Set<Int>()
            let end = try tmux.wait(for: "the sync to complete", timeout: 60) { screen in
                if let percent = Self.barPercent(screen), percent > 0, percent < 100 { seen.insert(percent) }
                return screen.contains("Completed:")
            }
            XCTAssertGreaterThanOrEqual(seen.count, 2, "the bar moved through several values: \(seen.sorted()) at \(size)")
            XCTAssertEqual(Self.barPercent(end), 100, end)
            XCTAssertTrue(end.contains("Completed: 3,000 files uploaded"), end)
            for line in end.split(separator: "\n") {
                XCTAssertLessThanOrEqual(line.count, size.width, "nothing wraps at \(size): \(line)")
            }
            XCTAssertEqual(home.tree(home.remote).count, 3000)
            try tmux.press("q")
            XCTAssertEqual(try tmux.exitStatus(), 0)
        }
    }

    func testAResizeMidSyncRedrawsAtTheNewSize() throws {
        let home = try home()
        try home.manyFiles(4000)
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote]), 0)
        let tmux = try tmux(home, (100, 30), ["sync", "--yes"])
        let before = try tmux.wait(for: "the bar under way") { screen in
            (Self.barPercent(screen).map { $0 > 0 && $0 < 60 } ?? false)
        }
        XCTAssertTrue(before.contains("q quit"), before)
        try tmux.resize(width: 60, height: 20)
        let after = try tmux.wait(for: "a frame at 60x20") { screen in
            let lines = screen.split(separator: "\n", omittingEmptySubsequences: false)
            return lines.count >= 20 && lines[19].contains("quit") && lines[0].contains("sync \"default\"")
        }
        let bar = after.split(separator: "\n").first { $0.contains("█") || $0.contains("░") }.map(String.init) ?? ""
        XCTAssertEqual(bar.filter { $0 == "█" || $0 == "░" }.count, 51, "the bar fits the new width: \(bar)")
        let end = try tmux.wait(for: "Completed:", timeout: 60)
        let lines = end.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertTrue(lines[19].contains("s sync again"), end)
        XCTAssertEqual(Self.barPercent(end), 100)
        try tmux.press("q")
        XCTAssertEqual(try tmux.exitStatus(), 0)
    }

    // MARK: Restore

    /// A backed-up profile with a required group (papers), an optional one (photos) and a
    /// file in no group.
    private func backedUp() throws -> Home {
        let home = try home()
        try home.backUpSample()
        return home
    }

    func testRestoreRejectsTheOptionalGroupAtItsPromptAndResumePlacesIt() throws {
        for size in Self.sizes {
            let home = try backedUp()
            let target = home.dir.path("restored")
            let tmux = try tmux(home, size, ["restore", "--to", target])
            let papers = try tmux.wait(for: "Place group \"papers (required)\"?")
            XCTAssertTrue(papers.contains("! papers"), papers)
            XCTAssertTrue(papers.contains("Required: the restore stops here if you reject it."), papers)
            try tmux.press("p")
            let photos = try tmux.wait(for: "Place group \"photos\"?")
            XCTAssertTrue(photos.contains("3/3 placed"), photos)
            try tmux.press("l")
            let list = try tmux.wait(for: "photos/写真.jpg")
            // Every row of the prompt's box ends in the same column, the wide name's row too.
            let box = list.split(separator: "\n").map { String($0.reversed().drop { $0 == " " }.reversed()) }
                .filter { $0.hasSuffix("│") || $0.hasSuffix("┐") || $0.hasSuffix("┘") }
            XCTAssertEqual(Set(box.map { DisplayWidth.of($0) }).count, 1, "\(box)")
            XCTAssertTrue(box.contains { $0.contains("photos/写真.jpg") }, "\(box)")
            try tmux.press("r")
            try tmux.wait(for: "Place group \"(other files)\"?")
            try tmux.press("p")
            let partial = try tmux.wait(for: "Incomplete:")
            XCTAssertTrue(partial.contains("rejected"), partial)
            try tmux.press("q")
            XCTAssertEqual(try tmux.exitStatus(), 4, "restore incomplete")
            XCTAssertEqual(Set(home.tree(target).keys), ["papers/tax-1.txt", "papers/tax-2.txt", "papers/tax-3.txt", "todo.txt"])

            let resume = try self.tmux(home, size, ["restore", "--resume", "--to", target])
            // A line drawn after the counts: a capture taken while the frame is drawn holds only its top.
            let record = try resume.wait(for: "photos: tried 1 time")
            XCTAssertTrue(record.contains("The record of the unfinished restore:"), record)
            XCTAssertTrue(record.replacingOccurrences(of: "\n ", with: " ").contains("4 placed · 2 not placed yet: 2 downloaded and checked, 0 not downloaded"), record)
            XCTAssertTrue(record.contains("photos: tried 1 time, not placed (rejected at placement)"), record)
            try resume.press("Enter")
            try resume.wait(for: "Place group \"photos\"?")
            try resume.press("p")
            try resume.wait(for: "Completed: 6 files restored")
            try resume.press("q")
            XCTAssertEqual(try resume.exitStatus(), 0)
            XCTAssertEqual(home.tree(target), home.tree(home.source), "\(size)")
        }
    }

    func testQuitMidRestoreKeepsTheRecordAndResumeFinishesIt() throws {
        for size in Self.sizes {
            let home = try backedUp()
            let target = home.dir.path("restored")
            let tmux = try tmux(home, size, ["restore", "--to", target])
            try tmux.wait(for: "Place group \"papers (required)\"?")
            try tmux.press("p")
            try tmux.wait(for: "Place group \"photos\"?")
            try tmux.press("q")
            // The whole question, not its first line: a capture can land while it is drawn.
            let asked = try tmux.wait(for: "the quit question") { $0.contains("Quit?") && $0.contains("stops it cleanly") }
            XCTAssertTrue(asked.contains("stops it cleanly"), asked)
            try tmux.press("y")
            XCTAssertEqual(try tmux.exitStatus(), 130, "interrupted")
            XCTAssertEqual(Set(home.tree(target).keys), ["papers/tax-1.txt", "papers/tax-2.txt", "papers/tax-3.txt"])

            let resume = try self.tmux(home, size, ["restore", "--resume", "--to", target])
            // The whole summary, not its heading: a capture can land while the screen is drawn.
            let record = try resume.wait(for: "the record's summary") {
                $0.contains("The record of the unfinished restore:") && $0.contains(" tried before")
            }
            XCTAssertTrue(record.replacingOccurrences(of: "\n ", with: " ").contains("3 placed · 3 not placed yet: 2 downloaded and checked, 1 not downloaded"), record)
            try resume.press("Enter")
            try resume.wait(for: "Place group \"photos\"?")
            try resume.press("a")
            try resume.wait(for: "Completed: 6 files restored")
            try resume.press("q")
            XCTAssertEqual(try resume.exitStatus(), 0)
            XCTAssertEqual(home.tree(target), home.tree(home.source), "\(size)")
        }
    }

    // MARK: Colours, and no terminal

    func testColoursFallBackToAttributesUnderNO_COLOR() throws {
        let home = try home()
        let colour = try tmux(home, (60, 20), [])
        try colour.wait(for: "set up your first backup")
        let coloured = try colour.run(["capture-pane", "-p", "-e", "-t", "backup"])
        XCTAssertTrue(coloured.contains("\u{1B}[37m\u{1B}[44m") || coloured.contains("\u{1B}[37;44m"), "the title bar is white on blue")
        let plain = try tmux(home, (60, 20), [], extra: ["NO_COLOR": "1"])
        try plain.wait(for: "set up your first backup")
        let monochrome = try plain.run(["capture-pane", "-p", "-e", "-t", "backup"])
        XCTAssertTrue(monochrome.contains("\u{1B}[7m"), "the title bar is reversed instead")
        for code in 30...47 where code != 38 && code != 39 {
            XCTAssertFalse(monochrome.contains("\u{1B}[\(code)m"), "no colour \(code) under NO_COLOR")
        }
    }

    func testWithoutATerminalCommandsRunScripted() throws {
        let home = try home()
        try home.write("a.txt", "a")
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote]), 0)
        let out = home.dir.path("out.txt")
        let status = try Tmux.spawn("/usr/bin/env", home.environment.map { "\($0.key)=\($0.value)" } + ["TERM=xterm", Tmux.binary, "sync", "--yes"], output: out)
        let text = try String(contentsOfFile: out, encoding: .utf8)
        XCTAssertEqual(status, 0, text)
        XCTAssertTrue(text.contains("synced \"default\": 1 file(s) uploaded"), text)
        XCTAssertFalse(text.contains("\u{1B}["), "no screen drawn into a file: \(text)")
        XCTAssertEqual(try Tmux.spawn("/usr/bin/env", home.environment.map { "\($0.key)=\($0.value)" } + ["TERM=xterm", Tmux.binary, "tui"], output: out), 2)
        XCTAssertTrue(try String(contentsOfFile: out, encoding: .utf8).contains("needs a terminal"))
    }

    // MARK: The terminal is given back

    func testCtrlCStopsTheSyncAndGivesTheTerminalBack() throws {
        let home = try home()
        try home.manyFiles(3000)
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", home.remote]), 0)
        let tmux = try tmux(home, (100, 30), ["sync", "--yes"])
        try tmux.wait(for: "the bar under way") { Self.barPercent($0).map { $0 > 0 && $0 < 100 } ?? false }
        try tmux.press("C-c")
        XCTAssertEqual(try tmux.exitStatus(), 130)
        try assertTerminalRestoredWithShell(tmux)
        XCTAssertEqual(try home.scripted(["sync", "--json"]), 0, "the next run continues from what was saved")
    }

    func testACrashGivesTheTerminalBack() throws {
        let home = try home()
        let tmux = try tmux(home, (60, 20), [], extra: ["SWIFT_BACKTRACE": "enable=no"])
        try tmux.wait(for: "set up your first backup")
        XCTAssertEqual(try tmux.format("#{alternate_on}"), "1")
        let pid = try XCTUnwrap(try tmux.binaryPid())
        Foundation.kill(pid, SIGSEGV)
        let status = try XCTUnwrap(try tmux.exitStatus())
        XCTAssertEqual(status, 128 + Int(SIGSEGV))
        try assertTerminalRestoredWithShell(tmux)
    }

    /// After the binary exited: the normal screen, a cursor, and the terminal's modes as
    /// they were (canonical input, echo), read from the pane's terminal device.
    private func assertTerminalRestoredWithShell(_ tmux: Tmux, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(try tmux.format("#{alternate_on}"), "0", "the alternate screen is left", file: file, line: line)
        XCTAssertEqual(try tmux.format("#{cursor_flag}"), "1", "the cursor shows", file: file, line: line)
        let modes = try tmux.terminalModes()
        let words = Set(modes.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == ";" }).map(String.init))
        XCTAssertTrue(words.contains("icanon") && words.contains("echo"), "canonical mode and echo are back: \(modes)", file: file, line: line)
    }
}
