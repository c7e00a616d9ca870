// The marker codec: the one compressed file at the remote root that every sync run which
// changed something writes last and restore reads. It holds a format version, the profile's
// groups, each hash-compared file's SHA-256 and (format 3) every entry of the tree with its
// metadata, and nothing volatile: its bytes are a pure function of its content, so comparing
// two markers' SHA-256 tells whether the backup changed.
//
// Layout: "BKMARK", one format byte, then a zlib stream of UTF-8 lines, each ending in "\n":
//   W <writer id>                        formats 2 and 3, the first line: who wrote the marker
//   G <order> <0|1 required> <name>      a group, in the profile's order
//   P <pattern>                          a pattern of the group above
//   H <64 lowercase hex> <path>          formats 1 and 2: a file's SHA-256
// Format 3 has no H lines; after the groups come the entries, one line each (two for links):
//   F <size> <hash or -> <meta> <path>   a regular file, "-" when it is size-compared
//   K <size> <hash or -> <meta> <path>   a hard link, followed by
//   T <earlier path>                       the F entry it is another name of
//   L <meta> <path>                      a symbolic link, followed by
//   T <target>                             its text, byte-exact: data, never a path
//   D <meta> <path>                      a folder
// where <meta> is "<mode in octal> <mtime ns> <uid> <gid> <user> <group>": decimal numbers
// without leading zeros (the mtime negative before 1970); a user or group name is "-" when
// there is none, otherwise escaped with "\\" for a backslash, "\s" for a space, "\n" for a line
// feed, and "\-" for a name that is exactly "-". H lines and entries are sorted by the path's
// UTF-8 bytes, entries in one sequence whatever their kind.
//
// The last field of a line is escaped: "\\" for a backslash, "\n" for a line feed; every other
// byte (tabs, spaces, any Unicode) is written as is. A line format rather than JSON because it
// is deterministic by construction and several times faster for 100,000+ files.
//
// Format 1 has no W line; format 2 is format 1 with it; format 3 has entries, with or without
// a W line. A marker without entries is still written as format 1 (no writer) or 2, byte for
// byte what earlier versions wrote; all three formats are read.

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

/// One entry of the tree as a format 3 marker records it.
public struct MarkerEntry: Sendable, Equatable {
    /// What the entry is; a hard link names an earlier `.file` entry, a symlink carries its target.
    public var kind: EntryKind
    /// A file's or hard link's size in bytes; 0 for symlinks and folders (`encoded()` refuses
    /// anything else).
    public var size: Int64
    public var metadata: EntryMetadata

    public init(kind: EntryKind, size: Int64 = 0, metadata: EntryMetadata) {
        self.kind = kind
        self.size = size
        self.metadata = metadata
    }
}

/// What reads a marker as a stream (`Marker.read`) is told, line by line.
public protocol MarkerVisitor {
    /// The groups and the writer, once read (before the first entry or hash). Returns
    /// whether to go on reading the entries.
    mutating func header(groups: [MarkerGroup], writer: String?) -> Bool
    /// An entry (format 3), in byte order of their paths: a path's entry comes after those
    /// of every path before it. `hash`: a file's or hard link's SHA-256, when it has one.
    mutating func entry(_ path: String, _ entry: MarkerEntry, hash: String?, line: Int) throws(MarkerError)
    /// A hash record: the SHA-256 of a file that has no entry (every file's, before format 3).
    mutating func hash(_ path: String, _ hex: String, line: Int) throws(MarkerError)
    /// Whether `path` was an earlier file entry (a hard link's target must be one).
    func isEarlierFile(_ path: String) -> Bool
}

/// The marker's content: the profile's groups, the SHA-256 of every hash-compared file and
/// (format 3) every entry of the tree.
public struct Marker: Sendable, Equatable {
    /// The newest format this version writes and reads (3: with entries; a marker without
    /// them is written as format 2 with a writer id and as format 1 without).
    public static let formatVersion = 3
    /// The first bytes of every marker, before the format byte.
    public static let magic: [UInt8] = Array("BKMARK".utf8)
    /// The default bound on a marker's decompressed content: 1 GiB.
    public static let defaultMaxContentSize = Zlib.defaultMaxOutputSize
    // zlib's fastest level. The marker is written last, by one thread, after every run that
    // changed anything (one changed file in a million rewrites it whole), so its compression is
    // waiting time. Measured on 200,000 entries (26.1 MB of lines): level 1 takes 0.23 s and
    // gives 10.98 MB, level 6 (zlib's default, used before) 0.68 s and 10.28 MB; the hashes
    // barely compress at any level. Changing it changes every marker's bytes, not their
    // meaning: any level reads back the same.
    static let compressionLevel: Int32 = 1

