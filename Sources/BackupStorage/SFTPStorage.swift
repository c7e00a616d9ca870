// SFTPStorage: a folder on an SSH server (a NAS, a Linux box), over SFTP version 3 with
// OpenSSH's extensions. Like the folder remote it keeps a plain mirror with modes, times and
// links; a write fills `.backup-tmp.<random>` beside its target and is put in place by
// posix-rename@openssh.com, so a path holds its old file or the whole new one. The marker
// (every `writeBytes`) is fsynced on the server before its rename: the run's commit point.
// The other files are as durable as the server's own filesystem makes a closed file (OpenSSH
// cannot sync a file after it is closed); a server that loses power may lose the last seconds
// of uploads, which the next run finds missing from the listing and uploads again.

import BackupEngine
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// An SSH server and the folder on it that backups go to.
public struct SFTPEndpoint: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// The user from the URL, if any.
    public var user: String?
    /// The folder's components; relative to the login folder when `inHome` (`sftp://host/~/x`).
    public var folder: [String]
    public var inHome: Bool

    public init(host: String, port: Int = 22, user: String? = nil, folder: [String] = [], inHome: Bool = false) {
        self.host = host
        self.port = port
        self.user = user
        self.folder = folder
        self.inHome = inHome
    }

    /// `host` or `host:port`, as messages name the server.
    public var server: String { port == 22 ? host : "\(host):\(port)" }

    public var displayURL: String {
        "sftp://" + (user.map { "\($0)@" } ?? "") + server + "/" + ((inHome ? ["~"] : []) + folder).joined(separator: "/")
    }

    /// The folder as the server names it: absolute, or relative to the login folder.
    var rootBytes: [UInt8] {
        let joined = folder.map(FileName.bytes(of:)).joined(separator: [UInt8(ascii: "/")])
        if inHome { return folder.isEmpty ? [UInt8(ascii: ".")] : Array(joined) }
        return [UInt8(ascii: "/")] + joined
    }

    var rootForMessages: String { ((inHome ? "~/" : "/") + folder.joined(separator: "/")) }
}

/// A remote that is a folder on an SSH server.
public struct SFTPStorage: RemoteStorage {
    public static let temporaryFilePrefix = ".backup-tmp."

    public let endpoint: SFTPEndpoint
    private let pool: SFTPPool
    /// How old (by the server's mtime) a temporary must be before a sync's sweep removes it.
    public var staleTemporaryAge: Double = 3600

    public init(endpoint: SFTPEndpoint, credentials: SSHCredentials, knownHosts: KnownHosts, connections: Int, timeoutSeconds: Int = 30) {
        self.endpoint = endpoint
        let (host, port) = (endpoint.host, endpoint.port)
        pool = SFTPPool(limit: max(1, connections)) {
            try SFTPConnection(host: host, port: port, credentials: credentials, hostKeys: knownHosts, timeoutSeconds: timeoutSeconds)
        }
    }

    // MARK: Paths

    static func components(of path: String) throws -> [String] {
        let parts: [String]
        do {
            parts = try RelativePath.components(of: path)
        } catch {
            throw CloudError(.transport, "the remote path \(String(reflecting: path)) is not valid: \(error.reason)")
        }
        if let name = parts.last, name.hasPrefix(temporaryFilePrefix) {
            throw CloudError(.transport, "the remote path \(String(reflecting: path)) is not valid: the name is reserved for temporary files")
        }
        return parts
    }

    private func bytes<C: Collection<String>>(_ parts: C) -> [UInt8] {
        var out = endpoint.rootBytes
        for part in parts {
            if out.last != UInt8(ascii: "/") { out.append(UInt8(ascii: "/")) }
            out += FileName.bytes(of: part)
        }
        return out
    }

    private func shown<C: Collection<String>>(_ parts: C) -> String {
        "\(endpoint.server):" + ([endpoint.rootForMessages] + parts).joined(separator: "/").replacingOccurrences(of: "//", with: "/")
    }

    private static func temporaryName() -> String {
        temporaryFilePrefix + String(UInt64.random(in: .min ... .max), radix: 16)
    }

    static func remoteId(_ attributes: SFTPAttributes) -> String? {
        attributes.mtime.map { FolderStorage.remoteId(mtimeNanoseconds: Int64($0) * 1_000_000_000) }
    }

    // MARK: Failures

