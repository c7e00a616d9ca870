// The restore record in SQLite (WAL): the plan, and per file whether it is pending,
// downloaded (staged, not placed) or done (placed), with its failed attempts. Saved after
// every download and every placement, so a process killed at any instant resumes from it.
// The record's writer (the restore holding the lock) saves each download as one append to
// a journal beside it (`Journal` of `DownloadStep`s: a file's index and status), folded into SQLite in
// batches and before any other read or change; a reader sees the journal's steps too, and
// the next writer folds what a killed one left.
//
// Format 2 stores the target folder once and, per file, the remote path read and the
// relative path placed at; it names no local path, so an edited record cannot point a
// restore outside its target (placement checks a place path as it checks a remote path).
// A format 1 record (which held local paths) is discarded when opened: start again.

import Foundation
import Synchronization

/// Where one file of the plan stands.
public enum RestoreFileStatus: Int64, Sendable, Equatable {
    case pending = 0
    /// Downloaded into the staging area, not yet placed.
    case downloaded = 1
    /// Placed: never downloaded again.
    case done = 2
}

/// One file of the record.
public struct RecordedFile: Sendable, Equatable {
    /// The file's position in the plan.
    public var index: Int
    public var file: RestoreFile
    public var status: RestoreFileStatus
    public var attempts: Int
    public var lastError: String?
}

/// The persistent record of one restore.
public final class RestoreRecord: Sendable {
    public static let formatVersion: Int64 = 3

    public let path: String
    private let connection: LockedConnection
    /// Whether this is the record's one writer (`init(path:writer:)`).
    public let writer: Bool
    /// The writer's steps not yet folded; used only under the connection's lock, after it.
    private let steps: Mutex<Journal<DownloadStep>>

    /// The journal's path beside the record.
    public static func stepsPath(forRecord path: String) -> String { path + "-steps" }

    static let kind = StoreKind(
        name: "restore record",
        startOver: "Delete it and start the restore again without --resume: files already placed are "
            + "compared, not downloaded twice.")

    /// Opens (creating it with mode 0600 if needed) the record at `path`.
    ///
    /// A `writer` (one process at a time: the restore that holds the lock) folds what a killed
    /// writer left in the journal, and saves each download there; any other opening only
    /// reads, the journal's steps included.
    public init(path: String, writer: Bool = false) throws {
        self.path = path
        self.writer = writer
        steps = Mutex(Journal(path: Self.stepsPath(forRecord: path), what: "the journal of the restore's newest downloads"))
        connection = LockedConnection(try SQLiteConnection.open(path: path, kind: RestoreRecord.kind, formatVersion: RestoreRecord.formatVersion) { db, version in
            // Format 1 named local paths: nothing of it is trusted or kept.
            if version < 2 { try db.exec("DROP TABLE IF EXISTS restore_files; DROP TABLE IF EXISTS restore_meta;") }
            try db.exec("""
                CREATE TABLE IF NOT EXISTS restore_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS restore_files (
                    idx INTEGER PRIMARY KEY, remote_path TEXT NOT NULL, place_path TEXT NOT NULL UNIQUE,
                    required INTEGER NOT NULL, grp TEXT, sha256 TEXT, size INTEGER,
                    status INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT
                );
                """)
            // Format 3: each file's mode, times and owner, and the file it is a hard link of.
            if version < 3 {
                try db.exec("ALTER TABLE restore_files ADD COLUMN meta TEXT; ALTER TABLE restore_files ADD COLUMN link_to TEXT;")
            }
        })
        if writer { try connection.use { db in try takeOverLeftSteps(db) } }
    }

    /// Folds what a killed writer left in the journal, and removes it.
    private func takeOverLeftSteps(_ db: SQLiteConnection) throws {
        try steps.withLock { steps in
            guard !steps.isOpen, let left = try steps.read() else { return }
            try Self.apply(left, to: db)
            steps.close()
        }
    }

    deinit {
        // A writer let go of folds its last steps; one killed leaves them for the next.
        _ = try? connection.use { db in
            try steps.withLock { steps in
                guard steps.isOpen else { return }
                try Self.fold(&steps, into: db)
                steps.close()
            }
        }
    }

