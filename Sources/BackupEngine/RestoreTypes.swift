// The values of a restore: the plan, the groups offered to placement, progress and the
// outcome (restore rules 1–7 of the contract).

import Foundation

/// A remote path that cannot be restored, and why; nothing is written for it.
public struct RefusedPath: Error, Sendable, Equatable, CustomStringConvertible {
    public let remotePath: String
    public let reason: String

    public init(remotePath: String, reason: String) {
        self.remotePath = remotePath
        self.reason = reason
    }

    public var description: String { "refused to restore \(String(reflecting: remotePath)): \(reason)" }
}

/// One file to restore. It names no local path: where it lands is derived from `placePath`
/// by the restore's staging and placement, which check it as they would any remote path.
public struct RestoreFile: Sendable, Equatable {
    /// The file's path on the remote: what is read.
    public var remotePath: String
    /// Where the file goes, relative to the restore's target (for a plain restore, the remote
    /// path; a restore of an older version reads one path and places at another).
    public var placePath: String
    /// Required files come first and must all land; the first failure ends the run.
    public var required: Bool
    /// An opaque group; files of a group are placed together. nil: its own group.
    public var group: String?
    /// The SHA-256 the download must have, when known; a mismatch is a failed attempt.
    public var digest: SHA256Digest?
    /// The size the remote listed, when known; a body of another size is refused.
    public var size: Int64?
    /// The mode, times and owner the marker records, set on the file as it is placed; nil
    /// for a backup whose marker records none (the file gets the defaults of a new file).
    public var metadata: EntryMetadata?
    /// The place path of the file this one is a hard link of: once both are placed, this
    /// one becomes a link of it (the pair then shares an inode).
    public var hardLinkTo: String?

    public init(
        remotePath: String, placePath: String? = nil, required: Bool = false, group: String? = nil,
        sha256: String? = nil, size: Int64? = nil, metadata: EntryMetadata? = nil, hardLinkTo: String? = nil
    ) {
        self.init(
            remotePath: remotePath, placePath: placePath, required: required, group: group,
            digest: sha256.flatMap(SHA256Digest.init(hex:)), size: size, metadata: metadata, hardLinkTo: hardLinkTo)
    }

    public init(
        remotePath: String, placePath: String? = nil, required: Bool = false, group: String? = nil,
        digest: SHA256Digest?, size: Int64? = nil, metadata: EntryMetadata? = nil, hardLinkTo: String? = nil
    ) {
        self.remotePath = remotePath
        self.placePath = placePath ?? remotePath
        self.required = required
        self.group = group
        self.digest = digest
        self.size = size
        self.metadata = metadata
        self.hardLinkTo = hardLinkTo
    }

    /// The SHA-256 as lowercase hex; nil when unknown (text that is not 64 hex digits is none).
    public var sha256: String? {
        get { digest?.hex }
        set { digest = newValue.flatMap(SHA256Digest.init(hex:)) }
    }
}

/// What a restore does: the backup it is pinned to, the folder it writes into, and its files
/// in plan order.
public struct RestorePlan: Sendable, Equatable {
    public var source: SourceRef
    /// The target folder (absolute), stored once in the record so a resume continues there.
    public var target: String
    public var files: [RestoreFile]
    /// Folders and symbolic links (paths are place paths), made once every file is placed:
    /// links after the files, folders' modes and times last, deepest first.
    public var tree: [TreeEntry]

    public init(source: SourceRef, target: String = "", files: [RestoreFile], tree: [TreeEntry] = []) {
        self.source = source
        self.target = target
        self.files = files
        self.tree = tree
    }
}

/// A temporary file a download is written into, made by a `RestoreStaging`.
public struct StagedWrite: Sendable {
    /// Open for reading and writing, empty when made.
    public let fd: Int32
    /// The staging's own handle on where the file is (the folder, held open while any write
    /// into it is alive).
    public let folder: OpenFolder
    /// The file's name in that folder; nil for a file that has no name until it is kept
    /// (`UnnamedFile`).
    public let temporaryName: String?

    /// The folder's descriptor (closed by `folder`, never by the staging's callers).
    public var folderFD: Int32 { folder.fd }

    public init(fd: Int32, folder: OpenFolder, temporaryName: String?) {
        self.fd = fd
        self.folder = folder
        self.temporaryName = temporaryName
    }
}

/// A folder descriptor shared by whoever holds it, closed when the last holder lets go: the
/// downloads that go into one staging folder share one descriptor instead of a copy (a `dup`
/// and a `close`) each.
public final class OpenFolder: Sendable {
    public let fd: Int32

    /// Takes `fd` over: it is closed when this is released.
    public init(taking fd: Int32) { self.fd = fd }

    deinit { close(fd) }
}

/// Where downloads wait for placement. The restore engine never opens a local path: it
/// asks the staging for descriptors, and the staging derives and checks every local path
/// from a file's `placePath` as if it came from the remote.
public protocol RestoreStaging: Sendable {
    /// Removes what a stopped run left behind (temporary files), before a run starts.
    func prepare() throws
    /// A new, empty temporary file for the download of `file`.
    func create(for file: RestoreFile) throws -> StagedWrite
    /// Makes the verified temporary `write` the staged copy of `file`, and closes it.
    func keep(_ write: StagedWrite, for file: RestoreFile) throws
    /// Closes and removes the temporary `write`.
    func discard(_ write: StagedWrite)
    /// The staged copy of `file` opened for reading, or nil when there is none (or what is
    /// there is not a regular file). The caller closes it.
    func openStaged(_ file: RestoreFile) throws -> Int32?
    /// Removes the staged copy of `file`, if any.
    func removeStaged(_ file: RestoreFile)
    /// Removes the staging area once the restore is complete.
    func finish()
}

