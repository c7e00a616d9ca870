// The restore half of the contract (restore rules 1–7): a plan recorded before anything
// runs, required groups first, attempts counted, placement asked one group at a time, the
// record saved after every download and every placement, and resume revalidated by a probe.
//
// Downloads of one group run with up to `transfers` in flight; only this engine's run (the
// parent task) touches the record, the counts and the progress, one result at a time as each
// download finishes. Groups still go one after another: a group is offered to placement only
// once every download of it has ended, and no download of the next group starts before that
// (rule 3 leaves optional files untouched when a required group fails).

import Foundation
import Synchronization
#if canImport(Glibc)
import CMalloc
#endif

/// Restores a pinned backup group by group, resumable after any stop.
public final class RestoreEngine: Sendable {
    public let storage: any RemoteStorage
    public let record: RestoreRecord
    /// Where downloads are written and wait for placement.
    public let staging: any RestoreStaging
    public let markerPath: String
    /// After this many failed attempts an optional file is skipped until
    /// `resume(resetAttempts: true)`.
    public let maxAttempts: Int
    /// The tries a file gets before a run skips it, unless the engine is given another count.
    public static let defaultMaxAttempts = 3
    /// How many downloads may be in flight at once (the profile's `transfers`).
    public let transfers: Int
    private let availability: @Sendable () async -> Availability
    private let onFileFailed: @Sendable (RestoreFile, RestoreFailure) -> Void
    private let serial = AsyncMutex()

    public init(
        storage: any RemoteStorage,
        record: RestoreRecord,
        staging: any RestoreStaging,
        markerPath: String = SyncEngine.defaultMarkerPath,
        maxAttempts: Int = RestoreEngine.defaultMaxAttempts,
        transfers: Int = 1,
        availability: @escaping @Sendable () async -> Availability = { .available },
        onFileFailed: @escaping @Sendable (RestoreFile, RestoreFailure) -> Void = { _, _ in }
    ) {
        self.onFileFailed = onFileFailed
        self.storage = storage
        self.record = record
        self.staging = staging
        self.markerPath = markerPath
        self.maxAttempts = maxAttempts
        self.transfers = max(1, transfers)
        self.availability = availability
    }

    /// Rule 1: records `plan` (replacing any earlier record) and runs it.
    ///
    /// Throws only for the local record (`StateStoreError`) and cancellation; every finished
    /// step is in the record by then.
    /// The plan is taken: once it is recorded the run reads the record, and a caller that
    /// passes its last copy holds no second copy of a large plan meanwhile.
    public func start(
        _ plan: consuming RestorePlan, placement: any RestorePlacement = KeepWhereLanded(),
        onProgress: @escaping RestoreProgressHandler = { _ in }
    ) async throws -> RestoreOutcome {
        var toRecord: RestorePlan? = plan
        return try await serial.withLock {
            if let plan = toRecord.take() { try record.begin(plan) }
            return try await runFromStart(placement: placement, onProgress: onProgress)
        }
    }

    /// Rule 1 for a plan written into the record as it was made (`RestoreRecord.record`, by a
    /// planner that streams): runs it from its start.
    public func startRecorded(
        placement: any RestorePlacement = KeepWhereLanded(), onProgress: @escaping RestoreProgressHandler = { _ in }
    ) async throws -> RestoreOutcome {
        try await serial.withLock { try await runFromStart(placement: placement, onProgress: onProgress) }
    }

    /// The run of a plan just recorded. The plan, and what it was made of, is freed by now:
    /// handed back to the system before the run's own memory grows, rather than kept beside it.
    private func runFromStart(placement: any RestorePlacement, onProgress: @escaping RestoreProgressHandler) async throws -> RestoreOutcome {
        #if canImport(Glibc)
        malloc_trim(0)
        #endif
        return try await run(placement: placement, onProgress: onProgress)
    }