    /// `error` as the contract's kinds; `writing` names a folder whose free space tells a
    /// full disk from another failure.
    private func mapped(_ error: Error, _ operation: String, _ parts: [String], on connection: SFTPConnection?, writing: [UInt8]? = nil) -> Error {
        let where_ = shown(parts)
        func full(_ free: UInt64) -> CloudError {
            CloudError(.storageFull, "the server \(endpoint.server) is out of space while \(operation) \(where_) "
                + "(\(free) bytes free); free some space on it")
        }
        if let outOfSpace = error as? OutOfSpace { return full(outOfSpace.free) }
        guard let status = error as? SFTPStatus else { return error }
        if status.isNoSuchFile { return CloudError(.notFound, "\(where_) does not exist on the server") }
        if let writing, let connection, status.code == SFTP.failure, let free = connection.freeBytes(writing), free < Self.fullBelow {
            return full(free)
        }
        return CloudError(.transport, "\(operation) \(where_) failed: \(status.summary)")
    }

    /// Runs `body` on a connection, mapping its failures. A reused connection found broken (the
    /// server dropped it while idle) is replaced and the call tried once more (every call here
    /// is safe to repeat); a failure of that second try is thrown as itself too.
    private func run<T: Sendable>(
        _ operation: String, _ parts: [String], writing: [UInt8]? = nil,
        _ body: @escaping @Sendable (SFTPConnection) throws -> T
    ) async throws -> T {
        let attempt: @Sendable (SFTPConnection) throws -> T = { connection in
            do {
                return try body(connection)
            } catch {
                throw mapped(error, operation, parts, on: connection, writing: writing)
            }
        }
        do {
            return try await pool.run(attempt)
        } catch is SFTPPool.Broken {
            do {
                return try await pool.run(attempt)
            } catch let again as SFTPPool.Broken {
                throw again.error
            }
        }
    }

    /// Fails NotAvailable when the remote folder itself is missing.
    private func checkRoot(_ connection: SFTPConnection) throws {
        do {
            let attributes = try connection.attributes(endpoint.rootBytes, followLinks: true)
            guard attributes.isFolder else {
                throw CloudError(.notAvailable, "\(shown([])) is not a folder on the server; give the remote a folder's path")
            }
        } catch let status as SFTPStatus where status.isNoSuchFile {
            throw CloudError(.notAvailable, "the remote folder \(shown([])) does not exist; create it on the server "
                + "(ssh \(endpoint.server) mkdir -p \(endpoint.rootForMessages)) or fix the remote's path")
        }
    }

    /// Creates the remote folder itself, the last folder of the URL's path, when it is missing;
    /// its parent must exist. Only `backup init` calls it (a sync never creates the remote
    /// folder). Returns whether it was created.
    public func createRemoteFolder() async throws -> Bool {
        try await run("creating", []) { connection in
            if let found = try connection.attributesIfPresent(endpoint.rootBytes) {
                guard found.isFolder else {
                    throw CloudError(.notAvailable, "\(shown([])) is not a folder on the server; give the remote a folder's path")
                }
                return false
            }
            var parent = endpoint
            parent.folder.removeLast()
            guard !endpoint.folder.isEmpty, try connection.attributesIfPresent(parent.rootBytes)?.isFolder == true else {
                throw CloudError(.notAvailable, "the parent folder of \(shown([])) does not exist on the server; create it "
                    + "(ssh \(endpoint.server) mkdir -p \(parent.rootForMessages)) or fix the remote's path")
            }
            try connection.makeFolder(endpoint.rootBytes)
            return true
        }
    }

    /// Makes the folders of `parts` below the root that are missing (the root never).
    private func makeFolders(_ parts: ArraySlice<String>, on connection: SFTPConnection) throws {
        guard !parts.isEmpty else { return }
        // Most writes go into a folder that is there: one stat, then the walk only when not.
        if let found = try connection.attributesIfPresent(bytes(parts)), found.isFolder { return }
        for depth in 1...parts.count {
            let prefix = parts.prefix(depth)
            if let found = try connection.attributesIfPresent(bytes(prefix)) {
                guard found.isFolder else {
                    throw CloudError(.transport, "\(shown(prefix)) is in the way on the server: it is not a folder")
                }
                continue
            }
            do {
                try connection.makeFolder(bytes(prefix))
            } catch let status as SFTPStatus {
                // Made meanwhile by another upload into the same folder.
                guard let found = try connection.attributesIfPresent(bytes(prefix)), found.isFolder else { throw status }
            }
        }
    }

