// Reading a store's SQLite file as another program would (straight from the database, with
// nothing of the tool's own journals), and the files a killed writer leaves.

import CSQLite
import Foundation
import XCTest

/// The first column of every row `sql` gives on the database at `path`, opened read-only.
func databaseIntegers(_ path: String, _ sql: String, file: StaticString = #filePath, line: UInt = #line) -> [Int64] {
    var db: OpaquePointer?
    XCTAssertEqual(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil), SQLITE_OK, file: file, line: line)
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    XCTAssertEqual(sqlite3_prepare_v2(db, sql, -1, &statement, nil), SQLITE_OK, sql, file: file, line: line)
    defer { sqlite3_finalize(statement) }
    var values: [Int64] = []
    while sqlite3_step(statement) == SQLITE_ROW { values.append(sqlite3_column_int64(statement, 0)) }
    return values
}

/// What a process killed while it wrote the store at `path` leaves on disk: a copy of the
/// database, its WAL and its journal (`journalSuffix`), taken while the store is still open.
func copyKilledImage(of path: String, into copy: String, journalSuffix: String) throws {
    try FileManager.default.createDirectory(atPath: (copy as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    for suffix in ["", "-wal", journalSuffix] where FileManager.default.fileExists(atPath: path + suffix) {
        try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
    }
}
