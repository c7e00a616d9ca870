// The SyncEngine contract (seeds/000, rules 1–11, the probe and the write hold) over any
// RemoteStorage, with the state in a StateStore. The engine never prints: it reports
// through its outcome, its report and the progress callback.

import Foundation
import Synchronization

/// Mirrors a local snapshot onto a remote, guarded so that a bad day never deletes a backup.
public final class SyncEngine: Sendable {
    /// The default name of the marker file at the remote root.
    public static let defaultMarkerPath = ".backup-marker"

    public let storage: any RemoteStorage
    public let state: StateStore
    public let policy: SyncPolicy
    /// The remote path of the marker, written last by every run that changed anything.
    public let markerPath: String
    /// How many uploads may be in flight at once (the profile's `transfers`).
    public let transfers: Int
    /// How long replaced and deleted files are kept (`keep_versions`); nil: not kept.
    public let versions: VersionPolicy?
    /// The time now: a run's versions folder is named by it, and pruning counts from it.
    private let clock: @Sendable () -> Date
    private let availability: @Sendable () async -> Availability
    private let serial = AsyncMutex()

    /// - Parameter availability: the app's answer to rule 1, asked before every run and
    ///   probe, before the remote is touched.
    public init(
        storage: any RemoteStorage,
        state: StateStore,
        policy: SyncPolicy = SyncPolicy(),
        markerPath: String = SyncEngine.defaultMarkerPath,
        transfers: Int = 1,
        versions: VersionPolicy? = nil,
        clock: @escaping @Sendable () -> Date = { Date() },
        availability: @escaping @Sendable () async -> Availability = { .available }
    ) {
        self.transfers = max(1, transfers)
        self.versions = versions
        self.clock = clock
        self.storage = storage
        self.state = state
        self.policy = policy
        self.markerPath = markerPath
        self.availability = availability
    }

    // MARK: Write hold

    /// Persists the write hold into the sync state without touching entries. While it is
    /// set, `sync` writes nothing; a run in progress stops before its next put or delete.
    public func setHold(_ hold: WriteHold) throws {
        try state.setHold(hold)
    }

    /// The write hold as persisted.
    public func hold() throws -> WriteHold {
        try state.hold()
    }

    // MARK: Sync

    /// One run of the contract's rules 1–11. Runs are serialised: a second call waits for
    /// the first to end.
    ///
    /// Cloud failures come back as `.failed`; the method throws only for the local state
    /// file (`StateStoreError`) and for cancellation (`CancellationError`), in both cases
    /// with every finished write already recorded.
    public func sync(
        _ snapshot: SyncSnapshot, onProgress: @escaping SyncProgress = { _, _ in }, onStage: SyncStageHandler = { _ in }
    ) async throws -> SyncOutcome {
        try await serial.withLock {
            var keeper: VersionKeeper?
            let outcome = try await runSync(snapshot, keeper: &keeper, onProgress: onProgress, onStage: onStage)
            // Whatever ended the run, its report says what it kept as versions.
            return outcome.with(versions: keeper?.summary)
        }
    }

