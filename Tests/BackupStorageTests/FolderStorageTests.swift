// FolderStorage against the storage contract suite, plus what only a folder has: the missing
// root, the volume id file, hidden temporary files, path checks, errno mapping and pruning.
// XCTest only, so tests run one at a time: the failed-write tests change process-wide limits.

import BackupEngine
@testable import BackupStorage
import BackupTestSupport
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import XCTest

final class FolderStorageTests: XCTestCase {
    // MARK: The contract

    func testContractEmptyRemoteListsNothing() async throws {
        try await StorageContract.emptyRemoteListsNothing(makeRemote().storage)
    }

    func testContractWrittenFileIsListedWithItsSize() async throws {
        try await StorageContract.writtenFileIsListedWithItsSize(makeRemote().storage)
    }

    func testContractWriteBytesThenReadBytesRoundTrips() async throws {
        try await StorageContract.writeBytesThenReadBytesRoundTrips(makeRemote().storage)
    }

    func testContractWriteFileThenDownloadFileRoundTrips() async throws {
        let remote = try makeRemote()
        try await StorageContract.writeFileThenDownloadFileRoundTrips(remote.storage, scratch: remote.scratch)
    }

    func testContractWriteFileHashingTellsTheHashOfWhatItSent() async throws {
        let remote = try makeRemote()
        try await StorageContract.writeFileHashingTellsTheHashOfWhatItSent(remote.storage, scratch: remote.scratch)
    }

    func testContractOverwriteReplacesContentAndSize() async throws {
        try await StorageContract.overwriteReplacesContentAndSize(makeRemote().storage)
    }

    func testContractKeptVersionsAreListedApartFromTheTree() async throws {
        try await StorageContract.keptVersionsAreListedApartFromTheTree(makeRemote().storage)
    }

    func testContractDeleteRemovesTheFile() async throws {
        try await StorageContract.deleteRemovesTheFile(makeRemote().storage)
    }

    func testContractDeleteOfAbsentPathSucceeds() async throws {
        try await StorageContract.deleteOfAbsentPathSucceeds(makeRemote().storage)
    }

    func testContractReadOfAbsentPathThrowsNotFound() async throws {
        try await StorageContract.readOfAbsentPathThrowsNotFound(makeRemote().storage)
    }

    func testContractDownloadOfAbsentPathThrowsNotFound() async throws {
        let remote = try makeRemote()
        try await StorageContract.downloadOfAbsentPathThrowsNotFound(remote.storage, scratch: remote.scratch)
    }

    func testContractTransfersReportBytesAsTheyGo() async throws {
        let remote = try makeRemote()
        try await StorageContract.transfersReportBytesAsTheyGo(remote.storage, scratch: remote.scratch)
    }

    func testContractDownloadRefusesABodyOfAnotherSize() async throws {
        let remote = try makeRemote()
        try await StorageContract.downloadRefusesABodyOfAnotherSize(remote.storage, scratch: remote.scratch)
    }

    func testContractSpacesAndUnicodeInNamesRoundTrip() async throws {
        try await StorageContract.spacesAndUnicodeInNamesRoundTrip(makeRemote().storage)
    }

    func testContractDeepFoldersRoundTrip() async throws {
        try await StorageContract.deepFoldersRoundTrip(makeRemote().storage)
    }

    func testContractIdentityKeyIsStable() async throws {
        let root = try makeRemote().root
        try await StorageContract.identityKeyIsStable { FolderStorage(root: root) }
    }

    func testContractFailedWriteLeavesNothing() async throws {
        let remote = try makeRemote()
        try await StorageContract.failedWriteLeavesNothing(remote.storage, failMidway: remote.failMidway)
        try assertNoTemporaryFiles(remote)
    }

    func testContractFailedOverwriteKeepsTheOldFile() async throws {
        let remote = try makeRemote()
        try await StorageContract.failedOverwriteKeepsTheOldFile(remote.storage, failMidway: remote.failMidway)
        try assertNoTemporaryFiles(remote)
    }

    // MARK: Unnamed and named temporaries

    /// The contract's writes, overwrites and failed writes hold with named temporaries too
    /// (the way filesystems without O_TMPFILE take).
    func testTheContractHoldsWithNamedTemporaries() async throws {
        var remote = try makeRemote()
        remote.storage.unnamedTemporaries = false
        try await StorageContract.writeFileThenDownloadFileRoundTrips(remote.storage, scratch: remote.scratch)
        try await StorageContract.overwriteReplacesContentAndSize(remote.storage)
        try await StorageContract.failedWriteLeavesNothing(remote.storage, failMidway: remote.failMidway)
        try await StorageContract.failedOverwriteKeepsTheOldFile(remote.storage, failMidway: remote.failMidway)
        try assertNoTemporaryFiles(remote)
    }

    /// A new file being filled is in its folder under no name at all (it is linked in whole),
    /// where a named temporary shows while it fills; replacing keeps the new content and mode.
    func testAFileBeingWrittenAppearsInItsFolderOnlyWhole() async throws {
        for unnamed in [false, true] {
            var remote = try makeRemote()
            remote.storage.unnamedTemporaries = unnamed
            let big = try remote.dir.write("scratch/big.bin", StorageContract.randomData(count: 1 << 20))
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: big))
            handle.seekToEndOfFile()
            let chunk = StorageContract.randomData(count: 1 << 20)
            for _ in 0..<63 { handle.write(chunk) }
            try handle.close()
            XCTAssertEqual(chmod(big, 0o640), 0)
            _ = try await remote.storage.writeBytes("folder/kept.txt", Data("old".utf8))

