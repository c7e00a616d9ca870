// The sync job: lock the profile, scan the source (fingerprint cache from the state), add
// what is kept remotely, build the marker, and run (or preview) the engine.

import BackupEngine
import BackupStorage
import BackupTree
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What `backup sync` was asked to do.
public struct SyncRequest: Sendable {
    /// `--yes`: consent to the first write to this remote.
    public var consent = false
    /// `--allow-shrink`: lift the shrink guard for this run.
    public var allowShrink = false
    /// `--allow-change`: lift the change guard for this run.
    public var allowChange = false
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
    /// Symbolic links and folders found (backed up as the marker's entries).
    public var symlinks: Int
    public var folders: Int

    /// The run found no credentials for its remote, or the remote refused them.
    public var lacksCredentials: Bool {
        switch result {
        case .ran(.unavailable(.noAccount)), .previewed(.unavailable(.noAccount)): true
        case .ran(.failed(let error, _)), .previewed(.failed(let error)): error.kind == .authRevoked
        default: false
        }
    }

    /// The exit status this outcome stands for.
    public var status: ExitStatus {
        switch result {
        case .ran(.completed(let report)): report.filesLeftBehind > 0 ? .failure : .success
        case .previewed(.wouldRun): .success
        case .ran(.unavailable), .ran(.held), .previewed(.unavailable): .unavailable
        case .ran(.failed), .previewed(.failed): .failure
        }
    }
}

