// What a backup keeps of an entry of the tree besides a file's content: its type, permission
// bits, modification time, owner, and a link's target. The scan reads it, the state records
// it per uploaded entry, the marker carries it (format 3), and restore applies it.

#if canImport(Glibc)
import Glibc
#endif

/// Whether this process runs as root, asked once: only root gives an owner (a restore's
/// files, a folder remote's copies) or keeps setuid, setgid and sticky bits.
public enum ThisProcess {
    public static let runsAsRoot = geteuid() == 0
}

/// The type of an entry of the tree.
public enum EntryKind: Sendable, Equatable, Hashable, Codable {
    /// A regular file; its content is on the remote.
    case file
    /// Another name of the regular file at `to` (an earlier path in byte order: the first
    /// name of its dev:inode in the scan). Uploaded as a file of its own; restored as a link.
    case hardLink(to: String)
    /// A symbolic link; `target` is its text in FileName's codec, byte-exact, never followed.
    case symlink(target: String)
    /// A folder; kept even when empty.
    case folder

    /// Whether the entry's content is a file on the remote.
    public var hasContent: Bool {
        switch self {
        case .file, .hardLink: true
        case .symlink, .folder: false
        }
    }
}

/// Permission bits, modification time and owner of an entry.
public struct EntryMetadata: Sendable, Equatable, Hashable, Codable {
    /// `st_mode & 0o7777`: permission bits with setuid, setgid and sticky.
    public var mode: UInt32
    /// The modification time in nanoseconds since 1970 (negative before).
    public var mtimeNanoseconds: Int64
    public var uid: UInt32
    public var gid: UInt32
    /// The name of `uid` on the machine that was backed up; nil where it has none.
    public var user: String?
    /// The name of `gid` on the machine that was backed up; nil where it has none.
    public var group: String?

    public init(mode: UInt32, mtimeNanoseconds: Int64, uid: UInt32, gid: UInt32, user: String? = nil, group: String? = nil) {
        self.mode = mode
        self.mtimeNanoseconds = mtimeNanoseconds
        self.uid = uid
        self.gid = gid
        self.user = user
        self.group = group
    }

    /// One line of text for a record: "mode mtime uid gid", then a tab and the user name and
    /// a tab and the group name (empty when none; a name holding a tab or a line feed is not kept).
    ///
    /// Written as bytes, not by interpolation: a restore records it for every file. A name is
    /// checked for the tab and line feed bytes, which `init(recordText:)` splits on.
    public var recordText: String {
        func kept(_ text: String?) -> String.UTF8View? {
            guard let utf8 = text?.utf8, !utf8.contains(UInt8(ascii: "\t")), !utf8.contains(UInt8(ascii: "\n")) else { return nil }
            return utf8
        }
        let user = kept(user), group = kept(group)
        // Four numbers of at most 20 digits and a sign, three separators, two tabs.
        let capacity = 4 * 21 + 5 + (user?.count ?? 0) + (group?.count ?? 0)
        return String(unsafeUninitializedCapacity: capacity) { out in
            var count = 0
            func put(_ byte: UInt8) {
                out[count] = byte
                count += 1
            }
            func put(_ value: Int64) {
                if value < 0 { put(UInt8(ascii: "-")) }
                // The digits come lowest first; they are turned round where they were written.
                var magnitude = value.magnitude
                let first = count
                repeat {
                    put(UInt8(ascii: "0") + UInt8(magnitude % 10))
                    magnitude /= 10
                } while magnitude > 0
                out[first..<count].reverse()
            }
            put(Int64(mode))
            put(UInt8(ascii: " "))
            put(mtimeNanoseconds)
            put(UInt8(ascii: " "))
            put(Int64(uid))
            put(UInt8(ascii: " "))
            put(Int64(gid))
            put(UInt8(ascii: "\t"))
            user?.forEach { put($0) }
            put(UInt8(ascii: "\t"))
            group?.forEach { put($0) }
            return count
        }
    }

