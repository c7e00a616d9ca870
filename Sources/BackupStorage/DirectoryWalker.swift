// The recursive listing behind FolderStorage.list(): openat/fdopendir/readdir/fstatat over trees
// of hundreds of thousands of files. FileManager's enumerator builds URLs and attribute
// dictionaries per entry, which costs several times more than the system calls themselves.

import BackupEngine
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Walks a directory tree and reports its regular files; symbolic links are never followed.
///
/// Entries come in directory order (readdir's), not sorted. Names that are not valid UTF-8
/// are reported through `FileName`'s escapes, so they can be read and deleted by that name.
struct DirectoryWalker {
    /// The tree's root on disk, for error messages.
    let rootPath: String
    /// Whether to leave out an entry, given its folder's relative path ("" at the root) and its name.
    let skip: @Sendable (_ folder: String, _ name: String) -> Bool

    /// Calls `visit` with the relative "/"-separated path and the status of every regular file
    /// under the directory `rootFD` (which stays open and owned by the caller).
    func walk(_ rootFD: Int32, visit: (_ path: String, _ status: stat) -> Void) throws {
        // fdopendir takes over the descriptor it is given, so the caller's stays untouched.
        let fd = openat(rootFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw SystemCallFailure(code: errno, operation: "listing", path: rootPath)
        }
        try walkFolder(fd, relative: "", visit: visit)
    }

    /// Like `walk`, on `workers` threads: the top of the tree is listed here, breadth first,
    /// until there are enough folders to share out (or nothing more to list), then each worker
    /// walks whole folders, taking the next one not yet taken. Each thread visits into its own
    /// `Found` (so `visit` needs no lock) and hands it to `flush` every `flushEvery` files and
    /// when it is done, to be taken and emptied: what is found is never held twice over.
    /// Within a folder files come in directory order; nothing is said of the order between
    /// folders (as in `walk`).
    func walk<Found>(
        _ rootFD: Int32, workers: Int, flushEvery: Int = 4096, empty: @Sendable () -> Found,
        visit: @Sendable (inout Found, String, stat) -> Void, flush: @Sendable (inout Found) -> Void
    ) throws {
        var top = empty()
        var topCount = 0
        func visitTop(_ path: String, _ status: stat) {
            visit(&top, path, status)
            topCount += 1
            if topCount % flushEvery == 0 { flush(&top) }
        }
        let fd = openat(rootFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw SystemCallFailure(code: errno, operation: "listing", path: rootPath)
        }
        var folders: [String] = []
        try walkFolder(fd, relative: "", visit: visitTop, subfolder: { folders.append($0) })
        // Breadth first while there are too few to share: a tree under one folder is split too.
        var next = 0
        while workers > 1, folders.count - next < workers * 4, next < folders.count, next < 256 {
            let relative = folders[next]
            next += 1
            guard let fd = try openFolder(relative, under: rootFD) else { continue }
            try walkFolder(fd, relative: relative, visit: visitTop, subfolder: { folders.append($0) })
        }
        flush(&top)
        let shared = Array(folders[next...])
        let taken = Atomic<Int>(0)
        let failure = Mutex<(any Error)?>(nil)
        // One iteration runs on this thread: a small tree, or one asked to be walked alone.
        DispatchQueue.concurrentPerform(iterations: shared.count > 1 ? max(1, workers) : 1) { _ in
            var mine = empty()
            var count = 0
            do {
                while failure.withLock({ $0 == nil }) {
                    let index = taken.add(1, ordering: .relaxed).oldValue
                    guard index < shared.count else { break }
                    guard let fd = try openFolder(shared[index], under: rootFD) else { continue }
                    try walkFolder(fd, relative: shared[index], visit: { path, status in
                        visit(&mine, path, status)
                        count += 1
                        if count % flushEvery == 0 { flush(&mine) }
                    }, subfolder: nil)
                }
            } catch {
                failure.withLock { $0 = $0 ?? error }
            }
            flush(&mine)
        }
        if let error = failure.withLock({ $0 }) { throw error }
    }

    /// The folder at `relative` under `rootFD`, opened a part at a time without following a
    /// link; nil when it is gone or was replaced by something else since it was listed.
    private func openFolder(_ relative: String, under rootFD: Int32) throws -> Int32? {
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        do throws(FolderWalkError) {
            let chain = try openFolderChain(parts, under: rootFD, create: false, operation: "listing", displayRoot: rootPath)
            chain.dropLast().forEach { close($0) }
            return chain.last
        } catch {
            if error.code == ENOENT || error.code == ENOTDIR || error.code == ELOOP { return nil }
            throw SystemCallFailure(code: error.code, operation: "listing", path: error.path)
        }
    }

    /// Lists one folder (taking over `fd`) and descends into its subfolders, or with
    /// `subfolder`, tells their relative paths instead.
    private func walkFolder(
        _ fd: Int32, relative: String, visit: (String, stat) -> Void, subfolder: ((String) -> Void)? = nil
    ) throws {
        let diskPath = relative.isEmpty ? rootPath : rootPath + "/" + relative
        guard let dir = fdopendir(fd) else {
            let code = errno
            close(fd)
            throw SystemCallFailure(code: code, operation: "listing", path: diskPath)
        }
        defer { closedir(dir) }
        let folderFD = dirfd(dir)
        let prefix = relative.isEmpty ? "" : relative + "/"

        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                let code = errno
                if code != 0 { throw SystemCallFailure(code: code, operation: "listing", path: diskPath) }
                return
            }
            let name = direntName(entry)
            guard name != ".", name != ".." else { continue }
            if skip(relative, name) { continue }

            var type = entry.pointee.d_type
            var status = stat()
            if type == UInt8(DT_REG) || type == UInt8(DT_UNKNOWN) {
                if FileName.withCString(name, { fstatat(folderFD, $0, &status, AT_SYMLINK_NOFOLLOW) }) != 0 {
                    let code = errno
                    // Deleted between readdir and fstatat: it is simply no longer there.
                    if code == ENOENT { continue }
                    throw SystemCallFailure(code: code, operation: "listing", path: diskPath + "/" + name)
                }
                switch status.st_mode & S_IFMT {
                case S_IFREG: type = UInt8(DT_REG)
                case S_IFDIR: type = UInt8(DT_DIR)
                default: continue
                }
            }

            if type == UInt8(DT_REG) {
                visit(prefix + name, status)
            } else if type == UInt8(DT_DIR) {
                if let subfolder {
                    // Opened (without following a link) by whoever walks it.
                    subfolder(prefix + name)
                    continue
                }
                let child = FileName.withCString(name) { openat(folderFD, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
                if child < 0 {
                    let code = errno
                    // Removed or replaced by a link since readdir: nothing of ours to list.
                    if code == ENOENT || code == ENOTDIR || code == ELOOP { continue }
                    throw SystemCallFailure(code: code, operation: "listing", path: diskPath + "/" + name)
                }
                try walkFolder(child, relative: prefix + name, visit: visit)
            }
        }
    }
}

/// A directory entry's name: names are bytes, and FileName makes any of them a String, reversibly.
func direntName(_ entry: UnsafeMutablePointer<dirent>) -> String {
    withUnsafePointer(to: &entry.pointee.d_name) { tuple in
        tuple.withMemoryRebound(to: UInt8.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) {
            FileName.string(fromBytes: UnsafeBufferPointer(start: $0, count: strlen(UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))))
        }
    }
}

/// The names in the open folder `dir`, but `.` and `..`, in directory order.
func folderNames(_ dir: OpaquePointer) -> [String] {
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = direntName(entry)
        if name != ".", name != ".." { names.append(name) }
    }
    return names
}
