// The tree scanner: a source folder → the SyncEntries of a SyncSnapshot, fast enough for tens
// of thousands of files. It owns the walk (openat/readdir/fstatat, d_type to spare a stat on
// folders), excludes from the profile and `.backupignore` with excluded subtrees never opened,
// the tool's reserved names, links and special files, unreadable folders and files, and the
// use of the fingerprint cache; the hashing itself is ParallelHasher's.

import BackupEngine
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Options

/// The tool's own files, which a scan never lists even when they sit in the source folder.
///
/// They get there when a source folder is also a restore target (the staging folder with its
/// half-finished downloads), or holds or is a folder remote (its marker, its volume id, and
/// the temporary files of writes in flight). Backing them up would upload files that change
/// behind the person's back, and a `.backup-tmp.` file could never be seen as uploaded: the
/// folder remote hides that prefix in every folder, so such a file would upload on every run.
/// The marker, staging folder and volume id only ever live at a root, so they are skipped at
/// the source root only, and a person's file of the same name deeper down is backed up.
public struct ReservedNames: Sendable, Equatable {
    /// Names skipped at the source root.
    public var rootNames: Set<String>
    /// Name prefixes skipped in every folder.
    public var prefixes: [String]

    public init(rootNames: Set<String>, prefixes: [String]) {
        self.rootNames = rootNames
        self.prefixes = prefixes
    }

    /// The marker, the restore staging folder, the folder remote's volume id, the versions folder and temporary files.
    public static let tool = ReservedNames(
        rootNames: [
            SyncEngine.defaultMarkerPath, RestoreTarget.stagingName,
            // FolderStorage.volumeIdFileName; BackupTree cannot import BackupStorage.
            ".backup-volume-id",
            VersionStore.folder,
        ],
        // FolderStorage.temporaryFilePrefix.
        prefixes: [".backup-tmp."])

    /// Nothing reserved.
    public static let none = ReservedNames(rootNames: [], prefixes: [])
}

/// What a scan leaves out and how it compares files.
/// A scan's running counts, written by the scan as it goes (plain stores, no lock: the scan
/// never waits on whoever reads them) and read from any thread.
public final class ScanCounter: Sendable {
    private let found = Atomic<Int>(0)
    private let hashed = Atomic<Int>(0)
    private let hashedBytes = Atomic<Int64>(0)
    private let stopped = Atomic<Bool>(false)

    public init() {}

    /// Asks the scan to stop before its next batch of reads (it then throws `.stopped`):
    /// the run it was for cannot go on (its remote refused it), so reading on would be waste.
    public func stop() { stopped.store(true, ordering: .relaxed) }

    public var isStopped: Bool { stopped.load(ordering: .relaxed) }

    /// Files found so far, and of them read and hashed (with their bytes).
    public var reading: (files: Int, hashed: Int, hashedBytes: Int64) {
        (found.load(ordering: .relaxed), hashed.load(ordering: .relaxed), hashedBytes.load(ordering: .relaxed))
    }

    func setFound(_ count: Int) { found.store(count, ordering: .relaxed) }

    func setHashed(_ count: Int, bytes: Int64) {
        hashed.store(count, ordering: .relaxed)
        hashedBytes.store(bytes, ordering: .relaxed)
    }
}

public struct ScanOptions: Sendable {
    /// Paths left out (the profile's excludes). A folder whose every possible file is excluded
    /// is not opened at all.
    public var excludes: PatternList
    /// Files compared by size only: listed with a nil hash and never read.
    public var sizeCompared: PatternList
    /// A file at the source root with more exclude patterns (gitignore syntax), applied after
    /// `excludes` so its negations can re-include; nil for none. A missing file is no error.
    public var ignoreFileName: String?
    /// The tool's own files, skipped wherever they are reserved.
    public var reservedNames: ReservedNames
    /// How many threads list folders, and then read and hash files, at once.
    public var threads: Int
    /// Told the scan's running counts as it goes, for a front end to show; nil for none.
    public var counter: ScanCounter?
    /// Files the cache does not know are not read: their entries' hash is to come from their
    /// upload (`SyncEntry.hashToCome`), which reads them anyway, so they are read once. Only
    /// for a sync whose state holds no entry that could hold a hash to compare with (a first
    /// sync), and never for a preview, which uploads nothing. A file with more than one name
    /// is still read here (its other names are recorded from its hash).
    public var hashNewFilesOnUpload = false

