// The marker codec: the one compressed file at the remote root that every sync run which
// changed something writes last and restore reads. It holds a format version, the profile's
// groups and each hash-compared file's SHA-256, and nothing volatile: its bytes are a pure
// function of its content, so comparing two markers' SHA-256 tells whether the backup changed.
//
// Layout: "BKMARK", one format byte, then a zlib stream of UTF-8 lines, each ending in "\n":
//   W <writer id>                        format 2 only, the first line: who wrote the marker
//   G <order> <0|1 required> <name>      a group, in the profile's order
//   P <pattern>                          a pattern of the group above
//   H <64 lowercase hex> <path>          a file's SHA-256, sorted by the path's UTF-8 bytes
// The last field of a line is escaped: "\\" for a backslash, "\n" for a line feed; every other
// byte (tabs, spaces, any Unicode) is written as is. A line format rather than JSON because it
// is deterministic by construction and several times faster for 100,000+ files.
//
// Format 1 has no W line; format 2 is format 1 with it. A marker without a writer is still
// written as format 1, byte for byte what earlier versions wrote; both formats are read.

import BackupEngine
import Foundation

/// One restore group of a profile, as the marker records it.
public struct MarkerGroup: Sendable, Equatable, Codable {
    public var name: String
    /// Whether restore must place this group before any optional one.
    public var required: Bool
    /// Gitignore-style patterns (see `PathPattern`), `!` negating, as in a `PatternList`.
    public var patterns: [String]
    /// Lower orders are tried first by `Marker.group(for:)` and restored first.
    public var order: Int

    public init(name: String, required: Bool, patterns: [String], order: Int) {
        self.name = name
        self.required = required
        self.patterns = patterns
        self.order = order
    }
}

/// Why a marker cannot be read or written.
public enum MarkerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes do not start with the marker's magic.
    case notAMarker
    /// Written in a format newer than this version reads.
    case newerFormat(found: Int, readable: Int)
    /// The magic is right but the rest cannot be read; the detail says what is wrong.
    case damaged(String)
    /// `encoded()` refused content that `decode` would reject; the detail says which.
    case invalidContent(String)

    public var description: String {
        switch self {
        case .notAMarker:
            return "not a backup marker"
        case .newerFormat(let found, let readable):
            return "written by a newer version of backup (format \(found); this version reads \(readable)): upgrade backup"
        case .damaged(let detail):
            return "damaged: \(detail)"
        case .invalidContent(let detail):
            return "cannot write the marker: \(detail)"
        }
    }
}

/// The marker's content: the profile's groups and the SHA-256 of every hash-compared file.
public struct Marker: Sendable, Equatable {
    /// The newest format this version writes and reads (2: with a writer id; a marker
    /// without one is written as format 1).
    public static let formatVersion = 2
    /// The first bytes of every marker, before the format byte.
    public static let magic: [UInt8] = Array("BKMARK".utf8)
    /// The default bound on a marker's decompressed content: 1 GiB.
    public static let defaultMaxContentSize = Zlib.defaultMaxOutputSize
    // zlib's default. Measured on 200,000 entries (25.7 MB of lines): level 1 takes ~0.2 s and
    // gives 9.39 MB, level 6 ~0.5 s and 8.96 MB, level 9 ~0.76 s and 8.80 MB; the hex hashes
    // barely compress at any level. Changing it changes every marker's bytes.
    static let compressionLevel: Int32 = 6

    /// The profile's groups, in the profile's order.
    public var groups: [MarkerGroup] {
        didSet { classifier = GroupClassifier(groups) }
    }
    /// Relative path → SHA-256 as 64 lowercase hex characters.
    public var hashes: [String: String]
    /// The writer id of the profile that wrote it (format 2); nil for a marker written before
    /// markers carried one.
    public var writer: String?
    // Compiled once per change of `groups`, not per `group(for:)` call.
    private var classifier: GroupClassifier

    public init(groups: [MarkerGroup] = [], hashes: [String: String] = [:], writer: String? = nil) {
        self.groups = groups
        self.hashes = hashes
        self.writer = writer
        self.classifier = GroupClassifier(groups)
    }

    public static func == (lhs: Marker, rhs: Marker) -> Bool {
        lhs.groups == rhs.groups && lhs.hashes == rhs.hashes && lhs.writer == rhs.writer
    }

    /// The group `path` belongs to: the first group by `order` (ties: array order) whose
    /// patterns match it; nil when none does. A group with an invalid pattern matches nothing
    /// (`encoded()` and `decode` refuse such groups).
    public func group(for path: String) -> MarkerGroup? {
        if classifier.candidates.isEmpty { return nil }
        return SplitPath(path).withSegments { split in
            for candidate in classifier.candidates where candidate.patterns.matches(split) {
                return groups[candidate.index]
            }
            return nil
        }
    }