    private func runSync(
        _ snapshot: SyncSnapshot, keeper: inout VersionKeeper?, onProgress: @escaping SyncProgress, onStage: SyncStageHandler
    ) async throws -> SyncOutcome {
        try Task.checkCancellation()
        // What a run killed mid-upload left in the state's put journal is part of the state.
        try state.recoverPuts()

        var report = SyncReport()
        let plan: Plan
        var providerKey: String?
        switch try await begin(snapshot) {
        case .stop(let reason): return .unavailable(reason)
        case .failed(let error): return .failed(error, report)
        case .plan(let planned, let key): (plan, providerKey) = (planned, key)
        }
        // The remote-missing and writer guards refuse before the state changes: a reset or an
        // adoption would make the remote that vanished, or the other writer's, look like ours.
        if let refusal = plan.refusal, plan.refusesBeforeState { return .unavailable(refusal) }

        // Rule 3: a changed identity resets the state (the hold is kept).
        switch plan.identityChange {
        case .none: break
        case .bind: try state.setIdentity(plan.identity)
        case .reset:
            try state.resetIdentity(to: plan.identity)
            report.identityReset = true
        }
        // Rule 2: the state follows the listing before anything is decided from it.
        try state.reconcile(drop: plan.drop, adopt: plan.adopt)
        report.unchanged = plan.unchanged
        report.kept = plan.kept

        // Rules 4 and 11: the guards, before any write.
        if let refusal = plan.refusal { return .unavailable(refusal) }
        if let stop = try checkBeforeWrite(report) { return stop }
        // An adopted size-compared file found unchanged keeps the mtime it has now.
        try state.recordModificationTimes(plan.recordTimes)

        let uploads = plan.uploads
        let deletes = plan.deletes
        let markerNeeded = plan.markerNeeded
        // Rule 7: size-compared uploads, then hash-compared in snapshot order; rule 8:
        // deletes after the uploads; the marker last, as the commit point of the run.
        let total = uploads.count + deletes.count + (markerNeeded ? 1 : 0)
        // What stopped runs left on the remote goes before this run writes (best effort). A
        // run that writes nothing leaves it for the next one that does: on a folder remote
        // the sweep is a second walk of the whole tree, most of a no-op run's time.
        if total > 0 { _ = try? await storage.sweepTemporaries() }
        // A provider that keeps its identity on the remote (a folder's volume id) creates it
        // now, right before the run's first write and after every guard passed: a probe, a
        // preview or a refused run leaves the remote as it was.
        if total > 0, providerKey == nil {
            if let stop = try checkBeforeWrite(report) { return stop }
            do {
                if let created = try await storage.ensureIdentityKey() {
                    try state.setIdentity(created)
                    providerKey = created
                }
            } catch let error as StateStoreError {
                throw error
            } catch {
                return .failed(try cloudError(error), report)
            }
        }
        // Versions: what this run replaces or deletes, and the marker it replaces, are kept in
        // a folder of its own, named before its first write.
        if versions != nil, total > 0, plan.remoteFiles > 0 || !plan.markerMissing {
            if let stop = try checkBeforeWrite(report) { return stop }
            do {
                keeper = try await VersionKeeper.start(storage, now: clock())
            } catch {
                return .failed(try cloudError(error), report)
            }
        }
        var done = 0
        onProgress(done, total)  // Rule 10: before the first step.
        // Links and folders gone from the source go first, so a file may take a link's place.
        if markerNeeded {
            let removed = snapshot.treeRemoved()
            if !removed.isEmpty { await storage.removeTreeEntries(removed) }
        }

        // Rule 7 with `transfers` uploads in flight: size-compared ones all finish before
        // the first hash-compared one starts; within each, uploads start in snapshot order.
        let sizePhase = uploads.prefix { !snapshot.entries.isHashCompared(at: $0) }
        if !uploads.isEmpty {
            onStage(.uploading(files: uploads.count, bytes: uploads.reduce(0) { $0 + snapshot.entries.size(at: $1) }))
        }
        // Each upload's put is one append to the state's journal (rule 7 still: saved before
        // the next step), folded into the database in batches and when the uploads end.
        if !uploads.isEmpty { try state.beginPutJournal() }
        var stop: SyncOutcome?
        do {
            for phase in [sizePhase, uploads.dropFirst(sizePhase.count)] where !phase.isEmpty && stop == nil {
                stop = try await uploadPhase(
                    phase, of: snapshot, replacing: plan.replacing, keeper: keeper, report: &report, done: &done, total: total,
                    onProgress: onProgress)
            }
        } catch {
            try? state.endPutJournal()
            throw error
        }
        try state.endPutJournal()
        if let stop { return stop }

        if !deletes.isEmpty { onStage(.deleting(files: deletes.count)) }
        for path in deletes {
            if let stop = try checkBeforeWrite(report) { return stop }
            // Forgotten before the delete, so a kill right after it never leaves the state
            // claiming a file the remote no longer holds.
            let previous = try state.take(path)
            var keeping = true
            do {
                // The old file is kept first; one that cannot be is not deleted this run.
                let stillThere = try await keeper?.keep(path, size: previous?.size ?? 0, deleting: true) ?? true
                keeping = false
                if stillThere { try await storage.delete(path) }
                report.deleted.append(path)
            } catch let error as StateStoreError {
                throw error
            } catch where keeping {
                if let previous { try state.put(previous) }
                report.keepFailures.append(KeepFailure(path: path, deleting: true, error: try cloudError(error)))
            } catch {
                // Rule 8: logged in the report, retried next run (the entry stays known).
                if let previous { try state.put(previous) }
                report.deleteFailures.append(DeleteFailure(path: path, error: try cloudError(error)))
            }
            done += 1
            onProgress(done, total)
        }

        // Mode, times or owner changed alone: recorded (the marker below carries them), and set
        // on the remote's copy where the provider can; the stale flag first, so a run stopped
        // before its marker leaves the next one to write it.
        if !plan.metadataChanges.isEmpty {
            if let stop = try checkBeforeWrite(report) { return stop }
            try state.setMeta(Self.markerStaleKey, "1")
            onStage(.updatingMetadata(files: plan.metadataChanges.count))
            var changes: [(path: String, metadata: EntryMetadata, remoteId: String?)] = []
            for entry in plan.metadataChanges {
                guard let metadata = entry.metadata else { continue }
                let applied = try? await storage.applyMetadata(entry.path, metadata)
                changes.append((entry.path, metadata, applied?.remoteId))
                report.metadataUpdated.append(entry.path)
                // Recorded as they go: a run stopped midway keeps the new ids of the remote
                // copies it touched, which the next listing shows (else they read as replaced).
                if changes.count >= 512 {
                    try state.updateMetadata(changes)
                    changes.removeAll(keepingCapacity: true)
                }
            }
            try state.updateMetadata(changes)
        }

        // A run whose planned uploads were all skipped leaves the marker as it is: it already
        // describes what the remote holds.
        // A run that deleted files writes it too: it no longer lists them, and a folder remote
        // gets back the empty folders the deletes pruned.
        if markerNeeded && (plan.markerMissing || plan.markerTakenOver || plan.markerStale || !report.uploaded.isEmpty
            || !report.deleted.isEmpty || keeper?.keptFiles == true) {
            if let stop = try checkBeforeWrite(report) { return stop }
            // A remote that keeps folders and links itself gets them before the marker that lists them.
            if !snapshot.tree.isEmpty { report.treeNotes = await storage.makeTreeEntries(snapshot.tree) }
            // The marker describes what the remote holds now: the state, which recorded every
            // upload as it landed (every upload in flight has finished by now). A marker that
            // cannot be made is the local side's failure: it is thrown.
            let markerBody = try snapshot.marker(HeldEntries(state: state, excluding: markerPath))
            // When the marker this run replaces was written, where it is this engine's own (for the record).
            let previousCommit = keeper == nil || plan.identityChange == .reset || plan.markerTakenOver || plan.markerMissing
                ? nil : try state.meta(Self.markerCommittedKey).flatMap(Double.init).map(Date.init(timeIntervalSince1970:))
            defer { if case .file(let path) = markerBody { _ = FileName.withCString(path) { unlink($0) } } }
            do {
                // The marker being replaced is kept with the run's versions, so the tree before
                // this run can be rebuilt; one that cannot be kept is not replaced.
                if let keeper, let size = plan.markerSize { try await keeper.keepMarker(markerPath, size: size) }
                // Everything before the marker is made durable first, then the marker itself:
                // a marker on the remote always describes files that are really there.
                try await storage.flush()
                onStage(.writingMarker(bytes: markerBody.size))
                let file: RemoteFile
                switch markerBody {
                case .bytes(let bytes): file = try await storage.writeBytes(markerPath, bytes)
                case .file(let path): file = try await storage.writeFile(markerPath, from: path)
                }
                try await storage.flush()
                report.uploaded.append(markerPath)
                report.uploadedBytes += file.size
                report.markerBytes = file.size
                report.markerUploaded = true
                // Rule 9: without a provider identity the marker's id is the identity. It is
                // taken after every marker upload, not only the first, so that a provider
                // whose ids change per version does not reset on its own writes.
                if providerKey == nil { try state.setIdentity(file.remoteId ?? "") }
                // The writer guard knows its own marker by this and does not read it back.
                try state.setMeta(Self.ownMarkerKey, file.remoteId.map { "\(file.size) \($0)" })
                if let digest = snapshot.treeDigest { try state.setMeta(Self.treeDigestKey, digest) }
                try state.setMeta(Self.markerStaleKey, nil)
                try state.setMeta(Self.markerCommittedKey, String(clock().timeIntervalSince1970))
            } catch let error as StateStoreError {
                throw error
            } catch {
                return .failed(try cloudError(error), report)
            }
            done += 1
            onProgress(done, total)
            // The run's record beside its folder, with the moment its tree became the backup's.
            if let keeper, let kept = keeper.summary {
                let record = VersionRecord(
                    replaced: kept.replaced, deleted: kept.deleted, bytes: kept.bytes, marker: kept.marker, committed: clock(),
                    previous: kept.marker ? previousCommit : nil)
                do {
                    _ = try await storage.writeBytes(VersionStore.recordPath(run: keeper.run), record.encoded())
                } catch {
                    report.versionNotes.append("the record of \(VersionStore.runFolder(keeper.run)) could not be written: "
                        + ((error as? CloudError)?.message ?? String(describing: error)))
                }
            }
        }

        try state.setLastSync(Date())
        await prune(&report, keeper: keeper)
        return .completed(report)
    }

