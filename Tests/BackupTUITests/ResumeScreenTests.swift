// The resume screen: the persisted record (placed, staged, pending, failed attempts by
// group), and continuing it, with or without trying again files out of attempts.

@testable import BackupTUI
import BackupApp
@testable import BackupEngine
import BackupTerminal
import XCTest

final class ResumeScreenTests: XCTestCase {
    private var f: TUIFixture!
    private var profile: Profile!

    override func setUpWithError() throws {
        f = try TUIFixture()
        profile = try f.profile()
    }

    override func tearDown() {
        f.dir.cleanup()
    }

    /// A record where papers is placed and photos was rejected once (still staged).
    private func writeRecord() throws {
        let path = f.app.paths.restoreRecord(profile: profile.name)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let record = try RestoreRecord(path: path)
        try record.begin(RestorePlan(source: SourceRef(identityKey: "id", markerRemoteId: nil, markerFingerprint: "fp"), files: samplePlan().map(\.file)))
        try record.setStatus(.done, [0, 1, 2])
        try record.countAttempt([3, 4], reason: "rejected at placement", status: .downloaded)
    }

    func testShowsTheRecordByGroupAndContinues() throws {
        try writeRecord()
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), ResumeScreen(context: f.context, profile: profile, request: RestoreRequest())])
        f.press([], loop, buffer)
        let text = buffer.text
        let words = text.replacingOccurrences(of: "\n ", with: " ")
        XCTAssertTrue(words.contains("3 placed · 2 not placed yet: 2 downloaded and checked, 0 not downloaded · 2 tried before"), text)
        XCTAssertTrue(text.contains("! papers   ██████████████ 3/3 placed"), text)
        // The bar fills with placed files, as the words beside it count.
        XCTAssertTrue(text.contains("photos   ░░░░░░░░░░░░░░ 0/2 placed, 2 downloaded"), text)
        XCTAssertTrue(text.contains("photos: tried 1 time, not placed (rejected at placement)"), "a rejection is no failure: \(text)")
        XCTAssertFalse(words.contains("skipped"), text)
        XCTAssertTrue(buffer.lines.last?.hasPrefix(" Enter continue  t retry failed") == true, text)

        f.press([.enter], loop, buffer)
        XCTAssertTrue(loop.top is RestoreScreen)
        XCTAssertEqual(f.restores.count, 1)
        XCTAssertEqual(f.restores[0].job.request.resume, true)
        XCTAssertEqual(f.restores[0].job.request.resetAttempts, false)
        XCTAssertEqual(f.restores[0].record, f.app.paths.restoreRecord(profile: "default"))
    }

    func testFilesOutOfTriesAreSaidToBeSkippedWithTheKeyAndTheFlag() throws {
        try writeRecord()
        let record = try RestoreRecord(path: f.app.paths.restoreRecord(profile: profile.name))
        try record.countAttempt([3], reason: "hash mismatch", status: .downloaded)
        try record.countAttempt([3], reason: "hash mismatch", status: .downloaded)
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), ResumeScreen(context: f.context, profile: profile, request: RestoreRequest())])
        f.press([], loop, buffer)
        let words = buffer.text.replacingOccurrences(of: "\n ", with: " ")
        XCTAssertTrue(words.contains("1 file skipped after 3 tries: press t to try them again (backup restore --resume --reset-attempts)."), buffer.text)
    }

    func testRetryFailedResetsTheAttempts() throws {
        try writeRecord()
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), ResumeScreen(context: f.context, profile: profile, request: RestoreRequest())])
        f.press([.character("t")], loop, buffer)
        XCTAssertEqual(f.restores.first?.job.request.resetAttempts, true)
    }

    func testWithoutARecordThereIsNothingToContinue() throws {
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), ResumeScreen(context: f.context, profile: profile, request: RestoreRequest())])
        f.press([.enter], loop, buffer)
        XCTAssertTrue(buffer.text.contains("There is no restore to resume for \"default\"."), buffer.text)
        XCTAssertTrue(f.restores.isEmpty)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.app.paths.restoreRecord(profile: "default")), "reading made no record")
    }
}
