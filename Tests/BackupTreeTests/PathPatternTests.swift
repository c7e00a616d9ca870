// Tests for PathPattern and PatternList: a table of match / no-match cases per rule of the
// pattern language, negation, pattern-file parsing, and invalid patterns.

import BackupTree
import XCTest

final class PathPatternTests: XCTestCase {
    /// (pattern, path, expected)
    private typealias Case = (String, String, Bool)

    private func check(_ cases: [Case], file: StaticString = #filePath, line: UInt = #line) {
        for (pattern, path, expected) in cases {
            do {
                let compiled = try PathPattern(pattern)
                XCTAssertEqual(
                    compiled.matches(path), expected,
                    "pattern \(pattern.debugDescription) on \(path.debugDescription)", file: file, line: line)
                // A one-entry list must agree with the pattern.
                XCTAssertEqual(
                    try PatternList([pattern]).matches(path), expected,
                    "list [\(pattern.debugDescription)] on \(path.debugDescription)", file: file, line: line)
            } catch {
                XCTFail("pattern \(pattern.debugDescription) did not compile: \(error)", file: file, line: line)
            }
        }
    }

    func testStarMatchesWithinOneSegment() {
        check([
            ("*.jpg", "a.jpg", true),
            ("*.jpg", ".jpg", true),
            ("*.jpg", "a.jpeg", false),
            ("*.jpg", "a.jpg.txt", false),
            ("a*b", "a/b", false),
            ("a*b", "ab", true),
            ("a*b", "axxb", true),
            ("a*", "a", true),
            ("*", "x", true),
            ("*b*", "abc", true),
            ("a*c*e", "abcde", true),
            ("a*c*e", "abcdf", false),
            ("*ab", "aab", true),
            ("*a*a*a*", "aaa", true),
            ("*a*a*a*", "aa", false),
            ("a***b", "axb", true),
            ("*.jpg", "jpg", false),
            ("draft*", "draft.txt", true),
            ("draft*", "draft", true),
            ("draft*", "dra", false),
            ("draft*", "a/draft1/b", true),
            ("draft*", "xdraft", false),
            ("*ü", "ü", true),
            ("ü*", "üx", true),
            ("doc/*.txt", "doc/x.txt", true),
            ("doc/*.txt", "doc/sub/x.txt", false),
            ("doc/*.txt", "other/doc/x.txt", false),
            ("*/x", "a/x", true),
            ("*/x", "a/b/x", false),
        ])
    }

    func testQuestionMarkMatchesOneCharacterExceptSlash() {
        check([
            ("?.txt", "a.txt", true),
            ("?.txt", "ab.txt", false),
            ("?.txt", ".txt", false),
            ("a?b", "axb", true),
            ("a?b", "a/b", false),
            ("a?b", "ab", false),
            ("?", "é", true),  // one scalar, two UTF-8 bytes
            ("??", "é", false),
            ("caf?", "café", true),
            ("?", "😀", true),  // four UTF-8 bytes
            ("?x", "😀x", true),
            ("*?", "😀", true),
            ("?*?", "😀", false),
        ])
    }

    func testCharacterClasses() {
        check([
            ("[abc].txt", "b.txt", true),
            ("[abc].txt", "d.txt", false),
            ("[a-c]x", "bx", true),
            ("[a-c]x", "dx", false),
            ("[!a]x", "bx", true),
            ("[!a]x", "ax", false),
            ("[^a]x", "bx", true),
            ("[^a]x", "ax", false),
            ("[]a]", "]", true),
            ("[]a]", "a", true),
            ("[]a]", "b", false),
            ("[!]a]", "]", false),
            ("[!]a]", "b", true),
            ("[a-]", "-", true),
            ("[-a]", "-", true),
            ("[-a]", "b", false),
            ("[\\]]", "]", true),
            ("[\\-]", "-", true),
            ("x[0-9][0-9]", "x42", true),
            ("x[0-9][0-9]", "x4a", false),
            ("[a-c]*", "car", true),
            ("[é]", "é", true),
            ("[é]", "e", false),
            ("[!é]", "é", false),
            ("[!é]x", "😀x", true),
            ("[α-ω]", "λ", true),
            ("[α-ω]", "a", false),
            ("[😀-😂]", "😁", true),
            ("[!a]", "ab", false),
            ("[[]", "[", true),
        ])
    }

