// The restore target keeps the staging folder the last download went into, and placement
// walks to each folder once per run of files in it: what either keeps open must still lead
// where a fresh walk would.

import BackupEngine
import BackupTestSupport
@testable import BackupTree
import CLinux
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

    // MARK: Modes and owners given at creation

    private func stagedStatus(_ target: RestoreTarget, _ file: RestoreFile) throws -> stat {
        try stage(target, file, "x")
        var info = stat()
        XCTAssertEqual(lstat(target.stagingRoot + "/" + file.placePath, &info), 0)
        return info
    }

    /// A staged copy ends with the recorded mode and owner whether they were given when it was
    /// made (a mode the umask keeps, the owner this process makes files with) or set after.
    func testAStagedCopyGetsItsModeAndOwnerWhateverTheUmask() throws {
        let asRoot = geteuid() == 0
        // 0277 takes the owner's write bit from a 0600 copy too (root alone can still write
        // into the folders it then makes).
        for mask: mode_t in [0o022, 0o077, 0o002, 0] + (asRoot ? [0o277] : []) {
            let old = umask(mask)
            defer { umask(old) }
            let dir = try TempDir("staging-modes")
            let target = RestoreTarget(root: dir.path("target"))
            try target.prepare()
            for (index, mode) in [0o644, 0o600, 0o640, 0o755, 0o444, 0o000, 0o666, 0o777, 0o4755, 0o2750, 0o1777].enumerated() {
                for (uid, gid) in [(geteuid(), getegid()), (1234, 5678), (geteuid(), 5678)] {
                    let metadata = EntryMetadata(mode: UInt32(mode), mtimeNanoseconds: 1_000_000_123, uid: UInt32(uid), gid: UInt32(gid), user: nil, group: nil)
                    let file = RestoreFile(remotePath: "d/f\(index)-\(uid)-\(gid)", metadata: metadata)
                    let info = try stagedStatus(target, file)
                    let expected = asRoot ? mode : mode & 0o777
                    XCTAssertEqual(Int(info.st_mode & 0o7777), expected, String(format: "mode %o under umask %o", mode, mask))
                    if asRoot {
                        XCTAssertEqual(info.st_uid, uid_t(uid), "owner of \(file.placePath) under umask \(mask)")
                        XCTAssertEqual(info.st_gid, gid_t(gid), "group of \(file.placePath) under umask \(mask)")
                    }
                    XCTAssertEqual(info.st_mtim.tv_sec, 1)
                    XCTAssertEqual(info.st_mtim.tv_nsec, 123)
                }
            }
        }
    }

    /// In a target whose folder is setgid, new files take its group: a copy whose recorded
    /// group is another is still given that one.
    func testAStagedCopyInASetgidTargetGetsItsRecordedGroup() throws {
        guard geteuid() == 0 else { throw XCTSkip("only root gives a folder a group it is not in") }
        let dir = try TempDir("staging-modes")
        let root = dir.path("target")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        XCTAssertEqual(chown(root, 0, 4321), 0)
        XCTAssertEqual(chmod(root, 0o2775), 0)
        let target = RestoreTarget(root: root)
        try target.prepare()
        var staging = stat()
        XCTAssertEqual(stat(target.stagingRoot, &staging), 0)
        XCTAssertEqual(staging.st_gid, 4321, "the staging folder did not take the setgid folder's group")
        for gid: UInt32 in [0, 4321, 99] {
            let metadata = EntryMetadata(mode: 0o644, mtimeNanoseconds: 5, uid: 0, gid: gid, user: nil, group: nil)
            let info = try stagedStatus(target, RestoreFile(remotePath: "d/g\(gid)", metadata: metadata))
            XCTAssertEqual(info.st_gid, gid_t(gid))
            XCTAssertEqual(info.st_mode & 0o7777, 0o644)
        }
    }

    /// Where a default ACL, not the umask, decides new files' modes, no mode is taken for
    /// granted: each staged copy is given its own.
    func testAStagedCopyUnderADefaultACLGetsItsRecordedMode() throws {
        let dir = try TempDir("staging-modes")
        let root = dir.path("target")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        XCTAssertFalse(RestoreTarget.hasDefaultACL(fd))
        // Version 2; the owner rwx, the group and others nothing (tag, permissions, id).
        var acl: [UInt8] = [2, 0, 0, 0]
        for (tag, permissions) in [(0x01, 7), (0x04, 0), (0x20, 0)] as [(UInt16, UInt16)] {
            acl += withUnsafeBytes(of: tag.littleEndian, Array.init) + withUnsafeBytes(of: permissions.littleEndian, Array.init)
            acl += withUnsafeBytes(of: UInt32.max.littleEndian, Array.init)
        }
        guard acl.withUnsafeBytes({ backup_fsetxattr(fd, "system.posix_acl_default", $0.baseAddress, UInt($0.count), 0) }) == 0 else {
            throw XCTSkip("this file system keeps no ACLs (\(String(cString: strerror(errno))))")
        }
        XCTAssertTrue(RestoreTarget.hasDefaultACL(fd))
        let target = RestoreTarget(root: root)
        try target.prepare()
        for mode in [0o644, 0o755, 0o600] {
            let metadata = EntryMetadata(mode: UInt32(mode), mtimeNanoseconds: 7, uid: geteuid(), gid: getegid(), user: nil, group: nil)
            let info = try stagedStatus(target, RestoreFile(remotePath: "d/m\(mode)", metadata: metadata))
            XCTAssertEqual(Int(info.st_mode & 0o7777), mode, String(format: "mode %o under a default ACL", mode))
        }
    }
}
