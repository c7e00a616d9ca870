// CryptStorage: any provider, encrypted in rclone crypt's format (RcloneCrypt). Every path is
// encrypted segment by segment and every file's content chunk by chunk; sizes follow from
// sizes, so the engine's size comparisons and guards work unchanged.
//
// Three names stay plain at the remote's root, so that identity, the probe and the listing
// work without the passphrase: the folder remote's volume id (the base provider's own), the
// key file `.backup-encrypted` (a short text sealed under the keys: a wrong passphrase fails to
// open it before anything is written), and the versions folder `.backup-versions`, whose
// contents are encrypted below it (rclone reads them with a crypt remote rooted there). rclone
// skips the three as names it cannot decrypt.
//
// A folder remote takes an upload's sealed bytes straight into its own temporary file; the
// others get them through a private temporary file (they upload from a local file, S3 needs
// its hash before it sends). Downloads land in one and are decrypted into the caller's
// descriptor. Folders and links are never made on the remote (their names and
// targets would be plain): the marker, itself encrypted, carries them.

import BackupEngine
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class CryptStorage: RemoteStorage {
    public let base: any RemoteStorage
    public let crypt: RcloneCrypt
    /// Where temporary encrypted copies are made (a private folder of the state).
    public let scratch: String
    /// The key file was read and opened (it is never removed by the tool).
    private let keyFileSeen = Mutex(false)

    public init(base: any RemoteStorage, crypt: RcloneCrypt, scratch: String) {
        self.base = base
        self.crypt = crypt
        self.scratch = scratch
    }

    /// The plain file at the root that says the remote is encrypted and checks the passphrase.
    public static let keyFileName = ".backup-encrypted"
    /// What the key file holds, sealed.
    static let keyCheckText = Data("backup: a remote encrypted in rclone crypt's format (standard names)\n".utf8)

    /// The encrypted form of `path`; a path in the versions folder keeps that folder's name
    /// plain. A name too long encrypted is the local file's failure (it cannot be backed up
    /// here), so a sync reports it by name and goes on with the others.
    private func remotePath(_ path: String) throws -> String {
        let versions = VersionStore.folder + "/"
        do {
            if path == VersionStore.folder { return path }
            if path.hasPrefix(versions) { return versions + (try crypt.encryptPath(String(path.dropFirst(versions.count)))) }
            return try crypt.encryptPath(path)
        } catch where error.kind == .nameTooLong {
            throw LocalFileError(path: path, message: "\(path): \(error.message); rename it to back it up on this encrypted remote")
        } catch {
            throw CloudError(.transport, "\(path) cannot be written encrypted: \(error.message)")
        }
    }

    /// A remote path decrypted (the versions folder's own name is plain), or nil.
    private func plainPath(_ path: String) -> String? {
        let versions = VersionStore.folder + "/"
        if path.hasPrefix(versions) { return (try? crypt.decryptPath(String(path.dropFirst(versions.count)))).map { versions + $0 } }
        return try? crypt.decryptPath(path)
    }

    /// A listed file decrypted; one that is not of these keys is left alone (listed under its
    /// own spelling, as a file no request names).
    private func plain(_ file: RemoteFile) -> RemoteFile {
        guard !file.foreignSpelling, let path = plainPath(file.path), let size = RcloneCrypt.plainSize(file.size) else {
            return RemoteFile(path: file.path, size: max(file.size, 0), remoteId: file.remoteId, foreignSpelling: true)
        }
        return RemoteFile(path: path, size: size, remoteId: file.remoteId)
    }

    /// The base's identity, marked encrypted; nil while the key file is not written (so the
    /// engine calls `ensureIdentityKey()` before its first write, which writes it).
    public func identityKey() async throws -> String? {
        guard try await readKeyFile() else { return nil }
        return try await base.identityKey().map { $0 + " encrypted" }
    }

    public func ensureIdentityKey() async throws -> String? {
        _ = try await writeKeyFileIfMissing()
        return try await base.ensureIdentityKey().map { $0 + " encrypted" }
    }

    /// Writes the key file unless the remote holds it (and it opens); whether it wrote it.
    public func writeKeyFileIfMissing() async throws -> Bool {
        if try await readKeyFile() { return false }
        let sealed: Data
        do {
            sealed = try crypt.encrypt(Self.keyCheckText)
        } catch {
            throw CloudError(.transport, "the key file cannot be sealed: \(error.message)")
        }
        _ = try await base.writeBytes(Self.keyFileName, sealed)
        keyFileSeen.withLock { $0 = true }
        return true
    }

    /// Whether the remote holds the key file, and it opens under these keys. Throws
    /// `CryptError(.wrongKeyOrDamaged)` when it does not open: a wrong passphrase (or
    /// a second passphrase that differs).
    public func readKeyFile() async throws -> Bool {
        if keyFileSeen.withLock({ $0 }) { return true }
        let sealed: Data
        do {
            sealed = try await base.readBytes(Self.keyFileName)
        } catch let error as CloudError where error.kind == .notFound {
            return false
        }
        try openKeyFile(sealed)
        return true
    }

    /// Checks the key file's bytes (read from the base already) against these keys, as
    /// `readKeyFile()` does; once they open, the key file is not read again.
    public func openKeyFile(_ sealed: Data) throws(CryptError) {
        let opened: Data
        do {
            opened = try crypt.decrypt(sealed)
        } catch {
            throw CryptError(.wrongKeyOrDamaged, "the passphrase does not open this remote's key file \(Self.keyFileName)")
        }
        guard opened == Self.keyCheckText else {
            throw CryptError(.wrongKeyOrDamaged, "the key file \(Self.keyFileName) opens but does not hold what backup writes: it is damaged")
        }
        keyFileSeen.withLock { $0 = true }
    }

    public func list() async throws -> RemoteFileList {
        let listed = try await base.list()
        var files = RemoteFileList()
        files.reserveCapacity(listed.count)
        for index in listed.indices {
            if !listed.foreignSpelling(at: index), listed.comparePath(at: index, with: Self.keyFileName) == 0 { continue }
            files.append(plain(listed[index]))
        }
        return files
    }

    public func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        let encrypted: Data
        do {
            encrypted = try crypt.encrypt(data)
        } catch {
            throw CloudError(.transport, "\(path) cannot be encrypted: \(error.message)")
        }
        let file = try await base.writeBytes(try remotePath(path), encrypted)
        return RemoteFile(path: path, size: Int64(data.count), remoteId: file.remoteId)
    }

    public func writeFile(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> RemoteFile {
        let (source, size, modified) = try openLocalSource(localPath)
        defer { close(source) }
        let remote = try remotePath(path)
        // Seals the source into `fd`; the copy carries the source's time (a folder or WebDAV
        // remote gives it to the file, rclone to the file it decrypts). A failed write is the
        // destination's (`writeFailure`), any other failure the local file's.
        let crypt = crypt
        func seal(into fd: Int32, writeFailure: (Int32) -> any Error) throws {
            do throws(CryptError) {
                _ = try crypt.encryptFile(from: source, to: fd)
            } catch {
                if let code = error.writeErrno { throw writeFailure(code) }
                throw LocalFileError(path: localPath, message: "cannot read the local file \(localPath) to encrypt it: \(error.message)")
            }
            var times = [modified, modified]
            _ = futimens(fd, &times)
        }
        // A folder remote takes the sealed bytes straight into its own temporary file.
        if let folder = base as? FolderStorage {
            let file = try await folder.writeFilled(remote) { fd, displayPath in
                try seal(into: fd) { SystemCallFailure(code: $0, operation: "writing", path: displayPath) }
            }
            onBytes(size)
            return RemoteFile(path: path, size: size, remoteId: file.remoteId)
        }
        let (temporary, fd) = try makeTemporary()
        defer {
            close(fd)
            unlink(temporary)
        }
        try seal(into: fd) { localFileError(errno: $0, operation: "write", path: temporary) }
        let file = try await base.writeFile(remote, from: temporary) { sent in
            onBytes(min(size, max(0, sent - Int64(RcloneCrypt.headerSize)) * Int64(RcloneCrypt.chunkSize) / Int64(RcloneCrypt.chunkSize + RcloneCrypt.tagSize)))
        }
        return RemoteFile(path: path, size: size, remoteId: file.remoteId)
    }

    public func readBytes(_ path: String) async throws -> Data {
        let data = try await base.readBytes(try remotePath(path))
        do {
            return try crypt.decrypt(data)
        } catch {
            throw CloudError(.transport, "\(path) does not decrypt: \(error.message)")
        }
    }

    public func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        let (temporary, encrypted) = try makeTemporary()
        defer {
            close(encrypted)
            unlink(temporary)
        }
        try await base.downloadFile(try remotePath(path), into: encrypted, expectedSize: expectedSize.map(RcloneCrypt.encryptedSize), onBytes: onBytes)
        guard ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) == 0 else {
            throw localFileError(errno: errno, operation: "write", path: localCopyName(path))
        }
        do {
            _ = try crypt.decryptFile(from: encrypted, to: fd)
        } catch {
            if let code = error.writeErrno { throw localFileError(errno: code, operation: "write", path: localCopyName(path)) }
            // The key file opened with these keys, so a chunk that does not open was changed.
            throw UndecryptableDownload(path: path, reason: error.message)
        }
    }

    public func delete(_ path: String) async throws { try await base.delete(try remotePath(path)) }
    public func prefetch(_ paths: [String]) async { await base.prefetch(paths.compactMap { try? remotePath($0) }) }
    public func flush() async throws { try await base.flush() }
    public func isSameVersion(recorded: String, listed: RemoteFile) -> Bool { base.isSameVersion(recorded: recorded, listed: listed) }
    public func sweepTemporaries() async throws -> Int { try await base.sweepTemporaries() }

    public func applyMetadata(_ path: String, _ metadata: EntryMetadata) async throws -> RemoteFile? {
        try await base.applyMetadata(try remotePath(path), metadata).map { RemoteFile(path: path, size: RcloneCrypt.plainSize($0.size) ?? 0, remoteId: $0.remoteId) }
    }

    // Folders and links stay in the (encrypted) marker: their names and targets are not written plain.
    public func removeTreeEntries(_ entries: [TreeEntry]) async {}
    public func makeTreeEntries(_ entries: [TreeEntry]) async -> [String] { [] }

    public func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool {
        try await base.keepVersion(try remotePath(path), as: try remotePath(destination), size: RcloneCrypt.encryptedSize(size), copy: copy)
    }

    public func listNames(in folder: String) async throws -> [String] {
        try await base.listNames(in: try remotePath(folder)).compactMap { try? crypt.decryptSegment($0) }
    }

    public func listFolder(_ folder: String) async throws -> RemoteFileList {
        let listed = try await base.listFolder(try remotePath(folder))
        var files = RemoteFileList()
        for index in listed.indices {
            let file = plain(listed[index])
            if !file.foreignSpelling { files.append(file) }
        }
        return files
    }

    public func deleteFolder(_ folder: String) async throws { try await base.deleteFolder(try remotePath(folder)) }

    /// A new private temporary file in `scratch`, open for reading and writing.
    private func makeTemporary() throws -> (path: String, fd: Int32) {
        for _ in 0..<8 {
            let path = scratch + "/.backup-crypt." + String(UInt64.random(in: .min ... .max), radix: 16)
            let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd >= 0 { return (path, fd) }
            if errno != EEXIST { throw localFileError(errno: errno, operation: "write", path: path) }
        }
        throw LocalFileError(path: scratch, message: "cannot make a temporary file in \(scratch)")
    }
}
