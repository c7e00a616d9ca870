// Tests for the marker codec: round trips with awkward paths, byte-for-byte determinism,
// every decode error, encode-side refusals, and group(for:).

import BackupEngine
import BackupTree
import Foundation
import XCTest

final class MarkerTests: XCTestCase {
    private let groups = [
        MarkerGroup(name: "photos", required: false, patterns: ["*.jpg", "!private/"], order: 2),
        MarkerGroup(name: "documents", required: true, patterns: ["docs/", "*.pdf"], order: 1),
        MarkerGroup(name: "everything else", required: false, patterns: ["**"], order: 9),
    ]

    private func hash(_ seed: Int) -> String {
        SHA256Hasher.hex(Data("file \(seed)".utf8))
    }

    /// Paths chosen to break line formats, escaping and sorting.
    private var awkwardPaths: [String] {
        [
            "plain.txt",
            "with space/and  two.txt",
            " leading and trailing ",
            "tab\there",
            "new\nline",
            "\n",
            "back\\slash",
            "ends with backslash\\",
            "\\n literally",
            "\\\\n",
            "H 0123 looks like a record",
            "G 1 1 name",
            "#hash",
            "-dash",
            "ünïcödé/ファイル.txt",
            "e\u{301}cole",
            "😀/🎉.png",
            "\r\ncrlf",
            "quote\"and'apostrophe",
            "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p.txt",
            String(repeating: "long", count: 500),
            "zero\u{200B}width",
            "\u{7F}del",
        ]
    }

    private func awkwardMarker() -> Marker {
        var hashes: [String: String] = [:]
        for (index, path) in awkwardPaths.enumerated() { hashes[path] = hash(index) }
        let oddGroups = [
            MarkerGroup(name: "name with\nnewline and \\ backslash", required: true, patterns: ["a\\*b", "x\ny"], order: -3),
            MarkerGroup(name: "no patterns", required: false, patterns: [], order: 0),
            MarkerGroup(name: " spaced ", required: false, patterns: [" lead", "trail\\ ", "!neg", "[a-z]/**"], order: Int.max),
            MarkerGroup(name: "min", required: true, patterns: ["ünï*"], order: Int.min),
        ]
        return Marker(groups: oddGroups, hashes: hashes)
    }

    // MARK: Round trip

    func testRoundTripWithAwkwardPathsAndGroups() throws {
        let marker = awkwardMarker()
        let decoded = try Marker.decode(marker.encoded())
        XCTAssertEqual(decoded, marker)
        XCTAssertEqual(decoded.groups, marker.groups, "group order is kept")
        // Dictionary equality is by canonical equivalence; check the exact bytes of every key too.
        XCTAssertEqual(
            Set(decoded.hashes.keys.map { Array($0.utf8) }), Set(marker.hashes.keys.map { Array($0.utf8) }))
        for (path, hash) in marker.hashes { XCTAssertEqual(decoded.hashes[path], hash, path.debugDescription) }
    }

    func testRoundTripEmptyMarker() throws {
        let empty = Marker()
        let decoded = try Marker.decode(empty.encoded())
        XCTAssertEqual(decoded, empty)
        XCTAssertTrue(decoded.groups.isEmpty)
        XCTAssertTrue(decoded.hashes.isEmpty)
    }

    func testRoundTripManyFiles() throws {
        var hashes: [String: String] = [:]
        for index in 0..<20_000 { hashes["dir \(index % 97)/file \(index).dat"] = hash(index) }
        let marker = Marker(groups: groups, hashes: hashes)
        XCTAssertEqual(try Marker.decode(marker.encoded()), marker)
    }

    func testLayoutStartsWithMagicAndFormatByte() throws {
        let data = try Marker(groups: groups, hashes: ["a": hash(1)]).encoded()
        // Without a writer id, format 1: what markers were before they carried one.
        XCTAssertEqual(Array(data.prefix(7)), Array("BKMARK".utf8) + [1])
        XCTAssertEqual(Marker.formatVersion, 2)
        // The rest is one zlib stream of the canonical lines.
        let content = try Zlib.decompress(data.dropFirst(7))
        XCTAssertEqual(
            String(decoding: content, as: UTF8.self),
            """
            G 2 0 photos
            P *.jpg
            P !private/
            G 1 1 documents
            P docs/
            P *.pdf
            G 9 0 everything else
            P **
            H \(hash(1)) a

            """)
    }

