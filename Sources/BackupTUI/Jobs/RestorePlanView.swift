// The restore plan by group, as the restore and resume screens show it: built once from the
// record's files, then kept current from the job's events and the placement answers, so the
// screen never reads the record while the engine writes it.

import BackupEngine

/// One group of the plan and where its files stand.
struct GroupProgress: Sendable, Equatable {
    enum Stage: Sendable, Equatable {
        case pending
        case downloading
        /// Its placement prompt is up.
        case asking
        case placed
        /// Rejected at placement (or by a conflict): staged, offered again next run.
        case rejected
    }

    var label: String
    var required: Bool
    var total: Int
    var placed = 0
    var staged = 0
    /// Files that failed at least once (download, verification or placement).
    var failedFiles = 0
    /// The most attempts any file of the group has used.
    var attempts = 0
    /// Files out of attempts (a restore skips them until its attempts are reset).
    var skipped = 0
    var lastError: String?
    var stage: Stage = .pending
}

/// The plan by group, kept current while a restore runs.
struct RestorePlanView: Sendable, Equatable {
    private(set) var groups: [GroupProgress] = []
    private var groupOfPath: [String: Int] = [:]
    private var groupOfLabel: [String: Int] = [:]
    /// The group whose files are being downloaded.
    private var currentGroup: Int?
    private var lastStaged: Int?

    /// The plan from the record's files, grouped as the engine groups them: by group name in
    /// plan order, a file with no group being its own group.
    init(files: [RecordedFile]) {
        for recorded in files {
            let label = recorded.file.group ?? recorded.file.remotePath
            let index: Int
            if let known = recorded.file.group.flatMap({ groupOfLabel[$0] }) {
                index = known
            } else {
                index = groups.count
                groups.append(GroupProgress(label: label, required: recorded.file.required, total: 0))
                groupOfLabel[label] = index
            }
            groups[index].total += 1
            groups[index].required = groups[index].required || recorded.file.required
            switch recorded.status {
            case .done: groups[index].placed += 1
            case .downloaded: groups[index].staged += 1
            case .pending: break
            }
            if recorded.attempts >= Self.maxAttempts && recorded.status != .done { groups[index].skipped += 1 }
            if recorded.attempts > 0 {
                groups[index].failedFiles += 1
                groups[index].attempts = max(groups[index].attempts, recorded.attempts)
                groups[index].lastError = recorded.lastError ?? groups[index].lastError
            }
            groupOfPath[recorded.file.remotePath] = index
        }
        for index in groups.indices where groups[index].placed == groups[index].total {
            groups[index].stage = .placed
        }
    }

    /// The tries a file gets before a restore skips it (the engine's, which the app keeps).
    static let maxAttempts = RestoreEngine.defaultMaxAttempts

    var filesTotal: Int { groups.reduce(0) { $0 + $1.total } }
    var filesSkipped: Int { groups.reduce(0) { $0 + $1.skipped } }
    var filesPlaced: Int { groups.reduce(0) { $0 + $1.placed } }
    var filesStaged: Int { groups.reduce(0) { $0 + $1.staged } }
    var filesPending: Int { filesTotal - filesPlaced - filesStaged }
    var filesWithFailures: Int { groups.reduce(0) { $0 + $1.failedFiles } }

    /// A file began to download.
    mutating func downloading(_ path: String) {
        guard let index = groupOfPath[path] else { return }
        currentGroup = index
        if groups[index].stage == .pending || groups[index].stage == .rejected { groups[index].stage = .downloading }
    }

    /// The engine's counts changed: a rise in staged files belongs to the group downloading.
    mutating func progress(_ value: RestoreProgress) {
        defer { lastStaged = value.filesStaged }
        guard let last = lastStaged, let index = currentGroup, value.filesStaged > last else { return }
        groups[index].staged = min(groups[index].staged + value.filesStaged - last, groups[index].total - groups[index].placed)
    }

    /// A group's placement prompt came up: its exact staged and failed files are known now.
    mutating func offered(_ group: RestoreGroup) {
        guard let index = index(of: group) else { return }
        groups[index].staged = group.files.count
        if !group.failed.isEmpty {
            groups[index].failedFiles = max(groups[index].failedFiles, group.failed.count)
        }
        groups[index].stage = .asking
    }

    /// The answer for a group offered to placement.
    mutating func decided(_ group: RestoreGroup, _ decision: PlacementDecision) {
        guard let index = index(of: group) else { return }
        switch decision {
        case .placed, .placedKeepingLocal:
            var kept = 0
            if case .placedKeepingLocal(let paths) = decision { kept = group.files.count { paths.contains($0.remotePath) } }
            let placed = group.files.count - kept
            groups[index].placed = min(groups[index].placed + placed, groups[index].total)
            groups[index].staged = max(groups[index].staged - placed, 0)
            groups[index].stage = .placed
            if kept > 0 { groups[index].lastError = "kept \(Format.files(kept)) of yours that differ" }
        case .rejected:
            groups[index].stage = .rejected
            groups[index].attempts += 1
            groups[index].lastError = "rejected at placement"
        }
        if currentGroup == index { currentGroup = nil }
    }

    /// A group was not placed because a local file differs (without overwrite).
    mutating func conflicted(label: String) {
        guard let index = groupOfLabel[label] else { return }
        groups[index].stage = .rejected
        groups[index].lastError = "a local file differs"
    }

    private func index(of group: RestoreGroup) -> Int? {
        if let name = group.name, let index = groupOfLabel[name] { return index }
        return [group.files, group.failed].joined().lazy.compactMap { groupOfPath[$0.remotePath] }.first
    }
}
