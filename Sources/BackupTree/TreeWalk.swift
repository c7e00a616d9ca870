// The walk behind TreeScanner. Folders are listed on several threads (readdir, fstatat, names,
// excludes, sorting, cache lookups: the part that grows with the tree), each into its own
// slot, in path order as far as the threads allow; one thread assembles the slots in path
// order as they are listed, into entries and hash jobs, and frees each slot's items once they
// are entries: the listing of the whole tree is never held at once. It then turns the hashing
// outcomes and the cache into the ScanResult.

import BackupEngine
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Listing folders (any thread)

/// What one folder holds, in path order, as its lister saw it.
enum WalkItem: Sendable {
    /// A regular file, as the assembly makes its entry of it.
    case file(ListedFile)
    /// A subfolder, listed into its own slot.
    case folder(FolderSlot)
    /// A name whose status cannot be read (errno): a folder with read but no search permission.
    case unstatable(path: String, code: Int32)
    /// A symbolic link: its target (FileName's codec) and its own times and owner.
    /// (Boxed: links are few, and the largest payload would set every item's size.)
    indirect case symlink(path: String, target: String, metadata: EntryMetadata)
    /// A FIFO, socket or device, described.
    case special(path: String, what: String)
}

/// A regular file as its folder's lister saw it: what its entry is made of. Items wait only
/// between their folder's listing and its assembly, which follows the listers closely.
struct ListedFile: Sendable {
    var path: String
    var size: Int64
    var mtimeNanoseconds: Int64
    var inode: UInt64
    var device: UInt64
    var mode: UInt32
    var uid: UInt32
    var gid: UInt32
    /// Where the cache holds the fingerprint that matched (the file's hash), else -1.
    var cacheIndex: Int32
    var flags: FileFlags

    var identity: FileIdentity { FileIdentity(device: device, inode: inode) }
    var metadata: EntryMetadata { EntryMetadata(mode: mode, mtimeNanoseconds: mtimeNanoseconds, uid: uid, gid: gid) }
}

/// What the assembly does with a listed file.
struct FileFlags: OptionSet, Sendable {
    let rawValue: UInt8
    /// The cache did not match: the file is read and hashed after the walk.
    static let needsHash = FileFlags(rawValue: 1)
    /// The cache knew the path (matching or not).
    static let cached = FileFlags(rawValue: 2)
    /// The file has more than one name: its dev:inode finds the others.
    static let linked = FileFlags(rawValue: 4)
    /// Compared by size and mtime, never read.
    static let sizeCompared = FileFlags(rawValue: 8)
    /// New to the cache, and not read by the scan: its hash comes from its upload.
    static let hashToCome = FileFlags(rawValue: 16)
}

/// One folder's listing, filled in by whichever thread lists it and taken by the assembly.
final class FolderSlot: Sendable {
    enum Listing: Sendable {
        /// Not listed yet.
        case pending
        /// Listed; with the folder's own mode, times and owner (nil for the root, whose
        /// target is the restore's to choose, or where fstat failed).
        case listed([WalkItem], metadata: EntryMetadata?)
        /// Opened but could not be listed (errno).
        case failed(Int32, metadata: EntryMetadata?)
        /// Could not be opened (errno).
        case unopenable(Int32)
        /// Removed or replaced by a link since its parent was read: nothing of ours to list.
        case gone
        /// Taken by the assembly.
        case taken
    }

    /// The folder's relative path ("" for the root).
    let path: String
    let listing = Mutex<Listing>(.pending)

    init(path: String) {
        self.path = path
    }
}

/// The walk's fixed inputs and its queue of folders waiting for a thread.
final class FolderLister: Sendable {
    let cache: FingerprintCache
    let excludes: PatternList
    let folderExclusion: FolderExclusion
    let sizeCompared: PatternList
    /// Files the cache does not know get a hash to come instead of a read (`ScanOptions.hashNewFilesOnUpload`).
    let hashNewFilesLater: Bool
    let rootNames: Set<String>
    let reservedPrefixes: [[UInt8]]
    let fileSystem: ScanFileSystem

    private struct Task: Sendable {
        var fd: Int32
        var slot: FolderSlot
        /// The folder's path and a "/": tasks sort by it as their subtrees do in path order.
        var key: [UInt8]
    }

