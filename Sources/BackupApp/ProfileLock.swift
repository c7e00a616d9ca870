// Keeps two runs of one profile from interleaving (a cron job and a person at the TUI): an
// flock on the profile's lock file, held for the run. The kernel drops an flock when its
// process dies, so a lock left by a killed process is never stale; the pid written into the
// file only names the holder in the message.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An exclusive lock on one profile, released on `release()` or deinit.
public final class ProfileLock: Sendable {
    private let fd: Int32
    public let path: String

    /// Takes the lock, waiting up to `wait` for a run that holds it; then fails with
    /// `.unavailable`, naming the process that holds it.
    public init(path: String, profile: String, wait: Duration = .seconds(2)) throws(AppError) {
        self.path = path
        let folder = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(
            atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw .failure("cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        let deadline = ContinuousClock.now + wait
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else {
                let holder = ProfileLock.holder(fd)
                close(fd)
                throw AppError(
                    .unavailable,
                    "another backup run\(holder.map { " (pid \($0))" } ?? "") is using profile \"\(profile)\"; "
                        + "wait for it to finish, or stop it, then run again", busyProfile: true)
            }
            usleep(50_000)
        }
        ftruncate(fd, 0)
        let pid = "\(getpid())\n"
        _ = pid.withCString { pwrite(fd, $0, strlen($0), 0) }
        self.fd = fd
    }

    private static func holder(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = pread(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer.prefix(count), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Int32(text) == nil ? nil : text
    }

    /// Whether a run (of any process, this one too) holds the lock at `path` now. Looks only:
    /// creates nothing and never waits.
    public static func isHeld(path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }

    /// Releases the lock (also done on deinit).
    public func release() {
        flock(fd, LOCK_UN)
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
