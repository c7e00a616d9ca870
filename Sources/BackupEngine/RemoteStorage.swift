// The provider abstraction. Every provider (a folder, WebDAV, S3) implements this protocol
// and passes the same storage contract suite. Paths are relative, "/"-separated, and never
// start with "/" or contain "." or ".." components.

import Foundation

/// One file as the remote lists it.
public struct RemoteFile: Sendable, Equatable, Hashable {
    /// The file's relative path on the remote.
    public var path: String
    /// The size in bytes, as the remote reports it.
    public var size: Int64
    /// A provider-specific id of this version of the file, or nil where the provider has none.
    public var remoteId: String?
    /// The remote lists the file under a spelling this program never writes (on WebDAV and
    /// S3: a lone `‛`, a raw control character; see WireName), so no request can name it:
    /// `path` is then the listed spelling, for messages only. A sync leaves such a file
    /// alone; a restore refuses it by name.
    public var foreignSpelling: Bool

    public init(path: String, size: Int64, remoteId: String? = nil, foreignSpelling: Bool = false) {
        self.path = path
        self.size = size
        self.remoteId = remoteId
        self.foreignSpelling = foreignSpelling
    }
}

/// A remote that backups are written to and restored from.
///
/// What every implementation promises (checked by the storage contract suite):
/// - `list()` returns every file the remote holds, recursively, internal files excluded.
/// - A write either lands whole under its real name or leaves nothing there: a write that
///   fails midway never leaves a partial file under the path.
/// - `delete` of an absent path succeeds.
/// - `readBytes`/`downloadFile` of an absent path throw `CloudError` of kind `.notFound`.
/// - Every failure is a `CloudError`, mapped as in DESIGN.md's error table.
public protocol RemoteStorage: Sendable {
    /// A stable id of the account or volume behind this remote, or nil when the provider
    /// cannot tell (the engine then falls back to the marker's remote id, rules 3 and 9).
    /// It never writes: a provider that keeps its id on the remote answers nil until
    /// `ensureIdentityKey()` created it.
    func identityKey() async throws -> String?
    /// `identityKey()`, creating the id on the remote first where the provider keeps one
    /// there (a folder's volume id). The engine calls it once a run is going to write, after
    /// every guard passed; probes, previews and refused runs never do.
    func ensureIdentityKey() async throws -> String?
    /// Every file on the remote.
    func list() async throws -> RemoteFileList
    /// Writes `data` to `path`, replacing what was there.
    func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile
    /// Uploads the local file at `localPath` to `path`, replacing what was there. `onBytes`
    /// gets the bytes sent so far in this attempt, as they go (a retry starts again from 0).
    func writeFile(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> RemoteFile
    /// `writeFile`, also telling the SHA-256 of the bytes it sent and the local file's size,
    /// modification time and inode as it was opened: for a file whose hash is to come
    /// (`SyncEntry.hashToCome`). A provider that hashes the bytes as it sends them reads the
    /// file once; the default reads it to hash it, then sends it.
    func writeFileHashing(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> SentFile
    /// Reads the whole file at `path`.
    func readBytes(_ path: String) async throws -> Data
    /// Writes the body of the file at `path` into `fd`, from offset 0.
    ///
    /// `fd` is an open, empty regular file that the caller made (restore opens it inside its
    /// target with `openat`/`O_NOFOLLOW`/`O_EXCL`) and closes; a provider never opens a local
    /// path for a download. A retry truncates `fd` and starts again. With an `expectedSize`
    /// (the size the listing gave), no more than that many bytes are ever written: a body that
    /// is longer (stopped at the first byte too many) or shorter throws `DownloadSizeMismatch`.
    /// `onBytes` gets the bytes written so far in this attempt, as they arrive.
    func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws
    /// Deletes the file at `path`; an absent path is not an error.
    func delete(_ path: String) async throws
    /// A hint that these paths will be read soon. Never throws.
    func prefetch(_ paths: [String]) async
    /// Makes every completed write durable on the remote. The engine calls it once before
    /// the marker, which is the commit point of a run. Providers whose writes are durable
    /// when they return need not implement it.
    func flush() async throws
    /// Whether `recorded`, the remote id the state holds for `listed.path`, names the version
    /// the listing shows although the two differ: true only where a provider changed the form
    /// of its ids and can read the older form (rule 2 then keeps the state's hash).
    func isSameVersion(recorded: String, listed: RemoteFile) -> Bool
    /// Removes what stopped runs left behind (temporary files, incomplete multipart uploads)
    /// and returns how many it removed. The engine calls it only in a run that may write: after
    /// the gate, the hold check and the guards, before the run's first write. A provider never
    /// removes what a live writer elsewhere may still be using (an age threshold).
    func sweepTemporaries() async throws -> Int
    /// Sets `metadata` (mode, times, owner where permitted) on the remote's copy of `path`,
    /// whose content is unchanged, and returns the file as listed now (its id may change), or
    /// nil where the provider keeps no metadata on its files (WebDAV, S3: the marker is then
    /// the only record). A failure is never fatal: the marker carries the metadata anyway.
    func applyMetadata(_ path: String, _ metadata: EntryMetadata) async throws -> RemoteFile?
    /// Removes from the remote the folders and symbolic links of `entries` (those the last
    /// marker had and the source no longer has), where the provider keeps them on the
    /// remote itself (a folder remote, a mirror); a folder only when empty. Called before a
    /// run's uploads, so a file may take the place of a link. Best effort.
    func removeTreeEntries(_ entries: [TreeEntry]) async
    /// Makes the folders and symbolic links of `entries` on the remote with their modes and
    /// times (as root, owners), where the provider keeps them there; called after a run's
    /// uploads and deletes, before its marker. Nothing that is in the way is replaced.
    /// Returns what it could not do, for the run's notes. WebDAV and S3 keep them in the
    /// marker only.
    func makeTreeEntries(_ entries: [TreeEntry]) async -> [String]

    // Versions (`VersionStore`): what a run replaces or deletes is kept under
    // `VersionStore.folder`, which `list()` never shows and never descends into.

    /// Keeps the file at `path` (of `size` bytes, as listed) as `destination`, on the server,
    /// never over a file already there (a `.transport` error then). With `copy` false it is
    /// moved where the provider can move (a folder: rename; WebDAV: MOVE, checked after a
    /// lost answer, never sent again blindly), else copied (S3: CopyObject). Returns whether
    /// the file is still at `path` afterwards (a copy). An absent `path` throws `.notFound`.
    func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool
    /// The names directly inside the folder `folder` (files and folders alike); a missing
    /// folder has none.
    func listNames(in folder: String) async throws -> [String]
    /// Every file under the folder `folder`, at any depth, with paths from the remote's root
    /// (`folder/...`), in no particular order; a missing folder has none. Unlike `list()`, it
    /// may look inside `VersionStore.folder`.
    func listFolder(_ folder: String) async throws -> RemoteFileList
    /// Removes the folder `folder` and everything in it; an absent one is not an error.
    func deleteFolder(_ folder: String) async throws
}

/// What `writeFileHashing` sent.
public struct SentFile: Sendable, Equatable {
    /// The file as the remote holds it now.
    public var file: RemoteFile
    /// The local file as it was opened, with the SHA-256 of the bytes read from it: what the
    /// fingerprint cache records, so the next scan does not read the file again.
    public var fingerprint: Fingerprint

    public init(file: RemoteFile, fingerprint: Fingerprint) {
        self.file = file
        self.fingerprint = fingerprint
    }

    /// The SHA-256 of the bytes sent.
    public var digest: SHA256Digest { fingerprint.digest }
}

/// What a provider without server-side versions throws for them.
public func versionsUnsupported(_ operation: String) -> CloudError {
    CloudError(.transport, "this remote cannot keep versions (\(operation)); set keep_versions = 0 in the profile")
}

/// A download whose bytes failed a check of their own format (an encrypted file whose chunk
/// does not open under the keys that opened the key file): the remote's data was changed.
public struct UndecryptableDownload: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path) does not decrypt (\(reason)): its encrypted bytes on the remote were changed; nothing was placed" }
}

