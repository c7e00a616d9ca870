// `backup verify` in the interface (V on the profile list): the remote's listing against the
// backup's marker at once, and on `r` every file read and checked against its SHA-256, with a
// progress bar; the missing and damaged files named, all of them behind `v`. The same job as
// the command line (`BackupApp.verify`); it never writes to the remote.

import BackupApp
import BackupEngine
import BackupTerminal
import Foundation
import Synchronization

final class VerifyScreen: Screen {
    /// What the running verify has said so far; written by its task, read by the loop.
    private final class Progress: Sendable {
        struct State: Sendable {
            var phase = "listing"
            var done = 0
            var total = 0
            var bytes: Int64 = 0
            var expected: Int64 = 0
            var result: Result<VerifySummary, AppError>?
            var version = 0
        }
        let state = Mutex(State())
    }

    /// A running verify, cancellable from the loop.
    private final class Run: Job {
        let task: Mutex<Task<Void, Never>?> = Mutex(nil)
        let running = Atomic<Bool>(true)
        var isRunning: Bool { running.load(ordering: .relaxed) }
        func cancel() { task.withLock { $0?.cancel() } }
    }

    private let context: Context
    let profile: Profile
    private var progress = Progress()
    private var run = Run()
    private var seen = -1
    private var shown = Progress.State()
    private var readData = false

    init(context: Context, profile: Profile) {
        self.context = context
        self.profile = profile
        start()
    }

    private func start() {
        let progress = Progress()
        let run = Run()
        self.progress = progress
        self.run = run
        seen = -1
        let app = context.app
        let profile = profile
        let request = VerifyRequest(readData: readData ? 100 : nil)
        run.task.withLock {
            $0 = Task.detached {
                let events: JobEvents = { event in
                    progress.state.withLock { state in
                        state.version += 1
                        switch event {
                        case .phase(let name): state.phase = name
                        case .verifyProgress(let done, let total, let transfer):
                            (state.done, state.total) = (done, total)
                            (state.bytes, state.expected) = (transfer.bytes, transfer.expectedBytes)
                        default: break
                        }
                    }
                }
                let result: Result<VerifySummary, AppError>
                do throws(AppError) {
                    result = .success(try await app.verify(profile, request, events: events))
                } catch {
                    result = .failure(error)
                }
                progress.state.withLock {
                    $0.result = result
                    $0.version += 1
                }
                run.running.store(false, ordering: .relaxed)
            }
        }
    }

    var title: String { "verify \"\(profile.name)\"" }
    var keys: KeyMap { KeyMaps.verify }
    var runningJob: (any Job)? { run.isRunning ? run : nil }
    var hints: [Action] {
        guard shown.result != nil else { return [.back, .help, .quit] }
        return (damagedLines.isEmpty ? [] : [.showNotes]) + [.syncAgain, .retryFailed, .back, .help, .quit]
    }

    func update() -> Bool {
        let now = progress.state.withLock { $0 }
        guard now.version != seen else { return false }
        seen = now.version
        shown = now
        if let result = now.result {
            context.lastStatus = result.map(\.status).get(or: { $0.status })
        }
        return true
    }

    /// Every finding, one line each, for `v`.
    private var damagedLines: [String] {
        guard case .success(let summary)? = shown.result else { return [] }
        return summary.findings.map { "\($0.kind.rawValue): \($0.message)" }
    }

    func handle(_ key: Key) -> Response {
        guard shown.result != nil, let action = keys.action(for: key) else { return .ignored }
        switch action {
        case .syncAgain:
            readData = false
            start()
        case .retryFailed:
            readData = true
            start()
        case .showNotes where !damagedLines.isEmpty:
            let lines = damagedLines
            return .push(NotesScreen(what: "verify") { lines })
        default:
            return .ignored
        }
        return .handled
    }

    func draw(_ canvas: Canvas) {
        var row = canvas.compact ? 1 : 2
        canvas.field("Remote", profile.remote, row: &row, label: 9, path: true)
        if !canvas.compact { row += 1 }
        guard let result = shown.result else {
            canvas.text(shown.phase == "reading" ? "Reading every file and checking its SHA-256…" : "Comparing the remote's listing with the backup's marker…",
                        row: row, style: .accent)
            row += 1
            if shown.total > 0 {
                let fraction = Double(shown.done) / Double(max(shown.total, 1))
                canvas.bar(fraction, row: row, column: 1, width: max(canvas.columns - 10, 10))
                canvas.text(" \(Int(fraction * 100))%", row: row, column: max(canvas.columns - 8, 1))
                row += 1
                canvas.text("\(Format.count(shown.done)) of \(Format.files(shown.total)) checked, "
                    + "\(Format.bytes(shown.bytes)) of \(Format.bytes(shown.expected)) read", row: row, column: 1)
            }
            return
        }
        switch result {
        case .failure(let error):
            row += canvas.paragraph("Could not verify: \(error.message)", row: row, style: .bad)
        case .success(let summary):
            if let probe = summary.probe {
                row += canvas.paragraph("Nothing to verify: the remote holds \(probe == .none ? "no files" : "no backup it can show (\(probe))").",
                                        row: row, style: .warning)
                return
            }
            let damaged = summary.damaged
            var words = "\(Format.files(summary.files)) in the backup's marker; "
                + (summary.checked > 0 ? "\(Format.count(summary.checked)) read and checked (\(Format.bytes(summary.checkedBytes)))."
                    : "the listing was compared (r reads every file).")
            words += damaged.isEmpty ? " Nothing is missing or damaged." : " \(Format.files(damaged.count)) missing or damaged:"
            row += canvas.paragraph(words, row: row, style: damaged.isEmpty ? .good : .bad)
            for finding in summary.findings.prefix(max(canvas.body.upperBound - row - 1, 0)) {
                canvas.text("  \(finding.kind.rawValue): \(finding.path)", row: row, column: 1, width: canvas.columns - 2,
                            style: finding.kind == .extra ? .warning : .bad)
                row += 1
            }
        }
    }
}

extension Result {
    /// The success's value, or what `failure` makes of the error.
    fileprivate func get(or failure: (Failure) -> Success) -> Success {
        switch self {
        case .success(let value): value
        case .failure(let error): failure(error)
        }
    }
}