    /// The profile's groups, in the profile's order.
    public var groups: [MarkerGroup] {
        didSet { classifier = GroupClassifier(groups) }
    }
    /// Relative path → SHA-256 as 64 lowercase hex characters.
    ///
    /// When `entries` is not empty, each path here must be an entry of kind `.file` or
    /// `.hardLink`; a file entry without a hash is size-compared.
    public var hashes: [String: String]
    /// Relative path (in FileName's codec) → the entry there (format 3); empty for a marker
    /// of format 1 or 2.
    public var entries: [String: MarkerEntry]
    /// The writer id of the profile that wrote it (format 2); nil for a marker written before
    /// markers carried one.
    public var writer: String?
    // Compiled once per change of `groups`, not per `group(for:)` call.
    private var classifier: GroupClassifier

    public init(
        groups: [MarkerGroup] = [], hashes: [String: String] = [:], entries: [String: MarkerEntry] = [:],
        writer: String? = nil
    ) {
        self.groups = groups
        self.hashes = hashes
        self.entries = entries
        self.writer = writer
        self.classifier = GroupClassifier(groups)
    }

    public static func == (lhs: Marker, rhs: Marker) -> Bool {
        lhs.groups == rhs.groups && lhs.hashes == rhs.hashes && lhs.entries == rhs.entries && lhs.writer == rhs.writer
    }

    /// The format `encoded()` writes: 3 with entries, else 2 with a writer, else 1.
    private var format: UInt8 { Self.format(hasEntries: !entries.isEmpty, writer: writer) }

    /// 3 for a marker with entries, else 2 with a writer, else 1.
    private static func format(hasEntries: Bool, writer: String?) -> UInt8 {
        hasEntries ? 3 : (writer == nil ? 1 : 2)
    }

    /// A marker's bytes: magic, format byte, the compressed content.
    private static func framed(format: UInt8, compressed: Data) -> Data {
        var data = Data(capacity: magic.count + 1 + compressed.count)
        data.append(contentsOf: magic)
        data.append(format)
        data.append(compressed)
        return data
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

    /// The marker's bytes: magic, format byte, compressed content. The same groups, hashes and
    /// entries always give the same bytes (for one zlib build).
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
        return Self.framed(format: format, compressed: compressed)
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
    /// decompressed: 8 MiB for the groups and the entries that are no listed file (folders,
    /// symlinks) and 1 KiB per file (a file's line is at most about 110 bytes plus its path).
    /// A marker past it is damaged or hostile, and refused before it is inflated further.
    ///
    /// Folders and symbolic links are entries no listing counts, so the content may also be
    /// 4 times the marker's compressed size (`markerSize`): a tree of many links or folders
    /// has a larger marker, which inflates 2 to 4 times (hashes barely compress); a zlib bomb
    /// inflates up to 1,000 times.
    public static func contentLimit(listedFiles: Int, markerSize: Int = 0) -> Int {
        Probe.markerSizeLimit(listedFiles: listedFiles) + 4 * max(0, markerSize)
    }

    /// Reads a marker, refusing content larger than `maxContentSize` once decompressed.
    public static func decode(_ data: Data, maxContentSize: Int = defaultMaxContentSize) throws(MarkerError) -> Marker {
        var reader = Collecting()
        try read(data, maxContentSize: maxContentSize, into: &reader)
        return Marker(groups: reader.groups, hashes: reader.hashes, entries: reader.entries, writer: reader.writer)
    }

    /// The groups and the writer of a marker, read without its entries (which are not even
    /// decompressed: a large backup's marker is not inflated to learn who wrote it).
    public static func header(_ data: Data, maxContentSize: Int = defaultMaxContentSize) throws(MarkerError) -> (groups: [MarkerGroup], writer: String?) {
        var reader = HeaderOnly()
        try read(data, maxContentSize: maxContentSize, into: &reader)
        return (reader.groups, reader.writer)
    }

    /// Reads a marker as a stream: its content is inflated a chunk at a time and each line
    /// handed to `visitor` as it is parsed, so nothing of the marker is held but what the
    /// visitor keeps. Every check of `decode` is made, but for those the visitor makes (a
    /// path listed twice, a hard link's target): a visitor that holds no entries makes the
    /// checks it can. Stops early when the visitor's `header` says so.
    public static func read(_ data: Data, maxContentSize: Int = defaultMaxContentSize, into visitor: inout some MarkerVisitor) throws(MarkerError) {
        guard data.count >= magic.count, data.prefix(magic.count).elementsEqual(magic) else {
            throw .notAMarker
        }
        guard data.count > magic.count else { throw .damaged("truncated after the header") }
        let version = Int(data[data.startIndex + magic.count])
        guard version <= formatVersion else { throw .newerFormat(found: version, readable: formatVersion) }
        guard version >= 1 else { throw .damaged("unknown format \(version)") }
        var parser = LineParser(version: version)
        var carry: [UInt8] = []
        var failure: MarkerError?
        do {
            try Zlib.inflate(data.dropFirst(magic.count + 1), maxOutputSize: maxContentSize) { piece in
                do throws(MarkerError) {
                    var start = 0
                    while start < piece.count, !parser.stopped {
                        guard let end = piece[start...].firstIndex(of: newline) else {
                            carry.append(contentsOf: piece[start...])
                            break
                        }
                        if carry.isEmpty {
                            try parser.line(UnsafeBufferPointer(rebasing: piece[start..<end]), &visitor)
                        } else {
                            carry.append(contentsOf: piece[start..<end])
                            try carry.withUnsafeBufferPointer { line throws(MarkerError) in try parser.line(line, &visitor) }
                            carry.removeAll(keepingCapacity: true)
                        }
                        start = end + 1
                    }
                    return !parser.stopped
                } catch {
                    failure = error
                    return false
                }
            }
        } catch {
            throw .damaged(error.description)
        }
        if let failure { throw failure }
        if parser.stopped { return }
        if !carry.isEmpty { throw .damaged("the content does not end with a line break") }
        try parser.finish(&visitor)
    }

    // MARK: Writing

    private func canonicalContent() throws(MarkerError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(hashes.count * 120 + 256)
        try Self.appendHeader(groups: groups, writer: writer, to: &out)
        if entries.isEmpty {
            try Self.appendHashLines(hashes, to: &out)
        } else {
            let withoutEntry = try appendEntryLines(to: &out)
            if !withoutEntry.isEmpty { try Self.appendHashLines(withoutEntry, to: &out) }
        }
        return out
    }

    /// The W line, then each group's G line and P lines.
    private static func appendHeader(groups: [MarkerGroup], writer: String?, to out: inout [UInt8]) throws(MarkerError) {
        if let problem = groupsProblem(groups) { throw .invalidContent(problem) }
        if let writer {
            if let problem = writerProblem(writer) { throw .invalidContent(problem) }
            out.append(UInt8(ascii: "W"))
            out.append(space)
            appendEscaped(writer, to: &out)
            out.append(newline)
        }
        for group in groups {
            out.append(contentsOf: "G \(group.order) \(group.required ? 1 : 0) ".utf8)
            appendEscaped(group.name, to: &out)
            out.append(newline)
            for pattern in group.patterns {
                out.append(UInt8(ascii: "P"))
                out.append(space)
                appendEscaped(pattern, to: &out)
                out.append(newline)
            }
        }
    }

    /// The H lines of formats 1 and 2.
    private static func appendHashLines(_ hashes: [String: String], to out: inout [UInt8]) throws(MarkerError) {
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
            try blob.withUnsafeBufferPointer { paths throws(MarkerError) in
                try appendHashLine(UnsafeBufferPointer(rebasing: paths[span.start..<span.start + span.count]), hash: hashBytes, to: &out)
            }
        }
    }