            let folder = remote.root + "/folder"
            let seen = Mutex<Set<String>>([])
            let done = Atomic<Bool>(false)
            let watcher = Thread {
                while !done.load(ordering: .relaxed) {
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
                    seen.withLock { $0.formUnion(names) }
                }
            }
            watcher.start()
            _ = try await remote.storage.writeFile("folder/big.bin", from: big)
            done.store(true, ordering: .relaxed)
            while !watcher.isFinished { usleep(1000) }
            // Replacing links the whole file under a temporary name for the rename over the
            // old one: that name is not watched.
            _ = try await remote.storage.writeFile("folder/kept.txt", from: big)

            let temporaries = seen.withLock { $0 }.filter { $0.hasPrefix(FolderStorage.temporaryFilePrefix) }
            if unnamed {
                XCTAssertEqual(temporaries, [], "a named temporary showed while filling with unnamed temporaries on")
            } else {
                XCTAssertFalse(temporaries.isEmpty, "the watcher never saw the named temporary: it cannot tell the two ways apart")
            }
            let source = try Data(contentsOf: URL(fileURLWithPath: big))
            for path in ["folder/big.bin", "folder/kept.txt"] {
                let readBack = try await remote.storage.readBytes(path)
                XCTAssertTrue(readBack == source, "\(path), unnamed \(unnamed)")
                var status = stat()
                XCTAssertEqual(stat(remote.root + "/" + path, &status), 0)
                XCTAssertEqual(status.st_mode & 0o777, 0o640, "\(path), unnamed \(unnamed)")
            }
            let listed = try await remote.storage.list().map(\.path).sorted()
            XCTAssertEqual(listed, ["folder/big.bin", "folder/kept.txt"])
            try assertNoTemporaryFiles(remote)
        }
    }

    // MARK: The root

    func testMissingRootIsNotAvailableAndIsNeverCreated() async throws {
        let remote = try makeRemote()
        // The mount point exists, the folder on the disk that is not mounted does not.
        try await assertNotAvailable(root: remote.dir.path("mountpoint/backup"), remote)
        try remote.dir.makeFolder("mountpoint")
        try await assertNotAvailable(root: remote.dir.path("mountpoint/backup"), remote)
        XCTAssertEqual(try remote.dir.entries(under: "mountpoint"), [], "the missing root was created")
    }

    private func assertNotAvailable(root missing: String, _ remote: Remote) async throws {
        let storage = FolderStorage(root: missing)
        let source = try remote.dir.write("scratch/source.txt", Data("data".utf8))
        let expected = "the remote folder \(missing) does not exist or is not mounted; "
            + "mount it or create it, then run again"

        let operations: [(String, () async throws -> Void)] = [
            ("list", { _ = try await storage.list() }),
            ("writeBytes", { _ = try await storage.writeBytes("a.txt", Data("x".utf8)) }),
            ("writeFile", { _ = try await storage.writeFile("dir/a.txt", from: source) }),
            ("identityKey", { _ = try await storage.identityKey() }),
            ("ensureIdentityKey", { _ = try await storage.ensureIdentityKey() }),
            ("readBytes", { _ = try await storage.readBytes("a.txt") }),
            ("downloadFile", { try await storage.downloadFile("a.txt", toPath: remote.dir.path("scratch/d.txt")) }),
            ("delete", { try await storage.delete("a/b.txt") }),
            ("flush", { try await storage.flush() }),
        ]
        for (name, operation) in operations {
            do {
                try await operation()
                XCTFail("\(name) on a missing root did not throw")
            } catch let error as CloudError {
                XCTAssertEqual(error.kind, .notAvailable, name)
                XCTAssertEqual(error.message, expected, name)
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing), "the missing root was created")
    }

    func testRootThatIsAFileIsNotAvailable() async throws {
        let remote = try makeRemote()
        let file = try remote.dir.write("a-file", Data("not a folder".utf8))
        await StorageContract.assertThrows(.notAvailable, "listing a root that is a file") {
            _ = try await FolderStorage(root: file).list()
        }
    }

    // MARK: Internal files

    func testListHidesTheVolumeIdAndTemporaryFilesButNotTheMarker() async throws {
        let remote = try makeRemote()
        _ = try await remote.storage.ensureIdentityKey()
        XCTAssertTrue(FileManager.default.fileExists(atPath: remote.root + "/.backup-volume-id"))
        _ = try await remote.storage.writeBytes(".backup-marker", Data("marker".utf8))
        _ = try await remote.storage.writeBytes("sub/real.txt", Data("real".utf8))
        try remote.dir.write("remote/.backup-tmp.leftover", Data("crashed run".utf8))
        try remote.dir.write("remote/sub/.backup-tmp.0123abcd", Data("crashed run".utf8))
        // Only the root's volume id file is internal; the same name deeper is ordinary data.
        try remote.dir.write("remote/sub/.backup-volume-id", Data("user data".utf8))
        // A link is not a regular file, and one to a folder must not be followed.
        XCTAssertEqual(symlink(remote.root + "/sub", remote.root + "/link-to-sub"), 0)
        XCTAssertEqual(symlink(remote.root + "/sub/real.txt", remote.root + "/link-to-file"), 0)

        let paths = try await remote.storage.list().map(\.path).sorted()
        XCTAssertEqual(paths, [".backup-marker", "sub/.backup-volume-id", "sub/real.txt"])
    }

    func testInternalNamesCannotBeWritten() async throws {
        let storage = try makeRemote().storage
        for path in [".backup-volume-id", ".backup-tmp.x", "sub/.backup-tmp.y"] {
            await StorageContract.assertThrows(.transport, "writing \(path)") {
                _ = try await storage.writeBytes(path, Data("x".utf8))
            }
        }
        let written = try await storage.writeBytes("sub/.backup-volume-id", Data("ordinary".utf8))
        XCTAssertEqual(written.path, "sub/.backup-volume-id")
    }

    // MARK: Identity

    func testIdentityKeyIsKeptInTheVolumeIdFile() async throws {
        let remote = try makeRemote()
        let key = try await remote.storage.ensureIdentityKey()
        let stored = try String(contentsOfFile: remote.root + "/.backup-volume-id", encoding: .utf8)
        XCTAssertEqual(key.map { $0 + "\n" }, stored)
        XCTAssertNotNil(key.flatMap(UUID.init(uuidString:)), "the volume id is not a UUID: \(key ?? "nil")")

        try remote.dir.write("remote/.backup-volume-id", Data("  set-by-hand \n\n".utf8))
        let replaced = try await FolderStorage(root: remote.root).identityKey()
        XCTAssertEqual(replaced, "set-by-hand")
    }

    func testIdentityKeyOnlyReadsAndEnsureIdentityKeyCreatesTheVolumeId() async throws {
        let remote = try makeRemote()
        let read = try await remote.storage.identityKey()
        XCTAssertNil(read, "there is no volume id yet")
        XCTAssertFalse(FileManager.default.fileExists(atPath: remote.root + "/.backup-volume-id"), "reading the identity wrote it")
        let created = try await remote.storage.ensureIdentityKey()
        XCTAssertNotNil(created)
        let again = try await remote.storage.identityKey()
        XCTAssertEqual(again, created)
    }

    func testIdentityKeyDiffersBetweenRoots() async throws {
        let first = try await makeRemote().storage.ensureIdentityKey()
        let second = try await makeRemote().storage.ensureIdentityKey()
        XCTAssertNotNil(first)
        XCTAssertNotNil(second)
        XCTAssertNotEqual(first, second)
    }

    func testIdentityKeyCreatedConcurrentlyIsTheSameForAll() async throws {
        let root = try makeRemote().root
        let keys = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<16 { group.addTask { try await FolderStorage(root: root).ensureIdentityKey() } }
            return try await group.reduce(into: Set<String?>()) { $0.insert($1) }
        }
        XCTAssertEqual(keys.count, 1, "racing creators disagreed: \(keys)")
        XCTAssertNotNil(keys.first ?? nil)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: root)
        XCTAssertEqual(leftovers, [".backup-volume-id"])
    }

    func testPlacingWithoutReplacingRefusesAnExistingNameWithAndWithoutRenameat2() throws {
        let remote = try makeRemote()
        let rootFD = open(remote.root, O_RDONLY | O_DIRECTORY)
        XCTAssertGreaterThanOrEqual(rootFD, 0)
        defer { close(rootFD) }
        XCTAssertNotNil(LinuxCalls.renameat2, "renameat2 was not found; only the hard-link path is in use")
        for (label, renameat2) in [("renameat2", LinuxCalls.renameat2), ("hard link", nil)] {
            let name = "placed-by-\(label)"
            try remote.dir.write("remote/.backup-tmp.first", Data("first".utf8))
            try remote.dir.write("remote/.backup-tmp.second", Data("second".utf8))
            XCTAssertEqual(FolderStorage.placeWithoutReplacing(rootFD, ".backup-tmp.first", name, renameat2: renameat2), 0)
            XCTAssertEqual(FolderStorage.placeWithoutReplacing(rootFD, ".backup-tmp.second", name, renameat2: renameat2),
                           EEXIST, label)
            XCTAssertEqual(try String(contentsOfFile: remote.root + "/" + name, encoding: .utf8), "first", label)
            XCTAssertEqual(try remote.dir.entries(under: "remote").filter { $0.hasPrefix(".backup-tmp.") }, [], label)
        }
    }

    func testIdentityKeyIsNilWhereTheVolumeIdCannotBeCreated() async throws {
        // Even root may not create files in sysfs (EACCES), a real unwritable folder for this test.
        let unwritable = "/sys/kernel"
        guard FileManager.default.fileExists(atPath: unwritable) else { throw XCTSkip("no \(unwritable) here") }
        let probe = open(unwritable + "/.backup-tmp.probe", O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if probe >= 0 {
            close(probe)
            unlink(unwritable + "/.backup-tmp.probe")
            throw XCTSkip("\(unwritable) is writable here")
        }
        let key = try await FolderStorage(root: unwritable).ensureIdentityKey()
        XCTAssertNil(key)
    }

    // MARK: Paths

    func testInvalidPathsAreRefusedAndNothingIsWrittenOutsideTheRoot() async throws {
        let remote = try makeRemote()
        let source = try remote.dir.write("scratch/source.txt", Data("data".utf8))
        let invalid = [
            remote.dir.path("escaped-absolute.txt"), "/abs", "", "a//b", "a/", "./a", "a/./b", "..",
            "a/../b", "a/../../escaped-dotdot.txt", "../escaped.txt", "a\u{0}b",
            // "/" then a combining mark is a single Character; splitting on Characters would miss it.
            "../\u{301}escaped-combining.txt",
        ]
        for path in invalid {
            do {
                _ = try await remote.storage.writeBytes(path, Data("x".utf8))
                XCTFail("writeBytes accepted \(String(reflecting: path))")
            } catch let error as CloudError {
                XCTAssertEqual(error.kind, .transport)
                XCTAssertTrue(error.message.contains("is not valid"), error.message)
                XCTAssertTrue(error.message.contains(String(reflecting: path)), error.message)
            }
            await StorageContract.assertThrows(.transport, "writeFile \(String(reflecting: path))") {
                _ = try await remote.storage.writeFile(path, from: source)
            }
            await StorageContract.assertThrows(.transport, "readBytes \(String(reflecting: path))") {
                _ = try await remote.storage.readBytes(path)
            }
            await StorageContract.assertThrows(.transport, "delete \(String(reflecting: path))") {
                try await remote.storage.delete(path)
            }
        }
        XCTAssertEqual(try remote.dir.entries(), ["remote", "scratch", "scratch/source.txt"])
    }

    func testWritesDoNotFollowALinkOutOfTheRoot() async throws {
        let remote = try makeRemote()
        let outside = try remote.dir.makeFolder("outside")
        XCTAssertEqual(symlink(outside, remote.root + "/link"), 0)
        await StorageContract.assertThrows(.transport, "writing through a link") {
            _ = try await remote.storage.writeBytes("link/file.txt", Data("x".utf8))
        }
        await StorageContract.assertThrows(.notFound, "reading through a link") {
            _ = try await remote.storage.readBytes("link/file.txt")
        }
        XCTAssertEqual(try remote.dir.entries(under: "outside"), [])
    }

    /// A read opens the whole path in one call where the kernel allows it: a link as a
    /// folder deep on the way, or as the file itself, is still not followed, and a read of a
    /// real file beside them works.
    func testReadsDoNotFollowALinkAnywhereOnThePath() async throws {
        let remote = try makeRemote()
        let outside = try remote.dir.makeFolder("outside")
        try remote.dir.write("outside/secret.txt", Data("outside".utf8))
        try remote.dir.write("remote/a/b/real.txt", Data("inside".utf8))
        XCTAssertEqual(symlink(outside, remote.root + "/a/b/deep-link"), 0)
        XCTAssertEqual(symlink(outside + "/secret.txt", remote.root + "/a/b/file-link"), 0)
        XCTAssertEqual(symlink(remote.root + "/a", remote.root + "/inside-link"), 0)
        for path in ["a/b/deep-link/secret.txt", "a/b/file-link", "inside-link/b/real.txt"] {
            await StorageContract.assertThrows(.notFound, "reading \(path)") {
                _ = try await remote.storage.readBytes(path)
            }
        }
        let real = try await remote.storage.readBytes("a/b/real.txt")
        XCTAssertEqual(real, Data("inside".utf8))
    }

    /// A write finds an existing folder in one call where the kernel allows it: a link as a
    /// folder deep on the way, or one that points back inside the root, is still not
    /// followed, and nothing lands outside; a write beside them, into new folders, works.
    func testWritesDoNotFollowALinkAnywhereOnThePath() async throws {
        let remote = try makeRemote()
        let outside = try remote.dir.makeFolder("outside")
        try remote.dir.write("remote/a/b/real.txt", Data("inside".utf8))
        XCTAssertEqual(symlink(outside, remote.root + "/a/b/deep-link"), 0)
        XCTAssertEqual(symlink(remote.root + "/a", remote.root + "/inside-link"), 0)
        let source = try remote.dir.write("scratch/source.txt", Data("new".utf8))
        for path in ["a/b/deep-link/file.txt", "a/b/deep-link/c/file.txt", "inside-link/b/file.txt"] {
            await StorageContract.assertThrows(.transport, "writing \(path)") {
                _ = try await remote.storage.writeFile(path, from: source)
            }
            await StorageContract.assertThrows(.transport, "writing the bytes of \(path)") {
                _ = try await remote.storage.writeBytes(path, Data("x".utf8))
            }
        }
        XCTAssertEqual(try remote.dir.entries(under: "outside"), [])
        XCTAssertFalse(FileManager.default.fileExists(atPath: remote.root + "/a/b/file.txt"))
        _ = try await remote.storage.writeFile("a/b/written.txt", from: source)
        _ = try await remote.storage.writeFile("a/new/deeper/written.txt", from: source)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: remote.root + "/a/b/written.txt")), Data("new".utf8))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: remote.root + "/a/new/deeper/written.txt")), Data("new".utf8))
    }

    /// The reads and writes after a listing go into the folder that listing opened, even when
    /// another folder takes the root's path meanwhile (a disk mounted over it mid-run); the
    /// next listing opens the root afresh, and the writes after it go there.
    func testWritesGoIntoTheRootTheLastListingOpened() async throws {
        let remote = try makeRemote()
        let storage = remote.storage
        _ = try await storage.writeBytes("first.txt", Data("1".utf8))
        _ = try await storage.list()
        XCTAssertEqual(rename(remote.root, remote.dir.path("moved")), 0)
        try remote.dir.makeFolder("remote")
        _ = try await storage.writeBytes("second.txt", Data("2".utf8))
        XCTAssertEqual(try remote.dir.entries(under: "moved").sorted(), ["first.txt", "second.txt"])
        XCTAssertEqual(try remote.dir.entries(under: "remote"), [])
        let second = try await storage.readBytes("second.txt")
        XCTAssertEqual(second, Data("2".utf8))

        let listed = try await storage.list()
        XCTAssertEqual(listed.count, 0, "the listing did not open the root afresh")
        _ = try await storage.writeBytes("third.txt", Data("3".utf8))
        XCTAssertEqual(try remote.dir.entries(under: "remote"), ["third.txt"])
        await StorageContract.assertThrows(.notFound, "reading a file of the folder listed before") {
            _ = try await storage.readBytes("second.txt")
        }
    }

    // MARK: Errors

    func testErrnoMapping() {
        let path = "/mnt/usb/backup/a.txt"
        for code in [ENOSPC, EDQUOT] {
            let error = cloudError(errno: code, operation: "writing", path: path)
            XCTAssertEqual(error.kind, .storageFull, "errno \(code)")
            XCTAssertTrue(error.message.contains("full") && error.message.contains(path), error.message)
        }
        XCTAssertEqual(cloudError(errno: ENOENT, operation: "reading", path: path).kind, .notFound)
        for code in [EACCES, EPERM] {
            let error = cloudError(errno: code, operation: "writing", path: path)
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("permission denied") && error.message.contains(path), error.message)
        }
        let readOnly = cloudError(errno: EROFS, operation: "writing", path: path)
        XCTAssertEqual(readOnly.kind, .transport)
        XCTAssertTrue(readOnly.message.contains("read-only") && readOnly.message.contains(path), readOnly.message)
        let other = cloudError(errno: EIO, operation: "writing", path: path)
        XCTAssertEqual(other.kind, .transport)
        XCTAssertTrue(other.message.contains("Input/output error") && other.message.contains(path), other.message)
    }

    func testUnreadableLocalSourceIsAReadError() async throws {
        let remote = try makeRemote()
        for source in [remote.dir.path("scratch/missing.bin"), remote.scratch] {
            do {
                _ = try await remote.storage.writeFile("copy.bin", from: source)
                XCTFail("writeFile from \(source) did not throw")
            } catch let error as LocalFileError {
                XCTAssertEqual(error.path, source)
                XCTAssertTrue(error.message.hasPrefix("cannot read the local file \(source): "), error.message)
            }
        }
        XCTAssertEqual(try remote.dir.entries(under: "remote"), [])
    }

    func testALocalFileThatIsALinkNowIsNotReadThroughIt() async throws {
        let remote = try makeRemote()
        let secret = remote.dir.path("outside-secret.txt")
        try Data("not part of the source".utf8).write(to: URL(fileURLWithPath: secret))
        let link = remote.scratch + "/was-a-file.txt"
        XCTAssertEqual(symlink(secret, link), 0)
        for hashing in [false, true] {
            do {
                if hashing {
                    _ = try await remote.storage.writeFileHashing("copy.txt", from: link, onBytes: { _ in })
                } else {
                    _ = try await remote.storage.writeFile("copy.txt", from: link)
                }
                XCTFail("the link was followed (hashing: \(hashing))")
            } catch let error as LocalFileError {
                XCTAssertEqual(error.path, link)
                XCTAssertTrue(error.message.contains("symbolic link"), error.message)
            }
        }
        do {
            _ = try Fingerprint.ofLocalFile(link)
            XCTFail("the default hashing read followed the link")
        } catch let error as LocalFileError {
            XCTAssertTrue(error.message.contains("symbolic link"), error.message)
        }
        XCTAssertEqual(try remote.dir.entries(under: "remote"), [])
    }

    // MARK: Delete

    func testDeletePrunesEmptyFoldersButNeverTheRoot() async throws {
        let remote = try makeRemote()
        _ = try await remote.storage.writeBytes("a/b/c/deep.txt", Data("deep".utf8))
        _ = try await remote.storage.writeBytes("a/keep.txt", Data("keep".utf8))
        _ = try await remote.storage.writeBytes("top.txt", Data("top".utf8))

        try await remote.storage.delete("a/b/c/deep.txt")
        XCTAssertEqual(try remote.dir.entries(under: "remote"), ["a", "a/keep.txt", "top.txt"])
        try await remote.storage.delete("a/keep.txt")
        XCTAssertEqual(try remote.dir.entries(under: "remote"), ["top.txt"])
        try await remote.storage.delete("top.txt")
        try await remote.storage.delete("absent/folder/file.txt")
        XCTAssertEqual(try remote.dir.entries(under: "remote"), [])
        var isFolder: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: remote.root, isDirectory: &isFolder) && isFolder.boolValue,
                      "delete removed the root")
    }

    // MARK: Durability and versions

    func testPerFileDurabilityRoundTrips() async throws {
        let remote = try makeRemote(durability: .perFile)
        let data = StorageContract.randomData(count: 100_000)
        let source = try remote.dir.write("scratch/source.bin", data)
        _ = try await remote.storage.writeBytes("bytes/one.bin", data)
        _ = try await remote.storage.writeFile("file/two.bin", from: source)
        try await remote.storage.flush()
        let readBack = try await remote.storage.readBytes("bytes/one.bin")
        XCTAssertTrue(readBack == data)
        try await remote.storage.downloadFile("file/two.bin", toPath: remote.scratch + "/two.bin")
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: remote.scratch + "/two.bin")) == data)
        let listed = try await remote.storage.list().sorted { $0.path < $1.path }
        XCTAssertEqual(listed.map(\.path), ["bytes/one.bin", "file/two.bin"])
        XCTAssertEqual(listed.map(\.size), [100_000, 100_000])
    }

    func testFlushSyncsAWritableRoot() async throws {
        let remote = try makeRemote()
        _ = try await remote.storage.writeBytes("a.txt", Data("x".utf8))
        try await remote.storage.flush()
        XCTAssertNotNil(LinuxCalls.syncfs, "syncfs was not found; flush fell back to sync()")
    }

    /// Issue 11, item 7: on vfat/exFAT and CIFS `noserverino` every mount gives new inode
    /// numbers. The id is the mtime: a file put back under a new inode with the same bytes
    /// and mtime (`cp -p`, then renamed into place) keeps its id; a rewrite changes it. It is
    /// short enough for a String held inline (at most 15 bytes: no allocation per file).
    func testItem07RemoteIdIsModificationTimeAndSizeAndSurvivesANewInode() async throws {
        let remote = try makeRemote()
        let first = try await remote.storage.writeBytes("v.txt", Data("one".utf8))
        var before = stat()
        XCTAssertEqual(stat(remote.root + "/v.txt", &before), 0)
        let nanoseconds = Int64(before.st_mtim.tv_sec) * 1_000_000_000 + Int64(before.st_mtim.tv_nsec)
        XCTAssertEqual(first.remoteId.map { FolderStorage.mtimeNanoseconds(ofId: $0) }, nanoseconds)
        XCTAssertLessThanOrEqual(first.remoteId?.utf8.count ?? 99, 15)

        // A copy with the same mtime, renamed into place: a new inode, nothing else new.
        try Data("one".utf8).write(to: URL(fileURLWithPath: remote.root + "/copy"))
        var times = [before.st_atim, before.st_mtim]
        XCTAssertEqual(utimensat(AT_FDCWD, remote.root + "/copy", &times, 0), 0)
        XCTAssertEqual(rename(remote.root + "/copy", remote.root + "/v.txt"), 0)
        var after = stat()
        XCTAssertEqual(stat(remote.root + "/v.txt", &after), 0)
        XCTAssertNotEqual(after.st_ino, before.st_ino, "the copy did not get a new inode")
        let listed = try await remote.storage.list()
        XCTAssertEqual(listed.map(\.remoteId), [first.remoteId])

        let second = try await remote.storage.writeBytes("v.txt", Data("two".utf8))
        XCTAssertNotEqual(first.remoteId, second.remoteId)
        // Ids of the older forms (inode:mtime, then mtime:size) with the same mtime (and
        // size) name the same version.
        for old in ["\(before.st_ino):\(nanoseconds)", "\(nanoseconds):3"] {
            XCTAssertTrue(remote.storage.isSameVersion(recorded: old, listed: listed[0]), old)
            XCTAssertFalse(remote.storage.isSameVersion(recorded: old, listed: second), old)
        }
        XCTAssertFalse(remote.storage.isSameVersion(recorded: "\(nanoseconds):4", listed: listed[0]), "another size")
        XCTAssertFalse(remote.storage.isSameVersion(recorded: second.remoteId ?? "", listed: listed[0]))
        XCTAssertFalse(remote.storage.isSameVersion(recorded: first.remoteId ?? "", listed: second))
    }

    /// Every mtime a file can have (before 1970 too) is spelt by one 12-byte id and read back
    /// from it; text of any other shape is no id of the current form.
    func testTheIdOfAnyModificationTimeReadsBack() {
        for mtime: Int64 in [.min, -1_000_000_000, -1, 0, 1, 63, 64, 1_733_000_000_123_456_789, .max] {
            let id = FolderStorage.remoteId(mtimeNanoseconds: mtime)
            XCTAssertEqual(id.utf8.count, 12, id)
            XCTAssertEqual(FolderStorage.mtimeNanoseconds(ofId: id), mtime, id)
        }
        XCTAssertNotEqual(FolderStorage.remoteId(mtimeNanoseconds: 1), FolderStorage.remoteId(mtimeNanoseconds: 2))
        for text in ["", "~", "~0000000000", "~0000000000!", "x00000000000", "12:34", "~000000000000"] {
            XCTAssertNil(FolderStorage.mtimeNanoseconds(ofId: text), text)
        }
    }

    /// Issue 11, item 7: a state written with the older ids (`inode:mtime`, `mtime:size`)
    /// does not make the next sync upload every file again; the ids are recorded afresh in
    /// the new form.
    func testItem07AStateWithOlderFormIdsUploadsNothingAgain() async throws {
        try await olderFormIdsUploadNothingAgain { status, nanoseconds in "\(status.st_ino):\(nanoseconds)" }
        try await olderFormIdsUploadNothingAgain { status, nanoseconds in "\(nanoseconds):\(status.st_size)" }
    }

    private func olderFormIdsUploadNothingAgain(_ olderId: (stat, Int64) -> String) async throws {
        let remote = try makeRemote()
        let state = try StateStore(path: remote.scratch + "/state.db")
        let engine = SyncEngine(storage: remote.storage, state: state)
        let snapshot = SyncSnapshot(entries: ["a.txt", "b/c.txt"].map {
            SyncEntry(path: $0, size: Int64($0.utf8.count), hash: SHA256Hasher.hex(Data($0.utf8)), source: .bytes(Data($0.utf8)))
        }, marker: Data("m".utf8))
        guard case .completed = try await engine.sync(snapshot) else { return XCTFail("the first run did not complete") }
        let older = try state.sortedEntries().map { entry -> StateEntry in
            var status = stat()
            XCTAssertEqual(stat(remote.root + "/" + entry.path, &status), 0)
            let nanoseconds = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
            var old = entry
            old.remoteId = olderId(status, nanoseconds)
            return old
        }
        try state.reconcile(drop: [], adopt: older)
        guard case .completed(let second) = try await engine.sync(snapshot) else { return XCTFail("the second run did not complete") }
        XCTAssertEqual(second.uploaded, [], "older-form ids made the run upload again")
        let listed = try await remote.storage.list()
        let recorded = try state.sortedEntries()
        let files = listed.filter { $0.path != SyncEngine.defaultMarkerPath }.sorted { $0.path < $1.path }
        XCTAssertEqual(recorded.map(\.remoteId), files.map(\.remoteId), "the ids were not recorded afresh")
    }

    /// Issue 11, hygiene: temporaries a killed run left are swept by the next run that may
    /// write — not by a preview (`--dry-run`), not under a hold — and a young one (another
    /// live writer's) is left alone.
    func testHygieneStaleTemporariesAreSweptByASyncOnly() async throws {
        let remote = try makeRemote()
        try await sweepHygiene(remote.storage, scratch: remote.scratch, place: { relative, age in
            let path = remote.root + "/" + relative
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try Data("partial".utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -age)], ofItemAtPath: path)
        }, exists: { FileManager.default.fileExists(atPath: remote.root + "/" + $0) })
    }

    // MARK: The source's metadata

    /// A file uploaded from a source with mtime 2001-02-03 04:05:06.123456789 keeps that mtime
    /// to the nanosecond and the source's permission bits (0600 stays owner-only, 0755 stays
    /// executable, past any umask), and the id the write returns is the one the listing shows.
    func testWriteFileKeepsTheSourcesModificationTimeToTheNanosecondAndItsMode() async throws {
        let remote = try makeRemote()
        for mode: mode_t in [0o600, 0o755, 0o640] {
            let name = "kept/mode-\(String(mode, radix: 8)).bin"
            let source = try makeMetadataSource(remote.scratch + "/" + String(mode, radix: 8), Data("bytes \(mode)".utf8), mode: mode)
            let written = try await remote.storage.writeFile(name, from: source)
            var placed = stat()
            XCTAssertEqual(stat(remote.root + "/" + name, &placed), 0)
            XCTAssertEqual(placed.st_mtim.tv_sec, metadataSourceTime.tv_sec, "mode \(String(mode, radix: 8))")
            XCTAssertEqual(placed.st_mtim.tv_nsec, metadataSourceTime.tv_nsec, "mode \(String(mode, radix: 8))")
            XCTAssertEqual(placed.st_atim.tv_sec, metadataSourceTime.tv_sec - 86_400, "the access time")
            XCTAssertEqual(placed.st_mode & 0o7777, mode, "mode \(String(mode, radix: 8))")
            XCTAssertEqual(
                written.remoteId.flatMap(FolderStorage.mtimeNanoseconds(ofId:)),
                Int64(metadataSourceTime.tv_sec) * 1_000_000_000 + Int64(metadataSourceTime.tv_nsec))
            let listed = try await remote.storage.list().first { $0.path == name }
            XCTAssertEqual(listed?.remoteId, written.remoteId, "the id was not taken after the times were set")
        }
        try assertNoTemporaryFiles(remote)
    }

    /// setuid, setgid and sticky are kept only when running as root, and then so are the owner
    /// and group; otherwise the bits are dropped and the file is the writer's.
    func testWriteFileKeepsSpecialBitsAndTheOwnerOnlyAsRoot() async throws {
        let remote = try makeRemote()
        let source = try makeMetadataSource(remote.scratch + "/special", Data("suid".utf8), mode: 0o6755)
        let root = geteuid() == 0
        if root { XCTAssertEqual(chown(source, 1234, 5678), 0) }
        // chown clears setuid and setgid; set them again.
        XCTAssertEqual(chmod(source, 0o6755), 0)
        _ = try await remote.storage.writeFile("special.bin", from: source)
        var placed = stat()
        XCTAssertEqual(stat(remote.root + "/special.bin", &placed), 0)
        XCTAssertEqual(placed.st_mode & 0o7777, root ? 0o6755 : 0o755)
        XCTAssertEqual(placed.st_uid, root ? 1234 : geteuid())
        if root { XCTAssertEqual(placed.st_gid, 5678) }
        XCTAssertEqual(placed.st_mtim.tv_nsec, metadataSourceTime.tv_nsec)
    }

    /// The engine over sources with an old mtime: the ids the writes return (taken after the
    /// times are set) match the next listing's, so a second sync uploads nothing.
    func testASecondSyncOfSourcesWithTheirOwnTimesUploadsNothing() async throws {
        let remote = try makeRemote()
        let engine = SyncEngine(storage: remote.storage, state: try StateStore(path: remote.scratch + "/state.db"))
        let entries = try ["a.txt", "b/c.sh"].map { path -> SyncEntry in
            let data = Data(path.utf8)
            let source = try makeMetadataSource(remote.scratch + "/src-" + path.replacingOccurrences(of: "/", with: "-"),
                                                data, mode: path.hasSuffix(".sh") ? 0o755 : 0o600)
            return SyncEntry(path: path, size: Int64(data.count), hash: SHA256Hasher.hex(data), source: .file(source))
        }
        let snapshot = SyncSnapshot(entries: entries, marker: Data("m".utf8))
        guard case .completed(let first) = try await engine.sync(snapshot) else { return XCTFail("the first run did not complete") }
        XCTAssertEqual(first.uploaded, ["a.txt", "b/c.sh", SyncEngine.defaultMarkerPath])
        guard case .completed(let second) = try await engine.sync(snapshot) else { return XCTFail("the second run did not complete") }
        XCTAssertEqual(second.uploaded, [], "the recorded ids were not the listed ones")
    }

    func testSyncEngineRoundTripUploadsOnceThenNothingThenTheChange() async throws {
        let remote = try makeRemote()
        try await engineRoundTrip(remote.storage, scratch: remote.scratch)
    }

    // MARK: Helpers

    /// A remote folder and a scratch folder side by side in one temporary directory.
    // MARK: Names that are not UTF-8

    func testNamesThatAreNotUTF8RoundTripByteExactly() async throws {
        let remote = try makeRemote()
        let raw: [UInt8] = Array("remote/dir/caf".utf8) + [0xE9] + Array(".txt".utf8)
        // A file another program wrote with a Latin-1 name is listed under its escaped name.
        try FileManager.default.createDirectory(atPath: remote.dir.path("remote/dir"), withIntermediateDirectories: true)
        let fd = FileName.withCString(FileName.string(fromBytes: Array(remote.dir.path("").utf8) + raw)) {
            open($0, O_WRONLY | O_CREAT, 0o644)
        }
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(write(fd, "latin", 5), 5)
        close(fd)
        let name = "dir/" + FileName.string(fromBytes: Array("caf".utf8) + [0xE9] + Array(".txt".utf8))
        let listed = try await remote.storage.list().map(\.path)
        XCTAssertEqual(listed, [name])
        let read = try await remote.storage.readBytes(name)
        XCTAssertEqual(read, Data("latin".utf8))

        // Written under an escaped name, the file on disk carries the raw bytes.
        let other = FileName.string(fromBytes: [0xFF, 0x41])
        _ = try await remote.storage.writeBytes(other, Data("ff".utf8))
        let fd2 = FileName.withCString(remote.root + "/" + other) { open($0, O_RDONLY) }
        XCTAssertGreaterThanOrEqual(fd2, 0, "the raw name exists on disk")
        close(fd2)
        let download = remote.dir.path("scratch/") + FileName.string(fromBytes: [0xFE])
        try await remote.storage.downloadFile(other, toPath: download)
        XCTAssertEqual(try SHA256Hasher.hexOfFile(atPath: download), SHA256Hasher.hex(Data("ff".utf8)))
    }

    private struct Remote {
        let dir: TempDir
        var storage: FolderStorage
        var root: String { storage.root }
        var scratch: String { dir.path("scratch") }

        /// Makes `writeFile` fail for real: a 1 MiB source against a 64 KiB file size limit,
        /// so the write stops with EFBIG after the first 64 KiB.
        var failMidway: StorageContract.FailMidway {
            { [storage, dir] path in
                let source = try dir.write("scratch/one-mebibyte.bin", StorageContract.randomData(count: 1 << 20))
                try await withFileSizeLimit(64 << 10) {
                    _ = try await storage.writeFile(path, from: source)
                }
            }
        }
    }

    private func makeRemote(durability: FolderStorage.Durability = .batched) throws -> Remote {
        let dir = try TempDir("folder-storage")
        addTeardownBlock { dir.cleanup() }
        try dir.makeFolder("remote")
        try dir.makeFolder("scratch")
        return Remote(dir: dir, storage: FolderStorage(root: dir.path("remote"), durability: durability))
    }

    /// Fails if a temporary file is left anywhere on disk, where list() would not show it.
    private func assertNoTemporaryFiles(_ remote: Remote, file: StaticString = #filePath, line: UInt = #line) throws {
        let leftovers = try remote.dir.entries(under: "remote").filter {
            ($0 as NSString).lastPathComponent.hasPrefix(FolderStorage.temporaryFilePrefix)
        }
        XCTAssertEqual(leftovers, [], "temporary files left on disk", file: file, line: line)
    }
}

