// A restore over a real FolderStorage holding a real backup (written by the sync engine),
// with a real SQLite record, wrapped in FaultyStorage to fail and count calls.

import BackupEngine
import BackupStorage
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class RestoreFixture {
    let sync: EngineFixture
    let target: String
    let recordPath: String
    var record: RestoreRecord
    var engine: RestoreEngine
    var storage: FaultyStorage { sync.storage }

    /// `files`: remote path → contents, all backed up before the test starts. `transfers`:
    /// the engine's downloads in flight; `onFileFailed`: the engine's callback.
    init(
        _ files: [(String, String)], transfers: Int = 1,
        availability: @escaping @Sendable () async -> Availability = { .available },
        onFileFailed: @escaping @Sendable (RestoreFile, RestoreFailure) -> Void = { _, _ in }
    ) async throws {
        sync = try EngineFixture(policy: SyncPolicy(shrinkGuard: nil))
        target = sync.dir + "/target"
        recordPath = sync.dir + "/restore/record.db"
        _ = completed(try await sync.engine.sync(snapshot(files.map { hashed($0.0, $0.1) })))
        record = try RestoreRecord(path: recordPath, writer: true)
        engine = RestoreEngine(
            storage: sync.storage, record: record, staging: FolderStaging(root: target), transfers: transfers,
            availability: availability, onFileFailed: onFileFailed)
        sync.storage.resetCalls()
    }

    /// A new record and engine over the same files: what a restarted process sees.
    func reopen(transfers: Int = 1, availability: @escaping @Sendable () async -> Availability = { .available }) throws {
        record = try RestoreRecord(path: recordPath, writer: true)
        engine = RestoreEngine(
            storage: sync.storage, record: record, staging: FolderStaging(root: target), transfers: transfers, availability: availability)
    }

    /// Temporary files a download left in the target (FolderStaging names them `.tmp-…`).
    var temporaries: [String] {
        (FileManager.default.enumerator(atPath: target)?.allObjects as? [String] ?? [])
            .filter { ($0 as NSString).lastPathComponent.hasPrefix(".tmp-") }
    }

    /// The source of the backup now on the remote.
    func source() async throws -> SourceRef {
        guard case .found(_, let source, _) = await sync.engine.probe() else {
            XCTFail("no backup found")
            return SourceRef(identityKey: "", markerRemoteId: nil, markerFingerprint: "")
        }
        return source
    }

    /// A plan restoring `specs` (remote path, required, group) into the target, in order.
    func plan(_ specs: [(String, Bool, String?)]) async throws -> RestorePlan {
        let source = try await source()
        return RestorePlan(source: source, files: specs.map { spec in
            RestoreFile(remotePath: spec.0, required: spec.1, group: spec.2)
        })
    }

    func local(_ path: String) -> Data? {
        FileManager.default.contents(atPath: target + "/" + path)
    }

    var downloads: [String] {
        storage.calls.compactMap { if case .download(let path) = $0 { path } else { nil } }
    }
}

/// Records every group offered and answers from a script (default: place).
final class ScriptedPlacement: RestorePlacement, Sendable {
    private let state = Mutex<(offered: [RestoreGroup], answers: [String: PlacementDecision])>(([], [:]))
    private let check: (@Sendable (RestoreGroup) throws -> Void)?

    init(_ answers: [String: PlacementDecision] = [:], check: (@Sendable (RestoreGroup) throws -> Void)? = nil) {
        state.withLock { $0.answers = answers }
        self.check = check
    }

    var offered: [RestoreGroup] { state.withLock { $0.offered } }
    var labels: [String] { offered.map(\.label) }

    func answer(_ label: String, _ decision: PlacementDecision) {
        state.withLock { $0.answers[label] = decision }
    }

    func place(_ group: RestoreGroup) async throws -> PlacementDecision {
        try check?(group)
        return state.withLock {
            $0.offered.append(group)
            return $0.answers[group.label] ?? .placed
        }
    }
}

/// Records restore progress reports.
final class RestoreProgressLog: Sendable {
    private let reports = Mutex<[RestoreProgress]>([])
    var all: [RestoreProgress] { reports.withLock { $0 } }
    var callback: RestoreProgressHandler { { progress in self.reports.withLock { $0.append(progress) } } }
}