    /// An H line: the 64 lowercase hex characters of a file's SHA-256 and its path.
    private static func appendHashLine(_ pathBytes: UnsafeBufferPointer<UInt8>, hash: [UInt8], to out: inout [UInt8]) throws(MarkerError) {
        if let problem = pathProblem(pathBytes) {
            throw .invalidContent("path \(quoted(String(decoding: pathBytes, as: UTF8.self))): \(problem)")
        }
        out.append(UInt8(ascii: "H"))
        out.append(space)
        out.append(contentsOf: hash)
        out.append(space)
        appendEscaped(pathBytes, to: &out)
        out.append(newline)
    }

    /// The F, K, L, D and T lines of format 3.
    /// Returns the hashes that have no entry, for H lines after the entries.
    private func appendEntryLines(to out: inout [UInt8]) throws(MarkerError) -> [String: String] {
        // A hash whose file has no entry (the state knows no metadata of it: a file kept on
        // the remote that this machine does not have) is an H line after the entries.
        // (A hash on a folder or link is refused by `appendEntry`.)
        var withoutEntry: [String: String] = [:]
        for (path, hash) in hashes where entries[path] == nil { withoutEntry[path] = hash }

        // One sequence for every kind, sorted as the H lines are (see there).
        var blob: [UInt8] = []
        blob.reserveCapacity(entries.count * 64)
        var spans: [PathSpan] = []
        spans.reserveCapacity(entries.count)
        var values: [Dictionary<String, MarkerEntry>.Index] = []
        values.reserveCapacity(entries.count)
        var index = entries.startIndex
        while index != entries.endIndex {
            let start = blob.count
            blob.append(contentsOf: entries[index].key.utf8)
            spans.append(PathSpan(start: start, count: blob.count - start, value: values.count))
            values.append(index)
            entries.formIndex(after: &index)
        }
        blob.withUnsafeBufferPointer { paths in
            spans.sort { PathSpan.precedes($0, $1, in: paths) }
        }
        out.reserveCapacity(out.count + blob.count + entries.count * 64 + hashes.count * 66)
        for span in spans {
            let (path, entry) = entries[values[span.value]]
            let hash = try hashes[path].map { hash throws(MarkerError) -> [UInt8] in
                let hashBytes = Array(hash.utf8)
                guard hashBytes.count == 64, hashBytes.allSatisfy(isLowercaseHex) else {
                    throw .invalidContent("path \(quoted(path)): the hash is not 64 lowercase hex characters")
                }
                return hashBytes
            }
            try blob.withUnsafeBufferPointer { paths throws(MarkerError) in
                try Self.appendEntry(
                    path, UnsafeBufferPointer(rebasing: paths[span.start..<span.start + span.count]), entry, hash: hash,
                    isEarlierFile: { target in
                        // Byte-equal, not only an equal String: restore links the very path it placed.
                        guard let found = entries.index(forKey: target) else { return false }
                        return entries[found].value.kind == .file && entries[found].key.utf8.elementsEqual(target.utf8)
                    }, to: &out)
            }
        }
        return withoutEntry
    }

