// The target folder of a restore: the staging area inside it where downloads wait, the
// check of what placing a file would overwrite, and placement itself — renames that walk
// the target without following links, so nothing is ever written outside it.

import BackupEngine
import CLinux
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What placing a file would replace.
public struct PlacementConflict: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A regular file with other contents.
        case differentFile
        /// A folder, a link or a special file is where the file would go.
        case notARegularFile
    }

    public let remotePath: String
    /// The local path that is in the way.
    public let localPath: String
    public let kind: Kind
}

/// The folder a restore writes into, and its staging area (`RestoreStaging`).
///
/// Every local path is derived here from a file's `placePath`, checked as a remote path
/// would be (`RelativePath`: no absolute path, no "." or "..", no escape that stands for
/// "/" or NUL), and reached by descriptors from the target's own: each folder opened with
/// `O_NOFOLLOW`, each new file made with `O_EXCL`, nothing opened without `O_NONBLOCK` that a
/// FIFO planted meanwhile could hang. A link anywhere on the way is an error naming it.
public struct RestoreTarget: RestoreStaging {
    /// The name of the staging folder inside the target.
    public static let stagingName = ".backup-staging"
    /// The prefix of a download's temporary file in the staging folder.
    public static let temporaryPrefix = ".backup-tmp."

    /// The target folder.
    public let root: String
    /// What setting modes, times, owners and links could not do (shared by copies).
    public let treeNotes = TreeRestoreNotes()
    /// The staging folder the last download went into, open (shared by copies).
    private let lastStagingFolder = FolderCache()
    /// What a file made in the staging folder gets, as `prepare` found it (shared by copies).
    private let staging = StagingFacts()

    /// What every file made in the staging folder certainly gets from it and from this
    /// process: its owner, its group (the folder's when it is setgid), and its mode less the
    /// umask. Unknown (nil, and every step is then taken) where a default ACL decides modes.
    struct NewFiles: Equatable {
        var uid: uid_t
        var gid: gid_t
        var umask: mode_t
    }

    public init(root: String) {
        var trimmed = Substring(root)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        self.root = String(trimmed)
    }

    /// Where downloads wait for placement: inside the target, so placing is a rename.
    public var stagingRoot: String { root + "/" + Self.stagingName }

    /// The final local path of a place path (for messages and listings).
    public func finalPath(for placePath: String) -> String {
        root + "/" + placePath
    }

    /// Refuses a path that may not be restored (checked before anything is written).
    public func check(_ placePath: String) throws(RefusedPath) {
        _ = try Self.parts(placePath)
    }

