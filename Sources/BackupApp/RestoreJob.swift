// The restore job: from a profile or a bare remote URL (a new machine), probe, plan by the
// marker's groups, download into the target's staging area, verify, and place group by
// group; `--resume` continues from the record after any stop. A restore into a profile's own
// source seeds the sync state with what it verified, so the next sync uploads none of it.

import BackupEngine
import BackupStorage
import BackupTree
import Foundation

/// What `backup restore` was asked to do.
public struct RestoreRequest: Sendable {
    /// `--to`: the target folder (default: the profile's source).
    public var target: String?
    /// `--remote`: restore from this remote instead of a profile's.
    public var remoteURL: String?
    public var resume = false
    public var resetAttempts = false
    /// `--only`: restore only these groups.
    public var only: [String] = []
    /// `--overwrite`: local files that differ may be replaced.
    public var overwrite = false
    /// Asked per group (`--place ask`, the TUI); nil places every group (`--place all`).
    public var decide: (@Sendable (PlacementOffer) async -> PlacementDecision)?

    public init(target: String? = nil, remoteURL: String? = nil, resume: Bool = false, resetAttempts: Bool = false,
                only: [String] = [], overwrite: Bool = false, decide: (@Sendable (PlacementOffer) async -> PlacementDecision)? = nil) {
        self.target = target
        self.remoteURL = remoteURL
        self.resume = resume
        self.resetAttempts = resetAttempts
        self.only = only
        self.overwrite = overwrite
        self.decide = decide
    }
}

/// How a restore job ended.
public struct RestoreSummary: Sendable {
    public enum Result: Sendable, Equatable {
        case restored(RestoreOutcome)
        /// The probe found no restorable backup.
        case probe(ProbeOutcome)
    }

    public var result: Result
    public var target: String
    /// Remote paths refused by the plan (they would leave the target).
    public var refused: [RefusedPath] = []
    /// Files placed and still pending, from the record.
    public var placed = 0
    public var pending: [String] = []
    public var downloadedBytes: Int64 = 0

    public var status: ExitStatus {
        switch result {
        case .restored(.completed): refused.isEmpty ? .success : .incomplete
        case .restored(.partial), .restored(.placementRejected): .incomplete
        case .restored(.failed): .failure
        case .restored: .unavailable
        case .probe(.failed): .failure
        case .probe: .unavailable
        }
    }
}

extension BackupApp {
    /// Restores from `profile`'s remote (or `request.remoteURL`) into the target.
    public func restore(_ profile: Profile?, _ request: RestoreRequest, events: @escaping JobEvents = { _ in }) async throws(AppError) -> RestoreSummary {
        guard let remoteURL = request.remoteURL ?? profile?.remote else {
            throw .usage("restore needs a profile or --remote URL")
        }
        guard let targetPath = (request.target ?? profile?.source).map(Self.absolute) else {
            throw .usage("restore --remote needs --to DIR: the folder to restore into")
        }
        let lockPath: String
        let recordPath: String
        if let profile, request.remoteURL == nil {
            lockPath = paths.lockFile(profile: profile.name)
            recordPath = paths.restoreRecord(profile: profile.name)
        } else {
            recordPath = paths.restoreRecord(target: targetPath)
            lockPath = (recordPath as NSString).deletingLastPathComponent + "/lock"
        }
        let lock = try ProfileLock(path: lockPath, profile: profile?.name ?? targetPath)
        defer { lock.release() }

        let remote = try Remotes.open(remoteURL, settings: profile?.settings ?? [:], environment: environment)
        let target = RestoreTarget(root: targetPath)
        let meter = TransferMeter()
        let storage = meter.observing(remote.storage)
        let availability = remote.availability
        let gate: @Sendable () async -> Availability = { availability }
        var summary = RestoreSummary(result: .probe(.none), target: targetPath)

        do {
            let record = try RestoreRecord(path: recordPath)
            let engine = RestoreEngine(storage: storage, record: record, availability: gate)
            let decide = request.decide
            let placement = StagedPlacement(
                target: target, overwrite: request.overwrite, decide: { offer in await decide?(offer) ?? .placed },
                onConflict: { offer in events(.conflict(group: offer.group.label, paths: offer.conflicts.map(\.localPath))) })
            let progress: RestoreProgressHandler = { value in
                let (bytes, current) = meter.reading
                events(.restoreProgress(value, bytes: bytes, current: current))
            }

            let outcome: RestoreOutcome
            if request.resume {
                events(.phase("restoring"))
                try target.prepare()
                outcome = try await engine.resume(resetAttempts: request.resetAttempts, placement: placement, onProgress: progress)
            } else {
                events(.phase("listing"))
                let probe = await Probe(storage: storage, availability: gate).run()
                guard case .found(let marker, let source, let files) = probe else {
                    summary.result = .probe(probe)
                    return summary
                }
                let only = request.only.isEmpty ? nil : Set(request.only)
                if let only {
                    let known = Set(try Marker.decode(marker).groups.map(\.name) + [RestorePlanner.otherFilesGroup])
                    let unknown = only.subtracting(known).sorted()
                    if !unknown.isEmpty {
                        throw AppError.usage("--only: the backup has no group \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")); its groups are \(known.sorted().joined(separator: ", "))")
                    }
                }
                let planned = try RestorePlanner.plan(marker: marker, source: source, files: files, target: target, only: only)
                summary.refused = planned.refused
                for refused in planned.refused { events(.note(path: refused.remotePath, message: refused.description)) }
                try target.prepare()
                events(.phase("restoring"))
                outcome = try await engine.start(planned.plan, placement: placement, onProgress: progress)
            }
            summary.result = .restored(outcome)
            let files = try record.files()
            summary.placed = files.count { $0.status == .done }
            summary.pending = files.filter { $0.status != .done }.map(\.file.remotePath)
            summary.downloadedBytes = meter.reading.bytes
            if case .completed = outcome {
                target.removeEmptyStaging()
                if let profile, Self.sameFolder(targetPath, profile.source) {
                    try seedSyncState(profile, from: files, target: target)
                }
            }
            return summary
        } catch {
            throw AppError.from(error)
        }
    }

    static func sameFolder(_ a: String, _ b: String) -> Bool {
        let resolve = { (path: String) in URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path }
        return resolve(a) == resolve(b)
    }

    /// Records every verified, placed file in the sync state and the fingerprint cache, as if
    /// a sync had uploaded it: the next sync then uploads none of them (and rereads none).
    private func seedSyncState(_ profile: Profile, from files: [RecordedFile], target: RestoreTarget) throws {
        let state = try openState(profile)
        var prints: [String: Fingerprint] = [:]
        for recorded in files where recorded.status == .done {
            guard let hash = recorded.file.sha256 else { continue }
            var info = stat()
            let finalPath = target.finalPath(for: recorded.file.remotePath)
            guard FileName.withCString(finalPath, { lstat($0, &info) }) == 0 else { continue }
            try state.put(StateEntry(path: recorded.file.remotePath, size: Int64(info.st_size), hash: hash, remoteId: nil))
            prints[recorded.file.remotePath] = Fingerprint(
                size: Int64(info.st_size),
                mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                inode: UInt64(info.st_ino), hash: hash)
        }
        try state.updateFingerprints(prints)
    }
}