/// A download whose body was not the size the listing gave: the remote's data failed a check.
public struct DownloadSizeMismatch: Error, Sendable, Equatable, CustomStringConvertible {
    /// The remote path.
    public let path: String
    public let expected: Int64
    /// The bytes received; for a longer body, the count at which the download was stopped.
    public let received: Int64
    /// Whether the body was longer than expected (it was stopped, not read to its end).
    public let longer: Bool

    public init(path: String, expected: Int64, received: Int64, longer: Bool) {
        self.path = path
        self.expected = expected
        self.received = received
        self.longer = longer
    }

    public var description: String {
        longer
            ? "\(path) is listed as \(expected) bytes, but the server sent more; the download was stopped and nothing was placed"
            : "\(path) is listed as \(expected) bytes, but the server sent \(received); nothing was placed"
    }
}

extension RemoteStorage {
    /// `writeFile(_:from:onBytes:)` without a byte callback.
    public func writeFile(_ path: String, from localPath: String) async throws -> RemoteFile {
        try await writeFile(path, from: localPath, onBytes: { _ in })
    }
    /// Hashes the local file (one pass, the file as opened), then sends it with `writeFile`:
    /// a file changed between the two sends bytes the hash does not describe, the same window
    /// a scan's hash has always had; a provider that hashes as it sends has none.
    public func writeFileHashing(
        _ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws -> SentFile {
        let fingerprint = try Fingerprint.ofLocalFile(localPath)
        return SentFile(file: try await writeFile(path, from: localPath, onBytes: onBytes), fingerprint: fingerprint)
    }

    /// `downloadFile(_:into:expectedSize:onBytes:)` without a size check or byte callback.
    public func downloadFile(_ path: String, into fd: Int32) async throws {
        try await downloadFile(path, into: fd, expectedSize: nil, onBytes: { _ in })
    }

    public func prefetch(_ paths: [String]) async {}
    public func flush() async throws {}
    public func isSameVersion(recorded: String, listed: RemoteFile) -> Bool { false }
    public func sweepTemporaries() async throws -> Int { 0 }
    public func applyMetadata(_ path: String, _ metadata: EntryMetadata) async throws -> RemoteFile? { nil }
    public func removeTreeEntries(_ entries: [TreeEntry]) async {}
    public func makeTreeEntries(_ entries: [TreeEntry]) async -> [String] { [] }
    public func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool {
        throw versionsUnsupported("keeping \(path)")
    }
    public func listNames(in folder: String) async throws -> [String] { [] }
    public func listFolder(_ folder: String) async throws -> RemoteFileList { RemoteFileList() }
    public func deleteFolder(_ folder: String) async throws { throw versionsUnsupported("removing \(folder)") }
    /// Providers that keep nothing on the remote for their identity: the same as `identityKey()`.
    public func ensureIdentityKey() async throws -> String? { try await identityKey() }
}
