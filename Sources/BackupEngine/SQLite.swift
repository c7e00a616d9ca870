// A minimal SQLite wrapper: one connection, prepared statements cached by their SQL.
// Not thread-safe by itself; StateStore owns the only reference, behind a Mutex.

import CSQLite
import Foundation

/// A failure of the local state file. The message names the file and how to start over.
public struct StateStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable {
        /// The file is not a SQLite database, or it is damaged.
        case corrupt
        /// The file was written by a newer version of backup.
        case newerFormat
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

final class SQLiteConnection {
    let path: String
    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]

    init(path: String) throws {
        self.path = path
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        db = handle
        if rc != SQLITE_OK {
            let error = SQLiteConnection.error(rc, handle, path: path)
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

    static func error(_ rc: Int32, _ db: OpaquePointer?, path: String) -> StateStoreError {
        let detail = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
        let primary = rc & 0xff
        if primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT {
            return StateStoreError(
                .corrupt, path: path,
                "the state file \(path) is damaged or is not a backup state file (\(detail)). "
                    + "It is only a cache of what the remote holds: move it aside or delete it "
                    + "(`backup forget` does this) and the next sync rebuilds it from the remote.")
        }
        return StateStoreError(.io, path: path, "cannot use the state file \(path): \(detail)")
    }

    private func fail(_ rc: Int32) -> StateStoreError {
        SQLiteConnection.error(rc, db, path: path)
    }

    /// Runs one or more statements that take no parameters and return no rows.
    func exec(_ sql: String) throws {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        if rc != SQLITE_OK { throw fail(rc) }
    }

    /// Runs `sql` with `bindings`, calling `row` for every result row.
    func run(_ sql: String, _ bindings: [SQLValue] = [], row: ((Row) throws -> Void)? = nil) throws {
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
            try row?(Row(statement: statement))
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

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try exec("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try exec("COMMIT")
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
}

struct Row {
    let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    func text(_ column: Int32) -> String? {
        guard let text = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: text)
    }

    func blob(_ column: Int32) -> Data {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes = sqlite3_column_blob(statement, column) else { return Data() }
        return Data(bytes: bytes, count: count)
    }
}