    /// Retention: after a run that completed, the runs' folders older than `keep_versions`
    /// go, oldest first, each one's marker before its files (a run half pruned is then no
    /// tree to restore, rather than a tree with holes). Never under a hold; best effort (what
    /// fails is noted, and retried after the next run).
    private func prune(_ report: inout SyncReport, keeper: VersionKeeper?) async {
        guard let versions, (try? state.hold()) == WriteHold.none, !Task.isCancelled else { return }
        let names: [String]
        do {
            names = try await storage.listNames(in: VersionStore.folder)
        } catch {
            report.versionNotes.append("the versions could not be listed for pruning: \((error as? CloudError)?.message ?? String(describing: error))")
            return
        }
        let cutoff = clock().addingTimeInterval(-versions.keep)
        for run in VersionStore.runs(in: names) where run.date < cutoff && run.name != keeper?.run {
            guard (try? state.hold()) == WriteHold.none, !Task.isCancelled else { return }
            do {
                try await storage.delete(VersionStore.path(run: run.name, markerPath))
                try await storage.deleteFolder(VersionStore.runFolder(run.name))
                if run.hasRecord { try await storage.delete(VersionStore.recordPath(run: run.name)) }
                report.pruned.append(run.name)
            } catch {
                report.versionNotes.append("\(VersionStore.runFolder(run.name)) could not be pruned: "
                    + ((error as? CloudError)?.message ?? String(describing: error)))
                return
            }
        }
    }

    // MARK: Planning

