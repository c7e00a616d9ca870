// Tests for Zlib: round trips of empty, small and 10 MiB random data, the decompression
// bound, and each way a compressed stream can be bad.

import BackupTree
import Foundation
import XCTest

final class ZlibTests: XCTestCase {
    func testRoundTripEmpty() throws {
        let compressed = try Zlib.compress(Data())
        XCTAssertFalse(compressed.isEmpty, "an empty stream still has a header and checksum")
        XCTAssertEqual(try Zlib.decompress(compressed), Data())
    }

    func testRoundTripSmall() throws {
        let data = Data("hello, marker — ünïcödé\n".utf8)
        XCTAssertEqual(try Zlib.decompress(Zlib.compress(data)), data)
    }

    func testRoundTripTenMiBRandom() throws {
        let data = randomData(count: 10 << 20)
        let compressed = try Zlib.compress(data)
        let back = try Zlib.decompress(compressed)
        XCTAssertEqual(back.count, data.count)
        XCTAssertEqual(back, data)
    }

    func testRepetitiveDataShrinksAndEveryLevelRoundTrips() throws {
        let data = Data(String(repeating: "H 0123456789abcdef path/to/file.txt\n", count: 10_000).utf8)
        for level: Int32 in [0, 1, 6, 9, -1] {
            let compressed = try Zlib.compress(data, level: level)
            if level != 0 { XCTAssertLessThan(compressed.count, data.count / 10, "level \(level)") }
            XCTAssertEqual(try Zlib.decompress(compressed), data, "level \(level)")
        }
    }

    func testCompressionIsDeterministic() throws {
        let data = randomData(count: 100_000) + Data(repeating: 7, count: 100_000)
        XCTAssertEqual(try Zlib.compress(data), try Zlib.compress(data))
    }

    func testInvalidLevelFails() {
        XCTAssertThrowsError(try Zlib.compress(Data("x".utf8), level: 42)) { error in
            guard case .failed? = error as? ZlibError else { return XCTFail("unexpected \(error)") }
        }
    }

    func testDecompressionIsBounded() throws {
        let size = 2 << 20
        let compressed = try Zlib.compress(Data(repeating: 0, count: size))
        XCTAssertEqual(try Zlib.decompress(compressed, maxOutputSize: size).count, size)
        XCTAssertThrowsError(try Zlib.decompress(compressed, maxOutputSize: size - 1)) { error in
            XCTAssertEqual(error as? ZlibError, .tooLarge(limit: size - 1))
        }
        XCTAssertThrowsError(try Zlib.decompress(compressed, maxOutputSize: 0)) { error in
            XCTAssertEqual(error as? ZlibError, .tooLarge(limit: 0))
        }
        XCTAssertEqual(Zlib.defaultMaxOutputSize, 1 << 30)
    }

    func testBombStopsAtTheLimit() throws {
        // 256 MiB of zeros is ~250 KiB compressed; the decoder must stop near the limit.
        let bomb = try Zlib.compress(Data(repeating: 0, count: 256 << 20), level: 9)
        XCTAssertLessThan(bomb.count, 1 << 20)
        XCTAssertThrowsError(try Zlib.decompress(bomb, maxOutputSize: 1 << 20)) { error in
            XCTAssertEqual(error as? ZlibError, .tooLarge(limit: 1 << 20))
            XCTAssertEqual(
                (error as? ZlibError)?.description, "decompressed data is larger than the limit of 1048576 bytes")
        }
    }

    func testTruncatedStream() throws {
        let compressed = try Zlib.compress(randomData(count: 50_000))
        for cut in [1, 2, 4, 100, compressed.count / 2] {
            XCTAssertThrowsError(try Zlib.decompress(compressed.prefix(compressed.count - cut)), "cut \(cut)") { error in
                XCTAssertEqual(error as? ZlibError, .truncated, "cut \(cut)")
            }
        }
        XCTAssertThrowsError(try Zlib.decompress(Data())) { error in
            XCTAssertEqual(error as? ZlibError, .truncated)
        }
    }

    func testCorruptStream() throws {
        XCTAssertThrowsError(try Zlib.decompress(Data("not zlib at all".utf8))) { error in
            guard case .corrupt(let detail)? = error as? ZlibError else { return XCTFail("unexpected \(error)") }
            XCTAssertFalse(detail.isEmpty)
        }
        var damaged = try Zlib.compress(Data(String(repeating: "abc", count: 1000).utf8))
        let middle = damaged.startIndex + damaged.count / 2
        damaged[middle] ^= 0xFF
        XCTAssertThrowsError(try Zlib.decompress(damaged)) { error in
            guard case .corrupt? = error as? ZlibError else { return XCTFail("unexpected \(error)") }
        }
        var badChecksum = try Zlib.compress(Data("checksum".utf8))
        badChecksum[badChecksum.endIndex - 1] ^= 0x01
        XCTAssertThrowsError(try Zlib.decompress(badChecksum)) { error in
            XCTAssertEqual(error as? ZlibError, .corrupt("incorrect data check"))
            XCTAssertEqual((error as? ZlibError)?.description, "compressed data is corrupt (incorrect data check)")
        }
    }

    func testTrailingBytesAfterTheStream() throws {
        let compressed = try Zlib.compress(Data("payload".utf8))
        XCTAssertThrowsError(try Zlib.decompress(compressed + Data([0]))) { error in
            XCTAssertEqual(error as? ZlibError, .trailingData)
        }
        XCTAssertThrowsError(try Zlib.decompress(compressed + compressed)) { error in
            XCTAssertEqual(error as? ZlibError, .trailingData)
        }
    }

    func testSliceInputWithNonZeroStartIndex() throws {
        let compressed = try Zlib.compress(Data("sliced".utf8))
        let framed = Data([1, 2, 3]) + compressed
        XCTAssertEqual(try Zlib.decompress(framed.dropFirst(3)), Data("sliced".utf8))
    }
}

/// `count` bytes from the system's random generator.
func randomData(count: Int) -> Data {
    var data = Data(count: count)
    var generator = SystemRandomNumberGenerator()
    data.withUnsafeMutableBytes { raw in
        var offset = 0
        while offset < raw.count {
            let word = generator.next()
            if raw.count - offset >= 8 {
                raw.storeBytes(of: word, toByteOffset: offset, as: UInt64.self)
                offset += 8
            } else {
                raw[offset] = UInt8(truncatingIfNeeded: word)
                offset += 1
            }
        }
    }
    return data
}
