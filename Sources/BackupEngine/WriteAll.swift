// Writing a whole buffer to a descriptor: the one loop the folder remote, the crypt layer and
// the replaced local files share.

#if canImport(Glibc)
import Glibc
#endif

/// Writes all of `bytes` to `fd`, again after a signal (EINTR) and after a short write.
/// Returns 0, or the errno of the write that failed (ENOSPC for one that wrote nothing).
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
    guard let base = bytes.baseAddress else { return 0 }
    var offset = 0
    while offset < bytes.count {
        let written = write(fd, base + offset, min(bytes.count - offset, 1 << 30))
        if written < 0 && errno == EINTR { continue }
        if written <= 0 { return written < 0 ? errno : ENOSPC }
        offset += written
    }
    return 0
}