    private let waiting = Mutex<[Task]>([])
    /// Folders queued and not yet listed to the end; the walk is over when it drops to 0.
    private let outstanding = Atomic<Int>(0)
    /// How many threads list (woken to stop once `outstanding` drops to 0).
    private let workers = Atomic<Int>(1)
    private let wakeup = DispatchSemaphore(value: 0)
    /// Signalled when a slot is filled in while the assembly waits on one (`assemblyWaits`).
    private let published = DispatchSemaphore(value: 0)
    private let assemblyWaits = Atomic<Bool>(false)
    /// Workers waiting for a queued folder: an offer wakes one only when there is one.
    private let idleWorkers = Atomic<Int>(0)
    /// At most this many folders wait in the queue, each with an open descriptor; past it a
    /// lister lists the subfolder itself, so a folder with 100,000 subfolders cannot run out of
    /// descriptors.
    private let queueLimit = 64
    /// How many queued folders one thread lists inside the listing of another.
    private static let nestingLimit = 16

    init(
        cache: FingerprintCache, excludes: PatternList, sizeCompared: PatternList,
        reserved: ReservedNames, fileSystem: ScanFileSystem, hashNewFilesLater: Bool = false
    ) {
        self.cache = cache
        self.hashNewFilesLater = hashNewFilesLater
        self.excludes = excludes
        folderExclusion = FolderExclusion(list: excludes)
        self.sizeCompared = sizeCompared
        rootNames = reserved.rootNames
        reservedPrefixes = reserved.prefixes.map { Array($0.utf8) }
        self.fileSystem = fileSystem
    }

