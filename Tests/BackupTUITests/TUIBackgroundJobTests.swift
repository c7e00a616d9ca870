// A job left running in the background of the same TUI process, in the real binary in tmux:
// b on a running sync goes back to the profile list while the upload goes on (over a WebDAV
// server behind a proxy that relays 2 MiB a second), other screens can be browsed, b brings
// the sync back with its progress, and it ends as it would have in front. Quitting while a
// job runs in the background asks first and stops it cleanly.

import BackupTestSupport
import Foundation
import XCTest

final class TUIBackgroundJobTests: XCTestCase {
    private typealias Home = TUIEndToEndTests.Home

    /// Two profiles: "slow" over a throttled WebDAV server, its source holding 16 MiB, and
    /// "local" to a folder; the interface open with the sync of "slow" running, sent to the
    /// background. The folder the server serves.
    private func slowSyncInTheBackground() throws -> (Tmux, root: String) {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        let other = try home.dir.makeFolder("other")
        try Data("x".utf8).write(to: URL(fileURLWithPath: other + "/x.txt"))
        XCTAssertEqual(try home.scripted(["init", "--profile", "local", "--source", other, "--remote", home.remote]), 0)
        let (environment, root) = try throttledWebDAVProfile(home, mebibytes: 16, profile: "slow")
        let tui = try Tmux(width: 100, height: 30, arguments: [], environment: environment, directory: home.dir.path)
        addTeardownBlock { tui.kill() }
        try tui.waitAll(["local", "slow"])
        try tui.press("End")  // "slow" is listed after "local"
        try tui.waitAll(["▸ slow"])
        try tui.press("s")
        try tui.wait(for: "y  allow the first write", timeout: 60)
        try tui.press("y")
        try tui.waitAll(["Uploading: 0 of 1 file", "b background"], timeout: 60)
        try tui.press("b")
        return (tui, root)
    }

    func testASyncSentToTheBackgroundGoesOnWhileOtherScreensAreBrowsedAndComesBackWithB() throws {
        let (tui, root) = try slowSyncInTheBackground()
        let list = try tui.waitAll(["▸ slow", "running in the background (b)", "b to the job"])
        XCTAssertTrue(list.contains("local"), list)

        // Browse meanwhile: another profile in full, and back.
        try tui.press("Home")
        try tui.wait(for: "▸ local")
        try tui.press("Enter")
        try tui.wait(for: "profile \"local\"")
        try tui.press("Escape")
        try tui.wait(for: "▸ local")
        let stillRunning = try tui.screen()
        XCTAssertTrue(stillRunning.contains("running in the background (b)"), stillRunning)

        // b brings the sync back (the selected profile has none: the latest job), still going or done.
        try tui.press("b")
        try tui.wait(for: "sync \"slow\"")
        try tui.wait(for: "Completed: 1 file uploaded (16.0 MiB)", timeout: 60)
        XCTAssertEqual(FileManager.default.contents(atPath: root + "/backup/big.bin")?.count, 16 << 20)
        try tui.press("Escape")
        let after = try tui.waitAll(["▸ local", "slow"])
        XCTAssertFalse(after.contains("in the background"), "a job brought back and closed is not in the background: \(after)")
        try tui.press("q")
        XCTAssertEqual(try tui.exitStatus(), 0)
    }

    func testQuittingWithAJobInTheBackgroundAsksAndStopsItCleanly() throws {
        let (tui, _) = try slowSyncInTheBackground()
        try tui.wait(for: "running in the background (b)")
        try tui.press("q")
        let asked = try tui.waitAll(["Quit?", "in the background too"])
        XCTAssertTrue(asked.contains("y yes"), asked)
        try tui.press("y")
        XCTAssertEqual(try tui.exitStatus(timeout: 60), 130, "a job stopped by quitting ends the session as interrupted")
    }
}