    /// What a run would do, decided from the listing and the state without writing anything.
    private struct Plan {
        enum IdentityChange { case none, bind, reset }
        var identity: String
        var identityChange: IdentityChange
        var drop: [String]
        var adopt: [StateEntry]
        /// Why the run must not write (rules 4 and 11, the remote-missing and writer guards), if
        /// it must not.
        var refusal: UnavailableReason?
        /// Whether the refusal comes before rules 2 and 3 touch the state.
        var refusesBeforeState: Bool {
            switch refusal {
            case .remoteMissing?, .otherWriter?: true
            default: false
            }
        }
        /// Size-compared uploads first, then hash-compared in snapshot order (rule 7): indices
        /// of the snapshot's entries (not copies of them: a first run uploads every file).
        var uploads: [Int]
        /// The uploads whose path the state holds: the rest (every file of a first run) have
        /// no entry to take first.
        var replacing: Set<Int>
        var deletes: [String]
        var markerNeeded: Bool
        /// Whether the remote holds no marker now.
        var markerMissing: Bool
        /// The listed marker's size, where there is one.
        var markerSize: Int64?
        /// Listed files, the marker left out.
        var remoteFiles: Int
        /// Whether the remote's marker is taken over: it is rewritten as this writer's.
        var markerTakenOver: Bool
        var unchanged: Int
        /// Known entries the snapshot lacks that `snapshot.keep` keeps.
        var kept: Int
        /// Size-compared entries found unchanged whose state entry has no mtime yet.
        var recordTimes: [(path: String, mtimeNanoseconds: Int64)]
        /// Files whose content is unchanged but whose mode, times or owner differ from the
        /// state's record: the marker is rewritten, nothing uploaded.
        var metadataChanges: [SyncEntry]
        /// Whether the marker must be written though no file's content changed: metadata
        /// changes, a new tree digest, or a run that recorded metadata and stopped before its marker.
        var markerStale: Bool
    }

    /// The state's record of `SyncSnapshot.treeDigest` of the marker written last.
    static let treeDigestKey = "treeDigest"
    /// Set while metadata changes are recorded in the state and the marker carrying them is
    /// not written yet: the next run writes it.
    static let markerStaleKey = "markerStale"

    /// When this engine wrote its last marker (seconds since 1970), for the versions' records.
    static let markerCommittedKey = "markerCommitted"

    /// The state's record of the marker this engine wrote last: "<size> <remote id>".
    static let ownMarkerKey = "ownMarker"

    /// Whose the remote's marker is, as the writer guard sees it.
    private enum MarkerWriter: Equatable {
        /// No marker, a marker this profile wrote, or no writer check asked for.
        case ours
        /// A marker without a writer id, by a writer this profile took over, or another
        /// writer's with `--take-over`: the run goes on and rewrites the marker as its own.
        case takenOver
        /// Another writer's, named.
        case other(String)
    }

    private func markerWriter(_ snapshot: SyncSnapshot, marker: RemoteFile?, listedFiles: Int) async throws -> MarkerWriter {
        guard let check = snapshot.writer, let marker else { return .ours }
        if let id = marker.remoteId, try state.meta(Self.ownMarkerKey) == "\(marker.size) \(id)" { return .ours }
        // A marker larger than any backup of this listing can need is not one of ours to read.
        guard marker.size <= Int64(Probe.markerSizeLimit(listedFiles: listedFiles)) else { return .takenOver }
        let bytes: Data
        do {
            bytes = try await storage.readBytes(markerPath)
        } catch let error as CloudError where error.kind == .notFound {
            return .takenOver  // listed but gone: nobody's marker to respect
        }
        guard let writer = check.read(bytes) else { return .takenOver }
        if writer == check.id { return .ours }
        if writer == check.adopted || check.takeOver { return .takenOver }
        return .other(writer)
    }