    /// The line of one entry (F, K, L or D) and, for a link, its T line after it. `hash` is
    /// the 64 lowercase hex characters of a file's SHA-256, nil for none; `isEarlierFile` says
    /// whether a hard link's target (byte-equal) is a file entry written before this one.
    private static func appendEntry(
        _ path: String, _ pathBytes: UnsafeBufferPointer<UInt8>, _ entry: MarkerEntry, hash: [UInt8]?,
        isEarlierFile: (String) -> Bool, to out: inout [UInt8]
    ) throws(MarkerError) {
        func refuse(_ detail: String) -> MarkerError { .invalidContent("path \(quoted(path)): \(detail)") }
        if let problem = pathProblem(pathBytes) { throw refuse(problem) }
        if hash != nil && !entry.kind.hasContent {
            throw .invalidContent("path \(quoted(path)) has a hash but is a folder or a symbolic link")
        }
        let meta = entry.metadata
        guard meta.mode <= 0o7777 else { throw refuse("mode \(String(meta.mode, radix: 8)) is more than 7777") }
        switch entry.kind {
        case .file, .hardLink:
            guard entry.size >= 0 else { throw refuse("negative size \(entry.size)") }
            out.append(entry.kind == .file ? UInt8(ascii: "F") : UInt8(ascii: "K"))
            out.append(space)
            appendDecimal(entry.size, to: &out)
            out.append(space)
            if let hash { out.append(contentsOf: hash) } else { out.append(dash) }
        case .symlink, .folder:
            guard entry.size == 0 else { throw refuse("a symlink or folder with size \(entry.size), not 0") }
            out.append(entry.kind == .folder ? UInt8(ascii: "D") : UInt8(ascii: "L"))
        }
        out.append(space)
        appendMetadata(meta, to: &out)
        appendEscaped(pathBytes, to: &out)
        out.append(newline)
        let linkTarget: String
        switch entry.kind {
        case .hardLink(let target):
            guard isEarlierFile(target), target.utf8.lexicographicallyPrecedes(path.utf8) else {
                throw refuse("the hard link's target \(quoted(target)) is not an earlier file entry")
            }
            linkTarget = target
        case .symlink(let target):
            linkTarget = target
        case .file, .folder:
            return
        }
        out.append(UInt8(ascii: "T"))
        out.append(space)
        appendEscaped(linkTarget, to: &out)
        out.append(newline)
    }

    /// "<mode> <mtime> <uid> <gid> <user> <group> ", the trailing space included.
    private static func appendMetadata(_ meta: EntryMetadata, to out: inout [UInt8]) {
        appendOctal(meta.mode, to: &out)
        out.append(space)
        appendDecimal(meta.mtimeNanoseconds, to: &out)
        out.append(space)
        appendDecimal(Int64(meta.uid), to: &out)
        out.append(space)
        appendDecimal(Int64(meta.gid), to: &out)
        out.append(space)
        appendName(meta.user, to: &out)
        out.append(space)
        appendName(meta.group, to: &out)
        out.append(space)
    }

