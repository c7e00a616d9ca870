// ScreenBuffer: the in-memory terminal lays text out as the real one does: wide characters
// take two cells and are never cut in half, text is clipped at the edge, control
// characters never reach the screen, and a frame shows only once it is presented.

import BackupTerminal
import XCTest

final class ScreenBufferTests: XCTestCase {
    func testTextIsClippedAtTheRightEdge() {
        let screen = ScreenBuffer(columns: 10, rows: 2)
        screen.draw("hello, world", row: 0, column: 3, style: .normal)
        screen.present()
        XCTAssertEqual(screen.lines, ["   hello,", ""])
    }

    func testCJKTakesTwoCellsAndIsNotCutInHalf() {
        let screen = ScreenBuffer(columns: 7, rows: 1)
        screen.draw("日本語ab", row: 0, column: 0, style: .normal)
        screen.present()
        // Three wide characters fill six cells; "a" fits in the seventh, "b" does not.
        XCTAssertEqual(screen.text, "日本語a")
        let odd = ScreenBuffer(columns: 5, rows: 1)
        odd.draw("日本語", row: 0, column: 0, style: .normal)
        odd.present()
        XCTAssertEqual(odd.text, "日本", "the third character would need cells 5 and 6")
    }

    func testOverwritingHalfAWideCharacterBlanksTheOtherHalf() {
        let screen = ScreenBuffer(columns: 6, rows: 1)
        screen.draw("日本語", row: 0, column: 0, style: .normal)
        screen.draw("x", row: 0, column: 1, style: .normal)
        screen.present()
        XCTAssertEqual(screen.text, " x本語")
    }

    func testControlCharactersShowAsQuestionMarks() {
        let screen = ScreenBuffer(columns: 20, rows: 1)
        screen.draw("a\nb\u{1B}[2Jc\td", row: 0, column: 0, style: .normal)
        screen.present()
        XCTAssertEqual(screen.text, "a?b?[2Jc?d")
    }

    func testCombiningMarksStayWithTheirLetter() {
        let screen = ScreenBuffer(columns: 4, rows: 1)
        screen.draw("e\u{301}te\u{301}", row: 0, column: 0, style: .normal)
        screen.present()
        XCTAssertEqual(screen.text, "e\u{301}te\u{301}")
        XCTAssertEqual(DisplayWidth.of(screen.text), 3)
    }

    func testOnlyAPresentedFrameIsVisible() {
        let screen = ScreenBuffer(columns: 5, rows: 1)
        screen.draw("one", row: 0, column: 0, style: .normal)
        XCTAssertEqual(screen.text, "")
        screen.present()
        screen.erase()
        screen.draw("two", row: 0, column: 0, style: .accent)
        XCTAssertEqual(screen.text, "one")
        screen.present()
        XCTAssertEqual(screen.text, "two")
        XCTAssertEqual(screen.style(row: 0, column: 0), .accent)
    }

    func testResizeChangesTheSizeAndQueuesTheResizeKey() {
        let screen = ScreenBuffer(columns: 100, rows: 30)
        screen.resize(columns: 60, rows: 20)
        XCTAssertEqual(screen.size, Size(rows: 20, columns: 60))
        XCTAssertEqual(screen.readKey(timeoutMilliseconds: 0), .resize)
        XCTAssertNil(screen.readKey(timeoutMilliseconds: 0))
    }
}
