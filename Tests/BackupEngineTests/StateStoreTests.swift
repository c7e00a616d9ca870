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

    // MARK: The put journal (rule 7 at one append per put)

    /// The entries of every field kind, as the journal must carry them.
    private func journalEntries() -> [StateEntry] {
        [
            StateEntry(path: "a/hashed.txt", size: 12, hash: String(repeating: "ab", count: 32), remoteId: "~AAAAAAAAAAB",
                       mtimeNanoseconds: nil, metadata: EntryMetadata(mode: 0o4755, mtimeNanoseconds: -1_500, uid: 1000, gid: 100)),
            StateEntry(path: "sized.iso", size: 1 << 40, hash: nil, remoteId: nil, mtimeNanoseconds: 1_700_000_000_123_456_789),
            StateEntry(path: "names/tab\tline\nnul-free ü 🎉", size: 0, hash: nil, remoteId: "etag \"x\""),
        ]
    }

    private func killedImage(of path: String, into copy: String) throws {
        try copyKilledImage(of: path, into: copy, journalSuffix: "-puts")
    }

    func testRule07JournaledPutsAreSavedOneByOneAndSurviveAKill() throws {
        let path = dir + "/sync.db"
        let store = try StateStore(path: path)
        try store.put(StateEntry(path: "before.txt", size: 1, hash: nil, remoteId: nil))
        try store.beginPutJournal()
        for (count, entry) in journalEntries().enumerated() {
            try store.put(entry)
            // Saved as it returns: another process, and a process that died right now, see it.
            let image = dir + "/killed-\(count)/sync.db"
            try killedImage(of: path, into: image)
            let reader = try StateStore(path: image)
            XCTAssertEqual(Set(try reader.entries().keys), Set(["before.txt"] + journalEntries().prefix(count + 1).map(\.path)))
            XCTAssertEqual(try reader.totals().files, count + 2)
        }
        // The next run of the one writer folds what the killed one left, and removes the journal.
        let image = dir + "/killed-last/sync.db"
        try killedImage(of: path, into: image)
        let next = try StateStore(path: image)
        try next.recoverPuts()
        XCTAssertFalse(FileManager.default.fileExists(atPath: image + "-puts"))
        let recovered = try next.entries()
        for entry in journalEntries() {
            XCTAssertEqual(recovered[entry.path]?.size, entry.size, entry.path)
            XCTAssertEqual(recovered[entry.path]?.digest, entry.digest, entry.path)
            XCTAssertEqual(recovered[entry.path]?.remoteId, entry.remoteId, entry.path)
            XCTAssertEqual(recovered[entry.path]?.mtimeNanoseconds, entry.mtimeNanoseconds, entry.path)
            XCTAssertEqual(recovered[entry.path]?.metadata, entry.metadata, entry.path)
        }
        // The live store folds at its end, and leaves no journal.
        try store.endPutJournal()
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-puts"))
        XCTAssertEqual(try StateStore(path: path).entries().count, 4)
    }

    /// A reader walking the entries in order (a dry run's plan) gets a killed run's puts
    /// merged in their place, each path once, the journal's version winning.
    func testEntriesInOrderIncludeAnotherRunsJournaledPuts() throws {
        let path = dir + "/sync.db"
        let store = try StateStore(path: path)
        for name in ["b", "d", "f"] { try store.put(StateEntry(path: name, size: 1, hash: nil, remoteId: nil)) }
        try store.beginPutJournal()
        for name in ["a", "d", "e", "g"] { try store.put(StateEntry(path: name, size: 2, hash: nil, remoteId: nil)) }
        let image = dir + "/killed/sync.db"
        try killedImage(of: path, into: image)
        let reader = try StateStore(path: image)
        XCTAssertEqual(try reader.sortedEntries().map { "\($0.path)\($0.size)" }, ["a2", "b1", "d2", "e2", "f1", "g2"])
        try store.endPutJournal()
    }

    func testAJournalRecordCutShortOrDamagedEndsTheReplayThere() throws {
        let path = dir + "/sync.db"
        let store = try StateStore(path: path)
        try store.beginPutJournal()
        for entry in journalEntries() { try store.put(entry) }
        let image = dir + "/killed/sync.db"
        try killedImage(of: path, into: image)
        try store.endPutJournal()
        // The last record cut short, as by a kill in the middle of its write.
        let journal = image + "-puts"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: journal))
        guard bytes.count > 100 else { return XCTFail("the journal holds \(bytes.count) bytes for three puts") }
        bytes.removeLast(5)
        try bytes.write(to: URL(fileURLWithPath: journal))
        XCTAssertEqual(Set(try StateStore(path: image).entries().keys), Set(journalEntries().prefix(2).map(\.path)))
        // A byte of the first record changed: nothing after it is trusted.
        bytes = try Data(contentsOf: URL(fileURLWithPath: journal))
        bytes[bytes.startIndex + 10] ^= 0x40
        try bytes.write(to: URL(fileURLWithPath: journal))
        let damaged = try StateStore(path: image)
        XCTAssertEqual(try damaged.entries(), [:])
        try damaged.recoverPuts()
        XCTAssertEqual(try damaged.entries(), [:])
    }

    func testJournaledPutsAreFoldedInBatchesAndBeforeTheEntriesAreChanged() throws {
        let path = dir + "/sync.db"
        let store = try StateStore(path: path)
        try store.beginPutJournal()
        // A database reader that does not read the journal sees the puts once they are folded.
        func inDatabase() -> Int { Int(databaseIntegers(path, "SELECT count(*) FROM entries").first ?? -1) }
        for index in 0..<5000 { try store.put(StateEntry(path: "f\(index)", size: Int64(index), hash: nil, remoteId: nil)) }
        XCTAssertEqual(inDatabase(), 4096, "the first 4096 puts were not folded in one batch")
        // A change of the entries comes after every put before it.
        XCTAssertEqual(try store.take("f4999")?.size, 4999)
        XCTAssertEqual(inDatabase(), 4999)
        try store.put(StateEntry(path: "f4999", size: 7, hash: nil, remoteId: nil))
        try store.endPutJournal()
        XCTAssertEqual(inDatabase(), 5000)
        XCTAssertEqual(try store.entries()["f4999"]?.size, 7)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-puts"))
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
