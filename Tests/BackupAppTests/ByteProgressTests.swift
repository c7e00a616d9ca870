// Progress in bytes: the rate over a window of recent readings, the meter that counts each
// file in flight as it moves, and the scripted mode's progress events over a throttled WebDAV
// server, which carry the same numbers as the TUI (bytes so far, bytes expected, the files in
// flight with their own bytes) during one large file, for an upload and a download.

@testable import BackupApp
import BackupEngine
import BackupStorage
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class RateWindowTests: XCTestCase {
    func testTheRateIsOverTheLastSecondsNotSinceTheStart() {
        var window = RateWindow(seconds: 5)
        // Ten seconds at 1 MB/s, then five at 100 kB/s: the rate is the recent one.
        for second in 0...10 { window.add(time: Double(second), bytes: Int64(second) * 1_000_000) }
        for second in 11...15 { window.add(time: Double(second), bytes: 10_000_000 + Int64(second - 10) * 100_000) }
        let rate = try? XCTUnwrap(window.rate(at: 15))
        XCTAssertEqual(rate ?? 0, 100_000, accuracy: 1)
        XCTAssertEqual(window.secondsLeft(1_000_000, at: 15) ?? 0, 10, accuracy: 0.01)
    }

    func testNothingMovingForLongerThanTheWindowIsARateOfZeroAndNoETA() {
        var window = RateWindow(seconds: 5)
        window.add(time: 0, bytes: 0)
        window.add(time: 1, bytes: 1_000_000)
        XCTAssertEqual(window.rate(at: 1) ?? 0, 1_000_000, accuracy: 1)
        XCTAssertEqual(window.rate(at: 7), 0)
        XCTAssertNil(window.secondsLeft(5_000, at: 7))
    }

    func testNoRateBeforeHalfASecondOfReadingsAndAFreshStartAfterACountWentDown() {
        var window = RateWindow()
        window.add(time: 0, bytes: 0)
        window.add(time: 0.2, bytes: 500)
        XCTAssertNil(window.rate(at: 0.2))
        window.add(time: 1, bytes: 2_000)
        window.add(time: 1.1, bytes: 100)  // a retry started a file again
        XCTAssertNil(window.rate(at: 1.1))
    }
}

final class TransferMeterTests: XCTestCase {
    func testFilesInFlightCountTheirBytesAsTheyMoveAndLandWhole() {
        let meter = TransferMeter(tickInterval: .zero)
        let ticks = Mutex<[Int64]>([])
        meter.onTick { reading in ticks.withLock { $0.append(reading.bytes) } }
        meter.expect(300)
        let a = meter.started("a.bin", size: 200)
        let b = meter.started("b.bin", size: 100)
        meter.moved(a, bytes: 50)
        meter.moved(b, bytes: 30)
        XCTAssertEqual(meter.reading, TransferReading(bytes: 80, expectedBytes: 300, moving: [
            .init(path: "a.bin", bytes: 50, size: 200), .init(path: "b.bin", bytes: 30, size: 100),
        ]))
        meter.ended(a, bytes: 200)
        XCTAssertEqual(meter.reading.bytes, 230)
        XCTAssertEqual(meter.reading.current, "b.bin")
        // A failed transfer takes back what it had moved.
        meter.ended(b, bytes: nil)
        XCTAssertEqual(meter.reading, TransferReading(bytes: 200, expectedBytes: 300))
        XCTAssertEqual(meter.finishedBytes, 200)
        XCTAssertEqual(ticks.withLock { $0 }, [50, 80], "every move told when no tick interval holds it back")
    }

    func testTicksComeAtMostOnceAnInterval() {
        let meter = TransferMeter(tickInterval: .seconds(3600))
        let ticks = Mutex(0)
        meter.onTick { _ in ticks.withLock { $0 += 1 } }
        let id = meter.started("big.iso", size: nil)
        for step in 1...1000 { meter.moved(id, bytes: Int64(step)) }
        XCTAssertEqual(ticks.withLock { $0 }, 1)
        XCTAssertEqual(meter.reading.bytes, 1000)
    }
}

