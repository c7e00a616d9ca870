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

    public init(path: String, size: Int64, remoteId: String? = nil) {
        self.path = path
        self.size = size
        self.remoteId = remoteId
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
    func identityKey() async throws -> String?
    /// Every file on the remote.
    func list() async throws -> [RemoteFile]
    /// Writes `data` to `path`, replacing what was there.
    func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile
    /// Uploads the local file at `localPath` to `path`, replacing what was there.
    func writeFile(_ path: String, from localPath: String) async throws -> RemoteFile
    /// Reads the whole file at `path`.
    func readBytes(_ path: String) async throws -> Data
    /// Downloads the file at `path` to `localPath`, replacing what was there.
    func downloadFile(_ path: String, to localPath: String) async throws
    /// Deletes the file at `path`; an absent path is not an error.
    func delete(_ path: String) async throws
    /// A hint that these paths will be read soon. Never throws.
    func prefetch(_ paths: [String]) async
    /// Makes every completed write durable on the remote. The engine calls it once before
    /// the marker, which is the commit point of a run. Providers whose writes are durable
    /// when they return need not implement it.
    func flush() async throws
}

extension RemoteStorage {
    public func prefetch(_ paths: [String]) async {}
    public func flush() async throws {}
}
