// Profiles created and edited in full in the interface, in the real binary in tmux: the form
// (e on the profile list) edits groups (required or not), excludes and the other pattern
// lists in their own list editor, refuses a group spec it cannot read, and saves through the
// same code as `backup init`; a new WebDAV profile takes a password typed in the form for
// the session and writes it nowhere; at 40x12 the form scrolls to the focused field.

import BackupTestSupport
import Foundation
import XCTest

final class TUIProfileFormTests: XCTestCase {
    private typealias Home = TUIEndToEndTests.Home

    private func tmux(_ home: Home, width: Int = 100, height: Int = 30, extra: [String: String] = [:]) throws -> Tmux {
        let tmux = try Tmux(width: width, height: height, arguments: [], environment: home.environment.merging(extra) { _, new in new },
                            directory: home.dir.path)
        addTeardownBlock { tmux.kill() }
        return tmux
    }

    private func config(_ home: Home) throws -> String {
        try String(contentsOfFile: home.dir.path("config/backup/config"), encoding: .utf8)
    }

    private func press(_ tmux: Tmux, _ key: String, times: Int) throws {
        for _ in 0..<times { try tmux.press(key) }
    }

    func testTheFormEditsGroupsAndExcludesRefusesABadGroupAndSavesThemToTheConfig() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let tui = try tmux(home)
        try tui.wait(for: "default")
        try tui.press("e")
        // Editing starts at the source (the name is fixed); the groups are five fields down.
        try tui.waitAll(["edit profile \"default\"", "Source", "Groups", "papers (required): papers/ · photos: photos/"])
        try press(tui, "Tab", times: 5)
        try tui.press("Enter")
        try tui.waitAll(["groups of the profile", "papers=papers/,required", "photos=photos/"])

        try tui.press("a")
        try tui.wait(for: "Add to groups")
        try tui.type("docs=docs/,required")
        try tui.press("Enter")
        try tui.wait(for: "docs=docs/,required")
        // A row that is not NAME=PATTERN is refused at once, and asked again to mend.
        try tui.press("a")
        try tui.wait(for: "Add to groups")
        try tui.type("no equals sign")
        try tui.press("Enter")
        try tui.wait(for: "expected NAME=PATTERN")
        try tui.press("Escape")
        // Esc and the next key pressed together read as an Alt chord: wait for the dialog to close.
        try tui.wait(for: "the question to close") { !$0.contains("Add to groups") }
        // Removing an entry: select photos and press x.
        try tui.press("Home")
        try tui.press("Down")
        try tui.press("x")
        try tui.wait(for: "Removed \"photos=photos/\"")
        try tui.press("Escape")

        let form = try tui.waitAll(["edit profile \"default\"", "docs (required): docs/"])
        XCTAssertFalse(form.contains("photos: photos/"), form)
        try tui.press("Down")  // Excluded
        try tui.press("Enter")
        try tui.wait(for: "excluded of the profile")
        try tui.press("a")
        try tui.type("*.tmp")
        try tui.press("Enter")
        try tui.wait(for: "> *.tmp")
        try tui.press("Escape")
        try tui.waitAll(["edit profile \"default\"", "Excluded    *.tmp"])
        try press(tui, "Tab", times: 8)  // By size, Kept, Transfers, Encrypt, Passphrase, Again, Pass command, Save
        try tui.wait(for: "Enter saves the profile")
        try tui.press("Enter")
        try tui.wait(for: "Saved profile \"default\"")

        let written = try config(home)
        XCTAssertTrue(written.contains("group.docs = docs/"), written)
        XCTAssertTrue(written.contains("group.docs.required = yes"), written)
        XCTAssertTrue(written.contains("group.papers.required = yes"), written)
        XCTAssertFalse(written.contains("group.photos"), written)
        XCTAssertTrue(written.contains("exclude = *.tmp"), written)
        XCTAssertFalse(written.contains("no equals sign"), written)
        try tui.press("Escape")
        try tui.waitAll(["default", "s sync"])
        try tui.press("q")
        XCTAssertEqual(try tui.exitStatus(), 0)
    }

    func testANewWebDAVProfileTakesAPasswordTypedInTheFormForTheSessionAndWritesItNowhere() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try home.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
        try home.write("letter.txt", "dear bank")
        // One profile exists, so the list opens (not the first-run screen).
        XCTAssertEqual(try home.scripted(["init", "--profile", "local", "--source", home.source, "--remote", home.remote]), 0)

        let tui = try tmux(home)
        try tui.wait(for: "local")
        try tui.press("n")
        try tui.waitAll(["new profile", "Profile", "[ Save ]"])
        try tui.press("C-u")
        try tui.type("dav")
        try tui.press("Tab")
        try tui.type(home.source)
        try tui.press("Tab")
        try tui.type("webdav://\(server.user)@127.0.0.1:\(server.port)/backup")
        try tui.press("Tab")
        try tui.press("Tab")  // User: the URL names one
        try tui.wait(for: "kept in memory for this session only")
        try tui.type(server.secret)
        let dots = try tui.wait(for: String(repeating: "•", count: server.secret.count))
        XCTAssertFalse(dots.contains(server.secret), dots)
        try press(tui, "Tab", times: 11)  // to [ Save ]
        try tui.wait(for: "Enter saves the profile")
        try tui.press("Enter")
        try tui.wait(for: "Saved profile \"dav\"", timeout: 60)
        try tui.press("Escape")

        // The list again: select "dav" (after "local") and sync it; the first write asks.
        try tui.waitAll(["local", "dav", "s sync"])
        try tui.press("End")
        try tui.press("s")
        try tui.wait(for: "y  allow the first write", timeout: 60)
        try tui.press("y")
        try tui.wait(for: "Completed: 1 file uploaded", timeout: 60)
        XCTAssertEqual(try String(contentsOfFile: server.root + "/backup/letter.txt", encoding: .utf8), "dear bank")
        try tui.press("q")
        XCTAssertEqual(try tui.exitStatus(), 0)

        let written = try config(home)
        XCTAssertTrue(written.contains("[dav]"), written)
        XCTAssertFalse(written.contains(server.secret), "the password is in the config")
        let state = FileManager.default.subpaths(atPath: home.dir.path("state")) ?? []
        for file in state {
            let data = FileManager.default.contents(atPath: home.dir.path("state/" + file)) ?? Data()
            XCTAssertNil(data.range(of: Data(server.secret.utf8)), "the password is in the state file \(file)")
        }
    }

    func testAt40x12TheFormScrollsToTheFocusedFieldAndKeepsHelpAndQuit() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        try home.backUpSample()
        let tui = try tmux(home, width: 40, height: 12)
        try tui.wait(for: "default")
        try tui.press("e")
        let top = try tui.wait(for: "Source")
        XCTAssertFalse(top.contains("[ Save ]"), "at 40x12 the form does not fit: \(top)")
        try press(tui, "Tab", times: 15)
        let bottom = try tui.waitAll(["[ Save ]", "? help", "q quit"])
        XCTAssertFalse(bottom.contains("Source "), "the form scrolled: \(bottom)")
        try press(tui, "BTab", times: 15)
        try tui.wait(for: "Source")
        try tui.press("Escape")
        try tui.wait(for: "the profile list") { !$0.contains("edit profile") }
        try tui.press("q")
        XCTAssertEqual(try tui.exitStatus(), 0)
    }
}
