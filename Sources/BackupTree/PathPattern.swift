// Gitignore-style path patterns: PathPattern (one compiled pattern), PatternList (an ordered
// list with `!` negation, parsed from file text or given as strings), PatternError, and the
// byte-level matcher they share. Used for excludes, size-compared and keep-remotely patterns,
// and the marker's groups, so matching runs on every file of a large tree: patterns are
// compiled once and matched against UTF-8 bytes, never through regular expressions.

import Foundation

/// A gitignore-style pattern, compiled once, matched against relative "/"-separated file paths.
///
/// Paths are relative (no leading "/"), name regular files, and are compared exactly:
/// case-sensitive, Unicode scalar by scalar, with no normalization (an NFC "é" does not
/// match an NFD "é").
///
/// - `*` matches any run of characters, including none, except "/".
/// - `?` matches exactly one character (one Unicode scalar) except "/".
/// - `[abc]`, `[a-z]`, `[é-ë]` match one character of the class; `[!a]` and `[^a]` match one
///   character not in it. A `]` right after `[`, `[!` or `[^` is a member; a `-` first or last
///   is a member. `[:alpha:]`-style names are not supported and are an error.
/// - `**` as a whole segment matches zero or more segments: `**/x` (x at any depth),
///   `a/**/b` (b at any depth below a, including `a/b`), `a/**` (everything below a, not a
///   file named a). `**` inside a segment (`a**b`) is an ordinary `*`.
/// - A pattern with no "/" (other than a trailing one) matches a name at any depth:
///   `*.jpg` matches `a/b/c.jpg`.
/// - A pattern containing a "/" is anchored at the root; a leading "/" anchors a pattern
///   too and is otherwise ignored (`/a/b` is `a/b`; `/x` matches `x` but not `d/x`).
/// - A pattern that matches a directory matches every file below it, as in git: `build`
///   matches `build/out.o`, `a/b` matches `a/b/c/d`.
/// - A trailing "/" matches directories only: `cache/` matches `cache/x` and `a/cache/y/z`
///   but not a file named `cache`.
/// - `\` makes the next character literal (`\*`, `\?`, `\[`, `\\`, `\!`, `\#`, `\ `).
/// - A leading `!` (negation) and `#` (comment) mean something only to `PatternList`;
///   in a `PathPattern` they are ordinary characters.
///
/// Errors: an empty pattern, an empty segment (`a//b`), an unclosed `[`, a reversed range
/// (`[z-a]`), a trailing lone `\`, and an escaped "/".
public struct PathPattern: Sendable, Equatable, CustomStringConvertible {
    /// The pattern as written.
    public let source: String
    let form: PatternForm

    /// Compiles `source`; throws `PatternError` (with no line number) when it is invalid.
    public init(_ source: String) throws(PatternError) {
        self.source = source
        self.form = try PatternForm.compile(source)
    }

    /// Whether `path`, a relative file path, matches.
    public func matches(_ path: String) -> Bool {
        SplitPath(path).withSegments { form.matches($0) }
    }

    public var description: String { source }
}

/// An ordered list of patterns where `!pattern` re-includes: the last matching pattern wins.
///
/// Unlike git, a file below an excluded directory can be re-included (`build/` then
/// `!build/keep.txt` matches `build/x` but not `build/keep.txt`), because every decision here
/// is about one file path.
public struct PatternList: Sendable, Equatable {
    /// One pattern of the list and whether it re-includes what it matches.
    public struct Entry: Sendable, Equatable {
        public var pattern: PathPattern
        public var negated: Bool

        public init(pattern: PathPattern, negated: Bool = false) {
            self.pattern = pattern
            self.negated = negated
        }
    }

    public private(set) var entries: [Entry]
    // With no negations the first match decides, which saves walking the whole list.
    private var hasNegation: Bool

    /// An empty list, which matches nothing.
    public init() {
        entries = []
        hasNegation = false
    }

    public init(entries: [Entry]) {
        self.entries = entries
        hasNegation = entries.contains { $0.negated }
    }

    /// Compiles `patterns` as written, one per element; a leading `!` negates (`\!` is a
    /// literal "!"). No comments or trimming: that is `init(parsing:)`'s job.
    public init(_ patterns: [String]) throws(PatternError) {
        var entries: [Entry] = []
        entries.reserveCapacity(patterns.count)
        for text in patterns {
            entries.append(try Self.entry(text))
        }
        self.init(entries: entries)
    }

