// FolderStorage, the embedded default provider: a folder on a mounted disk or share. It owns the
// folder's layout on disk (temporary names, the volume id file), writes that land whole by
// rename, and the batched durability of DESIGN.md ("Durability without a per-file fsync").

import BackupEngine
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A remote that is a folder on a local or mounted filesystem.
///
/// Every write fills a file that has no name yet (or, where the filesystem has no unnamed
/// files, a temporary name in the target's folder) and only then puts it in place, so a path
/// holds either its old file or the whole new one. The root is never created: a missing
/// root usually means an unmounted disk, and writing into the bare mount point would fill the
/// system disk with a backup nobody can find. Paths are checked before any system call, and
/// folders are opened one at a time without following links, so nothing is written outside
/// the root.
public struct FolderStorage: RemoteStorage {
    /// When written files are made durable.
    public enum Durability: Sendable {
        /// No fsync per file; `flush()` syncs the root's filesystem once (the default).
        case batched
        /// fsync each file before its rename and its folder after it.
        case perFile
    }

    /// The file at the root that holds the volume id (`identityKey()`); hidden from `list()`.
    public static let volumeIdFileName = ".backup-volume-id"
    /// The prefix of temporary files; `list()` hides them in every folder.
    public static let temporaryFilePrefix = ".backup-tmp."

    /// The folder's path on disk.
    public let root: String
    /// When written files are made durable.
    public let durability: Durability
    /// Whether this provider only reads (a restore): it never creates the volume id, and
    /// every write fails.
    public let readOnly: Bool

    /// How old (by mtime) a temporary file must be before `sweepTemporaries()` takes it for a
    /// stopped run's. A live writer (another machine syncing to the same disk or share) keeps
    /// moving its temporary's mtime while it copies, so an hour without a change is a writer
    /// that is gone; machines whose clocks are an hour apart are not expected.
    public var staleTemporaryAge: Double = 3600

    /// Whether a new file is filled unnamed (O_TMPFILE) and linked into place where the
    /// filesystem allows it (`UnnamedFile`); when false every write takes a named
    /// temporary and a rename, as on filesystems without unnamed files.
    public var unnamedTemporaries = true

    /// The root as the last listing opened it, for the per-file reads and writes after it.
    private let heldRoot = HeldRoot()

    /// A provider over the existing folder `root`; nothing is checked or created until first use.
    public init(root: String, durability: Durability = .batched, readOnly: Bool = false) {
        self.root = root
        self.durability = durability
        self.readOnly = readOnly
    }

    private func refuseWrite(_ path: String) throws {
        if readOnly {
            throw CloudError(.transport, "the remote folder \(root) was opened to read only (a restore); \(path) was not written")
        }
    }

    // MARK: RemoteStorage

    /// The volume id kept at the root, or nil while there is none: reading it never creates
    /// it, so a probe, a preview or a refused run leaves an unmounted disk's bare mount point
    /// as it was.
    public func identityKey() async throws -> String? {
        try mapped {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            return try readVolumeId(rootFD)
        }
    }

    /// The volume id kept at the root, created if there is none (by the first run that
    /// writes); nil when it cannot be created.
    ///
    /// Two processes creating it at once agree: the id is placed with a rename that refuses to
    /// replace, and the loser reads the winner's. A read-only or foreign-owned folder gives nil,
    /// and the engine then falls back to the marker's remote id.
    public func ensureIdentityKey() async throws -> String? {
        try mapped {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            if let existing = try readVolumeId(rootFD) { return existing }
            // A restore writes nothing to its remote; the engine falls back to the marker's id.
            if readOnly { return nil }

            let id = UUID().uuidString.lowercased()
            let temporary: String
            do {
                // Always synced: a volume id lost to a power cut would change the identity and
                // force a full re-upload.
                temporary = try createTemporary(in: rootFD, displayPath: volumeIdPath, sync: true) { fd in
                    try writeAll(fd, Data((id + "\n").utf8), displayPath: volumeIdPath)
                }
            } catch let failure as SystemCallFailure where Self.meansNoWriteAccess(failure.code) {
                return nil
            }
            switch Self.placeWithoutReplacing(rootFD, temporary, Self.volumeIdFileName) {
            case 0:
                fsync(rootFD)
                return id
            case EEXIST:
                return try readVolumeId(rootFD)
            case let code where Self.meansNoWriteAccess(code) || Self.meansUnsupported(code):
                return nil
            case let code:
                throw SystemCallFailure(code: code, operation: "creating", path: volumeIdPath)
            }
        }
    }

    /// Every regular file under the root, in directory order (not sorted).
    ///
    /// Leaves out the volume id file at the root and temporary files anywhere; symbolic links
    /// are neither listed nor followed.
    ///
    /// The root it opens is the one the reads and writes after it use (`HeldRoot`): a run
    /// writes into the folder it listed, even if another is mounted there meanwhile.
    public func list() async throws -> RemoteFileList {
        try mapped {
            let rootFD = try heldRoot.replace(with: openRoot())
            let walker = DirectoryWalker(rootPath: rootForMessages) { folder, name in
                name.hasPrefix(Self.temporaryFilePrefix)
                    || (folder.isEmpty && (name == Self.volumeIdFileName || name == VersionStore.folder))
            }
            // On both cores: a listing is a stat of every file, as long as the tree is large.
            // Each thread's files join the one list a few thousand at a time.
            let listed = Mutex(RemoteFileList())
            try walker.walk(rootFD, workers: Self.listingWorkers, empty: { RemoteFileList() }, visit: { files, path, status in
                files.append(RemoteFile(path: path, size: Int64(status.st_size), remoteId: Self.remoteId(status)))
            }, flush: { files in
                listed.withLock { $0.append(contentsOf: files) }
                files.removeAll(keepingCapacity: true)
            })
            return listed.withLock { $0 }
        }
    }

    /// Unlinks the temporary files anywhere under the root whose mtime is `staleTemporaryAge`
    /// or more in the past (left by a killed run); returns how many. Links are not followed.
    public func sweepTemporaries() async throws -> Int {
        try refuseWrite(Self.temporaryFilePrefix + "*")
        return try mapped {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            let now = Date().timeIntervalSince1970
            var stale: [String] = []
            try DirectoryWalker(rootPath: rootForMessages) { _, _ in false }.walk(rootFD) { path, status in
                guard path.split(separator: "/").last?.hasPrefix(Self.temporaryFilePrefix) == true else { return }
                let modified = Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9
                if now - modified >= staleTemporaryAge { stale.append(path) }
            }
            var swept = 0
            for path in stale {
                let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
                guard let chain = try? openFolders(parts.dropLast(), under: rootFD, create: false, operation: "sweeping")
                else { continue }
                defer { chain.forEach { close($0) } }
                if FileName.withCString(parts[parts.count - 1], { unlinkat(chain.last ?? rootFD, $0, 0) }) == 0 { swept += 1 }
            }
            return swept
        }
    }