    /// A user or group name as a middle field: "-" for none, "\\-" for "-", else escaped.
    private static func appendName(_ name: String?, to out: inout [UInt8]) {
        guard let name else { return out.append(dash) }
        if name == "-" { return out.append(contentsOf: [backslash, dash]) }
        for byte in name.utf8 {
            switch byte {
            case backslash: out.append(contentsOf: [backslash, backslash])
            case space: out.append(contentsOf: [backslash, UInt8(ascii: "s")])
            case newline: out.append(contentsOf: [backslash, UInt8(ascii: "n")])
            default: out.append(byte)
            }
        }
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

    /// The lines of a marker's content, parsed one at a time.
    private struct LineParser {
        let version: Int
        var groups: [MarkerGroup] = []
        var writer: String?
        var headerSent = false
        var stopped = false
        var inBody = false
        var entries = 0
        // The path of the last entry, which the next one's must follow in byte order.
        var previousPath: [UInt8] = []
        // A K or L line, waiting for its T line.
        var pending: PendingLink?
        var lineNumber = 0

        init(version: Int) {
            self.version = version
        }

        /// Hands the header to the visitor before the first line of the body.
        private mutating func sendHeader(_ visitor: inout some MarkerVisitor) throws(MarkerError) {
            guard !headerSent else { return }
            headerSent = true
            if let problem = groupsProblem(groups) { throw .damaged(problem) }
            if version == 2, writer == nil, let problem = missingRecordProblem(version: version, writer: nil, entries: 1) {
                throw .damaged(problem)
            }
            if !visitor.header(groups: groups, writer: writer) { stopped = true }
        }

        mutating func finish(_ visitor: inout some MarkerVisitor) throws(MarkerError) {
            if let link = pending { throw link.withoutTarget }
            try sendHeader(&visitor)
            if stopped { return }
            if let problem = missingRecordProblem(version: version, writer: writer, entries: entries) {
                throw .damaged(problem)
            }
        }

        mutating func line(_ line: UnsafeBufferPointer<UInt8>, _ visitor: inout some MarkerVisitor) throws(MarkerError) {
            lineNumber += 1
            let lineNumber = lineNumber
            func fail(_ detail: String) -> MarkerError { .damaged("line \(lineNumber): \(detail)") }

            if let link = pending {
                pending = nil
                guard line.count >= 2, line[0] == UInt8(ascii: "T"), line[1] == space else { throw link.withoutTarget }
                let target = try text(unescaped(UnsafeBufferPointer(rebasing: line[2...]), fail), fail)
                let kind: EntryKind
                if link.isHardLink {
                    guard visitor.isEarlierFile(target) else {
                        throw fail("the hard link's target \(quoted(target)) is not an earlier file entry")
                    }
                    kind = .hardLink(to: target)
                } else {
                    kind = .symlink(target: target)
                }
                entries += 1
                try visitor.entry(link.path, MarkerEntry(kind: kind, size: link.size, metadata: link.metadata), hash: link.hash, line: link.line)
                return
            }
            guard line.count >= 2, line[1] == space else { throw fail("unreadable record") }
            switch line[0] {
            // (A `where` would bind to the last pattern only.)
            case let letter where version >= 3 && isEntryLetter(letter):
                inBody = true
                try sendHeader(&visitor)
                if stopped { return }
                var fields = FieldReader(line: line)
                var size: Int64 = 0
                var hash: UnsafeBufferPointer<UInt8>?
                if letter == UInt8(ascii: "F") || letter == UInt8(ascii: "K") {
                    guard let sizeField = fields.next(), let value = parseDecimal(sizeField) else {
                        throw fail("unreadable size")
                    }
                    guard value >= 0 else { throw fail("negative size \(value)") }
                    size = value
                    guard let hashField = fields.next() else { throw fail("unreadable hash") }
                    if !(hashField.count == 1 && hashField[0] == dash) {
                        guard hashField.count == 64, hashField.allSatisfy(isLowercaseHex) else {
                            throw fail("hash is not 64 lowercase hex characters")
                        }
                        hash = hashField
                    }
                }
                let metadata = try parseMetadata(&fields, fail)
                let pathBytes = try unescaped(fields.rest, fail)
                if let problem = pathBytes.withUnsafeBufferPointer(pathProblem) {
                    throw fail("path \(quoted(String(decoding: pathBytes, as: UTF8.self))): \(problem)")
                }
                guard let path = String(validating: pathBytes, as: UTF8.self) else {
                    throw fail("path is not valid UTF-8")
                }
                if let problem = orderProblem(after: previousPath, pathBytes) {
                    throw fail("path \(quoted(path)) \(problem)")
                }
                previousPath = pathBytes
                let hashText = hash.map { String(decoding: $0, as: UTF8.self) }
                switch letter {
                case UInt8(ascii: "F"), UInt8(ascii: "D"):
                    let kind: EntryKind = letter == UInt8(ascii: "F") ? .file : .folder
                    entries += 1
                    try visitor.entry(path, MarkerEntry(kind: kind, size: size, metadata: metadata), hash: hashText, line: lineNumber)
                default:
                    pending = PendingLink(
                        line: lineNumber, path: path, isHardLink: letter == UInt8(ascii: "K"), size: size, metadata: metadata,
                        hash: hashText)
                }
            case UInt8(ascii: "T") where version >= 3:
                throw fail("a T record not directly after a K or L record")
            case UInt8(ascii: "H"):
                // In format 3, the hashes of files without an entry, after the entries.
                inBody = true
                try sendHeader(&visitor)
                if stopped { return }
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
                try visitor.hash(pathString, String(decoding: hex, as: UTF8.self), line: lineNumber)
            case UInt8(ascii: "W") where version >= 2:
                guard lineNumber == 1 else { throw fail("the writer record is not the first line") }
                let name = try text(unescaped(UnsafeBufferPointer(rebasing: line[2...]), fail), fail)
                if let problem = writerProblem(name) { throw fail(problem) }
                writer = name
            case UInt8(ascii: "G"):
                guard !inBody else { throw fail(version >= 3 ? "group after the entries" : "group after the hashes") }
                groups.append(try parseGroup(UnsafeBufferPointer(rebasing: line[2...]), fail))
            case UInt8(ascii: "P"):
                guard !inBody, !groups.isEmpty else { throw fail("pattern outside a group") }
                let pattern = try text(unescaped(UnsafeBufferPointer(rebasing: line[2...]), fail), fail)
                groups[groups.count - 1].patterns.append(pattern)
            default:
                throw fail("unknown record")
            }
        }
    }

    /// The visitor of `decode`: every entry and hash in dictionaries, each path once.
    private struct Collecting: MarkerVisitor {
        var groups: [MarkerGroup] = []
        var writer: String?
        var hashes: [String: String] = [:]
        var entries: [String: MarkerEntry] = [:]

        mutating func header(groups: [MarkerGroup], writer: String?) -> Bool {
            self.groups = groups
            self.writer = writer
            return true
        }

        mutating func entry(_ path: String, _ entry: MarkerEntry, hash: String?, line: Int) throws(MarkerError) {
            // Two spellings of one String (Unicode normalisation) are one key here.
            if entries.updateValue(entry, forKey: path) != nil {
                throw .damaged("line \(line): path \(quoted(path)) is listed twice")
            }
            if let hash { hashes[path] = hash }
        }

        mutating func hash(_ path: String, _ hex: String, line: Int) throws(MarkerError) {
            if hashes.updateValue(hex, forKey: path) != nil || entries[path] != nil {
                throw .damaged("line \(line): path \(quoted(path)) is listed twice")
            }
        }

        func isEarlierFile(_ path: String) -> Bool {
            guard let found = entries.index(forKey: path) else { return false }
            return entries[found].value.kind == .file && entries[found].key.utf8.elementsEqual(path.utf8)
        }
    }

    /// The visitor of `header`: stops at the first line of the body.
    private struct HeaderOnly: MarkerVisitor {
        var groups: [MarkerGroup] = []
        var writer: String?

        mutating func header(groups: [MarkerGroup], writer: String?) -> Bool {
            self.groups = groups
            self.writer = writer
            return false
        }

        func entry(_ path: String, _ entry: MarkerEntry, hash: String?, line: Int) {}
        func hash(_ path: String, _ hex: String, line: Int) {}
        func isEarlierFile(_ path: String) -> Bool { false }
    }

    /// Why a marker of `version` cannot lack what it lacks, or nil when it can: format 2 is
    /// there for its writer, format 3 for its entries.
    private static func missingRecordProblem(version: Int, writer: String?, entries: Int) -> String? {
        if version == 2, writer == nil { return "a format 2 marker without its writer record" }
        if version >= 3, entries == 0 { return "a format 3 marker without entries" }
        return nil
    }

    /// "<mode> <mtime> <uid> <gid> <user> <group> " of an entry's line.
    private static func parseMetadata(
        _ fields: inout FieldReader, _ fail: (String) -> MarkerError
    ) throws(MarkerError) -> EntryMetadata {
        guard let modeField = fields.next(), let mode = parseOctal(modeField) else { throw fail("unreadable mode") }
        guard mode <= 0o7777 else { throw fail("mode \(String(mode, radix: 8)) is more than 7777") }
        guard let mtimeField = fields.next(), let mtime = parseDecimal(mtimeField) else {
            throw fail("unreadable modification time")
        }
        guard let uidField = fields.next(), let uid = parseDecimal(uidField).flatMap(UInt32.init(exactly:)) else {
            throw fail("unreadable uid")
        }
        guard let gidField = fields.next(), let gid = parseDecimal(gidField).flatMap(UInt32.init(exactly:)) else {
            throw fail("unreadable gid")
        }
        guard let userField = fields.next() else { throw fail("unreadable user name") }
        let user = try parseName(userField, fail)
        guard let groupField = fields.next() else { throw fail("unreadable group name") }
        let group = try parseName(groupField, fail)
        return EntryMetadata(mode: UInt32(mode), mtimeNanoseconds: mtime, uid: uid, gid: gid, user: user, group: group)
    }

    /// A user or group name written by `appendName`.
    private static func parseName(
        _ field: UnsafeBufferPointer<UInt8>, _ fail: (String) -> MarkerError
    ) throws(MarkerError) -> String? {
        if field.count == 1, field[0] == dash { return nil }
        if field.count == 2, field[0] == backslash, field[1] == dash { return "-" }
        let out = try unescaped(field, fail, name: true)
        guard let name = String(validating: out, as: UTF8.self) else { throw fail("name is not valid UTF-8") }
        return name
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

    /// The bytes of an escaped field: `\\` and `\n`, and for a user or group name (`name`)
    /// also `\s` for a space.
    private static func unescaped(
        _ field: UnsafeBufferPointer<UInt8>, _ fail: (String) -> MarkerError, name: Bool = false
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
            guard index < field.count else { throw fail(name ? "a name ends with a lone backslash" : "ends with a lone backslash") }
            switch field[index] {
            case backslash: out.append(backslash)
            case UInt8(ascii: "n"): out.append(newline)
            case UInt8(ascii: "s") where name: out.append(space)
            default: throw fail(name ? "unknown escape in a name" : "unknown escape")
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

private let dash = UInt8(ascii: "-")

private func isEntryLetter(_ byte: UInt8) -> Bool {
    byte == UInt8(ascii: "F") || byte == UInt8(ascii: "K") || byte == UInt8(ascii: "L") || byte == UInt8(ascii: "D")
}

/// A K or L line of `Marker.parse` waiting for its T line.
private struct PendingLink {
    var line: Int
    var path: String
    var isHardLink: Bool
    var size: Int64
    var metadata: EntryMetadata
    var hash: String?

    var withoutTarget: MarkerError {
        .damaged("line \(line): a \(isHardLink ? "hard link" : "symlink") record without its T record")
    }
}

/// The space-separated fields of a line after its letter; the last one is the rest.
private struct FieldReader {
    let line: UnsafeBufferPointer<UInt8>
    private var position = 2

    init(line: UnsafeBufferPointer<UInt8>) {
        self.line = line
    }

    /// The next field, which a space ends; nil when no space follows.
    mutating func next() -> UnsafeBufferPointer<UInt8>? {
        var index = position
        while index < line.count, line[index] != space { index += 1 }
        guard index < line.count else { return nil }
        defer { position = index + 1 }
        return UnsafeBufferPointer(rebasing: line[position..<index])
    }

    /// What follows the fields read: the last field.
    var rest: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: line[min(position, line.count)...])
    }
}

/// A decimal Int64 as `appendDecimal` writes it: an optional "-", no leading zero, no "-0".
private func parseDecimal(_ field: UnsafeBufferPointer<UInt8>) -> Int64? {
    let negative = field.first == dash
    let digits = UnsafeBufferPointer(rebasing: field[(negative ? 1 : 0)...])
    guard (1...19).contains(digits.count), digits.count == 1 || digits[0] != UInt8(ascii: "0") else { return nil }
    var value: UInt64 = 0
    for byte in digits {
        guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
        value = value * 10 + UInt64(byte - UInt8(ascii: "0"))  // 19 digits never overflow UInt64
    }
    if negative {
        guard value != 0, value <= UInt64(Int64.max) + 1 else { return nil }
        return value == UInt64(Int64.max) + 1 ? Int64.min : -Int64(value)
    }
    return Int64(exactly: value)
}

/// Octal digits without a leading zero, at most 11 of them; the caller bounds the value.
private func parseOctal(_ field: UnsafeBufferPointer<UInt8>) -> UInt64? {
    guard (1...11).contains(field.count), field.count == 1 || field[0] != UInt8(ascii: "0") else { return nil }
    var value: UInt64 = 0
    for byte in field {
        guard (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(byte) else { return nil }
        value = value * 8 + UInt64(byte - UInt8(ascii: "0"))
    }
    return value
}

private func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
    if value < 0 { out.append(dash) }
    appendDigits(value.magnitude, radix: 10, to: &out)
}

private func appendOctal(_ value: UInt32, to out: inout [UInt8]) {
    appendDigits(UInt64(value), radix: 8, to: &out)
}

private func appendDigits(_ value: UInt64, radix: UInt64, to out: inout [UInt8]) {
    var count = 0
    var scratch = value
    repeat {
        count += 1
        scratch /= radix
    } while scratch > 0
    let start = out.count
    out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: count))
    scratch = value
    for index in stride(from: start + count - 1, through: start, by: -1) {
        out[index] = UInt8(ascii: "0") + UInt8(scratch % radix)
        scratch /= radix
    }
}

/// Why `path` cannot follow `previous` among the entries, or nil when it can: paths are
/// strictly increasing in memcmp order, the shorter first on a common prefix.
private func orderProblem(after previous: [UInt8], _ path: [UInt8]) -> String? {
    let common = min(previous.count, path.count)
    let order = previous.withUnsafeBufferPointer { lhs in
        path.withUnsafeBufferPointer { rhs -> Int32 in
            guard common > 0, let lhs = lhs.baseAddress, let rhs = rhs.baseAddress else { return 0 }
            return memcmp(lhs, rhs, common)
        }
    }
    if order < 0 || (order == 0 && previous.count < path.count) { return nil }
    return order == 0 && previous.count == path.count ? "is listed twice" : "is out of order"
}

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

// MARK: - Writing as a stream

extension Marker {
    /// Writes a marker in one pass over its entries in path order, compressing as it goes:
    /// a marker of 1,000,000 files is never held as dictionaries or as uncompressed text.
    /// Its bytes are those `encoded()` makes of the same content, and it refuses what
    /// `encoded()` refuses, so every marker it writes reads back.
    public final class Writer {
        private let deflater: Deflater
        private let writer: String?
        private var pending: [UInt8] = []
        private var previous: [UInt8] = []
        private var entryCount = 0
        /// Hashes of files with no entry, in path order: H lines after the entries.
        private var hashOnly: [(path: [UInt8], hash: SHA256Digest)] = []
        /// The hard links' targets, and the size and hash of those written as file entries so
        /// far (byte-equal).
        private let linkTargets: Set<[UInt8]>
        private var filesLinkedTo: [[UInt8]: (size: Int64, hash: SHA256Digest?)] = [:]
        private let file: Int32?