    func testDoubleStarSegments() {
        check([
            ("**/x", "x", true),
            ("**/x", "a/b/x", true),
            ("**/x", "a/x/y", true),
            ("**/x", "a/xy", false),
            ("a/**", "a/x", true),
            ("a/**", "a/b/c", true),
            ("a/**", "a", false),
            ("a/**", "b/a/x", false),
            ("a/**/b", "a/b", true),
            ("a/**/b", "a/x/b", true),
            ("a/**/b", "a/x/y/b", true),
            ("a/**/b", "a/x/y/b/c", true),
            ("a/**/b", "a/x/y/c", false),
            ("a/**/b", "x/a/b", false),
            ("a/**/b", "a/bb", false),
            ("a/**/b/**/c", "a/1/b/2/3/c", true),
            ("a/**/b/**/c", "a/b/c", true),
            ("a/**/b/**/c", "a/c", false),
            ("**/a/**/b", "x/a/y/b", true),
            ("**/a/**/b", "x/a/y/c", false),
            ("/**/x", "a/x", true),
            ("**", "x", true),
            ("**", "a/b/c", true),
            ("**/**", "a/b", true),
            ("**/", "a/b", true),
            ("**/", "a", false),
            ("a**b", "axb", true),  // not a whole segment: an ordinary *
            ("a**b", "a/b", false),
            ("**.txt", "a/b.txt", true),
            ("**.txt", "a/b.txt/c", true),
        ])
    }

    func testPatternWithoutSlashMatchesAtAnyDepth() {
        check([
            ("*.jpg", "a/b/c.jpg", true),
            ("foo", "foo", true),
            ("foo", "a/foo", true),
            ("foo", "a/b/foo", true),
            ("foo", "foobar", false),
            ("foo", "a/xfoo", false),
            ("foo", "a/foox/b", false),
        ])
    }

    func testSlashAnchorsAtTheRoot() {
        check([
            ("a/b", "a/b", true),
            ("a/b", "x/a/b", false),
            ("a/b", "a/bc", false),
            ("/foo", "foo", true),
            ("/foo", "a/foo", false),
            ("/foo", "foo/bar", true),
            ("/a/b", "a/b", true),
            ("/a/b", "x/a/b", false),
            ("/*.txt", "x.txt", true),
            ("/*.txt", "d/x.txt", false),
        ])
    }

    func testDirectoryMatchCoversEverythingBelow() {
        check([
            ("build", "build/out.o", true),
            ("build", "src/build/x/y", true),
            ("build", "builds/x", false),
            ("a/b", "a/b/c/d", true),
            ("*.d", "x.d/y", true),
            ("/build", "build/out.o", true),
            ("/build", "src/build/out.o", false),
        ])
    }

    func testTrailingSlashMatchesDirectoriesOnly() {
        check([
            ("cache/", "cache/x", true),
            ("cache/", "a/cache/y/z", true),
            ("cache/", "cache", false),
            ("cache/", "a/cache", false),
            ("cache/", "cachex/y", false),
            ("a/cache/", "a/cache/x", true),
            ("a/cache/", "a/cache", false),
            ("a/cache/", "b/a/cache/x", false),
            ("/cache/", "cache/x", true),
            ("/cache/", "x/cache/y", false),
            ("*.d/", "x.d/y", true),
            ("*.d/", "x.d", false),
            ("a/**/", "a/b/c", true),
            ("a/**/", "a/b", false),
        ])
    }

    func testBackslashEscapesTheNextCharacter() {
        check([
            ("\\*", "*", true),
            ("\\*", "a", false),
            ("\\?", "?", true),
            ("\\?", "x", false),
            ("\\[a]", "[a]", true),
            ("\\[a]", "a", false),
            ("a\\\\b", "a\\b", true),
            ("\\!x", "!x", true),
            ("\\#x", "#x", true),
            ("\\ ", " ", true),
            ("\\*\\*/x", "**/x", true),
            ("\\*\\*/x", "a/x", false),
            ("\\a", "a", true),
        ])
    }

    func testUnicodeAndWhitespaceNames() {
        check([
            ("фото/*.jpg", "фото/день.jpg", true),
            ("фото/*.jpg", "фото/день.png", false),
            ("日本/**", "日本/語/x", true),
            ("😀*", "😀x", true),
            ("*😀", "x😀", true),
            ("*😀", "x😁", false),
            ("naïve.txt", "dir/naïve.txt", true),
            ("*.JPG", "x.jpg", false),  // case-sensitive
            ("e\u{301}", "\u{E9}", false),  // no normalization: NFD pattern, NFC name
            ("\u{E9}", "\u{E9}", true),
            ("my file.txt", "a/my file.txt", true),
            ("a\tb", "x/a\tb", true),
            ("*", "line\nbreak", true),
            (" lead", " lead", true),
            (" lead", "lead", false),
        ])
    }

    func testPatternListLastMatchWins() throws {
        let list = try PatternList(["*.log", "!keep.log"])
        XCTAssertTrue(list.matches("a.log"))
        XCTAssertTrue(list.matches("x/a.log"))
        XCTAssertFalse(list.matches("keep.log"))
        XCTAssertFalse(list.matches("x/keep.log"))
        XCTAssertFalse(list.matches("b.txt"))

        let reversed = try PatternList(["!keep.log", "*.log"])
        XCTAssertTrue(reversed.matches("keep.log"))

        // Unlike git, a file below an excluded directory can be re-included.
        let reinclude = try PatternList(["build/", "!build/keep.txt"])
        XCTAssertTrue(reinclude.matches("build/x"))
        XCTAssertFalse(reinclude.matches("build/keep.txt"))

        let literalBang = try PatternList(["\\!x"])
        XCTAssertTrue(literalBang.matches("!x"))
        XCTAssertEqual(literalBang.entries.map(\.negated), [false])

        XCTAssertFalse(PatternList().matches("a"))
        XCTAssertTrue(PatternList().isEmpty)
        XCTAssertFalse(try PatternList(["a", "b"]).matches("c"))
        XCTAssertTrue(try PatternList(["a", "b"]).matches("x/b"))
    }