    public init(
        excludes: PatternList = PatternList(), sizeCompared: PatternList = PatternList(),
        ignoreFileName: String? = ".backupignore", reservedNames: ReservedNames = .tool,
        threads: Int = ScanOptions.defaultThreads
    ) {
        self.excludes = excludes
        self.sizeCompared = sizeCompared
        self.ignoreFileName = ignoreFileName
        self.reservedNames = reservedNames
        self.threads = threads
    }

    /// One thread per active core.
    public static var defaultThreads: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }
}

// MARK: - Results

/// Something a scan skipped or could not do, for the person to read.
public struct ScanNote: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A FIFO, socket or device: not backed up.
        case specialFile
        /// A folder that could not be opened or listed: its files are kept on the remote.
        case unreadableFolder
        /// A file that could not be read: its remote copy is kept.
        case unreadableFile
        /// A file that changed while it was read: backed up as read, read again next time.
        case changedWhileReading
        /// A file replaced by another one (another inode) between the listing and the read:
        /// not read, its remote copy kept as it is this run.
        case replaced
        /// A file deleted, or replaced by a link or something not a file, between the listing
        /// and the read: left out.
        case vanished
    }

    public var kind: Kind
    /// The relative path.
    public var path: String
    /// A full sentence naming the path.
    public var message: String

    public init(kind: Kind, path: String, message: String) {
        self.kind = kind
        self.path = path
        self.message = message
    }

    public var description: String { message }
}

/// What one scan found.
public struct ScanResult: Sendable {
    /// One entry per regular file, sorted by the path's UTF-8 bytes. Readable files have an
    /// `.underRoot` source (below `localRoot`); unreadable files and folders are `.absent`.
    public var entries: SyncEntryList
    /// The source folder as an absolute path without a "/" at its end ("" for "/").
    public var localRoot: String
    /// The fingerprints that differ from the cache the scan was given (read this time), each
    /// path once, in hashing order: what to write back with `StateStore.updateFingerprints`
    /// (empty after a no-op scan). A list, not a dictionary: a first scan's are every file's,
    /// and a dictionary of a million of them took 189 MB; each names its entry by position.
    public var newFingerprints: FingerprintUpdates
    /// Cache paths that no longer stand for a hash-compared file here (deleted, excluded,
    /// size-compared now), sorted. Paths below an unreadable folder, and unreadable files,
    /// are kept: nothing is known about them.
    public var removedFingerprints: [String]
    /// What was skipped or could not be read, in walk order, then in hashing order.
    public var notes: [ScanNote]
    /// The folders (with their mode, times and owner; the root excluded) and symbolic links
    /// (with their target, never followed), sorted by path: what only the marker holds.
    public var treeEntries: [TreeEntry]
    /// Readable regular files listed.
    public var files: Int
    /// Their total size.
    public var bytes: Int64
    /// Files read and hashed this scan (the others came from the cache or are size-compared).
    public var hashedFiles: Int
    /// Bytes read while hashing.
    public var hashedBytes: Int64

    /// How many symbolic links were found (backed up as links, in the marker).
    public var symlinks: Int {
        treeEntries.reduce(0) { count, entry in
            if case .symlink = entry.kind { count + 1 } else { count }
        }
    }

    /// The folders that could not be opened or listed. Each is an `.absent` entry, and so is
    /// every file below it the cache knew; files below it the cache did not know (size-compared
    /// ones, say) are the caller's to protect, from what the state knows was uploaded.
    public var unreadableFolders: [String] {
        notes.compactMap { $0.kind == .unreadableFolder ? $0.path : nil }
    }

