// TerminalText.visible: what a remote controls (names, group names, server messages) is shown
// with every control and bidi character as a visible escape, and nothing else changes.

import BackupApp
import XCTest

final class TerminalTextTests: XCTestCase {
    func testC0ControlsShowAsLowercaseTwoDigitHexEscapes() {
        XCTAssertEqual(TerminalText.visible("a\u{1B}[2Jb"), "a\\x1b[2Jb")
        XCTAssertEqual(TerminalText.visible("\u{00}\u{01}\u{07}\u{08}\u{1F}"), "\\x00\\x01\\x07\\x08\\x1f")
    }

    func testNewlineTabAndCarriageReturnUseTheirShortForms() {
        XCTAssertEqual(TerminalText.visible("one\ntwo\tthree\rfour"), "one\\ntwo\\tthree\\rfour")
        XCTAssertEqual(TerminalText.visible("crlf\r\n"), "crlf\\r\\n", "a CRLF is one Character in Swift but two escapes")
    }

    func testDELAndC1ControlsShowAsHexEscapes() {
        XCTAssertEqual(TerminalText.visible("\u{7F}\u{80}\u{9B}2J\u{9D}\u{9F}"), "\\x7f\\x80\\x9b2J\\x9d\\x9f")
    }

    func testBidiControlsShowAsUnicodeEscapes() {
        let all: [UInt32] = [0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]
        for value in all {
            let scalar = Unicode.Scalar(value).map(String.init) ?? ""
            XCTAssertEqual(TerminalText.visible("a" + scalar + "b"), "a\\u{" + String(value, radix: 16, uppercase: true) + "}b")
        }
        XCTAssertEqual(TerminalText.visible("invoice\u{202E}fdp.exe"), "invoice\\u{202E}fdp.exe")
    }

    func testAnOSC52ClipboardWriteIsShownNotSent() {
        XCTAssertEqual(TerminalText.visible("\u{1B}]52;c;ZWNobyBwd25lZA==\u{07}"), "\\x1b]52;c;ZWNobyBwd25lZA==\\x07")
    }

    func testPrintableTextIsUnchangedAndEscapingTwiceChangesNothing() {
        let plain = "photos/写真 é e\u{301} 🙂 \\x1b back\\slash ~"
        XCTAssertEqual(TerminalText.visible(plain), plain)
        let once = TerminalText.visible("a\u{1B}b\nc\u{202E}")
        XCTAssertEqual(TerminalText.visible(once), once)
        XCTAssertFalse(once.unicodeScalars.contains(where: TerminalText.needsEscape))
    }

    func testLinesKeepTheirBreaksButALineBreakInsideALineCannotStartOne() {
        let shown = TerminalText.visible(lines: ["upload a.txt", "upload b\nrestored 0 file(s)", "done"])
        XCTAssertEqual(shown, "upload a.txt\nupload b\\nrestored 0 file(s)\ndone")
        XCTAssertEqual(shown.split(separator: "\n").count, 3)
    }
}
