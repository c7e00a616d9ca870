// A restore running for the TUI: `BackupApp.restore` in a task of its own. Its events fold
// into one latest state under a lock, as for a sync; its placement callback parks the
// engine on a continuation until the person answers the prompt (or the job is cancelled,
// which answers "reject": the group stays staged and is offered again next run).

import BackupApp
import BackupEngine
import BackupTree
import Foundation
import Synchronization

/// What the restore screen shows of a running (or finished) restore.
struct RestoreJobState: Sendable {
    var phase = "starting"
    var progress: RestoreProgress?
    /// The bytes received, expected and in flight, and the rate over them.
    var transfer = TransferState()
    /// When the job started (clock seconds), for the elapsed time.
    var startedAt: Double?
    /// The plan by group, once the engine recorded it.
    var plan: RestorePlanView?
    /// The group waiting for the person's answer.
    var offer: PlacementOffer?
    /// "Place all remaining" was chosen: groups without conflicts are placed unasked.
    var placeAll = false
    /// Notes (refused paths) and conflicts, newest last.
    var notes: [String] = []
    var result: Result<RestoreSummary, AppError>?
    var version = 0
}

/// One restore job; safe to feed from any thread.
final class RestoreJob: Job {
    let request: RestoreRequest
    /// The state the screen sees, and beside it, under the same lock so an answer and a
    /// cancellation can never miss each other, the engine's parked placement call.
    private struct Inner {
        var visible: RestoreJobState
        var waiting: CheckedContinuation<PlacementDecision, Never>?
        var cancelled = false
    }
    private let inner: Mutex<Inner>
    private let task = Mutex<Task<Void, Never>?>(nil)
    private let clock: @Sendable () -> Double
    /// Reads the recorded plan once the engine has written it.
    private let loadPlan: @Sendable () -> [RecordedFile]?

    /// A job that has not started: `start` runs it; tests feed it by hand.
    init(request: RestoreRequest, placeAll: Bool = false, clock: @escaping @Sendable () -> Double = Context.monotonicSeconds,
         loadPlan: @escaping @Sendable () -> [RecordedFile]? = { nil }) {
        self.request = request
        self.clock = clock
        self.loadPlan = loadPlan
        var initial = RestoreJobState()
        initial.placeAll = placeAll
        initial.startedAt = clock()
        inner = Mutex(Inner(visible: initial))
    }

    /// Starts `app.restore(profile, request)` with this job answering placement; `placeAll`
    /// (`--place all`) places every group without a conflict unasked.
    static func start(app: BackupApp, profile: Profile?, request: RestoreRequest, recordPath: String, placeAll: Bool,
                      clock: @escaping @Sendable () -> Double) -> RestoreJob {
        let job = RestoreJob(request: request, placeAll: placeAll, clock: clock, loadPlan: {
            guard FileManager.default.fileExists(atPath: recordPath) else { return nil }
            return try? RestoreRecord(path: recordPath).files()
        })
        var asking = request
        asking.decide = { [job] offer in await job.decide(offer) }
        let request = asking
        let events: JobEvents = { [job] event in job.receive(event) }
        job.task.withLock { task in
            task = Task {
                do throws(AppError) {
                    job.finish(.success(try await app.restore(profile, request, events: events)))
                } catch {
                    job.finish(.failure(error))
                }
            }
        }
        return job
    }

    var snapshot: RestoreJobState { inner.withLock { $0.visible } }
    var isRunning: Bool { inner.withLock { $0.visible.result == nil } }

    /// Whether `cancel` was called.
    var wasCancelled: Bool { inner.withLock { $0.cancelled } }

    func cancel() {
        inner.withLock { $0.cancelled = true }
        task.withLock { $0?.cancel() }
        answer(.rejected)
    }

    private func withState<T>(_ body: (inout RestoreJobState) -> T) -> T {
        inner.withLock { body(&$0.visible) }
    }

    /// Folds one event into the state (called on the engine's threads).
    func receive(_ event: JobEvent) {
        let now = clock()
        // The plan is read once, when the engine reports it has recorded it (its first
        // progress), before that event is folded in; a second connection to the record.
        let needsPlan = withState { state in
            if case .restoreProgress = event { return state.plan == nil } else { return false }
        }
        let files = needsPlan ? loadPlan() : nil
        withState { state in
            state.version += 1
            if let files, state.plan == nil { state.plan = RestorePlanView(files: files) }
            switch event {
            case .phase(let name):
                state.phase = name
            case .restoreProgress(let value, let transfer):
                state.progress = value
                state.transfer.update(transfer, at: now)
                if let current = transfer.current { state.plan?.downloading(current) }
                state.plan?.progress(value)
            case .note(let path, let message):
                state.notes.append(message.isEmpty ? path : message)
            case .conflict(let group, let paths):
                state.plan?.conflicted(label: group)
                state.notes.append("group \"\(group)\" not placed: \(Format.files(paths.count)) would replace a different local file")
            case .fileFailed(_, _, let message, _):
                state.notes.append(message)
            case .scanning, .scanned, .syncProgress, .syncStage, .verifyProgress:
                break
            }
        }
    }

    /// The placement callback: answers at once in "place all" mode for a group without
    /// conflicts, else shows the prompt and waits for `answer`.
    func decide(_ offer: PlacementOffer) async -> PlacementDecision {
        let unasked = withState { state -> Bool in
            guard state.placeAll && offer.conflicts.isEmpty else { return false }
            state.plan?.offered(offer.group)
            state.plan?.decided(offer.group, .placed)
            state.version += 1
            return true
        }
        if unasked { return .placed }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let parked = inner.withLock { inner -> Bool in
                    // Cancelled before the prompt went up: reject at once rather than wait.
                    guard !inner.cancelled else { return false }
                    inner.waiting = continuation
                    inner.visible.plan?.offered(offer.group)
                    inner.visible.offer = offer
                    inner.visible.version += 1
                    return true
                }
                if !parked { continuation.resume(returning: .rejected) }
            }
        } onCancel: {
            self.answer(.rejected)
        }
    }

    /// Answers the prompt that is up (no-op when none is).
    func answer(_ decision: PlacementDecision) {
        let parked = inner.withLock { inner -> CheckedContinuation<PlacementDecision, Never>? in
            guard let continuation = inner.waiting else { return nil }
            inner.waiting = nil
            if let offer = inner.visible.offer { inner.visible.plan?.decided(offer.group, decision) }
            inner.visible.offer = nil
            inner.visible.version += 1
            return continuation
        }
        parked?.resume(returning: decision)
    }

    /// "Place all remaining": places the group asked about and every later one without a conflict.
    func placeAllRemaining(_ decision: PlacementDecision = .placed) {
        withState { $0.placeAll = true }
        answer(decision)
    }

    func finish(_ result: Result<RestoreSummary, AppError>) {
        withState { state in
            state.result = result
            state.offer = nil
            state.version += 1
        }
    }
}