    /// Parses pattern-file text: one pattern per line ("\n" or "\r\n"), lines starting with
    /// `#` are comments, trailing unescaped spaces are trimmed, blank lines are ignored.
    /// An invalid pattern throws a `PatternError` carrying its 1-based line number.
    public init(parsing text: String) throws(PatternError) {
        var entries: [Entry] = []
        var lineNumber = 0
        // Split on scalars: as Characters, "\r\n" is one grapheme and would never split at "\n".
        for rawLine in text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            if line.hasPrefix("#") { continue }
            line = Self.trimmingTrailingSpaces(line)
            if line.isEmpty { continue }
            do {
                entries.append(try Self.entry(String(line)))
            } catch {
                var located = error
                located.line = lineNumber
                throw located
            }
        }
        self.init(entries: entries)
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// Whether `path` is matched: some pattern matches it and the last that does is not negated.
    public func matches(_ path: String) -> Bool {
        if entries.isEmpty { return false }
        return SplitPath(path).withSegments { matches($0) }
    }

    func matches(_ path: borrowing SegmentedPath) -> Bool {
        if hasNegation {
            for entry in entries.reversed() where entry.pattern.form.matches(path) {
                return !entry.negated
            }
            return false
        }
        for entry in entries where entry.pattern.form.matches(path) {
            return true
        }
        return false
    }

    private static func entry(_ text: String) throws(PatternError) -> Entry {
        if text.hasPrefix("!") {
            let rest = String(text.dropFirst())
            do {
                return Entry(pattern: try PathPattern(rest), negated: true)
            } catch {
                // Name the pattern as the person wrote it, "!" included.
                throw PatternError(pattern: text, reason: error.reason)
            }
        }
        return Entry(pattern: try PathPattern(text))
    }

    /// `line` without trailing spaces, keeping a space escaped by an odd run of backslashes.
    static func trimmingTrailingSpaces(_ line: Substring) -> Substring {
        var line = line
        while line.last == " " {
            let beforeSpace = line.dropLast()
            let backslashes = beforeSpace.reversed().prefix { $0 == "\\" }.count
            if backslashes % 2 == 1 { break }
            line = beforeSpace
        }
        return line
    }
}

/// An invalid pattern: which one, why, and the line of the pattern file it came from.
public struct PatternError: Error, Sendable, Equatable, CustomStringConvertible {
    public var pattern: String
    public var reason: String
    /// The 1-based line number when the pattern came from file text.
    public var line: Int?

    public init(pattern: String, reason: String, line: Int? = nil) {
        self.pattern = pattern
        self.reason = reason
        self.line = line
    }

    public var description: String {
        let location = line.map { "line \($0): " } ?? ""
        return "\(location)invalid pattern \"\(pattern)\": \(reason)"
    }
}

// MARK: - Compiled form

/// A compiled pattern.
enum PatternForm: Sendable, Equatable {
    /// A single-segment unanchored pattern, the common case (`*.o`, `node_modules`, `cache/`):
    /// any segment may match; with `directoryOnly`, any segment but the file's own name.
    case name(SegmentGlob, directoryOnly: Bool)
    /// The general case: the tokens must match the whole path. The "everything below" and
    /// directory-only rules are compiled in as trailing tokens.
    case path([PathToken])

    func matches(_ path: borrowing SegmentedPath) -> Bool {
        switch self {
        case .name(let glob, let directoryOnly):
            let candidates = directoryOnly ? path.count - 1 : path.count
            var index = 0
            while index < candidates {
                if glob.matches(path.segment(index)) { return true }
                index += 1
            }
            return false
        case .path(let tokens):
            return Self.matchTokens(tokens, path)
        }
    }

