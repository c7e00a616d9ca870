// Paths held compactly: their UTF-8 bytes one after another in one buffer. A report of a first
// sync names every file it uploaded; as an array of Strings that is a heap allocation of 48
// bytes and more per file, kept to the end of the run.

/// A list of paths, packed; read as Strings.
public struct PathList: RandomAccessCollection, Sendable, Hashable, ExpressibleByArrayLiteral, CustomStringConvertible {
    private var bytes: [UInt8] = []
    /// Where each path ends in `bytes` (it starts where the one before ends).
    private var ends: [Int] = []

    public init() {}

    public init(_ paths: some Sequence<String>) {
        for path in paths { append(path) }
    }

    public init(arrayLiteral paths: String...) {
        self.init(paths)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { ends.count }

    public subscript(position: Int) -> String {
        let start = position == 0 ? 0 : ends[position - 1]
        return bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[start..<ends[position]]), as: UTF8.self) }
    }

    public mutating func append(_ path: String) {
        var path = path
        path.withUTF8 { bytes.append(contentsOf: $0) }
        ends.append(bytes.count)
    }

    public mutating func append(contentsOf paths: some Sequence<String>) {
        for path in paths { append(path) }
    }

    public var description: String { Array(self).description }
}
