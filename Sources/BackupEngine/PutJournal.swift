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
// where the entry has them, then the path (in a `Journal` frame).

#if canImport(Glibc)
import Glibc
#endif

/// One kind of record a `Journal` holds.
protocol JournalRecord: Sendable {
    /// Appends the record's bytes to `out`.
    func encode(into out: inout [UInt8])
    /// The record these bytes hold; nil for anything else (the replay ends there).
    init?(journalRecord bytes: ArraySlice<UInt8>)
}

/// An append-only file of records written ahead of a SQLite store by its one writer (the sync
/// state's puts, the restore record's downloads): each record is in the file system when
/// `append` returns, and is kept in memory as pending until `folded()` says it is committed
/// and empties the file. A record is framed by its length (4 bytes) and an FNV-1a checksum
/// (8 bytes) over both, so a record cut short by a kill, or damaged, ends a replay there.
struct Journal<Record: JournalRecord>: Sendable {
    /// How many records may wait to be folded, and for how long.
    static var foldEvery: Int { 4096 }
    static var foldAfter: Duration { .seconds(1) }

    let path: String
    /// What the file holds, in words for messages ("the journal of the state's newest puts").
    let what: String
    private(set) var fd: Int32 = -1
    /// The records written since the last fold, in order.
    private(set) var pending: [Record] = []
    private var lastFold = ContinuousClock.now
    private var frame: [UInt8] = []

    init(path: String, what: String) {
        self.path = path
        self.what = what
    }

    var isOpen: Bool { fd >= 0 }

    /// Whether the pending records are due to be folded.
    var due: Bool {
        pending.count >= Self.foldEvery || (!pending.isEmpty && ContinuousClock.now - lastFold >= Self.foldAfter)
    }

    /// Opens a new, empty file (mode 0600); one left by a killed writer must be folded first.
    mutating func open() throws(StateStoreError) {
        let fd = FileName.withCString(path) { Glibc.open($0, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw failure(errno, "create") }
        self.fd = fd
        pending.removeAll()
        lastFold = ContinuousClock.now
    }

    /// Writes `record`, framed, in one write; it is pending until the next fold.
    mutating func append(_ record: Record) throws(StateStoreError) {
        frame.removeAll(keepingCapacity: true)
        frame.append(contentsOf: [0, 0, 0, 0])  // the length, set below
        record.encode(into: &frame)
        let length = UInt64(frame.count - 4)
        for index in 0..<4 { frame[index] = UInt8(truncatingIfNeeded: length >> (8 * UInt64(index))) }
        LittleEndian.put(Self.checksum(frame[...]), 8, &frame)
        let code = frame.withUnsafeBytes { writeAll(fd, $0) }
        if code != 0 { throw failure(code, "write to") }
        pending.append(record)
    }

    /// After the pending records were committed: the file starts empty again.
    mutating func folded() throws(StateStoreError) {
        pending.removeAll(keepingCapacity: true)
        lastFold = ContinuousClock.now
        guard ftruncate(fd, 0) == 0 else { throw failure(errno, "empty") }
    }

    /// Closes and removes the file, forgetting what was not folded.
    mutating func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
        pending.removeAll()
        _ = FileName.withCString(path) { unlink($0) }
    }

    /// The records of the file, up to its first incomplete or damaged one; nil when there is
    /// no file.
    func read() throws(StateStoreError) -> [Record]? {
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
        var records: [Record] = []
        var start = 0
        while bytes.count - start >= 4 {
            let end = start + 4 + Int(LittleEndian.get(bytes, start, 4))
            guard end + 8 <= bytes.count, LittleEndian.get(bytes, end, 8) == Self.checksum(bytes[start..<end]),
                  let record = Record(journalRecord: bytes[(start + 4)..<end])
            else { break }
            records.append(record)
            start = end + 8
        }
        return records
    }

