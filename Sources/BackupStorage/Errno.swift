// The folder provider's errno → CloudError mapping (DESIGN.md, "Error mapping", folder column),
// kept in this one place so every message names the path and says what to do next.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import BackupEngine

/// Maps a failed system call on the remote folder to the CloudError its errno stands for.
///
/// `operation` is a verb phrase such as "writing" or "listing"; `path` is the full path on
/// disk, so the person reading the message can go and look at it.
package func cloudError(errno code: Int32, operation: String, path: String) -> CloudError {
    switch code {
    case ENOSPC, EDQUOT:
        return CloudError(
            .storageFull,
            "the remote folder is full (no space left or over quota) while \(operation) \(path); "
                + "free some space on it or raise the quota, then run again")
    case ENOENT:
        return CloudError(.notFound, "\(path) does not exist on the remote folder (while \(operation) it)")
    case EACCES, EPERM:
        return CloudError(
            .transport,
            "permission denied while \(operation) \(path); "
                + "check that this user may write to the remote folder, then run again")
    case EROFS:
        return CloudError(
            .transport,
            "the remote folder is read-only (while \(operation) \(path)); "
                + "remount it read-write, then run again")
    default:
        return CloudError(.transport, "\(operation) \(path) failed: \(errnoDescription(code))")
    }
}

/// The C library's text for `code`, with the number for searching.
func errnoDescription(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return "\(String(cString: text)) (errno \(code))"
}

/// A failed system call on a local file (the source of an upload or the target of a
/// download): a LocalFileError, never a CloudError, so a full local disk never reads as a
/// full remote.
func localFileError(errno code: Int32, operation: String, path: String) -> LocalFileError {
    LocalFileError(path: path, message: "cannot \(operation) the local file \(path): \(errnoDescription(code))")
}

/// A failed system call on the remote folder, not yet mapped, so callers can still branch on
/// the errno (an absent file is success for delete, a read-only root means "no identity").
struct SystemCallFailure: Error {
    let code: Int32
    /// A verb phrase for the message: "writing", "listing", …
    let operation: String
    /// The full path on disk.
    let path: String

    /// The CloudError this failure stands for.
    var mapped: CloudError { cloudError(errno: code, operation: operation, path: path) }
}
