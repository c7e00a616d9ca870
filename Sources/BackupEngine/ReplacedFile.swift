// A small local file replaced whole and atomically: written under a temporary name beside it
// (created with its final mode, so it is never readable by others even for a moment), then
// renamed over it. The config file, the tool's known_hosts and the units of `backup schedule`
// are written this way; each caller words its own error.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

public enum ReplacedFile {
    /// Why a replace failed (strerror's words, or Foundation's for the folder).
    public struct Failure: Error, Sendable {
        public let reason: String
    }

    /// Replaces `path` with `data`, mode `mode`, creating its folder first (mode `folderMode`,
    /// or the default when nil). The temporary is removed when anything fails.
    public static func write(_ data: Data, to path: String, mode: mode_t, folderMode: mode_t? = nil) throws(Failure) {
        let folder = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(
                atPath: folder, withIntermediateDirectories: true,
                attributes: folderMode.map { [.posixPermissions: Int($0)] })
        } catch {
            throw Failure(reason: error.localizedDescription)
        }
        let temporary = folder + "/." + (path as NSString).lastPathComponent + ".tmp-" + String(UInt32.random(in: .min ... .max), radix: 16)
        // Created here with the final mode (not by Foundation, which creates its own temporary
        // with the umask's mode and sets the asked one only after the rename).
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { throw Failure(reason: "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        // The mode as asked, whatever the umask took away.
        var code = fchmod(fd, mode) == 0 ? 0 : errno
        if code == 0 { code = data.withUnsafeBytes { writeAll(fd, $0) } }
        if close(fd) != 0 && code == 0 { code = errno }
        guard code == 0 else {
            unlink(temporary)
            throw Failure(reason: String(cString: strerror(code)))
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw Failure(reason: reason)
        }
    }
}
