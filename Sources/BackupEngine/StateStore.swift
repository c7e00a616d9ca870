// The sync state in SQLite (WAL): what the engine believes the remote holds, the remote's
// identity, the write hold and small settings. One transaction per delete, and per put but
// during a run's uploads, whose puts are appended to a journal beside it (`PutJournal`) and
// folded in batches; either way a process killed at any instant loses at most the write in
// flight. The file is a cache:
// rule 2 rebuilds it from the remote's listing. Only this file touches the sync tables.

import CSQLite
import Foundation
import Synchronization

/// What the state knows of one remote file.
public struct StateEntry: Sendable, Equatable {
    public var path: String
    /// The size the file has on the remote.
    public var size: Int64
    /// The SHA-256 uploaded for a hash-compared entry; nil for size-compared or adopted
    /// entries (hash unknown).
    public var digest: SHA256Digest?
    public var remoteId: String?
    /// The local modification time (ns) a size-compared file had when it was uploaded, or
    /// when it was first found unchanged after an adoption; nil when none is recorded.
    public var mtimeNanoseconds: Int64?
    /// The mode, times and owner the marker records for the file: the local file's when it
    /// was uploaded, or when a change of them alone was recorded; nil when none is (an
    /// adopted file, or a state written before they were kept).
    public var metadata: EntryMetadata?

    public init(
        path: String, size: Int64, hash: String?, remoteId: String?, mtimeNanoseconds: Int64? = nil, metadata: EntryMetadata? = nil
    ) {
        self.init(
            path: path, size: size, digest: hash.flatMap(SHA256Digest.init(hex:)), remoteId: remoteId,
            mtimeNanoseconds: mtimeNanoseconds, metadata: metadata)
    }

    public init(
        path: String, size: Int64, digest: SHA256Digest?, remoteId: String?, mtimeNanoseconds: Int64? = nil,
        metadata: EntryMetadata? = nil
    ) {
        self.path = path
        self.size = size
        self.digest = digest
        self.remoteId = remoteId
        self.mtimeNanoseconds = mtimeNanoseconds
        self.metadata = metadata
    }

    /// The SHA-256 as lowercase hex; nil when none is recorded (text that is not 64 hex
    /// digits records none).
    public var hash: String? {
        get { digest?.hex }
        set { digest = newValue.flatMap(SHA256Digest.init(hex:)) }
    }
}

/// A path's new fingerprint, to record.
public struct FingerprintUpdate: Sendable, Equatable {
    public var path: String
    public var fingerprint: Fingerprint

    public init(path: String, fingerprint: Fingerprint) {
        self.path = path
        self.fingerprint = fingerprint
    }
}

/// Fingerprints of a scan's entries, each naming its entry by position: a first scan has one
/// per file, and a path String each would cost what the entries' packed paths saved.
public struct FingerprintUpdates: RandomAccessCollection, Sendable, Equatable, ExpressibleByArrayLiteral {
    public struct Item: Sendable, Equatable {
        public var entry: Int
        public var fingerprint: Fingerprint

        public init(entry: Int, fingerprint: Fingerprint) {
            self.entry = entry
            self.fingerprint = fingerprint
        }
    }

    /// Where the paths are read.
    private let entries: SyncEntryList
    private let items: [Item]

    public init(entries: SyncEntryList, items: [Item]) {
        self.entries = entries
        self.items = items
    }

    /// Updates of paths given as text (tests, and callers without entries).
    public init(_ updates: some Sequence<FingerprintUpdate>) {
        var entries = SyncEntryList()
        var items: [Item] = []
        for update in updates {
            items.append(Item(entry: entries.count, fingerprint: update.fingerprint))
            entries.append(SyncEntry(path: update.path, size: update.fingerprint.size, digest: nil, source: .absent))
        }
        self.init(entries: entries, items: items)
    }