/// A group offered to placement: the files of it that landed, and the siblings that did not.
public struct RestoreGroup: Sendable, Equatable {
    /// The group's name; nil for a file that has no group (it is its own group).
    public var name: String?
    /// Whether any file of the group is required.
    public var required: Bool
    /// The files that are downloaded and waiting to be placed (packed: a group may hold a
    /// million).
    public var files: RestoreFileList
    /// Files of the group that did not land in this run.
    public var failed: RestoreFileList

    public init(name: String?, required: Bool, files: RestoreFileList, failed: RestoreFileList = []) {
        self.name = name
        self.required = required
        self.files = files
        self.failed = failed
    }

    /// The group's name, or for a file with no group its remote path.
    public var label: String { name ?? files.first?.remotePath ?? failed.first?.remotePath ?? "" }
}

/// The answer of placement for one group.
public enum PlacementDecision: Sendable, Equatable {
    /// The files are where they belong: done.
    case placed
    /// Placed, except the files of these remote paths, whose differing local copies the
    /// person chose to keep: those stay staged (no attempt counted), not restored, and are
    /// offered again next run.
    case placedKeepingLocal(Set<String>)
    /// Not now: each file counts one attempt and is offered again next run.
    case rejected
}

/// Decides, one group at a time, what becomes of downloaded files.
public protocol RestorePlacement: Sendable {
    /// Places `group` (or not). Throwing counts as a failed attempt on every file of it.
    func place(_ group: RestoreGroup) async throws -> PlacementDecision
}

/// The default placement: files stay where they landed.
public struct KeepWhereLanded: RestorePlacement {
    public init() {}
    public func place(_ group: RestoreGroup) async throws -> PlacementDecision { .placed }
}

/// Counts of a restore, reported only when one of them changes.
public struct RestoreProgress: Sendable, Equatable {
    /// Files placed.
    public var filesDone: Int
    /// Files downloaded and waiting for placement.
    public var filesStaged: Int
    public var filesTotal: Int
    /// Groups whose every file is placed.
    public var groupsDone: Int
    public var groupsTotal: Int

    public init(filesDone: Int, filesStaged: Int, filesTotal: Int, groupsDone: Int, groupsTotal: Int) {
        self.filesDone = filesDone
        self.filesStaged = filesStaged
        self.filesTotal = filesTotal
        self.groupsDone = groupsDone
        self.groupsTotal = groupsTotal
    }
}

/// Why a file or a run failed.
public enum RestoreFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The remote failed (mapped as in the error table).
    case cloud(CloudError)
    /// The local side failed: a full disk, a permission.
    case local(LocalFileError)
    /// The download's SHA-256 is not the one the marker recorded.
    case hashMismatch(path: String, expected: String, actual: String)
    /// The download's body was longer or shorter than the listed size.
    case sizeMismatch(DownloadSizeMismatch)
    /// The file's path may not be restored (it would leave the target, or a link is in the way).
    case refused(RefusedPath)
    /// The download failed its own format's check (an encrypted chunk that does not open).
    case undecryptable(UndecryptableDownload)

    /// What kind of failure, as a JSON key: "hashMismatch", "sizeMismatch", "local", or the
    /// CloudError kind's key.
    public var key: String {
        switch self {
        case .cloud(let error): error.kind.key
        case .local: "local"
        case .hashMismatch: "hashMismatch"
        case .sizeMismatch: "sizeMismatch"
        case .refused: "refusedPath"
        case .undecryptable: "undecryptable"
        }
    }

    /// Whether the remote's data failed a check (exit status 5), rather than a transfer.
    public var isDamage: Bool {
        switch self {
        case .hashMismatch, .sizeMismatch, .refused, .undecryptable: true
        case .cloud, .local: false
        }
    }

    public var description: String {
        switch self {
        case .cloud(let error): error.description
        case .local(let error): error.description
        case .hashMismatch(let path, let expected, let actual):
            "hash mismatch: \(path) downloaded with SHA-256 \(actual), but the backup recorded \(expected); it was not placed"
        case .sizeMismatch(let mismatch): "size mismatch: \(mismatch.description)"
        case .refused(let refused): refused.description
        case .undecryptable(let damaged): damaged.description
        }
    }
}

/// How a restore run ended.
public enum RestoreOutcome: Sendable, Equatable {
    /// Nothing is pending; stamped with when that was recorded.
    case completed(at: Date)
    /// The run ended with these remote paths still pending.
    case partial(pending: [String])
    /// A required file failed; optional files were not touched.
    case failed(RestoreFailure)
    /// A required group was rejected at placement.
    case placementRejected(group: String)
    /// Resume: the remote now holds a different backup (another marker or identity).
    case sourceChanged
    /// Resume: the backup is gone, or no remote account is configured.
    case sourceUnavailable
    /// Resume: the remote holds files but no readable marker.
    case notReady
    /// Resume: the remote root is not there (an unmounted disk, a missing bucket).
    case notAvailable
    /// Resume: the remote needs the person's consent first.
    case needsConsent
}

/// The restore's progress callback.
public typealias RestoreProgressHandler = @Sendable (RestoreProgress) -> Void