    /// The fingerprint of every hash-compared file after this scan, given the `cache` it was
    /// given: fresh for the files read, the cached one for files unchanged or unreadable now
    /// (what `StateStore.fingerprints()` reads after `updateFingerprints`). Not kept in the
    /// result: a no-op scan of a large tree would hold a second copy of the cache.
    public func fingerprints(updating cache: [String: Fingerprint]) -> [String: Fingerprint] {
        var fingerprints = cache
        for path in removedFingerprints { fingerprints[path] = nil }
        for update in newFingerprints { fingerprints[update.path] = update.fingerprint }
        return fingerprints
    }

    /// Whether the tree holds no regular files at all (readable or not): an unmounted drive,
    /// a new machine, or only excluded files.
    public var isEmpty: Bool { entries.isEmpty }

    /// The snapshot for `SyncEngine.sync` with this scan's entries and `marker`.
    public func snapshot(marker: Data, allowShrink: Bool = false) -> SyncSnapshot {
        var snapshot = SyncSnapshot(entries: entries, marker: marker, isEmpty: isEmpty, allowShrink: allowShrink)
        snapshot.localRoot = localRoot
        return snapshot
    }
}

/// Why a scan could not run at all.
public struct ScanError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The source folder does not exist or is not a folder.
        case sourceMissing
        /// The source folder exists but cannot be opened or listed.
        case sourceUnreadable
        /// The ignore file has an invalid pattern (`line` says where).
        case ignoreFileInvalid
        /// The ignore file exists but cannot be read.
        case ignoreFileUnreadable
        /// `ScanCounter.stop()` ended the scan early.
        case stopped
    }

    public let kind: Kind
    /// The source folder, or the ignore file's path.
    public let path: String
    /// The 1-based line of an invalid pattern in the ignore file.
    public let line: Int?
    public let message: String

    public init(kind: Kind, path: String, line: Int? = nil, message: String) {
        self.kind = kind
        self.path = path
        self.line = line
        self.message = message
    }

    public var description: String { message }
}

// MARK: - Scanner

/// How the scanner opens folders and files. Tests replace it to produce failures that root,
/// which runs the tests here and in CI, cannot get from the real calls (it reads mode-000
/// files and lists mode-000 folders).
struct ScanFileSystem: Sendable {
    /// Opens the folder `name` in `parentFD` without following a link; the descriptor or -errno.
    var openFolder: @Sendable (_ parentFD: Int32, _ name: UnsafePointer<CChar>, _ relativePath: String) -> Int32
    /// Opens the file `name` (a relative path) below `rootFD` for reading, without following a
    /// final link and without blocking on a FIFO; the descriptor or -errno.
    var openFile: @Sendable (_ rootFD: Int32, _ name: UnsafePointer<CChar>, _ relativePath: String) -> Int32

