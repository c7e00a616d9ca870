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
        XCTAssertEqual(Marker.formatVersion, 3)
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

    // MARK: Markers written by earlier versions

    /// Tests/Fixtures/`name`: bytes an earlier version wrote, committed before format 3.
    private func fixture(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/" + name))
    }

    /// The content both fixtures hold (format 2 adds the writer "default@fixture-host").
    private let fixtureGroups = [
        MarkerGroup(name: "docs", required: true, patterns: ["docs/"], order: 0),
        MarkerGroup(name: "photos", required: false, patterns: ["photos/"], order: 1),
    ]
    private let fixtureHashes = [
        "docs/report.txt": "845e91831319e89c4d656bdb80c278ac09a7230d61e5dfd2e1b1fbb436ac8917",
        "photos/a.jpg": "509b0d4641a7c3ba088ffa28559d1f57207ea980447bc1773b1d406d788386ee",
        "notes.md": "ab5aa97074c454a0632057e704220d9a6678fbf773a0a5806fc09b8173b07309",
        // "caf", the byte 0xE9 (Latin-1 é, not UTF-8), ".txt", in FileName's codec.
        "caf\u{201B}E9.txt": "850f7dc43910ff890f8879c0ed26fe697c93a067ad93a7d50f466a7028a9bf4e",
    ]

    func testAFormat1MarkerWrittenByAnEarlierVersionStillReads() throws {
        let bytes = try fixture("marker-format1.bin")
        XCTAssertEqual(bytes[6], 1)
        let marker = try Marker.decode(bytes)
        XCTAssertEqual(marker.groups, fixtureGroups)
        XCTAssertEqual(marker.hashes, fixtureHashes)
        XCTAssertEqual(
            FileName.bytes(of: "caf\u{201B}E9.txt"), Array("caf".utf8) + [0xE9] + Array(".txt".utf8))
        XCTAssertNil(marker.writer)
        XCTAssertTrue(marker.entries.isEmpty)
        try assertWrittenAgainAs(bytes, marker, "a marker without entries or writer is still written as format 1")
        try assertWrittenAgainAs(bytes, Marker(groups: fixtureGroups, hashes: fixtureHashes))
    }

    /// `marker`, encoded by this version, is what `earlier` (a marker an earlier version wrote)
    /// holds: the same format and, decompressed, the same content to the byte. The compressed
    /// bytes may differ: the compression level is not part of the format (level 6 then, 1 now).
    private func assertWrittenAgainAs(_ earlier: Data, _ marker: Marker, _ message: String = "",
                                      file: StaticString = #filePath, line: UInt = #line) throws {
        let written = try marker.encoded()
        XCTAssertEqual(written.prefix(7), earlier.prefix(7), message, file: file, line: line)
        XCTAssertEqual(try Zlib.decompress(written.dropFirst(7)), try Zlib.decompress(earlier.dropFirst(7)), message, file: file, line: line)
    }

    func testAFormat2MarkerWrittenByAnEarlierVersionStillReads() throws {
        let bytes = try fixture("marker-format2.bin")
        XCTAssertEqual(bytes[6], 2)
        let marker = try Marker.decode(bytes)
        XCTAssertEqual(marker.groups, fixtureGroups)
        XCTAssertEqual(marker.hashes, fixtureHashes)
        XCTAssertEqual(marker.writer, "default@fixture-host")
        XCTAssertTrue(marker.entries.isEmpty)
        try assertWrittenAgainAs(bytes, marker, "a marker without entries but with a writer is still written as format 2")
        try assertWrittenAgainAs(bytes, Marker(groups: fixtureGroups, hashes: fixtureHashes, writer: "default@fixture-host"))
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
        data[6] = 4
        assertDecodeFails(data, .newerFormat(found: 4, readable: 3))
        XCTAssertEqual(
            MarkerError.newerFormat(found: 4, readable: 3).description,
            "written by a newer version of backup (format 4; this version reads 3): upgrade backup")
        data[6] = 255
        assertDecodeFails(data, .newerFormat(found: 255, readable: 3))
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

    // MARK: Format 3: entries

    private func meta(
        _ mode: UInt32 = 0o644, mtime: Int64 = 1_700_000_000_123_456_789, uid: UInt32 = 1000, gid: UInt32 = 1000,
        user: String? = "alice", group: String? = "staff"
    ) -> EntryMetadata {
        EntryMetadata(mode: mode, mtimeNanoseconds: mtime, uid: uid, gid: gid, user: user, group: group)
    }

    /// A marker of every kind of entry, with the awkward values each field can hold.
    private func entriesMarker(writer: String? = "default@host") -> Marker {
        let nonUTF8Target = FileName.string(fromBytes: [0xFF, 0x2F] + Array("x\ny\\z".utf8) + [0xC3])
        let entries: [String: MarkerEntry] = [
            "docs/hashed.txt": MarkerEntry(kind: .file, size: 12, metadata: meta()),
            "docs/size compared.bin": MarkerEntry(kind: .file, size: 0, metadata: meta(0o600, user: nil, group: nil)),
            "docs/zz hard link": MarkerEntry(kind: .hardLink(to: "docs/hashed.txt"), size: 12, metadata: meta()),
            "docs/unhashed link": MarkerEntry(kind: .hardLink(to: "docs/size compared.bin"), metadata: meta(0o600)),
            "links/absolute": MarkerEntry(kind: .symlink(target: "/etc/passwd"), metadata: meta(0o777)),
            "links/relative": MarkerEntry(kind: .symlink(target: "../docs/hashed.txt"), metadata: meta(0o777)),
            "links/dangling": MarkerEntry(kind: .symlink(target: "nowhere/at all"), metadata: meta(0o777)),
            "links/empty": MarkerEntry(kind: .symlink(target: ""), metadata: meta(0o777)),
            "links/not utf-8": MarkerEntry(kind: .symlink(target: nonUTF8Target), metadata: meta(0o777)),
            "links": MarkerEntry(kind: .folder, metadata: meta(0o755)),
            "empty folder": MarkerEntry(kind: .folder, metadata: meta(0o1777, mtime: -1)),
            "old/setuid": MarkerEntry(kind: .file, size: 1 << 40, metadata: meta(0o4755, mtime: -86_400_123_456_789, uid: 0, gid: 0)),
            "names/spaced": MarkerEntry(kind: .file, size: 3, metadata: meta(user: "john smith", group: "domain users")),
            "names/dash": MarkerEntry(kind: .file, size: 3, metadata: meta(user: "-", group: "-")),
            "names/escapes": MarkerEntry(kind: .folder, metadata: meta(user: "a\\b\nc\\s", group: "\\-")),
            "names/empty": MarkerEntry(kind: .folder, metadata: meta(user: "", group: "--")),
            "names/extremes": MarkerEntry(
                kind: .folder, metadata: meta(0, mtime: Int64.min, uid: UInt32.max, gid: 0, user: "ünï", group: "😀")),
            "names/max": MarkerEntry(kind: .file, size: Int64.max, metadata: meta(0o7777, mtime: Int64.max)),
            FileName.string(fromBytes: Array("caf".utf8) + [0xE9]): MarkerEntry(kind: .file, size: 1, metadata: meta()),
            "new\nline \\ path": MarkerEntry(kind: .file, size: 1, metadata: meta()),
        ]
        let hashes = ["docs/hashed.txt": hash(1), "docs/zz hard link": hash(1), "old/setuid": hash(2)]
        return Marker(groups: groups, hashes: hashes, entries: entries, writer: writer)
    }

    /// A format 3 header followed by `content` compressed.
    private func framed3(_ content: String) throws -> Data {
        Data(Marker.magic) + Data([3]) + (try Zlib.compress(Data(content.utf8)))
    }

    func testFormat3RoundTripOfEveryKind() throws {
        for writer in ["default@host", nil] {
            let marker = entriesMarker(writer: writer)
            let data = try marker.encoded()
            XCTAssertEqual(data[6], 3, "a marker with entries is format 3")
            let decoded = try Marker.decode(data)
            XCTAssertEqual(decoded, marker)
            XCTAssertEqual(decoded.writer, writer)
            XCTAssertEqual(decoded.hashes, marker.hashes)
            XCTAssertEqual(decoded.entries.count, marker.entries.count)
            // Byte-exact keys, targets and names, not only canonically equal Strings.
            XCTAssertEqual(
                Set(decoded.entries.keys.map { Array($0.utf8) }), Set(marker.entries.keys.map { Array($0.utf8) }))
            for (path, entry) in marker.entries {
                let back = try XCTUnwrap(decoded.entries[path], path.debugDescription)
                XCTAssertEqual(back, entry, path.debugDescription)
                switch (back.kind, entry.kind) {
                case (.symlink(let lhs), .symlink(let rhs)), (.hardLink(let lhs), .hardLink(let rhs)):
                    XCTAssertEqual(Array(lhs.utf8), Array(rhs.utf8), path.debugDescription)
                default: break
                }
                XCTAssertEqual(back.metadata.user.map { Array($0.utf8) }, entry.metadata.user.map { Array($0.utf8) })
                XCTAssertEqual(back.metadata.group.map { Array($0.utf8) }, entry.metadata.group.map { Array($0.utf8) })
            }
            XCTAssertEqual(decoded.entries["names/dash"]?.metadata.user, "-")
            XCTAssertNil(decoded.entries["docs/size compared.bin"]?.metadata.user)
            XCTAssertEqual(decoded.entries["links/empty"]?.kind, .symlink(target: ""))
            XCTAssertEqual(try decoded.encoded(), data, "decode then encode gives the same bytes")
        }
    }

    func testFormat3LayoutIsOneSortedSequenceOfDocumentedLines() throws {
        let marker = Marker(
            groups: [MarkerGroup(name: "all", required: true, patterns: ["**"], order: 0)],
            hashes: ["b/file": hash(1), "c": hash(2)],
            entries: [
                "c": MarkerEntry(kind: .hardLink(to: "b/file"), size: 5, metadata: meta(0o644, mtime: 7, uid: 1, gid: 2)),
                "b/file": MarkerEntry(kind: .file, size: 5, metadata: meta(0o4755, mtime: -7, uid: 0, gid: 0, user: "root", group: "-")),
                "b": MarkerEntry(kind: .folder, metadata: meta(0o755, mtime: 0, uid: 0, gid: 0, user: "a b\\c\nd", group: nil)),
                "a link": MarkerEntry(kind: .symlink(target: "../x y\n\\"), metadata: meta(0o777, mtime: 1, uid: 3, gid: 4, user: nil)),
                "b/size only": MarkerEntry(kind: .file, size: 0, metadata: meta(0, mtime: 1, uid: 3, gid: 4, user: "-", group: "")),
            ],
            writer: "me")
        let data = try marker.encoded()
        XCTAssertEqual(Array(data.prefix(7)), Array("BKMARK".utf8) + [3])
        XCTAssertEqual(
            String(decoding: try Zlib.decompress(data.dropFirst(7)), as: UTF8.self),
            """
            W me
            G 0 1 all
            P **
            L 777 1 3 4 - staff a link
            T ../x y\\n\\\\
            D 755 0 0 0 a\\sb\\\\c\\nd - b
            F 5 \(hash(1)) 4755 -7 0 0 root \\- b/file
            F 0 - 0 1 3 4 \\-  b/size only
            K 5 \(hash(2)) 644 7 1 2 alice staff c
            T b/file

            """)
    }

    func testFormat3BytesAreDeterministicAndCoverEntries() throws {
        let marker = entriesMarker()
        var shuffled: [String: MarkerEntry] = [:]
        shuffled.reserveCapacity(marker.entries.count * 8)  // another bucket order
        for (path, entry) in marker.entries.sorted(by: { $0.key > $1.key }) { shuffled[path] = entry }
        XCTAssertNotEqual(Array(shuffled.keys), Array(marker.entries.keys), "the test needs two iteration orders")
        let other = Marker(groups: marker.groups, hashes: marker.hashes, entries: shuffled, writer: marker.writer)
        XCTAssertEqual(try marker.encoded(), try other.encoded())
        XCTAssertEqual(try marker.encoded(), try marker.encoded())
        XCTAssertEqual(try marker.contentDigest(), try other.contentDigest())

        // Every field of an entry counts, in ==, the bytes and the digest.
        var changes: [Marker] = [marker]
        func changed(_ change: (inout MarkerEntry) -> Void, at path: String = "old/setuid") {
            var copy = marker
            change(&copy.entries[path]!)
            changes.append(copy)
        }
        changed { $0.metadata.mode = 0o755 }
        changed { $0.metadata.mtimeNanoseconds += 1 }
        changed { $0.metadata.uid = 1 }
        changed { $0.metadata.gid = 1 }
        changed { $0.metadata.user = "root" }
        changed { $0.metadata.group = nil }
        changed { $0.size += 1 }
        changed({ $0.kind = .symlink(target: "/etc/shadow") }, at: "links/absolute")
        changed({ $0.kind = .hardLink(to: "docs/size compared.bin") }, at: "docs/zz hard link")
        var withoutOne = marker
        withoutOne.entries["empty folder"] = nil
        changes.append(withoutOne)
        for (index, change) in changes.enumerated().dropFirst() {
            XCTAssertNotEqual(change, marker, "change \(index)")
        }
        XCTAssertEqual(Set(try changes.map { try $0.encoded() }).count, changes.count)
        XCTAssertEqual(Set(try changes.map { try $0.contentDigest() }).count, changes.count)
    }

    func testWithoutEntriesFormats1And2AreStillWritten() throws {
        let hashes = ["a": hash(1)]
        let entries = ["a": MarkerEntry(kind: .file, size: 1, metadata: meta())]
        XCTAssertEqual(try Marker(groups: groups, hashes: hashes).encoded()[6], 1)
        XCTAssertEqual(try Marker(groups: groups, hashes: hashes, writer: "w").encoded()[6], 2)
        XCTAssertEqual(try Marker(groups: groups, hashes: hashes, entries: entries).encoded()[6], 3)
        XCTAssertEqual(try Marker(groups: groups, hashes: hashes, entries: entries, writer: "w").encoded()[6], 3)
        // Without entries the content has H lines and no entry lines.
        let old = try Zlib.decompress(try Marker(hashes: hashes, writer: "w").encoded().dropFirst(7))
        XCTAssertEqual(String(decoding: old, as: UTF8.self), "W w\nH \(hash(1)) a\n")
        XCTAssertNotEqual(try Marker(hashes: hashes).contentDigest(), try Marker(hashes: hashes, entries: entries).contentDigest())
    }

    /// The header is read without the entries: a body that would be refused is never parsed
    /// (nor inflated past its first chunk), and a damaged header is still refused.
    func testTheHeaderIsReadWithoutTheEntries() throws {
        let m = "644 0 0 0 - -"
        let data = try framed3("W me@host\nG 0 1 docs\nP *.txt\nF 1 - \(m) a\nthis line is damaged\n")
        XCTAssertThrowsError(try Marker.decode(data))
        let header = try Marker.header(data)
        XCTAssertEqual(header.writer, "me@host")
        XCTAssertEqual(header.groups, [MarkerGroup(name: "docs", required: true, patterns: ["*.txt"], order: 0)])
        XCTAssertThrowsError(try Marker.header(try framed3("W me@host\nG x\nF 1 - \(m) a\n")))
        // Of a whole marker, the same groups and writer decode reads.
        let whole = entriesMarker()
        let encoded = try whole.encoded()
        XCTAssertEqual(try Marker.header(encoded).writer, whole.writer)
        XCTAssertEqual(try Marker.header(encoded).groups, whole.groups)
    }

    func testFormat3DamageIsRefusedWithItsLineNumber() throws {
        let good = hash(0)
        let m = "644 0 0 0 - -"
        let cases: [(String, String)] = [
            ("X a\n", "line 1: unknown record"),
            ("D \(m) a\nH \(good) a\n", "line 2: path \"a\" is listed twice"),
            ("F 1 - \(m) a\nZ\n", "line 2: unreadable record"),
            // T lines and their K/L
            ("T x\n", "line 1: a T record not directly after a K or L record"),
            ("F 1 - \(m) a\nT b\n", "line 2: a T record not directly after a K or L record"),
            ("L \(m) a\nT b\nT c\n", "line 3: a T record not directly after a K or L record"),
            ("D \(m) a\nT b\n", "line 2: a T record not directly after a K or L record"),
            ("F 1 - \(m) a\nK 1 - \(m) b\nF 1 - \(m) c\n", "line 2: a hard link record without its T record"),
            ("F 1 - \(m) a\nK 1 - \(m) b\n", "line 2: a hard link record without its T record"),
            ("L \(m) a\n", "line 1: a symlink record without its T record"),
            ("L \(m) a\nD \(m) b\n", "line 1: a symlink record without its T record"),
            ("L \(m) a\nTx\n", "line 1: a symlink record without its T record"),
            // mode
            ("D 10000 0 0 0 - - a\n", "line 1: mode 10000 is more than 7777"),
            ("D 77777777777 0 0 0 - - a\n", "line 1: mode 77777777777 is more than 7777"),
            ("D 8 0 0 0 - - a\n", "line 1: unreadable mode"),
            ("D 0644 0 0 0 - - a\n", "line 1: unreadable mode"),
            ("D -644 0 0 0 - - a\n", "line 1: unreadable mode"),
            ("D  0 0 0 - - a\n", "line 1: unreadable mode"),
            ("D 644\n", "line 1: unreadable mode"),
            // numbers
            ("D 644 1.5 0 0 - - a\n", "line 1: unreadable modification time"),
            ("D 644 -0 0 0 - - a\n", "line 1: unreadable modification time"),
            ("D 644 01 0 0 - - a\n", "line 1: unreadable modification time"),
            ("D 644 9223372036854775808 0 0 - - a\n", "line 1: unreadable modification time"),
            ("D 644 -9223372036854775809 0 0 - - a\n", "line 1: unreadable modification time"),
            ("D 644 0 -1 0 - - a\n", "line 1: unreadable uid"),
            ("D 644 0 x 0 - - a\n", "line 1: unreadable uid"),
            ("D 644 0 0 4294967296 - - a\n", "line 1: unreadable gid"),
            ("D 644 0 0 0 - a\n", "line 1: unreadable group name"),
            ("D 644 0 0 0 \n", "line 1: unreadable user name"),
            ("F x - \(m) a\n", "line 1: unreadable size"),
            ("F +1 - \(m) a\n", "line 1: unreadable size"),
            ("F 99999999999999999999 - \(m) a\n", "line 1: unreadable size"),
            ("F -1 - \(m) a\n", "line 1: negative size"),
            ("F 1 - \(m) a\nK -5 - \(m) b\nT a\n", "line 2: negative size"),
            ("F 1 \n", "line 1: unreadable hash"),
            // hashes
            ("F 1 \(good.uppercased()) \(m) a\n", "line 1: hash is not 64 lowercase hex characters"),
            ("F 1 abc \(m) a\n", "line 1: hash is not 64 lowercase hex characters"),
            ("F 1 \(good.dropLast())g \(m) a\n", "line 1: hash is not 64 lowercase hex characters"),
            ("F 1 -- \(m) a\n", "line 1: hash is not 64 lowercase hex characters"),
            // names
            ("D 644 0 0 0 \\x - a\n", "line 1: unknown escape in a name"),
            ("D 644 0 0 0 a\\ - a\n", "line 1: a name ends with a lone backslash"),
            ("D 644 0 0 0 a\\- - a\n", "line 1: unknown escape in a name"),
            // order and duplicates
            ("D \(m) b\nD \(m) a\n", "line 2: path \"a\" is out of order"),
            ("D \(m) a/b\nD \(m) a\n", "line 2: path \"a\" is out of order"),
            ("D \(m) b\nF 1 - \(m) a\n", "line 2: path \"a\" is out of order"),
            ("D \(m) a\nD \(m) a\n", "line 2: path \"a\" is listed twice"),
            ("D \(m) a\nF 1 \(good) \(m) a\n", "line 2: path \"a\" is listed twice"),
            ("L \(m) a\nT x\nL \(m) a\nT y\n", "line 3: path \"a\" is listed twice"),
            ("D \(m) e\u{301}\nD \(m) \u{E9}\n", "line 2: path \"\u{E9}\" is listed twice"),
            // hard link targets
            ("F 1 - \(m) a\nK 1 - \(m) b\nT c\n", "line 3: the hard link's target \"c\" is not an earlier file entry"),
            ("K 1 - \(m) a\nT b\nF 1 - \(m) b\n", "line 2: the hard link's target \"b\" is not an earlier file entry"),
            ("F 1 - \(m) a\nK 1 - \(m) b\nT b\n", "line 3: the hard link's target \"b\" is not an earlier file entry"),
            ("D \(m) a\nK 1 - \(m) b\nT a\n", "line 3: the hard link's target \"a\" is not an earlier file entry"),
            ("L \(m) a\nT x\nK 1 - \(m) b\nT a\n", "line 4: the hard link's target \"a\" is not an earlier file entry"),
            ("F 1 - \(m) a\nK 1 - \(m) b\nT a\nK 1 - \(m) c\nT b\n",
             "line 5: the hard link's target \"b\" is not an earlier file entry"),
            ("F 1 - \(m) \u{E9}\nK 1 - \(m) \u{FA}\nT e\u{301}\n",
             "line 3: the hard link's target \"e\u{301}\" is not an earlier file entry"),
            ("F 1 - \(m) a\nK 1 - \(m) b\nT \n", "line 3: the hard link's target \"\" is not an earlier file entry"),
            // paths
            ("D \(m) ../x\n", "line 1: path \"../x\": \".\" or \"..\" segment"),
            ("D \(m) a/./b\n", "line 1: path \"a/./b\": \".\" or \"..\" segment"),
            ("F 1 - \(m) /abs\n", "line 1: path \"/abs\": absolute path"),
            ("L \(m) a//b\nT x\n", "line 1: path \"a//b\": empty path segment"),
            ("D \(m) a/\n", "line 1: path \"a/\": empty path segment"),
            ("D \(m) \n", "line 1: path \"\": empty path"),
            ("D \(m) bad\\tescape\n", "line 1: unknown escape"),
            ("L \(m) a\nT lone\\\n", "line 2: ends with a lone backslash"),
            // structure
            ("F 1 - \(m) a\nG 1 1 x\n", "line 2: group after the entries"),
            ("F 1 - \(m) a\nP x\n", "line 2: pattern outside a group"),
            ("D \(m) a\nW me\n", "line 2: the writer record is not the first line"),
            ("", "a format 3 marker without entries"),
            ("W me\nG 1 1 x\n", "a format 3 marker without entries"),
            ("D \(m) a", "the content does not end with a line break"),
        ]
        for (content, detail) in cases {
            assertDamaged(try framed3(content), containing: detail, content.debugDescription)
        }
        // Entry lines are format 3 only.
        for content in ["F 1 - \(m) a\n", "D \(m) a\n", "L \(m) a\nT b\n", "T b\n"] {
            assertDamaged(try framed(content), containing: "line 1: unknown record", content.debugDescription)
        }
        // Bytes that are not UTF-8 in a path, a name and a target.
        let invalid: [(Data, String)] = [
            (Data("D \(m) ".utf8) + Data([0xFF]) + Data("\n".utf8), "line 1: path is not valid UTF-8"),
            (Data("D 644 0 0 0 ".utf8) + Data([0xC3]) + Data(" - a\n".utf8), "line 1: name is not valid UTF-8"),
            (Data("D 644 0 0 0 - \\\\".utf8) + Data([0xC3]) + Data(" a\n".utf8), "line 1: name is not valid UTF-8"),
            (Data("L \(m) a\nT ".utf8) + Data([0xFE]) + Data("\n".utf8), "line 2: text is not valid UTF-8"),
            (Data("D \(m) a".utf8) + Data([0]) + Data("\n".utf8), "line 1: path \"a\u{0}\": contains a NUL byte"),
        ]
        for (content, detail) in invalid {
            assertDamaged(Data(Marker.magic) + Data([3]) + (try Zlib.compress(content)), containing: detail)
        }
        // What the cases break, unbroken, reads.
        let valid = try Marker.decode(try framed3(
            "W me\nG 1 1 x\nF 1 \(good) \(m) a\nK 1 - 4755 -5 0 4294967295 \\- \\\\\\s\\n b\nT a\nL 0 0 0 0 - - c\nT \nD 7777 0 0 0   d\n"))
        XCTAssertEqual(valid.hashes, ["a": good])
        XCTAssertEqual(valid.entries["b"], MarkerEntry(kind: .hardLink(to: "a"), size: 1, metadata: EntryMetadata(
            mode: 0o4755, mtimeNanoseconds: -5, uid: 0, gid: UInt32.max, user: "-", group: "\\ \n")))
        XCTAssertEqual(valid.entries["c"], MarkerEntry(kind: .symlink(target: ""), metadata: EntryMetadata(
            mode: 0, mtimeNanoseconds: 0, uid: 0, gid: 0)))
        XCTAssertEqual(valid.entries["d"]?.metadata.user, "")
        XCTAssertEqual(valid.entries["d"]?.metadata.group, "")
    }

    func testHostileFormat3ContentNeverCrashesAndWhatReadsWritesBack() throws {
        let content = try Zlib.decompress(try entriesMarker().encoded().dropFirst(7))
        var random = SplitMix(seed: 0x5eed)
        let alphabet = Array("FKLDTHWGP -\\\nns0123456789abcdef/.".utf8) + [0, 0xFF, 0xC3]
        var accepted = 0
        for _ in 0..<3_000 {
            var bytes = [UInt8](content)
            for _ in 0...(random.next() % 4) {
                let index = Int(random.next() % UInt64(bytes.count))
                switch random.next() % 3 {
                case 0: bytes[index] = alphabet[Int(random.next() % UInt64(alphabet.count))]
                case 1: bytes.remove(at: index)
                default: bytes.insert(alphabet[Int(random.next() % UInt64(alphabet.count))], at: index)
                }
                if bytes.isEmpty { bytes = [newlineByte] }
            }
            let data = Data(Marker.magic) + Data([3]) + (try Zlib.compress(Data(bytes)))
            do {
                let marker = try Marker.decode(data)
                accepted += 1
                XCTAssertEqual(try Marker.decode(marker.encoded()), marker, "what decode accepts, encode writes back")
            } catch {
                // Refused (decode throws only MarkerError), not crashed.
            }
        }
        XCTAssertGreaterThan(accepted, 0, "some mutations (inside names and paths) stay valid")
    }

    func testTwoHundredThousandEntriesRoundTrip() throws {
        var entries: [String: MarkerEntry] = [:]
        var hashes: [String: String] = [:]
        entries.reserveCapacity(200_000)
        let digest = hash(0)
        func folderOf(_ index: Int) -> String { "folder \(index % 211)" }
        for index in 0..<200_000 {
            let folder = folderOf(index)
            let metadata = meta(0o644, mtime: Int64(index) * 1_000_003 - 50_000_000_000, uid: UInt32(index % 5), gid: 100)
            switch index % 10 {
            case 0: entries["\(folder)/sub \(index)"] = MarkerEntry(kind: .folder, metadata: metadata)
            case 1: entries["\(folder)/link \(index)"] = MarkerEntry(kind: .symlink(target: "../t \(index)"), metadata: metadata)
            case 3: entries["\(folderOf(index - 1))/zz hard \(index)"] = MarkerEntry(
                kind: .hardLink(to: "\(folderOf(index - 1))/file \(index - 1)"), size: Int64(index - 1), metadata: metadata)
            default:
                entries["\(folder)/file \(index)"] = MarkerEntry(kind: .file, size: Int64(index), metadata: metadata)
                if index % 2 == 1 { hashes["\(folder)/file \(index)"] = digest }
            }
        }
        for index in 0..<211 { entries["folder \(index)"] = MarkerEntry(kind: .folder, metadata: meta(0o755)) }
        let marker = Marker(groups: groups, hashes: hashes, entries: entries, writer: "w")
        let data = try marker.encoded()
        let decoded = try Marker.decode(data, maxContentSize: Marker.contentLimit(listedFiles: 160_000))
        XCTAssertEqual(decoded.entries.count, 200_211)
        XCTAssertEqual(decoded, marker)
    }

    func testEncodeRefusesEntriesDecodeWouldReject() {
        let file = MarkerEntry(kind: .file, size: 1, metadata: meta())
        let refused: [(Marker, String)] = [
            (Marker(hashes: ["d": hash(0)], entries: ["d": MarkerEntry(kind: .folder, metadata: meta())]),
             "path \"d\" has a hash but is a folder or a symbolic link"),
            (Marker(hashes: ["l": hash(0)], entries: ["l": MarkerEntry(kind: .symlink(target: "x"), metadata: meta())]),
             "path \"l\" has a hash but is a folder or a symbolic link"),
            (Marker(hashes: ["a": "abc"], entries: ["a": file]), "path \"a\": the hash is not 64 lowercase hex"),
            (Marker(entries: ["a": MarkerEntry(kind: .file, metadata: meta(0o10000))]), "path \"a\": mode 10000 is more than 7777"),
            (Marker(entries: ["a": MarkerEntry(kind: .file, size: -1, metadata: meta())]), "path \"a\": negative size -1"),
            (Marker(entries: ["a": file, "b": MarkerEntry(kind: .hardLink(to: "a"), size: -2, metadata: meta())]),
             "path \"b\": negative size -2"),
            (Marker(entries: ["d": MarkerEntry(kind: .folder, size: 1, metadata: meta())]), "path \"d\": a symlink or folder with size 1"),
            (Marker(entries: ["l": MarkerEntry(kind: .symlink(target: ""), size: 4, metadata: meta())]), "path \"l\": a symlink or folder"),
            (Marker(entries: ["b": MarkerEntry(kind: .hardLink(to: "a"), metadata: meta())]),
             "path \"b\": the hard link's target \"a\" is not an earlier file entry"),
            (Marker(entries: ["c": file, "b": MarkerEntry(kind: .hardLink(to: "c"), metadata: meta())]),
             "path \"b\": the hard link's target \"c\" is not an earlier file entry"),
            (Marker(entries: ["b": MarkerEntry(kind: .hardLink(to: "b"), metadata: meta())]),
             "path \"b\": the hard link's target \"b\" is not an earlier file entry"),
            (Marker(entries: ["a": MarkerEntry(kind: .folder, metadata: meta()), "b": MarkerEntry(kind: .hardLink(to: "a"), metadata: meta())]),
             "path \"b\": the hard link's target \"a\" is not an earlier file entry"),
            (Marker(entries: ["\u{E9}": file, "\u{FA}": MarkerEntry(kind: .hardLink(to: "e\u{301}"), metadata: meta())]),
             "path \"\u{FA}\": the hard link's target \"e\u{301}\" is not an earlier file entry"),
            (Marker(entries: ["../x": file]), "path \"../x\": \".\" or \"..\" segment"),
            (Marker(entries: ["/abs": MarkerEntry(kind: .folder, metadata: meta())]), "path \"/abs\": absolute path"),
            (Marker(entries: ["": file]), "path \"\": empty path"),
            (Marker(entries: ["a\u{0}b": file]), "NUL"),
            (Marker(entries: ["a": file], writer: ""), "the writer id is empty"),
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
        // A hard link to an earlier file, and a hash on a hard link, are fine.
        XCTAssertNoThrow(try Marker(
            hashes: ["b": hash(0)], entries: ["a": file, "b": MarkerEntry(kind: .hardLink(to: "a"), size: 1, metadata: meta())]
        ).encoded())
    }

    func testMarkerSizeLimitLeavesRoomForEntriesThatAreNoListedFile() {
        XCTAssertEqual(Probe.markerSizeLimit(listedFiles: 0), 8 << 20)
        XCTAssertEqual(Probe.markerSizeLimit(listedFiles: 1_000), (8 << 20) + 1_024_000)
        XCTAssertEqual(Marker.contentLimit(listedFiles: -5), 8 << 20)
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

private let newlineByte = UInt8(ascii: "\n")

/// A seeded generator, so a failing mutation can be replayed.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension MarkerTests {
    // MARK: Writing as a stream

    /// `marker` written through a `Marker.Writer`, entries and hashes in byte order.
    private func streamed(_ marker: Marker) throws -> Data {
        let writer = try Marker.Writer(
            groups: marker.groups, writer: marker.writer,
            linkTargets: marker.entries.values.compactMap { if case .hardLink(let to) = $0.kind { to } else { nil } })
        for path in marker.entries.keys.sorted(by: { ByteOrder.compare($0, $1) < 0 }) {
            let entry = try XCTUnwrap(marker.entries[path])
            try writer.append(path: path, entry: entry, hash: marker.hashes[path].flatMap(SHA256Digest.init(hex:)))
        }
        for path in marker.hashes.keys.sorted(by: { ByteOrder.compare($0, $1) < 0 }) where marker.entries[path] == nil {
            try writer.appendHash(path: path, hash: try XCTUnwrap(SHA256Digest(hex: try XCTUnwrap(marker.hashes[path]))))
        }
        return try writer.finish()
    }

    func testAStreamedMarkerIsByteForByteTheEncodedOne() throws {
        // Every kind and awkward value, formats 3, 2 and 1, and one large enough that the
        // writer compresses it in many pieces.
        var large = entriesMarker()
        for n in 0..<6_000 {
            let path = "bulk/\(n % 37)/file \(n).dat"
            large.entries[path] = MarkerEntry(kind: .file, size: Int64(n), metadata: meta(mtime: Int64(n) * 1_000_003))
            if n % 3 != 0 { large.hashes[path] = hash(n) }
        }
        large.hashes["kept remotely/no entry.bin"] = hash(-1)
        let hashesOnly = Marker(groups: groups, hashes: Dictionary(uniqueKeysWithValues: (0..<500).map { ("h/\($0)", hash($0)) }))
        var withWriter = hashesOnly
        withWriter.writer = "default@host"
        for marker in [entriesMarker(), entriesMarker(writer: nil), large, hashesOnly, withWriter, Marker()] {
            let data = try streamed(marker)
            XCTAssertEqual(data, try marker.encoded())
            XCTAssertEqual(try Marker.decode(data), marker)
        }
    }

    func testTheStreamingWriterRefusesWhatDecodeWouldReject() throws {
        let file = MarkerEntry(kind: .file, size: 1, metadata: meta())
        func refusal(_ steps: (Marker.Writer) throws -> Void) -> MarkerError? {
            do {
                let writer = try Marker.Writer(groups: [], writer: nil, linkTargets: ["a"])
                try steps(writer)
                _ = try writer.finish()
                return nil
            } catch let error as MarkerError {
                return error
            } catch {
                XCTFail("\(error)")
                return nil
            }
        }
        XCTAssertNotNil(refusal { try $0.append(path: "b", entry: file, hash: nil); try $0.append(path: "a", entry: file, hash: nil) }, "out of order")
        XCTAssertNotNil(refusal { try $0.append(path: "a", entry: file, hash: nil); try $0.append(path: "a", entry: file, hash: nil) }, "twice")
        XCTAssertNotNil(refusal {
            try $0.append(path: "b", entry: MarkerEntry(kind: .hardLink(to: "a"), size: 1, metadata: self.meta()), hash: nil)
        }, "a hard link to a path that is no earlier file entry")
        XCTAssertNotNil(refusal {
            try $0.append(path: "a", entry: MarkerEntry(kind: .folder, metadata: self.meta()), hash: SHA256Digest(hex: self.hash(1)))
        }, "a hash on a folder")
        XCTAssertNotNil(refusal { try $0.append(path: "../up", entry: file, hash: nil) }, "a path decode refuses")
        XCTAssertNotNil(refusal {
            let digest = try XCTUnwrap(SHA256Digest(hex: self.hash(1)))
            try $0.appendHash(path: "z", hash: digest)
            try $0.appendHash(path: "y", hash: digest)
        }, "hash lines out of order")
        XCTAssertNil(refusal {
            try $0.append(path: "a", entry: file, hash: nil)
            try $0.append(path: "b", entry: MarkerEntry(kind: .hardLink(to: "a"), size: 1, metadata: self.meta()), hash: nil)
        })
    }
}
