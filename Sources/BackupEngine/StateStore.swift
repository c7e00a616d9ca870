// The sync state in SQLite (WAL): what the engine believes the remote holds, the remote's
// identity, the write hold and small settings. One transaction per put and per delete, so a
// process killed at any instant loses at most the write in flight. The file is a cache:
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
    public var hash: String?
    public var remoteId: String?

    public init(path: String, size: Int64, hash: String?, remoteId: String?) {
        self.path = path
        self.size = size
        self.hash = hash
        self.remoteId = remoteId
    }
}

/// The persistent state of one profile's sync, shared by the engine and `backup hold`.
///
/// `@unchecked Sendable` is safe here: the only mutable thing, the SQLite connection, is
/// private and every use of it runs inside `lock.withLock` (see `withDB`), so no two threads
/// ever touch it at once; the connection is opened with SQLITE_OPEN_NOMUTEX for that reason.
public final class StateStore: @unchecked Sendable {
    /// The newest format this build reads and writes (SQLite's user_version).
    public static let formatVersion: Int64 = 1

    public let path: String
    private let lock = Mutex(())
    private let connection: SQLiteConnection

    /// Opens (creating it with mode 0600 if needed) the state file at `path`.
    ///
    /// Throws `StateStoreError` naming the file when it is damaged, not a state file, or
    /// from a newer version of backup.
    public init(path: String) throws {
        self.path = path
        try StateStore.createPrivately(path)
        let db = try SQLiteConnection(path: path)
        try db.exec("PRAGMA busy_timeout = 5000")
        let version = try db.scalarInt("PRAGMA user_version") ?? 0
        if version > StateStore.formatVersion {
            throw StateStoreError(
                .newerFormat, path: path,
                "the state file \(path) was written by a newer version of backup (format \(version); "
                    + "this version reads format \(StateStore.formatVersion)). Upgrade backup, or delete "
                    + "the file (`backup forget`) to start over: the next sync rebuilds it from the remote.")
        }
        // WAL survives any process kill; NORMAL skips the fsync per commit (~22 µs against
        // ~130 µs per one-row transaction) and loses at most the last commits on power loss,
        // which rule 2 then rebuilds from the remote.
        _ = try db.scalarText("PRAGMA journal_mode = WAL")
        try db.exec("PRAGMA synchronous = NORMAL")
        if version < 1 {
            try db.transaction {
                try db.exec("""
                    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                    CREATE TABLE IF NOT EXISTS entries (
                        path TEXT PRIMARY KEY, size INTEGER NOT NULL, hash TEXT, remote_id TEXT
                    ) WITHOUT ROWID;
                    PRAGMA user_version = 1;
                    """)
            }
        }
        connection = db
    }

    /// Creates the file and its folder readable by the owner only, before SQLite opens it
    /// (SQLite gives its -wal and -shm files the mode of the database file).
    private static func createPrivately(_ path: String) throws {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty && !FileManager.default.fileExists(atPath: folder) {
            do {
                try FileManager.default.createDirectory(
                    atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StateStoreError(.io, path: path, "cannot create the state folder \(folder): \(error.localizedDescription)")
            }
        }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 {
            let reason = String(cString: strerror(errno))
            throw StateStoreError(.io, path: path, "cannot open the state file \(path): \(reason)")
        }
        fchmod(fd, 0o600)
        close(fd)
    }

    private func withDB<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try lock.withLock { _ in try body(connection) }
    }

    // MARK: Entries

    /// Every entry, by path.
    public func entries() throws -> [String: StateEntry] {
        try withDB { db in
            var result: [String: StateEntry] = [:]
            try db.run("SELECT path, size, hash, remote_id FROM entries") { row in
                let path = row.text(0) ?? ""
                result[path] = StateEntry(path: path, size: row.int(1), hash: row.text(2), remoteId: row.text(3))
            }
            return result
        }
    }

    /// Records one uploaded file (its own transaction).
    public func put(_ entry: StateEntry) throws {
        try withDB { db in
            try db.run(
                "INSERT INTO entries (path, size, hash, remote_id) VALUES (?1, ?2, ?3, ?4) "
                    + "ON CONFLICT(path) DO UPDATE SET size = ?2, hash = ?3, remote_id = ?4",
                [.text(entry.path), .int(entry.size), SQLValue(entry.hash), SQLValue(entry.remoteId)])
        }
    }

    /// Forgets one deleted file (its own transaction).
    public func remove(_ path: String) throws {
        try withDB { db in try db.run("DELETE FROM entries WHERE path = ?1", [.text(path)]) }
    }

    /// Applies a reconciliation with the remote listing in one transaction: `drop` paths
    /// are removed, `adopt` entries inserted or replaced.
    public func reconcile(drop: [String], adopt: [StateEntry]) throws {
        guard !drop.isEmpty || !adopt.isEmpty else { return }
        try withDB { db in
            try db.transaction {
                for path in drop { try db.run("DELETE FROM entries WHERE path = ?1", [.text(path)]) }
                for entry in adopt {
                    try db.run(
                        "INSERT OR REPLACE INTO entries (path, size, hash, remote_id) VALUES (?1, ?2, ?3, ?4)",
                        [.text(entry.path), .int(entry.size), SQLValue(entry.hash), SQLValue(entry.remoteId)])
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
        try withDB { db in
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
