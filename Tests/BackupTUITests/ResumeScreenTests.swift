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
        XCTAssertTrue(text.contains("3 placed · 2 staged · 0 pending · 2 with failed attempts"), text)
        XCTAssertTrue(text.contains("! papers   ██████████████████ 3/3 placed"), text)
        XCTAssertTrue(text.contains("photos   ██████████████████ 0/2 placed, 2 staged"), text)
        XCTAssertTrue(text.contains("photos: 1 failed attempt (rejected at placement)"), text)
        XCTAssertTrue(buffer.lines.last?.hasPrefix(" Enter continue  t retry failed") == true, text)

        f.press([.enter], loop, buffer)
        XCTAssertTrue(loop.top is RestoreScreen)
        XCTAssertEqual(f.restores.count, 1)
        XCTAssertEqual(f.restores[0].job.request.resume, true)
        XCTAssertEqual(f.restores[0].job.request.resetAttempts, false)
        XCTAssertEqual(f.restores[0].record, f.app.paths.restoreRecord(profile: "default"))
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
