// A sync running for the TUI: `BackupApp.sync` in a task of its own, its events folded into
// one latest state under a lock. The engine's thread only ever takes that lock for a few
// assignments, so it never waits on the screen; the loop reads the state when it draws.

import BackupApp
import BackupEngine
import Synchronization

/// What the sync screen shows of a running (or finished) sync.
struct SyncJobState: Sendable {
    var phase = "starting"
    /// When the job started (clock seconds), for the elapsed time.
    var startedAt: Double?
    /// The scan so far, while it runs.
    var scanning: (files: Int, hashed: Int, hashedBytes: Int64)?
    var scanned: (files: Int, bytes: Int64, hashed: Int, whenSent: Int)?
    var done = 0
    var total = 0
    /// The part of the writes under way, and the steps done when it began.
    var stage: SyncStage?
    var stageStart = 0
    /// The bytes sent, expected and in flight, and the rate over them.
    var transfer = TransferState()
    /// The file named last, kept after it landed (the last one a one-line display showed).
    var current: String?
    /// Every note (unreadable files, skipped ones, the listing's), oldest first, and how many.
    var notes: [String] = []
    var noteCount = 0
    var result: Result<SyncSummary, AppError>?
    /// Grows with every change, so the screen redraws only when something moved.
    var version = 0
}

/// One sync job; safe to feed from any thread.
final class SyncJob: Job {
    let request: SyncRequest
    private let state = Mutex(SyncJobState())
    private let task = Mutex<Task<Void, Never>?>(nil)
    private let cancelled = Atomic(false)
    private let clock: @Sendable () -> Double

    /// A job that has not started: `start` runs it; tests feed it with `receive` and `finish`.
    init(request: SyncRequest, clock: @escaping @Sendable () -> Double = Context.monotonicSeconds) {
        self.request = request
        self.clock = clock
        let now = clock()
        state.withLock { $0.startedAt = now }
    }

    /// Starts `app.sync(profile, request)`.
    static func start(app: BackupApp, profile: Profile, request: SyncRequest, clock: @escaping @Sendable () -> Double) -> SyncJob {
        let job = SyncJob(request: request, clock: clock)
        let events: JobEvents = { [job] event in job.receive(event) }
        job.task.withLock { task in
            task = Task {
                do throws(AppError) {
                    job.finish(.success(try await app.sync(profile, request, events: events)))
                } catch {
                    job.finish(.failure(error))
                }
            }
        }
        return job
    }

    var snapshot: SyncJobState { state.withLock { $0 } }
    var isRunning: Bool { state.withLock { $0.result == nil } }

    /// Whether `cancel` was called.
    var wasCancelled: Bool { cancelled.load(ordering: .relaxed) }

    func cancel() {
        cancelled.store(true, ordering: .relaxed)
        task.withLock { $0?.cancel() }
    }

    /// Folds one event into the state (called on the engine's threads).
    func receive(_ event: JobEvent) {
        let now = clock()
        state.withLock { state in
            state.version += 1
            switch event {
            case .phase(let name):
                state.phase = name
            case .scanning(let files, let hashed, let hashedBytes):
                state.scanning = (files, hashed, hashedBytes)
            case .scanned(let files, let bytes, let hashed, let whenSent):
                state.scanned = (files, bytes, hashed, whenSent)
            case .note(let path, let message):
                state.noteCount += 1
                state.notes.append(message.isEmpty ? path : message)
            case .syncProgress(let done, let total, let transfer):
                (state.done, state.total) = (done, total)
                state.transfer.update(transfer, at: now)
                if let current = transfer.current { state.current = current }
            case .syncStage(let stage):
                state.stage = stage
                state.stageStart = state.done
            case .restoreProgress, .conflict, .fileFailed, .verifyProgress:
                break
            }
        }
    }

    func finish(_ result: Result<SyncSummary, AppError>) {
        state.withLock { state in
            state.result = result
            state.version += 1
        }
    }
}