    private func failure(_ code: Int32, _ operation: String) -> StateStoreError {
        StateStoreError(.io, path: path, "cannot \(operation) \(path), \(what): \(String(cString: strerror(code)))")
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

/// Little-endian integers in a journal's bytes.
enum LittleEndian {
    /// Appends the `count` low bytes of `value`.
    static func put(_ value: UInt64, _ count: Int, _ out: inout [UInt8]) {
        for index in 0..<count { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index)))) }
    }

    /// The `count` bytes at `at`.
    static func get<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, _ at: Int, _ count: Int) -> UInt64 where Bytes.Index == Int {
        var value: UInt64 = 0
        for index in 0..<count { value |= UInt64(bytes[at + index]) << (8 * UInt64(index)) }
        return value
    }
}

/// The sync state's journal of puts (see the top of this file).
public enum PutJournal {
    /// The journal's path beside the state file.
    public static func path(forState statePath: String) -> String { statePath + "-puts" }
}

/// A put's record.
extension StateEntry: JournalRecord {
    private static let hasDigest: UInt8 = 1
    private static let hasRemoteId: UInt8 = 2
    private static let hasModificationTime: UInt8 = 4
    private static let hasMetadata: UInt8 = 8

    func encode(into out: inout [UInt8]) {
        let entry = self
        var flags: UInt8 = 0
        if entry.digest != nil { flags |= Self.hasDigest }
        if entry.remoteId != nil { flags |= Self.hasRemoteId }
        if entry.mtimeNanoseconds != nil { flags |= Self.hasModificationTime }
        if entry.metadata != nil { flags |= Self.hasMetadata }
        out.append(flags)
        LittleEndian.put(UInt64(bitPattern: entry.size), 8, &out)
        entry.digest?.withUnsafeBytes { out.append(contentsOf: $0) }
        if let id = entry.remoteId {
            LittleEndian.put(UInt64(id.utf8.count), 4, &out)
            out.append(contentsOf: id.utf8)
        }
        if let mtime = entry.mtimeNanoseconds { LittleEndian.put(UInt64(bitPattern: mtime), 8, &out) }
        if let meta = entry.metadata {
            LittleEndian.put(UInt64(meta.mode), 4, &out)
            LittleEndian.put(UInt64(bitPattern: meta.mtimeNanoseconds), 8, &out)
            LittleEndian.put(UInt64(meta.uid), 4, &out)
            LittleEndian.put(UInt64(meta.gid), 4, &out)
        }
        out.append(contentsOf: entry.path.utf8)
    }

    init?(journalRecord body: ArraySlice<UInt8>) {
        var at = body.startIndex
        func take(_ count: Int) -> UInt64? {
            guard body.endIndex - at >= count else { return nil }
            defer { at += count }
            return LittleEndian.get(body, at, count)
        }
        guard let flags = take(1).map(UInt8.init(truncatingIfNeeded:)), let size = take(8) else { return nil }
        var digest: SHA256Digest?
        if flags & Self.hasDigest != 0 {
            guard body.endIndex - at >= 32 else { return nil }
            digest = body[at..<(at + 32)].withUnsafeBytes { SHA256Digest(bytes: $0) }
            at += 32
        }
        var remoteId: String?
        if flags & Self.hasRemoteId != 0 {
            guard let count = take(4), body.endIndex - at >= Int(count) else { return nil }
            remoteId = String(decoding: body[at..<(at + Int(count))], as: UTF8.self)
            at += Int(count)
        }
        var mtime: Int64?
        if flags & Self.hasModificationTime != 0 {
            guard let value = take(8) else { return nil }
            mtime = Int64(bitPattern: value)
        }
        var metadata: EntryMetadata?
        if flags & Self.hasMetadata != 0 {
            guard let mode = take(4), let time = take(8), let uid = take(4), let gid = take(4) else { return nil }
            metadata = EntryMetadata(mode: UInt32(truncatingIfNeeded: mode), mtimeNanoseconds: Int64(bitPattern: time),
                                     uid: UInt32(truncatingIfNeeded: uid), gid: UInt32(truncatingIfNeeded: gid))
        }
        guard at < body.endIndex else { return nil }
        self.init(path: String(decoding: body[at...], as: UTF8.self), size: Int64(bitPattern: size), digest: digest,
                          remoteId: remoteId, mtimeNanoseconds: mtime, metadata: metadata)
    }
}