    /// Fills a temporary beside `parts` with `fill`, sets `attributes` on it, fsyncs it when
    /// `sync`, and renames it over `parts`; returns the file's attributes as written.
    private func place(
        _ parts: [String], on connection: SFTPConnection, attributes: SFTPAttributes, sync: Bool,
        fill: (SFTPConnection, [UInt8]) throws -> Int64
    ) throws -> (Int64, SFTPAttributes) {
        try checkRoot(connection)
        try makeFolders(parts.dropLast()[...], on: connection)
        let temporary = bytes(parts.dropLast() + [Self.temporaryName()])
        let handle = try connection.open(
            temporary, flags: SFTP.openWrite | SFTP.openCreate | SFTP.openExclusive | SFTP.openTruncate,
            attributes: SFTPAttributes(permissions: 0o600))
        do {
            let written = try fill(connection, handle)
            if attributes != SFTPAttributes() { try connection.setAttributes(handle: handle, attributes) }
            if sync { try connection.fsync(handle) }
            let final = try connection.handleAttributes(handle)
            try connection.closeHandle(handle)
            guard connection.hasPosixRename else {
                throw CloudError(.transport, "\(endpoint.server) lacks posix-rename@openssh.com, which replaces a file in one "
                    + "step; use an OpenSSH server (or one that offers the extension)")
            }
            try connection.posixRename(temporary, bytes(parts))
            return (written, final)
        } catch {
            connection.closeQuietly(handle)
            // The free space is read while the temporary still holds what filled the disk.
            let free = (error as? SFTPStatus)?.code == SFTP.failure ? connection.freeBytes(bytes(parts.dropLast())) : nil
            if !connection.broken { try? connection.remove(temporary) }
            if let free, free < Self.fullBelow { throw OutOfSpace(free: free) }
            throw error
        }
    }

    /// Less free space than this after a failed write means the disk is full.
    private static let fullBelow: UInt64 = 1 << 20

    /// A write that failed on a full disk (`free` bytes were left).
    private struct OutOfSpace: Error {
        let free: UInt64
    }

    // MARK: RemoteStorage

    public func identityKey() async throws -> String? {
        try await run("reading", []) { connection in
            try checkRoot(connection)
            let real = try connection.realPath(endpoint.rootBytes)
            return "sftp:\(connection.hostKeyFingerprint):" + FileName.string(fromBytes: real)
        }
    }

    public func list() async throws -> RemoteFileList {
        try await run("listing", []) { connection in
            try checkRoot(connection)
            return try walk([], on: connection, skipVersions: true)
        }
    }

    /// The longest path below the root a listing walks into (Linux's PATH_MAX).
    static let longestPath = 4096

    /// Every regular file below `start` (paths from the root), temporaries left out; links
    /// are neither listed nor followed.
    private func walk(_ start: [String], on connection: SFTPConnection, skipVersions: Bool) throws -> RemoteFileList {
        var files = RemoteFileList()
        var folders: [[String]] = [start]
        while let folder = folders.popLast() {
            let path = bytes(folder)
            // No path this machine can hold is longer (PATH_MAX): a server whose folders go on
            // deeper is refused, rather than walked forever.
            guard path.count <= Self.longestPath else {
                throw CloudError(.transport, "\(shown(Array(folder.prefix(8))))/…: the listing goes deeper than \(Self.longestPath) bytes "
                    + "of path, and no file that deep can be restored; the listing is refused")
            }
            let entries: [(name: [UInt8], attributes: SFTPAttributes)]
            do {
                entries = try connection.folderEntries(path)
            } catch let status as SFTPStatus where status.isNoSuchFile && !folder.isEmpty {
                continue  // removed while listed
            }
            let prefix = folder.isEmpty ? "" : folder.joined(separator: "/") + "/"
            for entry in entries {
                let name = FileName.string(fromBytes: entry.name)
                if entry.attributes.isFolder {
                    if skipVersions && folder.isEmpty && name == VersionStore.folder { continue }
                    folders.append(folder + [name])
                } else if entry.attributes.isRegularFile, !name.hasPrefix(Self.temporaryFilePrefix) {
                    files.append(RemoteFile(path: prefix + name, size: Int64(entry.attributes.size ?? 0), remoteId: Self.remoteId(entry.attributes)))
                }
            }
        }
        return files
    }