    static let system = ScanFileSystem(
        openFolder: { parentFD, name, _ in
            let fd = openat(parentFD, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            return fd >= 0 ? fd : -errno
        },
        openFile: { rootFD, name, _ in
            let fd = openat(rootFD, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            return fd >= 0 ? fd : -errno
        })
}

/// Scans a source folder into snapshot entries.
///
/// Regular files are listed with their mode, times and owner, a second name of a file with
/// more than one link as a `.hardLink` to the first; folders and symbolic links (read, never
/// followed) go to `treeEntries`; FIFOs, sockets and devices are skipped with a note. A folder that cannot
/// be opened, or a file that cannot be read, becomes an `.absent` entry (with the cache's size
/// and hash when known) and a note: a permission problem never deletes a remote copy. A
/// hash-compared file is read only when its (size, mtime, inode) differs from the cache.
///
/// Folders are opened relative to their parent with O_NOFOLLOW. Files are hashed after the
/// walk, opened by their relative path below the root (O_NOFOLLOW) and read only when they
/// are still the inode the walk saw: a file replaced in between becomes `.absent` for this
/// run, so a folder swapped for a link never makes the scan read outside the tree.
public struct TreeScanner: Sendable {
    /// The source folder as given (a link to a folder is followed for the root itself).
    public let root: String
    public let options: ScanOptions
    var fileSystem: ScanFileSystem

    public init(root: String, options: ScanOptions = ScanOptions()) {
        self.init(root: root, options: options, fileSystem: .system)
    }

    init(root: String, options: ScanOptions, fileSystem: ScanFileSystem) {
        self.root = root
        self.options = options
        self.fileSystem = fileSystem
    }

    /// Walks the tree, hashes what changed since `cache`, and returns the entries.
    ///
    /// Throws `ScanError` when the source folder is missing, not a folder or unreadable, or
    /// when the ignore file is unreadable or invalid.
    public func scan(cache: [String: Fingerprint]) throws(ScanError) -> ScanResult {
        try scan(cache: FingerprintCache(cache))
    }

    /// Walks the tree, hashes what changed since `cache`, and returns the entries.
    ///
    /// Throws `ScanError` when the source folder is missing, not a folder or unreadable, or
    /// when the ignore file is unreadable or invalid.
    public func scan(cache: FingerprintCache = FingerprintCache()) throws(ScanError) -> ScanResult {
        var base = root
        while base.utf8.count > 1 && base.hasSuffix("/") { base.removeLast() }
        if base == "/" { base = "" }

        let rootFD = FileName.withCString(root) { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard rootFD >= 0 else {
            let code = errno
            switch code {
            case ENOENT, ENOTDIR:
                throw ScanError(
                    kind: .sourceMissing, path: root,
                    message: "the source folder \(root) does not exist or is not mounted")
            default:
                throw ScanError(
                    kind: .sourceUnreadable, path: root,
                    message: "cannot open the source folder \(root): \(Self.describe(code))")
            }
        }
        defer { close(rootFD) }
        var excludes = options.excludes
        if let extra = try readIgnoreFile(rootFD) {
            excludes = PatternList(entries: excludes.entries + extra.entries)
        }

        // The lister takes over (and closes) a descriptor of its own; files are opened for
        // hashing below rootFD, which costs fewer path lookups than their full paths.
        let listFD = openat(rootFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard listFD >= 0 else {
            throw ScanError(
                kind: .sourceUnreadable, path: root,
                message: "cannot list the source folder \(root): \(Self.describe(errno))")
        }
        let lister = FolderLister(
            cache: cache, excludes: excludes, sizeCompared: options.sizeCompared,
            reserved: options.reservedNames, fileSystem: fileSystem, hashNewFilesLater: options.hashNewFilesOnUpload)
        // The slots are assembled as the listers fill them in, so the items of the whole tree
        // never wait at once.
        var assembly = ScanAssembly(cache: cache, excludes: excludes)
        assembly.counter = options.counter
        let failure = lister.walkTree(listFD, threads: options.threads) { root, lister in assembly.add(root, from: lister) }
        if let code = failure {
            throw ScanError(
                kind: .sourceUnreadable, path: root,
                message: "cannot list the source folder \(root): \(Self.describe(code))")
        }
        assembly.hashChangedFiles(below: rootFD, threads: options.threads, fileSystem: fileSystem)
        if options.counter?.isStopped == true {
            throw ScanError(kind: .stopped, path: root, message: "the scan of \(root) was stopped before its end")
        }
        return assembly.result(localRoot: base)
    }

    /// The ignore file's patterns, nil when there is none.
    private func readIgnoreFile(_ rootFD: Int32) throws(ScanError) -> PatternList? {
        guard let name = options.ignoreFileName else { return nil }
        let path = root.hasSuffix("/") ? root + name : root + "/" + name
        let fd = FileName.withCString(name) { openat(rootFD, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        func unreadable(_ code: Int32) -> ScanError {
            ScanError(kind: .ignoreFileUnreadable, path: path, message: "cannot read the ignore file \(path): \(Self.describe(code))")
        }
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            // Skipping it would back up what it excludes; a link to it is refused, not followed.
            throw unreadable(code)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw unreadable(errno)
            }
            bytes += chunk[..<count]
        }
        do {
            return try PatternList(parsing: String(decoding: bytes, as: UTF8.self))
        } catch {
            let location = error.line.map { " line \($0)" } ?? ""
            throw ScanError(
                kind: .ignoreFileInvalid, path: path, line: error.line,
                message: "the ignore file \(path)\(location): invalid pattern \"\(error.pattern)\": \(error.reason)")
        }
    }

    static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
