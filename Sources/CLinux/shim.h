// Linux system calls glibc 2.36 (Debian 12) has no wrapper for, as inline functions: the
// Glibc module does not export syscall(2), which is variadic and so not callable from Swift;
// and fgetxattr(2), whose header (sys/xattr.h) clashes with the Glibc module's types.
#ifdef __linux__
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
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

/// fgetxattr(2) asked only for the size of the attribute `name` of `fd`: the size, or -1 with
/// errno (ENODATA: the file has no such attribute).
static inline long backup_fgetxattr_size(int fd, const char *name) {
    return syscall(SYS_fgetxattr, fd, name, (void *)0, (unsigned long)0);
}

/// fsetxattr(2) (the tests give a folder a default ACL with it).
static inline int backup_fsetxattr(int fd, const char *name, const void *value, unsigned long size, int flags) {
    return (int)syscall(SYS_fsetxattr, fd, name, value, size, flags);
}
#endif