    /// Lists the tree below the folder `rootFD` (taking it over) on `threads` threads while
    /// `assemble` takes the slots on this one (from the root slot), and returns what it returned.
    func walkTree<R>(_ rootFD: Int32, threads: Int, assemble: (_ root: FolderSlot, _ lister: FolderLister) -> R) -> R {
        let root = FolderSlot(path: "")
        if threads <= 1 {
            list(rootFD, into: root, metadata: nil, queueing: false)
            return assemble(root, self)
        }
        outstanding.store(1, ordering: .sequentiallyConsistent)
        workers.store(threads, ordering: .sequentiallyConsistent)
        waiting.withLock { $0.append(Task(fd: rootFD, slot: root, key: [])) }
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            DispatchQueue.concurrentPerform(iterations: threads) { _ in self.runWorker() }
            done.signal()
        }
        let result = assemble(root, self)
        done.wait()
        return result
    }

    /// The slot's listing once it is filled in, taken out of it (its memory goes with the caller).
    func take(_ slot: FolderSlot) -> FolderSlot.Listing {
        while true {
            let listing = slot.listing.withLock { listing -> FolderSlot.Listing in
                if case .pending = listing { return .pending }
                defer { listing = .taken }
                return listing
            }
            if case .pending = listing {
                // Said before the slot is looked at again: a lister that fills it in after
                // that look sees the flag and signals. The timeout covers a signal consumed
                // by an earlier wait.
                assemblyWaits.store(true, ordering: .sequentiallyConsistent)
                let stillPending = slot.listing.withLock { listing in
                    if case .pending = listing { true } else { false }
                }
                if stillPending { _ = published.wait(timeout: .now() + .milliseconds(1)) }
                assemblyWaits.store(false, ordering: .sequentiallyConsistent)
                continue
            }
            return listing
        }
    }

    private func publish(_ slot: FolderSlot, _ listing: FolderSlot.Listing) {
        slot.listing.withLock { $0 = listing }
        if assemblyWaits.exchange(false, ordering: .sequentiallyConsistent) { published.signal() }
    }

    private func runWorker() {
        while true {
            // The queued folder first in path order: the assembly waits on the earliest one.
            let task = waiting.withLock { tasks -> Task? in
                guard let best = Self.earliest(tasks) else { return nil }
                return tasks.remove(at: best)
            }
            if let task {
                list(task.fd, into: task.slot, metadata: nil, queueing: true, statFolder: task.slot.path != "", depth: 0)
                finished()
                continue
            }
            if outstanding.load(ordering: .sequentiallyConsistent) == 0 { return }
            // Another thread is listing a folder that may queue more. Counted as idle before
            // the queue is looked at again, so an offer after that look signals; the timeout
            // covers a wakeup lost in between.
            idleWorkers.add(1, ordering: .sequentiallyConsistent)
            let empty = waiting.withLock { $0.isEmpty }
            if empty && outstanding.load(ordering: .sequentiallyConsistent) != 0 {
                _ = wakeup.wait(timeout: .now() + .milliseconds(2))
            }
            idleWorkers.subtract(1, ordering: .sequentiallyConsistent)
        }
    }

    /// A queued folder was listed to the end; the last one wakes every worker to stop.
    private func finished() {
        if outstanding.subtract(1, ordering: .sequentiallyConsistent).newValue == 0 {
            for _ in 0..<workers.load(ordering: .sequentiallyConsistent) { wakeup.signal() }
        }
    }

    private static func earliest(_ tasks: [Task]) -> Int? {
        guard var best = tasks.indices.first else { return nil }
        for index in tasks.indices.dropFirst() where tasks[index].key.lexicographicallyPrecedes(tasks[best].key) {
            best = index
        }
        return best
    }

    /// What a lister does with a subfolder it opened.
    private enum Handover {
        /// Queued for any thread.
        case queued
        /// The queue is full and this subfolder comes first: the lister lists it itself.
        case listItself
        /// The queue is full: the subfolder took the place of the queued one first in path
        /// order, which the lister lists instead (so that the assembly, which follows path
        /// order, is kept waiting as little as possible).
        case listInstead(Task)
    }

    /// Hands a subfolder to another thread, or says which folder to list now.
    private func offer(_ fd: Int32, _ slot: FolderSlot) -> Handover {
        let task = Task(fd: fd, slot: slot, key: Array(slot.path.utf8) + [UInt8(ascii: "/")])
        let handover = waiting.withLock { tasks -> Handover in
            if tasks.count < queueLimit {
                // Counted before it can be taken, so `outstanding` never reads 0 while work is left.
                outstanding.add(1, ordering: .sequentiallyConsistent)
                tasks.append(task)
                return .queued
            }
            guard let best = Self.earliest(tasks), tasks[best].key.lexicographicallyPrecedes(task.key) else { return .listItself }
            outstanding.add(1, ordering: .sequentiallyConsistent)
            let earlier = tasks[best]
            tasks[best] = task
            return .listInstead(earlier)
        }
        if case .queued = handover, idleWorkers.load(ordering: .sequentiallyConsistent) > 0 { wakeup.signal() }
        return handover
    }

    /// Lists the folder `fd` (taking it over) into `slot`, then its subfolders into theirs.
    /// `statFolder`: the folder's own status is read first (every folder but the root).
    /// `depth`: how many folders this thread is listing around this one for the queue (each
    /// holds a descriptor), at most `nestingLimit`.
    private func list(
        _ fd: Int32, into slot: FolderSlot, metadata: EntryMetadata?, queueing: Bool, statFolder: Bool = false, depth: Int = 0
    ) {
        var metadata = metadata
        if statFolder {
            var status = stat()
            metadata = fstat(fd, &status) == 0 ? entryMetadata(status) : nil
        }
        guard let dir = fdopendir(fd) else {
            let code = errno
            close(fd)
            publish(slot, .failed(code, metadata: metadata))
            return
        }
        defer { closedir(dir) }
        let folderFD = dirfd(dir)
        let (listing, subfolders) = listFolder(dir, folderFD, relative: slot.path, metadata: metadata)
        // Published before its subfolders are listed: the assembly goes on with it meanwhile.
        publish(slot, listing)
        for (child, name) in subfolders {
            let childFD = FileName.withCString(name) { fileSystem.openFolder(folderFD, $0, child.path) }
            if childFD < 0 {
                switch -childFD {
                // Removed or replaced by a link since readdir: nothing of ours to list.
                case ENOENT, ENOTDIR, ELOOP: publish(child, .gone)
                default: publish(child, .unopenable(-childFD))
                }
                continue
            }
            guard queueing, depth < Self.nestingLimit else {
                list(childFD, into: child, metadata: nil, queueing: queueing, statFolder: true, depth: depth)
                continue
            }
            switch offer(childFD, child) {
            case .queued:
                break
            case .listItself:
                list(childFD, into: child, metadata: nil, queueing: true, statFolder: true, depth: depth)
            case .listInstead(let earlier):
                list(earlier.fd, into: earlier.slot, metadata: nil, queueing: true, statFolder: true, depth: depth + 1)
                finished()
            }
        }
    }

    private func listFolder(
        _ dir: OpaquePointer, _ folderFD: Int32, relative: String, metadata: EntryMetadata?
    ) -> (FolderSlot.Listing, [(FolderSlot, String)]) {
        let prefix = relative.isEmpty ? "" : relative + "/"
        let atRoot = relative.isEmpty

        var children: [Child] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { return (.failed(errno, metadata: metadata), []) }
                break
            }
            let type = entry.pointee.d_type
            let child = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) { cName in
                    classify(cName, type: type, in: folderFD, prefix: prefix, atRoot: atRoot)
                }
            }
            if let child { children.append(child) }
        }

        // Siblings in path order make the depth-first assembly come out sorted.
        children.sort { $0.precedes($1) }
        var items: [WalkItem] = []
        items.reserveCapacity(children.count)
        var subfolders: [(FolderSlot, String)] = []
        for child in children {
            switch child.kind {
            case .file(let size, let inode, let device, let links, let metadata):
                items.append(file(child.path, size: size, inode: inode, device: device, links: links, metadata: metadata))
            case .folder:
                if folderExclusion.excludesEverything(below: child.path) { continue }
                let childSlot = FolderSlot(path: child.path)
                items.append(.folder(childSlot))
                subfolders.append((childSlot, child.name))
            case .symlink(let target, let metadata):
                items.append(.symlink(path: child.path, target: target, metadata: metadata))
            case .special(let what):
                items.append(.special(path: child.path, what: what))
            case .unstatable(let code):
                items.append(.unstatable(path: child.path, code: code))
            }
        }
        return (.listed(items, metadata: metadata), subfolders)
    }

    /// A regular file's item: hashed from the cache when its fingerprint matches. A file with
    /// more than one link keeps its dev:inode, for the assembly to find its other names.
    private func file(
        _ path: String, size: Int64, inode: UInt64, device: UInt64, links: UInt64, metadata: EntryMetadata
    ) -> WalkItem {
        var listed = ListedFile(
            path: path, size: size, mtimeNanoseconds: metadata.mtimeNanoseconds, inode: inode, device: device,
            mode: metadata.mode, uid: metadata.uid, gid: metadata.gid, cacheIndex: -1, flags: links > 1 ? .linked : [])
        if sizeCompared.matches(path) {
            listed.flags.insert(.sizeCompared)
            return .file(listed)
        }
        if let index = cache.index(of: path) {
            listed.flags.insert(.cached)
            if cache.fingerprint(at: index).matches(size: size, mtimeNanoseconds: metadata.mtimeNanoseconds, inode: inode) {
                listed.cacheIndex = Int32(index)
                return .file(listed)
            }
        } else if hashNewFilesLater && links <= 1 {
            listed.flags.insert(.hashToCome)
            return .file(listed)
        }
        listed.flags.insert(.needsHash)
        return .file(listed)
    }

    /// The child for one directory entry, or nil when it is skipped without a trace.
    private func classify(
        _ cName: UnsafePointer<CChar>, type: UInt8, in folderFD: Int32, prefix: String, atRoot: Bool
    ) -> Child? {
        let length = strlen(cName)
        let bytes = UnsafeRawBufferPointer(start: cName, count: length)
        if bytes.first == UInt8(ascii: ".") && (length == 1 || (length == 2 && bytes[1] == UInt8(ascii: "."))) {
            return nil
        }
        for reservedPrefix in reservedPrefixes where length >= reservedPrefix.count {
            if bytes.starts(with: reservedPrefix) { return nil }
        }
        let name = FileName.string(fromBytes: bytes)
        if atRoot && rootNames.contains(name) { return nil }
        let path = prefix + name

        switch Int32(type) {
        case Int32(DT_DIR):
            // Pruning is decided when the folder's turn comes; no stat is needed for a folder.
            return Child(name: name, path: path, kind: .folder)
        case Int32(DT_LNK):
            if excludes.matches(path) { return nil }
        case Int32(DT_FIFO), Int32(DT_SOCK), Int32(DT_CHR), Int32(DT_BLK):
            return excludes.matches(path) ? nil : Child(name: name, path: path, kind: .special(Self.describe(type: type)))
        case Int32(DT_REG):
            // Excluded files are left out before their stat.
            if excludes.matches(path) { return nil }
        default:
            break  // DT_UNKNOWN (some file systems): the stat below says what it is.
        }

        var status = stat()
        if fstatat(folderFD, cName, &status, AT_SYMLINK_NOFOLLOW) != 0 {
            let code = errno
            // Deleted between readdir and fstatat: it is simply no longer there.
            if code == ENOENT { return nil }
            if type != UInt8(DT_REG) && excludes.matches(path) { return nil }
            return Child(name: name, path: path, kind: .unstatable(code))
        }
        let mode = status.st_mode & S_IFMT
        if mode == S_IFDIR { return Child(name: name, path: path, kind: .folder) }
        if type != UInt8(DT_REG) && excludes.matches(path) { return nil }
        switch mode {
        case S_IFREG:
            return Child(
                name: name, path: path,
                kind: .file(
                    size: Int64(status.st_size), inode: UInt64(status.st_ino), device: UInt64(status.st_dev),
                    links: UInt64(status.st_nlink), metadata: entryMetadata(status)))
        case S_IFLNK:
            guard let target = linkTarget(folderFD, cName, size: Int(status.st_size)) else {
                let code = errno
                if code == ENOENT || code == EINVAL { return nil }  // gone, or no longer a link
                return Child(name: name, path: path, kind: .unstatable(code))
            }
            return Child(name: name, path: path, kind: .symlink(target: target, metadata: entryMetadata(status)))
        case S_IFIFO:
            return Child(name: name, path: path, kind: .special(Self.describe(type: UInt8(DT_FIFO))))
        case S_IFSOCK:
            return Child(name: name, path: path, kind: .special(Self.describe(type: UInt8(DT_SOCK))))
        case S_IFCHR:
            return Child(name: name, path: path, kind: .special(Self.describe(type: UInt8(DT_CHR))))
        default:
            return Child(name: name, path: path, kind: .special(Self.describe(type: UInt8(DT_BLK))))
        }
    }

    private static func describe(type: UInt8) -> String {
        switch Int32(type) {
        case Int32(DT_FIFO): "a FIFO (named pipe)"
        case Int32(DT_SOCK): "a socket"
        case Int32(DT_CHR): "a character device"
        default: "a block device"
        }
    }
}