    public func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        let parts = try Self.components(of: path)
        let folderBytes = bytes(parts.dropLast())
        return try await run("writing", parts, writing: folderBytes) { connection in
            let (size, final) = try place(parts, on: connection, attributes: SFTPAttributes(), sync: true) { connection, handle in
                try data.withUnsafeBytes { source in
                    try connection.writePipelined(handle, onBytes: { _ in }) { offset, buffer in
                        let count = min(buffer.count, source.count - Int(offset))
                        guard count > 0 else { return 0 }
                        buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[Int(offset)..<Int(offset) + count]))
                        return count
                    }
                }
            }
            return RemoteFile(path: path, size: size, remoteId: Self.remoteId(final))
        }
    }

    public func writeFile(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> RemoteFile {
        let parts = try Self.components(of: path)
        let fd = open(localPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw LocalFileError(errno: errno, reading: localPath) }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw LocalFileError(errno: errno, reading: localPath) }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw LocalFileError(path: localPath, message: "cannot read the local file \(localPath): it is not a regular file")
        }
        let mtime = UInt32(clamping: max(0, status.st_mtim.tv_sec))
        let attributes = SFTPAttributes(permissions: UInt32(status.st_mode & 0o7777), atime: mtime, mtime: mtime)
        let folderBytes = bytes(parts.dropLast())
        return try await run("writing", parts, writing: folderBytes) { connection in
            let (size, final) = try place(parts, on: connection, attributes: attributes, sync: false) { connection, handle in
                try connection.writePipelined(handle, onBytes: onBytes) { offset, buffer in
                    while true {
                        let count = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
                        if count >= 0 { return count }
                        if errno != EINTR { throw LocalFileError(errno: errno, reading: localPath) }
                    }
                }
            }
            return RemoteFile(path: path, size: size, remoteId: Self.remoteId(final))
        }
    }

    public func readBytes(_ path: String) async throws -> Data {
        let parts = try Self.components(of: path)
        return try await run("reading", parts) { connection in
            let handle = try connection.open(bytes(parts), flags: SFTP.openRead)
            defer { connection.closeQuietly(handle) }
            var data = Data()
            _ = try connection.readPipelined(handle, limit: nil) { _, piece in data.append(contentsOf: piece) }
            return data
        }
    }

    public func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        let parts = try Self.components(of: path)
        try await run("downloading", parts) { connection in
            guard ftruncate(fd, 0) == 0 else { throw LocalFileError(path: path, message: "cannot write the download of \(path): \(String(cString: strerror(errno)))") }
            let handle = try connection.open(bytes(parts), flags: SFTP.openRead)
            defer { connection.closeQuietly(handle) }
            let received = try connection.readPipelined(handle, limit: expectedSize) { offset, piece in
                try piece.withUnsafeBytes { raw in
                    guard let base = raw.baseAddress else { return }
                    var done = 0
                    while done < raw.count {
                        let count = pwrite(fd, base + done, raw.count - done, off_t(offset) + off_t(done))
                        if count < 0 && errno == EINTR { continue }
                        guard count > 0 else {
                            throw LocalFileError(path: path, message: "cannot write the download of \(path): \(String(cString: strerror(errno)))")
                        }
                        done += count
                    }
                }
                onBytes(offset + Int64(piece.count))
            }
            if let expectedSize, received != expectedSize {
                throw DownloadSizeMismatch(path: path, expected: expectedSize, received: min(received, expectedSize + 1), longer: received > expectedSize)
            }
        }
    }

    public func delete(_ path: String) async throws {
        let parts = try Self.components(of: path)
        try await run("deleting", parts) { connection in
            do {
                try connection.remove(bytes(parts))
            } catch let status as SFTPStatus where status.isNoSuchFile {
                return
            }
        }
    }

    public func sweepTemporaries() async throws -> Int {
        let age = staleTemporaryAge
        return try await run("sweeping", []) { connection in
            try checkRoot(connection)
            let now = Date().timeIntervalSince1970
            var swept = 0
            var folders: [[String]] = [[]]
            while let folder = folders.popLast() {
                guard let entries = try? connection.folderEntries(bytes(folder)) else { continue }
                for entry in entries {
                    let name = FileName.string(fromBytes: entry.name)
                    if entry.attributes.isFolder {
                        folders.append(folder + [name])
                    } else if name.hasPrefix(Self.temporaryFilePrefix), let mtime = entry.attributes.mtime, now - Double(mtime) >= age {
                        if (try? connection.remove(bytes(folder + [name]))) != nil { swept += 1 }
                    }
                }
            }
            return swept
        }
    }

    public func applyMetadata(_ path: String, _ metadata: EntryMetadata) async throws -> RemoteFile? {
        let parts = try Self.components(of: path)
        let seconds = UInt32(clamping: max(0, metadata.mtimeNanoseconds / 1_000_000_000))
        return try await run("setting the mode and times of", parts) { connection in
            try connection.setAttributes(bytes(parts), SFTPAttributes(permissions: metadata.mode & 0o7777, atime: seconds, mtime: seconds))
            let now = try connection.attributes(bytes(parts))
            return RemoteFile(path: path, size: Int64(now.size ?? 0), remoteId: Self.remoteId(now))
        }
    }

    public func removeTreeEntries(_ entries: [TreeEntry]) async {
        _ = try? await run("removing", []) { connection in
            for entry in entries.reversed() {
                guard let parts = try? Self.components(of: entry.path),
                      let found = try? connection.attributesIfPresent(bytes(parts))
                else { continue }
                switch entry.kind {
                case .symlink where found.isSymlink: try? connection.remove(bytes(parts))
                case .folder where found.isFolder: try? connection.removeFolder(bytes(parts))  // only when empty
                default: break
                }
            }
        }
    }

    public func makeTreeEntries(_ entries: [TreeEntry]) async -> [String] {
        let result = try? await run("making folders and links on", []) { connection -> [String] in
            var failed: [String] = []
            for entry in entries {
                guard let parts = try? Self.components(of: entry.path) else { continue }
                switch entry.kind {
                case .folder:
                    if (try? makeFolders(parts[...], on: connection)) == nil { failed.append(shown(parts)) }
                case .symlink(let target):
                    guard (try? makeFolders(parts.dropLast()[...], on: connection)) != nil,
                          placeLink(FileName.bytes(of: target), at: parts, on: connection)
                    else {
                        failed.append(shown(parts))
                        continue
                    }
                    // The link's own time, where the server can set it (OpenSSH's lsetstat).
                    let seconds = UInt32(clamping: max(0, entry.metadata.mtimeNanoseconds / 1_000_000_000))
                    _ = try? connection.setLinkTimes(bytes(parts), seconds: seconds)
                case .file, .hardLink:
                    continue
                }
            }
            // The folders' modes and times last, deepest first: making what is inside changes them.
            for entry in entries.reversed() where entry.kind == .folder {
                guard let parts = try? Self.components(of: entry.path) else { continue }
                let seconds = UInt32(clamping: max(0, entry.metadata.mtimeNanoseconds / 1_000_000_000))
                if (try? connection.setAttributes(bytes(parts), SFTPAttributes(permissions: entry.metadata.mode & 0o7777, atime: seconds, mtime: seconds))) == nil {
                    failed.append(shown(parts))
                }
            }
            return failed
        }
        guard let failed = result else { return ["cannot reach \(endpoint.server) to make the backup's folders and links"] }
        guard let first = failed.first else { return [] }
        return ["\(failed.count) folder(s) or link(s) could not be made on \(endpoint.server) as in the source (a file in the way, "
            + "or a server that refuses links): the marker records them, and a restore makes them; first: \(first)"]
    }

    /// The link `parts` → `target`, replacing only a link (retargeted); true when it is there as wanted.
    private func placeLink(_ target: [UInt8], at parts: [String], on connection: SFTPConnection) -> Bool {
        let path = bytes(parts)
        let found: SFTPAttributes?
        do {
            found = try connection.attributesIfPresent(path)
        } catch {
            return false
        }
        if let found {
            guard found.isSymlink else { return false }
            if (try? connection.readLink(path)) == target { return true }
            let temporary = bytes(parts.dropLast() + [Self.temporaryName()])
            guard (try? connection.symlink(target: target, at: temporary)) != nil else { return false }
            guard (try? connection.posixRename(temporary, path)) != nil else {
                try? connection.remove(temporary)
                return false
            }
            return true
        }
        return (try? connection.symlink(target: target, at: path)) != nil
    }

    // MARK: Versions

    public func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool {
        let parts = try Self.components(of: path)
        let target = try Self.components(of: destination)
        return try await run("keeping a version of", parts, writing: bytes(target.dropLast())) { connection in
            guard try connection.attributesIfPresent(bytes(parts)) != nil else {
                throw CloudError(.notFound, "\(shown(parts)) does not exist on the server")
            }
            try makeFolders(target.dropLast()[...], on: connection)
            if copy {
                guard connection.hasHardlink else { throw versionsUnsupported("copying \(path): \(endpoint.server) lacks hardlink@openssh.com") }
                try connection.hardlink(bytes(parts), bytes(target))
                return true
            }
            try connection.renameRefusingExisting(bytes(parts), bytes(target))
            return false
        }
    }

    public func listNames(in folder: String) async throws -> [String] {
        let parts = try Self.components(of: folder)
        return try await run("listing", parts) { connection in
            do {
                return try connection.folderEntries(bytes(parts)).map { FileName.string(fromBytes: $0.name) }
                    .filter { !$0.hasPrefix(Self.temporaryFilePrefix) }
            } catch let status as SFTPStatus where status.isNoSuchFile {
                return []
            }
        }
    }

    public func listFolder(_ folder: String) async throws -> RemoteFileList {
        let parts = try Self.components(of: folder)
        return try await run("listing", parts) { connection in
            guard try connection.attributesIfPresent(bytes(parts))?.isFolder == true else { return RemoteFileList() }
            return try walk(parts, on: connection, skipVersions: false)
        }
    }

    public func deleteFolder(_ folder: String) async throws {
        let parts = try Self.components(of: folder)
        try await run("removing", parts) { connection in
            guard let found = try connection.attributesIfPresent(bytes(parts)) else { return }
            guard found.isFolder else { return try connection.remove(bytes(parts)) }
            var pending: [[String]] = [parts]
            var folders: [[String]] = []
            while let current = pending.popLast() {
                folders.append(current)
                for entry in try connection.folderEntries(bytes(current)) {
                    let child = current + [FileName.string(fromBytes: entry.name)]
                    if entry.attributes.isFolder { pending.append(child) } else { try connection.remove(bytes(child)) }
                }
            }
            for current in folders.reversed() { try connection.removeFolder(bytes(current)) }
        }
    }
}