    /// - Parameters:
    ///   - remoteMarker: the listed marker, if any.
    ///   - remoteFiles: the listed files, the marker's path among them or not (passed over).
    private func makePlan(
        _ snapshot: SyncSnapshot, remoteMarker: RemoteFile?, remoteFiles: RemoteFileList, providerKey: String?,
        writer: MarkerWriter = .ours
    ) throws -> Plan {

        // Rule 3: the provider's identity, else the marker's remote id, else "".
        let identity = providerKey ?? remoteMarker?.remoteId ?? ""
        let change: Plan.IdentityChange
        switch try state.identity() {
        case nil: change = .bind
        case let stored? where stored != identity: change = .reset
        default: change = .none
        }
        let syncedBefore = try state.lastSync() != nil
        let everSynced = change == .reset ? false : syncedBefore

        let staleFlag = try state.meta(Self.markerStaleKey) != nil
        let writtenDigest = change == .reset ? nil : try state.meta(Self.treeDigestKey)

        // Three lists sorted by the paths' bytes, joined by merging rather than hashing: a
        // large tree that changed nothing spends its time here. Paths are compared as bytes,
        // so two names that differ only in Unicode normalisation stay two files. The state's
        // entries are read as a stream in its path order, never all held at once.
        let remote = remoteFiles.sortedByPath()
        // The listed files but the marker, which the guards count.
        let remoteCount = remote.count - remote.indices.count { remote.comparePath(at: $0, with: markerPath) == 0 }
        var merge = PlanMerge(snapshot: snapshot, remote: remote, markerPath: markerPath, storage: storage)
        if change != .reset { try state.forEachSortedEntry { merge.stored($0) } }
        merge.finish()
        let (drop, adopt, held, deletes, unchanged, kept) = (merge.drop, merge.adopt, merge.held, merge.deletes, merge.unchanged, merge.kept)
        let (recordTimes, metadataChanges) = (merge.recordTimes, merge.metadataChanges)
        var uploadIndices = merge.uploadIndices

        // Rule 7: size-compared first, each kind in snapshot order.
        uploadIndices.sort()
        let uploads = uploadIndices.filter { !snapshot.entries.isHashCompared(at: $0) }
            + uploadIndices.filter { snapshot.entries.isHashCompared(at: $0) }

        var refusal: UnavailableReason?
        // Beyond the contract, the remote-missing guard: a remote this profile completed a sync
        // to, that now holds no marker (an unmounted disk's bare mount point, empty or with a
        // stray file; another disk mounted in its place), is not written: a completed sync
        // always leaves its marker. A remote that lost only the marker but holds the backup's
        // files gets it back (rule 5). It holds while the identity is the same or can no longer be
        // told (a mount point has no volume id); a provider naming another identity is an
        // account switch.
        if policy.guardMissingRemote, !snapshot.allowMissingRemote, remoteMarker == nil, held == 0, syncedBefore,
            change != .reset || providerKey == nil
        {
            refusal = .remoteMissing
        } else if policy.guardEmptyOverExisting, snapshot.isEmpty, !everSynced, remoteCount > 0 {
            // Rule 4: the empty guard, before the writer and shrink guards.
            refusal = .restorePending
        } else if case .other(let name) = writer {
            // Beyond the contract, the writer guard: another profile's backup is not ours to mirror over.
            refusal = .otherWriter(writer: name)
        } else if let shrink = policy.shrinkGuard, !snapshot.allowShrink {
            // Rule 11: the shrink guard.
            let count = remoteCount
            if count >= shrink.minRemoteEntries, shrink.exceeded(deletes: deletes.count, known: count) {
                refusal = .shrinkSuspected(deletes: deletes.count, known: count)
            }
        }
        // Beyond the contract, the change guard, beside the shrink guard: every file rewritten in
        // place keeps the names, sizes and count, which no shrink guard sees.
        if refusal == nil, let change = policy.changeGuard, !snapshot.allowChange,
           change.exceeded(replaced: merge.hashReplaced, known: merge.hashCompared)
        {
            refusal = .changeSuspected(replaces: merge.hashReplaced, known: merge.hashCompared)
        }
        let markerStale = !metadataChanges.isEmpty || staleFlag || (snapshot.treeDigest != nil && snapshot.treeDigest != writtenDigest)
        return Plan(
            identity: identity, identityChange: change, drop: drop, adopt: adopt, refusal: refusal,
            uploads: uploads, replacing: merge.replacing, deletes: deletes,
            markerNeeded: !uploads.isEmpty || !deletes.isEmpty || remoteMarker == nil || writer == .takenOver || markerStale,
            markerMissing: remoteMarker == nil, markerSize: remoteMarker?.size, remoteFiles: remoteCount, markerTakenOver: writer == .takenOver, unchanged: unchanged, kept: kept,
            recordTimes: recordTimes, metadataChanges: metadataChanges, markerStale: markerStale)
    }

    /// Rules 2, 5 and 6 in one pass over three streams sorted by the paths' bytes: the state's
    /// entries (fed one at a time by `stored`), the listing and the snapshot.
    ///
    /// Rule 2: what the remote lost is dropped, what the state does not know is adopted; a file
    /// whose size or version differs from the state's record is adopted afresh (the state's
    /// hash no longer describes it). The known entries, exactly the remote's files, then meet
    /// the snapshot as they come (rule 5's diff), and known entries the snapshot lacks are
    /// deleted (rule 6): never the marker, never an Absent entry, which counts as present,
    /// never one the snapshot keeps (asked of the listing's files, so it holds without the state).
    private struct PlanMerge {
        let snapshot: SyncSnapshot
        /// The listing, sorted; the marker's path in it is passed over.
        let remote: RemoteFileList
        /// The snapshot's entries (their paths compared where they are held), and their
        /// indices in path order.
        let entries: SyncEntryList
        let local: [Int]
        let markerPath: String
        let storage: any RemoteStorage

        var drop: [String] = []
        var adopt: [StateEntry] = []
        /// Listed files the state knew: the remote still holds this backup's files.
        var held = 0
        var uploadIndices: [Int] = []
        /// The uploads whose path the state holds (after rule 2's adoptions): only these have
        /// an entry to take before their new bytes land.
        var replacing = Set<Int>()
        var deletes: [String] = []
        var unchanged = 0
        var kept = 0
        var recordTimes: [(path: String, mtimeNanoseconds: Int64)] = []
        var metadataChanges: [SyncEntry] = []
        /// Known files both sides compare by content (the state holds a hash and so does the
        /// snapshot), and of them those whose content changed: the change guard's counts.
        var hashCompared = 0
        var hashReplaced = 0
        private var r = 0
        private var i = 0

