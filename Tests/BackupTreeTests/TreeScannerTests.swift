// The tree scanner on real folders: files with their hashes, order, excludes and pruning,
// .backupignore, size-compared files, links, FIFOs, unreadable files and folders, the
// fingerprint cache, non-UTF-8 names, emptiness, a missing root and the reserved names.
// Failures that root cannot produce for real (it reads mode-000 files) go through the
// scanner's file-system seam; as any other user the real chmod does it.

@testable import BackupTree
import BackupEngine
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class TreeScannerTests: XCTestCase {
    private var dir: TempDir!
    private var root: String { dir.path("src") }

    override func setUp() async throws {
        dir = try TempDir("backup-scan")
        try dir.makeFolder("src")
    }

    override func tearDown() {
        // Mode-000 folders left by a test would stop the cleanup as a user other than root.
        chmod(dir.path("src/build/locked"), 0o755)
        chmod(dir.path("src/cache/locked"), 0o755)
        chmod(dir.path("src/locked"), 0o755)
        dir.cleanup()
    }

    // MARK: Helpers

    @discardableResult
    private func put(_ path: String, _ text: String) throws -> Data {
        let data = Data(text.utf8)
        try dir.write("src/" + path, data)
        return data
    }

    /// A source file's modification time in nanoseconds, as the scan records it.
    private func mtime(_ path: String) throws -> Int64 {
        var info = stat()
        XCTAssertEqual(lstat(root + "/" + path, &info), 0)
        return Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    }

    /// The entries with their modes, times and owners left out, for tests of what else the
    /// scan finds (testModesTimesOwnersHardLinksAndEmptyFoldersAreScanned checks those).
    private func withoutMetadata(_ entries: some Sequence<SyncEntry>) -> [SyncEntry] {
        entries.map { entry in
            var plain = entry
            plain.metadata = nil
            return plain
        }
    }

    private func scan(_ options: ScanOptions = ScanOptions(), cache: [String: Fingerprint] = [:]) throws -> ScanResult {
        try TreeScanner(root: root, options: options).scan(cache: cache)
    }

    private func scan(
        _ options: ScanOptions = ScanOptions(), cache: [String: Fingerprint] = [:], fileSystem: ScanFileSystem
    ) throws -> ScanResult {
        try TreeScanner(root: root, options: options, fileSystem: fileSystem).scan(cache: cache)
    }

    private func paths(_ result: ScanResult) -> [String] { result.entries.map(\.path) }

    private static var isRoot: Bool { geteuid() == 0 }

    /// The real system calls, except that opening any of `folders` or `files` (relative paths)
    /// fails with EACCES, and every folder opened is recorded.
    private func denying(folders: Set<String> = [], files: Set<String> = [], log: OpenLog) -> ScanFileSystem {
        let system = ScanFileSystem.system
        return ScanFileSystem(
            openFolder: { parent, name, path in
                log.folders.withLock { $0.append(path) }
                return folders.contains(path) ? -EACCES : system.openFolder(parent, name, path)
            },
            openFile: { rootFD, name, path in
                log.files.withLock { $0.append(path) }
                return files.contains(path) ? -EACCES : system.openFile(rootFD, name, path)
            })
    }

    private func setMtime(_ path: String, seconds: Int, nanoseconds: Int = 0) {
        var times = [timespec(tv_sec: seconds, tv_nsec: nanoseconds), timespec(tv_sec: seconds, tv_nsec: nanoseconds)]
        XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
    }

    // MARK: Files, hashes, order

    /// A first scan holds one hashing outcome per file until the last is in: they stay small
    /// (a fingerprint's size and hash are not stored twice).
    func testAHashingOutcomeTakesAtMost64Bytes() {
        XCTAssertLessThanOrEqual(MemoryLayout<HashOutcome>.stride, 64)
    }

    func testRegularFilesAreListedWithSizesAndSHA256OfTheirContent() throws {
        let a = try put("a.txt", "alpha")
        let b = try put("docs/deep/b.md", "bravo bravo")
        let empty = try put("empty", "")
        // Larger than the 1 MiB read buffer, so the hash spans several reads.
        let big = Data((0..<(3 << 19)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try dir.write("src/big.bin", big)

        let result = try scan()
        let expected: [(String, Data)] = [("a.txt", a), ("big.bin", big), ("docs/deep/b.md", b), ("empty", empty)]
        XCTAssertEqual(
            withoutMetadata(result.entries),
            expected.map { SyncEntry(path: $0.0, size: Int64($0.1.count), hash: SHA256Hasher.hex($0.1), source: .underRoot) })
        XCTAssertEqual(result.files, 4)
        XCTAssertEqual(result.bytes, Int64(a.count + b.count + empty.count + big.count))
        XCTAssertEqual(result.hashedFiles, 4)
        XCTAssertEqual(result.hashedBytes, result.bytes)
        XCTAssertEqual(Set(result.fingerprints(updating: [:]).keys), Set(expected.map(\.0)))
        XCTAssertEqual(result.newPrints, result.fingerprints(updating: [:]))
        XCTAssertEqual(result.fingerprints(updating: [:])["a.txt"]?.hash, SHA256Hasher.hex(a))
        XCTAssertEqual(result.fingerprints(updating: [:])["a.txt"]?.size, Int64(a.count))
        XCTAssertTrue(result.notes.isEmpty, "\(result.notes)")
        XCTAssertFalse(result.isEmpty)
    }

    func testEntriesAreSortedByTheUTF8BytesOfTheirPaths() throws {
        // "a.txt" < "a/b" < "a-b"? No: "-" (2D) < "." (2E) < "/" (2F), which a walk that sorts
        // folder names without their "/" gets wrong.
        for name in ["a/b", "a/c/d", "a.txt", "a-b", "a0", "B", "b", "é.txt", "e", "z/y/x", "a b", "ab/c", "a/b.c/d", "a/b-c"] {
            try put(name, name)
        }
        let result = try scan()
        let expected = paths(result).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        XCTAssertEqual(paths(result), expected)
        XCTAssertEqual(paths(result).count, 14)
        XCTAssertEqual(try scan().entries, result.entries, "a second scan lists the same entries in the same order")
        XCTAssertEqual(try scan(ScanOptions(threads: 1)).entries, result.entries, "one hashing thread gives the same result")
    }

    func testSeveralThreadsListAndHashExactlyWhatOneThreadDoes() throws {
        // More folders than the walk queues at once (64), so some are listed inline too.
        for index in 0..<300 {
            try put("d\(index % 150)/s\(index % 4)/f\(index)", String(repeating: "x", count: index * 37))
        }
        try put("d7/s3/locked/inner", "i")
        let log = OpenLog()
        let one = try scan(ScanOptions(threads: 1), fileSystem: denying(folders: ["d7/s3/locked"], log: log))
        let four = try scan(ScanOptions(threads: 4), fileSystem: denying(folders: ["d7/s3/locked"], log: log))
        XCTAssertEqual(one.entries, four.entries)
        XCTAssertEqual(one.notes, four.notes)
        XCTAssertEqual(four.notes.map(\.path), ["d7/s3/locked"])
        XCTAssertEqual(four.hashedFiles, 300)
        XCTAssertEqual(four.entries.count, 301)
        XCTAssertEqual(paths(four), paths(four).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
        for entry in four.entries where entry.source != .absent {
            let data = try Data(contentsOf: URL(fileURLWithPath: root + "/" + entry.path))
            XCTAssertEqual(entry.hash, SHA256Hasher.hex(data), entry.path)
        }
    }

    /// Folders with more subfolders than the walk queues (64), nested: queued folders are
    /// listed inside other listings, the assembly follows the listers as they go, and the
    /// result is exactly one thread's.
    func testAWideDeepTreeOnTwoThreadsIsAssembledExactlyAsOnOne() throws {
        for outer in 0..<90 {
            for inner in 0..<70 where (outer * 70 + inner) % 3 == 0 {
                try put("o\(outer)/i\(inner)/f", "\(outer).\(inner)")
            }
            try FileManager.default.createDirectory(atPath: root + "/o\(outer)/empty", withIntermediateDirectories: true)
        }
        try put("o3/i5/deeper/still/g", "g")
        let log = OpenLog()
        let one = try scan(ScanOptions(threads: 1), fileSystem: denying(folders: ["o40/i2"], log: log))
        let two = try scan(ScanOptions(threads: 2), fileSystem: denying(folders: ["o40/i2"], log: log))
        XCTAssertEqual(one.entries, two.entries)
        XCTAssertEqual(one.treeEntries, two.treeEntries)
        XCTAssertEqual(one.notes, two.notes)
        XCTAssertEqual(two.files, 2100)  // 2,100 and g, less the one in the unreadable folder
        XCTAssertEqual(two.treeEntries.count, 90 * 2 + 2100 + 1 - 1 + 2)  // o3/i5 is there for g; o40/i2 is not opened
        XCTAssertEqual(paths(two), paths(two).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
    }

    /// Each new fingerprint names the file it was read from, after a file vanished before
    /// its read and an unreadable folder made the entries be sorted again.
    func testNewFingerprintsNameTheFilesTheyWereReadFrom() throws {
        for index in 0..<40 { try put("d\(index % 4)/f\(index)", String(repeating: "v", count: index + 1)) }
        try put("d2/locked/x", "x")
        let system = ScanFileSystem.system
        let fileSystem = ScanFileSystem(
            openFolder: { parent, name, path in path == "d2/locked" ? -EACCES : system.openFolder(parent, name, path) },
            openFile: { rootFD, name, path in
                if path == "d0/f4" { unlinkat(rootFD, name, 0) }
                return system.openFile(rootFD, name, path)
            })
        let result = try scan(ScanOptions(threads: 2), fileSystem: fileSystem)
        XCTAssertEqual(result.notes.map(\.kind).sorted { "\($0)" < "\($1)" }, [.unreadableFolder, .vanished])
        XCTAssertEqual(result.newFingerprints.count, 39)
        let entries = Dictionary(uniqueKeysWithValues: result.entries.map { ($0.path, $0) })
        for update in result.newFingerprints {
            let entry = try XCTUnwrap(entries[update.path], update.path)
            XCTAssertEqual(entry.digest, update.fingerprint.digest, update.path)
            let index = try XCTUnwrap(Int(update.path.split(separator: "f").last ?? ""), update.path)
            XCTAssertEqual(update.fingerprint.size, Int64(index + 1), update.path)
        }
        XCTAssertFalse(result.newFingerprints.contains { $0.path == "d0/f4" })
    }

    func testATrailingSlashOnTheRootGivesPlainAbsolutePaths() throws {
        try put("x", "x")
        let result = try TreeScanner(root: root + "/").scan(cache: [:])
        XCTAssertEqual(result.localRoot, root)
        XCTAssertEqual(result.entries.first?.localPath(root: result.localRoot), root + "/x")
    }

    // MARK: Excludes

    func testExcludesFromOptionsLeaveFilesOutAndPruneExcludedFolders() throws {
        try put("keep.txt", "k")
        try put("debug.log", "l")
        try put("sub/trace.log", "l")
        try put("build/out.o", "o")
        try put("build/locked/secret", "s")
        chmod(dir.path("src/build/locked"), 0)
        let log = OpenLog()
        let result = try scan(
            ScanOptions(excludes: try PatternList(["*.log", "build/"])),
            fileSystem: denying(folders: ["build", "build/locked"], log: log))

        XCTAssertEqual(paths(result), ["keep.txt"])
        // Opening build or build/locked would have failed and left a note: they were never opened.
        XCTAssertEqual(result.notes, [])
        XCTAssertEqual(log.folders.withLock { $0 }, ["sub"])
        XCTAssertEqual(log.files.withLock { $0 }, ["keep.txt"], "excluded files are never read")
    }

    func testBackupIgnoreAtTheRootExcludesAndPrunes() throws {
        // The negation comes before cache/: placed after it, it could re-include a cache/keep.tmp,
        // and cache would have to be walked.
        try put(".backupignore", "*.tmp\n!keep.tmp\n# caches\ncache/\n")
        try put("notes.txt", "n")
        try put("scratch.tmp", "t")
        try put("keep.tmp", "k")
        try put("cache/blob", "b")
        try put("cache/locked/x", "x")
        try put("deep/cache/y", "y")
        chmod(dir.path("src/cache/locked"), 0)
        let log = OpenLog()
        let result = try scan(fileSystem: denying(folders: ["cache", "cache/locked", "deep/cache"], log: log))

        XCTAssertEqual(paths(result), [".backupignore", "keep.tmp", "notes.txt"])
        XCTAssertEqual(result.notes, [], "no excluded folder was opened")
        XCTAssertEqual(log.folders.withLock { $0 }, ["deep"])

        // Without the ignore file the same tree is listed whole (and the denied folders noted).
        let plain = try scan(ScanOptions(ignoreFileName: nil))
        XCTAssertEqual(plain.entries.count, 7)
    }

    func testNegationReincludesAFileInsideAnExcludedFolder() throws {
        try put("build/keep.txt", "k")
        try put("build/out.o", "o")
        try put("build/sub/x.o", "x")
        try put("other.o", "o")
        let log = OpenLog()
        let result = try scan(
            ScanOptions(excludes: try PatternList(["build/", "*.o", "!build/keep.txt"])), fileSystem: denying(log: log))
        XCTAssertEqual(paths(result), ["build/keep.txt"])
        // build may hold the re-included file, so it is walked; build/sub is pruned again.
        XCTAssertEqual(log.folders.withLock { $0 }, ["build"])

        // The profile's excludes come first, so a .backupignore negation overrides them.
        try put(".backupignore", "!other.o\n")
        let overridden = try scan(ScanOptions(excludes: try PatternList(["build/", "*.o"])))
        XCTAssertEqual(paths(overridden), [".backupignore", "other.o"])
    }

    func testAnInvalidBackupIgnoreIsAnErrorNamingTheFileAndLine() throws {
        try put(".backupignore", "ok\n# fine\n[z-a]\n")
        XCTAssertThrowsError(try scan()) { error in
            guard let error = error as? ScanError else { return XCTFail("\(error)") }
            XCTAssertEqual(error.kind, .ignoreFileInvalid)
            XCTAssertEqual(error.line, 3)
            XCTAssertEqual(error.path, root + "/.backupignore")
            XCTAssertTrue(error.message.contains(root + "/.backupignore line 3"), error.message)
            XCTAssertTrue(error.message.contains("[z-a]"), error.message)
        }
    }

    func testAnIgnoreFileThatIsALinkIsRefusedNotFollowed() throws {
        try dir.write("outside-ignore", Data("*\n".utf8))
        XCTAssertEqual(symlink(dir.path("outside-ignore"), dir.path("src/.backupignore")), 0)
        XCTAssertThrowsError(try scan()) { error in
            XCTAssertEqual((error as? ScanError)?.kind, .ignoreFileUnreadable)
        }
    }

    func testFolderExclusionPrunesOnlyWhatTheListExcludesWhole() throws {
        // (patterns, folder, prunable)
        let cases: [([String], String, Bool)] = [
            (["build/"], "build", true),
            (["build/"], "a/build", true),
            (["build/"], "build/x", true),
            (["build"], "build", true),
            (["/build"], "a/build", false),
            (["*.log"], "logs", false),
            (["*.log"], "x.log", true),
            (["a/**"], "a", true),
            (["a/**"], "b", false),
            (["a/*/"], "a", false),
            (["a/*/"], "a/b", true),
            (["a/b"], "a", false),
            (["**/node_modules/"], "x/y/node_modules", true),
            (["a/**/tmp/"], "a/b/tmp", true),
            (["a/**/tmp/"], "a/b", false),
            (["?*"], "a", true),
            (["a/?*"], "a", false),  // conservative: `?*` matches any name but is not recognised as `*`
            (["build/", "!build/keep"], "build", false),
            (["build/", "!*.txt"], "build", false),
            (["build/", "!other/x"], "build", true),
            (["build/", "!build/"], "build", false),
            (["!build/", "build/"], "build", true),
        ]
        let samples = ["f", "x.txt", "keep", "sub/f", "sub/deeper/g.txt", "tmp/z"]
        for (patterns, folder, prunable) in cases {
            let list = try PatternList(patterns)
            XCTAssertEqual(
                FolderExclusion(list: list).excludesEverything(below: folder), prunable, "\(patterns) on \(folder)")
            if prunable {
                for sample in samples {
                    XCTAssertTrue(list.matches(folder + "/" + sample), "pruned \(folder) but \(patterns) keeps \(sample)")
                }
            }
        }
    }

    // MARK: Comparison

    func testSizeComparedFilesHaveNoHashAndAreNeverRead() throws {
        try put("disk.iso", "big image")
        try put("a.txt", "a")
        let log = OpenLog()
        let result = try scan(
            ScanOptions(sizeCompared: try PatternList(["*.iso"])), fileSystem: denying(files: ["disk.iso"], log: log))
        XCTAssertEqual(
            withoutMetadata(result.entries),
            [
                SyncEntry(path: "a.txt", size: 1, hash: SHA256Hasher.hex(Data("a".utf8)), source: .underRoot),
                SyncEntry(path: "disk.iso", size: 9, hash: nil, source: .underRoot, mtimeNanoseconds: try mtime("disk.iso")),
            ])
        XCTAssertEqual(log.files.withLock { $0 }, ["a.txt"])
        XCTAssertEqual(result.hashedFiles, 1)
        XCTAssertNil(result.fingerprints(updating: [:])["disk.iso"])
        XCTAssertTrue(result.notes.isEmpty)
    }

    // MARK: Links and special files

    func testSymbolicLinksAreKeptWithTheirTargetsAndNeverFollowed() throws {
        try put("real.txt", "real")
        try put("folder/inner.txt", "inner")
        try dir.write("outside/secret.txt", Data("secret".utf8))
        XCTAssertEqual(symlink(root + "/real.txt", root + "/link-to-file"), 0)
        XCTAssertEqual(symlink("folder", root + "/link-to-folder"), 0)
        XCTAssertEqual(symlink(dir.path("outside"), root + "/folder/link-outside"), 0)
        XCTAssertEqual(symlink("/nonexistent/target", root + "/dangling"), 0)
        let latin1 = [UInt8]("caf".utf8) + [0xE9]
        XCTAssertEqual(latin1.map { CChar(bitPattern: $0) }.withUnsafeBufferPointer { buffer in
            (Array(buffer) + [0]).withUnsafeBufferPointer { symlink($0.baseAddress!, root + "/not-utf8") }
        }, 0)

        let result = try scan()
        XCTAssertEqual(paths(result), ["folder/inner.txt", "real.txt"], "a link is never read as a file")
        XCTAssertEqual(result.symlinks, 5)
        let links = result.treeEntries.compactMap { entry -> String? in
            if case .symlink(let target) = entry.kind { "\(entry.path) -> \(target)" } else { nil }
        }
        XCTAssertEqual(links, [
            "dangling -> /nonexistent/target", "folder/link-outside -> \(dir.path("outside"))", "link-to-file -> \(root)/real.txt",
            "link-to-folder -> folder", "not-utf8 -> \(FileName.string(fromBytes: latin1))",
        ])
        XCTAssertEqual(result.treeEntries.filter { $0.kind == .folder }.map(\.path), ["folder"])
        XCTAssertTrue(result.notes.isEmpty)
    }

    func testModesTimesOwnersHardLinksAndEmptyFoldersAreScanned() throws {
        try put("key", "secret key")
        try put("pair/one", "shared")
        chmod(root + "/key", 0o600)
        XCTAssertEqual(link(root + "/pair/one", root + "/pair/two"), 0)
        XCTAssertEqual(link(root + "/pair/one", root + "/a-third-name"), 0)
        try FileManager.default.createDirectory(atPath: root + "/empty", withIntermediateDirectories: true)
        chmod(root + "/empty", 0o700)
        let times = [timespec(tv_sec: 0, tv_nsec: (1 << 30) - 2), timespec(tv_sec: 981_173_106, tv_nsec: 123_456_789)]
        XCTAssertEqual(utimensat(AT_FDCWD, root + "/key", times, 0), 0)

        let result = try scan()
        let byPath = Dictionary(uniqueKeysWithValues: result.entries.map { ($0.path, $0) })
        XCTAssertEqual(byPath["key"]?.metadata?.mode, 0o600)
        XCTAssertEqual(byPath["key"]?.metadata?.mtimeNanoseconds, 981_173_106_123_456_789)
        XCTAssertEqual(byPath["key"]?.metadata?.uid, geteuid())
        XCTAssertEqual(byPath["key"]?.kind, .file)
        // The first name in path order is the file; the others are links of it.
        XCTAssertEqual(byPath["a-third-name"]?.kind, .file)
        XCTAssertEqual(byPath["pair/one"]?.kind, .hardLink(to: "a-third-name"))
        XCTAssertEqual(byPath["pair/two"]?.kind, .hardLink(to: "a-third-name"))
        XCTAssertEqual(result.treeEntries.map(\.path), ["empty", "pair"])
        XCTAssertEqual(result.treeEntries.first?.metadata.mode, 0o700)
    }

    func testAFolderOrFileSwappedForALinkAfterListingIsNotFollowed() throws {
        try put("docs/a.txt", "a")
        try put("data.txt", "data")
        try dir.write("outside/secret.txt", Data("secret".utf8))
        let outside = dir.path("outside")
        let system = ScanFileSystem.system
        // The swap happens in the window between readdir and the open.
        let swapping = ScanFileSystem(
            openFolder: { parent, name, path in
                if path == "docs" {
                    renameat(parent, name, parent, "docs-moved")
                    symlinkat(outside, parent, name)
                }
                return system.openFolder(parent, name, path)
            },
            openFile: { rootFD, name, path in
                if path == "data.txt" {
                    unlinkat(rootFD, name, 0)
                    symlinkat(outside + "/secret.txt", rootFD, name)
                }
                return system.openFile(rootFD, name, path)
            })
        let result = try scan(fileSystem: swapping)
        XCTAssertEqual(paths(result), [], "nothing of the outside folder is listed or read")
        XCTAssertEqual(result.notes.map(\.kind), [.vanished])
        XCTAssertEqual(result.notes.first?.path, "data.txt")
    }

    func testAFileWhoseFolderIsSwappedForALinkBeforeItIsReadIsNotRead() throws {
        try put("docs/a.txt", "mine")
        try dir.write("outside/a.txt", Data("secret".utf8))
        let outside = dir.path("outside")
        let system = ScanFileSystem.system
        // Listed as docs/a.txt; by the time it is opened, docs leads outside the tree.
        let swapping = ScanFileSystem(
            openFolder: system.openFolder,
            openFile: { rootFD, name, path in
                if path == "docs/a.txt" {
                    renameat(rootFD, "docs", rootFD, "docs-moved")
                    symlinkat(outside, rootFD, "docs")
                }
                return system.openFile(rootFD, name, path)
            })
        let result = try scan(fileSystem: swapping)
        XCTAssertEqual(result.entries, [.absent("docs/a.txt", size: 4, hash: nil)])
        XCTAssertEqual(result.hashedFiles, 0)
        XCTAssertEqual(result.notes.map(\.kind), [.replaced])
    }

    func testAFileReplacedByASaveBeforeItIsReadKeepsItsRemoteCopyThisRun() throws {
        try put("doc.txt", "version 1")
        let first = try scan()
        setMtime(root + "/doc.txt", seconds: 4_000_000)
        let system = ScanFileSystem.system
        // An editor's save: a new file renamed over the old one, after the walk saw the old one.
        let saving = ScanFileSystem(
            openFolder: system.openFolder,
            openFile: { rootFD, name, path in
                let fd = openat(rootFD, "doc.txt.new", O_WRONLY | O_CREAT | O_EXCL, 0o644)
                _ = "version 2".withCString { Glibc.write(fd, $0, 9) }
                close(fd)
                renameat(rootFD, "doc.txt.new", rootFD, name)
                return system.openFile(rootFD, name, path)
            })
        let result = try scan(cache: first.fingerprints(updating: [:]), fileSystem: saving)
        let cached = try XCTUnwrap(first.fingerprints(updating: [:])["doc.txt"])
        XCTAssertEqual(result.entries, [.absent("doc.txt", size: cached.size, hash: cached.hash)])
        XCTAssertEqual(result.notes.map(\.kind), [.replaced])
        XCTAssertEqual(result.removedFingerprints, [])
        // The next scan reads the new file.
        let next = try scan(cache: result.fingerprints(updating: first.fingerprints(updating: [:])))
        XCTAssertEqual(next.entries.first?.hash, SHA256Hasher.hex(Data("version 2".utf8)))
    }

    func testAFIFOIsSkippedWithANoteAndDoesNotBlock() throws {
        try put("a.txt", "a")
        XCTAssertEqual(mkfifo(root + "/pipe", 0o644), 0)
        let result = try scan()
        XCTAssertEqual(paths(result), ["a.txt"])
        XCTAssertEqual(result.notes.map(\.kind), [.specialFile])
        XCTAssertEqual(result.notes.first?.path, "pipe")
        XCTAssertTrue(result.notes.first?.message.contains("FIFO") ?? false)
        // An excluded FIFO is not even noted.
        XCTAssertTrue(try scan(ScanOptions(excludes: try PatternList(["pipe"]))).notes.isEmpty)
    }

    // MARK: Unreadable files and folders

    func testAnUnreadableFileBecomesAbsentWithItsCachedSizeAndHash() throws {
        try put("ok.txt", "fine")
        try put("private.txt", "original")
        let first = try scan()
        // Changed since the cache (so it must be read), then unreadable.
        try put("private.txt", "rewritten, longer")
        setMtime(root + "/private.txt", seconds: 2_000_000)
        try put("new-private.txt", "never seen")
        chmod(root + "/private.txt", 0)
        chmod(root + "/new-private.txt", 0)
        let log = OpenLog()
        let fileSystem = Self.isRoot ? denying(files: ["private.txt", "new-private.txt"], log: log) : .system

        let result = try scan(cache: first.fingerprints(updating: [:]), fileSystem: fileSystem)
        let cached = try XCTUnwrap(first.fingerprints(updating: [:])["private.txt"])
        XCTAssertEqual(
            withoutMetadata(result.entries),
            [
                .absent("new-private.txt", size: 10, hash: nil),
                SyncEntry(path: "ok.txt", size: 4, hash: SHA256Hasher.hex(Data("fine".utf8)), source: .underRoot),
                .absent("private.txt", size: cached.size, hash: cached.hash),
            ])
        XCTAssertEqual(result.notes.map(\.kind), [.unreadableFile, .unreadableFile])
        XCTAssertEqual(Set(result.notes.map(\.path)), ["private.txt", "new-private.txt"])
        XCTAssertTrue(result.notes.allSatisfy { $0.message.contains("never deletes a remote copy") })
        XCTAssertEqual(result.removedFingerprints, [], "the unreadable file's fingerprint is kept")
        XCTAssertNil(result.newPrints["private.txt"])
        XCTAssertFalse(result.isEmpty)
    }

    func testAnUnreadableFolderKeepsItsCachedFilesAbsent() throws {
        try put("locked/a.txt", "a")
        try put("locked/sub/b.txt", "bb")
        try put("locked.txt", "sibling")
        try put("z.txt", "z")
        let first = try scan()
        chmod(root + "/locked", 0)
        let log = OpenLog()
        let fileSystem = Self.isRoot ? denying(folders: ["locked"], log: log) : .system

        let result = try scan(cache: first.fingerprints(updating: [:]), fileSystem: fileSystem)
        XCTAssertEqual(paths(result), ["locked", "locked.txt", "locked/a.txt", "locked/sub/b.txt", "z.txt"])
        XCTAssertEqual(result.entries[0], .absent("locked"))
        XCTAssertEqual(result.entries[2], .absent("locked/a.txt", size: 1, hash: SHA256Hasher.hex(Data("a".utf8))))
        XCTAssertEqual(result.entries[3], .absent("locked/sub/b.txt", size: 2, hash: SHA256Hasher.hex(Data("bb".utf8))))
        XCTAssertEqual(result.notes.map(\.kind), [.unreadableFolder])
        XCTAssertEqual(result.notes.first?.path, "locked")
        XCTAssertEqual(result.unreadableFolders, ["locked"])
        XCTAssertEqual(result.removedFingerprints, [])
        XCTAssertEqual(result.files, 2)
    }

    func testAFileDeletedBetweenWalkAndReadIsDroppedWithANote() throws {
        try put("stays.txt", "s")
        try put("goes.txt", "g")
        let first = try scan()
        setMtime(root + "/goes.txt", seconds: 3_000_000)
        let system = ScanFileSystem.system
        let vanishing = ScanFileSystem(
            openFolder: system.openFolder,
            openFile: { rootFD, name, path in
                if path == "goes.txt" { unlinkat(rootFD, name, 0) }
                return system.openFile(rootFD, name, path)
            })
        let result = try scan(cache: first.fingerprints(updating: [:]), fileSystem: vanishing)
        XCTAssertEqual(paths(result), ["stays.txt"])
        XCTAssertEqual(result.notes.map(\.kind), [.vanished])
        XCTAssertEqual(result.removedFingerprints, ["goes.txt"])
    }

    func testAFileThatGrowsBeforeItIsReadIsHashedAsReadAndNoted() throws {
        try put("log.txt", "first line\n")
        let system = ScanFileSystem.system
        let growing = ScanFileSystem(
            openFolder: system.openFolder,
            openFile: { rootFD, name, path in
                let fd = openat(rootFD, name, O_WRONLY | O_APPEND)
                _ = "second line\n".withCString { Glibc.write(fd, $0, 12) }
                close(fd)
                return system.openFile(rootFD, name, path)
            })
        let result = try scan(fileSystem: growing)
        let content = Data("first line\nsecond line\n".utf8)
        XCTAssertEqual(result.entries.first?.size, Int64(content.count))
        XCTAssertEqual(result.entries.first?.hash, SHA256Hasher.hex(content))
        XCTAssertEqual(result.notes.map(\.kind), [.changedWhileReading])
    }

    // MARK: The fingerprint cache

    func testASecondScanWithTheFingerprintsAsCacheReadsNothing() throws {
        try put("a.txt", "alpha")
        try put("d/b.txt", "bravo")
        try put("d/c.txt", "charlie")
        let first = try scan()
        XCTAssertEqual(first.hashedFiles, 3)

        let second = try scan(cache: first.fingerprints(updating: [:]))
        XCTAssertEqual(second.hashedFiles, 0)
        XCTAssertEqual(second.hashedBytes, 0)
        XCTAssertEqual(withoutMetadata(second.entries), withoutMetadata(first.entries))
        XCTAssertEqual(second.fingerprints(updating: first.fingerprints(updating: [:])), first.fingerprints(updating: [:]))
        XCTAssertEqual(second.newFingerprints, [])
        XCTAssertEqual(second.removedFingerprints, [])

        // A deliberately wrong cached hash with an unchanged stat is taken as is: proof that
        // the file is not read again.
        var cache = first.fingerprints(updating: [:])
        let wrong = String(repeating: "0", count: 64)
        cache["d/b.txt"]?.digest = try XCTUnwrap(SHA256Digest(hex: wrong))
        let third = try scan(cache: cache)
        XCTAssertEqual(third.entries.first { $0.path == "d/b.txt" }?.hash, wrong)
        XCTAssertEqual(third.hashedFiles, 0)
    }

    func testNewFilesLeaveTheirHashToTheUploadWhenAskedAndKnownOnesDoNot() throws {
        for name in ["a", "b", "c", "d/e"] { try put(name, "content of \(name)") }
        let first = try scan()
        try put("new", "a new file")
        try put("d/new", "another new file")
        try put("size-only.bin", "by size")
        XCTAssertEqual(link(root + "/new", root + "/d/second-name"), 0)
        setMtime(root + "/b", seconds: 1_234_567, nanoseconds: 89)  // changed: read here, compared by hash
        var options = ScanOptions(sizeCompared: try PatternList(parsing: "*.bin"))
        options.hashNewFilesOnUpload = true
        let second = try scan(options, cache: first.fingerprints(updating: [:]))

        let toCome = second.entries.filter(\.hashToCome).map(\.path)
        XCTAssertEqual(toCome, ["d/new"], "only new files with one name wait for their upload")
        XCTAssertNil(second.entries.first { $0.path == "d/new" }?.digest)
        XCTAssertEqual(second.hashedFiles, 3, "the changed file b and the two names of the linked new file are read")
        XCTAssertEqual(second.newFingerprints.map(\.path).sorted(), ["b", "d/second-name", "new"])
        XCTAssertEqual(second.entries.first { $0.path == "new" }?.hash, SHA256Hasher.hex(Data("a new file".utf8)))
        XCTAssertEqual(second.entries.first { $0.path == "a" }?.hash, SHA256Hasher.hex(Data("content of a".utf8)), "from the cache")
        let sized = try XCTUnwrap(second.entries.first { $0.path == "size-only.bin" })
        XCTAssertFalse(sized.hashToCome)
        XCTAssertFalse(sized.isHashCompared, "a size-compared file stays one")
        XCTAssertEqual(second.files, 8)
        XCTAssertEqual(second.bytes, first.bytes + 10 + 16 + 7 + 10)

        // Without the option, every new file is read by the scan.
        let plain = try scan(cache: first.fingerprints(updating: [:]))
        XCTAssertEqual(plain.entries.filter(\.hashToCome).count, 0)
        XCTAssertEqual(plain.entries.first { $0.path == "d/new" }?.hash, SHA256Hasher.hex(Data("another new file".utf8)))
    }

    func testTouchingAFilesMtimeRehashesThatFileAlone() throws {
        for name in ["a", "b", "c", "d/e"] { try put(name, "content of \(name)") }
        let first = try scan()
        setMtime(root + "/b", seconds: 1_234_567, nanoseconds: 89)
        let second = try scan(cache: first.fingerprints(updating: [:]))
        XCTAssertEqual(second.hashedFiles, 1)
        XCTAssertEqual(second.newFingerprints.map(\.path), ["b"])
        XCTAssertEqual(second.newPrints["b"]?.mtimeNanoseconds, 1_234_567_000_000_089)
        XCTAssertEqual(second.newPrints["b"]?.hash, SHA256Hasher.hex(Data("content of b".utf8)))
        XCTAssertEqual(withoutMetadata(second.entries), withoutMetadata(first.entries))
    }

    func testFingerprintsOfFilesNoLongerHashedAreRemoved() throws {
        for name in ["gone.txt", "kept.txt", "now-excluded.log", "now-sized.iso"] { try put(name, name) }
        let first = try scan()
        XCTAssertEqual(unlink(root + "/gone.txt"), 0)
        let cache = first.fingerprints(updating: [:]).merging(["never-existed": Fingerprint(size: 1, mtimeNanoseconds: 1, inode: 1, digest: try XCTUnwrap(SHA256Digest(hex: SHA256Hasher.hex(Data("x".utf8)))))]) { a, _ in a }
        let second = try scan(
            ScanOptions(excludes: try PatternList(["*.log"]), sizeCompared: try PatternList(["*.iso"])), cache: cache)
        XCTAssertEqual(second.removedFingerprints, ["gone.txt", "never-existed", "now-excluded.log", "now-sized.iso"])
        XCTAssertEqual(Array(second.fingerprints(updating: cache).keys), ["kept.txt"])
    }

    // MARK: Names

    func testANonUTF8NameIsListedEscapedAndItsSourceOpensTheRealFile() throws {
        let nameBytes: [UInt8] = [0x66, 0xE9, 0x2E, 0x62]
        let content = Data("latin-1 name".utf8)
        let rawPath = (Array((root + "/").utf8) + nameBytes + [0]).map { CChar(bitPattern: $0) }
        let fd = open(rawPath, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        XCTAssertGreaterThanOrEqual(fd, 0)
        content.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)

        let result = try scan()
        let expectedPath = FileName.string(fromBytes: nameBytes)
        XCTAssertTrue(FileName.isEscaped(expectedPath))
        XCTAssertEqual(paths(result), [expectedPath])
        XCTAssertEqual(result.entries.first?.hash, SHA256Hasher.hex(content))
        guard let source = result.entries.first?.localPath(root: result.localRoot) else { return XCTFail("no file source") }
        XCTAssertEqual(source, root + "/" + expectedPath)
        XCTAssertEqual(try SHA256Hasher.hexOfFile(atPath: source), SHA256Hasher.hex(content))
        XCTAssertEqual(FileName.bytes(of: source), Array((root + "/").utf8) + nameBytes)
    }

    func testTheToolsReservedNamesAreSkipped() throws {
        for name in [".backup-marker", ".backup-volume-id", ".backup-staging/docs/x", ".backup-tmp.1f2e", "sub/.backup-tmp.9"] {
            try put(name, "tool")
        }
        // Deeper down, the marker and volume id names are the person's own files.
        try put("sub/.backup-marker", "mine")
        try put("sub/.backup-staging/y", "mine")
        try put("real", "r")
        let result = try scan()
        XCTAssertEqual(paths(result), ["real", "sub/.backup-marker", "sub/.backup-staging/y"])
        XCTAssertEqual(try scan(ScanOptions(reservedNames: .none)).entries.count, 8)
    }

    // MARK: Emptiness and the root

    func testAnEmptyTreeAndATreeOfExcludedFilesAreEmpty() throws {
        let empty = try scan()
        XCTAssertTrue(empty.isEmpty)
        XCTAssertEqual(empty.entries, [])

        try put("a.log", "x")
        try put("logs/b.log", "y")
        try dir.makeFolder("src/empty-folder")
        XCTAssertTrue(try scan(ScanOptions(excludes: try PatternList(["*.log"]))).isEmpty)
        XCTAssertFalse(try scan().isEmpty)
        XCTAssertFalse(try scan().snapshot(marker: Data()).isEmpty)
        XCTAssertTrue(empty.snapshot(marker: Data()).isEmpty)
    }

    func testAMissingRootOrAFileAsRootIsAClearError() throws {
        let missing = dir.path("not-mounted")
        XCTAssertThrowsError(try TreeScanner(root: missing).scan(cache: [:])) { error in
            XCTAssertEqual((error as? ScanError)?.kind, .sourceMissing)
            XCTAssertEqual("\(error)", "the source folder \(missing) does not exist or is not mounted")
        }
        try dir.write("a-file", Data("x".utf8))
        XCTAssertThrowsError(try TreeScanner(root: dir.path("a-file")).scan(cache: [:])) { error in
            XCTAssertEqual((error as? ScanError)?.kind, .sourceMissing)
            XCTAssertTrue("\(error)".contains(dir.path("a-file")))
        }
    }
}

/// What a test's file-system seam saw opened, from any hashing thread.
private final class OpenLog: Sendable {
    let folders = Mutex<[String]>([])
    let files = Mutex<[String]>([])
}

extension ScanResult {
    /// The new fingerprints by path.
    fileprivate var newPrints: [String: Fingerprint] {
        Dictionary(newFingerprints.map { ($0.path, $0.fingerprint) }, uniquingKeysWith: { _, last in last })
    }
}
