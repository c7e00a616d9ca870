// The values of a restore: the plan, the groups offered to placement, progress and the
// outcome (restore rules 1–7 of the contract).

import Foundation

/// One file to restore.
public struct RestoreFile: Sendable, Equatable, Codable {
    /// The file's path on the remote.
    public var remotePath: String
    /// Where the download lands (for `backup`, a staging path inside the target).
    public var toLocalPath: String
    /// Required files come first and must all land; the first failure ends the run.
    public var required: Bool
    /// An opaque group; files of a group are placed together. nil: its own group.
    public var group: String?
    /// The SHA-256 the download must have, when known; a mismatch is a failed attempt.
    public var sha256: String?
    /// The size the remote listed, when known.
    public var size: Int64?

    public init(
        remotePath: String, toLocalPath: String, required: Bool = false, group: String? = nil,
        sha256: String? = nil, size: Int64? = nil
    ) {
        self.remotePath = remotePath
        self.toLocalPath = toLocalPath
        self.required = required
        self.group = group
        self.sha256 = sha256
        self.size = size
    }
}

/// What a restore does: the backup it is pinned to and its files, in plan order.
public struct RestorePlan: Sendable, Equatable {
    public var source: SourceRef
    public var files: [RestoreFile]

    public init(source: SourceRef, files: [RestoreFile]) {
        self.source = source
        self.files = files
    }
}

/// A group offered to placement: the files of it that landed, and the siblings that did not.
public struct RestoreGroup: Sendable, Equatable {
    /// The group's name; nil for a file that has no group (it is its own group).
    public var name: String?
    /// Whether any file of the group is required.
    public var required: Bool
    /// The files that are downloaded and waiting to be placed.
    public var files: [RestoreFile]
    /// Files of the group that did not land in this run.
    public var failed: [RestoreFile]

    /// The group's name, or for a file with no group its remote path.
    public var label: String { name ?? files.first?.remotePath ?? failed.first?.remotePath ?? "" }
}

/// The answer of placement for one group.
public enum PlacementDecision: Sendable, Equatable {
    /// The files are where they belong: done.
    case placed
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

    public var description: String {
        switch self {
        case .cloud(let error): error.description
        case .local(let error): error.description
        case .hashMismatch(let path, let expected, let actual):
            "\(path) downloaded with SHA-256 \(actual), but the backup recorded \(expected); it was not placed"
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