/// The text of the link `cName` in `folderFD`, in FileName's codec (byte-exact), read with
/// readlinkat (never followed); nil with errno set when it cannot be read.
private func linkTarget(_ folderFD: Int32, _ cName: UnsafePointer<CChar>, size: Int) -> String? {
    var capacity = max(size, 255) + 1
    while true {
        var buffer = [CChar](repeating: 0, count: capacity)
        let count = buffer.withUnsafeMutableBufferPointer { raw -> Int in
            guard let base = raw.baseAddress else { return -1 }
            return readlinkat(folderFD, cName, base, capacity)
        }
        if count < 0 { return nil }
        // A target that filled the buffer may have been cut: read again with more room.
        if count < capacity { return FileName.string(fromBytes: buffer.prefix(count).map { UInt8(bitPattern: $0) }) }
        capacity *= 2
        if capacity > 1 << 20 {
            errno = ENAMETOOLONG
            return nil
        }
    }
}

/// The mode, times and owner of `status` (names are looked up when the marker is written).
func entryMetadata(_ status: stat) -> EntryMetadata {
    EntryMetadata(mode: UInt32(status.st_mode) & 0o7777, mtimeNanoseconds: mtimeNanoseconds(status),
                  uid: UInt32(status.st_uid), gid: UInt32(status.st_gid))
}

