// A RemoteStorage decorator for engine and restore tests: it records every call and fails
// the Nth call of a chosen operation with a chosen CloudError, around a real provider.

import BackupEngine
import Foundation
import Synchronization

/// Wraps a real provider, recording calls and injecting failures.
public final class FaultyStorage: RemoteStorage {
    /// The kinds of call that can be counted and failed. A put is writeBytes or writeFile.
    public enum Operation: String, Sendable, Hashable {
        case identityKey, list, put, read, download, delete, prefetch, flush, keepVersion
    }

    /// One recorded call.
    public enum Call: Sendable, Equatable {
        case identityKey
        case list
        case put(String)
        case read(String)
        case download(String)
        case delete(String)
        case prefetch([String])
        case flush
        /// Keeping the file at the path as a version.
        case keepVersion(String)

        public var operation: Operation {
            switch self {
            case .identityKey: .identityKey
            case .list: .list
            case .put: .put
            case .read: .read
            case .download: .download
            case .delete: .delete
            case .prefetch: .prefetch
            case .flush: .flush
            case .keepVersion: .keepVersion
            }
        }

        /// Whether this call changes the remote.
        public var isWrite: Bool {
            switch self {
            case .put, .delete, .keepVersion: true
            default: false
            }
        }
    }

    /// What `identityKey()` answers instead of the wrapped provider.
    public enum IdentityOverride: Sendable {
        case passThrough
        /// Answer nil: a provider with no identity of its own (rule 9).
        case none
        case value(String)
    }

    /// Runs before a call reaches the wrapped provider, with the call and its 1-based
    /// count among calls of its operation. Throwing from it fails the call.
    public typealias Hook = @Sendable (Call, Int) async throws -> Void

    private struct State {
        var calls: [Call] = []
        var counts: [Operation: Int] = [:]
        var faults: [Operation: [Int: CloudError]] = [:]
        var always: [Operation: CloudError] = [:]
        var identity: IdentityOverride = .passThrough
        var hook: Hook?
        var afterHook: Hook?
    }

    public let base: any RemoteStorage
    private let state = Mutex(State())

    public init(_ base: any RemoteStorage) {
        self.base = base
    }

    /// Fails the `nth` (1-based) call of `operation` with `error`.
    public func fail(_ operation: Operation, nth: Int, with error: CloudError) {
        state.withLock { $0.faults[operation, default: [:]][nth] = error }
    }

    /// Fails every call of `operation` with `error` (nil stops failing).
    public func failAlways(_ operation: Operation, with error: CloudError?) {
        state.withLock { $0.always[operation] = error }
    }

    /// Stops every injected failure.
    public func clearFaults() {
        state.withLock {
            $0.faults = [:]
            $0.always = [:]
        }
    }

    public func setIdentity(_ identity: IdentityOverride) {
        state.withLock { $0.identity = identity }
    }

    public func setHook(_ hook: Hook?) {
        state.withLock { $0.hook = hook }
    }

    /// Runs after a call succeeded on the wrapped provider, before it returns to the caller.
    public func setAfterHook(_ hook: Hook?) {
        state.withLock { $0.afterHook = hook }
    }

    private func leave(_ call: Call) async throws {
        let (count, hook) = state.withLock { ($0.counts[call.operation] ?? 0, $0.afterHook) }
        if let hook { try await hook(call, count) }
    }

    /// Every call so far, in order.
    public var calls: [Call] { state.withLock { $0.calls } }

    /// The paths of every put so far, in order.
    public var puts: [String] {
        calls.compactMap { if case .put(let path) = $0 { path } else { nil } }
    }

    /// The paths of every delete so far, in order.
    public var deletes: [String] {
        calls.compactMap { if case .delete(let path) = $0 { path } else { nil } }
    }

    public func resetCalls() {
        state.withLock {
            $0.calls = []
            $0.counts = [:]
        }
    }

    private func enter(_ call: Call) async throws {
        let (count, fault, hook) = state.withLock { state -> (Int, CloudError?, Hook?) in
            state.calls.append(call)
            let count = (state.counts[call.operation] ?? 0) + 1
            state.counts[call.operation] = count
            let fault = state.faults[call.operation]?[count] ?? state.always[call.operation]
            return (count, fault, state.hook)
        }
        if let hook { try await hook(call, count) }
        if let fault { throw fault }
    }

    public func identityKey() async throws -> String? {
        try await enter(.identityKey)
        switch state.withLock({ $0.identity }) {
        case .passThrough: return try await base.identityKey()
        case .none: return nil
        case .value(let value): return value
        }
    }

    /// Recorded as an `identityKey` call; the override answers it the same way.
    public func ensureIdentityKey() async throws -> String? {
        try await enter(.identityKey)
        switch state.withLock({ $0.identity }) {
        case .passThrough: return try await base.ensureIdentityKey()
        case .none: return nil
        case .value(let value): return value
        }
    }

    public func list() async throws -> RemoteFileList {
        try await enter(.list)
        return try await base.list()
    }

    public func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        try await enter(.put(path))
        let file = try await base.writeBytes(path, data)
        try await leave(.put(path))
        return file
    }

    public func writeFile(
        _ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws -> RemoteFile {
        try await enter(.put(path))
        let file = try await base.writeFile(path, from: localPath, onBytes: onBytes)
        try await leave(.put(path))
        return file
    }

    /// The same call as `writeFile` (a put), to the base's own hashing upload.
    public func writeFileHashing(
        _ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws -> SentFile {
        try await enter(.put(path))
        let sent = try await base.writeFileHashing(path, from: localPath, onBytes: onBytes)
        try await leave(.put(path))
        return sent
    }

    public func readBytes(_ path: String) async throws -> Data {
        try await enter(.read(path))
        return try await base.readBytes(path)
    }

    public func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        try await enter(.download(path))
        try await base.downloadFile(path, into: fd, expectedSize: expectedSize, onBytes: onBytes)
        try await leave(.download(path))
    }

    public func delete(_ path: String) async throws {
        try await enter(.delete(path))
        try await base.delete(path)
        try await leave(.delete(path))
    }

    public func prefetch(_ paths: [String]) async {
        state.withLock { $0.calls.append(.prefetch(paths)) }
        await base.prefetch(paths)
    }

    public func flush() async throws {
        try await enter(.flush)
        try await base.flush()
    }

    public func isSameVersion(recorded: String, listed: RemoteFile) -> Bool {
        base.isSameVersion(recorded: recorded, listed: listed)
    }

    public func sweepTemporaries() async throws -> Int { try await base.sweepTemporaries() }
    public func applyMetadata(_ path: String, _ metadata: EntryMetadata) async throws -> RemoteFile? {
        try await base.applyMetadata(path, metadata)
    }
    public func removeTreeEntries(_ entries: [TreeEntry]) async { await base.removeTreeEntries(entries) }
    public func makeTreeEntries(_ entries: [TreeEntry]) async -> [String] { await base.makeTreeEntries(entries) }

    public func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool {
        try await enter(.keepVersion(path))
        let kept = try await base.keepVersion(path, as: destination, size: size, copy: copy)
        try await leave(.keepVersion(path))
        return kept
    }
    public func listNames(in folder: String) async throws -> [String] { try await base.listNames(in: folder) }
    public func listFolder(_ folder: String) async throws -> RemoteFileList { try await base.listFolder(folder) }
    public func deleteFolder(_ folder: String) async throws { try await base.deleteFolder(folder) }
}