    /// Whole-path match of segment tokens; `**` backtracks only to the latest `**`, which is
    /// exact because every other token consumes exactly one segment (O(tokens × segments)).
    private static func matchTokens(_ tokens: [PathToken], _ path: borrowing SegmentedPath) -> Bool {
        var token = 0
        var segment = 0
        var starToken = -1
        var starSegment = 0
        while segment < path.count {
            if token < tokens.count {
                switch tokens[token] {
                case .anySegments:
                    starToken = token
                    starSegment = segment
                    token += 1
                    continue
                case .segment(let glob):
                    if glob.matches(path.segment(segment)) {
                        token += 1
                        segment += 1
                        continue
                    }
                }
            }
            guard starToken >= 0 else { return false }
            starSegment += 1
            segment = starSegment
            token = starToken + 1
        }
        while token < tokens.count, tokens[token] == .anySegments { token += 1 }
        return token == tokens.count
    }

    static func compile(_ source: String) throws(PatternError) -> PatternForm {
        func fail(_ reason: String) -> PatternError { PatternError(pattern: source, reason: reason) }

        var segments: [[PatternChar]] = [[]]
        var escaping = false
        for scalar in source.unicodeScalars {
            if escaping {
                if scalar == "/" { throw fail("\"/\" cannot be escaped") }
                segments[segments.count - 1].append(PatternChar(scalar: scalar, escaped: true))
                escaping = false
            } else if scalar == "\\" {
                escaping = true
            } else if scalar == "/" {
                segments.append([])
            } else {
                segments[segments.count - 1].append(PatternChar(scalar: scalar, escaped: false))
            }
        }
        if escaping { throw fail("ends with a lone \"\\\"") }

        var anchored = false
        var directoryOnly = false
        if segments.count > 1 && segments[0].isEmpty {
            anchored = true
            segments.removeFirst()
        }
        if segments.count > 1 && segments[segments.count - 1].isEmpty {
            directoryOnly = true
            segments.removeLast()
        }
        if segments.count == 1 && segments[0].isEmpty { throw fail("empty pattern") }
        if segments.contains(where: \.isEmpty) { throw fail("empty path segment (\"//\")") }
        if segments.count > 1 { anchored = true }

        var parts: [PathToken] = []
        for segment in segments {
            let isDoubleStar = segment.count == 2 && segment.allSatisfy { $0.scalar == "*" && !$0.escaped }
            parts.append(isDoubleStar ? .anySegments : .segment(try SegmentGlob(segment, pattern: source)))
        }

        if !anchored, parts.count == 1, case .segment(let glob) = parts[0] {
            return .name(glob, directoryOnly: directoryOnly)
        }
        var tokens: [PathToken] = anchored ? [] : [.anySegments]
        tokens += parts
        // A trailing `**` means "something below": at least one more segment.
        if tokens.last == .anySegments {
            tokens.removeLast()
            tokens += [.segment(.anything), .anySegments]
        }
        // What the pattern matched may be the file itself or a directory above it; a
        // directory-only pattern must leave at least the file's name below it.
        tokens += directoryOnly ? [.segment(.anything), .anySegments] : [.anySegments]
        var collapsed: [PathToken] = []
        for token in tokens where !(token == .anySegments && collapsed.last == .anySegments) {
            collapsed.append(token)
        }
        return .path(collapsed)
    }
}

/// One segment-level token of a compiled path pattern.
enum PathToken: Sendable, Equatable {
    /// `**`: zero or more whole segments.
    case anySegments
    /// Exactly one segment matching the glob.
    case segment(SegmentGlob)
}

/// One character of a pattern and whether a backslash made it literal.
struct PatternChar {
    var scalar: Unicode.Scalar
    var escaped: Bool
}

