// Relative paths from a remote are checked on the bytes they stand for, so no escape of the
// name codec can climb out of the folder they are resolved in.

import BackupEngine
import Foundation
#if canImport(Glibc)
import Glibc
#endif
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

    /// Names that only look like "." or ".." (or hold a mark after the "/") are plain names,
    /// split on the "/" byte, and kept exactly.
    func testNamesNearDotAndDotDotAreKeptExactly() throws {
        let cases: [(String, [String])] = [
            ("...", ["..."]), (".a/..b/a./a..", [".a", "..b", "a.", "a.."]), ("é/ü/x", ["é", "ü", "x"]),
            ("a/\u{301}x", ["a", "\u{301}x"]), ("d045/e23/f12345.dat", ["d045", "e23", "f12345.dat"]), ("x", ["x"]),
            ("\u{2019}/\u{201C}q\u{201D}", ["\u{2019}", "\u{201C}q\u{201D}"]),
        ]
        for (path, parts) in cases {
            XCTAssertEqual(try RelativePath.components(of: path), parts, String(reflecting: path))
        }
        for path in ["../\u{301}x", "a/./b", "a/..", "./", "a/b/"] {
            XCTAssertThrowsError(try RelativePath.components(of: path), String(reflecting: path))
        }
    }

    /// openBeneath resolves below its folder only and follows no link, on the way or at the
    /// end; a plain file below it opens (where the kernel has openat2: else nil, to walk).
    func testOpenBeneathStaysBelowItsFolderAndFollowsNoLink() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("open-beneath-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        try FileManager.default.createDirectory(atPath: base + "/root/a", withIntermediateDirectories: true)
        try Data("in".utf8).write(to: URL(fileURLWithPath: base + "/root/a/file"))
        try Data("out".utf8).write(to: URL(fileURLWithPath: base + "/outside"))
        XCTAssertEqual(symlink(base, base + "/root/up"), 0)
        XCTAssertEqual(symlink("file", base + "/root/a/relative-link"), 0)
        let root = open(base + "/root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(root, 0)
        defer { close(root) }
        guard let fd = openBeneath(root, "a/file", flags: O_RDONLY | O_CLOEXEC) else {
            throw XCTSkip("this kernel has no openat2; callers walk folder by folder")
        }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        for path in ["up/outside", "a/relative-link", "../outside", "a/../../outside", base + "/outside"] {
            let refused = openBeneath(root, path, flags: O_RDONLY | O_CLOEXEC)
            XCTAssertEqual(refused, -1, path)
            if let refused, refused >= 0 { close(refused) }
        }
    }

    func testPlainTraversalIsRefused() {
        for path in ["../x", "a/../../x", "/etc/passwd", "a//b", "./a", "", "a/", "a\u{0}b"] {
            XCTAssertThrowsError(try RelativePath.components(of: path), String(reflecting: path))
        }
    }
}
