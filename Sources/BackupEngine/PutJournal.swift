// The puts of a run's uploads, written ahead of the state's database: one append to a file
// per uploaded file instead of one SQLite transaction (a B-tree page written to the WAL and
// seven lock calls), folded into the database in one transaction every few thousand puts,
// at least once a second, and before anything else reads or changes the entries.
//
// Rule 7's "state is saved after every put" holds as the database's own WAL holds it with
// `synchronous = NORMAL`: each put is in the file system when `put` returns, so a process
// killed at any instant loses none (a power loss may lose the newest, as it may lose the
// WAL's newest frames; the remote stays the truth, rule 2). The next run of the engine, which
// holds the profile's lock, folds what a killed run left before it reads the state.
//
// A put's record: flags, the size, the digest, the remote id, the mtime and the metadata
// where the entry has them, then the path (in a `JournalFile` frame).

#if canImport(Glibc)
import Glibc
#endif

/// An append-only file of records written ahead of a SQLite store by its one writer
/// (`PutJournal` for the sync state, the restore record's steps): each record is in the file
/// system when `append` returns; `folded()` empties the file once its records are committed.
/// A record is framed by its length (4 bytes) and an FNV-1a checksum (8 bytes) over both, so
/// a record cut short by a kill, or damaged, ends a replay there.
struct JournalFile: Sendable {
    /// How many records may wait to be folded, and for how long.
    static let foldEvery = 4096
    static let foldAfter: Duration = .seconds(1)

    let path: String
    /// What the file holds, in words for messages ("the journal of the state's newest puts").
    let what: String
    private(set) var fd: Int32 = -1
    /// Records written since the last fold.
    private(set) var waiting = 0
    private var lastFold = ContinuousClock.now
    private var frame: [UInt8] = []

    init(path: String, what: String) {
        self.path = path
        self.what = what
    }

    var isOpen: Bool { fd >= 0 }

    /// Whether the waiting records are due to be folded.
    var due: Bool { waiting >= Self.foldEvery || (waiting > 0 && ContinuousClock.now - lastFold >= Self.foldAfter) }

    /// Opens a new, empty file (mode 0600); one left by a killed writer must be folded first.
    mutating func open() throws(StateStoreError) {
        let fd = FileName.withCString(path) { Glibc.open($0, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw failure(errno, "create") }
        self.fd = fd
        waiting = 0
        lastFold = ContinuousClock.now
    }

    /// Writes one record, framed, in one write.
    mutating func append(_ record: [UInt8]) throws(StateStoreError) {
        frame.removeAll(keepingCapacity: true)
        Self.put(UInt64(record.count), 4, &frame)
        frame.append(contentsOf: record)
        Self.put(Self.checksum(frame[...]), 8, &frame)
        let code = frame.withUnsafeBytes { writeAll(fd, $0) }
        if code != 0 { throw failure(code, "write to") }
        waiting += 1
    }

    /// After the waiting records were committed: the file starts empty again.
    mutating func folded() throws(StateStoreError) {
        waiting = 0
        lastFold = ContinuousClock.now
        guard ftruncate(fd, 0) == 0 else { throw failure(errno, "empty") }
    }

    /// Closes and removes the file.
    mutating func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
        waiting = 0
        _ = FileName.withCString(path) { unlink($0) }
    }

    /// The records of the file at `path`, up to its first incomplete or damaged one; nil when
    /// there is no file.
    func read() throws(StateStoreError) -> [ArraySlice<UInt8>]? {
        let fd = FileName.withCString(path) { Glibc.open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw failure(errno, "read")
        }
        defer { _ = Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 { throw failure(errno, "read") }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        var records: [ArraySlice<UInt8>] = []
        var start = 0
        while bytes.count - start >= 4 {
            let end = start + 4 + Int(Self.get(bytes, start, 4))
            guard end + 8 <= bytes.count, Self.get(bytes, end, 8) == Self.checksum(bytes[start..<end]) else { break }
            records.append(bytes[(start + 4)..<end])
            start = end + 8
        }
        return records
    }

    private func failure(_ code: Int32, _ operation: String) -> StateStoreError {
        StateStoreError(.io, path: path, "cannot \(operation) \(path), \(what): \(String(cString: strerror(code)))")
    }

    /// Appends the `count` low bytes of `value`, little-endian.
    static func put(_ value: UInt64, _ count: Int, _ out: inout [UInt8]) {
        for index in 0..<count { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index)))) }
    }

    /// The `count` bytes at `at`, little-endian.
    static func get<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, _ at: Int, _ count: Int) -> UInt64 where Bytes.Index == Int {
        var value: UInt64 = 0
        for index in 0..<count { value |= UInt64(bytes[at + index]) << (8 * UInt64(index)) }
        return value
    }

    /// FNV-1a, 64 bits: enough to tell a torn or damaged record from a whole one.
    private static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}

/// The sync state's journal of puts (see the top of this file).
public struct PutJournal: Sendable {
    /// The journal's path beside the state file.
    public static func path(forState statePath: String) -> String { statePath + "-puts" }

