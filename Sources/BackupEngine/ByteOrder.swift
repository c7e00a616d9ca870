// Paths compared by their UTF-8 bytes (the order SQLite's BINARY collation and `memcmp`
// use), not by Swift's Unicode-aware String ordering: cheaper, and two names that differ
// only in normalisation stay two different files, as they are on disk.

#if canImport(Glibc)
import Glibc
#endif

/// Byte-wise ordering of Strings.
public enum ByteOrder {
    /// <0, 0 or >0 as `a` sorts before, with, or after `b`.
    public static func compare(_ a: String, _ b: String) -> Int {
        // Native strings hand out their UTF-8 without a copy; others take the slow road.
        let fast = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y -> Int in
                let common = min(x.count, y.count)
                if common > 0, let p = x.baseAddress, let q = y.baseAddress {
                    let result = memcmp(p, q, common)
                    if result != 0 { return Int(result) }
                }
                return x.count - y.count
            }
        }
        if let result = fast ?? nil { return result }
        if a.utf8.elementsEqual(b.utf8) { return 0 }
        return a.utf8.lexicographicallyPrecedes(b.utf8) ? -1 : 1
    }

    /// <0, 0 or >0 as the bytes `a` sort before, with, or after `b`.
    public static func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
        let common = min(a.count, b.count)
        if common > 0, let p = a.baseAddress, let q = b.baseAddress {
            let result = memcmp(p, q, common)
            if result != 0 { return Int(result) }
        }
        return a.count - b.count
    }

    /// `items` sorted by the bytes of `key`; a sorted input is returned as it is.
    public static func sorted<T>(_ items: [T], by key: (T) -> String) -> [T] {
        if isSorted(items.lazy.map(key)) { return items }
        return items.sorted { compare(key($0), key($1)) < 0 }
    }

    /// Sorts `items` in place by the bytes of `key` (a sorted input is only checked).
    public static func sort<T>(_ items: inout [T], by key: (T) -> String) {
        if isSorted(items.lazy.map(key)) { return }
        items.sort { compare(key($0), key($1)) < 0 }
    }

    /// The indices of `keys` in byte order of the keys, equal keys in index order.
    public static func sortedIndices(_ keys: [String]) -> [Int] {
        sortedIndices(count: keys.count) { keys[$0] }
    }

    /// The indices `0..<count` in byte order of `key(index)`, equal keys in index order:
    /// sorted in place, with no array of the keys made for it (a large listing's paths are
    /// read where they are).
    public static func sortedIndices(count: Int, key: (Int) -> String) -> [Int] {
        sortingIndices(count: count) { compare(key($0), key($1)) } ?? Array(0..<count)
    }

    /// The indices `0..<count` in the order `compare` gives (<0, 0 or >0, as `compare(a, b)`
    /// says a sorts before, with or after b), equal ones in index order; nil when they are in
    /// that order already (checked with one comparison per neighbour, nothing made).
    public static func sortingIndices(count: Int, compare: (Int, Int) -> Int) -> [Int]? {
        if (1..<max(count, 1)).allSatisfy({ compare($0 - 1, $0) <= 0 }) { return nil }
        var indices = Array(0..<count)
        indices.sort { a, b in
            let order = compare(a, b)
            return order != 0 ? order < 0 : a < b
        }
        return indices
    }

    /// <0, 0 or >0 as the bytes `a` sort before, with, or after the UTF-8 of `b`.
    public static func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: String) -> Int {
        var b = b
        return b.withUTF8 { compare(a, $0) }
    }

    private static func isSorted<S: Sequence>(_ keys: S) -> Bool where S.Element == String {
        var previous: String?
        for key in keys {
            if let previous, compare(previous, key) > 0 { return false }
            previous = key
        }
        return true
    }
}
