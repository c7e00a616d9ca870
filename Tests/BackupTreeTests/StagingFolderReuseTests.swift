// The restore target keeps the staging folder the last download went into, and placement
// walks to each folder once per run of files in it: what either keeps open must still lead
// where a fresh walk would.

import BackupEngine
import BackupTestSupport
@testable import BackupTree
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

    /// A group large enough for two placing workers: every file lands where it belongs, the
    /// split falls between folders, and a failure in either half is thrown (the first in file
    /// order when both fail), with the other half's files placed.
    func testALargeGroupIsPlacedByTwoWorkersAtAFolderBoundary() throws {
        let dir = try TempDir("staging-reuse")
        let target = RestoreTarget(root: dir.path("target"))
        try target.prepare()
        let count = RestoreTarget.parallelPlacementMinimum + 100
        // 64 files a folder, in path order as a plan gives them.
        let paths = (0..<count).map { String(format: "f%03d/n%05d", $0 / 64, $0) }
        let files = RestoreFileList(paths.map { RestoreFile(remotePath: $0) })
        let halves = RestoreTarget.halves(of: files)
        XCTAssertEqual(halves.count, 2, "a group of \(count) files is placed by one worker")
        if halves.count == 2 {
            XCTAssertEqual(halves[0].upperBound, halves[1].lowerBound)
            XCTAssertEqual(halves[0].lowerBound, 0)
            XCTAssertEqual(halves[1].upperBound, count)
            let split = halves[1].lowerBound
            XCTAssertNotEqual(paths[split - 1].prefix(4), paths[split].prefix(4), "the split is inside a folder")
        }
        for file in files { try stage(target, file, "content of \(file.placePath)") }
        try target.place(files)
        for path in paths {
            XCTAssertEqual(try String(contentsOfFile: dir.path("target/" + path), encoding: .utf8), "content of \(path)", path)
        }
        // One folder throughout: nowhere to split.
        let oneFolder = RestoreFileList((0..<count).map { RestoreFile(remotePath: "same/n\($0)") })
        XCTAssertEqual(RestoreTarget.halves(of: oneFolder).count, 1)
        XCTAssertEqual(RestoreTarget.halves(of: RestoreFileList(files.prefix(100))).count, 1)
    }

    func testAFailureInEitherPlacingWorkerIsThrownAndTheFirstInFileOrderWins() throws {
        let count = RestoreTarget.parallelPlacementMinimum + 64
        let paths = (0..<count).map { String(format: "f%03d/n%05d", $0 / 64, $0) }
        let files = RestoreFileList(paths.map { RestoreFile(remotePath: $0) })
        let halves = RestoreTarget.halves(of: files)
        XCTAssertEqual(halves.count, 2)
        guard halves.count == 2 else { return }
        // A link where a folder of the second half (then of both halves) would go.
        let early = String(paths[10].prefix(4)), late = String(paths[halves[1].lowerBound + 10].prefix(4))
        for blocked in [[late], [late, early]] {
            let dir = try TempDir("staging-reuse")
            let target = RestoreTarget(root: dir.path("target"))
            try target.prepare()
            for file in files { try stage(target, file, "x") }
            for folder in blocked { try FileManager.default.createSymbolicLink(atPath: dir.path("target/" + folder), withDestinationPath: dir.path("elsewhere")) }
            do {
                try target.place(files)
                XCTFail("a link in the way of \(blocked) was written through")
            } catch let refused as RefusedPath {
                XCTAssertTrue(refused.remotePath.hasPrefix(blocked[blocked.count - 1] + "/"), "\(refused.remotePath) is not the first refused in file order")
            }
            XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path("elsewhere")), "placed through a link")
            // The half without the link was placed.
            let other = blocked.count == 1 ? paths[0] : nil
            if let other { XCTAssertTrue(FileManager.default.fileExists(atPath: dir.path("target/" + other)), "the other worker's files were not placed") }
        }
    }

    /// Downloads into one staging folder share its descriptor: a write made before the folder
    /// was left for another still reaches its own folder when kept.
    func testAWriteKeepsItsFolderWhenTheNextDownloadGoesElsewhere() throws {
        let dir = try TempDir("staging-reuse")
        let target = RestoreTarget(root: dir.path("target"))
        try target.prepare()
        let first = RestoreFile(remotePath: "a/1"), second = RestoreFile(remotePath: "b/2")
        let open = try target.create(for: first)
        try stage(target, second, "two")
        XCTAssertEqual(Array("one".utf8).withUnsafeBytes { Glibc.write(open.fd, $0.baseAddress, $0.count) }, 3)
        try target.keep(open, for: first)
        XCTAssertEqual(try String(contentsOfFile: target.stagingRoot + "/a/1", encoding: .utf8), "one")
        XCTAssertEqual(try String(contentsOfFile: target.stagingRoot + "/b/2", encoding: .utf8), "two")
        XCTAssertEqual(open.folder.fd, open.folderFD)
        XCTAssertGreaterThanOrEqual(fcntl(open.folderFD, F_GETFD), 0, "the folder was closed while a write still held it")
    }
}