    public init(arrayLiteral updates: FingerprintUpdate...) {
        self.init(updates)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { items.count }

    public subscript(position: Int) -> FingerprintUpdate {
        FingerprintUpdate(path: entries.path(at: items[position].entry), fingerprint: items[position].fingerprint)
    }

    public static func == (a: FingerprintUpdates, b: FingerprintUpdates) -> Bool {
        a.elementsEqual(b)
    }
}

/// What a local file looked like when it was hashed: while size, modification time and inode
/// are unchanged, the file is not read again.
public struct Fingerprint: Sendable, Equatable {
    public var size: Int64
    public var mtimeNanoseconds: Int64
    public var inode: UInt64
    /// The SHA-256 the file had.
    public var digest: SHA256Digest

    public init(size: Int64, mtimeNanoseconds: Int64, inode: UInt64, digest: SHA256Digest) {
        self.size = size
        self.mtimeNanoseconds = mtimeNanoseconds
        self.inode = inode
        self.digest = digest
    }

    /// The fingerprint with the SHA-256 spelt `hash` (64 hex digits); nil for other text.
    public init?(size: Int64, mtimeNanoseconds: Int64, inode: UInt64, hash: String) {
        guard let digest = SHA256Digest(hex: hash) else { return nil }
        self.init(size: size, mtimeNanoseconds: mtimeNanoseconds, inode: inode, digest: digest)
    }

    /// The SHA-256 as lowercase hex.
    public var hash: String { digest.hex }

    /// Whether a file with this size, mtime and inode is the one that was hashed.
    public func matches(size: Int64, mtimeNanoseconds: Int64, inode: UInt64) -> Bool {
        self.size == size && self.mtimeNanoseconds == mtimeNanoseconds && self.inode == inode
    }
}

extension Fingerprint {
    /// The local file at `path` read and hashed in one pass, with its size as read and its
    /// modification time and inode as opened. Throws `LocalFileError` for a file that cannot
    /// be opened or read, or is not a regular file (a FIFO is refused, never waited on).
    public static func ofLocalFile(_ path: String) throws -> Fingerprint {
        let (fd, status) = try LocalFileError.openForSending(path) { LocalFileError(errno: $0, reading: path) }
        defer { close(fd) }
        let (digest, size) = try SHA256Hasher.digestAndSize(ofOpenFile: fd, expectedSize: Int64(status.st_size), displayPath: path)
        return Fingerprint(opened: status, read: size, digest: digest)
    }

    /// The fingerprint of a file whose `fstat` at open was `status`, of which `size` bytes
    /// were read with `digest`.
    public init(opened status: stat, read size: Int64, digest: SHA256Digest) {
        self.init(size: size, mtimeNanoseconds: clampedNanoseconds(status.st_mtim), inode: UInt64(status.st_ino), digest: digest)
    }
}

/// The persistent state of one profile's sync, shared by the engine and `backup hold`.
public final class StateStore: Sendable {
    /// The newest format this build reads and writes (SQLite's user_version).
    public static let formatVersion: Int64 = 4

    public let path: String
    private let connection: LockedConnection
    /// The puts of the uploads in progress, written ahead of the database (`PutJournal`).
    /// Used only under the connection's lock, after it (one order: no deadlock).
    private let journal: Mutex<Journal<StateEntry>>