    /// The marker's bytes: magic, format byte, compressed content. The same groups and hashes
    /// always give the same bytes (for one zlib build).
    ///
    /// Throws `.invalidContent` for anything `decode` would reject, so every written marker reads back.
    public func encoded() throws(MarkerError) -> Data {
        let content = try canonicalContent()
        let compressed: Data
        do {
            compressed = try Zlib.compress(Data(content), level: Self.compressionLevel)
        } catch {
            throw .invalidContent(error.description)
        }
        var data = Data(capacity: Self.magic.count + 1 + compressed.count)
        data.append(contentsOf: Self.magic)
        data.append(writer == nil ? 1 : 2)
        data.append(compressed)
        return data
    }

    /// The SHA-256 (lowercase hex) of the uncompressed canonical content.
    ///
    /// Equal for equal markers even across zlib versions, whose compressed bytes may differ;
    /// prefer it to hashing `encoded()` when comparing markers written on different machines.
    public func contentDigest() throws(MarkerError) -> String {
        let content = try canonicalContent()
        return content.withUnsafeBytes { bytes in
            var hasher = SHA256Hasher()
            hasher.update(bytes)
            return hasher.finalizeHex()
        }
    }

    /// The most content a marker of a backup with `listedFiles` files may hold once
    /// decompressed: 1 MiB for the groups and 1 KiB per file (a hash line is 68 bytes plus
    /// its path). A marker past it is damaged or hostile, and refused before it is inflated
    /// further.
    public static func contentLimit(listedFiles: Int) -> Int {
        Probe.markerSizeLimit(listedFiles: listedFiles)
    }

    /// Reads a marker, refusing content larger than `maxContentSize` once decompressed.
    public static func decode(_ data: Data, maxContentSize: Int = defaultMaxContentSize) throws(MarkerError) -> Marker {
        guard data.count >= magic.count, data.prefix(magic.count).elementsEqual(magic) else {
            throw .notAMarker
        }
        guard data.count > magic.count else { throw .damaged("truncated after the header") }
        let version = Int(data[data.startIndex + magic.count])
        guard version <= formatVersion else { throw .newerFormat(found: version, readable: formatVersion) }
        guard version >= 1 else { throw .damaged("unknown format \(version)") }
        let content: Data
        do {
            content = try Zlib.decompress(data.dropFirst(magic.count + 1), maxOutputSize: maxContentSize)
        } catch {
            throw .damaged(error.description)
        }
        let result = content.withUnsafeBytes { raw in
            Result { () throws(MarkerError) -> Marker in try parse(raw.bindMemory(to: UInt8.self), version: version) }
        }
        return try result.get()
    }

    // MARK: Writing

    private func canonicalContent() throws(MarkerError) -> [UInt8] {
        if let problem = Self.groupsProblem(groups) { throw .invalidContent(problem) }
        var out: [UInt8] = []
        out.reserveCapacity(hashes.count * 120 + 256)
        if let writer {
            if let problem = Self.writerProblem(writer) { throw .invalidContent(problem) }
            out.append(UInt8(ascii: "W"))
            out.append(space)
            Self.appendEscaped(writer, to: &out)
            out.append(newline)
        }
        for group in groups {
            out.append(contentsOf: "G \(group.order) \(group.required ? 1 : 0) ".utf8)
            Self.appendEscaped(group.name, to: &out)
            out.append(newline)
            for pattern in group.patterns {
                out.append(UInt8(ascii: "P"))
                out.append(space)
                Self.appendEscaped(pattern, to: &out)
                out.append(newline)
            }
        }
        // Sorted by UTF-8 bytes, not String's `<`, whose order follows Unicode normalization
        // (and so the stdlib's Unicode version). All paths go into one buffer and the sort moves
        // plain offsets: no allocation per path and no reference counting while sorting.
        var blob: [UInt8] = []
        blob.reserveCapacity(hashes.count * 64)
        var spans: [PathSpan] = []
        spans.reserveCapacity(hashes.count)
        var values: [String] = []
        values.reserveCapacity(hashes.count)
        for (path, hash) in hashes {
            let start = blob.count
            blob.append(contentsOf: path.utf8)
            spans.append(PathSpan(start: start, count: blob.count - start, value: values.count))
            values.append(hash)
        }
        blob.withUnsafeBufferPointer { paths in
            spans.sort { PathSpan.precedes($0, $1, in: paths) }
        }
        for span in spans {
            let pathBytes = blob[span.start..<span.start + span.count]
            let hashBytes = Array(values[span.value].utf8)
            guard hashBytes.count == 64, hashBytes.allSatisfy(isLowercaseHex) else {
                throw .invalidContent(
                    "the hash of \(quoted(String(decoding: pathBytes, as: UTF8.self))) is not 64 lowercase hex characters")
            }
            if let problem = pathBytes.withUnsafeBufferPointer(pathProblem) {
                throw .invalidContent("path \(quoted(String(decoding: pathBytes, as: UTF8.self))): \(problem)")
            }
            out.append(UInt8(ascii: "H"))
            out.append(space)
            out.append(contentsOf: hashBytes)
            out.append(space)
            Self.appendEscaped(pathBytes, to: &out)
            out.append(newline)
        }
        return out
    }

