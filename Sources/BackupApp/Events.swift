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
    /// A part of a sync's writes began (uploads, deletes, metadata, the marker).
    case syncStage(SyncStage)
    /// The scan so far: files found, and of them read and hashed (with their bytes).
    case scanning(files: Int, hashed: Int, hashedBytes: Int64)
    /// The scan finished: files found, and of them read and hashed by the scan, and left to be
    /// hashed as their upload reads them (a first sync's new files: read once, not twice).
    case scanned(files: Int, bytes: Int64, hashedFiles: Int, hashedWhenSent: Int = 0)
    /// Something worth telling about one path (skipped, unreadable, refused).
    case note(path: String, message: String)
    /// Sync progress: `done` of `total` steps (uploads, deletes, the marker), and the bytes.
    case syncProgress(done: Int, total: Int, transfer: TransferReading)
    /// Restore progress, and the bytes received.
    case restoreProgress(RestoreProgress, transfer: TransferReading)
    /// Verify progress: `done` of `total` files read and checked, and the bytes received.
    case verifyProgress(done: Int, total: Int, transfer: TransferReading)
    /// A group was not placed because it would overwrite local files that differ.
    case conflict(group: String, paths: [String])
    /// One file of a restore failed this attempt: `kind` is "hashMismatch", "sizeMismatch",
    /// "local" or a CloudError kind's key ("transport"); `damage` says whether the remote's
    /// data failed a check (exit status 5).
    case fileFailed(path: String, kind: String, message: String, damage: Bool)
}

/// Receives a job's events; called from any thread, must not block.
public typealias JobEvents = @Sendable (JobEvent) -> Void

/// The bytes a job's transfers have moved, what it expects to move, and what moves now.
public struct TransferReading: Sendable, Equatable {
    /// One file moving now.
    public struct Moving: Sendable, Equatable {
        public var path: String
        /// Bytes of it moved so far (in this attempt).
        public var bytes: Int64
        /// Its size, when known before it moves.
        public var size: Int64?

        public init(path: String, bytes: Int64 = 0, size: Int64? = nil) {
            self.path = path
            self.bytes = bytes
            self.size = size
        }
    }

    /// Bytes moved so far: whole files, and what has moved of each file in flight.
    public var bytes: Int64
    /// Bytes the job expects to move in all (the planned uploads and the marker, or the
    /// restore's downloads); 0 until it is known.
    public var expectedBytes: Int64
    /// The files in flight, the one that started first first.
    public var moving: [Moving]

    public init(bytes: Int64 = 0, expectedBytes: Int64 = 0, moving: [Moving] = []) {
        self.bytes = bytes
        self.expectedBytes = expectedBytes
        self.moving = moving
    }

    /// The file in flight longest: the one a single line names.
    public var current: String? { moving.first?.path }

    /// How far the bytes are, 0...1; nil while nothing is expected.
    public var fraction: Double? {
        expectedBytes > 0 ? min(1, Double(bytes) / Double(expectedBytes)) : nil
    }
}

/// A transfer rate over the last few seconds (not since the start: a run that stalled, or
/// sped up, shows it within the window), from readings of a growing byte count.
public struct RateWindow: Sendable {
    private var samples: [(time: Double, bytes: Int64)] = []
    /// How many seconds of readings the rate looks at.
    public let seconds: Double

    public init(seconds: Double = 5) {
        self.seconds = seconds
    }

    /// Adds a reading taken at `time` (seconds on a monotonic clock). A count that went down
    /// (a retry started a file again) starts the window afresh.
    public mutating func add(time: Double, bytes: Int64) {
        if let last = samples.last, bytes < last.bytes { samples.removeAll() }
        if let last = samples.last, time - last.time < 0.05 {
            samples[samples.count - 1] = (max(last.time, time), bytes)
        } else {
            samples.append((time, bytes))
        }
        // One reading older than the window stays, so the window spans all of it.
        while samples.count > 2, time - samples[1].time >= seconds { samples.removeFirst() }
    }