extension BackupApp {
    /// Runs `body` on a new thread and waits for its result without holding a thread of the
    /// concurrency pool (which has one thread a core: a long blocking call on it starves the
    /// tasks that should run beside it).
    static func onOwnThread<T: Sendable>(name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: body()) }
            thread.name = name
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    /// The consent meta key: the remote the person agreed to write to.
    static let consentKey = "consent"
    /// The writer id of a profile that is not in the config file.
    static let writerKey = "writer"
    /// The writer a restore into the source took over: the next sync writes over its marker.
    static let adoptedWriterKey = "adoptedWriter"

    /// Runs (or previews) one sync of `profile`. How a run ended (failed ones too) is kept in
    /// its state as the profile's last outcome; a preview, or a run another one kept out, is not.
    public func sync(_ profile: Profile, _ request: SyncRequest, events: @escaping JobEvents = { _ in }) async throws(AppError) -> SyncSummary {
        do {
            let summary = try await runSync(profile, request, events: events)
            if !request.dryRun { recordOutcome(profile, LastOutcome(summary, remote: profile.remote)) }
            return summary
        } catch let error where !request.dryRun && !error.isBusyProfile {
            recordOutcome(profile, LastOutcome(error))
            throw error
        }
    }

    private func runSync(_ profile: Profile, _ request: SyncRequest, events: @escaping JobEvents) async throws(AppError) -> SyncSummary {
        let lock = request.dryRun ? nil : try ProfileLock(path: paths.lockFile(profile: profile.name), profile: profile.name)
        defer { lock?.release() }
        let remote = try await openJobRemote(profile.remote, settings: profile.settings, readOnly: false, encrypted: Encryption.isOn(profile.settings))
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

        // Missing credentials are known before anything is read: no scan (of what may be a
        // million files) for a run that cannot list or write.
        if availability == .noAccount {
            let unavailable = SyncOutcome.unavailable(.noAccount)
            return SyncSummary(
                profile: profile.name, result: request.dryRun ? .previewed(.unavailable(.noAccount)) : .ran(unavailable),
                files: 0, bytes: 0, hashedFiles: 0, absent: 0, notes: [], symlinks: 0, folders: 0)
        }

        do {
            // The listing runs while the source is scanned, once the gate allows touching the
            // remote at all (rule 1) and no hold would stop the run before it lists.
            // A listing that fails (a refused password, an unreachable server) stops the scan:
            // the run cannot go on, and reading a million files first would only delay saying so.
            let counter = ScanCounter()
            var base = remote.storage
            if await gate() == .available, try state.hold() == .none {
                base = PrefetchedListing(base) { counter.stop() }
            }
            events(.phase("scanning"))
            var options = ScanOptions(excludes: patterns.excludes, sizeCompared: patterns.sizeCompared)
            options.counter = counter
            // A first sync reads each file once: where no recorded hash could find a file
            // unchanged, the scan leaves a new file's hash to its upload, which reads it anyway.
            options.hashNewFilesOnUpload = try !request.dryRun && state.holdsNoHashes()
            let scanner = TreeScanner(root: profile.source, options: options)
            // The running counts, told ten times a second while the scan runs on this thread.
            let ticker = Task.detached {
                var last = (files: -1, hashed: -1, hashedBytes: Int64(-1))
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(100))
                    let now = counter.reading
                    if !Task.isCancelled && now != last { events(.scanning(files: now.files, hashed: now.hashed, hashedBytes: now.hashedBytes)) }
                    last = now
                }
            }
            defer { ticker.cancel() }
            let cache = try state.fingerprintCache()
            // The scan blocks its thread for as long as it reads: it runs on a thread of its
            // own, so that the tasks beside it (the listing, whose failure stops it) are not
            // kept waiting for a thread of the pool. Cancelled (Ctrl-C, a closed interface), it
            // stops before its next file.
            let scanned = await withTaskCancellationHandler {
                await Self.onOwnThread(name: "backup-scan") { Result { () throws(ScanError) in try scanner.scan(cache: cache) } }
            } onCancel: {
                counter.stop()
            }
            // Stopped, and waited for, before the scan's end is told: no count comes after it.
            ticker.cancel()
            await ticker.value
            if case .failure(let stopped) = scanned, stopped.kind == .stopped {
                try Task.checkCancellation()
                // The listing's own error, as the engine would have met it first; nothing was written.
                var failure = CloudError(.transport, "the remote's listing failed")
                do {
                    _ = try await base.list()
                } catch let error as CloudError {
                    failure = error
                } catch {
                    failure = CloudError(.transport, String(describing: error))
                }
                // The counts are how far the scan came (files found, and of them read).
                let reached = counter.reading
                return SyncSummary(
                    profile: profile.name, result: request.dryRun ? .previewed(.failed(failure)) : .ran(.failed(failure, SyncReport())),
                    files: reached.files, bytes: 0, hashedFiles: reached.hashed, absent: 0, notes: [], symlinks: 0, folders: 0)
            }
            var scan = try scanned.get()
            events(.scanned(
                files: scan.files, bytes: scan.bytes, hashedFiles: scan.hashedFiles,
                hashedWhenSent: scan.entries.indices.count { scan.entries.hashToCome(at: $0) }))
            for note in scan.notes { events(.note(path: note.path, message: note.message)) }
            if !request.dryRun {
                try state.updateFingerprints(scan.newFingerprints, removing: scan.removedFingerprints)
            }
            // Written: not held for the rest of the run (a first scan's are every file's).
            scan.newFingerprints = []
            scan.removedFingerprints = []

            // What stays on the remote though the source lacks it is decided by the engine
            // from its listing, never from the state cache alone: keep_remotely patterns,
            // everything below a folder that cannot be read now (a permission problem never
            // deletes), and what a restore into the source has not restored yet.
            let entries = scan.entries
            let absent = entries.count { if case .absent = $0.source { true } else { false } }
            var pendingRestore = try state.restorePending()
            if !request.dryRun && !pendingRestore.isEmpty {
                // A file back in the source is the source's again.
                let present = Set(entries.compactMap { $0.isLocalFile ? $0.path : nil })
                let back = pendingRestore.filter(present.contains)
                try state.removeRestorePending(back)
                pendingRestore.removeAll { present.contains($0) }
            }
            let keep = Self.keepPredicate(
                keepRemotely: patterns.keepRemotely, unreadableFolders: scan.unreadableFolders, pendingRestore: pendingRestore)
            let writerProfile = profile
            let writer = WriterCheck(
                id: profile.writer ?? "", takeOver: request.takeOver, adopted: try state.meta(Self.adoptedWriterKey),
                read: { bytes in try? Marker.header(bytes, maxContentSize: max(1 << 20, bytes.count * 32)).writer })
            let tree = scan.treeEntries
            var hardLinks: [String: String] = [:]
            for entry in entries {
                if case .hardLink(let first) = entry.kind { hardLinks[entry.path] = first }
            }
            let links = hardLinks
            // Folders and links the scan could not see (below a folder it cannot read, kept
            // remotely, or not restored yet by a restore into the source) keep the record the
            // marker written last has of them: a permission problem never deletes.
            let unreadable = Set(scan.unreadableFolders)
            let restoreIncomplete = !pendingRestore.isEmpty
            let markerState = state
            // The last marker's folders and links this scan did not see, read from the state
            // once, and only by a run that writes its marker: those still kept go into the new
            // marker, the others are gone from the source (and removed from a mirror).
            let unseen = Mutex<(kept: [TreeEntry], gone: [TreeEntry])?>(nil)
            let unseenTree: @Sendable () throws -> (kept: [TreeEntry], gone: [TreeEntry]) = {
                try unseen.withLock { cached in
                    if let cached { return cached }
                    let seen = Set(tree.map(\.path))
                    var split: (kept: [TreeEntry], gone: [TreeEntry]) = ([], [])
                    for entry in try markerState.treeEntries() where !seen.contains(entry.path) {
                        if restoreIncomplete || unreadable.contains(entry.path) || keep(entry.path) {
                            split.kept.append(entry)
                        } else {
                            split.gone.append(entry)
                        }
                    }
                    cached = split
                    return split
                }
            }
            let writtenTree = Mutex<[TreeEntry]?>(nil)
            // The marker is made into a file beside the state (it is tens of megabytes for a
            // large tree) and uploaded from there.
            let markerFolder = paths.stateFolder(profile: profile.name)
            var snapshot = SyncSnapshot(
                entries: entries, writeMarker: { held in
                    let carried = try unseenTree().kept
                    let full = carried.isEmpty ? tree : ByteOrder.sorted(tree + carried, by: \.path)
                    writtenTree.withLock { $0 = full }
                    return try BackupApp.markerFile(writerProfile, held: held, tree: full, hardLinks: links, in: markerFolder)
                },
                isEmpty: scan.isEmpty, allowShrink: request.allowShrink, keep: keep,
                allowMissingRemote: request.allowMissingRemote, writer: writer)
            snapshot.localRoot = scan.localRoot
            let learnt = LearntFingerprints(state: state, entries: entries)
            snapshot.hashLearnt = { entry, fingerprint in learnt.add(entry, fingerprint) }
            snapshot.treeDigest = Self.treeDigest(tree, hardLinks: hardLinks)
            snapshot.tree = tree
            snapshot.treeRemoved = { (try? unseenTree())?.gone ?? [] }

            let meter = TransferMeter()
            let storage = meter.observing(base)
            snapshot.allowChange = request.allowChange
            let engine = SyncEngine(
                storage: storage, state: state, policy: SyncPolicy(changeGuard: profile.changeGuard), transfers: profile.transfers,
                versions: profile.versions, availability: gate)

            var summary = SyncSummary(
                profile: profile.name, result: .previewed(.unavailable(.noAccount)), files: scan.files, bytes: scan.bytes,
                hashedFiles: scan.hashedFiles, absent: absent, notes: scan.notes, symlinks: scan.symlinks,
                folders: scan.treeEntries.count - scan.symlinks)
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
            // Steps from the engine, bytes from the meter: each event carries the latest of both.
            let progress = meter.progress { (steps: (done: Int, total: Int), reading) in
                events(.syncProgress(done: steps.done, total: steps.total, transfer: reading))
            }
            let outcome: SyncOutcome
            do {
                outcome = try await engine.sync(snapshot, onProgress: { done, total in progress((done, total)) }, onStage: { stage in
                    switch stage {
                    case .uploading(_, let bytes), .writingMarker(let bytes): meter.expect(bytes)
                    case .deleting, .updatingMetadata: break
                    }
                    events(.syncStage(stage))
                })
            } catch {
                try? learnt.flush()
                throw error
            }
            try learnt.flush()
            switch outcome {
            case .completed(let report), .failed(_, let report), .held(_, let report):
                summary.absent += report.kept
                summary.hashedFiles += report.hashedWhileSending
            case .unavailable: break
            }
            summary.result = .ran(outcome)
            // The remote's marker names this profile now: a take-over by restore is done.
            if case .completed(let report) = outcome, report.markerUploaded { try state.setMeta(Self.adoptedWriterKey, nil) }
            // The folders and links the uploaded marker holds, for the next marker to carry over.
            if case .completed(let report) = outcome, report.markerUploaded, let written = writtenTree.withLock({ $0 }) {
                try state.replaceTree(written)
            }
            Self.reportListingNotes(remote.storage, events)
            return summary
        } catch let error as ScanError {
            throw AppError(error.kind == .ignoreFileInvalid ? .usage : .failure, error.message)
        } catch {
            throw AppError.from(error)
        }
    }

    /// The fingerprints of the files whose hash came from their upload, written to the state a
    /// batch at a time as the uploads land (never all held: a first sync has one per file).
    /// A file that changed between the scan and its upload is left out: its next scan reads it.
    final class LearntFingerprints: Sendable {
        let state: StateStore
        let entries: SyncEntryList
        private let pending = Mutex<[FingerprintUpdates.Item]>([])
        static let batch = 4096

        init(state: StateStore, entries: SyncEntryList) {
            self.state = state
            self.entries = entries
        }

        func add(_ entry: Int, _ fingerprint: Fingerprint) {
            let scanned = entries.pathless(at: entry)
            guard fingerprint.size == scanned.size, fingerprint.mtimeNanoseconds == scanned.metadata?.mtimeNanoseconds else { return }
            pending.withLock { items in
                items.append(FingerprintUpdates.Item(entry: entry, fingerprint: fingerprint))
                // A batch that cannot be written is left to the next scan, which reads its files
                // again; the state's failure is met (and thrown) by the engine's next write.
                if items.count >= Self.batch { try? write(&items) }
            }
        }

        /// Writes what is left.
        func flush() throws {
            try pending.withLock { items in try write(&items) }
        }

        private func write(_ items: inout [FingerprintUpdates.Item]) throws {
            defer { items.removeAll(keepingCapacity: true) }
            try state.updateFingerprints(FingerprintUpdates(entries: entries, items: items))
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

    /// The marker for a run: the profile's groups; every file the remote holds (`held`: the
    /// state after the run's uploads, so a file whose upload was skipped keeps the hash, size
    /// and metadata of the bytes the remote still has), a hard link where `hardLinks` names
    /// a held first name; and the scan's folders and symbolic links (`tree`, sorted by path).
    /// Written in one pass over `held` and `tree` merged in path order, compressed as it goes.
    /// Owner names are looked up here, once per id.
    ///
    /// Throws `AppError.usage` for a marker that could not be read back, and the state's
    /// error when `held` cannot be read.
    /// `marker(…)` made into a new temporary file (0600) in `folder`, for the engine to upload
    /// and remove.
    static func markerFile(
        _ profile: Profile, held: HeldEntries, tree: [TreeEntry], hardLinks: [String: String], in folder: String
    ) throws -> MarkerBody {
        var template = Array((folder + "/.marker-upload.XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else {
            throw AppError.failure("cannot make a temporary file for the marker in \(folder): \(String(cString: strerror(errno)))")
        }
        let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        defer { close(fd) }
        do {
            _ = try marker(profile, held: held, tree: tree, hardLinks: hardLinks, file: fd)
            guard fsync(fd) == 0 || errno == EINVAL else {
                throw AppError.failure("cannot write the marker's temporary file \(path): \(String(cString: strerror(errno)))")
            }
        } catch {
            unlink(path)
            throw error
        }
        return .file(path)
    }

    /// - Parameter file: a descriptor the marker's bytes are written to instead (then it
    ///   returns no bytes).
    @Sendable static func marker(
        _ profile: Profile, held: HeldEntries, tree: [TreeEntry] = [], hardLinks: [String: String] = [:], file: Int32? = nil
    ) throws -> Data {
        let names = OwnerNames()
        let groups = profile.groups.enumerated().map { index, group in
            MarkerGroup(name: group.name, required: group.required, patterns: group.patterns, order: index)
        }
        do {
            let writer = try Marker.Writer(groups: groups, writer: profile.writer, linkTargets: hardLinks.values, file: file)
            var next = 0
            func writeTree(before path: String?) throws {
                while next < tree.count, path.map({ ByteOrder.compare(tree[next].path, $0) <= 0 }) ?? true {
                    let entry = tree[next]
                    next += 1
                    // A folder or link where the remote still holds a file (kept remotely, or not
                    // deleted yet) is left out: the file is what the remote has at that path.
                    if let path, ByteOrder.compare(entry.path, path) == 0 { continue }
                    try writer.append(path: entry.path, entry: MarkerEntry(kind: entry.kind, metadata: names.named(entry.metadata)), hash: nil)
                }
            }
            try held.forEach { entry in
                try writeTree(before: entry.path)
                guard let metadata = entry.metadata else {
                    // The state knows no metadata of it (a file kept on the remote that this
                    // machine does not have): its hash alone, after the entries.
                    if let digest = entry.digest { try writer.appendHash(path: entry.path, hash: digest) }
                    return
                }
                var kind = EntryKind.file
                // A hard link only of a first name the remote holds with the same bytes, written
                // as a file entry (one with metadata: a first name sorts before its other names);
                // else it is a file of its own.
                if let first = hardLinks[entry.path], let original = writer.fileEntry(linkedTo: first), original.hash != nil,
                   original.hash == entry.digest, original.size == entry.size {
                    kind = .hardLink(to: first)
                }
                try writer.append(
                    path: entry.path, entry: MarkerEntry(kind: kind, size: entry.size, metadata: names.named(metadata)), hash: entry.digest)
            }
            try writeTree(before: nil)
            return try writer.finish()
        } catch let error as MarkerError {
            throw AppError.usage("profile \"\(profile.name)\": cannot write the marker: \(error.description)")
        }
    }

    /// A digest of the folders, symbolic links and hard-link pairs of a scan: what the marker
    /// holds besides the files' own records, compared with the marker written last.
    static func treeDigest(_ tree: [TreeEntry], hardLinks: [String: String]) -> String {
        var text: [UInt8] = []
        for entry in tree {
            let meta = entry.metadata
            switch entry.kind {
            case .symlink(let target): text += Array("L\u{0}\(entry.path)\u{0}\(target)".utf8)
            default: text += Array("D\u{0}\(entry.path)".utf8)
            }
            text += Array("\u{0}\(meta.mode) \(meta.mtimeNanoseconds) \(meta.uid) \(meta.gid)\n".utf8)
        }
        for (path, first) in ByteOrder.sorted(Array(hardLinks), by: \.key) {
            text += Array("K\u{0}\(path)\u{0}\(first)\n".utf8)
        }
        return SHA256Hasher.hex(Data(text))
    }
}

/// User and group names by id, looked up once each (getpwuid_r, getgrgid_r).
final class OwnerNames {
    private var users: [UInt32: String?] = [:]
    private var groups: [UInt32: String?] = [:]

    /// `metadata` with the names of its uid and gid on this machine.
    func named(_ metadata: EntryMetadata) -> EntryMetadata {
        var named = metadata
        named.user = user(metadata.uid)
        named.group = group(metadata.gid)
        return named
    }

    func user(_ uid: UInt32) -> String? {
        if let known = users[uid] { return known }
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        let name: String? = getpwuid_r(uid_t(uid), &entry, &buffer, buffer.count, &result) == 0 && result != nil && entry.pw_name != nil
            ? String(cString: entry.pw_name) : nil
        users[uid] = name
        return name
    }

    func group(_ gid: UInt32) -> String? {
        if let known = groups[gid] { return known }
        var entry = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>?
        var buffer = [CChar](repeating: 0, count: 4096)
        let name: String? = getgrgid_r(gid_t(gid), &entry, &buffer, buffer.count, &result) == 0 && result != nil && entry.gr_name != nil
            ? String(cString: entry.gr_name) : nil
        groups[gid] = name
        return name
    }
}
