// DisplayWidth: cell widths as wcwidth gives them, and cutting text by cells.

import BackupTerminal
import XCTest

final class DisplayWidthTests: XCTestCase {
    func testWidthsOfScripts() {
        XCTAssertEqual(DisplayWidth.of("abc"), 3)
        XCTAssertEqual(DisplayWidth.of("日本語"), 6)
        XCTAssertEqual(DisplayWidth.of("한국어"), 6)
        XCTAssertEqual(DisplayWidth.of("Ελληνικά"), 8)
        XCTAssertEqual(DisplayWidth.of("Привет"), 6)
        XCTAssertEqual(DisplayWidth.of("ＡＢ"), 4, "fullwidth forms")
        XCTAssertEqual(DisplayWidth.of("🙂"), 2)
        XCTAssertEqual(DisplayWidth.of("a\u{200B}b"), 2, "a zero-width space takes no cell")
    }

    func testTruncationKeepsWholeCharactersAndMarksTheCut() {
        XCTAssertEqual(DisplayWidth.truncated("report.txt", to: 20), "report.txt")
        XCTAssertEqual(DisplayWidth.truncated("report.txt", to: 7), "report…")
        XCTAssertEqual(DisplayWidth.truncated("日本語のファイル", to: 6), "日本…")
        XCTAssertEqual(DisplayWidth.truncated("日本語のファイル", to: 7), "日本語…")
    }

    func testPathsAreCutFromTheFront() {
        XCTAssertEqual(DisplayWidth.truncatedHead("/home/alice/Documents/report.txt", to: 14), "…ts/report.txt")
        XCTAssertEqual(DisplayWidth.truncatedHead("写真/日本語.jpg", to: 9), "…本語.jpg")
    }

    func testPaddingFillsExactlyTheWidth() {
        XCTAssertEqual(DisplayWidth.padded("日本", to: 6), "日本  ")
        XCTAssertEqual(DisplayWidth.of(DisplayWidth.padded("日本語のファイル", to: 9)), 9)
    }
}