/// Up to `limit` SSH connections, each used by one call at a time, on threads of their own
/// (libssh2 blocks; Swift's cooperative threads must not).
final class SFTPPool: Sendable {
    /// A call that failed because its connection broke (it was dropped); the call may be
    /// tried again on a new one.
    struct Broken: Error {
        let error: Error
    }

    /// Carries a connection between threads. `@unchecked Sendable`: the pool hands each
    /// connection to one call at a time, and a call uses it only on the thread it runs on, so
    /// no two threads ever touch one.
    private final class Box: @unchecked Sendable {
        let connection: SFTPConnection
        init(_ connection: SFTPConnection) { self.connection = connection }
    }

    private struct State {
        var idle: [Box] = []
        var open = 0
        var waiting: [CheckedContinuation<Box?, Never>] = []
    }

    private let state = Mutex(State())
    private let limit: Int
    private let connect: @Sendable () throws -> SFTPConnection
    private let queue = DispatchQueue(label: "backup-sftp", attributes: .concurrent)

    init(limit: Int, connect: @escaping @Sendable () throws -> SFTPConnection) {
        self.limit = limit
        self.connect = connect
    }

    /// An idle connection, or nil when the caller may open a new one (a slot is reserved).
    private func acquire() async -> Box? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Box?, Never>) in
            let ready: Box?? = state.withLock { state in
                if let box = state.idle.popLast() { return .some(box) }
                if state.open < limit {
                    state.open += 1
                    return .some(nil)
                }
                state.waiting.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Gives the connection back, or its slot when it broke (nil).
    private func release(_ box: Box?) {
        let next: CheckedContinuation<Box?, Never>? = state.withLock { state in
            if !state.waiting.isEmpty { return state.waiting.removeFirst() }
            if let box { state.idle.append(box) } else { state.open -= 1 }
            return nil
        }
        next?.resume(returning: box)
    }

    func run<T: Sendable>(_ body: @escaping @Sendable (SFTPConnection) throws -> T) async throws -> T {
        let box = await acquire()
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            queue.async { [self] in
                let current: Box
                do {
                    current = try box ?? Box(connect())
                } catch {
                    release(nil)
                    continuation.resume(throwing: error)
                    return
                }
                do {
                    let result = try body(current.connection)
                    release(current.connection.broken ? nil : current)
                    continuation.resume(returning: result)
                } catch {
                    let broken = current.connection.broken
                    release(broken ? nil : current)
                    continuation.resume(throwing: broken && box != nil ? Broken(error: error) : error)
                }
            }
        }
    }
}