/// Runs `body` with the soft RLIMIT_FSIZE at `bytes` and SIGXFSZ ignored, so a write past the
/// limit fails with EFBIG instead of killing the test process; both are restored afterwards.
private func withFileSizeLimit(_ bytes: UInt, _ body: () async throws -> Void) async throws {
    var saved = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &saved) == 0 else {
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    let savedHandler = signal(SIGXFSZ, SIG_IGN)
    var limited = saved
    limited.rlim_cur = bytes
    guard setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limited) == 0 else {
        signal(SIGXFSZ, savedHandler)
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    defer {
        setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &saved)
        signal(SIGXFSZ, savedHandler)
    }
    try await body()
}

/// Issue 11, hygiene, over any provider whose temporaries are files: `place(path, age)` puts a
/// temporary there, its mtime `age` seconds ago; `exists` tells whether it is still there.
func sweepHygiene(
    _ storage: any RemoteStorage, scratch: String, place: (String, Double) throws -> Void, exists: (String) -> Bool,
    file: StaticString = #filePath, line: UInt = #line
) async throws {
    let stale = ["sub/.backup-tmp.dead01", ".backup-tmp.dead02"], fresh = "sub/.backup-tmp.live03"
    for path in stale { try place(path, 7200) }
    try place(fresh, 0)
    let engine = SyncEngine(storage: storage, state: try StateStore(path: scratch + "/sweep-state.db"))
    let snapshot = SyncSnapshot(entries: [SyncEntry(path: "sub/a.txt", size: 1, hash: SHA256Hasher.hex(Data("a".utf8)),
                                                    source: .bytes(Data("a".utf8)))], marker: Data("m".utf8))
    guard case .wouldRun = try await engine.preview(snapshot) else { return XCTFail("the preview did not run", file: file, line: line) }
    XCTAssertTrue(stale.allSatisfy(exists), "a preview swept temporaries", file: file, line: line)
    try engine.setHold(.held(reason: "testing"))
    guard case .unavailable = try await engine.sync(snapshot) else { return XCTFail("a held run ran", file: file, line: line) }
    XCTAssertTrue(stale.allSatisfy(exists), "a held run swept temporaries", file: file, line: line)
    try engine.setHold(.none)
    guard case .completed = try await engine.sync(snapshot) else { return XCTFail("the run did not complete", file: file, line: line) }
    XCTAssertEqual(stale.filter(exists), [], "stale temporaries were left", file: file, line: line)
    XCTAssertTrue(exists(fresh), "a live writer's temporary was swept", file: file, line: line)
    XCTAssertTrue(exists("sub/a.txt"), file: file, line: line)
}

/// 2001-02-03 04:05:06.123456789 UTC: the modification time the metadata tests give their sources.
let metadataSourceTime = timespec(tv_sec: 981_173_106, tv_nsec: 123_456_789)

/// Writes `data` to a new file at `path` with exactly `mode` (the umask set aside) and
/// `metadataSourceTime` as its mtime, its atime a day earlier; returns `path`.
func makeMetadataSource(_ path: String, _ data: Data, mode: mode_t) throws -> String {
    try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                            withIntermediateDirectories: true)
    try data.write(to: URL(fileURLWithPath: path))
    guard chmod(path, mode) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    var times = [timespec(tv_sec: metadataSourceTime.tv_sec - 86_400, tv_nsec: 0), metadataSourceTime]
    guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return path
}
