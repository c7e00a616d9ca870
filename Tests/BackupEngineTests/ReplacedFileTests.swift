import BackupEngine
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class ReplacedFileTests: XCTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "replaced-file-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func mode(_ path: String) -> mode_t {
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0, path)
        return info.st_mode & 0o7777
    }

    func testTheFileHasTheAskedModeWhateverTheUmaskAndItsFolderIsMade() throws {
        let path = folder + "/made/config"
        let old = umask(0o077)
        defer { umask(old) }
        try ReplacedFile.write(Data("one\n".utf8), to: path, mode: 0o644, folderMode: 0o700)
        XCTAssertEqual(mode(path), 0o644)
        XCTAssertEqual(mode(folder + "/made"), 0o700)
        umask(0)
        try ReplacedFile.write(Data("two\n".utf8), to: path, mode: 0o600)
        XCTAssertEqual(mode(path), 0o600)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "two\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder + "/made"), ["config"], "no temporary left")
    }

    func testAReplaceThatFailsLeavesNoTemporaryAndSaysWhy() throws {
        // A folder where the file should be: the rename over it fails, even for root.
        let path = folder + "/config"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        XCTAssertThrowsError(try ReplacedFile.write(Data("new\n".utf8), to: path, mode: 0o600)) { error in
            XCTAssertEqual((error as? ReplacedFile.Failure)?.reason, String(cString: strerror(EISDIR)))
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), ["config"], "the temporary is removed")
    }
}
