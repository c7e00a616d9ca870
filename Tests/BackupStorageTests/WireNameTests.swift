// The wire spelling of names on WebDAV and S3: reversible for every name, made only of what
// servers keep (no control character, `‛` only in pairs), and refusing every spelling it
// does not make, so a listing can never name a file two ways.

import BackupEngine
@testable import BackupStorage
import BackupTestSupport
import XCTest

final class WireNameTests: XCTestCase {
    private let quote = "\u{201B}"

    func testPlainNamesAreTheirOwnSpelling() {
        for name in ["a.txt", "Zoë’s “notes”", "\u{202E}bidi", "\u{85}c1", "／．", "\u{2409}", " lead", "trail ", "\u{1F600}"] {
            XCTAssertEqual(WireName.encode(name), name)
            XCTAssertEqual(WireName.decode(name), name)
        }
    }

    func testEveryByteNameRoundTripsAndItsSpellingHoldsNothingServersRewrite() {
        var generator = SeededGenerator(seed: 0x1A2B)
        var names: [[UInt8]] = (1...0xFF).filter { $0 != 0x2F }.map { [UInt8($0)] }
        names += [[0xE2, 0x80, 0x9B], [0xE2, 0x80, 0x9B, 0xE2, 0x80, 0x9B], [0xEE, 0xBC, 0x80], [0xEE, 0xBF, 0xBF], [0xE2, 0x80]]
        for _ in 0..<5000 {
            names.append((0..<Int.random(in: 1...12, using: &generator)).map { _ in
                let pick = UInt8.random(in: 1...0xFF, using: &generator)
                return pick == 0x2F ? 0x61 : pick
            })
        }
        var spellings = Set<String>()
        for bytes in names {
            let name = FileName.string(fromBytes: bytes)
            let wire = WireName.encode(name)
            XCTAssertEqual(WireName.decode(wire), name, "\(bytes)")
            XCTAssertEqual(FileName.bytes(of: WireName.decode(wire) ?? ""), bytes)
            XCTAssertFalse(wire.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(bytes): a control on the wire")
            XCTAssertFalse(wire.utf8.contains(UInt8(ascii: "/")))
            // `‛` only in pairs: remove the pairs and none is left.
            XCTAssertFalse(wire.replacingOccurrences(of: quote + quote, with: "").contains(quote), "\(bytes): a lone ‛ on the wire")
            spellings.insert(wire)
        }
        XCTAssertEqual(spellings.count, Set(names).count, "two names share a spelling")
    }

    func testBytesAControlOrTheBlockAreSpeltWithTheBlock() {
        XCTAssertEqual(WireName.encode(FileName.string(fromBytes: Array("caf".utf8) + [0xE9])), "caf\u{EFE9}")
        XCTAssertEqual(WireName.encode("tab\there"), "tab\u{EF09}here")
        XCTAssertEqual(WireName.encode("del\u{7F}"), "del\u{EF7F}")
        XCTAssertEqual(WireName.encode("pua\u{EF41}"), "pua\u{EF00}\u{EF41}")
        XCTAssertEqual(WireName.encode("start\u{EF00}"), "start\u{EF00}\u{EF00}")
        // The codec's doubled `‛` (a literal one) stays doubled: names uploaded before keep theirs.
        XCTAssertEqual(WireName.encode("q\(quote)\(quote)x"), "q\(quote)\(quote)x")
        XCTAssertEqual(WireName.decode("q\(quote)\(quote)x"), "q\(quote)\(quote)x")
    }

    func testSpellingsItDoesNotMakeAreRefused() {
        for wire in [
            "lone\(quote)", "\(quote)FF", "odd\(quote)\(quote)\(quote)",  // a lone `‛`
            "raw\ttab", "raw\u{1B}", "raw\u{7F}", "nul\u{0}",  // raw controls
            "\u{EF41}", "\u{EF2F}", "\u{EF2E}\u{EF2E}",  // block points standing for no byte of the set ("A", "/", "..")
            "\u{EF00}a", "end\u{EF00}",  // the block's first point not before another of the block
            "\u{EFC3}\u{EFA9}",  // escaped bytes that are valid UTF-8 ("é" spelt a second way)
        ] {
            XCTAssertNil(WireName.decode(wire), String(reflecting: wire))
        }
    }

    func testDecodingNeverYieldsASlashOrNUL() {
        var generator = SeededGenerator(seed: 0xD1CE)
        let pieces = [quote, "\u{EF00}", "\u{EF2F}", "\u{EF00}\u{EF2F}", "\u{EF80}", "\u{EFFF}", "\u{EF01}", "a", ".", "\u{2F}"]
        for _ in 0..<20000 {
            let wire = (0..<Int.random(in: 1...6, using: &generator)).map { _ in pieces.randomElement(using: &generator) ?? "" }.joined()
            guard !wire.contains("/"), let name = WireName.decode(wire) else { continue }
            let bytes = FileName.bytes(of: name)
            XCTAssertFalse(bytes.contains(0) || bytes.contains(UInt8(ascii: "/")), String(reflecting: wire))
            XCTAssertEqual(WireName.encode(name), wire, "decode is only the inverse of encode")
        }
    }
}