        /// - Parameters:
        ///   - linkTargets: every path a hard-link entry will name (its first name).
        ///   - file: an open descriptor (positioned at 0, not closed here) the marker's bytes
        ///     are written to as they are made, rather than held: a marker of a million files
        ///     is tens of megabytes.
        public init(
            groups: [MarkerGroup], writer: String?, linkTargets: some Sequence<String> = [String](), file: Int32? = nil
        ) throws(MarkerError) {
            self.file = file
            var header: [UInt8] = []
            header.reserveCapacity(Self.flushSize + 4096)
            try Marker.appendHeader(groups: groups, writer: writer, to: &header)
            let deflater: Deflater
            do {
                // The frame's header first, its format byte set by `finish`: the compressed
                // content is never copied into a frame of its own.
                deflater = try Deflater(level: Marker.compressionLevel, prefix: Marker.magic + [0], file: file)
            } catch {
                throw .invalidContent(error.description)
            }
            self.deflater = deflater
            self.writer = writer
            self.linkTargets = Set(linkTargets.map { Array($0.utf8) })
            pending = header
        }

        private static let flushSize = 64 * 1024

        /// The size and hash of the file entry written at `path` (byte-equal), one of the
        /// `linkTargets`; nil when there is none: what a hard link to it needs.
        public func fileEntry(linkedTo path: String) -> (size: Int64, hash: SHA256Digest?)? { filesLinkedTo[Array(path.utf8)] }