    /// Rule 7: revalidates the recorded plan's source with a probe, then continues from the
    /// record. `resetAttempts` forgets failed attempts, so skipped files are tried again.
    public func resume(
        resetAttempts: Bool = false, placement: any RestorePlacement = KeepWhereLanded(),
        onProgress: @escaping RestoreProgressHandler = { _ in }
    ) async throws -> RestoreOutcome {
        try await serial.withLock {
            guard let pinned = try record.source() else {
                throw StateStoreError(
                    .nothingToResume, path: record.path,
                    "there is no restore to resume in \(record.path); start one with `backup restore`")
            }
            switch await Probe(storage: storage, markerPath: markerPath, availability: availability).run() {
            case .found(_, let source, _) where source.matches(pinned): break
            case .found: return .sourceChanged
            case .none, .unavailable(.noAccount): return .sourceUnavailable
            case .unavailable: return .needsConsent
            case .notReady: return .notReady
            case .damaged: return .sourceChanged  // not the marker this restore was pinned to
            case .failed(let error) where error.kind == .notAvailable: return .notAvailable
            case .failed(let error) where error.kind == .needsConsent: return .needsConsent
            case .failed(let error): return .failed(.cloud(error))
            }
            if resetAttempts { try record.resetAttempts() }
            return try await run(placement: placement, onProgress: onProgress)
        }
    }

    // MARK: The run

    /// The files of the group a run is at, loaded from the record when it gets there (only
    /// one group's files are ever held, packed), with where each stands.
    private struct GroupFiles {
        var files = RestoreFileList()
        /// Each file's index in the record.
        var ids: [Int64] = []
        var status: [RestoreFileStatus] = []
        var attempts: [Int] = []

        init(_ group: RestoreRecord.Group, from record: RestoreRecord) throws {
            files.reserveCapacity(group.members.count)
            ids.reserveCapacity(group.members.count)
            status.reserveCapacity(group.members.count)
            attempts.reserveCapacity(group.members.count)
            try record.forEachFile(of: group) { recorded in
                files.append(recorded.file)
                ids.append(Int64(recorded.index))
                status.append(recorded.status)
                attempts.append(recorded.attempts)
            }
        }

        /// The files at `positions`, packed.
        func subset(_ positions: [Int]) -> RestoreFileList {
            if positions.count == files.count { return files }
            var subset = RestoreFileList()
            subset.reserveCapacity(positions.count)
            for position in positions { subset.append(files[position]) }
            return subset
        }
    }

    private func run(placement: any RestorePlacement, onProgress: @escaping RestoreProgressHandler) async throws -> RestoreOutcome {
        try staging.prepare()
        let groups = try record.groups()
        var run = Run(groups: groups, onProgress: onProgress)
        run.report()

        // Rule 1: prefetch is asked for every path that will be fetched, before any download
        // (page by page: the list is never held whole).
        var after: Int64?
        while true {
            let page = try record.pendingPaths(after: after, limit: Self.prefetchPage)
            guard let last = page.last else { break }
            await storage.prefetch(page.map(\.remotePath))
            after = last.index
        }

        // Rule 3: required groups first, in plan order; the first failure ends the run.
        for (number, group) in groups.enumerated() where group.required {
            if run.isDone(number) { continue }
            var files = try GroupFiles(group, from: record)
            let open = files.status.indices.filter { files.status[$0] != .done }
            if open.isEmpty { continue }
            if let failure = try await fetch(open, &files, number, &run, stopAtFirstFailure: true).first?.failure {
                return .failed(failure)
            }
            let offered = RestoreGroup(name: group.name, required: true, files: files.subset(open), failed: [])
            switch try await place(offered, open, &files, number, placement, &run) {
            case .placed: break
            case .rejected: return .placementRejected(group: offered.label)
            case .failed(let failure): return .failed(failure)
            }
            run.report()
        }

        // Rule 4: optional groups, best-effort; what landed of a group is placed even when a
        // sibling failed; a file out of attempts is skipped.
        for (number, group) in groups.enumerated() where !group.required {
            if run.isDone(number) { continue }
            var files = try GroupFiles(group, from: record)
            let open = files.status.indices.filter { files.status[$0] != .done && files.attempts[$0] < maxAttempts }
            if open.isEmpty { continue }
            let failed = try await fetch(open, &files, number, &run, stopAtFirstFailure: false).map(\.index)
            let failedSet = Set(failed)
            let landed = open.filter { !failedSet.contains($0) }
            if landed.isEmpty { continue }
            let offered = RestoreGroup(
                name: group.name, required: false, files: files.subset(landed), failed: files.subset(failed))
            _ = try await place(offered, landed, &files, number, placement, &run)
            run.report()
        }

        // Rule 6: completed when nothing is pending.
        if run.done == run.total {
            let now = try record.completedAt() ?? Date()
            try record.complete(at: now)
            staging.finish()
            return .completed(at: now)
        }
        var pending: [String] = []
        try record.forEachFile(.notDone) { pending.append($0.file.remotePath) }
        return .partial(pending: pending)
    }

