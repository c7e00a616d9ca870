import BackupEngine
import CSQLite
import Foundation
import XCTest

final class SHA256DigestTests: XCTestCase {
    func testADigestRoundTripsThroughItsHexAndComparesByItsBytes() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let hex = bytes.map { String(format: "%02x", $0) }.joined()
            let digest = try XCTUnwrap(SHA256Digest(hex: hex))
            XCTAssertEqual(digest.hex, hex)
            XCTAssertEqual(SHA256Digest(hex: hex.uppercased()), digest, "either case spells the same digest")
            XCTAssertEqual(bytes.withUnsafeBytes { SHA256Digest(bytes: $0) }, digest)
            var changed = bytes
            changed[Int.random(in: 0..<32, using: &generator)] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
            XCTAssertNotEqual(changed.withUnsafeBytes { SHA256Digest(bytes: $0) }, digest)
        }
        XCTAssertEqual(SHA256Digest(hex: SHA256Hasher.hex(Data("abc".utf8)))?.hex, SHA256Hasher.hex(Data("abc".utf8)))
    }

    func testTextThatIsNotSixtyFourHexDigitsIsNoDigest() {
        let valid = String(repeating: "a", count: 64)
        for text in ["", "ab", String(valid.dropLast()), valid + "0", String(valid.dropLast()) + "g", String(valid.dropLast()) + " ",
                     String(valid.dropLast(2)) + "é"] {
            XCTAssertNil(SHA256Digest(hex: text), text)
        }
        XCTAssertNil([UInt8](repeating: 0, count: 31).withUnsafeBytes { SHA256Digest(bytes: $0) })
        // An entry given such text is size-compared: it has no hash to compare.
        XCTAssertNil(SyncEntry(path: "a", size: 1, hash: "ab", source: .absent).digest)
        XCTAssertNil(StateEntry(path: "a", size: 1, hash: "ab", remoteId: nil).hash)
    }

    func testAFingerprintRowWhoseHashIsNotADigestIsNoFingerprint() throws {
        let dir = NSTemporaryDirectory() + "digest-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/sync.db"
        let store = try StateStore(path: path)
        let good = try XCTUnwrap(Fingerprint(size: 1, mtimeNanoseconds: 2, inode: 3, hash: SHA256Hasher.hex(Data("x".utf8))))
        try store.updateFingerprints(["good": good, "bad": good])
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "UPDATE fingerprints SET hash = 'not a digest' WHERE path = 'bad'", nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
        // Read as a fingerprint it would make the scan take a wrong hash for the file; without
        // one the file is read again.
        XCTAssertEqual(try StateStore(path: path).fingerprints(), ["good": good])
    }

    /// The verification pass: with an expected size, a file of that size is hashed whole, and
    /// one shorter or longer is still read to its real end (its size told as it is).
    func testDigestAndSizeReadsToTheRealEndWhateverSizeWasExpected() throws {
        let dir = NSTemporaryDirectory() + "digest-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for size in [0, 1, 100, 4095, 4096, 4097, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20] {
            let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            let path = dir + "/f\(size)"
            try data.write(to: URL(fileURLWithPath: path))
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            XCTAssertGreaterThanOrEqual(fd, 0)
            defer { close(fd) }
            let whole = SHA256Hasher.hex(data)
            for expected in [nil, Int64(size), Int64(size) - 1, Int64(size) + 1, 0, Int64(size) * 2 + 5] as [Int64?] {
                let (digest, counted) = try SHA256Hasher.digestAndSize(ofOpenFile: fd, expectedSize: expected, displayPath: path)
                XCTAssertEqual(counted, Int64(size), "size \(size), expected \(String(describing: expected))")
                XCTAssertEqual(digest.hex, whole, "size \(size), expected \(String(describing: expected))")
            }
        }
    }
}
