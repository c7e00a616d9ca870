// Relative paths from a remote are checked on the bytes they stand for, so no escape of the
// name codec can climb out of the folder they are resolved in.

import BackupEngine
import XCTest

final class RelativePathTests: XCTestCase {
    private let e = "\u{201B}"

    func testEscapeEncodedDotDotIsRefused() {
        for path in ["\(e)2E\(e)2E/x.txt", "a/\(e)2E\(e)2E/\(e)2E\(e)2E/x", "\(e)2E", "\(e)2e\(e)2e/x"] {
            XCTAssertThrowsError(try RelativePath.components(of: path), path)
        }
    }

    func testEscapeEncodedSlashAndNULAreRefused() {
        for path in ["a\(e)2F..\(e)2Fx", "\(e)2F", "a\(e)00b", "x/\(e)2Fetc\(e)2Fpasswd"] {
            XCTAssertThrowsError(try RelativePath.components(of: path), path)
        }
    }

    func testEscapeForValidASCIIIsRefused() {
        // "‛41" would decode to "A": no file system gives that string, so it is refused.
        XCTAssertThrowsError(try RelativePath.components(of: "\(e)41.txt"))
        XCTAssertThrowsError(try RelativePath.components(of: "lone\(e)"))
    }

    func testCanonicalEscapesAreAccepted() throws {
        let latin1 = FileName.string(fromBytes: [0x63, 0x61, 0x66, 0xE9])  // "caf‛E9"
        let quote = FileName.string(fromBytes: Array("it\(e)s".utf8))  // the escape doubled
        XCTAssertEqual(try RelativePath.components(of: "dir/\(latin1)/\(quote)"), ["dir", latin1, quote])
    }

    func testPlainTraversalIsRefused() {
        for path in ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "", "a/", "a\u{0}b"] {
            XCTAssertThrowsError(try RelativePath.components(of: path), String(reflecting: path))
        }
    }
}
