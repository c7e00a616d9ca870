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
