// The restore half of the contract (restore rules 1–7): a plan recorded before anything
// runs, required groups first, attempts counted, placement asked one group at a time, the
// record saved after every download and every placement, and resume revalidated by a probe.

import Foundation

/// Restores a pinned backup group by group, resumable after any stop.
public final class RestoreEngine: Sendable {
    public let storage: any RemoteStorage
    public let record: RestoreRecord
    public let markerPath: String
    /// After this many failed attempts an optional file is skipped until
    /// `resume(resetAttempts: true)`.
    public let maxAttempts: Int
    private let availability: @Sendable () async -> Availability
    private let serial = AsyncMutex()

    public init(
        storage: any RemoteStorage,
        record: RestoreRecord,
        markerPath: String = SyncEngine.defaultMarkerPath,
        maxAttempts: Int = 3,
        availability: @escaping @Sendable () async -> Availability = { .available }
    ) {
        self.storage = storage
        self.record = record
        self.markerPath = markerPath
        self.maxAttempts = maxAttempts
        self.availability = availability
    }

    /// Rule 1: records `plan` (replacing any earlier record) and runs it.
    ///
    /// Throws only for the local record (`StateStoreError`) and cancellation; every finished
    /// step is in the record by then.
    public func start(
        _ plan: RestorePlan, placement: any RestorePlacement = KeepWhereLanded(),
        onProgress: @escaping RestoreProgressHandler = { _ in }
    ) async throws -> RestoreOutcome {
        try await serial.withLock {
            try record.begin(plan)
            return try await run(placement: placement, onProgress: onProgress)
        }
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
            case .failed(let error) where error.kind == .notAvailable: return .notAvailable
            case .failed(let error) where error.kind == .needsConsent: return .needsConsent
            case .failed(let error): return .failed(.cloud(error))
            }
            if resetAttempts { try record.resetAttempts() }
            return try await run(placement: placement, onProgress: onProgress)
        }
    }

    // MARK: The run

    /// The files of one group, in plan order.
    private struct Group {
        var name: String?
        var required: Bool
        var indices: [Int]
    }

    private func run(placement: any RestorePlacement, onProgress: @escaping RestoreProgressHandler) async throws -> RestoreOutcome {
        var files = try record.files()
        let groups = Self.groups(of: files)
        var reporter = ProgressReporter(onProgress: onProgress)
        reporter.report(files, groups: groups)

        // Rule 1: prefetch is asked for every path that will be fetched, before any download.
        let toFetch = files.filter { $0.status != .done && !isStaged($0) }.map(\.file.remotePath)
        if !toFetch.isEmpty { await storage.prefetch(toFetch) }

        // Rule 3: required groups first, in plan order; the first failure ends the run.
        for group in groups where group.required {
            let open = group.indices.filter { files[$0].status != .done }
            if open.isEmpty { continue }
            for index in open {
                if let failure = try await fetch(&files, index) {
                    reporter.report(files, groups: groups)
                    return .failed(failure)
                }
                reporter.report(files, groups: groups)
            }
            let offered = RestoreGroup(name: group.name, required: true, files: open.map { files[$0].file }, failed: [])
            switch try await place(offered, open, &files, placement) {
            case .placed: break
            case .rejected: return .placementRejected(group: offered.label)
            case .failed(let failure): return .failed(failure)
            }
            reporter.report(files, groups: groups)
        }

        // Rule 4: optional groups, best-effort; what landed of a group is placed even when a
        // sibling failed; a file out of attempts is skipped.
        for group in groups where !group.required {
            let open = group.indices.filter { files[$0].status != .done && files[$0].attempts < maxAttempts }
            if open.isEmpty { continue }
            var landed: [Int] = []
            var failed: [Int] = []
            for index in open {
                if try await fetch(&files, index) == nil { landed.append(index) } else { failed.append(index) }
                reporter.report(files, groups: groups)
            }
            if landed.isEmpty { continue }
            let offered = RestoreGroup(
                name: group.name, required: false, files: landed.map { files[$0].file }, failed: failed.map { files[$0].file })
            _ = try await place(offered, landed, &files, placement)
            reporter.report(files, groups: groups)
        }

        // Rule 6: completed when nothing is pending.
        let pending = files.filter { $0.status != .done }.map(\.file.remotePath)
        if pending.isEmpty {
            let now = try record.completedAt() ?? Date()
            try record.complete(at: now)
            return .completed(at: now)
        }
        return .partial(pending: pending)
    }

    /// Makes sure file `index` is downloaded (and verified); nil when it is, else why not.
    /// Rule 7: a staged file still on disk is not fetched again.
    private func fetch(_ files: inout [RecordedFile], _ index: Int) async throws -> RestoreFailure? {
        if files[index].status == .downloaded && isStaged(files[index]) { return nil }
        try Task.checkCancellation()
        let file = files[index].file
        do {
            let fd = open(file.toLocalPath, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o666)
            guard fd >= 0 else { throw LocalFileError(path: file.toLocalPath, message: "cannot write \(file.toLocalPath)") }
            defer { close(fd) }
            try await storage.downloadFile(file.remotePath, into: fd, expectedSize: file.size, onBytes: { _ in })
            if let expected = file.sha256 {
                let actual = try SHA256Hasher.hexOfFile(atPath: file.toLocalPath)
                if actual != expected {
                    unlink(file.toLocalPath)  // a mismatch is never left to be placed
                    throw RestoreFailure.hashMismatch(path: file.remotePath, expected: expected, actual: actual)
                }
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as StateStoreError {
            throw error
        } catch {
            let failure = Self.failure(error)
            try record.countAttempt([files[index].index], reason: failure.description, status: .pending)
            files[index].attempts += 1
            files[index].status = .pending
            files[index].lastError = failure.description
            return failure
        }
        // Rule 5: saved after every download.
        try record.setStatus(.downloaded, [files[index].index])
        files[index].status = .downloaded
        return nil
    }

    private enum Placed {
        case placed
        case rejected
        case failed(RestoreFailure)
    }

    /// Rule 2: offers a group to placement and records the answer (rule 5).
    private func place(
        _ group: RestoreGroup, _ indices: [Int], _ files: inout [RecordedFile], _ placement: any RestorePlacement
    ) async throws -> Placed {
        try Task.checkCancellation()
        let result: Placed
        do {
            result = try await placement.place(group) == .placed ? .placed : .rejected
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            result = .failed(Self.failure(error))
        }
        let ids = indices.map { files[$0].index }
        switch result {
        case .placed:
            try record.setStatus(.done, ids)
            for index in indices { files[index].status = .done }
        case .rejected, .failed:
            // Counted as an attempt on each file; still staged, so offered again next run
            // without a new download.
            let reason: String
            if case .failed(let failure) = result { reason = failure.description } else { reason = "rejected at placement" }
            try record.countAttempt(ids, reason: reason, status: .downloaded)
            for index in indices {
                files[index].attempts += 1
                files[index].lastError = reason
            }
        }
        return result
    }

    private func isStaged(_ file: RecordedFile) -> Bool {
        guard file.status == .downloaded else { return false }
        var info = stat()
        guard stat(file.file.toLocalPath, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return false }
        return file.file.size.map { $0 == Int64(info.st_size) } ?? true
    }

    /// Groups in plan order of their first file; a file with no group is its own group.
    private static func groups(of files: [RecordedFile]) -> [Group] {
        var groups: [Group] = []
        var position: [String: Int] = [:]
        for (offset, recorded) in files.enumerated() {
            guard let name = recorded.file.group else {
                groups.append(Group(name: nil, required: recorded.file.required, indices: [offset]))
                continue
            }
            if let at = position[name] {
                groups[at].indices.append(offset)
                groups[at].required = groups[at].required || recorded.file.required
            } else {
                position[name] = groups.count
                groups.append(Group(name: name, required: recorded.file.required, indices: [offset]))
            }
        }
        return groups
    }

    private static func failure(_ error: any Error) -> RestoreFailure {
        switch error {
        case let failure as RestoreFailure: failure
        case let error as CloudError: .cloud(error)
        case let error as LocalFileError: .local(error)
        default: .cloud(CloudError(.transport, String(describing: error)))
        }
    }

    /// Rule 6: sends a report only when a count changed.
    private struct ProgressReporter {
        let onProgress: RestoreProgressHandler
        var last: RestoreProgress?

        mutating func report(_ files: [RecordedFile], groups: [Group]) {
            let progress = RestoreProgress(
                filesDone: files.count { $0.status == .done },
                filesStaged: files.count { $0.status == .downloaded },
                filesTotal: files.count,
                groupsDone: groups.count { $0.indices.allSatisfy { files[$0].status == .done } },
                groupsTotal: groups.count)
            guard progress != last else { return }
            last = progress
            onProgress(progress)
        }
    }
}