    /// Writes `data` to `path` through a temporary file and a rename.
    public func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        try refuseWrite(path)
        let parts = try Self.components(of: path)
        return try mapped {
            let rootFD = try heldRoot.descriptor(opening: openRoot)
            return try place(parts, under: rootFD) { fd, displayPath in
                try writeAll(fd, data, displayPath: displayPath)
            }
        }
    }

    /// Writes `path` with what `fill` writes into the remote's own new temporary file (given
    /// with the path to name in messages), then renames it into place, as `writeBytes` does:
    /// no local copy first. `fill` may be called again with a new file (a folder pruned
    /// meanwhile); a write to the descriptor that fails is reported by `fill` as a
    /// `SystemCallFailure` (mapped here: a full disk is StorageFull), anything else it throws
    /// is passed on.
    public func writeFilled(_ path: String, fill: (_ fd: Int32, _ displayPath: String) throws -> Void) async throws -> RemoteFile {
        try refuseWrite(path)
        let parts = try Self.components(of: path)
        return try mapped {
            let rootFD = try heldRoot.descriptor(opening: openRoot)
            return try place(parts, under: rootFD, fill: fill)
        }
    }

    /// Copies the local file at `localPath` to `path` through a temporary file and a rename;
    /// the copy carries the source's permission bits and times, so the folder is a usable mirror.
    ///
    /// The temporary is created 0600 (group and others never get in while it fills). Before
    /// the rename it takes, from the `fstat` of the opened source: the owner and group when
    /// running as root (`fchown`; EPERM is ignored), then the permission bits (`fchmod` of
    /// `st_mode & 0o777`, with setuid, setgid and sticky only when running as root, and, not as
    /// root, the owner-read bit always set so the copy can be read back), then the access and
    /// modification times to the nanosecond (`futimens`). A filesystem that refuses any of
    /// these (vfat, exFAT, CIFS: EPERM, EACCES, EOPNOTSUPP, ENOSYS) does not fail the write:
    /// the file lands with what the filesystem gives it, and nothing is reported. The returned
    /// id is read after the times are set, so the next listing shows the same one.
    ///
    /// A local file that cannot be opened or read throws a `LocalFileError` whose message
    /// starts "cannot read the local file".
    public func writeFile(
        _ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws -> RemoteFile {
        try await copy(path, from: localPath, hashing: false, onBytes: onBytes).file
    }

    /// `writeFile`, with the bytes read once: each buffer is hashed and written (a read and a
    /// write instead of copy_file_range, against an open, a read and a close more to hash the
    /// file apart). The fingerprint is the source's `fstat` at open with what was read.
    public func writeFileHashing(
        _ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws -> SentFile {
        let (file, fingerprint) = try await copy(path, from: localPath, hashing: true, onBytes: onBytes)
        guard let fingerprint else { preconditionFailure("a hashing copy gives its fingerprint") }
        return SentFile(file: file, fingerprint: fingerprint)
    }

    private func copy(
        _ path: String, from localPath: String, hashing: Bool, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws -> (file: RemoteFile, fingerprint: Fingerprint?) {
        try refuseWrite(path)
        let parts = try Self.components(of: path)
        return try mapped {
            let rootFD = try heldRoot.descriptor(opening: openRoot)
            let (source, status) = try LocalFileError.openForSending(localPath) {
                localFileError(errno: $0, operation: "read", path: localPath)
            }
            defer { close(source) }
            var fills = 0
            var read: (digest: SHA256Digest, size: Int64)?
            let file = try place(parts, under: rootFD, creationMode: 0o600) { fd, displayPath in
                // From the start each time: a fill that did not land is made again.
                fills += 1
                if fills > 1 && lseek(source, 0, SEEK_SET) != 0 {
                    throw localFileError(errno: errno, operation: "read", path: localPath)
                }
                do {
                    if hashing {
                        read = try copyHashing(from: source, to: fd, expectedSize: Int64(status.st_size), onBytes: onBytes)
                    } else {
                        try copyContents(from: source, to: fd, expectedSize: Int64(status.st_size), onBytes: onBytes)
                    }
                } catch let failure as CopyFailure {
                    switch failure.side {
                    case .source: throw localFileError(errno: failure.code, operation: "read", path: localPath)
                    case .destination:
                        throw SystemCallFailure(code: failure.code, operation: "writing", path: displayPath)
                    }
                }
                // After the last byte, so no write moves the mtime past the one set here.
                try Self.applyMetadata(of: status, to: fd, displayPath: displayPath)
            }
            let fingerprint = read.map { Fingerprint(opened: status, read: $0.size, digest: $0.digest) }
            return (file, fingerprint)
        }
    }

    /// The whole file at `path`; an absent path throws `.notFound`.
    public func readBytes(_ path: String) async throws -> Data {
        let parts = try Self.components(of: path)
        return try mapped {
            let rootFD = try heldRoot.descriptor(opening: openRoot)
            let (fd, size) = try openForReading(parts, under: rootFD)
            defer { close(fd) }
            return try readAll(fd, expectedSize: size, displayPath: diskPath(parts))
        }
    }

    /// Copies the file at `path` into `fd`, never more than one byte past `expectedSize`; an
    /// absent path throws `.notFound`.
    public func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        let parts = try Self.components(of: path)
        try mapped {
            let rootFD = try heldRoot.descriptor(opening: openRoot)
            let (source, size) = try openForReading(parts, under: rootFD)
            defer { close(source) }
            // `fd` is empty and at offset 0 (the protocol's promise), and nothing here retries.
            let copied: Int64
            do {
                copied = try copyContents(from: source, to: fd, expectedSize: size, limit: expectedSize, onBytes: onBytes)
            } catch let failure as CopyFailure {
                switch failure.side {
                case .source: throw SystemCallFailure(code: failure.code, operation: "reading", path: diskPath(parts))
                case .destination: throw localFileError(errno: failure.code, operation: "write", path: localCopyName(path))
                }
            }
            if let expectedSize, copied != expectedSize {
                throw DownloadSizeMismatch(path: path, expected: expectedSize, received: copied, longer: copied > expectedSize)
            }
        }
    }

    /// Unlinks `path` (absent is success), then removes folders it leaves empty, never the root.
    public func delete(_ path: String) async throws {
        try refuseWrite(path)
        let parts = try Self.components(of: path)
        try mapped {
            let rootFD = try heldRoot.descriptor(opening: openRoot)
            let folders = parts.dropLast()
            let chain: [Int32]
            do {
                chain = try openFolders(folders, under: rootFD, create: false, operation: "deleting")
            } catch let failure as SystemCallFailure where Self.meansAbsent(failure.code) {
                return
            }
            defer { chain.forEach { close($0) } }

            if FileName.withCString(parts[parts.count - 1], { unlinkat(chain.last ?? rootFD, $0, 0) }) != 0 && errno != ENOENT {
                throw SystemCallFailure(code: errno, operation: "deleting", path: diskPath(parts))
            }
            // Best effort, deepest first: a folder that is not empty (or cannot be removed)
            // ends the pruning, and a writer racing us re-creates what it needs.
            for index in stride(from: folders.count - 1, through: 0, by: -1) {
                let parentFD = index == 0 ? rootFD : chain[index - 1]
                if FileName.withCString(folders[folders.startIndex + index], { unlinkat(parentFD, $0, AT_REMOVEDIR) }) != 0 { break }
            }
        }
    }

    /// Sets the mode, modification time and (as root) owner of the remote copy of `path`,
    /// whose content did not change, as `writeFile` gives a new copy its source's; returns it
    /// as listed now (its id holds the new mtime, so the next run does not upload it again).
    public func applyMetadata(_ path: String, _ metadata: EntryMetadata) async throws -> RemoteFile? {
        try refuseWrite(path)
        let parts = try Self.components(of: path)
        return try mapped {
            let rootFD = try heldRoot.descriptor(opening: openRoot)
            let (fd, size) = try openForReading(parts, under: rootFD)
            defer { close(fd) }
            var source = stat()
            guard fstat(fd, &source) == 0 else { throw SystemCallFailure(code: errno, operation: "reading", path: diskPath(parts)) }
            source.st_mode = (source.st_mode & S_IFMT) | mode_t(metadata.mode)
            source.st_uid = uid_t(metadata.uid)
            source.st_gid = gid_t(metadata.gid)
            source.st_mtim = timespecOf(nanoseconds: metadata.mtimeNanoseconds)
            try Self.applyMetadata(of: source, to: fd, displayPath: diskPath(parts))
            var now = stat()
            guard fstat(fd, &now) == 0 else { throw SystemCallFailure(code: errno, operation: "reading", path: diskPath(parts)) }
            return RemoteFile(path: path, size: size, remoteId: Self.remoteId(now))
        }
    }

    // MARK: Versions

    /// Renames `path` to `destination` (`renameat2` with RENAME_NOREPLACE; a hard link and an
    /// unlink where the filesystem lacks it), or with `copy` links it there (a copy of its
    /// bytes where the filesystem has no hard links): the file's inode, with its mode and
    /// times, is what is kept.
    public func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool {
        try refuseWrite(path)
        let parts = try Self.components(of: path)
        let target = try Self.components(of: destination)
        return try mapped {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            let notFound = CloudError(.notFound, "\(diskPath(parts)) does not exist on the remote folder")
            let sourceChain: [Int32]
            do {
                sourceChain = try openFolders(parts.dropLast(), under: rootFD, create: false, operation: "keeping")
            } catch let failure as SystemCallFailure where Self.meansAbsent(failure.code) {
                throw notFound
            }
            defer { sourceChain.forEach { close($0) } }
            let targetChain = try openFolders(target.dropLast(), under: rootFD, create: true, operation: "keeping a version of")
            defer { targetChain.forEach { close($0) } }
            let (sourceFD, targetFD) = (sourceChain.last ?? rootFD, targetChain.last ?? rootFD)
            let (name, newName) = (parts[parts.count - 1], target[target.count - 1])
            let code: Int32 = FileName.withCString(name) { from in
                FileName.withCString(newName) { to in
                    if !copy, let renameat2 = LinuxCalls.renameat2 {
                        if renameat2(sourceFD, from, targetFD, to, LinuxCalls.renameNoReplace) == 0 { return 0 }
                        if !Self.meansUnsupported(errno) { return errno }
                    }
                    if linkat(sourceFD, from, targetFD, to, 0) == 0 {
                        return copy || unlinkat(sourceFD, from, 0) == 0 ? 0 : errno
                    }
                    return errno
                }
            }
            switch code {
            case 0: return copy
            case ENOENT: throw notFound
            case EEXIST:
                throw CloudError(.transport, "\(diskPath(target)) already exists on the remote folder; \(path) was not kept over it")
            case let code where copy && [EPERM, EOPNOTSUPP, ENOTSUP, EMLINK].contains(code):
                // No hard links here (vfat, exFAT): the bytes are copied instead.
                let (source, _) = try openForReading(parts, under: rootFD)
                defer { close(source) }
                let temporary = try createTemporary(in: targetFD, displayPath: diskPath(target), sync: durability == .perFile) { fd in
                    do {
                        _ = try copyContents(from: source, to: fd, expectedSize: size, limit: nil, onBytes: { _ in })
                    } catch let failure as CopyFailure {
                        throw SystemCallFailure(code: failure.code, operation: "keeping a version of", path: diskPath(parts))
                    }
                }
                let placed = Self.placeWithoutReplacing(targetFD, temporary, newName)
                guard placed == 0 else { throw SystemCallFailure(code: placed, operation: "keeping a version of", path: diskPath(parts)) }
                return true
            default:
                throw SystemCallFailure(code: code, operation: "keeping a version of", path: diskPath(parts))
            }
        }
    }

    public func listNames(in folder: String) async throws -> [String] {
        let parts = try RelativePath.components(of: folder)
        return try mapped {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            guard let fd = try openExistingFolder(parts, under: rootFD) else { return [] }
            guard let dir = fdopendir(fd) else {
                let code = errno
                close(fd)
                throw SystemCallFailure(code: code, operation: "listing", path: diskPath(parts))
            }
            defer { closedir(dir) }
            return folderNames(dir).filter { !$0.hasPrefix(Self.temporaryFilePrefix) }
        }
    }

    public func listFolder(_ folder: String) async throws -> RemoteFileList {
        let parts = try RelativePath.components(of: folder)
        return try mapped {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            guard let fd = try openExistingFolder(parts, under: rootFD) else { return RemoteFileList() }
            defer { close(fd) }
            let prefix = parts.joined(separator: "/") + "/"
            var files = RemoteFileList()
            try DirectoryWalker(rootPath: diskPath(parts)) { _, name in name.hasPrefix(Self.temporaryFilePrefix) }.walk(fd) { path, status in
                files.append(RemoteFile(path: prefix + path, size: Int64(status.st_size), remoteId: Self.remoteId(status)))
            }
            return files
        }
    }

    /// Removes the folder and what is in it, links never followed.
    public func deleteFolder(_ folder: String) async throws {
        try refuseWrite(folder)
        let parts = try RelativePath.components(of: folder)
        try mapped {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            let chain: [Int32]
            do {
                chain = try openFolders(parts.dropLast(), under: rootFD, create: false, operation: "removing")
            } catch let failure as SystemCallFailure where Self.meansAbsent(failure.code) {
                return
            }
            defer { chain.forEach { close($0) } }
            try removeTree(parts[parts.count - 1], in: chain.last ?? rootFD, displayPath: diskPath(parts))
        }
    }

    /// Removes `name` in `parentFD`: a folder with everything in it, or a file.
    private func removeTree(_ name: String, in parentFD: Int32, displayPath: String) throws {
        if FileName.withCString(name, { unlinkat(parentFD, $0, 0) }) == 0 || errno == ENOENT { return }
        guard errno == EISDIR || errno == EPERM else {
            throw SystemCallFailure(code: errno, operation: "removing", path: displayPath)
        }
        let fd = FileName.withCString(name) { openat(parentFD, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else {
            if errno == ENOENT { return }
            throw SystemCallFailure(code: errno, operation: "removing", path: displayPath)
        }
        guard let dir = fdopendir(fd) else {
            let code = errno
            close(fd)
            throw SystemCallFailure(code: code, operation: "removing", path: displayPath)
        }
        let names = folderNames(dir)
        let folderFD = dirfd(dir)
        defer { closedir(dir) }
        for child in names { try removeTree(child, in: folderFD, displayPath: displayPath + "/" + child) }
        if FileName.withCString(name, { unlinkat(parentFD, $0, AT_REMOVEDIR) }) != 0 && errno != ENOENT {
            throw SystemCallFailure(code: errno, operation: "removing", path: displayPath)
        }
    }

    /// The folder at `parts` opened (the caller closes it), or nil where it does not exist.
    private func openExistingFolder(_ parts: [String], under rootFD: Int32) throws -> Int32? {
        do {
            let chain = try openFolders(parts, under: rootFD, create: false, operation: "listing")
            guard let last = chain.last else { return nil }
            chain.dropLast().forEach { close($0) }
            return last
        } catch let failure as SystemCallFailure where Self.meansAbsent(failure.code) {
            return nil
        }
    }

    // MARK: Folders and links: the remote is a mirror

    public func removeTreeEntries(_ entries: [TreeEntry]) async {
        guard !readOnly, let rootFD = try? openRoot() else { return }
        defer { close(rootFD) }
        // Deepest first, so a folder is empty of the links below it when its turn comes.
        for entry in entries.reversed() {
            guard let parts = try? Self.components(of: entry.path), let name = parts.last,
                  let chain = try? openFolders(parts.dropLast(), under: rootFD, create: false, operation: "removing")
            else { continue }
            defer { chain.forEach { close($0) } }
            let folderFD = chain.last ?? rootFD
            var info = stat()
            guard FileName.withCString(name, { fstatat(folderFD, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else { continue }
            switch entry.kind {
            case .symlink where info.st_mode & S_IFMT == S_IFLNK:
                _ = FileName.withCString(name) { unlinkat(folderFD, $0, 0) }
            case .folder where info.st_mode & S_IFMT == S_IFDIR:
                _ = FileName.withCString(name) { unlinkat(folderFD, $0, AT_REMOVEDIR) }  // only when empty
            default:
                break
            }
        }
    }

    public func makeTreeEntries(_ entries: [TreeEntry]) async -> [String] {
        guard !readOnly else { return [] }
        guard let rootFD = try? openRoot() else { return ["cannot open \(rootForMessages) to make its folders and links"] }
        defer { close(rootFD) }
        var failed: [String] = []
        for entry in entries {
            guard let parts = try? Self.components(of: entry.path), let name = parts.last else { continue }
            switch entry.kind {
            case .folder:
                guard let chain = try? openFolders(parts, under: rootFD, create: true, operation: "making") else {
                    failed.append(diskPath(parts))
                    continue
                }
                chain.forEach { close($0) }
            case .symlink(let target):
                guard let chain = try? openFolders(parts.dropLast(), under: rootFD, create: true, operation: "making") else {
                    failed.append(diskPath(parts))
                    continue
                }
                defer { chain.forEach { close($0) } }
                let folderFD = chain.last ?? rootFD
                if !Self.placeLink(target, name: name, in: folderFD) {
                    failed.append(diskPath(parts))
                    continue
                }
                if ThisProcess.runsAsRoot { _ = FileName.withCString(name) { fchownat(folderFD, $0, uid_t(entry.metadata.uid), gid_t(entry.metadata.gid), AT_SYMLINK_NOFOLLOW) } }
                let times = modificationTimes(nanoseconds: entry.metadata.mtimeNanoseconds)
                _ = FileName.withCString(name) { utimensat(folderFD, $0, times, AT_SYMLINK_NOFOLLOW) }
            case .file, .hardLink:
                continue
            }
        }
        // The folders' modes and times last, deepest first: making what is inside changes them.
        for entry in entries.reversed() where entry.kind == .folder {
            guard let parts = try? Self.components(of: entry.path),
                  let chain = try? openFolders(parts, under: rootFD, create: false, operation: "setting")
            else { continue }
            defer { chain.forEach { close($0) } }
            guard let fd = chain.last else { continue }
            var status = stat()
            guard fstat(fd, &status) == 0 else { continue }
            status.st_mode = S_IFDIR | mode_t(entry.metadata.mode & 0o7777)
            status.st_uid = uid_t(entry.metadata.uid)
            status.st_gid = gid_t(entry.metadata.gid)
            status.st_mtim = timespecOf(nanoseconds: entry.metadata.mtimeNanoseconds)
            status.st_atim = status.st_mtim
            if (try? Self.applyMetadata(of: status, to: fd, displayPath: diskPath(parts))) == nil { failed.append(diskPath(parts)) }
        }
        guard !failed.isEmpty else { return [] }
        return ["\(failed.count) folder(s) or link(s) could not be made on \(rootForMessages) as in the source (a link or a file "
            + "in the way, or a file system without links, such as vfat): the marker records them, and a restore makes them; "
            + "first: \(failed[0])"]
    }

    /// Makes the link `name` → `target` in `folderFD`, replacing only a link (this mirror's own,
    /// retargeted); true when the link is there as wanted.
    private static func placeLink(_ target: String, name: String, in folderFD: Int32) -> Bool {
        var info = stat()
        if FileName.withCString(name, { fstatat(folderFD, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 {
            guard info.st_mode & S_IFMT == S_IFLNK else { return false }
            if readLinkTarget(folderFD, name) == target { return true }
            let temporary = temporaryName()
            let made = FileName.withCString(target) { targetBytes in symlinkat(targetBytes, folderFD, temporary) }
            guard made == 0 else { return false }
            if FileName.withCString(name, { renameat(folderFD, temporary, folderFD, $0) }) != 0 {
                unlinkat(folderFD, temporary, 0)
                return false
            }
            return true
        }
        return FileName.withCString(target) { targetBytes in FileName.withCString(name) { symlinkat(targetBytes, folderFD, $0) } } == 0
    }

    /// Makes every completed write durable with one `syncfs` of the root's filesystem.
    public func flush() async throws {
        try mapped {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            if let syncfs = LinuxCalls.syncfs {
                guard syncfs(rootFD) == 0 else {
                    throw SystemCallFailure(code: errno, operation: "flushing", path: rootForMessages)
                }
            } else {
                sync()
            }
        }
    }

    // MARK: Paths

    /// The components of a remote path, or a `.transport` error naming what is wrong with it
    /// (RelativePath's rules, plus the provider's reserved names).
    static func components(of path: String) throws -> [String] {
        let parts: [String]
        do {
            parts = try RelativePath.components(of: path)
        } catch {
            throw CloudError(.transport, "the remote path \(String(reflecting: path)) is not valid: \(error.reason); "
                + "remote paths are relative to the remote folder and \"/\"-separated")
        }
        if let name = parts.last, name.hasPrefix(temporaryFilePrefix) || (parts.count == 1 && name == volumeIdFileName) {
            throw CloudError(.transport, "the remote path \(String(reflecting: path)) is not valid: "
                + "the name is reserved for the folder provider's own files")
        }
        return parts
    }

    /// The root without a trailing "/", so messages show "root/a/b" rather than "root//a/b".
    private var rootForMessages: String {
        var trimmed = Substring(root)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        return String(trimmed)
    }

    /// The full path on disk of a remote path, for messages.
    private func diskPath<C: Collection<String>>(_ parts: C) -> String {
        ([rootForMessages] + parts).joined(separator: "/")
    }

    private var volumeIdPath: String { diskPath([Self.volumeIdFileName]) }

    private static func temporaryName() -> String {
        temporaryFilePrefix + String(UInt64.random(in: .min ... .max), radix: 16)
    }

    /// The id of this version of a file: `~` and its mtime in nanoseconds, as 11 digits of
    /// base 64 (12 bytes: a String that short is held inline, where the 24 digits of the
    /// earlier `<mtime ns>:<size>` took an allocation per listed file; a million files' ids
    /// took 61 MB). Neither the device number nor the inode is part of it: a USB disk gets a
    /// new device number when replugged, and on vfat, exFAT and CIFS `noserverino` the inode
    /// numbers change on every mount. The size is not either: the engine compares a listed
    /// file's size before its id. `writeFile` gives the file its source's mtime, so a rewrite
    /// changes the id when the source's mtime changed (and the size when its size did); a
    /// file replaced behind the tool's back by one of the same size and the same mtime to the
    /// nanosecond (`cp -p` of another file) keeps both, which the inode would not have caught
    /// on those filesystems either.
    static func remoteId(_ status: stat) -> String {
        remoteId(mtimeNanoseconds: clampedNanoseconds(status.st_mtim))
    }

    static func remoteId(mtimeNanoseconds: Int64) -> String {
        var value = UInt64(bitPattern: mtimeNanoseconds)
        return String(unsafeUninitializedCapacity: 12) { out in
            out[0] = UInt8(ascii: "~")
            for index in stride(from: 11, through: 1, by: -1) {
                out[index] = idDigits[Int(value & 63)]
                value >>= 6
            }
            return 12
        }
    }

    private static let idDigits: [UInt8] = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_".utf8)

    /// The mtime a current id names, or nil for any other text.
    static func mtimeNanoseconds(ofId id: String) -> Int64? {
        let bytes = Array(id.utf8)
        guard bytes.count == 12, bytes[0] == UInt8(ascii: "~") else { return nil }
        var value: UInt64 = 0
        for byte in bytes[1...] {
            guard let digit = idDigits.firstIndex(of: byte) else { return nil }
            value = value << 6 | UInt64(digit)
        }
        return Int64(bitPattern: value)
    }

    /// Ids of the two earlier forms name the same version when they agree with the listed
    /// file's mtime (and size, where they hold one), so a state written by an earlier version
    /// does not make the next run upload every hash-compared file again (the engine records
    /// the current id then): `<mtime ns>:<size>`, and before it `<inode>:<mtime ns>`. An id
    /// of the current form names another version whenever it is not the listed one.
    public func isSameVersion(recorded: String, listed: RemoteFile) -> Bool {
        guard let id = listed.remoteId, let mtime = Self.mtimeNanoseconds(ofId: id) else { return false }
        let old = recorded.split(separator: ":", omittingEmptySubsequences: false)
        guard old.count == 2 else { return false }
        let text = String(mtime)
        // `<mtime ns>:<size>`, or `<inode>:<mtime ns>` (an mtime of ~1.7e18 ns is no size).
        return (old[0] == text && Int64(old[1]) == listed.size) || (UInt64(old[0]) != nil && old[1] == text)
    }

    // MARK: Errno classes

    private static func meansAbsent(_ code: Int32) -> Bool {
        code == ENOENT || code == ENOTDIR || code == ELOOP
    }

    private static func meansNoWriteAccess(_ code: Int32) -> Bool {
        code == EACCES || code == EPERM || code == EROFS
    }

    private static func meansUnsupported(_ code: Int32) -> Bool {
        code == EINVAL || code == ENOSYS || code == EOPNOTSUPP
    }

    // MARK: Opening

    /// Runs `body`, turning an unmapped system call failure into its CloudError.
    private func mapped<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let failure as SystemCallFailure {
            throw failure.mapped
        }
    }

    /// Opens the root, which must already exist; never creates it.
    private func openRoot() throws -> Int32 {
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 { return fd }
        let code = errno
        if code == ENOENT || code == ENOTDIR || root.isEmpty {
            throw CloudError(
                .notAvailable,
                "the remote folder \(root) does not exist or is not mounted; mount it or create it, then run again")
        }
        throw SystemCallFailure(code: code, operation: "opening", path: rootForMessages)
    }

    /// Opens each of `folders` below the root in turn, without following links, creating the
    /// missing ones when `create`. The caller closes the returned descriptors.
    private func openFolders<C: Collection<String>>(
        _ folders: C, under rootFD: Int32, create: Bool, operation: String
    ) throws -> [Int32] {
        do {
            return try openFolderChain(folders, under: rootFD, create: create, operation: operation, displayRoot: rootForMessages)
        } catch {
            throw SystemCallFailure(code: error.code, operation: error.operation, path: error.path)
        }
    }

    /// Opens a regular file for reading and returns it with its size; absent is `.notFound`.
    ///
    /// One openat2 call where the kernel has it (a download of a small file is mostly opens),
    /// else a walk folder by folder; either way no link is followed and nothing outside the
    /// root is reached.
    private func openForReading(_ parts: [String], under rootFD: Int32) throws -> (fd: Int32, size: Int64) {
        func notFound() -> CloudError { CloudError(.notFound, "\(diskPath(parts)) does not exist on the remote folder") }
        // O_NONBLOCK: a FIFO planted on the remote is refused below instead of hanging the open.
        let flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        let fd: Int32
        if let opened = openBeneath(rootFD, parts.count == 1 ? parts[0] : parts.joined(separator: "/"), flags: flags) {
            fd = opened
        } else {
            let chain: [Int32]
            do {
                chain = try openFolders(parts.dropLast(), under: rootFD, create: false, operation: "reading")
            } catch let failure as SystemCallFailure where Self.meansAbsent(failure.code) {
                throw notFound()
            }
            fd = FileName.withCString(parts[parts.count - 1]) { openat(chain.last ?? rootFD, $0, flags) }
            let code = errno
            chain.forEach { close($0) }
            errno = code
        }
        guard fd >= 0 else {
            let code = errno
            if Self.meansAbsent(code) { throw notFound() }
            throw SystemCallFailure(code: code, operation: "reading", path: diskPath(parts))
        }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            let code = errno
            close(fd)
            throw SystemCallFailure(code: code, operation: "reading", path: diskPath(parts))
        }
        // list() shows regular files only, so anything else is as good as absent.
        guard status.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw notFound()
        }
        return (fd, Int64(status.st_size))
    }

    /// The volume id, trimmed; nil when the file is absent or empty.
    private func readVolumeId(_ rootFD: Int32) throws -> String? {
        let fd = openat(rootFD, Self.volumeIdFileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw SystemCallFailure(code: errno, operation: "reading", path: volumeIdPath)
        }
        defer { close(fd) }
        let data = try readAll(fd, expectedSize: 64, displayPath: volumeIdPath)
        let id = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        // An empty file carries no identity; replacing it could race a process that wrote it.
        return id.isEmpty ? nil : id
    }

    // MARK: Writing

    /// How many threads list the tree.
    static let listingWorkers = 2

    /// Gives the temporary `fd` the source's owner (as root), permission bits and times, in
    /// that order: a chown after the chmod would clear setuid and setgid, and the times go
    /// last. A refusal by the filesystem is ignored (see `writeFile`); other errors throw.
    static func applyMetadata(of source: stat, to fd: Int32, displayPath: String) throws {
        let root = ThisProcess.runsAsRoot
        if root && fchown(fd, source.st_uid, source.st_gid) != 0 {
            let code = errno
            // EINVAL: an id this user namespace does not map.
            guard meansRefusedMetadata(code) || code == EINVAL else {
                throw SystemCallFailure(code: code, operation: "setting the owner of", path: displayPath)
            }
        }
        var mode = source.st_mode & (root ? 0o7777 : 0o777)
        // Not as root the copy is this user's, and the owner's bits are the ones that apply to
        // it: a source this user reads through its group or others bits (owned by someone else,
        // owner-read off) would give a copy this user cannot read back to restore.
        if !root { mode |= S_IRUSR }
        if fchmod(fd, mode) != 0 {
            let code = errno
            guard meansRefusedMetadata(code) else {
                throw SystemCallFailure(code: code, operation: "setting the permissions of", path: displayPath)
            }
        }
        var times = [source.st_atim, source.st_mtim]
        if futimens(fd, &times) != 0 {
            let code = errno
            guard meansRefusedMetadata(code) else {
                throw SystemCallFailure(code: code, operation: "setting the times of", path: displayPath)
            }
        }
    }

    /// A filesystem that cannot keep an owner, permission bits or times (vfat, exFAT, CIFS
    /// without Unix extensions).
    private static func meansRefusedMetadata(_ code: Int32) -> Bool {
        code == EPERM || code == EACCES || code == EOPNOTSUPP || code == ENOTSUP || code == ENOSYS
    }

    /// Writes `parts` by filling a temporary file in its folder and renaming it into place,
    /// and returns the placed file as `list()` would show it (stat'ed after the rename, so
    /// after anything `fill` set). The temporary is created with `creationMode` (less the umask).
    private func place(
        _ parts: [String], under rootFD: Int32, creationMode: mode_t = 0o666,
        fill: (_ fd: Int32, _ displayPath: String) throws -> Void
    ) throws -> RemoteFile {
        let displayPath = diskPath(parts)
        let name = parts[parts.count - 1]
        var attempt = 0
        while true {
            attempt += 1
            let parent = try openParent(parts, under: rootFD)
            defer { if let parent { close(parent) } }
            let folderFD = parent ?? rootFD

            // The placed file as it was when it got its name: the unnamed file's own status,
            // else the name's.
            var status = stat()
            do {
                if try !placeUnnamed(name, in: folderFD, displayPath: displayPath, mode: creationMode, status: &status, fill: fill) {
                    let temporary = try createTemporary(in: folderFD, displayPath: displayPath, mode: creationMode,
                                                        sync: durability == .perFile) { fd in try fill(fd, displayPath) }
                    guard FileName.withCString(name, { renameat(folderFD, temporary, folderFD, $0) }) == 0 else {
                        let code = errno
                        unlinkat(folderFD, temporary, 0)
                        throw SystemCallFailure(code: code, operation: "writing", path: displayPath)
                    }
                    guard FileName.withCString(name, { fstatat(folderFD, $0, &status, AT_SYMLINK_NOFOLLOW) }) == 0 else {
                        throw SystemCallFailure(code: errno, operation: "checking", path: displayPath)
                    }
                }
            } catch let failure as SystemCallFailure where failure.code == ENOENT && attempt < 3 {
                // A concurrent delete pruned the folder between opening and creating: reopen.
                continue
            }
            if durability == .perFile && fsync(folderFD) != 0 {
                throw SystemCallFailure(code: errno, operation: "syncing the folder of", path: displayPath)
            }
            return RemoteFile(path: parts.joined(separator: "/"), size: Int64(status.st_size),
                              remoteId: Self.remoteId(status))
        }
    }

    /// The folder that holds the last of `parts`, opened for writing into and created with its
    /// missing parents, or nil when that is the root itself. The caller closes it.
    ///
    /// One openat2 call finds a folder that exists (beneath the root, no link followed); a
    /// missing one, or anything in the way, is left to the walk folder by folder, which
    /// creates what is missing and names what is in the way as before.
    private func openParent(_ parts: [String], under rootFD: Int32) throws -> Int32? {
        guard parts.count > 1 else { return nil }
        let folders = parts.dropLast()
        let path = folders.count == 1 ? folders[folders.startIndex] : folders.joined(separator: "/")
        if let fd = openBeneath(rootFD, path, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fd >= 0 { return fd }
        let chain = try openFolders(folders, under: rootFD, create: true, operation: "writing")
        chain.dropLast().forEach { close($0) }
        return chain.last
    }

    /// Fills an unnamed file made in `folderFD` (`UnnamedFile`) and links it in as `name`,
    /// replacing a file of that name; returns false, having written nothing, where the
    /// filesystem has no unnamed files or this process cannot link one, and the caller then
    /// takes a named temporary. On any failure nothing is left under any name.
    private func placeUnnamed(
        _ name: String, in folderFD: Int32, displayPath: String, mode: mode_t, status: inout stat,
        fill: (_ fd: Int32, _ displayPath: String) throws -> Void
    ) throws -> Bool {
        guard unnamedTemporaries, let fd = UnnamedFile.create(in: folderFD, access: O_WRONLY, mode: mode) else { return false }
        var open = true
        defer { if open { close(fd) } }
        try fill(fd, displayPath)
        if durability == .perFile && fsync(fd) != 0 {
            throw SystemCallFailure(code: errno, operation: "syncing", path: displayPath)
        }
        let code = UnnamedFile.link(fd, in: folderFD, as: name, replacing: true, temporaryName: Self.temporaryName)
        guard code == 0 else { throw SystemCallFailure(code: code, operation: "writing", path: displayPath) }
        guard fstat(fd, &status) == 0 else { throw SystemCallFailure(code: errno, operation: "checking", path: displayPath) }
        open = false
        // Filesystems with unnamed files report write errors before close; were one to come
        // now, the file is not recorded as uploaded, and the next sync writes it again.
        if close(fd) != 0 { throw SystemCallFailure(code: errno, operation: "writing", path: displayPath) }
        return true
    }

    /// Creates a temporary file in `folderFD` with `mode` (less the umask), fills it,
    /// optionally fsyncs it, closes it and returns its name. On any failure the temporary file
    /// is unlinked before throwing.
    private func createTemporary(
        in folderFD: Int32, displayPath: String, mode: mode_t = 0o666, sync: Bool, fill: (Int32) throws -> Void
    ) throws -> String {
        var name = ""
        var fd: Int32 = -1
        for _ in 0..<8 where fd < 0 {
            name = Self.temporaryName()
            fd = openat(folderFD, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
            if fd < 0 && errno != EEXIST { break }
        }
        guard fd >= 0 else { throw SystemCallFailure(code: errno, operation: "writing", path: displayPath) }
        do {
            try fill(fd)
            if sync && fsync(fd) != 0 {
                throw SystemCallFailure(code: errno, operation: "syncing", path: displayPath)
            }
        } catch {
            close(fd)
            unlinkat(folderFD, name, 0)
            throw error
        }
        // close reports deferred write errors on network filesystems (NFS, SMB).
        if close(fd) != 0 {
            let code = errno
            unlinkat(folderFD, name, 0)
            throw SystemCallFailure(code: code, operation: "writing", path: displayPath)
        }
        return name
    }

    /// Places `temporary` under `name` unless `name` exists and returns 0 or the errno; either
    /// way `temporary` is gone afterwards. `renameat2` is a parameter so tests can take the
    /// hard-link path that filesystems without RENAME_NOREPLACE get.
    static func placeWithoutReplacing(
        _ folderFD: Int32, _ temporary: String, _ name: String,
        renameat2: LinuxCalls.RenameAt2? = LinuxCalls.renameat2
    ) -> Int32 {
        if let renameat2 {
            if renameat2(folderFD, temporary, folderFD, name, LinuxCalls.renameNoReplace) == 0 { return 0 }
            let code = errno
            if !Self.meansUnsupported(code) {
                unlinkat(folderFD, temporary, 0)
                return code
            }
        }
        // Filesystems without RENAME_NOREPLACE: a hard link also refuses an existing name.
        let code = linkat(folderFD, temporary, folderFD, name, 0) == 0 ? 0 : errno
        unlinkat(folderFD, temporary, 0)
        return code
    }
}

// MARK: The held root

/// The remote root's descriptor, kept open for the per-file calls of a job instead of opened
/// and closed by each (a path lookup and two system calls a file). `list()` opens the root
/// afresh and makes that the held one, so the writes of a run go into the folder it listed;
/// a call before any listing opens it once.
///
/// A descriptor that was held is never closed while the provider lives, only set aside: a
/// call on another thread may still be using it (a listing replaces it a few times a job at
/// most). All are closed when the last copy of the provider goes.
final class HeldRoot: Sendable {
    private let state = Mutex<(current: Int32, retired: [Int32])>((-1, []))

    /// The held descriptor, opened with `open` when none is held yet.
    func descriptor(opening open: () throws -> Int32) throws -> Int32 {
        try state.withLock { state in
            if state.current < 0 { state.current = try open() }
            return state.current
        }
    }

    /// Holds `fd` from now on and returns it.
    func replace(with fd: Int32) -> Int32 {
        state.withLock { state in
            if state.current >= 0 { state.retired.append(state.current) }
            state.current = fd
        }
        return fd
    }

    deinit {
        state.withLock { state in
            if state.current >= 0 { close(state.current) }
            state.retired.forEach { close($0) }
        }
    }
}

// MARK: Byte moving

/// Writes all of `data` to `fd`.
private func writeAll(_ fd: Int32, _ data: Data, displayPath: String) throws {
    let code = data.withUnsafeBytes { BackupEngine.writeAll(fd, $0) }
    if code != 0 { throw SystemCallFailure(code: code, operation: "writing", path: displayPath) }
}

/// Reads `fd` to its end; `expectedSize` only sizes the buffer.
private func readAll(_ fd: Int32, expectedSize: Int64, displayPath: String) throws -> Data {
    let chunk = max(4096, min(1 << 20, Int(clamping: expectedSize) + 1))
    var result = Data()
    result.reserveCapacity(Int(clamping: expectedSize))
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
    defer { buffer.deallocate() }
    while true {
        let count = read(fd, buffer.baseAddress, chunk)
        if count < 0 {
            if errno == EINTR { continue }
            throw SystemCallFailure(code: errno, operation: "reading", path: displayPath)
        }
        if count == 0 { return result }
        result.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }
}

/// A failed copy, with the side that failed so the caller can say which file is at fault.
struct CopyFailure: Error {
    enum Side { case source, destination }
    let code: Int32
    let side: Side
}

/// Copies the rest of `source` to `destination`, both at their current offsets.
///
/// Tries copy_file_range (in-kernel, and a server-side copy on NFS), then sendfile, then a
/// read/write loop with a 1 MiB buffer. The fast calls cannot say which side an error came
/// from, so an error that is not clearly the destination's falls through to the slower calls
/// at the same offsets, and those tell.
@discardableResult
func copyContents(
    from source: Int32, to destination: Int32, expectedSize: Int64, limit: Int64? = nil,
    onBytes: ((Int64) -> Void)? = nil
) throws -> Int64 {
    // With a limit, never more than one byte past it is read: enough to tell "longer". Someone
    // watching the bytes hears of them every 8 MiB.
    let chunk = limit == nil && onBytes == nil ? 1 << 30 : 8 << 20
    var copied = 0
    func wanted() -> Int {
        guard let limit else { return chunk }
        return Int(min(Int64(chunk), limit + 1 - Int64(copied)))
    }
    func done() -> Bool { limit.map { Int64(copied) > $0 } ?? false }

    func destinationFull(_ code: Int32) -> Bool {
        code == ENOSPC || code == EDQUOT || code == EFBIG || code == EROFS
    }

    if let copyFileRange = LinuxCalls.copyFileRange {
        while !done() {
            let asked = wanted()
            let count = copyFileRange(source, nil, destination, nil, asked, 0)
            if count > 0 {
                copied += count
                onBytes?(Int64(copied))
                // A short copy of a regular file that ends where its size (and the limit) says
                // it ends is its end: no second call to hear 0. Whatever the file did meanwhile,
                // the caller checks what landed (size, and hash where it has one).
                if count < asked && Int64(copied) == expectedSize && limit.map({ Int64(copied) == $0 }) ?? true { return Int64(copied) }
                continue
            }
            // 0 at the start of a non-empty file: a filesystem that reports no data this way.
            if count == 0 { if copied > 0 || expectedSize == 0 { return Int64(copied) } else { break } }
            let code = errno
            if code == EINTR { continue }
            if destinationFull(code) { throw CopyFailure(code: code, side: .destination) }
            break
        }
    }

    while !done() {
        let count = sendfile(destination, source, nil, wanted())
        if count > 0 { copied += count; onBytes?(Int64(copied)); continue }
        if count == 0 { if copied > 0 || expectedSize == 0 { return Int64(copied) } else { break } }
        let code = errno
        if code == EINTR { continue }
        if destinationFull(code) { throw CopyFailure(code: code, side: .destination) }
        break
    }

    let size = 1 << 20
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
    defer { buffer.deallocate() }
    guard let base = buffer.baseAddress else { return Int64(copied) }
    while !done() {
        let count = read(source, base, min(size, wanted()))
        if count < 0 {
            if errno == EINTR { continue }
            throw CopyFailure(code: errno, side: .source)
        }
        if count == 0 { return Int64(copied) }
        try writeFully(destination, base, count)
        copied += count
        onBytes?(Int64(copied))
    }
    return Int64(copied)
}

/// Writes all `count` bytes at `base` to `destination` (a short write goes on where it stopped).
private func writeFully(_ destination: Int32, _ base: UnsafeMutableRawPointer, _ count: Int) throws {
    var offset = 0
    while offset < count {
        let written = write(destination, base + offset, count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            throw CopyFailure(code: errno, side: .destination)
        }
        offset += written
    }
}

/// Copies the rest of `source` to `destination` through a buffer, hashing what it reads;
/// returns the SHA-256 and the bytes copied. A read that comes back short exactly at
/// `expectedSize` is the end (a regular file reads short only there), so a small file costs
/// one read and one write; any other size is read on to its real end.
func copyHashing(
    from source: Int32, to destination: Int32, expectedSize: Int64, onBytes: ((Int64) -> Void)? = nil
) throws -> (digest: SHA256Digest, size: Int64) {
    var hasher = SHA256Hasher()
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: SHA256Hasher.readBufferSize(expectedSize: expectedSize), alignment: 16)
    defer { buffer.deallocate() }
    guard let base = buffer.baseAddress else { return (hasher.finalize(), 0) }
    var copied: Int64 = 0
    while true {
        let count = read(source, base, buffer.count)
        if count < 0 {
            if errno == EINTR { continue }
            throw CopyFailure(code: errno, side: .source)
        }
        if count == 0 { break }
        hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        try writeFully(destination, base, count)
        copied += Int64(count)
        onBytes?(copied)
        if count < buffer.count && copied == expectedSize { break }
    }
    return (hasher.finalize(), copied)
}

// MARK: Linux calls the Glibc module does not import

/// Functions glibc declares only under _GNU_SOURCE, which Swift's Glibc module does not define,
/// looked up once at run time. Each is nil where the C library lacks it.
enum LinuxCalls {
    typealias SyncFS = @convention(c) (Int32) -> Int32
    typealias CopyFileRange = @convention(c) (
        Int32, UnsafeMutablePointer<Int64>?, Int32, UnsafeMutablePointer<Int64>?, Int, UInt32
    ) -> Int
    typealias RenameAt2 = @convention(c) (
        Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32
    ) -> Int32

    /// RENAME_NOREPLACE from <linux/fs.h>.
    static let renameNoReplace: UInt32 = 1

    static let syncfs: SyncFS? = symbol("syncfs")
    static let copyFileRange: CopyFileRange? = symbol("copy_file_range")
    static let renameat2: RenameAt2? = symbol("renameat2")

    private static func symbol<T>(_ name: String) -> T? {
        guard let handle = dlopen(nil, RTLD_NOW), let address = dlsym(handle, name) else { return nil }
        return unsafeBitCast(address, to: T.self)
    }
}