/// A compiled glob for one path segment (a name: never contains "/").
struct SegmentGlob: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// `*`: any name.
        case anything
        /// No wildcards: byte equality.
        case literal([UInt8])
        /// `*` then a literal, as in `*.jpg`: a suffix test instead of a scan.
        case suffix([UInt8])
        /// A literal then `*`, as in `draft*`.
        case prefix([UInt8])
        case tokens([GlobToken])
    }

    let kind: Kind

    static let anything = SegmentGlob(kind: .anything)

    private init(kind: Kind) { self.kind = kind }

    init(_ chars: [PatternChar], pattern: String) throws(PatternError) {
        var tokens: [GlobToken] = []
        var literal: [UInt8] = []
        func flushLiteral() {
            if !literal.isEmpty {
                tokens.append(.literal(literal))
                literal = []
            }
        }
        var index = 0
        while index < chars.count {
            let char = chars[index]
            index += 1
            if char.escaped {
                literal.append(contentsOf: String(char.scalar).utf8)
                continue
            }
            switch char.scalar {
            case "*":
                flushLiteral()
                // Runs of `*` (including `**` inside a segment) are one `*`.
                if tokens.last != .star { tokens.append(.star) }
            case "?":
                flushLiteral()
                tokens.append(.anyScalar)
            case "[":
                flushLiteral()
                tokens.append(.scalarClass(try ScalarClass.parse(chars, from: &index, pattern: pattern)))
            default:
                literal.append(contentsOf: String(char.scalar).utf8)
            }
        }
        flushLiteral()
        switch (tokens.count, tokens.first, tokens.last) {
        case (0, _, _): kind = .literal([])
        case (1, .star?, _): kind = .anything
        case (1, .literal(let bytes)?, _): kind = .literal(bytes)
        case (2, .star?, .literal(let bytes)?): kind = .suffix(bytes)
        case (2, .literal(let bytes)?, .star?): kind = .prefix(bytes)
        default: kind = .tokens(tokens)
        }
    }

    func matches(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        switch kind {
        case .anything:
            return true
        case .literal(let bytes):
            return name.count == bytes.count && bytesEqual(name, 0, bytes)
        case .suffix(let bytes):
            return name.count >= bytes.count && bytesEqual(name, name.count - bytes.count, bytes)
        case .prefix(let bytes):
            return name.count >= bytes.count && bytesEqual(name, 0, bytes)
        case .tokens(let tokens):
            return Self.match(tokens, name)
        }
    }

    /// Whole-name match; `*` backtracks only to the latest `*`, advancing one scalar at a time
    /// so no token ever starts inside a multi-byte character.
    private static func match(_ tokens: [GlobToken], _ name: UnsafeBufferPointer<UInt8>) -> Bool {
        var token = 0
        var position = 0
        var starToken = -1
        var starPosition = 0
        while position < name.count {
            if token < tokens.count {
                switch tokens[token] {
                case .star:
                    starToken = token
                    starPosition = position
                    token += 1
                    continue
                case .literal(let bytes):
                    if name.count - position >= bytes.count && bytesEqual(name, position, bytes) {
                        position += bytes.count
                        token += 1
                        continue
                    }
                case .anyScalar:
                    position += min(scalarLength(name[position]), name.count - position)
                    token += 1
                    continue
                case .scalarClass(let scalarClass):
                    let (value, length) = decodeScalar(name, at: position)
                    if scalarClass.contains(value) {
                        position += length
                        token += 1
                        continue
                    }
                }
            }
            guard starToken >= 0 else { return false }
            starPosition += min(scalarLength(name[starPosition]), name.count - starPosition)
            position = starPosition
            token = starToken + 1
        }
        while token < tokens.count, tokens[token] == .star { token += 1 }
        return token == tokens.count
    }
}

/// One character-level token of a segment glob.
enum GlobToken: Sendable, Equatable {
    case literal([UInt8])
    /// `?`
    case anyScalar
    /// `*`
    case star
    case scalarClass(ScalarClass)
}

/// A bracket expression: a set of scalar ranges, possibly negated.
struct ScalarClass: Sendable, Equatable {
    var ranges: [ClosedRange<UInt32>]
    var negated: Bool

    func contains(_ value: UInt32) -> Bool {
        var found = false
        for range in ranges where range.contains(value) {
            found = true
            break
        }
        return found != negated
    }

    /// Parses the class whose "[" is just before `index`, leaving `index` after its "]".
    static func parse(_ chars: [PatternChar], from index: inout Int, pattern: String) throws(PatternError) -> ScalarClass {
        func isPlain(_ position: Int, _ scalar: Unicode.Scalar) -> Bool {
            position < chars.count && !chars[position].escaped && chars[position].scalar == scalar
        }
        var position = index
        var negated = false
        if isPlain(position, "!") || isPlain(position, "^") {
            negated = true
            position += 1
        }
        var ranges: [ClosedRange<UInt32>] = []
        var first = true
        while true {
            guard position < chars.count else {
                throw PatternError(pattern: pattern, reason: "unclosed \"[\"")
            }
            if !first && isPlain(position, "]") {
                position += 1
                break
            }
            if isPlain(position, "[") && isPlain(position + 1, ":") {
                throw PatternError(
                    pattern: pattern,
                    reason: "character class names such as [:alpha:] are not supported (write \\[ for a literal \"[\")")
            }
            first = false
            let low = chars[position].scalar
            position += 1
            if isPlain(position, "-") && position + 1 < chars.count && !isPlain(position + 1, "]") {
                let high = chars[position + 1].scalar
                guard low.value <= high.value else {
                    throw PatternError(pattern: pattern, reason: "reversed range \"\(low)-\(high)\"")
                }
                ranges.append(low.value...high.value)
                position += 2
            } else {
                ranges.append(low.value...low.value)
            }
        }
        index = position
        return ScalarClass(ranges: ranges, negated: negated)
    }
}

