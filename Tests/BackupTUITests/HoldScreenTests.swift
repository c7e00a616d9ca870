// The write hold screen: set with a reason, clear, both through BackupApp.setHold.

@testable import BackupTUI
import BackupApp
import BackupEngine
import BackupTerminal
import XCTest

final class HoldScreenTests: XCTestCase {
    func testSetWithAReasonThenClear() throws {
        let f = try TUIFixture()
        defer { f.dir.cleanup() }
        let profile = try f.profile()
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), HoldScreen(context: f.context, profile: profile)])
        f.press([], loop, buffer)
        XCTAssertTrue(buffer.text.contains("No write hold is set on \"default\"."), buffer.text)
        f.press([.character("s")], loop, buffer)
        XCTAssertTrue(buffer.text.contains("Set the write hold"), buffer.text)
        f.press(TUIFixture.type("moving disks") + [.enter], loop, buffer)
        XCTAssertEqual(try f.app.hold(profile), .held(reason: "moving disks"))
        XCTAssertTrue(buffer.text.contains("The write hold is set on \"default\":"), buffer.text)
        XCTAssertTrue(buffer.text.contains("moving disks"), buffer.text)
        XCTAssertTrue(buffer.lines.last?.contains("c clear") == true, buffer.text)

        f.press([.character("c")], loop, buffer)
        XCTAssertEqual(try f.app.hold(profile), WriteHold.none)
        XCTAssertTrue(buffer.text.contains("No write hold is set"), buffer.text)
    }

    func testEscCancelsTheReasonQuestion() throws {
        let f = try TUIFixture()
        defer { f.dir.cleanup() }
        let profile = try f.profile()
        let (loop, buffer) = f.loop([HomeScreen(context: f.context), HoldScreen(context: f.context, profile: profile)])
        f.press([.character("s")] + TUIFixture.type("oops") + [.escape], loop, buffer)
        XCTAssertEqual(try f.app.hold(profile), WriteHold.none)
        XCTAssertTrue(loop.top is HoldScreen, "Esc closed the question, not the screen")
    }
}
