// A password typed into the interface, in the real binary in tmux against `rclone serve webdav`:
// a WebDAV profile with no password anywhere ends its sync "not synced" and offers `p`; the
// password typed there is shown as dots, is used for this session's jobs (the sync runs), is
// asked again when the server refuses it, and is written nowhere (config, state).

import BackupTestSupport
import Foundation
import XCTest

final class TUIPasswordTests: XCTestCase {
    private typealias Home = TUIEndToEndTests.Home


    func testAPasswordTypedInTheInterfaceRunsTheSyncIsAskedAgainWhenRefusedAndIsWrittenNowhere() throws {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try home.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
        try home.write("notes.txt", "six b")
        XCTAssertEqual(try home.scripted(["init", "--source", home.source, "--remote", "webdav://\(server.user)@127.0.0.1:\(server.port)/backup"]), 0)

        // No BACKUP_PASSWORD, no password_command: the sync cannot start.
        let tui = try Tmux(width: 100, height: 30, arguments: ["sync", "--yes"], environment: home.environment, directory: home.dir.path)
        addTeardownBlock { tui.kill() }
        let missing = try tui.waitAll(["Not synced", "p  type the remote's password"])
        XCTAssertTrue(missing.contains("p password"), "the footer offers the key: \(missing)")

        // A wrong one first: the server refuses it, and the screen offers the key again.
        try tui.press("p")
        try tui.wait(for: "never written)")
        try tui.type("wrong-one")
        let dots = try tui.wait(for: "•••••••••")
        XCTAssertFalse(dots.contains("wrong-one"), "a password is never drawn: \(dots)")
        try tui.press("Enter")
        let refused = try tui.waitAll(["Failed: ", "refused the credentials", "Nothing was written", "p  type the remote's password"], timeout: 60)
        XCTAssertFalse(refused.contains("wrong-one"), refused)

        // The right one: the sync runs to its end with it.
        try tui.press("p")
        try tui.wait(for: "never written)")
        try tui.type(server.secret)
        try tui.press("Enter")
        let synced = try tui.wait(for: "Completed: 1 file uploaded", timeout: 60)
        XCTAssertFalse(synced.contains(server.secret), synced)
        XCTAssertEqual(try String(contentsOfFile: server.root + "/backup/notes.txt", encoding: .utf8), "six b")
        try tui.press("q")
        XCTAssertEqual(try tui.exitStatus(), 0)

        // Nothing of it on disk: not in the config, not in the state.
        for folder in ["config", "state", "home"] {
            let written = home.everything(under: folder)
            XCTAssertFalse(written.contains(server.secret), "the password is in \(folder)")
            XCTAssertFalse(written.contains("wrong-one"), "the wrong password is in \(folder)")
        }
    }
}
