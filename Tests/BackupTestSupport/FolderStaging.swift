// A test staging for the restore engine's unit tests: downloads land directly at
// root/placePath (so the default placement, "keep where landed", leaves them in place). Path
// based and trusting: the real staging, with its checks, is BackupTree's RestoreTarget.

import BackupEngine
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public struct FolderStaging: RestoreStaging {
    public let root: String

    public init(root: String) { self.root = root }

    private func path(_ file: RestoreFile) -> String { root + "/" + file.placePath }

    public func prepare() throws {}

    public func create(for file: RestoreFile) throws -> StagedWrite {
        let final = path(file)
        let folder = (final as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let name = ".tmp-" + UUID().uuidString
        let folderFD = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folderFD >= 0 else { throw LocalFileError(errno: errno, reading: folder) }
        let fd = openat(folderFD, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            close(folderFD)
            throw LocalFileError(errno: errno, reading: folder + "/" + name)
        }
        return StagedWrite(fd: fd, folder: OpenFolder(taking: folderFD), temporaryName: name)
    }

    public func keep(_ write: StagedWrite, for file: RestoreFile) throws {
        close(write.fd)
        let name = (path(file) as NSString).lastPathComponent
        guard renameat(write.folderFD, write.temporaryName ?? "", write.folderFD, name) == 0 else {
            throw LocalFileError(errno: errno, reading: path(file))
        }
    }

    public func discard(_ write: StagedWrite) {
        close(write.fd)
        unlinkat(write.folderFD, write.temporaryName ?? "", 0)
    }

    public func openStaged(_ file: RestoreFile) throws -> Int32? {
        let fd = open(path(file), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        return fd >= 0 ? fd : nil
    }

    public func removeStaged(_ file: RestoreFile) { unlink(path(file)) }

    public func finish() {}
}