    private(set) var file: JournalFile
    /// The puts written since the last fold, in order.
    private(set) var pending: [StateEntry] = []
    private var record: [UInt8] = []

    init(path: String) {
        file = JournalFile(path: path, what: "the journal of the state's newest puts")
    }

    var path: String { file.path }
    var isOpen: Bool { file.isOpen }
    var due: Bool { file.due }

    mutating func open() throws(StateStoreError) { try file.open() }

    /// Writes `entry`'s record; it is kept as pending until the next fold.
    mutating func append(_ entry: StateEntry) throws(StateStoreError) {
        Self.encode(entry, into: &record)
        try file.append(record)
        pending.append(entry)
    }

    /// After the pending puts were committed to the database: the file starts empty again.
    mutating func folded() throws(StateStoreError) {
        pending.removeAll(keepingCapacity: true)
        try file.folded()
    }

    /// Closes and removes the journal (its puts folded).
    mutating func close() { file.close() }

    /// The puts the journal file holds, up to its first incomplete or damaged record; nil when
    /// there is no file.
    func read() throws(StateStoreError) -> [StateEntry]? {
        guard let records = try file.read() else { return nil }
        var entries: [StateEntry] = []
        for record in records {
            guard let entry = Self.entry(record) else { break }
            entries.append(entry)
        }
        return entries
    }

    // MARK: Records

    private static let hasDigest: UInt8 = 1
    private static let hasRemoteId: UInt8 = 2
    private static let hasModificationTime: UInt8 = 4
    private static let hasMetadata: UInt8 = 8

    static func encode(_ entry: StateEntry, into out: inout [UInt8]) {
        out.removeAll(keepingCapacity: true)
        var flags: UInt8 = 0
        if entry.digest != nil { flags |= hasDigest }
        if entry.remoteId != nil { flags |= hasRemoteId }
        if entry.mtimeNanoseconds != nil { flags |= hasModificationTime }
        if entry.metadata != nil { flags |= hasMetadata }
        out.append(flags)
        append(UInt64(bitPattern: entry.size), 8, &out)
        entry.digest?.withUnsafeBytes { out.append(contentsOf: $0) }
        if let id = entry.remoteId {
            append(UInt64(id.utf8.count), 4, &out)
            out.append(contentsOf: id.utf8)
        }
        if let mtime = entry.mtimeNanoseconds { append(UInt64(bitPattern: mtime), 8, &out) }
        if let meta = entry.metadata {
            append(UInt64(meta.mode), 4, &out)
            append(UInt64(bitPattern: meta.mtimeNanoseconds), 8, &out)
            append(UInt64(meta.uid), 4, &out)
            append(UInt64(meta.gid), 4, &out)
        }
        out.append(contentsOf: entry.path.utf8)
    }

    private static func entry(_ body: ArraySlice<UInt8>) -> StateEntry? {
        var at = body.startIndex
        func take(_ count: Int) -> UInt64? {
            guard body.endIndex - at >= count else { return nil }
            defer { at += count }
            return read(body, at, count)
        }
        guard let flags = take(1).map(UInt8.init(truncatingIfNeeded:)), let size = take(8) else { return nil }
        var digest: SHA256Digest?
        if flags & hasDigest != 0 {
            guard body.endIndex - at >= 32 else { return nil }
            digest = body[at..<(at + 32)].withUnsafeBytes { SHA256Digest(bytes: $0) }
            at += 32
        }
        var remoteId: String?
        if flags & hasRemoteId != 0 {
            guard let count = take(4), body.endIndex - at >= Int(count) else { return nil }
            remoteId = String(decoding: body[at..<(at + Int(count))], as: UTF8.self)
            at += Int(count)
        }
        var mtime: Int64?
        if flags & hasModificationTime != 0 {
            guard let value = take(8) else { return nil }
            mtime = Int64(bitPattern: value)
        }
        var metadata: EntryMetadata?
        if flags & hasMetadata != 0 {
            guard let mode = take(4), let time = take(8), let uid = take(4), let gid = take(4) else { return nil }
            metadata = EntryMetadata(mode: UInt32(truncatingIfNeeded: mode), mtimeNanoseconds: Int64(bitPattern: time),
                                     uid: UInt32(truncatingIfNeeded: uid), gid: UInt32(truncatingIfNeeded: gid))
        }
        guard at < body.endIndex else { return nil }
        return StateEntry(path: String(decoding: body[at...], as: UTF8.self), size: Int64(bitPattern: size), digest: digest,
                          remoteId: remoteId, mtimeNanoseconds: mtime, metadata: metadata)
    }

    private static func append(_ value: UInt64, _ count: Int, _ out: inout [UInt8]) {
        JournalFile.put(value, count, &out)
    }

    private static func read(_ bytes: ArraySlice<UInt8>, _ at: Int, _ count: Int) -> UInt64 {
        JournalFile.get(bytes, at, count)
    }
}