        init(snapshot: SyncSnapshot, remote: RemoteFileList, markerPath: String, storage: any RemoteStorage) {
            self.snapshot = snapshot
            self.remote = remote
            entries = snapshot.entries
            local = entries.sortedByPath()
            self.markerPath = markerPath
            self.storage = storage
        }

        /// Moves `r` past listed copies of the marker.
        private mutating func skipMarker() {
            while r < remote.count && remote.comparePath(at: r, with: markerPath) == 0 { r += 1 }
        }

        /// The state's next entry, in path order.
        mutating func stored(_ entry: StateEntry) {
            skipMarker()
            while r < remote.count && remote.comparePath(at: r, with: entry.path) < 0 {
                adoptNextListed()
                skipMarker()
            }
            var listed = false
            while r < remote.count && remote.comparePath(at: r, with: entry.path) == 0 {
                let file = r
                r += 1
                if r < remote.count && remote.comparePaths(r, file) == 0 { continue }  // a duplicate listing: the last counts
                listed = true
                held += 1
                let size = remote.size(at: file)
                if entry.size == size, entry.remoteId == nil || !remote.hasRemoteId(at: file) || remote.remoteId(at: file, is: entry.remoteId) {
                    known(entry)
                } else if entry.size == size, let recorded = entry.remoteId, let id = remote.remoteId(at: file),
                          storage.isSameVersion(recorded: recorded, listed: remote[file]) {
                    var refreshed = entry  // an id of an older form: recorded afresh, hash kept
                    refreshed.remoteId = id
                    adopt.append(refreshed)
                    known(refreshed)
                } else {
                    adoptFile(file)
                }
            }
            if !listed { drop.append(entry.path) }
        }

        /// After the state's last entry.
        mutating func finish() {
            skipMarker()
            while r < remote.count {
                adoptNextListed()
                skipMarker()
            }
            while let index = nextLocal() {
                i += 1
                compare(index, with: nil)
            }
        }

        private mutating func adoptNextListed() {
            let file = r
            r += 1
            if r < remote.count && remote.comparePaths(r, file) == 0 { return }  // a duplicate listing
            adoptFile(file)
        }

        private mutating func adoptFile(_ file: Int) {
            let adopted = StateEntry(path: remote.path(at: file), size: remote.size(at: file), digest: nil, remoteId: remote.remoteId(at: file))
            adopt.append(adopted)
            known(adopted)
        }

        /// The next known entry (a remote file, with what the state knows of it), in path order.
        private mutating func known(_ current: StateEntry) {
            while let index = nextLocal() {
                let order = entries.comparePath(at: index, with: current.path)
                if order > 0 { break }
                i += 1
                compare(index, with: order == 0 ? current : nil)
                if order == 0 { return }
            }
            if snapshot.keep(current.path) { kept += 1 } else { deletes.append(current.path) }
        }

        /// The snapshot's next entry index in path order, not taken: the marker is the
        /// engine's, and a repeated path counts once (the first wins).
        private mutating func nextLocal() -> Int? {
            while i < local.count {
                if entries.pathEquals(local[i], markerPath) || (i > 0 && entries.comparePaths(local[i - 1], local[i]) == 0) {
                    i += 1
                    continue
                }
                return local[i]
            }
            return nil
        }

        /// Rule 5 for one snapshot entry and the known entry of its path, if any.
        private mutating func compare(_ index: Int, with match: StateEntry?) {
            // Its fields without its path: a String is made only for an entry that needs one.
            let entry = entries.pathless(at: index)
            if case .absent = entry.source { return }
            // Size-compared: the size, and the mtime recorded at upload where one is recorded.
            // A hash to come is learnt from the upload: the file is sent whatever the state holds.
            let changed = entry.hashToCome || entry.digest.map { match?.digest != $0 } ?? (match == nil || match?.size != entry.size
                || (entry.mtimeNanoseconds != nil && match?.mtimeNanoseconds != nil && match?.mtimeNanoseconds != entry.mtimeNanoseconds))
            if changed {
                uploadIndices.append(index)
                if match != nil { replacing.insert(index) }
            } else {
                unchanged += 1
            }
            if entry.digest != nil, match?.digest != nil {
                hashCompared += 1
                if changed { hashReplaced += 1 }
            }
            if !changed, let metadata = entry.metadata, match?.metadata != metadata { metadataChanges.append(entries[index]) }
            if !changed, entry.digest == nil, let mtime = entry.mtimeNanoseconds, match?.mtimeNanoseconds == nil {
                recordTimes.append((entries.path(at: index), mtime))
            }
        }
    }

    private enum Beginning {
        case stop(UnavailableReason)
        case failed(CloudError)
        case plan(Plan, providerKey: String?)
    }

