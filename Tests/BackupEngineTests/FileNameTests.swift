// The reversible name codec: any bytes to a String and back, valid UTF-8 unchanged.

import BackupEngine
import Foundation
import XCTest

final class FileNameTests: XCTestCase {
    private let samples: [[UInt8]] = [
        Array("plain.txt".utf8),
        Array("Ünïcødé 日本 ✓.txt".utf8),
        [0x63, 0x61, 0x66, 0xE9, 0x2E, 0x74, 0x78, 0x74],  // "café.txt" in Latin-1
        [0xFF, 0xFE, 0x00 + 0x41],
        [0xC0, 0xAF],  // an overlong "/"
        [0xED, 0xA0, 0x80],  // a UTF-16 surrogate in UTF-8
        [0xF4, 0x90, 0x80, 0x80],  // past U+10FFFF
        Array("quote \u{201B} inside".utf8),
        Array("\u{201B}41".utf8),  // looks like an escape, is a real name
        [0xE2, 0x80],  // a truncated escape character
    ]

    func testEveryNameRoundTripsByteExactly() {
        for bytes in samples {
            let name = FileName.string(fromBytes: bytes)
            XCTAssertEqual(FileName.bytes(of: name), bytes, "\(bytes) → \(name)")
        }
    }

    func testValidUTF8WithoutTheEscapeIsUnchanged() {
        XCTAssertEqual(FileName.string(fromBytes: Array("Ünïcødé 日本 ✓.txt".utf8)), "Ünïcødé 日本 ✓.txt")
        XCTAssertFalse(FileName.isEscaped("Ünïcødé 日本 ✓.txt"))
    }

    func testInvalidBytesBecomeVisibleEscapes() {
        let name = FileName.string(fromBytes: [0x63, 0x61, 0x66, 0xE9])
        XCTAssertEqual(name, "caf\u{201B}E9")
        XCTAssertTrue(FileName.isEscaped(name))
        XCTAssertEqual(FileName.string(fromBytes: Array("a\u{201B}b".utf8)), "a\u{201B}\u{201B}b")
    }

    func testDistinctByteNamesGiveDistinctStrings() {
        let strings = samples.map { FileName.string(fromBytes: $0) }
        XCTAssertEqual(Set(strings.map { Array($0.utf8) }).count, samples.count)
    }

    func testWithCStringPassesTheRealBytes() throws {
        let dir = NSTemporaryDirectory() + "filename-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let name = FileName.string(fromBytes: [0x63, 0x61, 0x66, 0xE9])
        let fd = FileName.withCString(dir + "/" + name) { open($0, O_WRONLY | O_CREAT, 0o644) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        // The file on disk has the Latin-1 byte, not the escape.
        let listed = try FileManager.default.contentsOfDirectory(atPath: dir)
        XCTAssertEqual(listed.count, 1)
        XCTAssertFalse(listed[0].contains("\u{201B}"))
    }
}

final class FileNameCanonicalTests: XCTestCase {
    private let e = "\u{201B}"

    func testNonCanonicalEscapesAreNeverDecoded() {
        // Escapes for ".", "/", NUL and plain letters stand for no bytes a scan produces:
        // they are taken literally, so decoding can never yield "/", NUL, "." or "..".
        for name in ["\(e)2E\(e)2E", "\(e)2E", "a\(e)2Fb", "\(e)00", "\(e)41", "x\(e)"] {
            XCTAssertEqual(FileName.bytes(of: name), Array(name.utf8), name)
            XCTAssertFalse(FileName.isCanonical(name), name)
        }
    }

    func testCanonicalEscapesDecode() {
        let name = FileName.string(fromBytes: [0x63, 0x61, 0x66, 0xE9, 0xFF])
        XCTAssertTrue(FileName.isCanonical(name))
        XCTAssertEqual(FileName.bytes(of: name), [0x63, 0x61, 0x66, 0xE9, 0xFF])
    }
}