    private static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        appendEscaped(text.utf8, to: &out)
    }

    private static func appendEscaped(_ bytes: some Collection<UInt8>, to out: inout [UInt8]) {
        guard bytes.contains(where: { $0 == backslash || $0 == newline }) else {
            out.append(contentsOf: bytes)
            return
        }
        for byte in bytes {
            switch byte {
            case backslash: out.append(contentsOf: [backslash, backslash])
            case newline: out.append(contentsOf: [backslash, UInt8(ascii: "n")])
            default: out.append(byte)
            }
        }
    }

    // MARK: Reading

    private static func parse(_ content: UnsafeBufferPointer<UInt8>, version: Int) throws(MarkerError) -> Marker {
        guard let base = content.baseAddress, !content.isEmpty else {
            if version >= 2 { throw .damaged("a format 2 marker without its writer record") }
            return Marker()
        }
        guard content[content.count - 1] == newline else {
            throw .damaged("the content does not end with a line break")
        }
        var groups: [MarkerGroup] = []
        var hashes: [String: String] = [:]
        var writer: String?
        // A hash line takes at least 68 bytes, so this never reserves more than the content
        // can hold, however many short lines a hostile marker packs in.
        hashes.reserveCapacity(content.count / 68)
        var inHashes = false
        var lineNumber = 0
        var start = 0
        while start < content.count {
            lineNumber += 1
            let remaining = content.count - start
            guard let found = memchr(base + start, Int32(newline), remaining) else { break }
            let end = start + (UnsafeRawPointer(found) - UnsafeRawPointer(base + start))
            let line = UnsafeBufferPointer(rebasing: content[start..<end])
            start = end + 1
            func fail(_ detail: String) -> MarkerError { .damaged("line \(lineNumber): \(detail)") }

            guard line.count >= 2, line[1] == space else { throw fail("unreadable record") }
            switch line[0] {
            case UInt8(ascii: "H"):
                inHashes = true
                guard line.count >= 67, line[66] == space else { throw fail("unreadable hash record") }
                let hex = UnsafeBufferPointer(rebasing: line[2..<66])
                guard hex.allSatisfy(isLowercaseHex) else {
                    throw fail("hash is not 64 lowercase hex characters")
                }
                let path = try unescaped(UnsafeBufferPointer(rebasing: line[67...]), fail)
                if let problem = path.withUnsafeBufferPointer(pathProblem) {
                    throw fail("path \(quoted(String(decoding: path, as: UTF8.self))): \(problem)")
                }
                guard let pathString = String(validating: path, as: UTF8.self) else {
                    throw fail("path is not valid UTF-8")
                }
                if hashes.updateValue(String(decoding: hex, as: UTF8.self), forKey: pathString) != nil {
                    throw fail("path \(quoted(pathString)) is listed twice")
                }
            case UInt8(ascii: "W") where version >= 2:
                guard lineNumber == 1 else { throw fail("the writer record is not the first line") }
                let name = try text(unescaped(UnsafeBufferPointer(rebasing: line[2...]), fail), fail)
                if let problem = writerProblem(name) { throw fail(problem) }
                writer = name
            case UInt8(ascii: "G"):
                guard !inHashes else { throw fail("group after the hashes") }
                groups.append(try parseGroup(UnsafeBufferPointer(rebasing: line[2...]), fail))
            case UInt8(ascii: "P"):
                guard !inHashes, !groups.isEmpty else { throw fail("pattern outside a group") }
                let pattern = try text(unescaped(UnsafeBufferPointer(rebasing: line[2...]), fail), fail)
                groups[groups.count - 1].patterns.append(pattern)
            default:
                throw fail("unknown record")
            }
        }
        if let problem = groupsProblem(groups) { throw .damaged(problem) }
        if version >= 2, writer == nil { throw .damaged("a format 2 marker without its writer record") }
        return Marker(groups: groups, hashes: hashes, writer: writer)
    }

    /// "<order> <0|1> <name>"
    private static func parseGroup(
        _ fields: UnsafeBufferPointer<UInt8>, _ fail: (String) -> MarkerError
    ) throws(MarkerError) -> MarkerGroup {
        guard let orderEnd = fields.firstIndex(of: space),
              let order = Int(String(decoding: UnsafeBufferPointer(rebasing: fields[..<orderEnd]), as: UTF8.self)),
              fields.count >= orderEnd + 3,
              fields[orderEnd + 2] == space
        else { throw fail("unreadable group record") }
        let required: Bool
        switch fields[orderEnd + 1] {
        case UInt8(ascii: "0"): required = false
        case UInt8(ascii: "1"): required = true
        default: throw fail("unreadable group record")
        }
        let name = try text(unescaped(UnsafeBufferPointer(rebasing: fields[(orderEnd + 3)...]), fail), fail)
        return MarkerGroup(name: name, required: required, patterns: [], order: order)
    }

    private static func unescaped(
        _ field: UnsafeBufferPointer<UInt8>, _ fail: (String) -> MarkerError
    ) throws(MarkerError) -> [UInt8] {
        guard field.contains(backslash) else { return Array(field) }
        var out: [UInt8] = []
        out.reserveCapacity(field.count)
        var index = 0
        while index < field.count {
            let byte = field[index]
            index += 1
            guard byte == backslash else {
                out.append(byte)
                continue
            }
            guard index < field.count else { throw fail("ends with a lone backslash") }
            switch field[index] {
            case backslash: out.append(backslash)
            case UInt8(ascii: "n"): out.append(newline)
            default: throw fail("unknown escape")
            }
            index += 1
        }
        return out
    }

    private static func text(_ bytes: [UInt8], _ fail: (String) -> MarkerError) throws(MarkerError) -> String {
        guard let string = String(validating: bytes, as: UTF8.self) else { throw fail("text is not valid UTF-8") }
        return string
    }

    // MARK: Validation shared by writing and reading

    /// Why `writer` cannot be a marker's writer id, or nil when it can.
    private static func writerProblem(_ writer: String) -> String? {
        if writer.isEmpty { return "the writer id is empty" }
        if writer.utf8.count > 256 { return "the writer id is longer than 256 bytes" }
        return nil
    }

    /// Why `groups` cannot be in a marker, or nil when they can.
    private static func groupsProblem(_ groups: [MarkerGroup]) -> String? {
        var names = Set<String>()
        for group in groups {
            if group.name.isEmpty { return "a group has an empty name" }
            if !names.insert(group.name).inserted { return "two groups are named \(quoted(group.name))" }
            do {
                _ = try PatternList(group.patterns)
            } catch {
                return "group \(quoted(group.name)): \(error)"
            }
        }
        return nil
    }
}

