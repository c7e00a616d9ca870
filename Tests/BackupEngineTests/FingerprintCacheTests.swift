import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class FingerprintCacheTests: XCTestCase {
    private func print(_ n: Int) -> Fingerprint {
        Fingerprint(size: Int64(n), mtimeNanoseconds: Int64(n) * 1_000, inode: UInt64(n), digest: SHA256Digest(hex: SHA256Hasher.hex(Data("\(n)".utf8)))!)
    }

    /// Paths that sort close together in byte order: prefixes of each other, a space and a
    /// "/" (0x20 and 0x2f sort around "."), non-ASCII names and names in FileName's escapes.
    private func awkwardPaths(count: Int) -> [String] {
        var generator = SeededGenerator(seed: 13)
        let parts = ["a", "a b", "a.b", "a/b", "ab", "é", "日本", "\u{1F600}", "A", "‛ff", " ", ".x", "a-", "z"]
        var paths = Set<String>()
        while paths.count < count {
            let depth = Int.random(in: 1...3, using: &generator)
            paths.insert((0..<depth).map { _ in parts.randomElement(using: &generator)! }.joined(separator: "/"))
        }
        return Array(paths)
    }

    func testTheCacheFindsExactlyTheFingerprintsOfTheDictionaryItWasMadeFrom() {
        let paths = awkwardPaths(count: 400)
        var dictionary: [String: Fingerprint] = [:]
        for (n, path) in paths.enumerated() where n % 2 == 0 { dictionary[path] = print(n) }
        let cache = FingerprintCache(dictionary)
        XCTAssertEqual(cache.count, dictionary.count)
        XCTAssertEqual(cache.dictionary, dictionary)
        for path in paths {
            XCTAssertEqual(cache[path], dictionary[path], path)
        }
        for missing in ["", "a/", "a b/", "zz", "a/b/", "\u{0}"] where dictionary[missing] == nil {
            XCTAssertNil(cache[missing], missing)
        }
        var order: [String] = []
        cache.forEach { path, _ in order.append(path) }
        XCTAssertEqual(order, dictionary.keys.sorted { ByteOrder.compare($0, $1) < 0 }, "held in byte order")
    }

    func testTheCacheListsEveryPathBelowAFolderAndNoOther() {
        let paths = awkwardPaths(count: 400)
        var dictionary: [String: Fingerprint] = [:]
        for (n, path) in paths.enumerated() { dictionary[path] = print(n) }
        let cache = FingerprintCache(dictionary)
        for prefix in ["a/", "a b/", "a/b/", "é/", "日本/", "z/", "nothing/", ""] {
            var found: [String: Fingerprint] = [:]
            cache.forEach(withPrefix: prefix) { found[$0] = $1 }
            XCTAssertEqual(found, dictionary.filter { $0.key.hasPrefix(prefix) }, prefix)
        }
    }

    func testTheStateReadsTheSameCacheAsItsDictionary() throws {
        let dir = NSTemporaryDirectory() + "cache-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try StateStore(path: dir + "/sync.db")
        var dictionary: [String: Fingerprint] = [:]
        for (n, path) in awkwardPaths(count: 300).enumerated() { dictionary[path] = print(n) }
        try store.updateFingerprints(dictionary)
        let cache = try store.fingerprintCache()
        XCTAssertEqual(cache.dictionary, dictionary)
        XCTAssertEqual(cache, FingerprintCache(try store.fingerprints()))
        XCTAssertEqual(try StateStore(path: dir + "/empty.db").fingerprintCache().count, 0)
    }
}
