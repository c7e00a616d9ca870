// A minimal SQLite wrapper: one connection, prepared statements cached by their SQL.
// Not thread-safe by itself; StateStore owns the only reference, behind a Mutex.

import CSQLite
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A failure of the local state file. The message names the file and how to start over.
public struct StateStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable {
        /// The file is not a SQLite database, or it is damaged.
        case corrupt
        /// The file was written by a newer version of backup.
        case newerFormat
        /// There is nothing to resume: no restore was started with this record.
        case nothingToResume
        /// Any other SQLite or file-system failure (disk full, permissions, locked).
        case io
    }

    public let code: Code
    /// The state file's path.
    public let path: String
    public let message: String

    public init(_ code: Code, path: String, _ message: String) {
        self.code = code
        self.path = path
        self.message = message
    }

    public var description: String { message }
}

/// What a SQLite file is to the person reading an error about it.
struct StoreKind: Sendable {
    /// "state file", "restore record".
    let name: String
    /// How to start over when the file cannot be used, as a sentence.
    let startOver: String
}

final class SQLiteConnection {
    let path: String
    let kind: StoreKind
    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]

    private init(path: String, kind: StoreKind) throws {
        self.path = path
        self.kind = kind
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        db = handle
        if rc != SQLITE_OK {
            let error = SQLiteConnection.error(rc, handle, path: path, kind: kind)
            sqlite3_close_v2(handle)
            db = nil
            throw error
        }
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(db)
    }

    /// Opens the file at `path` (creating it and its folder private to the owner), in WAL
    /// mode, and brings its schema to `formatVersion` with `migrate(from:)`.
    ///
    /// A damaged file, a file that is not SQLite, or one from a newer version of backup
    /// throws a StateStoreError that names the file and how to start over.
    static func open(
        path: String, kind: StoreKind, formatVersion: Int64, migrate: (SQLiteConnection, Int64) throws -> Void
    ) throws -> SQLiteConnection {
        try createPrivately(path, kind: kind)
        let db = try SQLiteConnection(path: path, kind: kind)
        try db.exec("PRAGMA busy_timeout = 5000")
        let version = try db.scalarInt("PRAGMA user_version") ?? 0
        if version > formatVersion {
            throw StateStoreError(
                .newerFormat, path: path,
                "the \(kind.name) \(path) was written by a newer version of backup (format \(version); "
                    + "this version reads format \(formatVersion)). Upgrade backup, or \(kind.startOver)")
        }
        // WAL survives any process kill; NORMAL skips the fsync per commit (~22 µs against
        // ~130 µs per one-row transaction) and loses at most the last commits on power loss,
        // which the remote, the truth, then rebuilds.
        _ = try db.scalarText("PRAGMA journal_mode = WAL")
        try db.exec("PRAGMA synchronous = NORMAL")
        if version < formatVersion {
            try db.transaction {
                try migrate(db, version)
                try db.exec("PRAGMA user_version = \(formatVersion)")
            }
        }
        return db
    }

    /// Creates the file and its folder readable by the owner only, before SQLite opens it
    /// (SQLite gives its -wal and -shm files the mode of the database file).
    private static func createPrivately(_ path: String, kind: StoreKind) throws {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty && !FileManager.default.fileExists(atPath: folder) {
            do {
                try FileManager.default.createDirectory(
                    atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw StateStoreError(.io, path: path, "cannot create the folder \(folder) for the \(kind.name): \(error.localizedDescription)")
            }
        }
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 {
            let reason = String(cString: strerror(errno))
            throw StateStoreError(.io, path: path, "cannot open the \(kind.name) \(path): \(reason)")
        }
        fchmod(fd, 0o600)
        close(fd)
    }

    static func error(_ rc: Int32, _ db: OpaquePointer?, path: String, kind: StoreKind) -> StateStoreError {
        let detail = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
        let primary = rc & 0xff
        if primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT {
            return StateStoreError(
                .corrupt, path: path,
                "the \(kind.name) \(path) is damaged or is not a backup \(kind.name) (\(detail)). \(kind.startOver)")
        }
        return StateStoreError(.io, path: path, "cannot use the \(kind.name) \(path): \(detail)")
    }

    private func fail(_ rc: Int32) -> StateStoreError {
        SQLiteConnection.error(rc, db, path: path, kind: kind)
    }

    /// Runs one or more statements that take no parameters and return no rows.
    func exec(_ sql: String) throws {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        if rc != SQLITE_OK { throw fail(rc) }
    }

    /// Runs `sql` with `bindings`, ignoring any result rows.
    func run(_ sql: String, _ bindings: [SQLValue] = []) throws {
        try run(sql, bindings) { _ in }
    }

    /// Runs `sql` with `bindings`, calling `row` for every result row (before it returns: the
    /// closure does not escape, so a caller may hand on its own non-escaping one).
    func run(_ sql: String, _ bindings: [SQLValue] = [], row: (Row) throws -> Void) throws {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, value) in bindings.enumerated() {
            let position = Int32(index + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(statement, position)
            case .int(let v): rc = sqlite3_bind_int64(statement, position, v)
            case .text(let v): rc = sqlite3_bind_text(statement, position, v, -1, backup_sqlite_transient())
            case .blob(let v):
                rc = v.withUnsafeBytes {
                    sqlite3_bind_blob64(statement, position, $0.baseAddress, sqlite3_uint64($0.count), backup_sqlite_transient())
                }
            }
            if rc != SQLITE_OK { throw fail(rc) }
        }
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            if rc != SQLITE_ROW { throw fail(rc) }
            try row(Row(statement: statement))
        }
    }

    /// The first column of the first row, as text.
    func scalarText(_ sql: String, _ bindings: [SQLValue] = []) throws -> String? {
        var result: String?
        try run(sql, bindings) { row in
            if result == nil { result = row.text(0) }
        }
        return result
    }

    func scalarInt(_ sql: String, _ bindings: [SQLValue] = []) throws -> Int64? {
        var result: Int64?
        try run(sql, bindings) { row in
            if result == nil { result = row.int(0) }
        }
        return result
    }

    /// How many rows the last INSERT, UPDATE or DELETE changed.
    var changes: Int { Int(sqlite3_changes(db)) }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    /// BEGIN and COMMIT are cached statements like any other: a restore runs one transaction
    /// per file, and `exec` would parse both each time.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try run("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try run("COMMIT")
            return value
        } catch {
            try? exec("ROLLBACK")
            throw error
        }
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw fail(rc) }
        statements[sql] = statement
        return statement
    }
}