    /// Creates the target folder (and its parents) if it is missing.
    public func createFolder() throws {
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        } catch {
            throw LocalFileError(path: root, message: "cannot create the restore target \(root): \(error.localizedDescription)")
        }
    }

    /// Before a run (the engine's call): the target folder made, and the temporaries a
    /// stopped run left in the staging folder removed.
    public func prepare() throws {
        lastStagingFolder.forget()
        staging.value.withLock { $0 = nil }
        try createFolder()
        // A stopped run's temporaries are garbage: no record names them.
        guard let rootFD = try? openRoot() else { return }
        defer { close(rootFD) }
        // Made by this user, for this user only: nobody else may plant files where downloads
        // wait (a hard link swapped in would take a staged file's mode and owner).
        _ = Self.stagingName.withCString { mkdirat(rootFD, $0, 0o700) }
        let fd = Self.stagingName.withCString { openat(rootFD, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return }
        if info.st_uid != geteuid() {
            throw LocalFileError(path: stagingRoot, message: "\(stagingRoot) belongs to another user (uid \(info.st_uid)); "
                + "a restore stages its downloads only in a folder of its own: remove it, or restore into another folder")
        }
        // The folders made in it (0700, this user's) get its setgid bit and default ACL.
        if let umask = Self.processUmask(), !Self.hasDefaultACL(fd) {
            let gid = info.st_mode & S_ISGID != 0 ? info.st_gid : getegid()
            staging.value.withLock { $0 = NewFiles(uid: geteuid(), gid: gid, umask: umask) }
        }
        Self.removeTree(fd, only: { $0.hasPrefix(Self.temporaryPrefix) })
    }

    /// The bytes free on the target's file system for an unprivileged writer, or nil when
    /// the file system does not say.
    public func freeBytes() -> Int64? {
        var info = statvfs()
        guard statvfs(root, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    static func parts(_ placePath: String) throws(RefusedPath) -> [String] {
        let parts: [String]
        do {
            parts = try RelativePath.components(of: placePath)
        } catch {
            throw RefusedPath(remotePath: placePath, reason: "\(error.reason); a backup only holds paths inside its own folder")
        }
        if parts.first == stagingName {
            throw RefusedPath(remotePath: placePath, reason: "\(stagingName) is the restore's own staging folder")
        }
        return parts
    }

    /// The text after the last "/" of a path `parts` accepted.
    static func lastPart(of placePath: String) -> String {
        let utf8 = placePath.utf8
        guard let slash = utf8.lastIndex(of: UInt8(ascii: "/")) else { return placePath }
        return String(placePath[utf8.index(after: slash)...])
    }

    // MARK: Staging

    /// The mode to make `file`'s staged copy with, and what it then certainly is (nil: not
    /// known, every step is taken). A mode the umask would not change, without setuid,
    /// setgid or sticky, is given at once; any other is set afterwards (the copy is made 0600).
    /// `prepare` and `finish` bracket a run, so a file's `create` and `keep` get one answer.
    private func creation(for file: RestoreFile) -> (mode: mode_t, madeAs: MadeAs?) {
        guard let newFiles = staging.value.withLock({ $0 }) else { return (0o600, nil) }
        var mode: mode_t = 0o600
        if let wanted = file.metadata?.mode, wanted & 0o7000 == 0, mode_t(wanted) & newFiles.umask == 0 {
            mode = mode_t(wanted & 0o777)
        }
        return (mode, MadeAs(uid: newFiles.uid, gid: newFiles.gid, mode: mode & ~newFiles.umask))
    }

    /// The process's umask, read where reading it changes nothing (`umask(2)` would set it,
    /// for a moment, for every thread); nil when /proc does not say.
    static func processUmask() -> mode_t? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
              let value = UInt32(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8), value <= 0o777
        else { return nil }
        return mode_t(value)
    }

    /// Whether the folder `fd` has a default ACL (which, not the umask, decides new files'
    /// modes); true when it cannot be told.
    static func hasDefaultACL(_ fd: Int32) -> Bool {
        if backup_fgetxattr_size(fd, "system.posix_acl_default") >= 0 { return true }
        return !(errno == ENODATA || errno == EOPNOTSUPP || errno == ENOTSUP)
    }

    public func create(for file: RestoreFile) throws -> StagedWrite {
        let parts = try Self.parts(file.placePath)
        let mode = creation(for: file).mode
        // Downloads come in path order, so most go into the folder the one before went into:
        // it is walked to (and made) once, not once per file.
        // A kept folder removed meanwhile (ENOENT) is forgotten and walked to again, once.
        for attempt in 0..<2 {
            let folder = try stagingFolder(for: parts, file)
            if let fd = UnnamedFile.create(in: folder.fd, access: O_RDWR, mode: mode) {
                return StagedWrite(fd: fd, folder: folder, temporaryName: nil)
            }
            var code: Int32 = 0
            for _ in 0..<8 {
                let name = Self.temporaryName()
                let fd = openat(folder.fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
                if fd >= 0 { return StagedWrite(fd: fd, folder: folder, temporaryName: name) }
                code = errno
                if code != EEXIST { break }
            }
            if code == ENOENT && attempt == 0 {
                lastStagingFolder.forget()
                continue
            }
            throw LocalFileError(path: stagingRoot, message: "cannot write the download of \(finalPath(for: file.placePath)) into \(stagingRoot): \(String(cString: strerror(code)))")
        }
        throw LocalFileError(path: stagingRoot, message: "cannot write the download of \(finalPath(for: file.placePath)) into \(stagingRoot)")
    }

    /// The staging folder of a file with these path parts, open.
    private func stagingFolder(for parts: [String], _ file: RestoreFile) throws -> OpenFolder {
        try lastStagingFolder.folder(for: parts.dropLast()) {
            let rootFD = try openRoot()
            defer { close(rootFD) }
            let chain: [Int32]
            do throws(FolderWalkError) {
                chain = try openFolderChain([Self.stagingName] + parts.dropLast(), under: rootFD, create: true, operation: "staging", displayRoot: root)
            } catch {
                throw Self.walkFailure(error, file, root)
            }
            chain.dropLast().forEach { close($0) }
            return chain[chain.count - 1]
        }
    }

    public func keep(_ write: StagedWrite, for file: RestoreFile) throws {
        // The path was checked when its write was created; its last part is the name.
        let name = Self.lastPart(of: file.placePath)
        // The recorded mode, times and owner go on the very descriptor that wrote the bytes:
        // nothing planted in the staging folder meanwhile can receive them, and placing is
        // then a rename alone.
        if let metadata = file.metadata, let code = MetadataSetter(notes: treeNotes).apply(metadata, to: write.fd, madeAs: creation(for: file).madeAs) {
            treeNotes.add("the mode, times or owner of \(finalPath(for: file.placePath)) could not be set: \(String(cString: strerror(code)))")
        }
        guard let temporaryName = write.temporaryName else {
            // Unnamed: linked in whole (over a staged file of an earlier try), then closed.
            let code = UnnamedFile.link(write.fd, in: write.folderFD, as: name, replacing: true, temporaryName: Self.temporaryName)
            let closed = close(write.fd) == 0 ? 0 : errno
            if code != 0 || closed != 0 {
                if code == 0 { _ = FileName.withCString(name) { unlinkat(write.folderFD, $0, 0) } }
                throw LocalFileError(path: stagingRoot, message: "cannot stage \(finalPath(for: file.placePath)): \(String(cString: strerror(code != 0 ? code : closed)))")
            }
            return
        }
        guard close(write.fd) == 0 else {
            let code = errno
            unlinkat(write.folderFD, temporaryName, 0)
            throw LocalFileError(path: stagingRoot, message: "cannot write the download of \(finalPath(for: file.placePath)): \(String(cString: strerror(code)))")
        }
        if FileName.withCString(name, { renameat(write.folderFD, temporaryName, write.folderFD, $0) }) != 0 {
            let code = errno
            unlinkat(write.folderFD, temporaryName, 0)
            throw LocalFileError(path: stagingRoot, message: "cannot stage \(finalPath(for: file.placePath)): \(String(cString: strerror(code)))")
        }
    }

    public func discard(_ write: StagedWrite) {
        close(write.fd)
        if let temporaryName = write.temporaryName { unlinkat(write.folderFD, temporaryName, 0) }
    }

    /// A new name for a download's temporary file in its staging folder.
    private static func temporaryName() -> String {
        temporaryPrefix + String(UInt64.random(in: .min ... .max), radix: 16)
    }

    public func openStaged(_ file: RestoreFile) throws -> Int32? {
        inStagedFolder(of: file) { folderFD, name in Self.openRegular(folderFD, name) } ?? nil
    }

    public func removeStaged(_ file: RestoreFile) {
        _ = inStagedFolder(of: file) { folderFD, name in FileName.withCString(name) { unlinkat(folderFD, $0, 0) } }
    }

    /// `body` with the staging folder of `file` (walked without following links or creating
    /// anything) and the file's name; nil when the path is refused or the folder is not there.
    private func inStagedFolder<T>(of file: RestoreFile, _ body: (Int32, String) -> T) -> T? {
        guard let parts = try? Self.parts(file.placePath), let rootFD = try? openRoot() else { return nil }
        defer { close(rootFD) }
        guard let chain = try? openFolderChain([Self.stagingName] + parts.dropLast(), under: rootFD, create: false, operation: "reading", displayRoot: root) else {
            return nil
        }
        defer { chain.forEach { close($0) } }
        return body(chain.last ?? rootFD, parts[parts.count - 1])
    }

    /// Removes the staging folder and everything in it (without following a link).
    public func finish() {
        lastStagingFolder.forget()
        staging.value.withLock { $0 = nil }
        guard let rootFD = try? openRoot() else { return }
        defer { close(rootFD) }
        let fd = Self.stagingName.withCString { openat(rootFD, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        if fd >= 0 {
            Self.removeTree(fd, only: nil)
            close(fd)
            _ = Self.stagingName.withCString { unlinkat(rootFD, $0, AT_REMOVEDIR) }
        } else if errno == ENOTDIR || errno == ELOOP {
            // Not ours: a link or a file where the staging folder would be. Only unlinked, never followed.
            _ = Self.stagingName.withCString { unlinkat(rootFD, $0, 0) }
        }
    }

    /// Removes the entries of the folder `fd` (recursively, never following a link) whose
    /// names `only` accepts (nil: every one); folders emptied on the way are removed.
    private static func removeTree(_ fd: Int32, only: ((String) -> Bool)?) {
        let dupFD = dup(fd)
        guard dupFD >= 0, let stream = fdopendir(dupFD) else {
            if dupFD >= 0 { close(dupFD) }
            return
        }
        defer { closedir(stream) }
        var names: [(name: [CChar], isFolder: Bool)] = []
        while let entry = readdir(stream) {
            var raw = entry.pointee.d_name
            let name = withUnsafeBytes(of: &raw) { buffer in
                Array(buffer.bindMemory(to: CChar.self).prefix { $0 != 0 }) + [0]
            }
            if name == [46, 0] || name == [46, 46, 0] { continue }
            var info = stat()
            guard fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            names.append((name, info.st_mode & S_IFMT == S_IFDIR))
        }
        for (name, isFolder) in names {
            if isFolder {
                let child = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                guard child >= 0 else { continue }
                removeTree(child, only: only)
                close(child)
                unlinkat(fd, name, AT_REMOVEDIR)  // fails, harmlessly, while something is left in it
            } else if only.map({ $0(String(decoding: name.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)) }) ?? true {
                unlinkat(fd, name, 0)
            }
        }
    }

    /// `name` in `folderFD` opened for reading when it is a regular file, else nil: never
    /// through a link, and with O_NONBLOCK so that a FIFO put there cannot hang the open.
    static func openRegular(_ folderFD: Int32, _ name: String) -> Int32? {
        let fd = FileName.withCString(name) { openat(folderFD, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            return nil
        }
        return fd
    }

    /// A failed walk while staging or placing `file`: a link (or a file) in the way is a
    /// refused path, never written through; anything else is the local side's failure.
    private static func walkFailure(_ error: FolderWalkError, _ file: RestoreFile, _ root: String) -> any Error {
        if error.code == ELOOP || error.code == ENOTDIR {
            return RefusedPath(remotePath: file.remotePath, reason: "\(error.path) is a link or not a folder; "
                + "writing through it could write outside \(root)")
        }
        return LocalFileError(path: error.path, message: "cannot create the folder \(error.path): \(String(cString: strerror(error.code)))")
    }

    // MARK: Conflicts

    /// What placing `file` would overwrite: nil when nothing is there, or when what is there
    /// already has the file's contents (its SHA-256, or for a size-compared file its size).
    public func conflict(for file: RestoreFile) throws -> PlacementConflict? {
        try conflicts(for: CollectionOfOne(file)).first
    }

    /// What placing each of `files` would overwrite, in their order (see `conflict(for:)`).
    /// Files come in path order: each folder is walked once for all of its files, as placing
    /// walks it, not once per file.
    public func conflicts(for files: some Sequence<RestoreFile>) throws -> [PlacementConflict] {
        let rootFD = try openRoot()
        defer { close(rootFD) }
        var parts: ArraySlice<String>?
        var folder = CheckedFolder.missing
        func closeFolder() {
            if case .open(let chain) = folder { chain.forEach { close($0) } }
            folder = .missing
        }
        defer { closeFolder() }
        var found: [PlacementConflict] = []
        for file in files {
            let fileParts = try Self.parts(file.placePath)
            if parts.map({ !FolderCache.same($0, fileParts.dropLast()) }) ?? true {
                closeFolder()
                do {
                    folder = .open(try openFolderChain(fileParts.dropLast(), under: rootFD, create: false, operation: "reading", displayRoot: root))
                } catch {
                    switch error.code {
                    case ENOENT: folder = .missing
                    case ELOOP, ENOTDIR: folder = .blocked(localPath: error.path)
                    default: throw LocalFileError(errno: error.code, reading: error.path)
                    }
                }
                parts = fileParts.dropLast()
            }
            switch folder {
            case .missing: continue
            case .blocked(let localPath):
                found.append(PlacementConflict(remotePath: file.remotePath, localPath: localPath, kind: .notARegularFile))
            case .open(let chain):
                if let conflict = try conflict(for: file, named: fileParts[fileParts.count - 1], in: chain.last ?? rootFD) {
                    found.append(conflict)
                }
            }
        }
        return found
    }

    /// Where the folder of the files a conflict check is at stands.
    private enum CheckedFolder {
        /// Open, by this chain of descriptors (empty: the target itself).
        case open([Int32])
        /// Not there yet: nothing in it to overwrite.
        case missing
        /// A link or a file is where a folder on the way would be.
        case blocked(localPath: String)
    }

    /// What placing `file` as `name` in the open folder `folderFD` would overwrite.
    private func conflict(for file: RestoreFile, named name: String, in folderFD: Int32) throws -> PlacementConflict? {
        let finalPath = finalPath(for: file.placePath)
        var info = stat()
        if FileName.withCString(name, { fstatat(folderFD, $0, &info, AT_SYMLINK_NOFOLLOW) }) != 0 {
            if errno == ENOENT { return nil }
            throw LocalFileError(errno: errno, reading: finalPath)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            return PlacementConflict(remotePath: file.remotePath, localPath: finalPath, kind: .notARegularFile)
        }
        let different = PlacementConflict(remotePath: file.remotePath, localPath: finalPath, kind: .differentFile)
        if let size = file.size, size != Int64(info.st_size) { return different }
        guard let expected = file.sha256 else {
            // Size-compared: the same size is the same file, as in the backup itself. Without
            // a known size, compare with the staged copy.
            if file.size != nil { return nil }
            guard let staged = try openStaged(file) else { return different }
            defer { close(staged) }
            var stagedInfo = stat()
            guard fstat(staged, &stagedInfo) == 0 else { return different }
            return stagedInfo.st_size == info.st_size ? nil : different
        }
        // Swapped for a FIFO or a link since the fstatat: not a regular file, so in the way.
        guard let fd = Self.openRegular(folderFD, name) else {
            return PlacementConflict(remotePath: file.remotePath, localPath: finalPath, kind: .notARegularFile)
        }
        defer { close(fd) }
        return try SHA256Hasher.hexOfOpenFile(fd, displayPath: finalPath) == expected ? nil : different
    }

    // MARK: Placing

    /// Moves each staged file to its final place, creating folders as needed. The walk
    /// never follows a link: a link in the way is an error naming it, never a way out.
    ///
    /// A large group is placed by two workers, each a run of whole folders (a rename costs the
    /// kernel more than anything around it, and a group is placed only once all of it landed,
    /// so nothing else runs meanwhile). A failure ends its worker; the first in file order is
    /// thrown, as one worker would have thrown it, and what was placed stays placed.
    public func place<Files: RandomAccessCollection<RestoreFile> & Sendable>(_ files: Files) throws where Files.Index == Int {
        let halves = Self.halves(of: files)
        guard halves.count == 2 else {
            try place(files, files.startIndex..<files.endIndex)
            return
        }
        let failures = Mutex<[(at: Int, error: any Error)]>([])
        DispatchQueue.concurrentPerform(iterations: halves.count) { worker in
            do {
                try self.place(files, halves[worker])
            } catch {
                failures.withLock { $0.append((worker, error)) }
            }
        }
        if let first = failures.withLock({ $0.min { $0.at < $1.at } }) { throw first.error }
    }

    /// Groups smaller than this are placed by one worker.
    static let parallelPlacementMinimum = 4096

    /// `files`' positions split in two runs at a change of folder near the middle, or all of
    /// them as one run (a small group, or one folder throughout).
    static func halves<Files: RandomAccessCollection<RestoreFile>>(of files: Files) -> [Range<Int>] where Files.Index == Int {
        let all = files.startIndex..<files.endIndex
        guard files.count >= parallelPlacementMinimum else { return [all] }
        func folder(_ at: Int) -> Substring {
            let path = files[at].placePath
            guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "" }
            return path[..<slash]
        }
        let middle = files.startIndex + files.count / 2
        let around = folder(middle)
        var split = middle
        while split < files.endIndex, folder(split).utf8.elementsEqual(around.utf8) { split += 1 }
        if split == files.endIndex {
            split = middle
            while split > files.startIndex, folder(split - 1).utf8.elementsEqual(around.utf8) { split -= 1 }
        }
        guard split > files.startIndex, split < files.endIndex else { return [all] }
        return [files.startIndex..<split, split..<files.endIndex]
    }

    /// Places `files[positions]`, in order (one worker's run).
    private func place<Files: RandomAccessCollection<RestoreFile>>(_ files: Files, _ positions: Range<Int>) throws where Files.Index == Int {
        let rootFD = try openRoot()
        defer { close(rootFD) }
        // Files come in path order: the folders of one are mostly the next one's, so both
        // chains are walked once per folder, not once per file.
        var folder: ArraySlice<String>?
        var target: [Int32] = []
        var staging: [Int32] = []
        func closeChains() {
            target.forEach { close($0) }
            staging.forEach { close($0) }
            (target, staging, folder) = ([], [], nil)
        }
        defer { closeChains() }
        for position in positions {
            let file = files[position]
            let parts = try Self.parts(file.placePath)
            let name = parts[parts.count - 1]
            if folder.map({ !FolderCache.same($0, parts.dropLast()) }) ?? true {
                closeChains()
                do {
                    target = try openFolderChain(parts.dropLast(), under: rootFD, create: true, operation: "placing", displayRoot: root)
                } catch {
                    throw Self.walkFailure(error, file, root)
                }
                do {
                    staging = try openFolderChain([Self.stagingName] + parts.dropLast(), under: rootFD, create: false, operation: "reading", displayRoot: root)
                } catch {
                    throw LocalFileError(errno: error.code, reading: error.path)
                }
                folder = parts.dropLast()
            }
            let from = staging.last ?? rootFD
            let to = target.last ?? rootFD
            if FileName.withCString(name, { renameat(from, $0, to, $0) }) != 0 {
                let code = errno
                let finalPath = finalPath(for: file.placePath)
                throw LocalFileError(path: finalPath, message: "cannot place \(finalPath): \(String(cString: strerror(code)))")
            }
        }
    }

    func openRoot() throws -> Int32 {
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw LocalFileError(errno: errno, reading: root) }
        return fd
    }
}

/// What `RestoreTarget.prepare` found of the staging folder, shared by copies of the target.
final class StagingFacts: Sendable {
    let value = Mutex<RestoreTarget.NewFiles?>(nil)
}

/// One open folder and the path parts it was reached by, kept between calls from any thread.
final class FolderCache: Sendable {
    private let last = Mutex<(parts: [String], folder: OpenFolder)?>(nil)

    /// The folder `parts` names: the one kept when `parts` are those of the last call (byte
    /// for byte), else the descriptor `open()` gives (kept for the next call). A folder
    /// replaced here stays open for those still writing into it.
    func folder(for parts: ArraySlice<String>, open: () throws -> Int32) throws -> OpenFolder {
        try last.withLock { kept in
            if let kept, Self.same(kept.parts[...], parts) { return kept.folder }
            let folder = OpenFolder(taking: try open())
            kept = (Array(parts), folder)
            return folder
        }
    }

    /// Lets the kept folder go (it may be removed: a new run walks to it again).
    func forget() {
        last.withLock { $0 = nil }
    }

    /// Whether two lists of names are the same bytes (not only canonically equal Strings).
    static func same(_ a: ArraySlice<String>, _ b: ArraySlice<String>) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
    }
}