    /// How many paths one prefetch request names.
    static let prefetchPage = 4096

    /// How one file's download ended, as a child task tells the run.
    private enum Fetched: Sendable {
        /// Staged by an earlier run and still intact: nothing to record.
        case intact
        /// Downloaded, verified and staged now: to be recorded.
        case downloaded
        /// The file failed (an attempt).
        case failed(RestoreFailure)
        /// The run was cancelled; the temporary is discarded.
        case cancelled
        /// The local side failed in a way that ends the run (thrown by it, as before any change).
        case thrown(any Error)
    }

    /// Makes sure the files `indices` (of one group, in plan order) are downloaded and
    /// verified, with up to `transfers` downloads in flight. Returns the files that failed, in
    /// plan order, with why.
    ///
    /// Every result is recorded here, by the run, as it arrives (rule 5), so at most
    /// `transfers` finished downloads ever wait to be recorded. With `stopAtFirstFailure` (a
    /// required group, rule 3) the first failure starts no further download; those in flight
    /// end and are recorded (a finished download as downloaded, a failed one as an attempt)
    /// before this returns. Cancellation does the same, then throws `CancellationError`.
    private func fetch(
        _ indices: [Int], _ files: inout GroupFiles, _ number: Int, _ run: inout Run, stopAtFirstFailure: Bool
    ) async throws -> [(index: Int, failure: RestoreFailure)] {
        var state = GroupFetch(stopAtFirstFailure: stopAtFirstFailure)
        if transfers == 1 || indices.count == 1 {
            // One at a time, in the run's own task: a child task per file would cost two
            // thread hops per file and nothing would overlap.
            for index in indices {
                guard state.mayStart else { break }
                if Task.isCancelled {
                    state.cancelled = true
                    break
                }
                let result = await fetch(files.files[index], staged: files.status[index] == .downloaded)
                try take(result, of: index, &state, &files, number, &run)
            }
            return try state.end()
        }
        // `transfers` workers each take the group's next file in plan order, fetch it and record
        // how it ended, then take the next: no task and no hand-off between threads per file.
        // What the run keeps of the group is theirs, under one lock, until they end.
        let shared = Locked<GroupWork>((files: files, run: run, fetch: state, next: 0))
        try await Workers.run(
            min(transfers, indices.count), over: shared,
            take: { (now: inout GroupWork) -> (index: Int, file: RestoreFile, staged: Bool)? in
                // The group's next file in plan order, unless no download may start now.
                guard now.fetch.mayStart, now.next < indices.count else { return nil }
                if Task.isCancelled {
                    now.fetch.cancelled = true
                    return nil
                }
                let index = indices[now.next]
                now.next += 1
                return (index: index, file: now.files.files[index], staged: now.files.status[index] == .downloaded)
            },
            work: { file in await self.fetch(file.file, staged: file.staged) },
            record: { file, result, now in
                // Rule 5: recorded as it ends.
                try self.take(result, of: file.index, &now.fetch, &now.files, number, &now.run)
            })
        (files, run, state) = shared.mutex.withLock { ($0.files, $0.run, $0.fetch) }
        return try state.end()
    }

    /// What the download workers of one group share: its files, the run's counts, how the
    /// downloads went, and the next file to take.
    private typealias GroupWork = (files: GroupFiles, run: Run, fetch: GroupFetch, next: Int)

    /// What the downloads of one group came to so far.
    private struct GroupFetch {
        let stopAtFirstFailure: Bool
        var failed: [(index: Int, failure: RestoreFailure)] = []
        var cancelled = false
        var thrown: (any Error)?