    /// The start every run and preview shares: the gate (rule 1) and the hold before the
    /// remote is touched, then the listing (rule 2) and the identity (rule 3), then the plan.
    private func begin(_ snapshot: SyncSnapshot) async throws -> Beginning {
        if let reason = await gateReason() { return .stop(reason) }
        if case .held(let reason) = try state.hold() { return .stop(.writeHeld(reason: reason)) }
        let files: RemoteFileList
        let marker: RemoteFile?
        let providerKey: String?
        let writer: MarkerWriter
        do {
            // A file listed under a spelling no request can name is not the backup's: left alone.
            let listed = try await storage.list()
            let markerIndex = listed.indices.first { listed.comparePath(at: $0, with: markerPath) == 0 && !listed.foreignSpelling(at: $0) }
            marker = markerIndex.map { listed[$0] }
            // The marker stays in the list (the plan passes over it); foreign spellings, which
            // are rare, are taken out (a copy only then).
            files = listed.indices.contains(where: listed.foreignSpelling(at:)) ? listed.removing(where: listed.foreignSpelling(at:)) : listed
            providerKey = try await storage.identityKey()
            writer = try await markerWriter(snapshot, marker: marker, listedFiles: files.count + (markerIndex == nil ? 1 : 0))
        } catch {
            return .failed(try cloudError(error))
        }
        let plan = try makePlan(snapshot, remoteMarker: marker, remoteFiles: files, providerKey: providerKey, writer: writer)
        return .plan(plan, providerKey: providerKey)
    }

    /// What `sync(snapshot)` would do now, without writing to the remote or the state:
    /// for `--dry-run` and `status`.
    public func preview(_ snapshot: SyncSnapshot) async throws -> SyncPreviewOutcome {
        let plan: Plan
        switch try await begin(snapshot) {
        case .stop(let reason): return .unavailable(reason)
        case .failed(let error): return .failed(error)
        case .plan(let planned, _): plan = planned
        }
        if let refusal = plan.refusal { return .unavailable(refusal) }
        return .wouldRun(SyncPreview(
            uploads: plan.uploads.map { snapshot.entries[$0] }, deletes: plan.deletes, markerUpload: plan.markerNeeded,
            unchanged: plan.unchanged, identityReset: plan.identityChange == .reset, kept: plan.kept))
    }

    /// Uploads `entries` with up to `transfers` in flight, recording each in the state as it
    /// lands (rule 7). Returns the outcome that ends the run early: a failed put, or a hold
    /// set meanwhile; uploads already in flight then finish and are recorded, so the state
    /// always matches what the remote holds. Cancellation is thrown the same way.
    ///
    /// `transfers` workers each take the next file in snapshot order, upload it and record it,
    /// then take the next: no task and no hand-off between threads per file (on a folder remote,
    /// whose writes never suspend, a task per file cost four or five futex calls a file). A
    /// worker lets the others, and the progress output, have its thread every few files.
    private func uploadPhase(
        _ indices: ArraySlice<Int>, of snapshot: SyncSnapshot, replacing: Set<Int>, keeper: VersionKeeper?, report: inout SyncReport,
        done: inout Int,
        total: Int, onProgress: @escaping SyncProgress
    ) async throws -> SyncOutcome? {
        let root = snapshot.localRoot
        /// A replace whose old file could not be kept first: skipped.
        struct NotKept: Error { let error: any Error }
        /// The old file was no longer at its path (moved into the versions, or gone since the
        /// listing) when the upload failed.
        struct MovedThenFailed: Error { let error: any Error }
        /// What the workers share, under one lock: the next file to take and what the run did.
        struct Shared {
            var next: Int
            var stop: SyncOutcome?
            var cancelled = false
            var report: SyncReport
            var done: Int
        }
        let phase = Locked(Shared(next: indices.startIndex, report: report, done: done))
        defer { phase.mutex.withLock { (report, done) = ($0.report, $0.done) } }

        /// The next file in snapshot order, and the state's entry it replaces (rule 8 across a
        /// kill: the state stops claiming a file's old bytes before its new ones start landing,
        /// so a kill mid-upload leaves it unknown, adopted afresh next run); nil once the run
        /// stops (a hold, cancellation, a failed put) or every file is taken.
        @Sendable func take(_ run: inout Shared) throws -> (index: Int, entry: SyncEntry, previous: StateEntry?)? {
            guard run.stop == nil, !run.cancelled, run.next < indices.endIndex else { return nil }
            do {
                if let held = try checkBeforeWrite(run.report) {
                    run.stop = held
                    return nil
                }
            } catch is CancellationError {
                run.cancelled = true
                return nil
            }
            let index = indices[run.next]
            run.next += 1
            let entry = snapshot.entries[index]
            return (index: index, entry: entry, previous: replacing.contains(index) ? try state.take(entry.path) : nil)
        }

        /// Keeps the file being replaced first (one that cannot be kept is not replaced), then uploads.
        @Sendable func send(_ entry: SyncEntry, replacing previous: StateEntry?) async -> Result<Sent, any Error> {
            var stillThere = true
            if let keeper, let previous {
                do {
                    stillThere = try await keeper.keep(entry.path, size: previous.size, deleting: false)
                } catch {
                    return .failure(NotKept(error: error))
                }
            }
            do {
                return .success(try await self.upload(entry, root: root))
            } catch {
                return .failure(stillThere ? error : MovedThenFailed(error: error))
            }
        }

        /// Records how one upload ended; a failure that ends the run sets `stop` (the first wins).
        @Sendable func record(
            _ index: Int, _ entry: SyncEntry, _ answer: Result<Sent, any Error>, previous: StateEntry?, in run: inout Shared
        ) throws {
            var previous = previous
            var result = answer
            if case .failure(let moved as MovedThenFailed) = result {
                previous = nil  // the remote no longer holds the old file at its path: the state must not claim it
                result = .failure(moved.error)
            }
            switch result {
            case .success(let sent):
                let file = sent.file
                // A hash to come is the hash of the bytes the upload read and sent.
                try state.put(StateEntry(
                    path: entry.path, size: file.size, digest: sent.fingerprint?.digest ?? entry.digest, remoteId: file.remoteId,
                    mtimeNanoseconds: entry.mtimeNanoseconds, metadata: entry.metadata))
                if let fingerprint = sent.fingerprint {
                    run.report.hashedWhileSending += 1
                    snapshot.hashLearnt(index, fingerprint)
                }
                run.report.uploaded.append(entry.path)
                run.report.uploadedBytes += file.size
            case .failure(let error as LocalFileError):
                // Deleted or made unreadable since the scan: skipped, state as it was (the
                // remote still holds the old bytes), and the next run picks it up again.
                if let previous { try state.put(previous) }
                run.report.sourceFailures.append(error)
            case .failure(is CancellationError):
                run.cancelled = true
                return
            case .failure(let notKept as NotKept) where notKept.error is CancellationError:
                if let previous { try state.put(previous) }
                run.cancelled = true
                return
            case .failure(let notKept as NotKept):
                if let previous { try state.put(previous) }
                let error = try cloudError(notKept.error)
                if [.offline, .authRevoked, .notAvailable].contains(error.kind) {
                    if run.stop == nil { run.stop = .failed(error, run.report) }
                    return
                }
                // Skipped this run, retried by the next: the remote still holds the old file.
                run.report.keepFailures.append(KeepFailure(path: entry.path, deleting: false, error: error))
            case .failure(let error):
                if run.stop == nil { run.stop = .failed(try cloudError(error), run.report) }
                return
            }
            run.done += 1
            onProgress(run.done, total)
        }

        try await Workers.run(
            min(transfers, indices.count), over: phase, take: take,
            work: { file in await send(file.entry, replacing: file.previous) },
            record: { file, answer, run in try record(file.index, file.entry, answer, previous: file.previous, in: &run) })
        let (cancelled, stop, finalReport) = phase.mutex.withLock { ($0.cancelled, $0.stop, $0.report) }
        if cancelled { throw CancellationError() }
        if case .failed(let error, _) = stop { return .failed(error, finalReport) }
        // A hold: said again with the uploads that were in flight when it was seen.
        switch stop {
        case .unavailable(.writeHeld(let reason))?, .held(let reason, _)?: return Self.heldOutcome(reason, finalReport)
        default: return stop
        }
    }