// MARK: - Paths as bytes

/// Whether `literal` occurs in `bytes` at `position`; the caller checked that it fits.
@inline(__always)
func bytesEqual(_ bytes: UnsafeBufferPointer<UInt8>, _ position: Int, _ literal: [UInt8]) -> Bool {
    guard let base = bytes.baseAddress, !literal.isEmpty else { return literal.isEmpty }
    return literal.withUnsafeBufferPointer { literal in
        guard let other = literal.baseAddress else { return true }
        // Most literals in patterns are a few bytes, where a call to memcmp costs more than the loop.
        if literal.count <= 16 {
            for index in 0..<literal.count where base[position + index] != other[index] { return false }
            return true
        }
        return memcmp(base + position, other, literal.count) == 0
    }
}

/// The length of the UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
@inline(__always)
func scalarLength(_ lead: UInt8) -> Int {
    switch lead {
    case 0xF0...: return 4
    case 0xE0...: return 3
    case 0xC0...: return 2
    default: return 1
    }
}

/// The scalar value at `position` and its length in bytes. Input comes from a Swift String,
/// so it is valid UTF-8; the bounds checks only keep a damaged buffer from reading past the end.
@inline(__always)
func decodeScalar(_ bytes: UnsafeBufferPointer<UInt8>, at position: Int) -> (UInt32, Int) {
    let lead = bytes[position]
    let length = min(scalarLength(lead), bytes.count - position)
    switch length {
    case 2:
        return (UInt32(lead & 0x1F) << 6 | UInt32(bytes[position + 1] & 0x3F), 2)
    case 3:
        return (UInt32(lead & 0x0F) << 12 | UInt32(bytes[position + 1] & 0x3F) << 6
            | UInt32(bytes[position + 2] & 0x3F), 3)
    case 4:
        return (UInt32(lead & 0x07) << 18 | UInt32(bytes[position + 1] & 0x3F) << 12
            | UInt32(bytes[position + 2] & 0x3F) << 6 | UInt32(bytes[position + 3] & 0x3F), 4)
    default:
        return (UInt32(lead), 1)
    }
}

/// A path's UTF-8 bytes split at "/", made once per path and shared by every pattern tried.
struct SplitPath {
    private let bytes: [UInt8]
    /// The index of every "/" in `bytes`.
    private let separators: [Int]

    init(_ path: String) {
        bytes = Array(path.utf8)
        var separators: [Int] = []
        separators.reserveCapacity(16)
        for (index, byte) in bytes.enumerated() where byte == UInt8(ascii: "/") {
            separators.append(index)
        }
        self.separators = separators
    }

    func withSegments<R>(_ body: (borrowing SegmentedPath) -> R) -> R {
        bytes.withUnsafeBufferPointer { buffer in
            separators.withUnsafeBufferPointer { separators in
                body(SegmentedPath(bytes: buffer, separators: separators))
            }
        }
    }
}

/// A view of a SplitPath valid inside `withSegments`.
struct SegmentedPath: ~Copyable {
    let bytes: UnsafeBufferPointer<UInt8>
    let separators: UnsafeBufferPointer<Int>

    var count: Int { separators.count + 1 }

    @inline(__always)
    func segment(_ index: Int) -> UnsafeBufferPointer<UInt8> {
        let start = index == 0 ? 0 : separators[index - 1] + 1
        let end = index == separators.count ? bytes.count : separators[index]
        return UnsafeBufferPointer(rebasing: bytes[start..<end])
    }
}
