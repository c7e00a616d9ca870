import BackupEngine
import CSQLite
import Foundation
import XCTest

final class RestoreRecordTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "record-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func plan() -> RestorePlan {
        let meta = EntryMetadata(mode: 0o640, mtimeNanoseconds: 5, uid: 1, gid: 2, user: "a long user name", group: "a long group name")
        return RestorePlan(source: SourceRef(identityKey: "k", markerRemoteId: nil, markerFingerprint: "f"), target: "/t", files: [
            RestoreFile(remotePath: "docs/a.txt", required: true, group: "a group with a long name", sha256: SHA256Hasher.hex(Data("a".utf8)), size: 1, metadata: meta),
            RestoreFile(remotePath: "old/b.txt", placePath: "b.txt", group: "a group with a long name", size: 2, metadata: meta),
            RestoreFile(remotePath: "c", sha256: SHA256Hasher.hex(Data("c".utf8)), hardLinkTo: "docs/a.txt"),
        ])
    }

    func testTheRecordReadsBackEveryFileAsPlanned() throws {
        let record = try RestoreRecord(path: dir + "/restore.db")
        try record.begin(plan())
        XCTAssertEqual(try RestoreRecord(path: dir + "/restore.db").files().map(\.file), plan().files)
        XCTAssertEqual(try record.plan(), plan())
    }

    /// A placement saves its files in runs of consecutive ids: exactly the files given, never a
    /// file between two of them that was not (an interleaved group, a file still downloading).
    func testRule05APlacementSavesExactlyTheFilesPlaced() throws {
        let record = try RestoreRecord(path: dir + "/restore.db")
        let files = (0..<40).map { RestoreFile(remotePath: "f\($0)", group: $0 % 3 == 0 ? "odd" : "main") }
        try record.begin(RestorePlan(source: SourceRef(identityKey: "k", markerRemoteId: nil, markerFingerprint: "f"), target: "/t", files: files))
        let placed = [5, 2, 3, 4, 9, 10, 11, 39, 20, 21, 3, 0]
        try record.setStatus(.done, placed)
        let statuses = try RestoreRecord(path: dir + "/restore.db").files().map(\.status)
        for (index, status) in statuses.enumerated() {
            XCTAssertEqual(status, placed.contains(index) ? .done : .pending, "file \(index)")
        }
        XCTAssertEqual(try record.count(.done), Set(placed).count)
    }

    // MARK: The writer's journal of downloads (rule 5 at one append per download)

    private func killedImage(of path: String, into copy: String) throws {
        try copyKilledImage(of: path, into: copy, journalSuffix: "-steps")
    }

    func testRule05EachDownloadIsSavedAsItIsRecordedAndSurvivesAKill() throws {
        let path = dir + "/restore.db"
        let record = try RestoreRecord(path: path, writer: true)
        try record.begin(plan())
        for index in 0..<3 {
            try record.setStatus(.downloaded, [index])
            // Saved as it returns: a reader, and a process that died right now, see it.
            let image = dir + "/killed-\(index).db"
            try killedImage(of: path, into: image)
            let reader = try RestoreRecord(path: image)
            let expected = (0..<3).map { $0 <= index ? RestoreFileStatus.downloaded : .pending }
            XCTAssertEqual(try reader.files().map(\.status), expected)
            XCTAssertEqual(try reader.groups().map(\.staged), [index < 2 ? index + 1 : 2, index == 2 ? 1 : 0])
            XCTAssertEqual(try reader.count(.notDone), 3)
            // The next writer takes the steps over into the record and removes the journal.
            let next = try RestoreRecord(path: image, writer: true)
            XCTAssertFalse(FileManager.default.fileExists(atPath: image + "-steps"))
            XCTAssertEqual(try next.files().map(\.status), expected)
        }
        // A placement after the journaled downloads comes after them, and the writer's end
        // folds everything and leaves no journal.
        try record.setStatus(.done, [0, 1])
        try record.setStatus(.downloaded, [2])
        XCTAssertEqual(try RestoreRecord(path: path).files().map(\.status), [.done, .done, .downloaded])
    }

    func testANewPlanNeverTakesTheStepsOfTheOneItReplaces() throws {
        let path = dir + "/restore.db"
        let killed = dir + "/killed.db"
        do {
            let record = try RestoreRecord(path: path, writer: true)
            try record.begin(plan())
            try record.setStatus(.done, [0, 1, 2])
            try record.setStatus(.downloaded, [2])
            try killedImage(of: path, into: killed)
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: killed + "-steps"))
        // Another restore into the same record: its own plan, nothing placed or staged.
        let next = try RestoreRecord(path: killed)
        try next.begin(plan())
        XCTAssertFalse(FileManager.default.fileExists(atPath: killed + "-steps"))
        XCTAssertEqual(try RestoreRecord(path: killed, writer: true).files().map(\.status), [.pending, .pending, .pending])
    }

    func testAWriterLetGoOfFoldsItsStepsAndLeavesNoJournal() throws {
        let path = dir + "/restore.db"
        do {
            let record = try RestoreRecord(path: path, writer: true)
            try record.begin(plan())
            try record.setStatus(.downloaded, [1])
            XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-steps"))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + "-steps"))
        XCTAssertEqual(databaseIntegers(path, "SELECT status FROM restore_files ORDER BY idx"), [0, 1, 0])
    }

    /// A plan written file by file is all or nothing: one that fails half-way (here, a
    /// second file at one place path) leaves the earlier record exactly as it was.
    func testAPlanThatFailsWhileItIsWrittenLeavesTheEarlierRecord() throws {
        let record = try RestoreRecord(path: dir + "/restore.db")
        try record.begin(plan())
        try record.setStatus(.done, [0])
        let other = SourceRef(identityKey: "other", markerRemoteId: nil, markerFingerprint: "g")
        XCTAssertThrowsError(try record.record(source: other, target: "/elsewhere") { add in
            try add(0, RestoreFile(remotePath: "x"))
            try add(1, RestoreFile(remotePath: "y", placePath: "x"))
            return []
        }) { error in
            XCTAssertTrue(String(describing: error).contains("places two files at \"x\""), "\(error)")
        }
        XCTAssertEqual(try record.files().map(\.file), plan().files)
        XCTAssertEqual(try record.files().map(\.status), [.done, .pending, .pending])
        XCTAssertEqual(try record.target(), "/t")
    }

    /// The record's order is the ids' order, whatever order the files were written in; the
    /// groups read back in that order with their counts.
    func testAPlanWrittenOutOfOrderReadsBackInTheOrderOfItsIds() throws {
        let record = try RestoreRecord(path: dir + "/restore.db")
        let source = SourceRef(identityKey: "k", markerRemoteId: nil, markerFingerprint: "f")
        try record.record(source: source, target: "/t") { add in
            try add(2 << 40 | 7, RestoreFile(remotePath: "z", group: "late", size: 4))
            try add(1 << 40 | 9, RestoreFile(remotePath: "b", required: true, group: "first", size: 2))
            try add(1 << 40 | 3, RestoreFile(remotePath: "a", required: true, group: "first", size: 1))
            return []
        }
        XCTAssertEqual(try record.files().map(\.file.remotePath), ["a", "b", "z"])
        XCTAssertEqual(try record.groups().map(\.name), ["first", "late"])
        XCTAssertEqual(try record.groups().map(\.required), [true, false])
        XCTAssertEqual(try record.groups().map(\.members.count), [2, 1])
        XCTAssertEqual(try record.pendingBytes(), 7)
        try record.setStatus(.done, [1 << 40 | 3])
        XCTAssertEqual(try record.pendingBytes(), 6)
        XCTAssertEqual(try record.groups().map(\.done), [1, 0])
    }

    func testARecordedHashThatIsNotOneRefusesTheRecordRatherThanSkippingTheCheck() throws {
        let path = dir + "/restore.db"
        try RestoreRecord(path: path).begin(plan())
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open(path, &db), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "UPDATE restore_files SET sha256 = 'nothex' WHERE remote_path = 'c'", nil, nil, nil), SQLITE_OK)
        sqlite3_close(db)
        XCTAssertThrowsError(try RestoreRecord(path: path).files()) { error in
            let text = String(describing: error)
            XCTAssertTrue(text.contains(path) && text.contains("\"c\""), text)
        }
    }
}
