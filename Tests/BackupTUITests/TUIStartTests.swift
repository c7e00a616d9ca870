// Which screens a session opens with: home at the bottom, the first-run form on an empty
// config, and the screen the command asked for on top; a TUI restore always lets conflicts
// reach the placement prompt.

@testable import BackupTUI
import BackupApp
import BackupEngine
import XCTest

final class TUIStartTests: XCTestCase {
    func testAnEmptyConfigOpensTheFirstRunForm() throws {
        let f = try TUIFixture()
        defer { f.dir.cleanup() }
        let screens = TUI.screens(for: .home, context: f.context)
        XCTAssertTrue(screens.first is HomeScreen)
        XCTAssertTrue(screens.last is FirstRunScreen)
        try f.profile()
        let again = TUI.screens(for: .home, context: f.context)
        XCTAssertEqual(again.count, 1)
    }

    func testCommandsOpenTheirScreenOverHome() throws {
        let f = try TUIFixture()
        defer { f.dir.cleanup() }
        let profile = try f.profile()
        let sync = TUI.screens(for: .sync(profile, SyncRequest(consent: true)), context: f.context)
        XCTAssertTrue(sync.first is HomeScreen)
        XCTAssertTrue(sync.last is SyncScreen)
        XCTAssertEqual(f.syncs.last?.job.request.consent, true)

        let restore = TUI.screens(for: .restore(profile, RestoreRequest(target: "/tmp/x"), placeAll: false), context: f.context)
        XCTAssertTrue(restore.last is RestoreScreen)
        XCTAssertEqual(f.restores.last?.job.request.overwrite, false, "the prompt asks before replacing a differing file; nothing turns --overwrite on")
        XCTAssertEqual(f.restores.last?.placeAll, false)

        let resume = TUI.screens(for: .resume(profile, RestoreRequest(resume: true), placeAll: true), context: f.context)
        XCTAssertTrue(resume.last is ResumeScreen)
    }
}