    // MARK: Determinism

    func testSameContentInAnyInsertionOrderGivesIdenticalBytes() throws {
        let paths = awkwardPaths + (0..<2_000).map { "bulk/\($0 * 7919 % 2_000)/f" }
        var forward: [String: String] = [:]
        for (index, path) in paths.enumerated() { forward[path] = hash(index) }
        var backward: [String: String] = [:]
        backward.reserveCapacity(paths.count * 4)  // a different capacity gives a different bucket order
        for (index, path) in paths.enumerated().reversed() { backward[path] = hash(index) }
        XCTAssertNotEqual(Array(forward.keys), Array(backward.keys), "the test needs two different iteration orders")

        let first = try Marker(groups: groups, hashes: forward).encoded()
        let second = try Marker(groups: groups, hashes: backward).encoded()
        XCTAssertEqual(first, second)
        XCTAssertEqual(SHA256Hasher.hex(first), SHA256Hasher.hex(second))
        XCTAssertEqual(
            try Marker(groups: groups, hashes: forward).contentDigest(),
            try Marker(groups: groups, hashes: backward).contentDigest())
    }

    func testEncodingTwiceIsIdenticalAndDecodeReencodeIsStable() throws {
        let marker = awkwardMarker()
        let once = try marker.encoded()
        XCTAssertEqual(once, try marker.encoded())
        XCTAssertEqual(try Marker.decode(once).encoded(), once)
        XCTAssertEqual(try marker.contentDigest(), try Marker.decode(once).contentDigest())
    }

    func testDifferentContentGivesDifferentBytes() throws {
        let base = Marker(groups: groups, hashes: ["a": hash(1), "b": hash(2)])
        var changedHash = base
        changedHash.hashes["b"] = hash(3)
        var changedGroup = base
        changedGroup.groups[0].required = true
        var reordered = base
        reordered.groups.swapAt(0, 1)
        let encodings = try [base, changedHash, changedGroup, reordered].map { try $0.encoded() }
        XCTAssertEqual(Set(encodings).count, 4)
        let digests = try [base, changedHash, changedGroup, reordered].map { try $0.contentDigest() }
        XCTAssertEqual(Set(digests).count, 4)
        XCTAssertEqual(digests[0].count, 64)
    }

    // MARK: Decode errors

    /// A marker header followed by `content` compressed, for hand-made (malformed) content.
    private func framed(_ content: String) throws -> Data {
        Data(Marker.magic) + Data([1]) + (try Zlib.compress(Data(content.utf8)))
    }

