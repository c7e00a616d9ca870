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
             backup · set up your first backup                  F1 help

             Which folder to back up, and where to. A folder path as
             the remote (another disk, a NAS share) needs nothing else
             set up.

             Source
             Remote
                       a folder, webdav://host/path or s3://bucket/path
             Profile   default

             [ ] Allow the first upload to this remote (Space)
                 Enter saves the profile; the first backup asks again.






             Enter next/save  Esc back  F1 help
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

    func testAFieldEditsAtItsCursorAsAShellLineDoes() {
        var field = TextField("/home/alice/Documets")
        for key in [Key.left, .left, .character("n")] { XCTAssertTrue(field.handle(key)) }
        XCTAssertEqual(field.value, "/home/alice/Documents")
        for key in [Key.home, .delete, .character("~"), .end, .control("w")] + TUIFixture.type("Music") { _ = field.handle(key) }
        XCTAssertEqual(field.value, "~home/alice/Music")
        for key in [Key.control("a"), .right, .control("e"), .backspace, .control("w"), .control("w")] { _ = field.handle(key) }
        XCTAssertEqual(field.value, "~home/")
        XCTAssertFalse(field.handle(.function(1)), "F1 is no edit: it opens help")
        _ = field.handle(.control("u"))
        XCTAssertEqual(field.value, "")
        XCTAssertEqual(field.cursor, 0)
    }

    func testALongFieldScrollsSoTheCursorStaysInView() {
        let screen = FirstRunScreen(context: f.context, takenNames: [])
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), screen])
        let long = "/srv/" + String(repeating: "deep/", count: 20) + "END"
        f.press(TUIFixture.type(long) + [.home] + TUIFixture.type("START"), loop, buffer)
        XCTAssertEqual(screen.source.value, "START" + long)
        let row = buffer.lines.first { $0.hasPrefix(" Source") } ?? ""
        XCTAssertTrue(row.contains("START/srv/deep/"), "the start of the text shows where the cursor is: \(row)")
        XCTAssertFalse(row.contains("END"), row)
    }

    func testAtFortyColumnsTheFooterKeepsHelpAndQuit() {
        let home = HomeScreen(context: f.context)
        let buffer = ScreenBuffer(columns: 40, rows: 12)
        let canvas = Canvas(buffer)
        canvas.footer([.sync, .restore, .resume, .hold, .newProfile, .help, .quit], keys: home.keys)
        buffer.present()
        let footer = buffer.lines.last ?? ""
        XCTAssertTrue(footer.hasSuffix("? help  q quit"), footer)
        XCTAssertTrue(footer.hasPrefix(" s sync"), footer)
        canvas.footer([.submit, .back, .help, .quit], keys: KeyMaps.firstRun, typing: true)
        buffer.present()
        let typing = buffer.lines.last ?? ""
        XCTAssertTrue(typing.contains("F1 help  F10 quit"), "while typing, keys that are not typed: \(typing)")
    }
}
