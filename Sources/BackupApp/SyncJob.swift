// The sync job: lock the profile, scan the source (fingerprint cache from the state), add
// what is kept remotely, build the marker, and run (or preview) the engine.

import BackupEngine
import BackupStorage
import BackupTree
import Foundation

/// What `backup sync` was asked to do.
public struct SyncRequest: Sendable {
    /// `--yes`: consent to the first write to this remote.
    public var consent = false
    /// `--allow-shrink`: lift the shrink guard for this run.
    public var allowShrink = false
    /// `--dry-run`: report what would happen, write nothing.
    public var dryRun = false
    /// `--allow-missing-remote`: lift the remote-missing guard for this run.
    public var allowMissingRemote = false
    /// `--take-over`: write over another writer's backup, making this profile its writer.
    public var takeOver = false

    public init(consent: Bool = false, allowShrink: Bool = false, dryRun: Bool = false,
                allowMissingRemote: Bool = false, takeOver: Bool = false) {
        self.consent = consent
        self.allowShrink = allowShrink
        self.dryRun = dryRun
        self.allowMissingRemote = allowMissingRemote
        self.takeOver = takeOver
    }
}

/// How a sync job ended.
public struct SyncSummary: Sendable {
    public enum Result: Sendable, Equatable {
        case ran(SyncOutcome)
        case previewed(SyncPreviewOutcome)
    }

    public var profile: String
    public var result: Result
    /// Regular files found in the source.
    public var files: Int
    public var bytes: Int64
    /// Files read and hashed this run (the rest came from the fingerprint cache).
    public var hashedFiles: Int
    /// Files kept on the remote though absent or unreadable here.
    public var absent: Int
    public var notes: [ScanNote]
    public var symlinksSkipped: Int

    /// The exit status this outcome stands for.
    public var status: ExitStatus {
        switch result {
        case .ran(.completed), .previewed(.wouldRun): .success
        case .ran(.unavailable), .previewed(.unavailable): .unavailable
        case .ran(.failed), .previewed(.failed): .failure
        }
    }
}

extension BackupApp {
    /// The consent meta key: the remote the person agreed to write to.
    static let consentKey = "consent"
    /// The writer id of a profile that is not in the config file.
    static let writerKey = "writer"
    /// The writer a restore into the source took over: the next sync writes over its marker.
    static let adoptedWriterKey = "adoptedWriter"

