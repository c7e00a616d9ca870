// The storage contract suite: the promises of RemoteStorage (see its doc comment) as checks that
// every provider's tests run, one test method per check. Static functions rather than an
// XCTestCase base class, because Linux test discovery does not see inherited test methods.

import BackupEngine
import Foundation
import Synchronization
import XCTest

/// The checks every `RemoteStorage` must pass, each taking the provider under test.
///
/// Unless a check says otherwise it only adds files under its own paths, so it also holds on a
/// remote that is not empty. Failures are reported at the caller's `file` and `line`.
public enum StorageContract {
    /// A write that fails midway for a provider-specific reason; it must throw.
    public typealias FailMidway = (_ path: String) async throws -> Void

    /// Listing a remote with nothing on it gives no files. Needs an empty remote.
    public static func emptyRemoteListsNothing(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let files = try await storage.list()
        XCTAssertEqual(files, [], "a fresh remote lists files", file: file, line: line)
    }

    /// A written file is listed under its path with its size, and the write reports the same.
    public static func writtenFileIsListedWithItsSize(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let data = randomData(count: 1234)
        let written = try await storage.writeBytes("listed/file.bin", data)
        XCTAssertEqual(written.path, "listed/file.bin", file: file, line: line)
        XCTAssertEqual(written.size, 1234, file: file, line: line)

        let listed = try await storage.list().filter { $0.path == "listed/file.bin" }
        XCTAssertEqual(listed.count, 1, "the file is listed exactly once", file: file, line: line)
        XCTAssertEqual(listed.first?.size, 1234, file: file, line: line)
        if let writtenId = written.remoteId, let listedId = listed.first?.remoteId {
            XCTAssertEqual(writtenId, listedId, "the write and the listing disagree on the remote id",
                           file: file, line: line)
        }
    }

    /// `writeBytes` then `readBytes` gives back the same bytes, for empty and small files.
    public static func writeBytesThenReadBytesRoundTrips(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        for (path, data) in [("bytes/small.bin", randomData(count: 4097)), ("bytes/empty.bin", Data())] {
            _ = try await storage.writeBytes(path, data)
            let read = try await storage.readBytes(path)
            XCTAssertEqual(read, data, "\(path) did not round-trip", file: file, line: line)
        }
    }

