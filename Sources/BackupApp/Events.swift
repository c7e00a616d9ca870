// What a running job tells its front end (the scripted reporters, the TUI): a stream of
// events, and a summary at the end. Jobs never print.

import BackupEngine
import BackupTree
import Foundation
import Synchronization

/// One thing a job reports while it runs.
public enum JobEvent: Sendable, Equatable {
    /// A new phase began: "scanning", "listing", "syncing", "restoring".
    case phase(String)
    /// The scan finished.
    case scanned(files: Int, bytes: Int64, hashedFiles: Int)
    /// Something worth telling about one path (skipped, unreadable, refused).
    case note(path: String, message: String)
    /// Sync progress: `done` of `total` steps, bytes sent so far, the file in flight.
    case syncProgress(done: Int, total: Int, bytes: Int64, current: String?)
    /// Restore progress, bytes received so far, the file in flight.
    case restoreProgress(RestoreProgress, bytes: Int64, current: String?)
    /// A group was not placed because it would overwrite local files that differ.
    case conflict(group: String, paths: [String])
    /// One file of a restore failed this attempt: `kind` is "hashMismatch", "sizeMismatch",
    /// "local" or a CloudError kind's key ("transport"); `damage` says whether the remote's
    /// data failed a check (exit status 5).
    case fileFailed(path: String, kind: String, message: String, damage: Bool)
}

/// Receives a job's events; called from any thread, must not block.
public typealias JobEvents = @Sendable (JobEvent) -> Void

/// Counts the bytes a job's transfers have moved and names the file in flight, for the
/// progress events of both jobs.
final class TransferMeter: Sendable {
    private let state = Mutex<(bytes: Int64, current: String?)>((0, nil))

    /// `storage`, reporting its transfers to this meter.
    func observing(_ storage: any RemoteStorage) -> ObservedStorage {
        ObservedStorage(base: storage) { path, finished in
            self.state.withLock { value in
                if let finished { value.bytes += finished; value.current = nil } else { value.current = path }
            }
        }
    }

    /// Bytes moved so far and the file in flight.
    var reading: (bytes: Int64, current: String?) { state.withLock { ($0.bytes, $0.current) } }
}

/// Wraps a provider to tell the job which file is moving and how many bytes have moved.
struct ObservedStorage: ForwardingStorage {
    let base: any RemoteStorage
    let onTransfer: @Sendable (_ path: String, _ finishedBytes: Int64?) -> Void

    func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        onTransfer(path, nil)
        let file = try await base.writeBytes(path, data)
        onTransfer(path, file.size)
        return file
    }

    func writeFile(_ path: String, from localPath: String) async throws -> RemoteFile {
        onTransfer(path, nil)
        let file = try await base.writeFile(path, from: localPath)
        onTransfer(path, file.size)
        return file
    }

    func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        onTransfer(path, nil)
        try await base.downloadFile(path, into: fd, expectedSize: expectedSize, onBytes: onBytes)
        var info = stat()
        onTransfer(path, fstat(fd, &info) == 0 ? Int64(info.st_size) : 0)
    }
}

/// Starts the remote's listing at once, so it runs while the source is scanned, and hands
/// it to the engine's first `list()` (later calls list again). Used only once the gate has
/// said the remote may be used, so rule 1 still holds: no remote call before the gate.
final class PrefetchedListing: ForwardingStorage {
    let base: any RemoteStorage
    private let first: Mutex<Task<RemoteFileList, any Error>?>

    init(_ base: any RemoteStorage) {
        self.base = base
        first = Mutex(Task { try await base.list() })
    }

    deinit { first.withLock { $0?.cancel() } }

    func list() async throws -> RemoteFileList {
        if let task = first.withLock({ task -> Task<RemoteFileList, any Error>? in
            defer { task = nil }
            return task
        }) {
            return try await task.value
        }
        return try await base.list()
    }
}

/// A provider wrapped to watch or change some of its calls: every call it does not declare
/// itself goes to `base`. One place forwards them all, so a capability added to
/// `RemoteStorage` (whose default is to do nothing) cannot be lost in one wrapper.
protocol ForwardingStorage: RemoteStorage {
    var base: any RemoteStorage { get }
}

extension ForwardingStorage {
    func identityKey() async throws -> String? { try await base.identityKey() }
    func ensureIdentityKey() async throws -> String? { try await base.ensureIdentityKey() }
    func list() async throws -> RemoteFileList { try await base.list() }
    func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile { try await base.writeBytes(path, data) }
    func writeFile(_ path: String, from localPath: String) async throws -> RemoteFile { try await base.writeFile(path, from: localPath) }
    func readBytes(_ path: String) async throws -> Data { try await base.readBytes(path) }
    func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        try await base.downloadFile(path, into: fd, expectedSize: expectedSize, onBytes: onBytes)
    }
    func delete(_ path: String) async throws { try await base.delete(path) }
    func prefetch(_ paths: [String]) async { await base.prefetch(paths) }
    func flush() async throws { try await base.flush() }
    func isSameVersion(recorded: String, listed: RemoteFile) -> Bool { base.isSameVersion(recorded: recorded, listed: listed) }
    func sweepTemporaries() async throws -> Int { try await base.sweepTemporaries() }
    func applyMetadata(_ path: String, _ metadata: EntryMetadata) async throws -> RemoteFile? {
        try await base.applyMetadata(path, metadata)
    }
    func removeTreeEntries(_ entries: [TreeEntry]) async { await base.removeTreeEntries(entries) }
    func makeTreeEntries(_ entries: [TreeEntry]) async -> [String] { await base.makeTreeEntries(entries) }
}