    /// What stops a run before its next write: cancellation (thrown) or a hold set since
    /// the run started, possibly by another process.
    private func checkBeforeWrite(_ report: SyncReport) throws -> SyncOutcome? {
        try Task.checkCancellation()
        if case .held(let reason) = try state.hold() { return Self.heldOutcome(reason, report) }
        return nil
    }

    /// A run a hold stopped: `held` with what it wrote, or `unavailable` when it wrote nothing.
    private static func heldOutcome(_ reason: String, _ report: SyncReport) -> SyncOutcome {
        report.wroteAnything ? .held(reason: reason, report) : .unavailable(.writeHeld(reason: reason))
    }

    /// What one upload landed, and for a file whose hash was to come, its fingerprint as sent.
    private struct Sent: Sendable {
        var file: RemoteFile
        var fingerprint: Fingerprint?
    }

    private func upload(_ entry: SyncEntry, root: String) async throws -> Sent {
        if case .bytes(let data) = entry.source { return Sent(file: try await storage.writeBytes(entry.path, data)) }
        guard let localPath = entry.localPath(root: root) else {
            preconditionFailure("absent entries are filtered out of the uploads")
        }
        if entry.hashToCome {
            let sent = try await storage.writeFileHashing(entry.path, from: localPath, onBytes: { _ in })
            return Sent(file: sent.file, fingerprint: sent.fingerprint)
        }
        return Sent(file: try await storage.writeFile(entry.path, from: localPath))
    }

    private func gateReason() async -> UnavailableReason? {
        await availability().unavailableReason
    }

    /// Maps what a provider threw onto a CloudError; cancellation and state errors pass through.
    private func cloudError(_ error: any Error) throws -> CloudError {
        switch error {
        case let error as CloudError: return error
        case is CancellationError: throw error
        case let error as StateStoreError: throw error
        default: return CloudError(.transport, String(describing: error))
        }
    }

    // MARK: Probe

    /// Looks at the remote without writing: never throws for cloud failures. In order: the
    /// availability gate, a listing failure, no files, no readable marker, found.
    public func probe() async -> ProbeOutcome {
        await Probe(storage: storage, markerPath: markerPath, availability: availability).run()
    }
}
