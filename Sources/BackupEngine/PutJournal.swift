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
// A record: its length (4 bytes), the entry, and an FNV-1a checksum (8 bytes) over both; a
// record cut short by a kill, or damaged, ends the file's replay there.

#if canImport(Glibc)
import Glibc
#endif

public struct PutJournal: Sendable {
    /// The journal's path beside the state file.
    public static func path(forState statePath: String) -> String { statePath + "-puts" }

    /// How many puts may wait to be folded, and for how long.
    static let foldEvery = 4096
    static let foldAfter: Duration = .seconds(1)

    let path: String
    private(set) var fd: Int32 = -1
    /// The puts written since the last fold, in order.
    private(set) var pending: [StateEntry] = []
    private var lastFold = ContinuousClock.now
    private var record: [UInt8] = []

    init(path: String) {
        self.path = path
    }

    var isOpen: Bool { fd >= 0 }

    /// Whether the pending puts are due to be folded.
    var due: Bool { pending.count >= Self.foldEvery || (!pending.isEmpty && ContinuousClock.now - lastFold >= Self.foldAfter) }

    /// Opens a new, empty journal (mode 0600); one left by a killed run must be folded first.
    mutating func open() throws(StateStoreError) {
        let fd = FileName.withCString(path) { Glibc.open($0, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw Self.failure(errno, "create", path) }
        self.fd = fd
        lastFold = ContinuousClock.now
    }

    /// Writes `entry`'s record; it is kept as pending until the next fold.
    mutating func append(_ entry: StateEntry) throws(StateStoreError) {
        Self.encode(entry, into: &record)
        let code = record.withUnsafeBytes { writeAll(fd, $0) }
        if code != 0 { throw Self.failure(code, "write to", path) }
        pending.append(entry)
    }

    /// After the pending puts were committed to the database: the file starts empty again.
    mutating func folded() throws(StateStoreError) {
        pending.removeAll(keepingCapacity: true)
        lastFold = ContinuousClock.now
        guard ftruncate(fd, 0) == 0 else { throw Self.failure(errno, "empty", path) }
    }

    /// Closes and removes the journal (its puts folded).
    mutating func close() {
        guard fd >= 0 else { return }
        _ = Glibc.close(fd)
        fd = -1
        _ = FileName.withCString(path) { unlink($0) }
    }

    /// The puts a journal file holds, up to its first incomplete or damaged record; nil when
    /// there is no file.
    static func read(_ path: String) throws(StateStoreError) -> [StateEntry]? {
        let fd = FileName.withCString(path) { Glibc.open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw failure(errno, "read", path)
        }
        defer { _ = Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 { throw failure(errno, "read", path) }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return decode(bytes)
    }

    // MARK: Records

    private static let hasDigest: UInt8 = 1
    private static let hasRemoteId: UInt8 = 2
    private static let hasModificationTime: UInt8 = 4
    private static let hasMetadata: UInt8 = 8

    static func encode(_ entry: StateEntry, into out: inout [UInt8]) {
        out.removeAll(keepingCapacity: true)
        out.append(contentsOf: [0, 0, 0, 0])  // the length, set below
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
        let length = UInt32(out.count - 4)
        for index in 0..<4 { out[index] = UInt8(truncatingIfNeeded: length >> (8 * UInt32(index))) }
        append(checksum(out[...]), 8, &out)
    }

    static func decode(_ bytes: [UInt8]) -> [StateEntry] {
        var entries: [StateEntry] = []
        var start = 0
        while bytes.count - start >= 4 {
            let length = Int(read(bytes, start, 4))
            let end = start + 4 + length
            guard length >= 9, end + 8 <= bytes.count, read(bytes, end, 8) == checksum(bytes[start..<end]),
                  let entry = entry(bytes[(start + 4)..<end])
            else { break }
            entries.append(entry)
            start = end + 8
        }
        return entries
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
        for index in 0..<count { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index)))) }
    }

    private static func read<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, _ at: Int, _ count: Int) -> UInt64
    where Bytes.Index == Int {
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

    private static func failure(_ code: Int32, _ operation: String, _ path: String) -> StateStoreError {
        StateStoreError(.io, path: path, "cannot \(operation) \(path), the journal of the state's newest puts: \(String(cString: strerror(code)))")
    }
}
