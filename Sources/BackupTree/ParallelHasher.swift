// The hashing half of the tree scanner: SHA-256 (OpenSSL EVP) of the files whose fingerprint
// changed, spread over the cores, each worker with its own 1 MiB buffer and digest context
// reused from file to file. It also notices files that changed or vanished since the walk.

import BackupEngine
import CCrypto
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One file to hash, as the walk saw it.
struct HashJob: Sendable {
    /// The relative path (FileName-encoded), opened below the root's descriptor.
    var path: String
    var size: Int64
    var mtimeNanoseconds: Int64
    var inode: UInt64
    /// The file system's device number.
    var device: UInt64
}

/// What hashing one file found.
enum HashOutcome: Sendable, Equatable {
    /// Read to the end. `fingerprint` is nil when the file changed while it was read (its
    /// hash then describes bytes that may never have been on disk together, so it must be
    /// read again next time); `changedWhileReading` is set too when the size read differs
    /// from the walk's.
    ///
    /// The fingerprint is told by its mtime and inode only (its size and SHA-256 are the read
    /// ones): one outcome per file of a first scan waits here, 64 bytes each rather than 104.
    case hashed(digest: SHA256Digest, bytesRead: Int64, stamp: FileStamp?, changedWhileReading: Bool)
    /// It exists but could not be opened or read (errno).
    case unreadable(Int32)
    /// Another file than the walk saw is at its path now (another inode): a save that
    /// replaced it, or a folder on the way swapped for a link. It is not read.
    case replaced
    /// Gone since the walk, or no longer a regular file (replaced by a link, a folder...).
    case vanished(String)
}

/// The modification time and inode a file had while it was read whole.
struct FileStamp: Sendable, Equatable {
    var mtimeNanoseconds: Int64
    var inode: UInt64

    /// The fingerprint of the file read with `digest` and `size` while it had this stamp.
    func fingerprint(size: Int64, digest: SHA256Digest) -> Fingerprint {
        Fingerprint(size: size, mtimeNanoseconds: mtimeNanoseconds, inode: inode, digest: digest)
    }
}

/// Hashes files on several threads; results come back in the order of the jobs.
struct ParallelHasher: Sendable {
    static let bufferSize = 1 << 20

    /// How many threads read and hash at once.
    var workers: Int
    var fileSystem: ScanFileSystem
    /// The source root, which every job's path is relative to; owned by the caller.
    var rootFD: Int32
    /// Its `stop()` ends the hashing before the next file (the outcomes not reached are
    /// `.vanished`: a stopped scan throws them away).
    var counter: ScanCounter?

    /// Hashes every job, then hands each outcome to `body` in job order.
    func hash(_ jobs: [HashJob], _ body: (_ job: Int, HashOutcome) -> Void) {
        if jobs.isEmpty { return }
        let workerCount = max(1, min(workers, jobs.count))
        let fileSystem = fileSystem
        let rootFD = rootFD
        let shared = SharedQueue(count: jobs.count)
        let counter = counter
        let work = { @Sendable (_: Int) in
            let worker = HashWorker(fileSystem: fileSystem, rootFD: rootFD)
            // Workers pull the next job from a shared counter rather than taking fixed slices,
            // so one large file does not leave the other cores idle.
            while counter?.isStopped != true {
                let index = shared.next.wrappingAdd(1, ordering: .relaxed).oldValue
                if index >= jobs.count { break }
                shared.store(worker.hash(jobs[index]), at: index)
            }
        }
        if workerCount == 1 {
            work(0)
        } else {
            DispatchQueue.concurrentPerform(iterations: workerCount, execute: work)
        }
        shared.forEachOutcome(body)
    }
}

/// The job counter and the outcomes, shared by the workers of one `hash` call: each outcome
/// is written once, in its job's own slot (one array for every file of a first scan, never a
/// second copy of it).
///
/// `@unchecked Sendable` is safe here: the counter is atomic, so every index is handed to
/// exactly one worker, which alone writes that slot; `forEachOutcome` reads the slots only after
/// `concurrentPerform` has returned, which orders every worker's writes before it.
private final class SharedQueue: @unchecked Sendable {
    let next = Atomic<Int>(0)
    private let slots: UnsafeMutableBufferPointer<HashOutcome>