    /// `body` with the record as every step so far left it: the writer's waiting steps are
    /// folded first.
    private func withDB<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try connection.use { db in
            try steps.withLock { steps in try Self.fold(&steps, into: db) }
            return try body(db)
        }
    }

    /// `withDB` for a change: an opening that was not made the writer and changes the record
    /// takes over a killed writer's steps first (its own changes must come after them).
    private func changing<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try withDB { db in
            if !writer { try takeOverLeftSteps(db) }
            return try body(db)
        }
    }

    /// Commits `steps`' waiting statuses in one transaction, then empties the journal.
    private static func fold(_ steps: inout Journal<DownloadStep>, into db: SQLiteConnection) throws {
        guard !steps.pending.isEmpty else { return }
        try apply(steps.pending, to: db)
        try steps.folded()
    }

    private static func apply(_ steps: [DownloadStep], to db: SQLiteConnection) throws {
        guard !steps.isEmpty else { return }
        try db.transaction {
            for step in steps {
                try db.run("UPDATE restore_files SET status = ?1 WHERE idx = ?2", [.int(step.status.rawValue), .int(step.index)])
            }
        }
    }

    /// The statuses another process's writer (or a killed one) has in its journal and not yet
    /// in the record, by index; none for the writer itself (folded by then).
    private func othersSteps() throws -> [Int64: RestoreFileStatus] {
        guard !writer else { return [:] }
        let read = try steps.withLock { steps in try steps.read() } ?? []
        var latest: [Int64: RestoreFileStatus] = [:]
        for step in read { latest[step.index] = step.status }
        return latest
    }

    /// Replaces whatever the record held with `plan`, every file pending (one transaction).
    ///
    /// A plan that places two files at one path is refused (a damaged or hostile listing):
    /// the planner deduplicates, and the record keeps it so.
    public func begin(_ plan: RestorePlan) throws {
        try record(source: plan.source, target: plan.target) { add in
            for (index, file) in plan.files.enumerated() { try add(Int64(index), file) }
            return plan.tree
        }
    }

    /// Replaces whatever the record held with the plan `write` hands to `add` file by file
    /// (each with an id: the record's order is the ids' order), every file pending, and the
    /// folders and links it returns; all in one transaction, so a plan that fails half-way
    /// leaves the earlier record as it was. No plan is held here: a planner that streams its
    /// files writes a million of them without holding them.
    public func record(
        source: SourceRef, target: String, _ write: (_ add: (Int64, RestoreFile) throws -> Void) throws -> [TreeEntry]
    ) throws {
        let source = try JSONEncoder().encode(source)
        try changing { db in
            // The steps of the plan replaced go with it (folded into it by now, then removed):
            // none of them may ever be taken for a file of the new plan.
            steps.withLock { steps in steps.close() }
            try db.transaction {
                try db.exec("DELETE FROM restore_files; DELETE FROM restore_meta;")
                try db.run("INSERT INTO restore_meta (key, value) VALUES ('source', ?1)", [.text(String(decoding: source, as: UTF8.self))])
                try db.run("INSERT INTO restore_meta (key, value) VALUES ('target', ?1)", [.text(target)])
                let tree = try write { id, file in
                    try db.run(
                        "INSERT INTO restore_files (idx, remote_path, place_path, required, grp, sha256, size, meta, link_to) "
                            + "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (place_path) DO NOTHING",
                        [
                            .int(id), .text(file.remotePath), .text(file.placePath), .int(file.required ? 1 : 0),
                            SQLValue(file.group), SQLValue(file.sha256), file.size.map { .int($0) } ?? .null,
                            SQLValue(file.metadata?.recordText), SQLValue(file.hardLinkTo),
                        ])
                    if db.changes == 0 {
                        throw StateStoreError(.corrupt, path: self.path, "the restore plan places two files at \(String(reflecting: file.placePath)); nothing was recorded")
                    }
                }
                let encoded = try JSONEncoder().encode(tree)
                try db.run("INSERT INTO restore_meta (key, value) VALUES ('tree', ?1)", [.text(String(decoding: encoded, as: UTF8.self))])
            }
        }
    }

    /// The bytes the pending files have still to download (their listed sizes).
    public func pendingBytes() throws -> Int64 {
        try withDB { db in
            var total: Int64 = 0
            try db.run("SELECT coalesce(sum(size), 0) FROM restore_files WHERE status = \(RestoreFileStatus.pending.rawValue)") { row in
                total = row.int(0)
            }
            return total
        }
    }

    /// The target folder the recorded plan restores into, or nil when the record holds none.
    public func target() throws -> String? {
        try withDB { db in try db.scalarText("SELECT value FROM restore_meta WHERE key = 'target'") }
    }

    /// The pinned source of the recorded plan, or nil when the record holds none.
    public func source() throws -> SourceRef? {
        guard let text = try withDB({ db in try db.scalarText("SELECT value FROM restore_meta WHERE key = 'source'") }) else {
            return nil
        }
        do {
            return try JSONDecoder().decode(SourceRef.self, from: Data(text.utf8))
        } catch {
            throw StateStoreError(.corrupt, path: path, "the restore record \(path) is damaged (its source cannot be read). \(RestoreRecord.kind.startOver)")
        }
    }

    /// Every file of the plan, in plan order.
    public func files() throws -> [RecordedFile] {
        var result: [RecordedFile] = []
        result.reserveCapacity(try count(.all))
        try forEachFile { result.append($0) }
        return result
    }

    /// Which files of the plan a query reads.
    public enum Selection: Sendable {
        case all
        /// Placed.
        case done
        /// Pending or downloaded: not yet placed.
        case notDone

        fileprivate var condition: String {
            switch self {
            case .all: "1"
            case .done: "status = \(RestoreFileStatus.done.rawValue)"
            case .notDone: "status <> \(RestoreFileStatus.done.rawValue)"
            }
        }
    }

    /// How many files of the plan are in `selection`.
    public func count(_ selection: Selection) throws -> Int {
        if try !othersSteps().isEmpty {
            var count = 0
            try forEachFile(selection) { _ in count += 1 }
            return count
        }
        return try withDB { db in
            var count = 0
            try db.run("SELECT count(*) FROM restore_files WHERE \(selection.condition)") { row in count = Int(row.int(0)) }
            return count
        }
    }

    /// Calls `body` with each file of `selection`, in plan order, one row at a time: a large
    /// plan is never all in memory for a pass over it. `body` must not use this record.
    public func forEachFile(_ selection: Selection = .all, _ body: (RecordedFile) throws -> Void) throws {
        try forEachFile(where: selection.condition, [], body)
    }

    /// One group of the plan, as a run goes through it: which files it has, and how many
    /// of them are placed or staged (8 bytes a file: never the files themselves).
    public struct Group: Sendable, Equatable {
        /// nil for a file with no group (it is its own group).
        public var name: String?
        /// Whether any file of it is required.
        public var required: Bool
        /// Its files' record indices, in plan order.
        public var members: [Int64]
        public var done = 0
        public var staged = 0
    }

    /// The plan's groups in plan order of their first file (a file with no group is its own
    /// group), read in one pass that decodes no file.
    public func groups() throws -> [Group] {
        let journaled = try othersSteps()
        return try withDB { db in
            var groups: [Group] = []
            var position: [String: Int] = [:]
            try db.run("SELECT idx, grp, required, status FROM restore_files ORDER BY idx") { row in
                let at: Int
                if let name = row.text(1) {
                    if let known = position[name] {
                        at = known
                    } else {
                        at = groups.count
                        position[name] = at
                        groups.append(Group(name: name, required: false, members: []))
                    }
                } else {
                    at = groups.count
                    groups.append(Group(name: nil, required: false, members: []))
                }
                groups[at].members.append(row.int(0))
                groups[at].required = groups[at].required || row.int(2) != 0
                switch journaled[row.int(0)] ?? RestoreFileStatus(rawValue: row.int(3)) {
                case .done: groups[at].done += 1
                case .downloaded: groups[at].staged += 1
                default: break
                }
            }
            return groups
        }
    }

    /// Calls `body` with each file of `group`, in plan order.
    public func forEachFile(of group: Group, _ body: (RecordedFile) throws -> Void) throws {
        guard let first = group.members.first, let last = group.members.last else { return }
        // The rows between its first and last file: for a plan made by the planner, exactly
        // its files (a group's files are contiguous); others in between are skipped.
        var next = 0
        try forEachFile(where: "idx BETWEEN ?1 AND ?2", [.int(first), .int(last)]) { recorded in
            guard next < group.members.count, Int64(recorded.index) == group.members[next] else { return }
            next += 1
            try body(recorded)
        }
    }

    /// Up to `limit` pending files after record index `after` (nil: from the first), in plan
    /// order: their record indices and remote paths. A caller pages through a large plan.
    public func pendingPaths(after: Int64?, limit: Int) throws -> [(index: Int64, remotePath: String)] {
        try withDB { db in
            var page: [(index: Int64, remotePath: String)] = []
            try db.run(
                "SELECT idx, remote_path FROM restore_files WHERE status = \(RestoreFileStatus.pending.rawValue) AND idx > ?1 "
                    + "ORDER BY idx LIMIT ?2", [.int(after ?? .min), .int(Int64(limit))]
            ) { row in page.append((row.int(0), row.text(1) ?? "")) }
            return page
        }
    }

    /// The placed files that are hard links of another placed file, each after that file:
    /// the pairs a restore may link (whether their contents match is the tree's to check).
    public func placedLinkPairs() throws -> [(first: RestoreFile, second: RestoreFile)] {
        var seconds: [RestoreFile] = []
        try forEachFile(where: "status = \(RestoreFileStatus.done.rawValue) AND link_to IS NOT NULL", []) { seconds.append($0.file) }
        var pairs: [(first: RestoreFile, second: RestoreFile)] = []
        for second in seconds {
            guard let first = second.hardLinkTo else { continue }
            try forEachFile(where: "status = \(RestoreFileStatus.done.rawValue) AND place_path = ?1", [.text(first)]) { found in
                pairs.append((found.file, second))
            }
        }
        return pairs
    }

    private func forEachFile(where condition: String, _ values: [SQLValue], _ body: (RecordedFile) throws -> Void) throws {
        // Read before the record: a step folded meanwhile is then seen twice, never missed.
        let journaled = try othersSteps()
        try withDB { db in
            // Texts that repeat from file to file (group and owner names) are held once.
            var names: [String: String] = [:]
            func shared(_ text: String?) -> String? {
                guard let text else { return nil }
                if let known = names[text] { return known }
                if names.count < 4096 { names[text] = text }
                return text
            }
            try db.run(
                "SELECT idx, remote_path, place_path, required, grp, sha256, size, status, attempts, last_error, meta, link_to "
                    + "FROM restore_files WHERE \(condition) ORDER BY idx", values
            ) { row in
                let remotePath = row.text(1) ?? ""
                // Most files are placed where they were: one String for both paths.
                let placed = row.withTextBytes(2) { bytes in remotePath.utf8.elementsEqual(bytes) } ? remotePath : row.text(2) ?? ""
                let digest = row.digest(5)
                // A hash that is not one would let a download go unverified: the record is refused.
                if digest == nil && !row.isNull(5) {
                    throw StateStoreError(
                        .corrupt, path: self.path,
                        "the restore record \(self.path) is damaged (the SHA-256 of \(String(reflecting: remotePath)) is not one). \(RestoreRecord.kind.startOver)")
                }
                var metadata = row.text(10).flatMap(EntryMetadata.init(recordText:))
                if let read = metadata {
                    metadata?.user = shared(read.user)
                    metadata?.group = shared(read.group)
                }
                let file = RestoreFile(
                    remotePath: remotePath, placePath: placed, required: row.int(3) != 0,
                    group: shared(row.text(4)), digest: digest, size: row.isNull(6) ? nil : row.int(6),
                    metadata: metadata, hardLinkTo: row.text(11))
                try body(RecordedFile(
                    index: Int(row.int(0)), file: file,
                    status: journaled[row.int(0)] ?? RestoreFileStatus(rawValue: row.int(7)) ?? .pending,
                    attempts: Int(row.int(8)), lastError: row.text(9)))
            }
        }
    }

    /// The recorded plan, or nil when the record holds none.
    public func plan() throws -> RestorePlan? {
        guard let source = try source() else { return nil }
        return RestorePlan(source: source, target: try target() ?? "", files: try files().map(\.file), tree: try tree())
    }

    /// The folders and symbolic links of the recorded plan (none for a record without them).
    public func tree() throws -> [TreeEntry] {
        guard let text = try withDB({ db in try db.scalarText("SELECT value FROM restore_meta WHERE key = 'tree'") }) else {
            return []
        }
        do {
            return try JSONDecoder().decode([TreeEntry].self, from: Data(text.utf8))
        } catch {
            throw StateStoreError(.corrupt, path: path, "the restore record \(path) is damaged (its folders and links cannot be read). \(RestoreRecord.kind.startOver)")
        }
    }

    /// Sets the status of files (one transaction).
    public func setStatus(_ status: RestoreFileStatus, _ indices: [Int]) throws {
        if writer, indices.count == 1, let index = indices.first {
            // Each download is saved so: one append to the journal, folded in batches.
            return try connection.use { db in
                try steps.withLock { steps in
                    if !steps.isOpen { try steps.open() }
                    try steps.append(DownloadStep(Int64(index), status))
                    if steps.due { try Self.fold(&steps, into: db) }
                }
            }
        }
        try changing { db in
            if indices.count == 1, let index = indices.first {
                // One statement is its own transaction (each download is recorded so).
                try db.run("UPDATE restore_files SET status = ?1 WHERE idx = ?2", [.int(status.rawValue), .int(Int64(index))])
                return
            }
            // A placed group is mostly runs of consecutive ids: one statement a run, not a file.
            try db.transaction {
                for run in Self.runs(of: indices) {
                    try db.run("UPDATE restore_files SET status = ?1 WHERE idx BETWEEN ?2 AND ?3",
                               [.int(status.rawValue), .int(Int64(run.lowerBound)), .int(Int64(run.upperBound))])
                }
            }
        }
    }

    /// `indices` as runs of consecutive values, each value in exactly one run (duplicates and
    /// any order allowed).
    static func runs(of indices: [Int]) -> [ClosedRange<Int>] {
        let sorted = indices.sorted()
        var runs: [ClosedRange<Int>] = []
        for index in sorted {
            if let last = runs.last, index <= last.upperBound + 1 {
                if index > last.upperBound { runs[runs.count - 1] = last.lowerBound...index }
            } else {
                runs.append(index...index)
            }
        }
        return runs
    }

    /// Counts one failed attempt on each of `indices`, with the reason (one transaction).
    public func countAttempt(_ indices: [Int], reason: String, status: RestoreFileStatus) throws {
        try changing { db in
            try db.transaction {
                for index in indices {
                    try db.run(
                        "UPDATE restore_files SET attempts = attempts + 1, last_error = ?1, status = ?2 WHERE idx = ?3",
                        [.text(reason), .int(status.rawValue), .int(Int64(index))])
                }
            }
        }
    }

    /// Forgets every failed attempt, so skipped files are tried again.
    public func resetAttempts() throws {
        try changing { db in try db.run("UPDATE restore_files SET attempts = 0, last_error = NULL") }
    }

    /// Stamps the record complete.
    public func complete(at date: Date) throws {
        try changing { db in
            try db.run("INSERT OR REPLACE INTO restore_meta (key, value) VALUES ('completed', ?1)", [.text(String(date.timeIntervalSince1970))])
        }
    }

    /// When the restore completed, or nil while files are pending.
    public func completedAt() throws -> Date? {
        try withDB { db in try db.scalarText("SELECT value FROM restore_meta WHERE key = 'completed'") }
            .flatMap(Double.init).map { Date(timeIntervalSince1970: $0) }
    }
}

/// A download's step in the writer's journal: the file's index (8 bytes) and status (1).
struct DownloadStep: JournalRecord {
    var index: Int64
    var status: RestoreFileStatus

    init(_ index: Int64, _ status: RestoreFileStatus) {
        self.index = index
        self.status = status
    }

    func encode(into out: inout [UInt8]) {
        LittleEndian.put(UInt64(bitPattern: index), 8, &out)
        out.append(UInt8(truncatingIfNeeded: status.rawValue))
    }

    init?(journalRecord bytes: ArraySlice<UInt8>) {
        guard bytes.count == 9, let status = RestoreFileStatus(rawValue: Int64(bytes[bytes.startIndex + 8])) else { return nil }
        self.init(Int64(bitPattern: LittleEndian.get(bytes, bytes.startIndex, 8)), status)
    }
}