    /// Opens (creating it with mode 0600 if needed) the state file at `path`.
    ///
    /// Throws `StateStoreError` naming the file when it is damaged, not a state file, or
    /// from a newer version of backup.
    public init(path: String) throws {
        self.path = path
        journal = Mutex(Journal(path: PutJournal.path(forState: path), what: "the journal of the state's newest puts"))
        connection = LockedConnection(try SQLiteConnection.open(path: path, kind: StateStore.kind, formatVersion: StateStore.formatVersion) { db, from in
            if from < 1 {
                try db.exec("""
                    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                    CREATE TABLE IF NOT EXISTS entries (
                        path TEXT PRIMARY KEY, size INTEGER NOT NULL, hash TEXT, remote_id TEXT
                    ) WITHOUT ROWID;
                    """)
            }
            if from < 2 {
                try db.exec("""
                    CREATE TABLE IF NOT EXISTS fingerprints (
                        path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                        inode INTEGER NOT NULL, hash TEXT NOT NULL
                    ) WITHOUT ROWID;
                    """)
            }
            if from < 3 {
                // The mtime a size-compared file was uploaded with; the remote paths a restore
                // into the source has not restored yet (kept remotely until restored or abandoned).
                try db.exec("""
                    ALTER TABLE entries ADD COLUMN mtime_ns INTEGER;
                    CREATE TABLE IF NOT EXISTS restore_pending (path TEXT PRIMARY KEY) WITHOUT ROWID;
                    """)
            }
            if from < 4 {
                // The mode, times and owner the marker records per file (all four or none).
                try db.exec("""
                    ALTER TABLE entries ADD COLUMN meta_mode INTEGER;
                    ALTER TABLE entries ADD COLUMN meta_mtime INTEGER;
                    ALTER TABLE entries ADD COLUMN meta_uid INTEGER;
                    ALTER TABLE entries ADD COLUMN meta_gid INTEGER;
                    CREATE TABLE IF NOT EXISTS tree (path TEXT PRIMARY KEY, entry BLOB NOT NULL) WITHOUT ROWID;
                    """)
            }
        })
    }

    static let kind = StoreKind(
        name: "state file",
        startOver: "It is only a cache of what the remote holds: delete it (`backup forget` does this) "
            + "and the next sync rebuilds it from the remote.")

    private func withDB<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try connection.use(body)
    }