        /// Appends the entry at `path`, after every path appended before it in byte order.
        public func append(path: String, entry: MarkerEntry, hash: SHA256Digest?) throws(MarkerError) {
            let bytes = Array(path.utf8)
            if let problem = orderProblem(after: previous, bytes), entryCount > 0 {
                throw .invalidContent("path \(quoted(path)) \(problem)")
            }
            let targets = filesLinkedTo
            try bytes.withUnsafeBufferPointer { pathBytes throws(MarkerError) in
                try Marker.appendEntry(
                    path, pathBytes, entry, hash: hash.map { Array($0.hex.utf8) },
                    isEarlierFile: { targets[Array($0.utf8)] != nil }, to: &pending)
            }
            if entry.kind == .file, linkTargets.contains(bytes) { filesLinkedTo[bytes] = (entry.size, hash) }
            previous = bytes
            entryCount += 1
            try flushIfFull()
        }

        /// The hash of a file with no entry (an H line after the entries), in path order.
        public func appendHash(path: String, hash: SHA256Digest) throws(MarkerError) {
            let bytes = Array(path.utf8)
            if let last = hashOnly.last, let problem = orderProblem(after: last.path, bytes) {
                throw .invalidContent("path \(quoted(path)) \(problem)")
            }
            hashOnly.append((bytes, hash))
        }

