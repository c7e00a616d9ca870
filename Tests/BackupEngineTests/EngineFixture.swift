// A sync engine over a real FolderStorage in a temporary directory, with a real SQLite
// state file, wrapped in FaultyStorage so tests can fail calls and see what was called.

import BackupEngine
import BackupStorage
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class EngineFixture {
    let dir: String
    let remoteRoot: String
    let statePath: String
    let folder: FolderStorage
    let storage: FaultyStorage
    var state: StateStore
    var engine: SyncEngine

    init(
        policy: SyncPolicy = SyncPolicy(), transfers: Int = 1, versions: VersionPolicy? = nil,
        clock: @escaping @Sendable () -> Date = { Date() },
        availability: @escaping @Sendable () async -> Availability = { .available }
    ) throws {
        dir = NSTemporaryDirectory() + "backup-engine-" + UUID().uuidString
        remoteRoot = dir + "/remote"
        statePath = dir + "/state/sync.db"
        try FileManager.default.createDirectory(atPath: remoteRoot, withIntermediateDirectories: true)
        folder = FolderStorage(root: remoteRoot)
        storage = FaultyStorage(folder)
        state = try StateStore(path: statePath)
        engine = SyncEngine(
            storage: storage, state: state, policy: policy, transfers: transfers, versions: versions, clock: clock,
            availability: availability)
    }

    deinit { try? FileManager.default.removeItem(atPath: dir) }

    /// A new StateStore and engine over the same files: what a restarted process sees.
    func reopen(policy: SyncPolicy = SyncPolicy(), transfers: Int = 1) throws {
        state = try StateStore(path: statePath)
        engine = SyncEngine(storage: storage, state: state, policy: policy, transfers: transfers)
    }

    /// The files on the remote disk, read with FileManager rather than the provider under
    /// test: relative path → contents. Internal files (volume id, temporaries) excluded.
    func remoteContents(includeMarker: Bool = false) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let base = URL(fileURLWithPath: remoteRoot)
        guard let walker = FileManager.default.enumerator(atPath: remoteRoot) else { return result }
        while let relative = walker.nextObject() as? String {
            let url = base.appendingPathComponent(relative)
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir), !isDir.boolValue else { continue }
            let name = url.lastPathComponent
            if name == ".backup-volume-id" || name.hasPrefix(".backup-tmp.") || relative.hasPrefix(VersionStore.folder + "/") { continue }
            if !includeMarker && relative == SyncEngine.defaultMarkerPath { continue }
            result[relative] = try Data(contentsOf: url)
        }
        return result
    }

    /// Writes a file straight onto the remote disk, as another machine would.
    func putRemote(_ path: String, _ text: String) throws {
        let url = URL(fileURLWithPath: remoteRoot).appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(text.utf8).write(to: url)
    }

    func removeRemote(_ path: String) throws {
        try FileManager.default.removeItem(atPath: remoteRoot + "/" + path)
    }

    /// A local file written under the fixture's folder, for `.file` sources.
    func localFile(_ name: String, _ text: String) throws -> String {
        let path = dir + "/local/" + name
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}

/// A hash-compared entry with its bytes in memory.
func hashed(_ path: String, _ text: String) -> SyncEntry {
    let data = Data(text.utf8)
    return SyncEntry(path: path, size: Int64(data.count), hash: SHA256Hasher.hex(data), source: .bytes(data))
}

/// A size-compared entry with its bytes in memory.
func sized(_ path: String, _ text: String) -> SyncEntry {
    let data = Data(text.utf8)
    return SyncEntry(path: path, size: Int64(data.count), hash: nil, source: .bytes(data))
}

func snapshot(_ entries: [SyncEntry], marker: String = "marker-v1", isEmpty: Bool? = nil, allowShrink: Bool = false) -> SyncSnapshot {
    SyncSnapshot(entries: entries, marker: Data(marker.utf8), isEmpty: isEmpty, allowShrink: allowShrink)
}

/// The report of a completed run, or a test failure naming what came back instead.
func completed(_ outcome: SyncOutcome, file: StaticString = #filePath, line: UInt = #line) -> SyncReport {
    if case .completed(let report) = outcome { return report }
    XCTFail("expected a completed sync, got \(outcome)", file: file, line: line)
    return SyncReport()
}

/// A clock a test sets.
final class TestClock: Sendable {
    private let now: Mutex<Date>
    init(_ date: Date) { now = Mutex(date) }
    var date: Date { now.withLock { $0 } }
    func set(_ date: Date) { now.withLock { $0 = date } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var read: @Sendable () -> Date { { self.date } }
}

/// Records progress callbacks from the engine.
final class ProgressLog: Sendable {
    private let events = Mutex<[[Int]]>([])
    var all: [[Int]] { events.withLock { $0 } }
    var callback: SyncProgress { { done, total in self.events.withLock { $0.append([done, total]) } } }
}