    /// Runs (or previews) one sync of `profile`.
    public func sync(_ profile: Profile, _ request: SyncRequest, events: @escaping JobEvents = { _ in }) async throws(AppError) -> SyncSummary {
        let lock = request.dryRun ? nil : try ProfileLock(path: paths.lockFile(profile: profile.name), profile: profile.name)
        defer { lock?.release() }
        let remote = try Remotes.open(profile.remote, settings: profile.settings, environment: environment)
        let state = try openState(profile)
        let patterns = try Self.compilePatterns(profile)
        var profile = profile
        profile.writer = try writerId(profile, state: state, persist: !request.dryRun)

        let consentGiven = request.consent
        let remoteURL = remote.displayURL
        let availability = remote.availability
        let gate: @Sendable () async -> Availability = {
            if availability != .available { return availability }
            if (try? state.meta(BackupApp.consentKey)) == remoteURL { return .available }
            return consentGiven ? .available : .needsConsent
        }

        do {
            // The listing runs while the source is scanned, once the gate allows touching the
            // remote at all (rule 1) and no hold would stop the run before it lists.
            var base = remote.storage
            if await gate() == .available, try state.hold() == .none {
                base = PrefetchedListing(base)
            }
            events(.phase("scanning"))
            let scanner = TreeScanner(
                root: profile.source, options: ScanOptions(excludes: patterns.excludes, sizeCompared: patterns.sizeCompared))
            let scan = try scanner.scan(cache: try state.fingerprints())
            events(.scanned(files: scan.files, bytes: scan.bytes, hashedFiles: scan.hashedFiles))
            for note in scan.notes { events(.note(path: note.path, message: note.message)) }
            if !request.dryRun {
                try state.updateFingerprints(scan.newFingerprints, removing: scan.removedFingerprints)
            }

            // What stays on the remote though the source lacks it is decided by the engine
            // from its listing, never from the state cache alone: keep_remotely patterns,
            // everything below a folder that cannot be read now (a permission problem never
            // deletes), and what a restore into the source has not restored yet.
            let entries = scan.entries
            let absent = entries.count { if case .absent = $0.source { true } else { false } }
            var pendingRestore = try state.restorePending()
            if !request.dryRun && !pendingRestore.isEmpty {
                // A file back in the source is the source's again.
                let present = Set(entries.compactMap { if case .file = $0.source { $0.path } else { nil } })
                let back = pendingRestore.filter(present.contains)
                try state.removeRestorePending(back)
                pendingRestore.removeAll { present.contains($0) }
            }
            let keep = Self.keepPredicate(
                keepRemotely: patterns.keepRemotely, unreadableFolders: scan.unreadableFolders, pendingRestore: pendingRestore)
            let writerProfile = profile
            let writer = WriterCheck(
                id: profile.writer ?? "", takeOver: request.takeOver, adopted: try state.meta(Self.adoptedWriterKey),
                read: { bytes in try? Marker.decode(bytes, maxContentSize: max(1 << 20, bytes.count * 32)).writer })
            let snapshot = SyncSnapshot(
                entries: entries, makeMarker: { held in try BackupApp.marker(writerProfile, held: held) },
                isEmpty: scan.isEmpty, allowShrink: request.allowShrink, keep: keep,
                allowMissingRemote: request.allowMissingRemote, writer: writer)

            let meter = TransferMeter()
            let storage = meter.observing(base)
            let transfers = profile.settings["transfers"].flatMap(Int.init) ?? 4
            let engine = SyncEngine(storage: storage, state: state, transfers: transfers, availability: gate)

            var summary = SyncSummary(
                profile: profile.name, result: .previewed(.unavailable(.noAccount)), files: scan.files, bytes: scan.bytes,
                hashedFiles: scan.hashedFiles, absent: absent, notes: scan.notes, symlinksSkipped: scan.symlinksSkipped)
            if request.dryRun {
                events(.phase("listing"))
                let preview = try await engine.preview(snapshot)
                if case .wouldRun(let plan) = preview { summary.absent += plan.kept }
                summary.result = .previewed(preview)
                Self.reportListingNotes(remote.storage, events)
                return summary
            }
            if consentGiven && availability == .available { try state.setMeta(BackupApp.consentKey, remoteURL) }
            events(.phase("syncing"))
            let outcome = try await engine.sync(snapshot) { done, total in
                let (sent, current) = meter.reading
                events(.syncProgress(done: done, total: total, bytes: sent, current: current))
            }
            switch outcome {
            case .completed(let report), .failed(_, let report): summary.absent += report.kept
            case .unavailable: break
            }
            summary.result = .ran(outcome)
            // The remote's marker names this profile now: a take-over by restore is done.
            if case .completed(let report) = outcome, report.markerUploaded { try state.setMeta(Self.adoptedWriterKey, nil) }
            Self.reportListingNotes(remote.storage, events)
            return summary
        } catch let error as ScanError {
            throw AppError(error.kind == .ignoreFileInvalid ? .usage : .failure, error.message)
        } catch {
            throw AppError.from(error)
        }
    }

    /// Which remote files the source lacks stay on the remote: those matching keep_remotely,
    /// those below a folder that cannot be read now, and those a restore into the source has
    /// not restored yet.
    static func keepPredicate(
        keepRemotely: PatternList, unreadableFolders: [String], pendingRestore: [String]
    ) -> @Sendable (String) -> Bool {
        let unreadable = unreadableFolders.map { $0 + "/" }
        let pending = Set(pendingRestore)
        return { path in
            pending.contains(path) || unreadable.contains { path.hasPrefix($0) } || keepRemotely.matches(path)
        }
    }

    /// The marker for a run: the profile's groups, and the SHA-256 of every file the remote
    /// holds as a hash-compared upload (`held`: the state after the run's uploads, so a file
    /// whose upload was skipped keeps the hash of the bytes the remote still has).
    @Sendable static func marker(_ profile: Profile, held: [StateEntry]) throws(AppError) -> Data {
        var hashes: [String: String] = [:]
        for entry in held {
            if let hash = entry.hash { hashes[entry.path] = hash }
        }
        let groups = profile.groups.enumerated().map { index, group in
            MarkerGroup(name: group.name, required: group.required, patterns: group.patterns, order: index)
        }
        do {
            return try Marker(groups: groups, hashes: hashes, writer: profile.writer).encoded()
        } catch {
            throw .usage("profile \"\(profile.name)\": cannot write the marker: \(error.description)")
        }
    }
}
