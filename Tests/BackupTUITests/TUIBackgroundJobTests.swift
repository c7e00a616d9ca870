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
    /// "local" to a folder. The environment to run the binary with.
    private func twoProfiles() throws -> (Home, [String: String], String) {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try home.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        addTeardownBlock { proxy.stop() }
        proxy.add(times: 100_000, .throttle(bytesPerSecond: 2 << 20))
        try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
        try home.write("big.bin", String(repeating: "0123456789abcdef", count: 16 * 65_536))
        let other = try home.dir.makeFolder("other")
        try Data("x".utf8).write(to: URL(fileURLWithPath: other + "/x.txt"))
        XCTAssertEqual(try home.scripted(["init", "--profile", "local", "--source", other, "--remote", home.remote]), 0)
        XCTAssertEqual(try home.scripted(["init", "--profile", "slow", "--source", home.source,
                                          "--remote", "webdav://\(server.user)@127.0.0.1:\(proxy.port)/backup"]), 0)
        return (home, home.environment.merging(["BACKUP_PASSWORD": server.secret]) { _, new in new }, server.root)
    }

    func testASyncSentToTheBackgroundGoesOnWhileOtherScreensAreBrowsedAndComesBackWithB() throws {
        let (home, environment, root) = try twoProfiles()
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
        let (home, environment, _) = try twoProfiles()
        let tui = try Tmux(width: 100, height: 30, arguments: [], environment: environment, directory: home.dir.path)
        addTeardownBlock { tui.kill() }
        try tui.waitAll(["local", "slow"])
        try tui.press("End")
        try tui.waitAll(["▸ slow"])
        try tui.press("s")
        try tui.wait(for: "y  allow the first write", timeout: 60)
        try tui.press("y")
        try tui.waitAll(["Uploading: 0 of 1 file", "b background"], timeout: 60)
        try tui.press("b")
        try tui.wait(for: "running in the background (b)")
        try tui.press("q")
        let asked = try tui.waitAll(["Quit?", "in the background too"])
        XCTAssertTrue(asked.contains("y yes"), asked)
        try tui.press("y")
        XCTAssertEqual(try tui.exitStatus(timeout: 60), 130, "a job stopped by quitting ends the session as interrupted")
    }
}
