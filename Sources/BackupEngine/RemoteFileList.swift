// A remote's listing held compactly: each file's path and version id as bytes in one buffer,
// its size and lengths in 24 bytes beside them. As an array of RemoteFile a listing costs a
// String per path and per id, heap allocations of 32 bytes and more each: about 110 bytes a
// file, where this takes 24 and the bytes. A sync holds its listing for the whole run.

/// Listed files, packed; read as `RemoteFile` values.
public struct RemoteFileList: RandomAccessCollection, Sendable, Equatable, ExpressibleByArrayLiteral {
    private struct Record: Sendable {
        /// Where the file's bytes (its path, then its id) end in `bytes`.
        var end: Int
        var size: Int64
        var pathLength: UInt32
        /// The id's length, `Record.noId` for none; the top bit: a foreign spelling.
        var idField: UInt32

        static let noId: UInt32 = 0x7fff_ffff
        static let foreign: UInt32 = 0x8000_0000
        var idLength: Int? { idField & ~Self.foreign == Self.noId ? nil : Int(idField & ~Self.foreign) }
    }

    private var bytes: [UInt8] = []
    private var records: [Record] = []

    public init() {}

    public init(_ files: some Sequence<RemoteFile>) {
        for file in files { append(file) }
    }

    public init(arrayLiteral files: RemoteFile...) {
        self.init(files)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { records.count }

    public subscript(position: Int) -> RemoteFile {
        RemoteFile(
            path: path(at: position), size: records[position].size, remoteId: remoteId(at: position),
            foreignSpelling: foreignSpelling(at: position))
    }

    public mutating func reserveCapacity(_ files: Int) {
        records.reserveCapacity(files)
    }

    /// Removes every file (keeping the storage for more, if asked).
    public mutating func removeAll(keepingCapacity: Bool = false) {
        bytes.removeAll(keepingCapacity: keepingCapacity)
        records.removeAll(keepingCapacity: keepingCapacity)
    }

    public mutating func append(_ file: RemoteFile) {
        var path = file.path
        path.withUTF8 { path in
            if var id = file.remoteId {
                id.withUTF8 { append(path: path, size: file.size, remoteId: $0, foreignSpelling: file.foreignSpelling) }
            } else {
                append(path: path, size: file.size, remoteId: nil, foreignSpelling: file.foreignSpelling)
            }
        }
    }

    /// Appends a file given as the bytes of its path and id (UTF-8), without making Strings.
    public mutating func append(
        path: UnsafeBufferPointer<UInt8>, size: Int64, remoteId: UnsafeBufferPointer<UInt8>?, foreignSpelling: Bool = false
    ) {
        bytes.append(contentsOf: path)
        var idField = Record.noId
        if let remoteId, remoteId.count < Int(Record.noId) {
            bytes.append(contentsOf: remoteId)
            idField = UInt32(remoteId.count)
        }
        if foreignSpelling { idField |= Record.foreign }
        records.append(Record(end: bytes.count, size: size, pathLength: UInt32(path.count), idField: idField))
    }

    private func start(_ position: Int) -> Int { position == 0 ? 0 : records[position - 1].end }

    /// Calls `body` with the UTF-8 bytes of the path at `position`, without making a String.
    public func withPathBytes<R>(at position: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        let start = start(position)
        return try bytes.withUnsafeBufferPointer {
            try body(UnsafeBufferPointer(rebasing: $0[start..<(start + Int(records[position].pathLength))]))
        }
    }

    public func path(at position: Int) -> String {
        withPathBytes(at: position) { String(decoding: $0, as: UTF8.self) }
    }

    public func size(at position: Int) -> Int64 { records[position].size }

    public func remoteId(at position: Int) -> String? {
        guard let length = records[position].idLength else { return nil }
        let end = records[position].end
        return bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[(end - length)..<end]), as: UTF8.self) }
    }

    public func hasRemoteId(at position: Int) -> Bool { records[position].idLength != nil }

    /// Whether the id at `position` is `id` (both nil included), compared without making a String.
    public func remoteId(at position: Int, is id: String?) -> Bool {
        guard let length = records[position].idLength, var id else { return id == nil && records[position].idLength == nil }
        let end = records[position].end
        return bytes.withUnsafeBufferPointer { all in
            id.withUTF8 { ByteOrder.compare(UnsafeBufferPointer(rebasing: all[(end - length)..<end]), $0) == 0 }
        }
    }

    public func foreignSpelling(at position: Int) -> Bool { records[position].idField & Record.foreign != 0 }

    /// The order of the paths at `a` and `b` by their bytes: negative, 0 or positive.
    public func comparePaths(_ a: Int, _ b: Int) -> Int {
        withPathBytes(at: a) { first in withPathBytes(at: b) { second in ByteOrder.compare(first, second) } }
    }

    /// The order of the path at `position` and `path` by their bytes: negative, 0 or positive.
    public func comparePath(at position: Int, with path: String) -> Int {
        withPathBytes(at: position) { ByteOrder.compare($0, path) }
    }

    /// Appends `other`'s files (grown as appends grow: a walk appends one folder at a time,
    /// and reserving each time would copy the whole list per folder).
    public mutating func append(contentsOf other: RemoteFileList) {
        for index in other.indices { appendCopy(of: index, from: other) }
    }

    /// The list without files listed again under a path listed before (the first listed is
    /// kept; foreign spellings are never merged), in listed order; and the paths left out, in
    /// path order. Repeats are found by sorting positions, not with a set of every path.
    public func removingRepeatedPaths() -> (RemoteFileList, [String]) {
        let order = sortedIndicesByPath()
        // A position repeats the path of the plain (not foreign) file before it in path order,
        // which is listed before it: the sort keeps listed order among equal paths.
        var repeats: Set<Int> = []
        var repeated: [String] = []
        var lastPlain: Int?
        for index in order where !foreignSpelling(at: index) {
            if let last = lastPlain, comparePaths(last, index) == 0 {
                repeats.insert(index)
                repeated.append(path(at: index))
            } else {
                lastPlain = index
            }
        }
        guard !repeats.isEmpty else { return (self, []) }
        return (removing(where: repeats.contains), repeated)
    }

    /// The files at the positions `isRemoved` does not pick, in order (the others' bytes are copied once).
    public func removing(where isRemoved: (Int) -> Bool) -> RemoteFileList {
        var kept = RemoteFileList()
        kept.records.reserveCapacity(count)
        kept.bytes.reserveCapacity(bytes.count)
        for index in indices where !isRemoved(index) { kept.appendCopy(of: index, from: self) }
        return kept
    }

    /// The positions in byte order of their paths, equal paths in listed order.
    public func sortedIndicesByPath() -> [Int] {
        ByteOrder.sortingIndices(count: count, compare: comparePaths) ?? Array(indices)
    }

    /// The files sorted by their paths' bytes, equal paths in listed order; the list itself
    /// when it already is (most remotes list in that order).
    public func sortedByPath() -> RemoteFileList {
        guard let order = ByteOrder.sortingIndices(count: count, compare: comparePaths) else { return self }
        var sorted = RemoteFileList()
        sorted.records.reserveCapacity(count)
        sorted.bytes.reserveCapacity(bytes.count)
        for index in order { sorted.appendCopy(of: index, from: self) }
        return sorted
    }

    private mutating func appendCopy(of position: Int, from other: RemoteFileList) {
        let record = other.records[position]
        let start = other.start(position)
        other.bytes.withUnsafeBufferPointer { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: $0[start..<record.end])) }
        records.append(Record(end: bytes.count, size: record.size, pathLength: record.pathLength, idField: record.idField))
    }

    public static func == (a: RemoteFileList, b: RemoteFileList) -> Bool {
        a.elementsEqual(b)
    }
}