    /// `writeFile` then `downloadFile` gives back the same bytes over a file large enough that
    /// every copy loop goes around more than once, replacing a local file already there and
    /// creating missing local folders.
    public static func writeFileThenDownloadFileRoundTrips(
        _ storage: any RemoteStorage, scratch: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let data = randomData(count: (3 << 20) + 17)
        let source = scratch + "/upload.bin"
        try data.write(to: URL(fileURLWithPath: source))

        let written = try await storage.writeFile("big/upload.bin", from: source)
        XCTAssertEqual(written.size, Int64(data.count), file: file, line: line)
        let listed = try await storage.list().first { $0.path == "big/upload.bin" }
        XCTAssertEqual(listed?.size, Int64(data.count), file: file, line: line)

        // A stale local file must be replaced, not appended to or left alone.
        let folder = scratch + "/restored/deeper"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("stale local content".utf8).write(to: URL(fileURLWithPath: folder + "/download.bin"))
        try await storage.downloadFile("big/upload.bin", toPath: folder + "/download.bin")
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: folder + "/download.bin")) == data,
                      "the download differs from the upload", file: file, line: line)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder), ["download.bin"],
                       "the download left something beside the file", file: file, line: line)

        let fresh = scratch + "/missing/parents/download.bin"
        try await storage.downloadFile("big/upload.bin", toPath: fresh)
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: fresh)) == data,
                      "the download into new folders differs from the upload", file: file, line: line)
    }

    /// `writeFileHashing` sends the file as `writeFile` does and tells the SHA-256 of exactly
    /// its bytes, with the local file's size, mtime and inode: over sizes on both sides of
    /// every buffer's edge (empty, one byte, a page, 1 MiB and either side, several MiB).
    public static func writeFileHashingTellsTheHashOfWhatItSent(
        _ storage: any RemoteStorage, scratch: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        for size in [0, 1, 4095, 4096, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, (3 << 20) + 17] {
            let data = randomData(count: size)
            let source = scratch + "/hashing-\(size).bin"
            try data.write(to: URL(fileURLWithPath: source))
            var status = stat()
            XCTAssertEqual(stat(source, &status), 0, file: file, line: line)
            var hasher = SHA256Hasher()
            hasher.update(data)
            let expected = hasher.finalize()

            let sent = try await storage.writeFileHashing("hashing/\(size).bin", from: source, onBytes: { _ in })
            XCTAssertEqual(sent.digest, expected, "the hash of a \(size)-byte file", file: file, line: line)
            XCTAssertEqual(sent.file.size, Int64(size), file: file, line: line)
            XCTAssertEqual(sent.fingerprint.size, Int64(size), file: file, line: line)
            XCTAssertEqual(sent.fingerprint.inode, UInt64(status.st_ino), file: file, line: line)
            XCTAssertEqual(
                sent.fingerprint.mtimeNanoseconds, clampedNanoseconds(status.st_mtim),
                file: file, line: line)
            let back = scratch + "/hashing-\(size).back"
            try await storage.downloadFile("hashing/\(size).bin", toPath: back)
            XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: back)) == data, "a \(size)-byte file came back changed", file: file, line: line)
        }
        // A local file that is not there is the local side's failure, named by its path.
        do {
            _ = try await storage.writeFileHashing("hashing/missing.bin", from: scratch + "/no-such-file", onBytes: { _ in })
            XCTFail("a missing local file was sent", file: file, line: line)
        } catch let error as LocalFileError {
            XCTAssertTrue(error.message.contains(scratch + "/no-such-file"), error.message, file: file, line: line)
        }
    }

    /// `writeFile` and `downloadFile` report their bytes while the file moves, not only at
    /// its end: some count below the size comes before the last, which is the whole size.
    public static func transfersReportBytesAsTheyGo(
        _ storage: any RemoteStorage, scratch: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let size = (20 << 20) + 5
        let source = scratch + "/moving.bin"
        try randomData(count: size).write(to: URL(fileURLWithPath: source))
        let sent = ByteLog()
        _ = try await storage.writeFile("moving/big.bin", from: source, onBytes: { sent.add($0) })
        let up = sent.values
        XCTAssertEqual(up.last, Int64(size), "the upload's last report is not its size: \(up.suffix(3))", file: file, line: line)
        XCTAssertTrue(up.contains { $0 > 0 && $0 < Int64(size) }, "no report while the upload moved: \(up)", file: file, line: line)
        XCTAssertEqual(up, up.sorted(), "the upload's reports went back", file: file, line: line)

        let local = scratch + "/moved.bin"
        let fd = open(local, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { close(fd) }
        let received = ByteLog()
        try await storage.downloadFile("moving/big.bin", into: fd, expectedSize: Int64(size), onBytes: { received.add($0) })
        let down = received.values
        XCTAssertEqual(down.last, Int64(size), "the download's last report is not its size", file: file, line: line)
        XCTAssertTrue(down.contains { $0 > 0 && $0 < Int64(size) }, "no report while the download moved: \(down)", file: file, line: line)
    }

    /// Writing over a file replaces its content and its size, shorter or longer.
    public static func overwriteReplacesContentAndSize(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let path = "over/write.txt"
        for content in ["the first version, the longest of the three", "v2", "third, middling"] {
            let data = Data(content.utf8)
            let written = try await storage.writeBytes(path, data)
            XCTAssertEqual(written.size, Int64(data.count), file: file, line: line)
            let read = try await storage.readBytes(path)
            XCTAssertEqual(String(decoding: read, as: UTF8.self), content, file: file, line: line)
            let listed = try await storage.list().filter { $0.path == path }
            XCTAssertEqual(listed.map(\.size), [Int64(data.count)], file: file, line: line)
        }
    }

    /// A deleted file is neither listed nor readable.
    public static func deleteRemovesTheFile(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        _ = try await storage.writeBytes("gone/file.txt", Data("short-lived".utf8))
        _ = try await storage.writeBytes("gone/sibling.txt", Data("stays".utf8))
        try await storage.delete("gone/file.txt")
        let paths = try await storage.list().map(\.path)
        XCTAssertFalse(paths.contains("gone/file.txt"), "the deleted file is still listed", file: file, line: line)
        XCTAssertTrue(paths.contains("gone/sibling.txt"), "delete took a sibling with it", file: file, line: line)
        await assertThrows(.notFound, "reading a deleted file", file: file, line: line) {
            _ = try await storage.readBytes("gone/file.txt")
        }
    }

    /// Deleting a path that was never there, or is already gone, succeeds.
    public static func deleteOfAbsentPathSucceeds(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        try await storage.delete("never/written.txt")
        _ = try await storage.writeBytes("twice/deleted.txt", Data("x".utf8))
        try await storage.delete("twice/deleted.txt")
        try await storage.delete("twice/deleted.txt")
        let paths = try await storage.list().map(\.path)
        XCTAssertFalse(paths.contains("twice/deleted.txt"), file: file, line: line)
    }

    /// Reading an absent path throws `.notFound`, in an existing folder and in a missing one.
    public static func readOfAbsentPathThrowsNotFound(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        _ = try await storage.writeBytes("present/file.txt", Data("here".utf8))
        for path in ["present/absent.txt", "absent/folder/file.txt", "absent.txt"] {
            await assertThrows(.notFound, "reading \(path)", file: file, line: line) {
                _ = try await storage.readBytes(path)
            }
        }
    }

    /// Downloading an absent path throws `.notFound` and leaves nothing at the local path.
    public static func downloadOfAbsentPathThrowsNotFound(
        _ storage: any RemoteStorage, scratch: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let local = scratch + "/not-downloaded.bin"
        await assertThrows(.notFound, "downloading an absent path", file: file, line: line) {
            try await storage.downloadFile("absent/file.bin", toPath: local)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: local), "a failed download left a local file",
                       file: file, line: line)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch).filter {
            $0.hasPrefix("not-downloaded") || $0.hasPrefix(".")
        }, [], "a failed download left something in the local folder", file: file, line: line)
    }

    /// A download never writes more than one byte past the expected size, and a body of any
    /// other size than expected throws `DownloadSizeMismatch` (longer or shorter).
    public static func downloadRefusesABodyOfAnotherSize(
        _ storage: any RemoteStorage, scratch: String, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let data = randomData(count: 100_000)
        _ = try await storage.writeBytes("sized/body.bin", data)
        let local = scratch + "/sized.bin"
        for (expected, longer) in [(Int64(10), true), (Int64(200_000), false)] {
            do {
                try await storage.downloadFile("sized/body.bin", toPath: local, expectedSize: expected)
                XCTFail("a \(data.count)-byte body was accepted as \(expected) bytes", file: file, line: line)
            } catch let mismatch as DownloadSizeMismatch {
                XCTAssertEqual(mismatch.path, "sized/body.bin", file: file, line: line)
                XCTAssertEqual(mismatch.expected, expected, file: file, line: line)
                XCTAssertEqual(mismatch.longer, longer, file: file, line: line)
            }
        }
        // Written into a descriptor the test keeps: a longer body stops at the limit.
        let fd = open(local, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        defer { close(fd) }
        do {
            try await storage.downloadFile("sized/body.bin", into: fd, expectedSize: 10, onBytes: { _ in })
            XCTFail("accepted", file: file, line: line)
        } catch is DownloadSizeMismatch {}
        var info = stat()
        XCTAssertEqual(fstat(fd, &info), 0)
        XCTAssertLessThanOrEqual(info.st_size, 11, "the download went on past the listed size", file: file, line: line)
        // The right size is accepted, and the byte callback saw every byte (into the same
        // descriptor, emptied as the protocol asks of a caller).
        XCTAssertEqual(ftruncate(fd, 0), 0, file: file, line: line)
        XCTAssertEqual(lseek(fd, 0, SEEK_SET), 0, file: file, line: line)
        let seen = ByteCounter()
        try await storage.downloadFile("sized/body.bin", into: fd, expectedSize: Int64(data.count), onBytes: { seen.set($0) })
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: local)), data, file: file, line: line)
        XCTAssertEqual(seen.value, Int64(data.count), "onBytes did not reach the whole size", file: file, line: line)
    }

    /// Names with spaces and non-ASCII characters round-trip through write, list and read.
    public static func spacesAndUnicodeInNamesRoundTrip(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        try await roundTrip(storage, paths: [
            "Fotos/Ünïcødé 日本語 ✓.txt",
            "with spaces/a file with  two spaces .txt",
            "Ελληνικά/emoji 🎉 name.md",
        ], file: file, line: line)
    }

    /// Files several folders deep round-trip through write, list and read.
    public static func deepFoldersRoundTrip(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        try await roundTrip(storage, paths: ["a/b/c/d/e/f/g.txt", "a/b/c/sibling.txt", "a/top.txt"],
                            file: file, line: line)
    }

    /// `identityKey()` gives the answer `ensureIdentityKey()` gave, twice, and again through a
    /// second instance over the same remote, made by `makeStorage`.
    public static func identityKeyIsStable(
        _ makeStorage: () async throws -> any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let first = try await makeStorage()
        let key = try await first.ensureIdentityKey()
        let again = try await first.identityKey()
        XCTAssertEqual(key, again, "identityKey changed between two calls", file: file, line: line)
        let second = try await makeStorage()
        let fromSecond = try await second.identityKey()
        XCTAssertEqual(key, fromSecond, "identityKey changed with a new instance over the same remote",
                       file: file, line: line)
    }

    /// A write that fails midway throws a CloudError, leaves nothing under its path and nothing
    /// new in the listing.
    public static func failedWriteLeavesNothing(
        _ storage: any RemoteStorage, failMidway: FailMidway, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let path = "failed/write.bin"
        let before = Set(try await storage.list().map(\.path))
        try await expectFailure(failMidway, path, file: file, line: line)

        let after = try await storage.list()
        XCTAssertEqual(Set(after.map(\.path)), before, "a failed write changed the listing", file: file, line: line)
        await assertThrows(.notFound, "reading the path of a failed write", file: file, line: line) {
            _ = try await storage.readBytes(path)
        }
    }

    /// A write over an existing file that fails midway leaves the old file whole.
    public static func failedOverwriteKeepsTheOldFile(
        _ storage: any RemoteStorage, failMidway: FailMidway, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let path = "failed/overwrite.txt"
        let old = Data("the old version must survive".utf8)
        _ = try await storage.writeBytes(path, old)
        let before = try await storage.list()
        try await expectFailure(failMidway, path, file: file, line: line)

        let after = try await storage.list()
        XCTAssertEqual(Set(after.map(\.path)), Set(before.map(\.path)), "a failed overwrite changed the listing",
                       file: file, line: line)
        XCTAssertEqual(after.first { $0.path == path }?.size, Int64(old.count), file: file, line: line)
        let read = try await storage.readBytes(path)
        XCTAssertEqual(read, old, "a failed overwrite damaged the old file", file: file, line: line)
    }

    // MARK: Versions

    /// A file kept as a version (copied: still at its path; moved: gone from it) is at the
    /// version's path with its bytes, listed by `listFolder` and `listNames`, never by `list()`.
    public static func keptVersionsAreListedApartFromTheTree(
        _ storage: any RemoteStorage, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let replaced = Data("the old content of a replaced file".utf8)
        let deleted = Data("a deleted file".utf8)
        let (replacedPath, deletedPath) = ("versions/replaced.txt", "versions/deep er/deleted ü.txt")
        _ = try await storage.writeBytes(replacedPath, replaced)
        _ = try await storage.writeBytes(deletedPath, deleted)
        let run = VersionStore.runName(Date(timeIntervalSince1970: 1_800_000_000))
        let copied = try await storage.keepVersion(
            replacedPath, as: VersionStore.path(run: run, replacedPath), size: Int64(replaced.count), copy: true)
        XCTAssertTrue(copied, "a copy must say the file is still at its path", file: file, line: line)
        let moved = try await storage.keepVersion(
            deletedPath, as: VersionStore.path(run: run, deletedPath), size: Int64(deleted.count), copy: false)
        if !moved {
            await assertThrows(.notFound, "reading a file moved into the versions", file: file, line: line) {
                _ = try await storage.readBytes(deletedPath)
            }
        } else {
            try await storage.delete(deletedPath)
        }
        let stillThere = try await storage.readBytes(replacedPath)
        let keptReplaced = try await storage.readBytes(VersionStore.path(run: run, replacedPath))
        let keptDeleted = try await storage.readBytes(VersionStore.path(run: run, deletedPath))
        XCTAssertEqual(stillThere, replaced, "a copy changed the file", file: file, line: line)
        XCTAssertEqual(keptReplaced, replaced, file: file, line: line)
        XCTAssertEqual(keptDeleted, deleted, file: file, line: line)

        let listed = Set(try await storage.list().map(\.path))
        XCTAssertTrue(listed.contains(replacedPath), file: file, line: line)
        XCTAssertFalse(listed.contains { $0.hasPrefix(VersionStore.folder) }, "list() showed the versions: \(listed)", file: file, line: line)
        let kept = try await storage.listFolder(VersionStore.folder)
        XCTAssertEqual(Set(kept.map(\.path)), [VersionStore.path(run: run, replacedPath), VersionStore.path(run: run, deletedPath)],
                       file: file, line: line)
        XCTAssertEqual(kept.first { $0.path.hasSuffix("replaced.txt") }?.size, Int64(replaced.count), file: file, line: line)
        _ = try await storage.writeBytes(VersionStore.recordPath(run: run), Data("{}".utf8))
        let names = Set(try await storage.listNames(in: VersionStore.folder))
        XCTAssertEqual(names, [run, run + ".json"], file: file, line: line)
        let none = try await storage.listNames(in: "no such folder")
        XCTAssertEqual(none, [], file: file, line: line)
        let nothing = try await storage.listFolder("no such folder")
        XCTAssertEqual(nothing.count, 0, file: file, line: line)

        // A version already there is never kept over.
        await assertThrows(.transport, "keeping a version over one already kept", file: file, line: line) {
            _ = try await storage.keepVersion(replacedPath, as: VersionStore.path(run: run, deletedPath), size: Int64(replaced.count), copy: true)
        }
        await assertThrows(.notFound, "keeping a file that is not there", file: file, line: line) {
            _ = try await storage.keepVersion("versions/absent.txt", as: VersionStore.path(run: run, "versions/absent.txt"), size: 1, copy: false)
        }

        try await storage.deleteFolder(VersionStore.runFolder(run))
        try await storage.deleteFolder(VersionStore.runFolder(run))  // absent: not an error
        try await storage.delete(VersionStore.recordPath(run: run))
        let left = try await storage.listFolder(VersionStore.folder)
        XCTAssertEqual(left.count, 0, "deleteFolder left files", file: file, line: line)
        let after = try await storage.readBytes(replacedPath)
        XCTAssertEqual(after, replaced, "deleteFolder touched the tree", file: file, line: line)
    }

    // MARK: Helpers for provider tests

    /// `count` random bytes, so a wrong offset or a dropped chunk cannot go unnoticed.
    public static func randomData(count: Int) -> Data {
        var generator = SystemRandomNumberGenerator()
        var data = Data(count: count)
        data.withUnsafeMutableBytes { buffer in
            // A word at a time: byte by byte takes most of a second for 3 MiB in a debug build.
            var offset = 0
            while offset < buffer.count {
                let word: UInt64 = generator.next()
                let take = min(8, buffer.count - offset)
                withUnsafeBytes(of: word) { bytes in
                    buffer[offset..<(offset + take)].copyBytes(from: bytes[0..<take])
                }
                offset += take
            }
        }
        return data
    }

    /// Fails unless `body` throws a CloudError of `kind`.
    public static func assertThrows(
        _ kind: CloudError.Kind, _ what: String, file: StaticString = #filePath, line: UInt = #line,
        _ body: () async throws -> Void
    ) async {
        do {
            try await body()
            XCTFail("\(what): expected CloudError \(kind.rawValue), nothing was thrown", file: file, line: line)
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, kind, "\(what): \(error)", file: file, line: line)
        } catch {
            XCTFail("\(what): expected CloudError \(kind.rawValue), got \(error)", file: file, line: line)
        }
    }

    // MARK: Private

    private static func roundTrip(
        _ storage: any RemoteStorage, paths: [String], file: StaticString, line: UInt
    ) async throws {
        var expected: [String: Data] = [:]
        for path in paths {
            let data = Data("content of \(path)".utf8)
            expected[path] = data
            let written = try await storage.writeBytes(path, data)
            XCTAssertEqual(written.path, path, file: file, line: line)
        }
        let listed = try await storage.list()
        for path in paths {
            let matches = listed.filter { $0.path == path }
            XCTAssertEqual(matches.count, 1, "\(path) is listed \(matches.count) times", file: file, line: line)
            XCTAssertEqual(matches.first?.size, expected[path].map { Int64($0.count) }, file: file, line: line)
            let read = try await storage.readBytes(path)
            XCTAssertEqual(read, expected[path], "\(path) did not round-trip", file: file, line: line)
        }
    }

    private static func expectFailure(
        _ failMidway: FailMidway, _ path: String, file: StaticString, line: UInt
    ) async throws {
        do {
            try await failMidway(path)
            XCTFail("the write that was to fail midway succeeded; the check proves nothing", file: file, line: line)
        } catch is CloudError {
            // What the contract asks: every failure is a CloudError.
        } catch {
            XCTFail("a failed write threw \(error), not a CloudError", file: file, line: line)
        }
    }
}

extension RemoteStorage {
    /// Downloads `path` into a new file at `localPath` (its folders created), as restore
    /// does into a descriptor; on a failure nothing is left at `localPath`.
    public func downloadFile(_ path: String, toPath localPath: String, expectedSize: Int64? = nil) async throws {
        let folder = (localPath as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let fd = FileName.withCString(localPath) { open($0, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        guard fd >= 0 else { throw LocalFileError(errno: errno, reading: localPath) }
        defer { close(fd) }
        do {
            try await downloadFile(path, into: fd, expectedSize: expectedSize, onBytes: { _ in })
        } catch {
            _ = FileName.withCString(localPath) { unlink($0) }
            throw error
        }
    }
}

/// The last value a byte callback gave.
/// Every count a byte callback was given, in order.
public final class ByteLog: Sendable {
    private let log = Mutex<[Int64]>([])
    public init() {}
    public var values: [Int64] { log.withLock { $0 } }
    public func add(_ value: Int64) { log.withLock { $0.append(value) } }
}

public final class ByteCounter: Sendable {
    private let latest = Mutex<Int64>(0)
    public init() {}
    public var value: Int64 { latest.withLock { $0 } }
    public func set(_ value: Int64) { latest.withLock { $0 = value } }
}