/// A file's device and inode: names sharing them are hard links of one file.
struct FileIdentity: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
}

/// One name found in a folder, before it is sorted among its siblings.
private struct Child {
    enum Kind {
        case file(size: Int64, inode: UInt64, device: UInt64, links: UInt64, metadata: EntryMetadata)
        case folder
        case symlink(target: String, metadata: EntryMetadata)
        case special(String)
        /// Listed but its status cannot be read (a folder with read but no search permission).
        case unstatable(Int32)
    }

    var name: String
    var path: String
    var kind: Kind
    /// The first 8 bytes of the name (with a folder's "/"), big-endian and zero-padded: most
    /// comparisons of the sort end here, without touching the strings.
    var sortKey: UInt64

    init(name: String, path: String, kind: Kind) {
        self.name = name
        self.path = path
        self.kind = kind
        var key: UInt64 = 0
        var count = 0
        for byte in name.utf8.prefix(8) {
            key = key << 8 | UInt64(byte)
            count += 1
        }
        if count < 8, case .folder = kind {
            key = key << 8 | UInt64(UInt8(ascii: "/"))
            count += 1
        }
        sortKey = count < 8 ? key << (8 * UInt64(8 - count)) : key
    }

    var isFolder: Bool {
        if case .folder = kind { true } else { false }
    }