    /// Bytes a second over the window at `time`, nil until the readings span half a second.
    /// With no reading for longer than the window, the rate is 0: nothing is moving.
    public func rate(at time: Double) -> Double? {
        guard let first = samples.first, let last = samples.last else { return nil }
        if time - last.time >= seconds { return 0 }
        let span = time - first.time
        guard span >= 0.5 else { return nil }
        return Double(last.bytes - first.bytes) / span
    }

    /// Seconds left to move `remaining` bytes at the window's rate, nil when it cannot say.
    public func secondsLeft(_ remaining: Int64, at time: Double) -> Double? {
        guard remaining > 0, let rate = rate(at: time), rate > 0 else { return nil }
        return Double(remaining) / rate
    }
}

/// Counts the bytes a job's transfers move, file by file as they go, and names the files in
/// flight, for the progress events of both jobs. A byte count that moves calls `onTick` at
/// most `tickInterval` apart, so a front end sees a large file move.
final class TransferMeter: Sendable {
    private struct Value {
        var finished: Int64 = 0
        var expected: Int64 = 0
        var moving: [(id: Int, file: TransferReading.Moving)] = []
        var nextId = 0
        var lastTick: ContinuousClock.Instant?
    }

    private let state = Mutex(Value())
    private let onTick: Mutex<(@Sendable (TransferReading) -> Void)?> = Mutex(nil)
    private let tickInterval: Duration

    init(tickInterval: Duration = .milliseconds(100)) {
        self.tickInterval = tickInterval
    }

    /// `storage`, reporting its transfers to this meter.
    func observing(_ storage: any RemoteStorage) -> ObservedStorage {
        ObservedStorage(base: storage, meter: self)
    }

    /// Called (on a transfer's thread) when bytes moved and no tick was made for a while.
    func onTick(_ handler: @escaping @Sendable (TransferReading) -> Void) {
        onTick.withLock { $0 = handler }
    }

    /// A job's progress handler: each event `emit` makes carries the engine's latest counts and
    /// the meter's bytes, whether the engine reported (the returned handler, given the counts)
    /// or bytes moved during a file (a tick, with the counts reported last; none before the
    /// engine's first report).
    func progress<Counts: Sendable>(_ emit: @escaping @Sendable (Counts, TransferReading) -> Void) -> @Sendable (Counts) -> Void {
        let latest = Mutex<Counts?>(nil)
        onTick { reading in
            if let counts = latest.withLock({ $0 }) { emit(counts, reading) }
        }
        return { [self] counts in
            latest.withLock { $0 = counts }
            emit(counts, reading)
        }
    }

    /// Adds `bytes` to what the job expects to move.
    func expect(_ bytes: Int64) {
        state.withLock { $0.expected += bytes }
    }

    /// Bytes moved so far, what is expected, and the files in flight.
    var reading: TransferReading {
        state.withLock { value in
            TransferReading(
                bytes: value.finished + value.moving.reduce(0) { $0 + $1.file.bytes }, expectedBytes: value.expected,
                moving: value.moving.map(\.file))
        }
    }

    /// Bytes of whole files moved so far.
    var finishedBytes: Int64 { state.withLock { $0.finished } }

    func started(_ path: String, size: Int64?) -> Int {
        state.withLock { value in
            defer { value.nextId += 1 }
            value.moving.append((value.nextId, TransferReading.Moving(path: path, size: size)))
            return value.nextId
        }
    }

    func moved(_ id: Int, bytes: Int64) {
        let now = ContinuousClock.now
        let due = state.withLock { value -> Bool in
            if let index = value.moving.firstIndex(where: { $0.id == id }) { value.moving[index].file.bytes = bytes }
            if let last = value.lastTick, now - last < tickInterval { return false }
            value.lastTick = now
            return true
        }
        if due, let tick = onTick.withLock({ $0 }) { tick(reading) }
    }

    /// The transfer `id` ended: with `bytes` moved in all, or failed (nil).
    func ended(_ id: Int, bytes: Int64?) {
        state.withLock { value in
            value.moving.removeAll { $0.id == id }
            if let bytes { value.finished += bytes }
        }
    }
}