/// The groups of a marker compiled for matching, tried in `order` (ties: array order).
private struct GroupClassifier: Sendable {
    var candidates: [(index: Int, patterns: PatternList)]

    init(_ groups: [MarkerGroup]) {
        let indices = groups.indices.sorted { (groups[$0].order, $0) < (groups[$1].order, $1) }
        candidates = indices.compactMap { index in
            (try? PatternList(groups[index].patterns)).map { (index: index, patterns: $0) }
        }
    }
}

private let newline = UInt8(ascii: "\n")
private let space = UInt8(ascii: " ")
private let backslash = UInt8(ascii: "\\")

/// One path of `canonicalContent`'s buffer and the index of its hash.
private struct PathSpan {
    var start: Int
    var count: Int
    var value: Int

    /// memcmp order, the shorter first on a common prefix.
    @inline(__always)
    static func precedes(_ lhs: PathSpan, _ rhs: PathSpan, in paths: UnsafeBufferPointer<UInt8>) -> Bool {
        let common = min(lhs.count, rhs.count)
        if common > 0, let base = paths.baseAddress {
            let order = memcmp(base + lhs.start, base + rhs.start, common)
            if order != 0 { return order < 0 }
        }
        return lhs.count < rhs.count
    }
}

private func isLowercaseHex(_ byte: UInt8) -> Bool {
    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
}

/// Why `path` cannot be a file path in a marker, or nil when it can. Restore places files by
/// these paths, so anything that could climb out of the target is refused.
private func pathProblem(_ path: UnsafeBufferPointer<UInt8>) -> String? {
    if path.isEmpty { return "empty path" }
    if path[0] == UInt8(ascii: "/") { return "absolute path" }
    var segmentStart = 0
    for index in 0...path.count {
        if index < path.count {
            let byte = path[index]
            if byte == 0 { return "contains a NUL byte" }
            if byte != UInt8(ascii: "/") { continue }
        }
        let segment = UnsafeBufferPointer(rebasing: path[segmentStart..<index])
        if segment.isEmpty { return "empty path segment" }
        if segment.count <= 2 && segment.allSatisfy({ $0 == UInt8(ascii: ".") }) { return "\".\" or \"..\" segment" }
        segmentStart = index + 1
    }
    return nil
}

private func quoted(_ text: String) -> String {
    "\"" + text.replacingOccurrences(of: "\n", with: "\\n") + "\""
}