    /// Whether `self` comes before `other` in the order of their full paths' bytes, reading a
    /// folder's name as "name/": the depth-first order of siblings sorted this way is the order
    /// of every path below them.
    func precedes(_ other: Child) -> Bool {
        if sortKey != other.sortKey { return sortKey < other.sortKey }
        return namePrecedes(name, isFolder, other.name, other.isFolder)
    }
}

/// Whether the name `a` (read as "a/" when `aIsFolder`) sorts before `b` by UTF-8 bytes.
private func namePrecedes(_ a: String, _ aIsFolder: Bool, _ b: String, _ bIsFolder: Bool) -> Bool {
    func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        let common = min(a.count, b.count)
        var index = 0
        while index < common {
            if a[index] != b[index] { return a[index] < b[index] }
            index += 1
        }
        // A name that ended is followed by its "/" if it is a folder, else by nothing.
        let nextA = a.count > common ? Int(a[common]) : (aIsFolder ? Int(UInt8(ascii: "/")) : -1)
        let nextB = b.count > common ? Int(b[common]) : (bIsFolder ? Int(UInt8(ascii: "/")) : -1)
        return nextA < nextB
    }
    // Native strings, small ones included, always have contiguous UTF-8; the copy is a fallback.
    let fast = a.utf8.withContiguousStorageIfAvailable { a in
        b.utf8.withContiguousStorageIfAvailable { b in compare(a, b) }
    }
    if let result = fast ?? nil { return result }
    return Array(a.utf8).withUnsafeBufferPointer { a in Array(b.utf8).withUnsafeBufferPointer { b in compare(a, b) } }
}

// MARK: - Assembly, hashing and the result (one thread)

/// A file to read and hash after the walk: its entry, and what the walk saw of it.
struct PendingHash: Sendable {
    var entry: Int
    var size: Int64
    var mtimeNanoseconds: Int64
    var inode: UInt64
    var device: UInt64
}

/// The entries, hash jobs and notes of one scan, assembled from the folder slots in path order.
struct ScanAssembly {
    let cache: FingerprintCache
    let excludes: PatternList

    var entries = SyncEntryList()
    /// The files to read, in entry order.
    var jobs: [PendingHash] = []
    var newFingerprints: [FingerprintUpdates.Item] = []
    /// How many cache paths the walk came across (found, or kept below an unreadable folder).
    /// When it is all of them, no file was deleted and the search for removed paths is skipped.
    var cachePathsSeen = 0
    /// Cache paths known to need forgetting: vanished, or changed while being read.
    var forgotten: [String] = []
    var notes: [ScanNote] = []
    /// Folders and symbolic links, in walk order (path order): entries only the marker holds.
    var treeEntries: [TreeEntry] = []
    /// The first path met of each file with more than one name.
    var firstNames: [FileIdentity: String] = [:]
    var hashedFiles = 0
    var hashedBytes: Int64 = 0
    /// Told the counts as they grow.
    var counter: ScanCounter?
    /// Whether an entry was added out of walk order, so the entries need a final sort.
    var needsSort = false

    /// How many files are read and hashed between two hand-overs of their outcomes: the
    /// outcomes and the jobs' paths are held for one batch at a time, not for every file.
    static let hashBatch = 4096

    init(cache: FingerprintCache, excludes: PatternList) {
        self.cache = cache
        self.excludes = excludes
        // A tree rescanned mostly holds the files its cache knows.
        entries.reserveCapacity(cache.count)
    }

    /// Appends the listing of `slot` and everything below it as the lister fills the slots in;
    /// the errno when the folder itself could not be listed.
    mutating func add(_ slot: FolderSlot, from lister: FolderLister) -> Int32? {
        switch lister.take(slot) {
        case .listed(let items, _):
            add(items, from: lister)
            return nil
        case .failed(let code, _): return code
        case .pending, .unopenable, .gone, .taken: return nil
        }
    }