    /// The metadata `recordText` wrote, or nil for text it does not make (one pass over the
    /// bytes: a restore record reads it for every file).
    public init?(recordText text: String) {
        var numbers: [Int64] = []
        numbers.reserveCapacity(4)
        var names: [String] = []
        var magnitude: UInt64 = 0, negative = false, digits = 0
        var nameStart: String.UTF8View.Index?
        let utf8 = text.utf8
        var index = utf8.startIndex
        while index != utf8.endIndex {
            let byte = utf8[index]
            if let start = nameStart {
                if byte == UInt8(ascii: "\t") {
                    names.append(String(text[start..<index]))
                    nameStart = utf8.index(after: index)
                }
            } else if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                guard digits > 0, magnitude <= (negative ? 1 << 63 : UInt64(Int64.max)) else { return nil }
                numbers.append(negative ? Int64(bitPattern: 0 &- magnitude) : Int64(magnitude))
                magnitude = 0; negative = false; digits = 0
                if byte == UInt8(ascii: "\t") {
                    guard numbers.count == 4 else { return nil }
                    nameStart = utf8.index(after: index)
                }
            } else if byte == UInt8(ascii: "-"), digits == 0, !negative {
                negative = true
            } else if (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte), digits < 20 {
                let (scaled, overflow) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, carry) = scaled.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                guard !overflow, !carry else { return nil }
                magnitude = sum
                digits += 1
            } else {
                return nil
            }
            index = utf8.index(after: index)
        }
        guard let start = nameStart, names.count == 1 else { return nil }
        names.append(String(text[start..<utf8.endIndex]))
        guard (0...0o7777).contains(numbers[0]), let uid = UInt32(exactly: numbers[2]), let gid = UInt32(exactly: numbers[3]) else {
            return nil
        }
        self.init(mode: UInt32(numbers[0]), mtimeNanoseconds: numbers[1], uid: uid, gid: gid,
                  user: names[0].isEmpty ? nil : names[0], group: names[1].isEmpty ? nil : names[1])
    }
}

/// An entry only the marker holds: a folder or a symbolic link (no content on the remote).
public struct TreeEntry: Sendable, Equatable, Codable {
    public var path: String
    /// `.folder` or `.symlink`.
    public var kind: EntryKind
    public var metadata: EntryMetadata

    public init(path: String, kind: EntryKind, metadata: EntryMetadata) {
        self.path = path
        self.kind = kind
        self.metadata = metadata
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// `time` in nanoseconds since 1970, clamped to what an Int64 holds (years 1677 to 2262): a
/// file dated outside that range (`touch -d 2300-01-01`) is kept at its end, never a trap.
public func clampedNanoseconds(_ time: timespec) -> Int64 {
    let (scaled, overflow) = Int64(time.tv_sec).multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return time.tv_sec < 0 ? .min : .max }
    let (sum, sumOverflow) = scaled.addingReportingOverflow(Int64(time.tv_nsec))
    return sumOverflow ? .max : sum
}

/// The timespec of `nanoseconds` since 1970 (a time before 1970 borrows a second, so the
/// nanoseconds stay in 0..<1e9).
public func timespecOf(nanoseconds: Int64) -> timespec {
    let split = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
    let (sec, nsec) = split.remainder < 0 ? (split.quotient - 1, split.remainder + 1_000_000_000) : split
    return timespec(tv_sec: Int(sec), tv_nsec: Int(nsec))
}

/// The times for `futimens`/`utimensat` that set the modification time to `nanoseconds` and
/// leave the access time as it is (UTIME_OMIT, (1 << 30) - 2: a macro Swift does not import).
public func modificationTimes(nanoseconds: Int64) -> [timespec] {
    [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), timespecOf(nanoseconds: nanoseconds)]
}

/// The target of the symbolic link `name` in `folderFD` (FileName's codec, byte-exact), read
/// without following it; nil when it is not a link or cannot be read.
public func readLinkTarget(_ folderFD: Int32, _ name: String) -> String? {
    var buffer = [CChar](repeating: 0, count: 4097)
    let count = FileName.withCString(name) { cName in
        buffer.withUnsafeMutableBufferPointer { raw -> Int in
            guard let base = raw.baseAddress else { return -1 }
            return readlinkat(folderFD, cName, base, raw.count)
        }
    }
    guard count >= 0, count < buffer.count else { return nil }
    return FileName.string(fromBytes: buffer.prefix(count).map { UInt8(bitPattern: $0) })
}