    /// `body` with the entries as every put so far left them: pending puts are folded first.
    private func withEntries<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try connection.use { db in
            try journal.withLock { journal in try Self.fold(&journal, into: db) }
            return try body(db)
        }
    }

    /// Commits the journal's pending puts to the database in one transaction, then empties it.
    private static func fold(_ journal: inout Journal<StateEntry>, into db: SQLiteConnection) throws {
        guard !journal.pending.isEmpty else { return }
        try insert(journal.pending, into: db)
        try journal.folded()
    }

    /// Inserts or replaces `entries` in one transaction.
    private static func insert(_ entries: [StateEntry], into db: SQLiteConnection) throws {
        guard !entries.isEmpty else { return }
        try db.transaction {
            for entry in entries { try db.run(insertEntry, values(entry)) }
        }
    }

    deinit {
        // A store let go of mid-run (a thrown error) folds what it can; what it cannot stays in
        // the file for the next run.
        try? endPutJournal()
    }

    // MARK: The put journal

    /// From now until `endPutJournal()`, each put is one append to a journal beside the state
    /// file rather than a transaction of its own (`PutJournal`); what a killed run left in
    /// one is folded first. For the one writer of the entries (the engine, under the profile's
    /// lock), around a run's uploads.
    public func beginPutJournal() throws {
        try recoverPuts()
        try connection.use { _ in try journal.withLock { journal in if !journal.isOpen { try journal.open() } } }
    }

    /// Folds the journal's puts into the database and removes the journal.
    public func endPutJournal() throws {
        try connection.use { db in
            try journal.withLock { journal in
                guard journal.isOpen else { return }
                try Self.fold(&journal, into: db)
                journal.close()
            }
        }
    }

    /// Folds the puts a killed run left in its journal into the database (in one
    /// transaction) and removes the journal; none: nothing to do. Only the writer of the
    /// entries may (the engine before a run, under the profile's lock): a journal in use by a
    /// run in another process is that run's to fold.
    public func recoverPuts() throws {
        try connection.use { db in
            try journal.withLock { journal in
                guard !journal.isOpen, let left = try journal.read() else { return }
                try Self.insert(left, into: db)
                journal.close()
            }
        }
    }

    // MARK: Entries

    /// Every entry, by path: with the puts of a run in progress, in this process or another.
    public func entries() throws -> [String: StateEntry] {
        try withEntries { db in
            // Another process's journal is read before the database: a put it folds meanwhile
            // is then seen twice (the same entry), never missed.
            let journaled = try othersJournal()
            var result: [String: StateEntry] = [:]
            try db.run("SELECT \(Self.entryColumns) FROM entries") { row in
                let entry = Self.entry(row)
                result[entry.path] = entry
            }
            for entry in journaled { result[entry.path] = entry }
            return result
        }
    }

    /// How many files the state records and their bytes, counted by SQLite (no entry is read),
    /// with the puts of a run in progress.
    public func totals() throws -> (files: Int, bytes: Int64) {
        try withEntries { db in
            let journaled = try othersJournal()
            var totals = (files: 0, bytes: Int64(0))
            try db.run("SELECT count(*), coalesce(sum(size), 0) FROM entries") { row in totals = (Int(row.int(0)), row.int(1)) }
            var last: [String: Int64] = [:]
            for entry in journaled { last[entry.path] = entry.size }
            for (path, size) in last {
                var recorded: Int64?
                try db.run("SELECT size FROM entries WHERE path = ?1", [.text(path)]) { row in recorded = row.int(0) }
                if let recorded {
                    totals.bytes += size - recorded
                } else {
                    totals.files += 1
                    totals.bytes += size
                }
            }
            return totals
        }
    }

    /// Whether no entry records a hash (there are none, or only files adopted from a listing),
    /// the puts of a run in progress or killed included: then no file can be found unchanged
    /// by its hash, and a scan may leave every new file's hash to its upload.
    public func holdsNoHashes() throws -> Bool {
        try withEntries { db in
            if try othersJournal().contains(where: { $0.digest != nil }) { return false }
            var found = false
            try db.run("SELECT 1 FROM entries WHERE hash IS NOT NULL LIMIT 1") { _ in found = true }
            return !found
        }
    }

    /// The puts a run in another process (or one killed) has in its journal and not yet in the
    /// database, for a reader; none when this store keeps the journal itself (folded by then).
    private func othersJournal() throws -> [StateEntry] {
        try journal.withLock { journal in journal.isOpen ? [] : try journal.read() ?? [] }
    }

    /// Every entry, sorted by the path's bytes (SQLite's BINARY collation).
    public func sortedEntries() throws -> [StateEntry] {
        var result: [StateEntry] = []
        try forEachSortedEntry { result.append($0) }
        return result
    }

    /// Calls `body` with every entry in path order (bytes), one at a time: the whole state
    /// is never held. `body` must not use this store (its connection is busy meanwhile).
    /// The puts of a run in progress elsewhere (or of a killed one, not yet folded) are merged
    /// in, in order: a dry run sees what a sync that folds them first would.
    public func forEachSortedEntry(_ body: (StateEntry) throws -> Void) throws {
        var journaled: [String: StateEntry] = [:]
        for entry in try othersJournal() { journaled[entry.path] = entry }
        let extra = journaled.values.sorted { ByteOrder.compare($0.path, $1.path) < 0 }
        var next = 0
        try withEntries { db in
            try db.run("SELECT \(Self.entryColumns) FROM entries ORDER BY path") { row in
                let entry = Self.entry(row)
                while next < extra.count && ByteOrder.compare(extra[next].path, entry.path) < 0 {
                    try body(extra[next])
                    next += 1
                }
                if next < extra.count && ByteOrder.compare(extra[next].path, entry.path) == 0 {
                    try body(extra[next])
                    next += 1
                } else {
                    try body(entry)
                }
            }
        }
        while next < extra.count {
            try body(extra[next])
            next += 1
        }
    }

    private static let entryColumns = "path, size, hash, remote_id, mtime_ns, meta_mode, meta_mtime, meta_uid, meta_gid"

    private static func entry(_ row: Row) -> StateEntry {
        var metadata: EntryMetadata?
        if let mode = row.optionalInt(5), let mtime = row.optionalInt(6), let uid = row.optionalInt(7), let gid = row.optionalInt(8) {
            metadata = EntryMetadata(mode: UInt32(truncatingIfNeeded: mode), mtimeNanoseconds: mtime,
                                     uid: UInt32(truncatingIfNeeded: uid), gid: UInt32(truncatingIfNeeded: gid))
        }
        return StateEntry(path: row.text(0) ?? "", size: row.int(1), digest: row.digest(2), remoteId: row.text(3),
                          mtimeNanoseconds: row.optionalInt(4), metadata: metadata)
    }

    private static func values(_ entry: StateEntry) -> [SQLValue] {
        let meta = entry.metadata
        return [.text(entry.path), .int(entry.size), SQLValue(entry.hash), SQLValue(entry.remoteId), SQLValue(entry.mtimeNanoseconds),
                SQLValue(meta.map { Int64($0.mode) }), SQLValue(meta?.mtimeNanoseconds), SQLValue(meta.map { Int64($0.uid) }),
                SQLValue(meta.map { Int64($0.gid) })]
    }

    private static let insertEntry = "INSERT OR REPLACE INTO entries (\(entryColumns)) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"

    /// Records one uploaded file: its own transaction, or while the put journal is open, one
    /// append to it (folded in batches).
    public func put(_ entry: StateEntry) throws {
        try withDB { db in
            try journal.withLock { journal in
                guard journal.isOpen else { return try db.run(Self.insertEntry, Self.values(entry)) }
                try journal.append(entry)
                if journal.due { try Self.fold(&journal, into: db) }
            }
        }
    }

    /// Records files whose mode, times or owner changed while their content did not (one
    /// transaction): the remote keeps its bytes, the marker takes the new metadata; a remote
    /// id is replaced where given (the provider set the metadata on its copy too).
    public func updateMetadata(_ changes: [(path: String, metadata: EntryMetadata, remoteId: String?)]) throws {
        guard !changes.isEmpty else { return }
        try withEntries { db in
            try db.transaction {
                for change in changes {
                    try db.run(
                        "UPDATE entries SET meta_mode = ?2, meta_mtime = ?3, meta_uid = ?4, meta_gid = ?5, remote_id = COALESCE(?6, remote_id) WHERE path = ?1",
                        [.text(change.path), .int(Int64(change.metadata.mode)), .int(change.metadata.mtimeNanoseconds),
                         .int(Int64(change.metadata.uid)), .int(Int64(change.metadata.gid)), SQLValue(change.remoteId)])
                }
            }
        }
    }

    /// Removes the entry of `path` and returns it (one transaction): what an upload that
    /// replaces the file does first, so a process killed while the new bytes are landing
    /// never leaves the state claiming the old ones.
    ///
    /// A path the state does not hold (every file of a first sync) costs one read, not a
    /// write transaction: only this process writes the entries (the profile's lock), so what
    /// the read finds is what the delete then removes, in one statement of its own.
    public func take(_ path: String) throws -> StateEntry? {
        try withEntries { db in
            var found: StateEntry?
            try db.run("SELECT \(Self.entryColumns) FROM entries WHERE path = ?1", [.text(path)]) { row in found = Self.entry(row) }
            if found != nil { try db.run("DELETE FROM entries WHERE path = ?1", [.text(path)]) }
            return found
        }
    }

    /// Forgets one deleted file (its own transaction).
    public func remove(_ path: String) throws {
        try withEntries { db in try db.run("DELETE FROM entries WHERE path = ?1", [.text(path)]) }
    }

    /// Applies a reconciliation with the remote listing in one transaction: `drop` paths
    /// are removed, `adopt` entries inserted or replaced.
    public func reconcile(drop: [String], adopt: [StateEntry]) throws {
        guard !drop.isEmpty || !adopt.isEmpty else { return }
        try withEntries { db in
            try db.transaction {
                for path in drop { try db.run("DELETE FROM entries WHERE path = ?1", [.text(path)]) }
                for entry in adopt { try db.run(Self.insertEntry, Self.values(entry)) }
            }
        }
    }

    /// Records the modification times of known entries that had none (adopted size-compared
    /// files found unchanged), in one transaction.
    public func recordModificationTimes(_ times: [(path: String, mtimeNanoseconds: Int64)]) throws {
        guard !times.isEmpty else { return }
        try withEntries { db in
            try db.transaction {
                for (path, mtime) in times {
                    try db.run("UPDATE entries SET mtime_ns = ?2 WHERE path = ?1", [.text(path), .int(mtime)])
                }
            }
        }
    }

    // MARK: Folders and links

    /// The folders and symbolic links of the marker written last (what only the marker holds),
    /// for a later marker to keep those the scan could not see then.
    public func treeEntries() throws -> [TreeEntry] {
        try withDB { db in
            var result: [TreeEntry] = []
            var failed = false
            try db.run("SELECT entry FROM tree ORDER BY path") { row in
                if let entry = try? JSONDecoder().decode(TreeEntry.self, from: row.blob(0)) { result.append(entry) } else { failed = true }
            }
            if failed { throw StateStoreError(.corrupt, path: path, "the state file \(path) is damaged (a folder or link record cannot be read). \(Self.kind.startOver)") }
            return result
        }
    }

    /// Replaces the recorded folders and links (one transaction).
    public func replaceTree(_ entries: [TreeEntry]) throws {
        let encoder = JSONEncoder()
        let rows = try entries.map { ($0.path, try encoder.encode($0)) }
        try withDB { db in
            try db.transaction {
                try db.exec("DELETE FROM tree")
                for (path, data) in rows { try db.run("INSERT OR REPLACE INTO tree (path, entry) VALUES (?1, ?2)", [.text(path), .blob(data)]) }
            }
        }
    }

    // MARK: Kept for a restore

    /// The remote paths a restore into the source has not restored yet, sorted by bytes.
    /// A sync keeps them on the remote (never deletes them) until they are restored or
    /// abandoned; they live here, not in the restore record, which a new restore replaces.
    public func restorePending() throws -> [String] {
        try withDB { db in
            var result: [String] = []
            try db.run("SELECT path FROM restore_pending ORDER BY path") { row in result.append(row.text(0) ?? "") }
            return result
        }
    }

    /// Adds paths to keep for a restore, in one transaction.
    public func addRestorePending(_ paths: [String]) throws {
        guard !paths.isEmpty else { return }
        try withDB { db in
            try db.transaction {
                for path in paths { try db.run("INSERT OR IGNORE INTO restore_pending (path) VALUES (?1)", [.text(path)]) }
            }
        }
    }

    /// Forgets paths kept for a restore (restored, or present in the source again).
    public func removeRestorePending(_ paths: [String]) throws {
        guard !paths.isEmpty else { return }
        try withDB { db in
            try db.transaction {
                for path in paths { try db.run("DELETE FROM restore_pending WHERE path = ?1", [.text(path)]) }
            }
        }
    }

    /// Forgets every path kept for a restore (`backup restore --abandon`); returns how many.
    @discardableResult
    public func abandonRestorePending() throws -> Int {
        try withDB { db in
            let count = try db.scalarInt("SELECT COUNT(*) FROM restore_pending") ?? 0
            try db.exec("DELETE FROM restore_pending")
            return Int(count)
        }
    }

    // MARK: Fingerprints

    /// Every cached fingerprint, by path: what the local file looked like when it was hashed.
    public func fingerprints() throws -> [String: Fingerprint] {
        try fingerprintCache().dictionary
    }

    /// The fingerprint cache, compact, for a scan (`fingerprints()` as a dictionary costs
    /// about four times the memory).
    public func fingerprintCache() throws -> FingerprintCache {
        try withDB { db in
            var cache = FingerprintCache()
            try db.run("SELECT count(*), coalesce(sum(length(CAST(path AS BLOB))), 0) FROM fingerprints") { row in
                cache.reserveCapacity(Int(row.int(0)), pathBytes: Int(row.int(1)))
            }
            try db.run("SELECT path, size, mtime_ns, inode, hash FROM fingerprints ORDER BY path") { row in
                // A row whose hash is not a digest is no fingerprint: the file is read again.
                guard let digest = row.digest(4) else { return }
                let print = Fingerprint(size: row.int(1), mtimeNanoseconds: row.int(2), inode: UInt64(bitPattern: row.int(3)), digest: digest)
                row.withTextBytes(0) { cache.append(path: $0, print) }
            }
            return cache
        }
    }

    /// Stores new fingerprints and forgets those of files that are gone, in one transaction.
    public func updateFingerprints(_ updates: [String: Fingerprint], removing removed: [String] = []) throws {
        try updateFingerprints(updates.map { FingerprintUpdate(path: $0.key, fingerprint: $0.value) }, removing: removed)
    }

    /// Records `updates` (a path named twice: the last counts) and forgets `removed`, in one
    /// transaction.
    public func updateFingerprints(_ updates: some Collection<FingerprintUpdate>, removing removed: [String] = []) throws {
        guard !updates.isEmpty || !removed.isEmpty else { return }
        try withDB { db in
            try db.transaction {
                for path in removed { try db.run("DELETE FROM fingerprints WHERE path = ?1", [.text(path)]) }
                for update in updates {
                    let (path, print) = (update.path, update.fingerprint)
                    try db.run(
                        "INSERT OR REPLACE INTO fingerprints (path, size, mtime_ns, inode, hash) VALUES (?1, ?2, ?3, ?4, ?5)",
                        [.text(path), .int(print.size), .int(print.mtimeNanoseconds), .int(Int64(bitPattern: print.inode)), .text(print.hash)])
                }
            }
        }
    }

    // MARK: Identity and sync history

    /// The identity the entries belong to (rule 3); nil before the first sync.
    public func identity() throws -> String? { try meta("identity") }

    public func setIdentity(_ identity: String) throws { try setMeta("identity", identity) }

    /// Drops every entry and the sync history and binds the state to `identity`, keeping
    /// the write hold and settings: an account switch means a full re-upload.
    public func resetIdentity(to identity: String) throws {
        try withEntries { db in
            try db.transaction {
                try db.exec("DELETE FROM entries")
                try db.run("DELETE FROM meta WHERE key IN ('lastSync')")
                try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('identity', ?1)", [.text(identity)])
            }
        }
    }

    /// When the last sync completed, or nil if none ever did against this identity.
    public func lastSync() throws -> Date? {
        try meta("lastSync").flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
    }

    public func setLastSync(_ date: Date) throws { try setMeta("lastSync", String(date.timeIntervalSince1970)) }

    // MARK: Write hold

    /// The write hold, read from the file every time so a hold set by another process
    /// (`backup hold set` in another terminal) stops a running sync.
    public func hold() throws -> WriteHold {
        guard let reason = try meta("hold") else { return .none }
        return .held(reason: reason)
    }

    public func setHold(_ hold: WriteHold) throws {
        switch hold {
        case .none: try setMeta("hold", nil)
        case .held(let reason): try setMeta("hold", reason)
        }
    }

    // MARK: Settings

    /// A small named value kept with the state (consent, app settings).
    public func meta(_ key: String) throws -> String? {
        try withDB { db in try db.scalarText("SELECT value FROM meta WHERE key = ?1", [.text(key)]) }
    }

    /// Sets or (with nil) removes a named value.
    public func setMeta(_ key: String, _ value: String?) throws {
        try withDB { db in
            if let value {
                try db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", [.text(key), .text(value)])
            } else {
                try db.run("DELETE FROM meta WHERE key = ?1", [.text(key)])
            }
        }
    }
}