    private func assertDecodeFails(
        _ data: Data, _ expected: MarkerError, file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try Marker.decode(data), file: file, line: line) { error in
            XCTAssertEqual(error as? MarkerError, expected, file: file, line: line)
        }
    }

    private func assertDamaged(
        _ data: Data, containing detail: String, _ message: String = "", file: StaticString = #filePath,
        line: UInt = #line
    ) {
        XCTAssertThrowsError(try Marker.decode(data), message, file: file, line: line) { error in
            guard case .damaged(let message)? = error as? MarkerError else {
                return XCTFail("expected damaged, got \(error)", file: file, line: line)
            }
            XCTAssertTrue(message.contains(detail), "\"\(message)\" lacks \"\(detail)\"", file: file, line: line)
            XCTAssertTrue("\(error)".hasPrefix("damaged: "), file: file, line: line)
        }
    }

    func testWrongMagicIsNotAMarker() throws {
        assertDecodeFails(Data(), .notAMarker)
        assertDecodeFails(Data("BKMAR".utf8), .notAMarker)
        assertDecodeFails(Data("hello, world".utf8), .notAMarker)
        assertDecodeFails(try Zlib.compress(Data("G 1 1 x\n".utf8)), .notAMarker)
        assertDecodeFails(Data("bkmark\u{1}".utf8), .notAMarker)
        XCTAssertEqual(MarkerError.notAMarker.description, "not a backup marker")
    }

    func testIssue11Item14MarkerCarriesItsWriterDeterministicallyAndFormat1StaysReadable() throws {
        let hashes = ["a.txt": hash(1), "b/c.txt": hash(2)]
        let mine = Marker(groups: groups, hashes: hashes, writer: "default@laptop-1a2b3c4d")
        let data = try mine.encoded()
        XCTAssertEqual(Array(data.prefix(7)), Array("BKMARK".utf8) + [2], "a marker with a writer is format 2")
        XCTAssertEqual(try Marker.decode(data), mine)
        XCTAssertEqual(try Marker.decode(data).writer, "default@laptop-1a2b3c4d")
        XCTAssertEqual(try Marker(groups: groups, hashes: hashes, writer: "default@laptop-1a2b3c4d").encoded(), data,
                       "same content, same bytes")
        XCTAssertEqual(String(decoding: try Zlib.decompress(data.dropFirst(7)).prefix(26), as: UTF8.self),
                       "W default@laptop-1a2b3c4d\n")
        let theirs = Marker(groups: groups, hashes: hashes, writer: "default@desktop-99")
        XCTAssertNotEqual(try theirs.encoded(), data)
        XCTAssertNotEqual(try theirs.contentDigest(), try mine.contentDigest())
        // Escaped like every other last field.
        let odd = Marker(writer: "a\\b\nc")
        XCTAssertEqual(try Marker.decode(odd.encoded()).writer, "a\\b\nc")

        // A format 1 marker (no writer) reads as before; a W record there is not format 1.
        let old = try Marker(groups: groups, hashes: hashes).encoded()
        XCTAssertNil(try Marker.decode(old).writer)
        var oldWithW = Data(Marker.magic) + Data([1])
        oldWithW.append(try Zlib.compress(Data("W someone\n".utf8)))
        assertDamaged(oldWithW, containing: "unknown record")
        var late = Data(Marker.magic) + Data([2])
        late.append(try Zlib.compress(Data("G 0 0 x\nW someone\n".utf8)))
        assertDamaged(late, containing: "the writer record is not the first line")
        var missing = Data(Marker.magic) + Data([2])
        missing.append(try Zlib.compress(Data("G 0 0 x\n".utf8)))
        assertDamaged(missing, containing: "without its writer record")
        XCTAssertThrowsError(try Marker(writer: "").encoded())
    }

    func testNewerFormatAsksForAnUpgrade() throws {
        var data = try Marker(groups: groups, hashes: [:]).encoded()
        data[6] = 3
        assertDecodeFails(data, .newerFormat(found: 3, readable: 2))
        XCTAssertEqual(
            MarkerError.newerFormat(found: 3, readable: 2).description,
            "written by a newer version of backup (format 3; this version reads 2): upgrade backup")
        data[6] = 255
        assertDecodeFails(data, .newerFormat(found: 255, readable: 2))
        data[6] = 0
        assertDamaged(data, containing: "unknown format 0")
    }

    func testTruncatedOrCorruptCompressedData() throws {
        let data = try awkwardMarker().encoded()
        assertDamaged(Data(Marker.magic), containing: "truncated after the header")
        assertDamaged(data.prefix(7), containing: "truncated")
        assertDamaged(data.prefix(data.count - 1), containing: "truncated")
        assertDamaged(data.prefix(data.count / 2), containing: "truncated")
        var flipped = data
        flipped[flipped.endIndex - 2] ^= 0x40
        assertDamaged(flipped, containing: "corrupt")
        assertDamaged(Data(Marker.magic) + Data([1]) + Data("not zlib".utf8), containing: "corrupt")
        assertDamaged(data + Data([0]), containing: "after the end")
    }

    func testContentLargerThanTheLimitIsRefused() throws {
        var hashes: [String: String] = [:]
        for index in 0..<1_000 { hashes["f\(index)"] = hash(index) }
        let data = try Marker(hashes: hashes).encoded()
        XCTAssertThrowsError(try Marker.decode(data, maxContentSize: 10_000)) { error in
            XCTAssertEqual(error as? MarkerError, .damaged("decompressed data is larger than the limit of 10000 bytes"))
        }
        XCTAssertEqual(try Marker.decode(data, maxContentSize: 1 << 20).hashes.count, 1_000)
        XCTAssertEqual(Marker.defaultMaxContentSize, 1 << 30)
    }

    func testMalformedContent() throws {
        let good = hash(0)
        let cases: [(String, String)] = [
            ("X what\n", "line 1: unknown record"),
            ("H\n", "line 1: unreadable record"),
            ("G 1 1 a\nHx\n", "line 2: unreadable record"),
            ("H abc path\n", "line 1: unreadable hash record"),
            ("H \(good)path\n", "line 1: unreadable hash record"),
            ("H \(good.uppercased()) path\n", "line 1: hash is not 64 lowercase hex characters"),
            ("H \(good.dropLast())g path\n", "line 1: hash is not 64 lowercase hex characters"),
            ("H \(good.dropLast()) path\n", "line 1:"),
            ("H \(good) \n", "line 1: path \"\": empty path"),
            ("H \(good) a", "the content does not end with a line break"),
            ("H \(good) a\nH \(good) b", "does not end with a line break"),
            ("H \(good) a\nH \(hash(1)) a\n", "line 2: path \"a\" is listed twice"),
            ("H \(good) ../x\n", "\"..\" segment"),
            ("H \(good) a/./b\n", "\"..\" segment"),
            ("H \(good) ..\n", "\"..\" segment"),
            ("H \(good) /abs\n", "absolute path"),
            ("H \(good) a//b\n", "empty path segment"),
            ("H \(good) a/\n", "empty path segment"),
            ("H \(good) bad\\tescape\n", "unknown escape"),
            ("H \(good) lone\\\n", "lone backslash"),
            ("P *.jpg\n", "line 1: pattern outside a group"),
            ("G 1 1 a\nH \(good) x\nP *.jpg\n", "line 3: pattern outside a group"),
            ("G 1 1 a\nH \(good) x\nG 2 0 b\n", "line 3: group after the hashes"),
            ("G x 1 name\n", "unreadable group record"),
            ("G 1 2 name\n", "unreadable group record"),
            ("G 1 1\n", "unreadable group record"),
            ("G 1  name\n", "unreadable group record"),
            ("G 99999999999999999999 1 name\n", "unreadable group record"),
            ("G 1 1 \n", "a group has an empty name"),
            ("G 1 1 same\nG 2 0 same\n", "two groups are named \"same\""),
            ("G 1 1 bad\nP [abc\n", "group \"bad\": invalid pattern \"[abc\": unclosed"),
        ]
        for (content, detail) in cases {
            assertDamaged(try framed(content), containing: detail, content.debugDescription)
        }
        // Bytes that are not UTF-8, in a path and in a name.
        let invalidPath = Data("H \(good) ".utf8) + Data([0xFF, 0xFE]) + Data("\n".utf8)
        let invalidName = Data("G 1 1 ".utf8) + Data([0xC3]) + Data("\n".utf8)
        for content in [invalidPath, invalidName] {
            let data = Data(Marker.magic) + Data([1]) + (try Zlib.compress(content))
            assertDamaged(data, containing: "not valid UTF-8")
        }
        let nul = Data("H \(good) a".utf8) + Data([0]) + Data("b\n".utf8)
        assertDamaged(Data(Marker.magic) + Data([1]) + (try Zlib.compress(nul)), containing: "NUL")
    }

    func testHandMadeCanonicalContentDecodes() throws {
        let content = "G -1 1 a b\\nc\nP *.x\nH \(hash(0)) p\\\\q\\nr\nH \(hash(1)) tab\tin\n"
        let marker = try Marker.decode(try framed(content))
        XCTAssertEqual(marker.groups, [MarkerGroup(name: "a b\nc", required: true, patterns: ["*.x"], order: -1)])
        XCTAssertEqual(marker.hashes, ["p\\q\nr": hash(0), "tab\tin": hash(1)])
    }

    // MARK: Encode refusals

    func testEncodeRefusesWhatDecodeWouldReject() {
        let refused: [(Marker, String)] = [
            (Marker(hashes: ["a": hash(0).uppercased()]), "not 64 lowercase hex"),
            (Marker(hashes: ["a": "abc"]), "not 64 lowercase hex"),
            (Marker(hashes: ["../escape": hash(0)]), "\"..\" segment"),
            (Marker(hashes: ["/abs": hash(0)]), "absolute path"),
            (Marker(hashes: ["": hash(0)]), "empty path"),
            (Marker(hashes: ["a\u{0}b": hash(0)]), "NUL"),
            (Marker(groups: [MarkerGroup(name: "", required: true, patterns: [], order: 0)]), "empty name"),
            (
                Marker(groups: [
                    MarkerGroup(name: "x", required: true, patterns: [], order: 0),
                    MarkerGroup(name: "x", required: false, patterns: [], order: 1),
                ]), "two groups are named \"x\""
            ),
            (Marker(groups: [MarkerGroup(name: "x", required: true, patterns: ["a//b"], order: 0)]), "empty path segment"),
        ]
        for (marker, detail) in refused {
            XCTAssertThrowsError(try marker.encoded(), detail) { error in
                guard case .invalidContent(let message)? = error as? MarkerError else {
                    return XCTFail("expected invalidContent, got \(error)")
                }
                XCTAssertTrue(message.contains(detail), "\"\(message)\" lacks \"\(detail)\"")
            }
            XCTAssertThrowsError(try marker.contentDigest(), detail)
        }
    }

    // MARK: group(for:)

    func testGroupForPathFollowsOrderThenArrayOrder() {
        let marker = Marker(groups: groups, hashes: [:])
        XCTAssertEqual(marker.group(for: "docs/report.pdf")?.name, "documents")
        // documents (order 1) wins over photos (order 2) although photos comes first in the array.
        XCTAssertEqual(marker.group(for: "docs/scan.jpg")?.name, "documents")
        XCTAssertEqual(marker.group(for: "holiday/beach.jpg")?.name, "photos")
        XCTAssertEqual(marker.group(for: "a/b/c.pdf")?.name, "documents")
        // "!private/" takes photos' own files back out; the next group by order gets them.
        XCTAssertEqual(marker.group(for: "private/me.jpg")?.name, "everything else")
        XCTAssertEqual(marker.group(for: "notes.txt")?.name, "everything else")

        let ties = Marker(groups: [
            MarkerGroup(name: "later", required: false, patterns: ["*.txt"], order: 5),
            MarkerGroup(name: "first", required: false, patterns: ["*.txt"], order: 5),
            MarkerGroup(name: "earliest", required: false, patterns: ["x/"], order: 4),
        ])
        XCTAssertEqual(ties.group(for: "a.txt")?.name, "later", "equal orders: array order")
        XCTAssertEqual(ties.group(for: "x/a.txt")?.name, "earliest")
        XCTAssertNil(ties.group(for: "a.md"))
        XCTAssertNil(Marker().group(for: "anything"))
    }

    func testGroupForPathFollowsChangesToGroups() {
        var marker = Marker(groups: groups, hashes: [:])
        XCTAssertEqual(marker.group(for: "x.jpg")?.name, "photos")
        marker.groups[0].order = 100
        XCTAssertEqual(marker.group(for: "x.jpg")?.name, "everything else")
        marker.groups = []
        XCTAssertNil(marker.group(for: "x.jpg"))
    }

    func testGroupWithAnInvalidPatternMatchesNothing() {
        let marker = Marker(groups: [
            MarkerGroup(name: "broken", required: true, patterns: ["*.txt", "[oops"], order: 0),
            MarkerGroup(name: "fallback", required: false, patterns: ["*"], order: 1),
        ])
        XCTAssertEqual(marker.group(for: "a.txt")?.name, "fallback")
    }

    func testErrorsAreEquatableAndDescribed() {
        XCTAssertEqual(MarkerError.damaged("x").description, "damaged: x")
        XCTAssertEqual(MarkerError.invalidContent("x").description, "cannot write the marker: x")
        XCTAssertNotEqual(MarkerError.damaged("x"), MarkerError.damaged("y"))
    }
}