    init(count: Int) {
        slots = .allocate(capacity: count)
        slots.initialize(repeating: .vanished(""))
    }

    deinit {
        slots.deinitialize()
        slots.deallocate()
    }

    func store(_ outcome: HashOutcome, at index: Int) {
        slots[index] = outcome
    }

    func forEachOutcome(_ body: (Int, HashOutcome) -> Void) {
        for index in slots.indices { body(index, slots[index]) }
    }
}

/// One thread's reusable buffer and digest context.
private struct HashWorker: ~Copyable {
    let fileSystem: ScanFileSystem
    let rootFD: Int32
    private let buffer: UnsafeMutableRawBufferPointer
    private let context: OpaquePointer

    init(fileSystem: ScanFileSystem, rootFD: Int32) {
        self.fileSystem = fileSystem
        self.rootFD = rootFD
        buffer = .allocate(byteCount: ParallelHasher.bufferSize, alignment: 64)
        // EVP_MD_CTX_new only fails when malloc fails; nothing sensible can continue then.
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new failed: out of memory") }
        self.context = context
    }

    deinit {
        buffer.deallocate()
        EVP_MD_CTX_free(context)
    }

    func hash(_ job: HashJob) -> HashOutcome {
        let fd = FileName.withCString(job.path) { fileSystem.openFile(rootFD, $0, job.path) }
        if fd < 0 {
            switch -fd {
            // Deleted, or a folder on the way replaced, or the name is now a link (O_NOFOLLOW).
            case ENOENT, ENOTDIR, ELOOP: return .vanished("it was deleted or replaced by a link since the folder was listed")
            default: return .unreadable(-fd)
            }
        }
        defer { close(fd) }
        var before = stat()
        guard fstat(fd, &before) == 0 else { return .unreadable(errno) }
        guard before.st_mode & S_IFMT == S_IFREG else {
            return .vanished("it is no longer a regular file")
        }
        // The open resolves the whole relative path, and O_NOFOLLOW guards its last name only:
        // the same inode is what proves no folder on the way was swapped for a link since the
        // walk, so a file outside the tree is never read under a path inside it.
        guard UInt64(before.st_ino) == job.inode && UInt64(before.st_dev) == job.device else { return .replaced }

        EVP_DigestInit_ex(context, backup_evp_sha256(), nil)
        var total: Int64 = 0
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                return .unreadable(errno)
            }
            EVP_DigestUpdate(context, buffer.baseAddress, count)
            total += Int64(count)
        }
        var words = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        let finished = withUnsafeMutableBytes(of: &words) { raw -> SHA256Digest? in
            let bytes = raw.bindMemory(to: UInt8.self)
            var length: UInt32 = 0
            EVP_DigestFinal_ex(context, bytes.baseAddress, &length)
            return SHA256Digest(bytes: UnsafeRawBufferPointer(rebasing: raw[..<Int(length)]))
        }
        guard let digest = finished else { return .unreadable(EIO) }  // SHA-256 always gives 32 bytes

        var after = stat()
        let stable = fstat(fd, &after) == 0 && Int64(after.st_size) == total && Int64(before.st_size) == total
            && mtimeNanoseconds(after) == mtimeNanoseconds(before)
        // Only a change during the read itself means the hash may be torn; a file that was
        // stable while read describes itself exactly, even if it changed since the walk.
        let stamp = stable ? FileStamp(mtimeNanoseconds: mtimeNanoseconds(after), inode: UInt64(after.st_ino)) : nil
        return .hashed(digest: digest, bytesRead: total, stamp: stamp, changedWhileReading: !stable || total != job.size)
    }
}

/// The modification time of `status` in nanoseconds since the epoch.
@inline(__always)
func mtimeNanoseconds(_ status: stat) -> Int64 {
    clampedNanoseconds(status.st_mtim)
}
