// The scan's fingerprint cache, as compact as a lookup by path allows: every path in one byte
// buffer, sorted by bytes (the state's order), with fixed-size records beside it. As a
// dictionary of Strings the cache of a large tree cost about 280 bytes a file, held through
// the whole scan; this costs the path's bytes plus about 64.

#if canImport(Glibc)
import Glibc
#endif

/// Fingerprints by relative path, looked up by bisection.
public struct FingerprintCache: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    private var bytes: [UInt8] = []
    /// Where each path ends in `bytes` (it starts where the one before ends).
    private var ends: [Int] = []
    private var prints: [Fingerprint] = []

    /// An empty cache.
    public init() {}

    /// The cache holding `fingerprints`.
    public init(_ fingerprints: [String: Fingerprint]) {
        let sorted = fingerprints.sorted { ByteOrder.compare($0.key, $1.key) < 0 }
        reserveCapacity(sorted.count, pathBytes: sorted.reduce(0) { $0 + $1.key.utf8.count })
        for (path, print) in sorted {
            var path = path
            path.withUTF8 { append(path: $0, print) }
        }
    }

    public init(dictionaryLiteral elements: (String, Fingerprint)...) {
        self.init(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    mutating func reserveCapacity(_ count: Int, pathBytes: Int) {
        bytes.reserveCapacity(pathBytes)
        ends.reserveCapacity(count)
        prints.reserveCapacity(count)
    }

    /// Appends a path that sorts after every path already held; a path out of order is
    /// ignored (the state's primary key never repeats one).
    mutating func append(path: UnsafeBufferPointer<UInt8>, _ print: Fingerprint) {
        if !ends.isEmpty {
            let inOrder = bytes.withUnsafeBufferPointer { all in ByteOrder.compare(span(ends.count - 1, in: all), path) < 0 }
            guard inOrder else { return }
        }
        bytes.append(contentsOf: path)
        ends.append(bytes.count)
        prints.append(print)
    }

    public var count: Int { prints.count }
    public var isEmpty: Bool { prints.isEmpty }

    /// The fingerprint of `path`, if the cache holds one.
    public subscript(path: String) -> Fingerprint? {
        index(of: path).map { prints[$0] }
    }

    /// The position of `path`'s fingerprint, for `fingerprint(at:)`; nil when none is held.
    public func index(of path: String) -> Int? {
        var path = path
        return path.withUTF8 { key in
            bytes.withUnsafeBufferPointer { all -> Int? in
                let index = lowerBound(key, in: all)
                return index < count && ByteOrder.compare(span(index, in: all), key) == 0 ? index : nil
            }
        }
    }

    /// The fingerprint at a position `index(of:)` gave.
    public func fingerprint(at index: Int) -> Fingerprint { prints[index] }

    /// Every path held, with its fingerprint, in byte order.
    public func forEach(_ body: (String, Fingerprint) throws -> Void) rethrows {
        for index in prints.indices { try body(path(at: index), prints[index]) }
    }

    /// Every path's bytes (no String made) with its fingerprint, in byte order.
    public func forEachBytes(_ body: (UnsafeBufferPointer<UInt8>, Fingerprint) throws -> Void) rethrows {
        try bytes.withUnsafeBufferPointer { all in
            for index in prints.indices { try body(span(index, in: all), prints[index]) }
        }
    }

    /// The paths that start with `prefix`, with their fingerprints, in byte order (found by
    /// bisection: the paths below one folder are a run of the sorted cache).
    public func forEach(withPrefix prefix: String, _ body: (String, Fingerprint) throws -> Void) rethrows {
        var prefix = prefix
        let range = prefix.withUTF8 { key in
            bytes.withUnsafeBufferPointer { all -> Range<Int> in
                let start = lowerBound(key, in: all)
                var end = start
                while end < count {
                    let path = span(end, in: all)
                    guard path.count >= key.count, ByteOrder.compare(UnsafeBufferPointer(rebasing: path[..<key.count]), key) == 0 else { break }
                    end += 1
                }
                return start..<end
            }
        }
        for index in range { try body(path(at: index), prints[index]) }
    }

    /// The cache as a dictionary (tests, and callers that merge it).
    public var dictionary: [String: Fingerprint] {
        var result: [String: Fingerprint] = [:]
        result.reserveCapacity(count)
        forEach { result[$0] = $1 }
        return result
    }

    public static func == (a: FingerprintCache, b: FingerprintCache) -> Bool {
        a.bytes == b.bytes && a.ends == b.ends && a.prints == b.prints
    }

    private func path(at index: Int) -> String {
        let start = index == 0 ? 0 : ends[index - 1]
        return String(decoding: bytes[start..<ends[index]], as: UTF8.self)
    }

    /// The bytes of path `index` within `all` (this cache's buffer).
    private func span(_ index: Int, in all: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: all[(index == 0 ? 0 : ends[index - 1])..<ends[index]])
    }

    /// The first index whose path does not sort before `key`.
    private func lowerBound(_ key: UnsafeBufferPointer<UInt8>, in all: UnsafeBufferPointer<UInt8>) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if ByteOrder.compare(span(middle, in: all), key) < 0 { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