        /// Whether another download may start.
        var mayStart: Bool { thrown == nil && !cancelled && !(stopAtFirstFailure && !failed.isEmpty) }

        /// Once every download has ended: the failed files, or what ends the run.
        func end() throws -> [(index: Int, failure: RestoreFailure)] {
            if let thrown { throw thrown }
            if cancelled { throw CancellationError() }
            // Results arrive as downloads end; which failure ends a required group must not
            // depend on timing: the first in plan order.
            return failed.sorted { $0.index < $1.index }
        }
    }

    /// Records how the download of file `index` ended (rule 5) and reports progress.
    private func take(
        _ result: Fetched, of index: Int, _ state: inout GroupFetch, _ files: inout GroupFiles, _ number: Int, _ run: inout Run
    ) throws {
        switch result {
        case .intact:
            return
        case .downloaded:
            // Rule 5: saved after every download.
            try record.setStatus(.downloaded, [Int(files.ids[index])])
            run.setStatus(index, .downloaded, in: &files, group: number)
        case .failed(let failure):
            onFileFailed(files.files[index], failure)
            try record.countAttempt([Int(files.ids[index])], reason: failure.description, status: .pending)
            files.attempts[index] += 1
            run.setStatus(index, .pending, in: &files, group: number)
            state.failed.append((index, failure))
        case .cancelled:
            state.cancelled = true
        case .thrown(let error):
            state.thrown = state.thrown ?? error
        }
        run.report()
    }

    /// Downloads and verifies `file` into the staging (in a child task of the run when several
    /// are in flight: it touches neither the record nor the counts).
    ///
    /// Rule 7: a file `staged` by an earlier run is not fetched again, but it is checked again
    /// (size and SHA-256) before it may be placed: the disk may have changed between runs. A
    /// run fetches each file once, so what it downloads itself is checked once, as it lands.
    private func fetch(_ file: RestoreFile, staged: Bool) async -> Fetched {
        do {
            if staged {
                if try stagedCopyIsIntact(file) { return .intact }
                staging.removeStaged(file)
            }
        } catch {
            return .thrown(error)
        }
        do {
            try Task.checkCancellation()
            let write = try staging.create(for: file)
            do {
                try await storage.downloadFile(file.remotePath, into: write.fd, expectedSize: file.size, onBytes: { _ in })
                try Self.verify(write.fd, file)
                try staging.keep(write, for: file)
            } catch {
                staging.discard(write)
                throw error
            }
            return .downloaded
        } catch is CancellationError {
            return .cancelled
        } catch let error as StateStoreError {
            return .thrown(error)
        } catch {
            return .failed(Self.failure(error))
        }
    }

    /// Whether what is staged for `file` is still its verified content.
    private func stagedCopyIsIntact(_ file: RestoreFile) throws -> Bool {
        guard let fd = try staging.openStaged(file) else { return false }
        defer { close(fd) }
        do {
            try Self.verify(fd, file)
            return true
        } catch is RestoreFailure {
            return false
        }
    }