final class ScriptedByteProgressTests: XCTestCase {
    /// The progress events of a run whose only file was in flight and part-way.
    private func partWay(_ lines: [[String: Any]], size: Int) -> [[String: Any]] {
        lines.filter { line in
            guard line["event"] as? String == "progress", let bytes = line["bytes"] as? Int, bytes > 0, bytes < size,
                  let moving = line["in_flight"] as? [[String: Any]], moving.count == 1 else { return false }
            return moving[0]["path"] as? String == "big.bin"
        }
    }

    /// A fixture whose remote is a WebDAV server behind a proxy relaying 4 MiB a second, and its URL.
    private func throttledRemote() throws -> (CLIFixture, String) {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        addTeardownBlock { proxy.stop() }
        proxy.add(times: 100_000, .throttle(bytesPerSecond: 4 << 20))
        try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
        f.extraEnvironment = ["BACKUP_PASSWORD": server.secret]
        return (f, "webdav://\(server.user)@127.0.0.1:\(proxy.port)/backup")
    }

    func testJSONProgressFollowsTheBytesOfOneLargeFileUpAndDown() throws {
        let (f, url) = try throttledRemote()
        let size = 16 << 20
        try f.write("big.bin", String(repeating: "0123456789abcdef", count: size / 16))
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", url).status, 0)

        let sync = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(sync.status, 0, sync.stdout + sync.stderr)
        let stage = sync.jsonLines.first { $0["event"] as? String == "stage" }
        XCTAssertEqual(stage?["stage"] as? String, "uploading")
        XCTAssertEqual(stage?["bytes"] as? Int, size)
        let up = partWay(sync.jsonLines, size: size)
        XCTAssertGreaterThanOrEqual(up.count, 3, "progress during the upload: \(sync.stdout)")
        let sent = up.compactMap { $0["bytes"] as? Int }
        XCTAssertEqual(sent, sent.sorted(), "the bytes only grow")
        XCTAssertEqual(up.first?["bytes_total"] as? Int, size)
        XCTAssertEqual(up.first?["done"] as? Int, 0, "no step is done while the one file moves")
        let file = (up.last?["in_flight"] as? [[String: Any]])?.first
        XCTAssertEqual(file?["size"] as? Int, size)
        XCTAssertEqual(file?["bytes"] as? Int, up.last?["bytes"] as? Int)

        let restore = try f.run("restore", "--to", f.dir.path("restored"), "--json")
        XCTAssertEqual(restore.status, 0, restore.stdout + restore.stderr)
        let down = partWay(restore.jsonLines, size: size)
        XCTAssertGreaterThanOrEqual(down.count, 3, "progress during the download: \(restore.stdout)")
        XCTAssertEqual(down.first?["bytes_total"] as? Int, size)
        XCTAssertEqual(FileManager.default.contents(atPath: f.dir.path("restored/big.bin"))?.count, size)
    }

    func testTheProgressLineSaysTheBytesOfTheExpectedWithTheRate() throws {
        let (f, url) = try throttledRemote()
        try f.write("big.bin", String(repeating: "0123456789abcdef", count: (12 << 20) / 16))
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", url).status, 0)
        // Not a terminal: one plain line a second.
        let sync = try f.run("sync", "--yes")
        XCTAssertEqual(sync.status, 0, sync.stderr)
        XCTAssertTrue(sync.stderr.contains("uploading 1 file (12.0 MiB)…"), sync.stderr)
        let moving = sync.stderr.split(separator: "\n").filter { $0.hasPrefix("0/2 steps, ") && $0.contains(" of 12.0 MiB sent, ") }
        XCTAssertFalse(moving.isEmpty, sync.stderr)
        XCTAssertTrue(moving.contains { $0.contains("/s, ETA ") && $0.hasSuffix(": big.bin") }, sync.stderr)
    }
}