    private mutating func add(_ items: [WalkItem], from lister: FolderLister) {
        for item in items {
            switch item {
            case .file(let listed):
                addFile(listed)
            case .folder(let child):
                switch lister.take(child) {
                case .listed(let listed, let metadata):
                    if let metadata { treeEntries.append(TreeEntry(path: child.path, kind: .folder, metadata: metadata)) }
                    add(listed, from: lister)
                case .failed(let code, let metadata):
                    if let metadata { treeEntries.append(TreeEntry(path: child.path, kind: .folder, metadata: metadata)) }
                    addUnreadableFolder(child.path, code: code, opening: false)
                case .unopenable(let code):
                    addUnreadableFolder(child.path, code: code, opening: true)
                case .pending, .gone, .taken:
                    break
                }
            case .unstatable(let path, let code):
                addUnreadableFile(path, code: code, size: nil)
            case .symlink(let path, let target, let metadata):
                treeEntries.append(TreeEntry(path: path, kind: .symlink(target: target), metadata: metadata))
            case .special(let path, let what):
                notes.append(ScanNote(kind: .specialFile, path: path, message: "skipped \(path): it is \(what), not a regular file"))
            }
        }
        counter?.setFound(entries.count)
    }

    private mutating func addFile(_ listed: ListedFile) {
        let flags = listed.flags
        var entry = SyncEntry(
            path: listed.path, size: listed.size,
            digest: listed.cacheIndex >= 0 ? cache.fingerprint(at: Int(listed.cacheIndex)).digest : nil, source: .underRoot,
            mtimeNanoseconds: flags.contains(.sizeCompared) ? listed.mtimeNanoseconds : nil, metadata: listed.metadata)
        if flags.contains(.cached) { cachePathsSeen += 1 }
        if flags.contains(.hashToCome) { entry.hashToCome = true }
        if flags.contains(.needsHash) {
            jobs.append(PendingHash(
                entry: entries.count, size: listed.size, mtimeNanoseconds: listed.mtimeNanoseconds, inode: listed.inode,
                device: listed.device))
        }
        if flags.contains(.linked) {
            if let first = firstNames[listed.identity] {
                entry.kind = .hardLink(to: first)
            } else {
                firstNames[listed.identity] = entry.path
            }
        }
        entries.append(entry)
    }

    /// An `.absent` entry with the cache's size and hash (else `size`, and no hash) and a note.
    private mutating func addUnreadableFile(_ path: String, code: Int32, size: Int64?) {
        let cached = cache[path]
        if cached != nil { cachePathsSeen += 1 }
        entries.append(.absent(path, size: cached?.size ?? size ?? 0, digest: cached?.digest))
        notes.append(Self.unreadableNote(path, code))
    }

    private static func unreadableNote(_ path: String, _ code: Int32) -> ScanNote {
        ScanNote(
            kind: .unreadableFile, path: path,
            message: "cannot read \(path): \(TreeScanner.describe(code)); its remote copy is kept as it is "
                + "(a permission problem never deletes a remote copy)")
    }

    /// The folder itself and every cached file below it become `.absent` entries.
    private mutating func addUnreadableFolder(_ path: String, code: Int32, opening: Bool) {
        needsSort = true
        entries.append(.absent(path))
        let prefix = path + "/"
        cache.forEach(withPrefix: prefix) { cachedPath, print in
            guard !excludes.matches(cachedPath) else { return }
            cachePathsSeen += 1
            entries.append(.absent(cachedPath, size: print.size, digest: print.digest))
        }
        notes.append(ScanNote(
            kind: .unreadableFolder, path: path,
            message: "cannot \(opening ? "open" : "list") the folder \(path): \(TreeScanner.describe(code)); "
                + "the files below it are kept on the remote as they are (a permission problem never deletes a remote copy)"))
    }

    /// Hashes every queued file and fills in its entry, a batch at a time.
    mutating func hashChangedFiles(below rootFD: Int32, threads: Int, fileSystem: ScanFileSystem) {
        // At most one per file read: sized once (grown by doubling, a first scan's list would
        // hold its old and new buffers at once).
        newFingerprints.reserveCapacity(jobs.count)
        var vanished: Set<Int> = []
        let hasher = ParallelHasher(workers: threads, fileSystem: fileSystem, rootFD: rootFD, counter: counter)
        var start = 0
        while start < jobs.count {
            if counter?.isStopped == true { break }
            let end = min(start + Self.hashBatch, jobs.count)
            let batch = jobs[start..<end].map { job in
                HashJob(
                    path: entries.path(at: job.entry), size: job.size, mtimeNanoseconds: job.mtimeNanoseconds, inode: job.inode,
                    device: job.device)
            }
            let firstJob = start
            hasher.hash(batch) { batchIndex, outcome in
                apply(outcome, of: batch[batchIndex], entry: jobs[firstJob + batchIndex].entry, vanished: &vanished)
            }
            start = end
        }
        jobs = []  // done with: not held while the result is made
        if !vanished.isEmpty { follow(entries.remove(at: vanished)) }
    }

