// The failures of a transfer that are the local side's fault, not the remote's.

import Foundation

/// A local file could not be read (the source of an upload, deleted or made unreadable
/// after the scan) or written (the target of a download). Never a CloudError: a full local
/// disk must not read as a full remote. The sync engine skips such an upload for this run,
/// keeps its state as it was, and goes on; the restore engine counts a failed attempt.
public struct LocalFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The local file's path.
    public let path: String
    public let message: String
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { message }

    /// A local file the scan listed that is a symbolic link when it is read: not followed.
    public static func nowALink(_ path: String) -> LocalFileError {
        LocalFileError(path: path, message: "cannot read the local file \(path): it is a symbolic link now (links are not followed; the next run sees what it is then)")
    }

    /// Opens the local file at `path` to send it: read-only, not through a link it became since
    /// the scan (`O_NOFOLLOW`: `nowALink`), and not waiting on a FIFO (`O_NONBLOCK`; only a
    /// regular file is taken). Returns the descriptor, which the caller closes, and its `fstat`;
    /// `failed` makes the error of a call that failed from its errno.
    public static func openForSending(
        _ path: String, failed: (Int32) -> LocalFileError
    ) throws -> (fd: Int32, status: stat) {
        let fd = FileName.withCString(path) { open($0, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw errno == ELOOP ? nowALink(path) : failed(errno) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            let error = failed(errno)
            close(fd)
            throw error
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw LocalFileError(path: path, message: "cannot read the local file \(path): it is not a regular file")
        }
        return (fd, status)
    }

    /// A failed read of the local file at `path`, from the errno of the call that failed.
    public init(errno code: Int32, reading path: String) {
        self.init(path: path, message: "cannot read the local file \(path): \(String(cString: strerror(code)))")
    }
}