enum SQLValue {
    case null
    case int(Int64)
    case text(String)
    case blob(Data)

    init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    init(_ int: Int64?) { self = int.map { .int($0) } ?? .null }
}

struct Row {
    let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    func optionalInt(_ column: Int32) -> Int64? { isNull(column) ? nil : int(column) }

    func text(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: text)
    }

    /// The bytes of a text column (empty for NULL), valid only inside `body`.
    func withTextBytes<T>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        let text = sqlite3_column_text(statement, column)
        let count = text == nil ? 0 : Int(sqlite3_column_bytes(statement, column))
        return try body(UnsafeBufferPointer(start: text, count: count))
    }

    /// A SHA-256 stored as hex text, read without making a String; nil for NULL or other text.
    func digest(_ column: Int32) -> SHA256Digest? {
        withTextBytes(column) { SHA256Digest(hexDigits: $0) }
    }

    func blob(_ column: Int32) -> Data {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }
}

/// A connection that any thread may use, one at a time.
///
/// `@unchecked Sendable` is safe here: the connection is private and every use of it runs
/// inside `lock.withLock` (see `use`), so no two threads ever touch it at once; it is opened
/// with SQLITE_OPEN_NOMUTEX for that reason.
final class LockedConnection: @unchecked Sendable {
    private let lock = Mutex(())
    private let connection: SQLiteConnection

    init(_ connection: SQLiteConnection) {
        self.connection = connection
    }

    func use<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try lock.withLock { _ in try body(connection) }
    }
}