    private mutating func apply(_ outcome: HashOutcome, of job: HashJob, entry entryIndex: Int, vanished: inout Set<Int>) {
        switch outcome {
        case .hashed(let digest, let bytesRead, let stamp, let changed):
            let fingerprint = stamp?.fingerprint(size: bytesRead, digest: digest)
            hashedFiles += 1
            hashedBytes += bytesRead
            counter?.setHashed(hashedFiles, bytes: hashedBytes)
            entries.setHashed(at: entryIndex, digest: digest, size: bytesRead)
            let cached = cache.isEmpty ? nil : cache[job.path]
            if let fingerprint {
                if cached != fingerprint { newFingerprints.append(FingerprintUpdates.Item(entry: entryIndex, fingerprint: fingerprint)) }
            } else if cached != nil {
                forgotten.append(job.path)
            }
            if changed {
                notes.append(ScanNote(
                    kind: .changedWhileReading, path: job.path,
                    message: "\(job.path) changed while it was being read (it is being written?); "
                        + "backed up as read (\(bytesRead) bytes, \(job.size) when listed), and read again next time"))
            }
        case .unreadable(let code):
            let cached = cache[job.path]
            entries[entryIndex] = .absent(job.path, size: cached?.size ?? job.size, digest: cached?.digest)
            notes.append(Self.unreadableNote(job.path, code))
        case .replaced:
            let cached = cache[job.path]
            entries[entryIndex] = .absent(job.path, size: cached?.size ?? job.size, digest: cached?.digest)
            notes.append(ScanNote(
                kind: .replaced, path: job.path,
                message: "\(job.path) was replaced by another file while the tree was scanned; "
                    + "its remote copy is kept as it is, and it is read next time"))
        case .vanished(let why):
            vanished.insert(entryIndex)
            if cache[job.path] != nil { forgotten.append(job.path) }
            notes.append(ScanNote(kind: .vanished, path: job.path, message: "left out \(job.path): \(why)"))
        }
    }

    /// The new fingerprints name their entries where `moved` (old position → new) put them.
    private mutating func follow(_ moved: [Int]) {
        for index in newFingerprints.indices { newFingerprints[index].entry = moved[newFingerprints[index].entry] }
    }

    /// - Parameter localRoot: the source folder the entries' `.underRoot` paths are below.
    mutating func result(localRoot: String) -> ScanResult {
        if needsSort { follow(entries.sortByPath()) }
        var removed = Set(forgotten)
        if cachePathsSeen < cache.count {
            // Some cache paths were not met at all: deleted, excluded, or size-compared now.
            // Every entry but a size-compared one keeps its fingerprint (unreadable ones too):
            // the cache and the entries are both in path order, so one merge finds the others.
            var next = 0
            cache.forEachBytes { path, _ in
                while next < entries.count && entries.withPathBytes(at: next, { ByteOrder.compare($0, path) }) < 0 { next += 1 }
                let found = next < entries.count && entries.withPathBytes(at: next, { ByteOrder.compare($0, path) }) == 0
                    && !(entries.isLocalFile(at: next) && !entries.isHashCompared(at: next))
                if !found { removed.insert(String(decoding: path, as: UTF8.self)) }
            }
        }
        var files = 0
        var bytes: Int64 = 0
        for index in entries.indices where entries.isLocalFile(at: index) {
            files += 1
            bytes += entries.size(at: index)
        }
        return ScanResult(
            entries: entries, localRoot: localRoot,
            newFingerprints: FingerprintUpdates(entries: entries, items: newFingerprints),
            removedFingerprints: removed.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }, notes: notes,
            treeEntries: treeEntries, files: files, bytes: bytes, hashedFiles: hashedFiles, hashedBytes: hashedBytes)
    }
}
