import BackupEngine
import XCTest

final class RestoreFileListTests: XCTestCase {
    /// Every field comes back as it went in, with each optional field present and absent.
    func testEveryFieldRoundTrips() {
        let digest = SHA256Digest(hex: String(repeating: "ab", count: 32))
        let files = [
            RestoreFile(remotePath: "a.txt"),
            RestoreFile(
                remotePath: "photos/ümlaut \u{1F600}.jpg", placePath: "elsewhere/x.jpg", required: true, group: "photos",
                digest: digest, size: 0,
                metadata: EntryMetadata(mode: 0o7755, mtimeNanoseconds: -1_234_567_890_123, uid: .max, gid: 0, user: "ann", group: nil),
                hardLinkTo: "photos/first.jpg"),
            RestoreFile(remotePath: "b", group: "photos", digest: nil, size: Int64.max,
                        metadata: EntryMetadata(mode: 0, mtimeNanoseconds: .min, uid: 0, gid: .max, user: nil, group: "staff")),
            RestoreFile(remotePath: "", size: -5),
            RestoreFile(remotePath: String(repeating: "long/", count: 200) + "end", required: true, group: "docs",
                        metadata: EntryMetadata(mode: 0o644, mtimeNanoseconds: .max, uid: 1000, gid: 1000, user: "ann", group: "ann")),
        ]
        let list = RestoreFileList(files)
        XCTAssertEqual(list.count, files.count)
        XCTAssertEqual(Array(list), files)
        for (index, file) in files.enumerated() { XCTAssertEqual(list[index], file, "file \(index)") }
    }

    func testEqualityComparesTheFilesInOrder() {
        let a = RestoreFile(remotePath: "a", group: "g")
        let b = RestoreFile(remotePath: "b", group: "h")
        XCTAssertEqual(RestoreFileList([a, b]), [a, b])
        XCTAssertNotEqual(RestoreFileList([a, b]), [b, a])
        XCTAssertNotEqual(RestoreFileList([a]), [a, b])
    }

    func testAnEmptyListHasNoFiles() {
        let list: RestoreFileList = []
        XCTAssertTrue(list.isEmpty)
        XCTAssertNil(list.first)
    }
}