    func testParsingPatternFileText() throws {
        let text = """
            # a comment
            *.o

            build/   \r
            !keep.o
            \\#notcomment
            trailing\\ \("  ")
            a\\\\ \(" ")
               \(" ")
            \tindented
            """
        let list = try PatternList(parsing: text)
        XCTAssertEqual(
            list.entries.map(\.pattern.source),
            ["*.o", "build/", "keep.o", "\\#notcomment", "trailing\\ ", "a\\\\", "\tindented"])
        XCTAssertEqual(list.entries.map(\.negated), [false, false, true, false, false, false, false])
        XCTAssertTrue(list.matches("x/y.o"))
        XCTAssertFalse(list.matches("keep.o"))
        XCTAssertTrue(list.matches("build/z"))
        XCTAssertTrue(list.matches("#notcomment"))
        XCTAssertFalse(list.matches("# a comment"))
        XCTAssertTrue(list.matches("trailing "))
        XCTAssertFalse(list.matches("trailing"))
        XCTAssertTrue(list.matches("a\\"))
        XCTAssertTrue(list.matches("\tindented"))

        XCTAssertTrue(try PatternList(parsing: "").isEmpty)
        XCTAssertTrue(try PatternList(parsing: "\n\n# only\n   \n").isEmpty)
    }

    func testParsingErrorNamesTheLine() {
        XCTAssertThrowsError(try PatternList(parsing: "ok\n# comment\n\n[abc\nfine\n")) { error in
            guard let error = error as? PatternError else { return XCTFail("wrong error type: \(error)") }
            XCTAssertEqual(error.line, 4)
            XCTAssertEqual(error.pattern, "[abc")
            XCTAssertEqual(error.description, "line 4: invalid pattern \"[abc\": unclosed \"[\"")
        }
        XCTAssertThrowsError(try PatternList(parsing: "a\r\n!\r\n")) { error in
            XCTAssertEqual((error as? PatternError)?.line, 2)
            XCTAssertEqual((error as? PatternError)?.pattern, "!")
        }
        XCTAssertThrowsError(try PatternList(["ok", "![z-a]"])) { error in
            XCTAssertEqual((error as? PatternError)?.pattern, "![z-a]")
            XCTAssertNil((error as? PatternError)?.line)
        }
    }

    func testInvalidPatterns() {
        let invalid: [(String, String)] = [
            ("", "empty pattern"),
            ("/", "empty pattern"),
            ("//", "empty pattern"),
            ("[abc", "unclosed"),
            ("[", "unclosed"),
            ("[!]", "unclosed"),
            ("[]", "unclosed"),
            ("a[b-", "unclosed"),
            ("[z-a]", "reversed range"),
            ("a\\", "lone"),
            ("a//b", "empty path segment"),
            ("a\\/b", "cannot be escaped"),
            ("[[:alpha:]]", "not supported"),
        ]
        for (pattern, reason) in invalid {
            XCTAssertThrowsError(try PathPattern(pattern), pattern.debugDescription) { error in
                guard let error = error as? PatternError else { return XCTFail("wrong error type: \(error)") }
                XCTAssertEqual(error.pattern, pattern)
                XCTAssertTrue(
                    error.reason.contains(reason), "\(pattern.debugDescription): \(error.reason) lacks \(reason)")
            }
        }
    }

    func testPatternValueSemantics() throws {
        XCTAssertEqual(try PathPattern("a/*.b"), try PathPattern("a/*.b"))
        XCTAssertNotEqual(try PathPattern("a/*.b"), try PathPattern("a/*.c"))
        XCTAssertEqual(try PathPattern("[a-z]/").description, "[a-z]/")
        XCTAssertEqual(try PatternList(["a", "!b"]), try PatternList(parsing: "a\n!b\n"))
    }

    func testMatchingManyPathsStaysLinear() throws {
        // Backtracking on both levels could go exponential with several ** and *; these run
        // in well under a second only if matching is polynomial.
        let pattern = try PathPattern("**/a/**/a/**/a/**/a/**/b")
        let deep = Array(repeating: "a", count: 40).joined(separator: "/") + "/c"
        XCTAssertFalse(pattern.matches(deep))
        let stars = try PathPattern("*a*a*a*a*a*a*a*b")
        XCTAssertFalse(stars.matches(String(repeating: "a", count: 200)))
        XCTAssertTrue(stars.matches(String(repeating: "a", count: 200) + "b"))
    }
}
