// The SQLite state file: private modes, WAL, clear errors for damaged or newer files.

import BackupEngine
import CSQLite
import Foundation
import XCTest

final class StateStoreTests: XCTestCase {
    private var dir = ""

    override func setUp() {
        dir = NSTemporaryDirectory() + "backup-state-" + UUID().uuidString
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func testStateFileAndFolderArePrivate() throws {
        let path = dir + "/profile/sync.db"
        let store = try StateStore(path: path)
        try store.put(StateEntry(path: "a", size: 1, hash: nil, remoteId: nil))
        XCTAssertEqual(try mode(path), 0o600)
        XCTAssertEqual(try mode(dir + "/profile"), 0o700)
        XCTAssertEqual(try mode(path + "-wal"), 0o600)
    }

    func testStateFileUsesWAL() throws {
        let path = dir + "/sync.db"
        _ = try StateStore(path: path)
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        defer { sqlite3_close(db) }
        var statement: OpaquePointer?
        sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &statement, nil)
        XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
        XCTAssertEqual(String(cString: sqlite3_column_text(statement, 0)), "wal")
        sqlite3_finalize(statement)
    }

    func testEntriesRoundTripAcrossReopen() throws {
        let path = dir + "/sync.db"
        let store = try StateStore(path: path)
        try store.put(StateEntry(path: "Fotos/Ünï 日本.jpg", size: 42, hash: String(repeating: "ab", count: 32), remoteId: "7:9"))
        try store.put(StateEntry(path: "b", size: 1, hash: nil, remoteId: nil))
        try store.remove("b")
        let reopened = try StateStore(path: path)
        XCTAssertEqual(try reopened.entries(), ["Fotos/Ünï 日本.jpg": StateEntry(path: "Fotos/Ünï 日本.jpg", size: 42, hash: String(repeating: "ab", count: 32), remoteId: "7:9")])
    }

    func testCorruptStateFileGivesClearErrorNamingTheFile() throws {
        let path = dir + "/sync.db"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try Data(repeating: 0x5a, count: 8192).write(to: URL(fileURLWithPath: path))
        XCTAssertThrowsError(try StateStore(path: path)) { error in
            guard let error = error as? StateStoreError else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(error.code, .corrupt)
            XCTAssertTrue(error.message.contains(path), error.message)
            XCTAssertTrue(error.message.contains("backup forget"), error.message)
        }
    }

    func testNewerFormatGivesClearErrorNamingTheFile() throws {
        let path = dir + "/sync.db"
        _ = try StateStore(path: path)
        var db: OpaquePointer?
        sqlite3_open(path, &db)
        sqlite3_exec(db, "PRAGMA user_version = 99", nil, nil, nil)
        sqlite3_close(db)
        XCTAssertThrowsError(try StateStore(path: path)) { error in
            guard let error = error as? StateStoreError else { return XCTFail("unexpected \(error)") }
            XCTAssertEqual(error.code, .newerFormat)
            XCTAssertTrue(error.message.contains(path), error.message)
            XCTAssertTrue(error.message.contains("format 99"), error.message)
        }
    }

    func testResetIdentityDropsEntriesAndHistoryButKeepsHoldAndSettings() throws {
        let store = try StateStore(path: dir + "/sync.db")
        try store.setIdentity("A")
        try store.put(StateEntry(path: "a", size: 1, hash: String(repeating: "0f", count: 32), remoteId: nil))
        try store.setLastSync(Date())
        try store.setHold(.held(reason: "r"))
        try store.setMeta("consent", "yes")
        try store.resetIdentity(to: "B")
        XCTAssertEqual(try store.identity(), "B")
        XCTAssertEqual(try store.entries(), [:])
        XCTAssertNil(try store.lastSync())
        XCTAssertEqual(try store.hold(), .held(reason: "r"))
        XCTAssertEqual(try store.meta("consent"), "yes")
    }
}

extension StateStoreTests {
    func testFingerprintsRoundTripAndAreForgotten() throws {
        let path = dir + "/sync.db"
        let store = try StateStore(path: path)
        let print = try XCTUnwrap(Fingerprint(
            size: 10, mtimeNanoseconds: 1_700_000_000_123_456_789, inode: UInt64.max - 3, hash: SHA256Hasher.hex(Data("a".utf8))))
        try store.updateFingerprints(["a": print, "b": print])
        try store.updateFingerprints([:], removing: ["b"])
        XCTAssertEqual(try StateStore(path: path).fingerprints(), ["a": print])
        XCTAssertEqual(print.hash, SHA256Hasher.hex(Data("a".utf8)))
        XCTAssertTrue(print.matches(size: 10, mtimeNanoseconds: 1_700_000_000_123_456_789, inode: UInt64.max - 3))
        XCTAssertFalse(print.matches(size: 10, mtimeNanoseconds: 1_700_000_000_123_456_780, inode: UInt64.max - 3))
    }

    func testFormatOneStateFileIsMigrated() throws {
        let path = dir + "/sync.db"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var db: OpaquePointer?
        sqlite3_open(path, &db)
        sqlite3_exec(db, """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE entries (path TEXT PRIMARY KEY, size INTEGER NOT NULL, hash TEXT, remote_id TEXT) WITHOUT ROWID;
            INSERT INTO entries VALUES ('kept', 3, 'h', NULL);
            PRAGMA user_version = 1;
            """, nil, nil, nil)
        sqlite3_close(db)
        let store = try StateStore(path: path)
        XCTAssertEqual(try store.entries().keys.sorted(), ["kept"])
        XCTAssertEqual(try store.fingerprints(), [:])
    }

    func testFormatThreeRecordsModificationTimesAndWhatIsKeptForARestore() throws {
        let path = dir + "/sync.db"
        let store = try StateStore(path: path)
        try store.put(StateEntry(path: "disk.img", size: 4, hash: nil, remoteId: nil, mtimeNanoseconds: 1_700_000_000_000_000_001))
        try store.put(StateEntry(path: "adopted.img", size: 4, hash: nil, remoteId: nil))
        try store.recordModificationTimes([("adopted.img", 7)])
        try store.addRestorePending(["photos/2.jpg", "photos/1.jpg"])
        try store.removeRestorePending(["photos/2.jpg"])
        let reopened = try StateStore(path: path)
        XCTAssertEqual(try reopened.entries()["disk.img"]?.mtimeNanoseconds, 1_700_000_000_000_000_001)
        XCTAssertEqual(try reopened.sortedEntries().map(\.mtimeNanoseconds), [7, 1_700_000_000_000_000_001])
        XCTAssertEqual(try reopened.restorePending(), ["photos/1.jpg"])
        XCTAssertEqual(try reopened.abandonRestorePending(), 1)
        XCTAssertEqual(try reopened.restorePending(), [])
    }
}
