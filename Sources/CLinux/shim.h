// Linux system calls glibc 2.36 (Debian 12) has no wrapper for, as inline functions: the
// Glibc module does not export syscall(2), which is variadic and so not callable from Swift;
// and the extended-attribute calls the Glibc module leaves out (sys/xattr.h).
#ifdef __linux__
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

/// openat2(2) with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS (and no magic links): `path`
/// resolves below `dirfd` only, and no link on the way or at its end is followed. -1 with
/// errno on failure (ENOSYS where the kernel predates Linux 5.6 or a seccomp filter hides it).
static inline int backup_open_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
#ifdef SYS_openat2
    struct open_how how = {0};
    how.flags = (unsigned long long)(unsigned int)flags;
    how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
#else
    errno = ENOSYS;
    return -1;
#endif
}
#endif