        /// The marker's bytes: magic, format byte, compressed content. Called once, last.
        public func finish() throws(MarkerError) -> Data {
            for (path, hash) in hashOnly {
                try path.withUnsafeBufferPointer { pathBytes throws(MarkerError) in
                    try Marker.appendHashLine(pathBytes, hash: Array(hash.hex.utf8), to: &pending)
                }
                try flushIfFull()
            }
            var framed: Data
            do {
                try pending.withUnsafeBufferPointer { bytes throws(ZlibError) in try deflater.write(bytes) }
                framed = try deflater.finish()
            } catch {
                throw .invalidContent(error.description)
            }
            var format = Marker.format(hasEntries: entryCount > 0, writer: writer)
            if let file {
                guard pwrite(file, &format, 1, off_t(Marker.magic.count)) == 1 else {
                    throw .invalidContent("cannot write the marker's format byte: \(String(cString: strerror(errno)))")
                }
                return Data()
            }
            framed[framed.startIndex + Marker.magic.count] = format
            return framed
        }

        private func flushIfFull() throws(MarkerError) {
            guard pending.count >= Self.flushSize else { return }
            do {
                try pending.withUnsafeBufferPointer { bytes throws(ZlibError) in try deflater.write(bytes) }
            } catch {
                throw .invalidContent(error.description)
            }
            pending.removeAll(keepingCapacity: true)
        }
    }
}
