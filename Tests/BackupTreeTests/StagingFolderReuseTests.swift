// The restore target keeps the staging folder the last download went into, and placement
// walks to each folder once per run of files in it: what either keeps open must still lead
// where a fresh walk would.

import BackupEngine
import BackupTestSupport
import BackupTree
import Foundation
import XCTest

final class StagingFolderReuseTests: XCTestCase {
    private func stage(_ target: RestoreTarget, _ file: RestoreFile, _ text: String) throws {
        let write = try target.create(for: file)
        let bytes = Array(text.utf8)
        XCTAssertEqual(bytes.withUnsafeBytes { Glibc.write(write.fd, $0.baseAddress, $0.count) }, bytes.count)
        try target.keep(write, for: file)
    }

    func testDownloadsAndPlacementAcrossFoldersLandWhereTheyBelong() throws {
        let dir = try TempDir("staging-reuse")
        let target = RestoreTarget(root: dir.path("target"))
        try target.prepare()
        // Byte order, folders revisited, a name that is canonically equal to another but not
        // the same bytes (two different folders).
        let paths = ["a/1", "a/2", "a/b/3", "a/b/4", "a/c", "caf\u{E9}/x", "cafe\u{301}/y", "z", "a/5"]
        let files = paths.map { RestoreFile(remotePath: $0) }
        for file in files { try stage(target, file, "content of \(file.placePath)") }
        try target.place(files)
        for path in paths {
            XCTAssertEqual(try String(contentsOfFile: dir.path("target/" + path), encoding: .utf8), "content of \(path)", path)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path("target/caf\u{E9}/y")), "the two folders were taken for one")
    }

    func testAStagingFolderRemovedBetweenDownloadsIsWalkedToAgain() throws {
        let dir = try TempDir("staging-reuse")
        let target = RestoreTarget(root: dir.path("target"))
        try target.prepare()
        try stage(target, RestoreFile(remotePath: "d/1"), "one")
        try FileManager.default.removeItem(atPath: target.stagingRoot + "/d")
        try stage(target, RestoreFile(remotePath: "d/2"), "two")
        XCTAssertEqual(try String(contentsOfFile: target.stagingRoot + "/d/2", encoding: .utf8), "two")
    }
}
