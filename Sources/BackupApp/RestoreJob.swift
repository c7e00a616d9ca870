// The restore job: from a profile or a bare remote URL (a new machine), probe, plan by the
// marker's groups, download into the target's staging area, verify, and place group by
// group; `--resume` continues from the record after any stop. A restore into a profile's own
// source seeds the sync state with what it verified, so the next sync uploads none of it.

import BackupEngine
import BackupStorage
import BackupTree
import Foundation
import Synchronization

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
    /// `--path`: restore only these files and folders (paths in the backup).
    public var paths: [String] = []
    /// `--overwrite`: local files that differ may be replaced.
    public var overwrite = false
    /// `--as-of`: restore the tree the backup was at this time, from the kept versions.
    public var asOf: Date?
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

    /// Files of this run whose download failed a check (hash or size mismatch).
    public var damaged: [String] = []

    /// The restore found no credentials for its remote, or the remote refused them.
    public var lacksCredentials: Bool {
        switch result {
        case .probe(.unavailable(.noAccount)), .restored(.sourceUnavailable): true
        case .probe(.failed(let error)), .restored(.failed(.cloud(let error))): error.kind == .authRevoked
        default: false
        }
    }

    public var status: ExitStatus {
        let damage = !refused.isEmpty || !damaged.isEmpty
        switch result {
        case .restored(.completed): return damage ? .damaged : .success
        case .restored(.partial), .restored(.placementRejected): return damage ? .damaged : .incomplete
        case .restored(.failed(let failure)): return damage || failure.isDamage ? .damaged : .failure
        case .restored: return .unavailable
        case .probe(.failed): return .failure
        case .probe(.damaged): return .damaged
        case .probe: return .unavailable
        }
    }
}

