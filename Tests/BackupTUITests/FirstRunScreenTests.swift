// Setting up a profile: the source, the remote (a folder path needs nothing else), the name
// and the first upload's consent; saving writes the config through BackupApp and, with
// consent, starts the first sync at once.

@testable import BackupTUI
import BackupApp
import BackupEngine
import BackupTerminal
import XCTest

final class FirstRunScreenTests: XCTestCase {
    private var f: TUIFixture!

    override func setUpWithError() throws {
        f = try TUIFixture()
    }

    override func tearDown() {
        f.dir.cleanup()
    }

    func testTheFirstRunAsksForTheSourceTheRemoteAndConsent() {
        assertScreen(f.frame([FirstRunScreen(context: f.context, takenNames: [])]), """
             backup · set up your first backup                   ? help

             Which folder to back up, and where to. A folder path as
             the remote (another disk, a NAS share) needs nothing else
             set up.

             Source
             Remote
                       a folder, webdav://host/path or s3://bucket/path
             Profile   default

             [ ] Allow the first upload to this remote (Space)
                 Enter saves the profile; the first backup asks again.






             Enter next/save  Esc back  ? help
            """)
    }

    func testSavingWithConsentWritesTheProfileAndRunsTheFirstSync() throws {
        let source = try f.dir.makeFolder("Documents")
        let remote = try f.dir.makeFolder("mnt/backup")
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), FirstRunScreen(context: f.context, takenNames: [])])
        f.press(TUIFixture.type(source) + [.tab] + TUIFixture.type(remote) + [.enter, .enter, .character(" ")], loop, buffer)
        XCTAssertTrue(buffer.text.contains("[x] Allow the first upload"), buffer.text)
        XCTAssertTrue(buffer.text.contains("Enter saves the profile and runs the first backup now."), buffer.text)
        f.press([.enter], loop, buffer)

        let saved = try XCTUnwrap(try f.app.loadConfig().profile("default"))
        XCTAssertEqual(saved.source, source)
        XCTAssertEqual(saved.remote, remote)
        XCTAssertTrue(loop.top is SyncScreen)
        XCTAssertEqual(f.syncs.count, 1)
        XCTAssertEqual(f.syncs[0].job.request.consent, true)
        XCTAssertEqual(loop.stack.count, 2, "the sync screen took the form's place, home is below")
    }

    func testSavingWithoutConsentGoesBackHomeWithTheNewProfile() throws {
        let source = try f.dir.makeFolder("Documents")
        let remote = try f.dir.makeFolder("mnt/backup")
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), FirstRunScreen(context: f.context, takenNames: [])])
        f.press(TUIFixture.type(source) + [.enter] + TUIFixture.type(remote) + [.enter, .control("u")]
            + TUIFixture.type("docs") + [.enter, .enter], loop, buffer)
        XCTAssertTrue(loop.top is HomeScreen)
        XCTAssertTrue(f.syncs.isEmpty, "no upload without consent")
        XCTAssertTrue(buffer.text.contains("▸ docs"), buffer.text)
    }

    func testAMissingSourceFolderIsExplainedAndNothingIsSaved() throws {
        let remote = try f.dir.makeFolder("mnt/backup")
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), FirstRunScreen(context: f.context, takenNames: [])])
        f.press(TUIFixture.type(f.dir.path("Dokuments")) + [.tab] + TUIFixture.type(remote) + [.tab, .tab, .enter], loop, buffer)
        XCTAssertTrue(loop.top is FirstRunScreen)
        XCTAssertTrue(buffer.text.replacingOccurrences(of: "\n ", with: " ").contains("Dokuments does not exist"), buffer.text)
        XCTAssertNil(try f.app.loadConfig().profile("default"))
    }

    func testKeysThatMeanSomethingElseAreTypedIntoAField() {
        let screen = FirstRunScreen(context: f.context, takenNames: [])
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), screen])
        f.press(TUIFixture.type("/q?/x y") + [.backspace], loop, buffer)
        XCTAssertEqual(screen.source.value, "/q?/x ")
        XCTAssertNil(loop.finished, "q typed into a field does not quit")
        XCTAssertTrue(loop.top is FirstRunScreen, "? typed into a field does not open help")
        f.press([.function(1)], loop, buffer)
        XCTAssertTrue(loop.top is HelpScreen, "F1 still does")
        XCTAssertTrue(buffer.text.contains("Text fields"), buffer.text)
    }
}
