// Files made without a name (O_TMPFILE) and linked into their folder once whole, shared by
// the folder provider's writes and a restore's staged downloads. Against a named temporary
// and a rename: the filesystem allocates the inode without holding the folder's lock (which
// parallel writers into one folder otherwise queue on, spinning), one of the two locked
// steps is gone, and a process stopped mid-fill leaves nothing behind under any name.

#if canImport(Glibc)
import Glibc
import Synchronization

public enum UnnamedFile {
    /// O_TMPFILE from <fcntl.h>: `__O_TMPFILE | O_DIRECTORY`, `__O_TMPFILE` being 020000000
    /// on every architecture this builds for (Glibc's Swift module does not import it).
    static let openFlag: Int32 = 0o20000000 | O_DIRECTORY
    /// AT_EMPTY_PATH from <fcntl.h>.
    static let atEmptyPath: Int32 = 0x1000

    /// How this process links an unnamed file: by the descriptor itself (AT_EMPTY_PATH:
    /// CAP_DAC_READ_SEARCH, as root has) or through /proc/self/fd (anyone, with /proc
    /// mounted). Learned once, with a probe file, in the first folder whose filesystem has
    /// unnamed files; the descriptor is tried first, as it costs no lookup of a /proc path
    /// (that lookup was a third of a small file's staging in a restore).
    enum Way: Sendable { case procfs, descriptor, none }
    private static let way = Mutex<Way?>(nil)

    /// A new unnamed file in `folderFD`, open with `access` (O_WRONLY or O_RDWR) and made with
    /// `mode` (less the umask); nil where the filesystem has no unnamed files (NFS, CIFS,
    /// FUSE, kernels before 3.11) or this process cannot link one, and for any other refusal
    /// (EACCES, EROFS, ENOSPC), which the caller's named temporary meets again and reports.
    public static func create(in folderFD: Int32, access: Int32, mode: mode_t) -> Int32? {
        let fd = openat(folderFD, ".", openFlag | access | O_CLOEXEC, mode)
        guard fd >= 0 else { return nil }
        if linkWay(probingIn: folderFD, mode: mode) == .none {
            close(fd)
            return nil
        }
        return fd
    }

    /// Gives the unnamed file `fd` the name `name` in `folderFD`; returns 0 or the errno
    /// (EEXIST when the name is taken and not `replacing`). When `replacing`, a taken name is
    /// replaced atomically: the file is linked under `temporaryName()` and renamed over it.
    /// An unnamed file can be linked once only.
    public static func link(
        _ fd: Int32, in folderFD: Int32, as name: String, replacing: Bool, temporaryName: () -> String
    ) -> Int32 {
        let way = way.withLock { $0 } ?? .procfs
        var code = linkOnce(fd, folderFD, name, way)
        guard code == EEXIST && replacing else { return code }
        for _ in 0..<8 {
            let temporary = temporaryName()
            code = linkOnce(fd, folderFD, temporary, way)
            if code == EEXIST { continue }
            guard code == 0 else { return code }
            if FileName.withCString(temporary, { from in FileName.withCString(name) { renameat(folderFD, from, folderFD, $0) } }) != 0 {
                code = errno
                _ = FileName.withCString(temporary) { unlinkat(folderFD, $0, 0) }
            }
            return code
        }
        return code
    }

    private static func linkOnce(_ fd: Int32, _ folderFD: Int32, _ name: String, _ way: Way) -> Int32 {
        let linked: Int32 = FileName.withCString(name) { target in
            switch way {
            case .procfs: linkat(AT_FDCWD, "/proc/self/fd/\(fd)", folderFD, target, AT_SYMLINK_FOLLOW)
            case .descriptor, .none: linkat(fd, "", folderFD, target, atEmptyPath)
            }
        }
        return linked == 0 ? 0 : errno
    }

    /// The way this process links, probed the first time with an unnamed file linked under a
    /// temporary name in `folderFD` and unlinked again.
    private static func linkWay(probingIn folderFD: Int32, mode: mode_t) -> Way {
        if let known = way.withLock({ $0 }) { return known }
        let probe = openat(folderFD, ".", openFlag | O_WRONLY | O_CLOEXEC, mode)
        guard probe >= 0 else { return .none }
        defer { close(probe) }
        var found = Way.none
        for candidate in [Way.descriptor, .procfs] {
            let name = ".backup-probe." + String(UInt64.random(in: .min ... .max), radix: 16)
            let code = linkOnce(probe, folderFD, name, candidate)
            if code == 0 {
                _ = FileName.withCString(name) { unlinkat(folderFD, $0, 0) }
                found = candidate
                break
            }
            // Anything but "this way does not work here" (EEXIST, ENOSPC, EROFS): decide later.
            guard code == ENOENT || code == EPERM || code == EACCES else { return .none }
        }
        way.withLock { $0 = $0 ?? found }
        return found
    }
}
#endif