extension BackupApp {
    /// Restores from `profile`'s remote (or `request.remoteURL`) into the target.
    public func restore(_ profile: Profile?, _ request: RestoreRequest, events: @escaping JobEvents = { _ in }) async throws(AppError) -> RestoreSummary {
        guard let remoteURL = request.remoteURL ?? profile?.remote else {
            throw .usage("restore needs a profile or --remote URL")
        }
        let requested = request.target.map(Self.absolute)
        let lockPath: String
        let recordPath: String
        if let profile, request.remoteURL == nil {
            lockPath = paths.lockFile(profile: profile.name)
            recordPath = paths.restoreRecord(profile: profile.name)
        } else {
            guard let requested else { throw .usage("restore --remote needs --to DIR: the folder to restore into") }
            recordPath = paths.restoreRecord(target: requested)
            lockPath = (recordPath as NSString).deletingLastPathComponent + "/lock"
        }
        let lock = try ProfileLock(path: lockPath, profile: profile?.name ?? requested ?? remoteURL)
        defer { lock.release() }

        let remote = try await openJobRemote(remoteURL, settings: profile?.settings ?? [:], readOnly: true,
                                             encrypted: Encryption.of(profile, url: remoteURL))
        let meter = TransferMeter()
        let storage = meter.observing(remote.storage)
        let availability = remote.availability
        let gate: @Sendable () async -> Availability = { availability }
        var summary = RestoreSummary(result: .probe(.none), target: requested ?? profile?.source ?? "")

        do {
            // This restore holds the lock: the record's writer.
            let record = try RestoreRecord(path: recordPath, writer: true)
            // The target: on --resume the one the record stores, never re-derived.
            let targetPath: String
            if request.resume {
                guard try record.source() != nil, let stored = try record.target(), !stored.isEmpty else {
                    throw StateStoreError(
                        .nothingToResume, path: record.path,
                        "there is no restore to resume in \(record.path); start one with `backup restore`")
                }
                if let requested, !Self.sameFolder(requested, stored) {
                    throw AppError.usage(
                        "the restore to resume goes into \(stored), not \(requested); continue it with "
                            + "`\(Self.resumeCommand(profile: profile, remoteURL: request.remoteURL, target: stored))`, "
                            + "or start a new restore into \(requested) without --resume")
                }
                targetPath = stored
            } else {
                guard let chosen = requested ?? profile.map({ Self.absolute($0.source) }) else {
                    throw AppError.usage("restore --remote needs --to DIR: the folder to restore into")
                }
                targetPath = chosen
            }
            summary.target = targetPath
            let target = RestoreTarget(root: targetPath)
            // Only a restore from the profile's own remote into its source speaks for its sync
            // state: another backup's hashes say nothing of what this profile's remote holds.
            // A past tree says nothing of what the remote holds now either.
            let intoOwnSource = request.asOf == nil && profile.map { profile in
                request.remoteURL.map { Self.sameRemote($0, profile.remote) } ?? true
                    && Self.sameFolder(targetPath, profile.source)
            } ?? false
            let failures = Mutex<[String]>([])
            // As many downloads in flight as a sync has uploads (the same setting and default).
            let transfers = profile?.transfers ?? Profile.defaultTransfers
            let engine = RestoreEngine(storage: storage, record: record, staging: target, transfers: transfers, availability: gate) { file, failure in
                if failure.isDamage { failures.withLock { $0.append(file.remotePath) } }
                events(.fileFailed(path: file.remotePath, kind: failure.key, message: failure.description, damage: failure.isDamage))
            }
            let decide = request.decide
            let placement = StagedPlacement(
                target: target, overwrite: request.overwrite, offersConflicts: request.decide != nil, decide: { offer in await decide?(offer) ?? .placed },
                onConflict: { offer in events(.conflict(group: offer.group.label, paths: offer.conflicts.map(\.localPath))) })
            // Counts from the engine, bytes from the meter: each event carries the latest of both.
            let progress: RestoreProgressHandler = meter.progress { value, reading in events(.restoreProgress(value, transfer: reading)) }

            let outcome: RestoreOutcome
            // The writer the restored backup's marker names (nil on --resume: not read again).
            var restoredWriter: String?
            if request.resume {
                events(.phase("restoring"))
                try target.createFolder()  // for the free-space check; the engine prepares the rest
                let pendingBytes = try record.pendingBytes()
                try Self.checkFreeSpace(target, needs: pendingBytes)
                meter.expect(pendingBytes)
                outcome = try await engine.resume(resetAttempts: request.resetAttempts, placement: placement, onProgress: progress)
                Self.reportListingNotes(remote.storage, events)
            } else {
                events(.phase("listing"))
                // The listing and the marker live only while the plan is made; the plan itself
                // is written into the record file by file as the marker streams in, never held.
                let outline: PlanOutline
                do {
                    let probe = await Probe(storage: storage, availability: gate).run()
                    Self.reportListingNotes(remote.storage, events)
                    guard case .found(let currentMarker, let source, let currentFiles) = probe else {
                        summary.result = .probe(probe)
                        return summary
                    }
                    var (marker, files, pastTree) = (currentMarker, currentFiles, RestorePlanner.PastTree?.none)
                    if let asOf = request.asOf {
                        (marker, files, pastTree) = try await Self.pastTree(asOf, storage: storage, current: currentMarker, files: currentFiles,
                                                                             remote: remote.displayURL, events: events)
                    }
                    do {
                        let limit = Marker.contentLimit(listedFiles: files.count, markerSize: marker.count)
                        // Its writer and its groups for --only, read without its entries.
                        let header = try Marker.header(marker, maxContentSize: limit)
                        restoredWriter = header.writer
                        let only = request.only.isEmpty ? nil : Set(request.only)
                        if let only {
                            let known = Set(header.groups.map(\.name) + [RestorePlanner.otherFilesGroup])
                            let unknown = only.subtracting(known).sorted()
                            if !unknown.isEmpty {
                                throw AppError.usage("--only: the backup has no group \(unknown.map { "\"\($0)\"" }.joined(separator: ", ")); its groups are \(known.sorted().joined(separator: ", "))")
                            }
                        }
                        var selection: PathSelection?
                        if !request.paths.isEmpty {
                            guard let chosen = PathSelection(request.paths) else {
                                throw AppError.usage("--path: \(request.paths.map { "\"\(TerminalText.visible($0))\"" }.joined(separator: ", ")) "
                                    + "must be paths inside the backup (like docs/taxes or notes.txt), without \".\", \"..\" or empty parts")
                            }
                            selection = chosen
                        }
                        var planned = PlanOutline()
                        let (planMarker, planFiles, planPastTree, planSelection) = (marker, files, pastTree, selection)
                        try record.record(source: source, target: target.root) { add in
                            // The marker is read and matched with the listing on one core while
                            // the record writes the files down on the other.
                            planned = try Handoff.run(name: "backup-plan", produce: { emit in
                                try RestorePlanner.plan(
                                    marker: planMarker, files: planFiles, target: target, only: only, paths: planSelection, pastTree: planPastTree,
                                    into: { id, file in try emit((id, file)) })
                            }, consume: { item in try add(item.0, item.1) })
                            // Nothing chosen is in the backup: said, and the record is left as it was.
                            if let selection, planned.files == 0, planned.refused.isEmpty,
                               !planned.tree.contains(where: { selection.covers($0.path) }) {
                                throw AppError.usage("--path: the backup on \(remote.displayURL) holds nothing at "
                                    + request.paths.map { "\"\(TerminalText.visible($0))\"" }.joined(separator: ", ")
                                    + "; paths are as the backup names them (relative to its top: docs/taxes, notes.txt)")
                            }
                            return planned.tree
                        }
                        outline = planned
                    } catch let error as MarkerError {
                        throw AppError(.damaged, "the backup's marker on \(remote.displayURL) cannot be used: \(error); "
                            + "nothing was restored. Run `backup sync` from the source to write a new one")
                    }
                    summary.refused = outline.refused
                    for refused in outline.refused { events(.note(path: refused.remotePath, message: refused.description)) }
                    try target.createFolder()  // for the free-space check; the engine prepares the rest
                    try Self.checkFreeSpace(target, needs: outline.bytes)
                    meter.expect(outline.bytes)
                    if intoOwnSource, let profile {
                        // Until restored (or abandoned), every file of the backup the source lacks is
                        // kept on the remote by the syncs that run meanwhile: a partial restore is not
                        // a delete. (A file the source has is the source's: the sync decides it.)
                        let state = try openState(profile)
                        var lacking: [String] = []
                        for file in files where file.path != SyncEngine.defaultMarkerPath {
                            var info = stat()
                            if FileName.withCString(targetPath + "/" + file.path, { lstat($0, &info) }) != 0 { lacking.append(file.path) }
                            if lacking.count >= Self.seedBatch {
                                try state.addRestorePending(lacking)
                                lacking.removeAll(keepingCapacity: true)
                            }
                        }
                        try state.addRestorePending(lacking)
                    }
                }
                events(.phase("restoring"))
                outcome = try await engine.startRecorded(placement: placement, onProgress: progress)
            }
            summary.result = .restored(outcome)
            summary.damaged = failures.withLock { $0 }
            // The files are placed: then the hard links, folders and symbolic links, and the
            // folders' modes and times (for a partial restore, not those of the folders that
            // still wait for files: a --resume places them, and then sets those). Each pass
            // reads the record row by row: a large restore's files are not all held at once.
            switch outcome {
            case .completed, .partial:
                try target.restoreTree(try record.tree(), links: try record.placedLinkPairs()) { each in
                    try record.forEachFile(.notDone) { each($0.file.placePath) }
                }
            default:
                break
            }
            for note in target.treeNotes.all { events(.note(path: target.root, message: note)) }
            summary.placed = try record.count(.done)
            try record.forEachFile(.notDone) { summary.pending.append($0.file.remotePath) }
            summary.downloadedBytes = meter.finishedBytes
            // What this run placed was verified against the backup the record still matches:
            // seeded after any run that got that far (a partial restore too), never after a
            // resume that found another backup (the record's hashes describe the old one).
            switch outcome {
            case .completed, .partial, .placementRejected, .failed:
                if intoOwnSource, let profile { try seedSyncState(profile, from: record, target: target) }
            default:
                break
            }
            // A completed restore from the profile's own remote into its source takes the
            // backup's writer over: the next sync (the new-machine flow) writes over its marker
            // without --take-over, and the marker then names this profile.
            if case .completed = outcome, intoOwnSource, let profile, let restoredWriter {
                try openState(profile).setMeta(Self.adoptedWriterKey, restoredWriter)
            }
            return summary
        } catch {
            throw AppError.from(error)
        }
    }

    /// The marker, the listing and the content paths of the tree the backup was at `time`:
    /// the current files where they are still that content, the kept ones where a later run
    /// replaced or deleted them.
    static func pastTree(
        _ time: Date, storage: any RemoteStorage, current: Data, files: RemoteFileList, remote: String, events: JobEvents
    ) async throws -> (Data, RemoteFileList, RestorePlanner.PastTree) {
        let history = try await VersionHistory.read(storage)
        let tree: VersionHistory.AsOf
        do throws(VersionHistory.AsOfRefusal) {
            tree = try await history.asOf(time) { await VersionHistory.record(of: $0, on: storage) }
        } catch .noVersions {
            throw AppError(.usage, "--as-of: \(remote) keeps no versions (keep_versions is 0, or no sync replaced or deleted "
                + "anything yet): the only tree it holds is the current one; restore without --as-of")
        } catch .beforeOldest(let oldest, let since) {
            throw AppError(.usage, "--as-of: that is before the oldest tree \(remote) keeps, the backup as it was from "
                + "\(VersionTime.shown(since)) (kept in \(VersionStore.runFolder(oldest.name))); choose a time from then on")
        }
        var marker = current
        if let run = tree.markerRun {
            marker = try await storage.readBytes(VersionStore.path(run: run.name, SyncEngine.defaultMarkerPath))
            events(.phase("restoring the tree as it was before the run of \(VersionTime.shown(run.date))"))
        }
        var merged = files.removing(where: { tree.fromVersions[files.path(at: $0)] != nil })
        var contentPaths: [String: String] = [:]
        for (path, kept) in tree.fromVersions {
            merged.append(RemoteFile(path: path, size: kept.size))
            contentPaths[path] = kept.path
        }
        return (marker, merged, RestorePlanner.PastTree(contentPaths: contentPaths))
    }

    /// What `backup restore --abandon` did.
    public struct AbandonedRestore: Sendable {
        /// Files that were kept on the remote for a restore into the source.
        public var abandoned: Int
        /// Of those, the ones the next sync deletes: not in the source, not kept otherwise.
        public var toDelete: Int
    }

    /// Stops keeping on the remote the files a restore into the profile's source has not
    /// restored yet: the next sync deletes those the source lacks.
    public func abandonRestore(_ profile: Profile) throws(AppError) -> AbandonedRestore {
        let lock = try ProfileLock(path: paths.lockFile(profile: profile.name), profile: profile.name)
        defer { lock.release() }
        let patterns = try Self.compilePatterns(profile)
        do {
            let state = try openState(profile)
            let pending = try state.restorePending()
            try state.abandonRestorePending()
            let source = Self.absolute(profile.source)
            let toDelete = pending.count { path in
                var info = stat()
                let present = FileName.withCString(source + "/" + path) { lstat($0, &info) } == 0
                return !(present && !patterns.excludes.matches(path)) && !patterns.keepRemotely.matches(path)
            }
            return AbandonedRestore(abandoned: pending.count, toDelete: toDelete)
        } catch {
            throw AppError.from(error)
        }
    }

    /// Tells what the provider's listings left out (an href naming another server, a path
    /// listed twice), as notes.
    static func reportListingNotes(_ storage: any RemoteStorage, _ events: JobEvents) {
        guard let reporting = storage as? any ListingNotesReporting else { return }
        for note in reporting.takeListingNotes() { events(.note(path: "", message: note)) }
    }

    /// The command that continues the recorded restore, whole: the profile (or remote) and,
    /// unless it is the profile's source, the target, quoted for a shell.
    public static func resumeCommand(profile: Profile?, remoteURL: String?, target: String) -> String {
        if let remoteURL { return "backup restore --remote \(shellWord(RemoteURL.redacted(remoteURL))) --to \(shellWord(target)) --resume" }
        let into = profile.map { sameFolder($0.source, target) } == true ? "" : " --to \(shellWord(target))"
        return "backup restore --profile \(shellWord(profile?.name ?? "default"))\(into) --resume"
    }

    /// `word` as a shell reads it back: as it is when it holds only safe characters, else in
    /// single quotes (a quote inside as '\'').
    static func shellWord(_ word: String) -> String {
        let safe = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-~")
        if !word.isEmpty, word.allSatisfy({ safe.contains($0) }), !word.hasPrefix("~") { return word }
        return "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Refuses to start when the files still to download need more than the target's free space.
    static func checkFreeSpace(_ target: RestoreTarget, needs needed: Int64) throws(AppError) {
        guard let free = target.freeBytes(), needed > free else { return }
        throw AppError(.failure, "the restore needs \(ByteCount.text(needed)) but \(target.root) has only \(ByteCount.text(free)) free; "
            + "nothing was downloaded. Free some space, or restore into another folder with --to")
    }

    /// Whether two remote URLs name the same remote (a folder path compared as a folder).
    static func sameRemote(_ a: String, _ b: String) -> Bool {
        if a == b { return true }
        let normal = { (url: String) -> String in
            var url = url.contains("://") ? url : absolute(url)
            while url.count > 1 && url.hasSuffix("/") { url.removeLast() }
            return url
        }
        if !a.contains("://") && !b.contains("://") { return sameFolder(a, b) }
        return normal(a) == normal(b)
    }

    /// Whether two paths name the same folder, links resolved.
    public static func sameFolder(_ a: String, _ b: String) -> Bool {
        let resolve = { (path: String) in URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path }
        return resolve(a) == resolve(b)
    }

    /// Records every verified, placed file in the sync state and the fingerprint cache, as if
    /// a sync had uploaded it: the next sync then uploads none of them (and rereads none).
    /// They are restored: no longer kept on the remote for the restore.
    private func seedSyncState(_ profile: Profile, from record: RestoreRecord, target: RestoreTarget) throws {
        let state = try openState(profile)
        // A sync killed before this restore left its newest puts in its journal: they go first.
        try state.recoverPuts()
        // In batches of a transaction each, as the record is read: never the whole restore
        // held at once, nor a commit per file.
        var restored: [String] = []
        var seeded: [StateEntry] = []
        var prints: [String: Fingerprint] = [:]
        func flush() throws {
            try state.removeRestorePending(restored)
            try state.reconcile(drop: [], adopt: seeded)
            try state.updateFingerprints(prints)
            restored.removeAll(keepingCapacity: true)
            seeded.removeAll(keepingCapacity: true)
            prints.removeAll(keepingCapacity: true)
        }
        try record.forEachFile(.done) { recorded in
            restored.append(recorded.file.remotePath)
            if let digest = recorded.file.digest {
                var info = stat()
                let finalPath = target.finalPath(for: recorded.file.placePath)
                if FileName.withCString(finalPath, { lstat($0, &info) }) == 0 {
                    seeded.append(StateEntry(path: recorded.file.placePath, size: Int64(info.st_size), digest: digest, remoteId: nil))
                    prints[recorded.file.placePath] = Fingerprint(
                        size: Int64(info.st_size), mtimeNanoseconds: clampedNanoseconds(info.st_mtim),
                        inode: UInt64(info.st_ino), digest: digest)
                }
            }
            if restored.count >= Self.seedBatch { try flush() }
        }
        try flush()
    }

    /// How many restored files the sync state takes in one transaction.
    static let seedBatch = 20_000
}
