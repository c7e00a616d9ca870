// The input/draw loop: redraws at most ten times a second however fast progress comes (a
// key redraws at once), asks before quitting or going back while a job runs and then waits
// for the job to stop, stops its jobs on a stop request (Ctrl-C), and redraws at a new size.

@testable import BackupTUI
@testable import BackupApp
import BackupEngine
import BackupTerminal
import XCTest

final class LoopTests: XCTestCase {
    private var f: TUIFixture!
    private let profile = Profile(name: "default", source: "/src", remote: "/remote")

    override func setUpWithError() throws {
        f = try TUIFixture()
    }

    override func tearDown() {
        f.dir.cleanup()
    }

    private func syncing() -> (Loop, ScreenBuffer, SyncJob) {
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), SyncScreen(context: f.context, profile: profile, request: SyncRequest())])
        let job = f.syncs[0].job
        job.receive(.phase("syncing"))
        job.receive(.syncStage(.uploading(files: 1000, bytes: 1000)))
        return (loop, buffer, job)
    }

    func testProgressRedrawsAtMostTenTimesASecond() {
        let (loop, buffer, job) = syncing()
        loop.step(timeoutMilliseconds: 0)
        let before = buffer.presented
        // One second of progress arriving every millisecond, the loop turning as fast.
        for step in 1...1000 {
            job.receive(.syncProgress(done: step, total: 1000, transfer: .sent(Int64(step), current: "f\(step)")))
            f.clock.advance(0.001)
            loop.step(timeoutMilliseconds: 0)
        }
        let frames = buffer.presented - before
        XCTAssertLessThanOrEqual(frames, 11)
        XCTAssertGreaterThanOrEqual(frames, 9, "progress keeps being drawn")
        let shown = buffer.lines[5].split(separator: " ").compactMap { Int($0.replacingOccurrences(of: ",", with: "")) }.first ?? 0
        XCTAssertGreaterThanOrEqual(shown, 900, "the latest value is drawn, not a queue of old ones: \(buffer.lines[5])")

        buffer.keys = [.character("x"), .character("x")]
        loop.step(timeoutMilliseconds: 0)
        loop.step(timeoutMilliseconds: 0)
        XCTAssertEqual(buffer.presented - before - frames, 2, "a key redraws at once")
    }

    func testNothingChangingDrawsNothing() {
        let (loop, buffer) = f.loop([HomeScreen(context: f.context)])
        loop.step(timeoutMilliseconds: 0)
        for _ in 0..<50 {
            f.clock.advance(0.1)
            loop.step(timeoutMilliseconds: 0)
        }
        XCTAssertEqual(buffer.presented, 1)
    }

    func testQuitWithoutAJobQuitsAtOnce() {
        let (loop, buffer) = f.loop([HomeScreen(context: f.context)])
        f.press([.character("q")], loop, buffer)
        XCTAssertEqual(loop.finished, .success)
        let (f10, buffer10) = f.loop([HomeScreen(context: f.context)])
        f.press([.function(10)], f10, buffer10)
        XCTAssertEqual(f10.finished, .success)
    }

    func testQuitWhileAJobRunsAsksFirstThenStopsTheJobAndWaitsForIt() {
        let (loop, buffer, job) = syncing()
        f.press([.character("q")], loop, buffer)
        XCTAssertNil(loop.finished)
        XCTAssertTrue(buffer.text.contains("Quit?"), buffer.text)
        XCTAssertTrue(buffer.text.contains("Quitting stops it cleanly"), buffer.text)
        f.press([.character("n")], loop, buffer)
        XCTAssertFalse(buffer.text.contains("Quit?"))
        XCTAssertFalse(job.wasCancelled)

        f.press([.character("q"), .character("y")], loop, buffer)
        XCTAssertTrue(job.wasCancelled)
        XCTAssertNil(loop.finished, "the loop waits for the job to save what it finished")
        XCTAssertTrue(buffer.lines.last?.contains("Stopping") == true, buffer.text)
        job.finish(.failure(AppError(.interrupted, "interrupted")))
        f.press([], loop, buffer)
        XCTAssertEqual(loop.finished, .interrupted)
    }

    func testAQuitQuestionAboutAJobThatEndedMeanwhileGoesAway() {
        let (loop, buffer, job) = syncing()
        f.press([.character("q")], loop, buffer)
        XCTAssertTrue(buffer.text.contains("A job is still running"), buffer.text)
        job.finish(.success(SyncSummary(profile: "default", result: .ran(.completed(SyncReport())), files: 0, bytes: 0,
                                        hashedFiles: 0, absent: 0, notes: [], symlinks: 0, folders: 0)))
        f.press([], loop, buffer)
        XCTAssertFalse(buffer.text.contains("still running"), "a stale question over the outcome: \(buffer.text)")
        XCTAssertTrue(buffer.text.contains("Completed"), buffer.text)
        XCTAssertNil(loop.finished, "the question went away; nothing quit by itself")
        f.press([.character("y")], loop, buffer)
        XCTAssertNil(loop.finished, "an answer to a question that is gone does nothing")
        XCTAssertFalse(job.wasCancelled)
    }

    func testGoingBackFromARunningJobAsksAndStopsIt() {
        let (loop, buffer, job) = syncing()
        f.press([.escape], loop, buffer)
        XCTAssertTrue(buffer.text.contains("Stop and go back?"), buffer.text)
        f.press([.character("y")], loop, buffer)
        XCTAssertTrue(job.wasCancelled)
        XCTAssertTrue(loop.top is SyncScreen)
        job.finish(.failure(AppError(.interrupted, "interrupted")))
        f.press([], loop, buffer)
        XCTAssertTrue(loop.top is HomeScreen)
        XCTAssertNil(loop.finished)
    }

    func testAStopRequestStopsTheJobsAndEndsInterrupted() {
        let (loop, buffer, job) = syncing()
        loop.stop.raise()
        f.press([], loop, buffer)
        XCTAssertTrue(job.wasCancelled)
        XCTAssertNil(loop.finished)
        job.finish(.failure(AppError(.interrupted, "interrupted")))
        f.press([], loop, buffer)
        XCTAssertEqual(loop.finished, .interrupted)
    }

    func testHelpOpensOverAnyScreenAndClosesAgain() {
        let (loop, buffer) = f.loop([HomeScreen(context: f.context)])
        f.press([.character("?")], loop, buffer)
        XCTAssertTrue(loop.top is HelpScreen)
        XCTAssertTrue(buffer.text.contains("Profiles"), buffer.text)
        f.press([.escape], loop, buffer)
        XCTAssertTrue(loop.top is HomeScreen)
        f.press([.function(1)], loop, buffer)
        XCTAssertTrue(loop.top is HelpScreen)
        f.press([.character("q")], loop, buffer)
        XCTAssertTrue(loop.top is HomeScreen, "q closes help rather than quitting")
        XCTAssertNil(loop.finished)
    }

    func testAResizeRedrawsAtTheNewSize() {
        let (loop, buffer, job) = syncing()
        job.receive(.syncProgress(done: 50, total: 100, transfer: .sent(0, current: nil)))
        f.press([], loop, buffer)
        XCTAssertEqual(buffer.style(row: 0, column: 59), .chrome)
        buffer.resize(columns: 100, rows: 30)
        loop.step(timeoutMilliseconds: 0)
        XCTAssertEqual(buffer.style(row: 0, column: 99), .chrome, "the title bar spans the new width")
        XCTAssertTrue(buffer.lines[0].hasSuffix("? help"), buffer.lines[0])
        XCTAssertEqual(buffer.lines[0].count, 99)
        XCTAssertEqual(buffer.lines.count, 30)
        XCTAssertTrue(buffer.lines[29].contains("q quit"), "the footer moved to the new last row")
        XCTAssertTrue(buffer.lines[6].hasSuffix(" 50%"), buffer.lines[6])
        XCTAssertEqual(buffer.lines[6].filter { $0 == "█" || $0 == "░" }.count, 91, "the bar spans the new width")
    }

    func testATooSmallTerminalSaysSo() {
        let text = f.frame([HomeScreen(context: f.context)], columns: 30, rows: 8).replacingOccurrences(of: "\n", with: " ")
        XCTAssertTrue(text.contains("at least 40x12"), text)
        XCTAssertTrue(text.contains("30x8"), text)
    }
}
