// Progress that follows bytes, in the real binary in tmux against a throttled WebDAV server:
// while one large file moves, the bar, the percentage, the rate and the ETA move with it, the
// file is listed with its own bytes, and the elapsed time runs — for the upload of a sync and
// for the download of a restore. (`rclone serve webdav --bwlimit` reads an upload's whole
// body at once and throttles behind it, so a client sees it sent at once, and then waits;
// the pace of a slow link comes from the fault proxy in front of it, which relays both
// bodies at 2 MiB a second.)

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class TUIByteProgressTests: XCTestCase {
    private typealias Home = TUIEndToEndTests.Home

    /// The percentage on the first bar of `screen` whose row starts with `label` (any bar when nil).
    private static func percent(_ screen: String, label: String? = nil) -> Int? {
        for line in screen.split(separator: "\n") where line.contains("█") || line.contains("░") {
            if let label, !line.trimmingCharacters(in: .whitespaces).hasPrefix(label) { continue }
            guard let last = line.split(separator: " ").last, last.hasSuffix("%") else { continue }
            return Int(last.dropLast())
        }
        return nil
    }

    /// A profile over a WebDAV server behind a proxy that relays 2 MiB a second, its source
    /// holding `big.bin` of `mebibytes`; the environment to run the binary with.
    private func throttledHome(mebibytes: Int) throws -> (Home, [String: String]) {
        let home = try Home()
        addTeardownBlock { home.dir.cleanup() }
        return (home, try throttledWebDAVProfile(home, mebibytes: mebibytes).environment)
    }

    func testOneLargeFileMovesTheByteBarWhileItUploadsAndWhileItDownloads() throws {
        // 16 MiB at 2 MiB/s: several seconds of one file in flight.
        let (home, environment) = try throttledHome(mebibytes: 16)

        let sync = try Tmux(width: 100, height: 30, arguments: ["sync", "--yes"], environment: environment, directory: home.dir.path)
        addTeardownBlock { sync.kill() }
        var moving = Set<Int>()
        var sawRate = false, sawElapsed = false
        let synced = try sync.wait(for: "the sync to complete", timeout: 60) { screen in
            // Only while the one file is in flight and none has landed: the bar is its bytes.
            if screen.contains("Uploading: 0 of 1 file"), screen.contains("Moving   big.bin"),
               let percent = Self.percent(screen), percent > 0, percent < 100 {
                moving.insert(percent)
                if screen.contains("MiB of 16.0 MiB ·"), screen.contains("/s · ETA ") { sawRate = true }
                if screen.contains("Elapsed  0:0") { sawElapsed = true }
            }
            return screen.contains("Completed:")
        }
        XCTAssertGreaterThanOrEqual(moving.count, 3, "the bar moved during the one file's upload: \(moving.sorted())\n\(synced)")
        XCTAssertTrue(sawRate, "the rate and the ETA were shown while it moved")
        XCTAssertTrue(sawElapsed, "the elapsed time was shown while it moved")
        XCTAssertTrue(synced.contains("Completed: 1 file uploaded (16.0 MiB)"), synced)
        try sync.press("q")
        XCTAssertEqual(try sync.exitStatus(), 0)

        let target = home.dir.path("restored")
        let restore = try Tmux(width: 100, height: 30, arguments: ["restore", "--to", target], environment: environment, directory: home.dir.path)
        addTeardownBlock { restore.kill() }
        var received = Set<Int>()
        let asked = try restore.wait(for: "the placement prompt", timeout: 60) { screen in
            if screen.contains("Moving   big.bin"), let percent = Self.percent(screen, label: "Bytes"), percent > 0, percent < 100 {
                received.insert(percent)
            }
            return screen.contains("Place group")
        }
        XCTAssertGreaterThanOrEqual(received.count, 3, "the byte bar moved during the one file's download: \(received.sorted())\n\(asked)")
        try restore.press("p")
        try restore.wait(for: "Completed:")
        try restore.press("q")
        XCTAssertEqual(try restore.exitStatus(), 0)
        XCTAssertEqual(FileManager.default.contents(atPath: target + "/big.bin")?.count, 16 << 20)
    }

    func testAQuitQuestionGoesAwayWhenTheSyncEndsBeforeItIsAnswered() throws {
        let (home, environment) = try throttledHome(mebibytes: 8)
        let sync = try Tmux(width: 100, height: 30, arguments: ["sync", "--yes"], environment: environment, directory: home.dir.path)
        addTeardownBlock { sync.kill() }
        try sync.wait(for: "Uploading: 0 of 1 file")
        try sync.press("q")
        try sync.wait(for: "A job is still running")
        let ended = try sync.wait(for: "Completed:", timeout: 60)
        XCTAssertFalse(ended.contains("still running"), "the question stayed over the outcome:\n\(ended)")
        XCTAssertFalse(ended.contains("Quit?"), ended)
        try sync.press("q")
        XCTAssertEqual(try sync.exitStatus(), 0)
    }

    func testAHoldSetFromTheSyncScreenWhileItRunsStopsItBeforeTheMarker() throws {
        let (home, environment) = try throttledHome(mebibytes: 12)
        let sync = try Tmux(width: 100, height: 30, arguments: ["sync", "--yes"], environment: environment, directory: home.dir.path)
        addTeardownBlock { sync.kill() }
        let running = try sync.wait(for: "Uploading: 0 of 1 file")
        XCTAssertTrue(running.contains("h hold"), running)
        try sync.press("h")
        try sync.wait(for: "No write hold is set")
        try sync.press("s")
        try sync.wait(for: "Why?")
        try sync.type("moving the disk")
        try sync.press("Enter")
        try sync.wait(for: "moving the disk")
        try sync.press("Escape")
        let stopped = try sync.wait(for: "Stopped by the write hold", timeout: 60)
        let words = stopped.replacingOccurrences(of: "\n ", with: " ")
        XCTAssertTrue(words.contains("Stopped by the write hold (moving the disk) after 1 file uploaded (12.0 MiB)"), stopped)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home.dir.path("webdav-root/backup/" + SyncEngine.defaultMarkerPath)),
                       "the marker was written after the hold")
        try sync.press("q")
        XCTAssertEqual(try sync.exitStatus(), 3)
    }
}

extension XCTestCase {
    /// A profile of `home` (its source holding `big.bin` of `mebibytes`) over a WebDAV server
    /// behind a proxy that relays 2 MiB a second: the environment to run the binary with, and
    /// the folder the server serves.
    func throttledWebDAVProfile(
        _ home: TUIEndToEndTests.Home, mebibytes: Int, profile: String = "default"
    ) throws -> (environment: [String: String], root: String) {
        let server = try RcloneServer(.webdav, root: try home.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        addTeardownBlock { proxy.stop() }
        proxy.add(times: 100_000, .throttle(bytesPerSecond: 2 << 20))
        try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
        try home.write("big.bin", String(repeating: "0123456789abcdef", count: mebibytes * 65_536))
        XCTAssertEqual(try home.scripted(["init", "--profile", profile, "--source", home.source,
                                          "--remote", "webdav://\(server.user)@127.0.0.1:\(proxy.port)/backup"]), 0)
        return (home.environment.merging(["BACKUP_PASSWORD": server.secret]) { _, new in new }, server.root)
    }
}
