// The entries of a scan held compactly: each entry's fields in 80 bytes of plain words, its
// path as bytes in one shared buffer. An array of SyncEntry holds a String per path, a heap
// allocation of 32 bytes and more beside the entry itself: about 170 bytes a file, where this
// takes about 90 and the path's length. A scan of a million files is one of these.

/// Snapshot entries in order, packed; read as `SyncEntry` values.
public struct SyncEntryList: RandomAccessCollection, MutableCollection, Sendable, Equatable, ExpressibleByArrayLiteral {
    private var bodies: ContiguousArray<SyncEntry.Body> = []
    /// Each entry's path: the UTF-8 bytes of all of them, one after another.
    private var pathBytes: [UInt8] = []
    /// Where each entry's path ends in `pathBytes` (it starts where the one before ends).
    private var pathEnds: [Int] = []

    public init() {}

    public init(_ entries: some Sequence<SyncEntry>) {
        for entry in entries { append(entry) }
    }

    public init(arrayLiteral entries: SyncEntry...) {
        self.init(entries)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { bodies.count }

    public subscript(position: Int) -> SyncEntry {
        get { SyncEntry(path: path(at: position), body: bodies[position]) }
        set {
            bodies[position].rare = nil  // not held twice while the new body is stored
            bodies[position] = newValue.body
            if !pathEquals(position, newValue.path) { setPath(newValue.path, at: position) }
        }
    }

    /// The path of the entry at `position`, made as a String.
    public func path(at position: Int) -> String {
        withPathBytes(at: position) { String(decoding: $0, as: UTF8.self) }
    }

    /// Calls `body` with the UTF-8 bytes of the path at `position`, without making a String.
    public func withPathBytes<R>(at position: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        let end = pathEnds[position]
        let start = position == 0 ? 0 : pathEnds[position - 1]
        return try pathBytes.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[start..<end])) }
    }

    /// The order of the paths at `a` and `b` by their bytes: negative, 0 or positive.
    public func comparePaths(_ a: Int, _ b: Int) -> Int {
        withPathBytes(at: a) { first in withPathBytes(at: b) { second in ByteOrder.compare(first, second) } }
    }

    /// The order of the path at `position` and `path` by their bytes: negative, 0 or positive.
    public func comparePath(at position: Int, with path: String) -> Int {
        withPathBytes(at: position) { ByteOrder.compare($0, path) }
    }

    /// Whether the path at `position` is `path`.
    public func pathEquals(_ position: Int, _ path: String) -> Bool {
        comparePath(at: position, with: path) == 0
    }

    /// The entry at `position` with an empty path: its fields, read without making its path.
    public func pathless(at position: Int) -> SyncEntry {
        SyncEntry(path: "", body: bodies[position])
    }

    /// The size of the entry at `position`, read without making its path.
    public func size(at position: Int) -> Int64 { bodies[position].size }

    /// The digest of the entry at `position`, read without making its path.
    public func digest(at position: Int) -> SHA256Digest? {
        bodies[position].bits.contains(.hasDigest) ? bodies[position].digestValue : nil
    }

    /// Whether the entry at `position` is compared by its SHA-256 (known, or to come from its
    /// upload), read without making its path.
    public func isHashCompared(at position: Int) -> Bool {
        bodies[position].bits.hashCompared
    }

    /// Whether the hash of the entry at `position` is to come from its upload.
    public func hashToCome(at position: Int) -> Bool {
        bodies[position].bits.contains(.hashToCome)
    }

    /// Whether the entry at `position` is a local file there to upload, read without making its path.
    public func isLocalFile(at position: Int) -> Bool {
        let body = bodies[position]
        if let source = body.rare?.source {
            if case .file = source { return true }
            return false
        }
        return !body.bits.contains(.absent)
    }

    public mutating func reserveCapacity(_ entries: Int, pathBytes bytes: Int = 0) {
        bodies.reserveCapacity(entries)
        pathEnds.reserveCapacity(entries)
        if bytes > 0 { pathBytes.reserveCapacity(bytes) }
    }

    public mutating func append(_ entry: SyncEntry) {
        bodies.append(entry.body)
        var path = entry.path
        path.withUTF8 { pathBytes.append(contentsOf: $0) }
        pathEnds.append(pathBytes.count)
    }

    /// Sets the digest and size of the entry at `position` (what hashing it found).
    public mutating func setHashed(at position: Int, digest: SHA256Digest, size: Int64) {
        bodies[position].digestValue = digest
        bodies[position].bits.insert(.hasDigest)
        bodies[position].bits.remove(.hashToCome)
        bodies[position].size = size
    }

    /// Removes the entries at `positions`, keeping the order of the others; returns each old
    /// position's new one (a removed entry's: its successor's, or the new count).
    @discardableResult
    public mutating func remove(at positions: Set<Int>) -> [Int] {
        var moved = Array(indices)
        guard !positions.isEmpty else { return moved }
        var kept = SyncEntryList()
        kept.reserveCapacity(count - positions.count, pathBytes: pathBytes.count)
        for index in indices {
            moved[index] = kept.count
            if !positions.contains(index) { kept.appendCopy(of: index, from: self) }
        }
        self = kept
        return moved
    }

    /// Sorts the entries by their paths' bytes (stable); returns each old position's new one.
    @discardableResult
    public mutating func sortByPath() -> [Int] {
        let order = sortedByPath()
        var moved = Array(indices)
        var sorted = SyncEntryList()
        sorted.reserveCapacity(count, pathBytes: pathBytes.count)
        for index in order {
            moved[index] = sorted.count
            sorted.appendCopy(of: index, from: self)
        }
        self = sorted
        return moved
    }

    private mutating func appendCopy(of position: Int, from other: SyncEntryList) {
        bodies.append(other.bodies[position])
        other.withPathBytes(at: position) { pathBytes.append(contentsOf: $0) }
        pathEnds.append(pathBytes.count)
    }

    /// The positions in byte order of their paths, equal paths in position order; nothing is
    /// sorted when the paths already are (a scan's are).
    public func sortedByPath() -> [Int] {
        ByteOrder.sortingIndices(count: count, compare: comparePaths) ?? Array(indices)
    }

    /// A path changed in place: rare (a test's edit); the buffer is rebuilt.
    private mutating func setPath(_ path: String, at position: Int) {
        var rebuilt = SyncEntryList()
        rebuilt.reserveCapacity(count, pathBytes: pathBytes.count + path.utf8.count)
        for index in indices {
            if index == position {
                rebuilt.append(SyncEntry(path: path, body: bodies[index]))
            } else {
                rebuilt.appendCopy(of: index, from: self)
            }
        }
        self = rebuilt
    }

    public static func == (a: SyncEntryList, b: SyncEntryList) -> Bool {
        a.count == b.count && a.indices.allSatisfy { a[$0] == b[$0] }
    }
}