    /// Checks the file open at `fd` against the listed size and the marker's SHA-256: a file
    /// with a hash in one read of it from its first byte, which counts its size as it goes;
    /// one without, by its size alone.
    private static func verify(_ fd: Int32, _ file: RestoreFile) throws {
        func sizeMismatch(_ size: Int64) -> RestoreFailure? {
            guard let expected = file.size, size != expected else { return nil }
            return .sizeMismatch(DownloadSizeMismatch(path: file.remotePath, expected: expected, received: size, longer: size > expected))
        }
        guard let expected = file.digest else {
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw LocalFileError(errno: errno, reading: file.placePath) }
            if let mismatch = sizeMismatch(Int64(info.st_size)) { throw mismatch }
            return
        }
        let (actual, size) = try SHA256Hasher.digestAndSize(ofOpenFile: fd, expectedSize: file.size, displayPath: file.placePath)
        if let mismatch = sizeMismatch(size) { throw mismatch }
        if actual != expected {
            throw RestoreFailure.hashMismatch(path: file.remotePath, expected: expected.hex, actual: actual.hex)
        }
    }

    private enum Placed {
        /// Placed but for the files of these remote paths (kept local copies).
        case placed(except: Set<String>)
        case rejected
        case failed(RestoreFailure)
    }

    /// Rule 2: offers a group to placement and records the answer (rule 5).
    private func place(
        _ group: RestoreGroup, _ indices: [Int], _ files: inout GroupFiles, _ number: Int, _ placement: any RestorePlacement,
        _ run: inout Run
    ) async throws -> Placed {
        try Task.checkCancellation()
        let result: Placed
        do {
            switch try await placement.place(group) {
            case .placed: result = .placed(except: [])
            case .placedKeepingLocal(let kept): result = .placed(except: kept)
            case .rejected: result = .rejected
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            result = .failed(Self.failure(error))
        }
        let ids = indices.map { Int(files.ids[$0]) }
        switch result {
        case .placed(let kept):
            let placed = kept.isEmpty ? indices : indices.filter { !kept.contains(files.files[$0].remotePath) }
            try record.setStatus(.done, kept.isEmpty ? ids : placed.map { Int(files.ids[$0]) })
            for index in placed { run.setStatus(index, .done, in: &files, group: number) }
        case .rejected, .failed:
            // Counted as an attempt on each file; still staged, so offered again next run
            // without a new download (but checked again first).
            let reason: String
            if case .failed(let failure) = result {
                reason = failure.description
                // Told as a download failure is: a link in the way is never a silent retry. A
                // refused path names its own file; any other failure is the whole group's.
                var named = indices
                if case .refused(let refused) = failure {
                    named = indices.filter { files.files[$0].remotePath == refused.remotePath }
                }
                for index in named.isEmpty ? indices : named { onFileFailed(files.files[index], failure) }
            } else {
                reason = "rejected at placement"
            }
            try record.countAttempt(ids, reason: reason, status: .downloaded)
            for index in indices { files.attempts[index] += 1 }
        }
        return result
    }

    private static func failure(_ error: any Error) -> RestoreFailure {
        switch error {
        case let failure as RestoreFailure: failure
        case let mismatch as DownloadSizeMismatch: .sizeMismatch(mismatch)
        case let damaged as UndecryptableDownload: .undecryptable(damaged)
        case let refused as RefusedPath: .refused(refused)
        case let error as CloudError: .cloud(error)
        case let error as LocalFileError: .local(error)
        default: .cloud(CloudError(.transport, String(describing: error)))
        }
    }

    /// The counts of one run, kept up to date as statuses change (never recounted: a step
    /// costs the same at 1,000,000 files as at 10).
    private struct Run {
        let onProgress: RestoreProgressHandler
        let total: Int
        /// Each group's size and how many of its files are done.
        var groupSize: [Int]
        var groupDone: [Int]
        var done = 0
        var staged = 0
        var groupsDone = 0
        var last: RestoreProgress?

        init(groups: [RestoreRecord.Group], onProgress: @escaping RestoreProgressHandler) {
            self.onProgress = onProgress
            groupSize = groups.map(\.members.count)
            groupDone = groups.map(\.done)
            total = groupSize.reduce(0, +)
            done = groupDone.reduce(0, +)
            staged = groups.reduce(0) { $0 + $1.staged }
            groupsDone = zip(groupSize, groupDone).count { $0 == $1 }
        }

        func isDone(_ group: Int) -> Bool { groupDone[group] == groupSize[group] }

        private mutating func count(_ group: Int, _ status: RestoreFileStatus, _ delta: Int) {
            switch status {
            case .pending: break
            case .downloaded: staged += delta
            case .done:
                done += delta
                let wasDone = isDone(group)
                groupDone[group] += delta
                if wasDone != isDone(group) { groupsDone += isDone(group) ? 1 : -1 }
            }
        }

        mutating func setStatus(_ index: Int, _ status: RestoreFileStatus, in files: inout GroupFiles, group: Int) {
            count(group, files.status[index], -1)
            files.status[index] = status
            count(group, status, +1)
        }

        /// Rule 6: sends a report only when a count changed.
        mutating func report() {
            let progress = RestoreProgress(
                filesDone: done, filesStaged: staged, filesTotal: total, groupsDone: groupsDone, groupsTotal: groupSize.count)
            guard progress != last else { return }
            last = progress
            onProgress(progress)
        }
    }
}