/// Wraps a provider to tell the job's meter which files are moving and how far each is.
struct ObservedStorage: ForwardingStorage {
    let base: any RemoteStorage
    let meter: TransferMeter

    func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        // A run's record in the versions folder (a few dozen bytes after the marker) is the
        // tool's own bookkeeping, not part of what the run said it would send.
        if path.hasPrefix(VersionStore.folder + "/") { return try await base.writeBytes(path, data) }
        let id = meter.started(path, size: Int64(data.count))
        do {
            let file = try await base.writeBytes(path, data)
            meter.ended(id, bytes: file.size)
            return file
        } catch {
            meter.ended(id, bytes: nil)
            throw error
        }
    }

    func writeFile(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> RemoteFile {
        try await metered(path, from: localPath, onBytes: onBytes) { try await base.writeFile(path, from: localPath, onBytes: $0) }.file
    }

    func writeFileHashing(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> SentFile {
        try await metered(path, from: localPath, onBytes: onBytes) { try await base.writeFileHashing(path, from: localPath, onBytes: $0) }
    }

    /// One upload of the local file at `localPath`, told to the meter as it goes.
    private func metered<T: Sendable & HasRemoteFile>(
        _ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void,
        _ send: (_ onBytes: @escaping @Sendable (Int64) -> Void) async throws -> T
    ) async throws -> T {
        var info = stat()
        let size = FileName.withCString(localPath) { stat($0, &info) } == 0 ? Int64(info.st_size) : nil
        let id = meter.started(path, size: size)
        let meter = self.meter
        do {
            let sent = try await send { bytes in
                meter.moved(id, bytes: bytes)
                onBytes(bytes)
            }
            meter.ended(id, bytes: sent.file.size)
            return sent
        } catch {
            meter.ended(id, bytes: nil)
            throw error
        }
    }

    func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        let id = meter.started(path, size: expectedSize)
        let meter = self.meter
        do {
            try await base.downloadFile(path, into: fd, expectedSize: expectedSize) { received in
                meter.moved(id, bytes: received)
                onBytes(received)
            }
        } catch {
            meter.ended(id, bytes: nil)
            throw error
        }
        // A download with an expected size that did not throw wrote exactly that many bytes
        // (the provider's contract); only one without is asked how many it wrote.
        if let expectedSize { return meter.ended(id, bytes: expectedSize) }
        var info = stat()
        meter.ended(id, bytes: fstat(fd, &info) == 0 ? Int64(info.st_size) : 0)
    }
}

/// Starts the remote's listing at once, so it runs while the source is scanned, and hands
/// it to the engine's first `list()` (later calls list again). Used only once the gate has
/// said the remote may be used, so rule 1 still holds: no remote call before the gate.
final class PrefetchedListing: ForwardingStorage {
    let base: any RemoteStorage
    private let first: Mutex<Task<RemoteFileList, any Error>?>

    /// `failed` is told when that first listing fails (the run it is for cannot go on).
    init(_ base: any RemoteStorage, failed: @escaping @Sendable () -> Void = {}) {
        self.base = base
        first = Mutex(Task {
            do {
                return try await base.list()
            } catch {
                failed()
                throw error
            }
        })
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
    func writeFile(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> RemoteFile {
        try await base.writeFile(path, from: localPath, onBytes: onBytes)
    }
    func writeFileHashing(_ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void) async throws -> SentFile {
        try await base.writeFileHashing(path, from: localPath, onBytes: onBytes)
    }
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
    func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool {
        try await base.keepVersion(path, as: destination, size: size, copy: copy)
    }
    func listNames(in folder: String) async throws -> [String] { try await base.listNames(in: folder) }
    func listFolder(_ folder: String) async throws -> RemoteFileList { try await base.listFolder(folder) }
    func deleteFolder(_ folder: String) async throws { try await base.deleteFolder(folder) }
}

/// What an upload returns, for the meter to read the landed size of.
protocol HasRemoteFile {
    var file: RemoteFile { get }
}

extension RemoteFile: HasRemoteFile {
    var file: RemoteFile { self }
}

extension SentFile: HasRemoteFile {}
