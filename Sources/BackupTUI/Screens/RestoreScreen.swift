// The restore screen: one run of `BackupApp.restore` (or its resume), drawn from the job's
// latest state: what the probe found, the plan by group with required groups first and
// marked, a bar per group and one overall, and a placement prompt for each finished group.

import BackupApp
import BackupEngine
import BackupTerminal
import BackupTree

final class RestoreScreen: ProfileJobScreen {
    private let context: Context
    let profile: Profile?
    private var request: RestoreRequest
    private let placeAll: Bool
    private(set) var job: RestoreJob
    private(set) var state = RestoreJobState()
    private var seen = -1
    private var secondHand = SecondHand()
    private(set) var prompt: PlacementPrompt?
    private var password: InputDialog?
    private var scroll = 0

    /// - Parameter placeAll: place every group unasked (`--place all`); otherwise each group
    ///   raises a prompt.
    init(context: Context, profile: Profile?, request: RestoreRequest, placeAll: Bool = false) {
        self.context = context
        self.profile = profile
        self.request = request
        self.placeAll = placeAll
        job = Self.start(context, profile, request, placeAll: placeAll)
    }

    private static func start(_ context: Context, _ profile: Profile?, _ request: RestoreRequest, placeAll: Bool) -> RestoreJob {
        context.startRestore(profile, request, context.recordPath(profile: profile, request: request) ?? "", placeAll)
    }

    var title: String {
        if let profile, request.remoteURL == nil { return (request.resume ? "resume \"" : "restore \"") + profile.name + "\"" }
        return request.resume ? "resume restore" : "restore"
    }

    var keys: KeyMap { prompt?.keys ?? KeyMaps.restore }
    var runningJob: (any Job)? { job.isRunning ? job : nil }
    var profileName: String? { request.remoteURL == nil ? profile?.name : nil }
    var waitsForAnswer: Bool { prompt != nil }

    private var canResume: Bool {
        guard case .success(let summary) = state.result else {
            if case .failure(let error) = state.result { return error.status == .interrupted }
            return false
        }
        switch summary.result {
        case .restored(.partial), .restored(.placementRejected), .restored(.failed), .restored(.notAvailable): return true
        default: return false
        }
    }

    /// The remote this restore reads.
    private var remoteURL: String { request.remoteURL ?? profile?.remote ?? "" }

    /// Whether the restore ended for want of a password this remote takes (missing or refused).
    /// Whether it ended for want of the encrypted remote's passphrase (missing or wrong).
    private var wantsPassphrase: Bool { PasswordQuestion.wantsPassphrase(state.result) }

    private var wantsPassword: Bool {
        if wantsPassphrase { return true }
        guard Remotes.takesPassword(remoteURL) else { return false }
        switch state.result {
        case .success(let summary)?: return summary.lacksCredentials
        case .failure(let error)?: return error.isAuthRefused
        case nil: return false
        }
    }

    var typing: Bool { password != nil }

    var hints: [Action] {
        if prompt != nil { return [.help, .quit] }
        if password != nil { return [] }
        let notes: [Action] = state.notes.isEmpty ? [] : [.showNotes]
        if state.result == nil { return notes + [.toBackground, .back, .help, .quit] }
        return (wantsPassword ? [.enterPassword] : []) + (canResume ? [.resume] : []) + notes + [.back, .help, .quit]
    }

    func update() -> Bool {
        let snapshot = job.snapshot
        let tick = secondHand.moved(at: context.clock()) && snapshot.result == nil
        guard snapshot.version != seen else { return tick }
        seen = snapshot.version
        if state.result == nil, let result = snapshot.result {
            switch result {
            case .success(let summary): context.lastStatus = summary.status
            case .failure(let error): context.lastStatus = error.status
            }
            context.lastSummary = "restore: " + outcome(result).0
        }
        state = snapshot
        if let offer = snapshot.offer {
            if prompt?.offer != offer { prompt = PlacementPrompt(offer: offer) }
        } else {
            prompt = nil
        }
        return true
    }

    func handle(_ key: Key) -> Response {
        if let keysBefore = prompt?.keys {
            guard let answer = prompt?.handle(key), let answered = prompt else {
                return keysBefore.action(for: key) == nil ? .ignored : .handled
            }
            prompt = nil
            switch answer {
            case .place(let keep): job.answer(Self.decision(keep, prompt: answered))
            case .reject: job.answer(.rejected)
            case .placeAll(let keep): job.placeAllRemaining(Self.decision(keep, prompt: answered))
            }
            return .handled
        }
        switch InputDialog.apply(key, to: &password) {
        case .consumed?: return .handled
        case .passed?: return .ignored
        case .submitted(let typed)?:
            guard !typed.isEmpty else { return .handled }
            PasswordQuestion.keep(typed, passphrase: wantsPassphrase, remote: remoteURL, settings: profile?.settings ?? [:], in: context.app.typedPasswords)
            job = Self.start(context, profile, request, placeAll: placeAll)
            state = RestoreJobState()
            seen = -1
            return .handled
        case nil: break
        }
        switch KeyMaps.restore.action(for: key) {
        case .toBackground where state.result == nil:
            return .background
        case .enterPassword where wantsPassword:
            password = PasswordQuestion.dialog(remote: remoteURL, passphrase: wantsPassphrase)
        case let move? where ListMove.apply(move, to: &scroll, count: state.plan?.groups.count ?? 1, page: 10): break
        case .showNotes where !state.notes.isEmpty:
            return .push(NotesScreen(what: "restore") { [weak self] in self?.state.notes ?? [] })
        case .resume where canResume:
            request.resume = true
            request.resetAttempts = false
            job = Self.start(context, profile, request, placeAll: placeAll)
            state = RestoreJobState()
            seen = -1
        default: return .ignored
        }
        return .handled
    }

    /// The placement answer: every file, or all but the differing ones the person keeps.
    private static func decision(_ keepingLocal: Bool, prompt: PlacementPrompt) -> PlacementDecision {
        keepingLocal ? prompt.offer.keepingLocal : .placed
    }

    func draw(_ canvas: Canvas) {
        defer {
            prompt?.draw(canvas)
            password?.draw(canvas)
        }
        let label = 9
        var row = 2
        func field(_ name: String, _ value: String, style: Style = .normal, path: Bool = false) {
            canvas.field(name, value, row: &row, label: label, style: style, path: path)
        }
        if let remote = request.remoteURL ?? profile?.remote { field("From", remote, path: true) }
        if let target = request.target ?? profile?.source { field("Into", Context.absolute(target), path: true) }
        field("Backup", probeLine, style: probeStyle)
        row += 1

        if let plan = state.plan {
            let spare = canvas.body.upperBound - row - (state.result == nil ? 7 : 5)
            let shown = GroupTable.draw(plan.groups, first: min(scroll, max(plan.groups.count - 1, 0)), canvas: canvas, row: row, rows: max(spare, 1))
            row += shown + 1
            let done = state.progress?.filesDone ?? plan.filesPlaced
            let total = state.progress?.filesTotal ?? plan.filesTotal
            let staged = state.progress?.filesStaged ?? plan.filesStaged
            if row < canvas.body.upperBound {
                // Placed files fill this bar, as its words say; the bytes have their own below.
                canvas.text("Placed", row: row, column: 1, width: label, style: .accent)
                let barWidth = max(min(canvas.columns - label - 36, 40), 6)
                canvas.bar(total == 0 ? 0 : Double(done) / Double(total), row: row, column: label + 1, width: barWidth)
                canvas.text("\(Format.count(done)) of \(Format.count(total))" + (staged > 0 ? ", \(Format.count(staged)) downloaded and checked" : ""),
                            row: row, column: label + 2 + barWidth)
                row += 1
            }
        }
        let running = state.result == nil
        let now = context.clock()
        if state.progress != nil || state.transfer.reading.bytes > 0 {
            if running, row < canvas.body.upperBound, let fraction = state.transfer.reading.fraction {
                canvas.text("Bytes", row: row, column: 1, width: label, style: .accent)
                let barWidth = max(min(canvas.columns - label - 36, 40), 6)
                canvas.bar(fraction, row: row, column: label + 1, width: barWidth)
                canvas.text(String(Int((fraction * 100).rounded(.down))) + "%", row: row, column: label + 2 + barWidth)
                row += 1
            }
            TransferPanel.drawBytes("Received", state.transfer, now: now, running: running, canvas: canvas, row: &row, label: label)
        }
        if running, let started = state.startedAt {
            field("Elapsed", Format.duration(max(0, now - started)) + "  " + String(TransferPanel.life(at: now)))
        }
        if running && state.offer == nil && !state.transfer.reading.moving.isEmpty && row < canvas.body.upperBound {
            let room = max(1, min(state.transfer.reading.moving.count, canvas.body.upperBound - row - 1))
            canvas.text("Moving", row: row, column: 1, width: label, style: .accent)
            row += TransferPanel.drawMoving(state.transfer.reading.moving, canvas: canvas, row: row, label: label, maxRows: room)
        }
        if let note = state.notes.last {
            field("Notes", "\(state.notes.count) (v shows them all), the last: \(note)", style: .warning)
        }
        row += 1
        guard let result = state.result, row < canvas.body.upperBound else { return }
        let (words, style) = outcome(result)
        row += canvas.paragraph(words, row: row, maxRows: max(canvas.body.upperBound - row, 1), style: style)
    }

    /// The probe's outcome as the first line tells it.
    private var probeLine: String {
        if let plan = state.plan {
            let groups = plan.groups.count
            return "found: \(Format.files(plan.filesTotal)) in \(groups) group\(groups == 1 ? "" : "s")"
                + (plan.groups.contains(where: \.required) ? "; ! = required" : "")
        }
        if case .success(let summary) = state.result, case .probe(let probe) = summary.result {
            switch probe {
            case .none: return "none: the remote holds no files"
            case .notReady: return "not ready: files but no readable marker"
            case .unavailable: return "unavailable"
            case .failed(let error): return "failed: \(error.message)"
            case .damaged: return "damaged: the marker failed a check"
            case .found: return "found"
            }
        }
        return state.phase == "listing" ? "looking at the remote…" : (request.resume ? "checking the recorded backup…" : "…")
    }

    private var probeStyle: Style {
        if case .success(let summary) = state.result, case .probe = summary.result { return .warning }
        return .normal
    }

    private func outcome(_ result: Result<RestoreSummary, AppError>) -> (String, Style) {
        let resume = "Press c to continue (resume)."
        switch result {
        case .failure(let error) where error.status == .interrupted:
            return ("Stopped. Everything finished is recorded. " + resume, .warning)
        case .failure(let error):
            return ("Could not restore: \(error.message)", .bad)
        case .success(let summary):
            switch summary.result {
            case .restored(.completed):
                var words = "Completed: \(Format.files(summary.placed)) restored into \(summary.target)."
                if !summary.refused.isEmpty {
                    words += " \(summary.refused.count) remote paths were refused: they would land outside the target."
                }
                return (words, summary.refused.isEmpty ? .good : .warning)
            case .restored(.partial(let pending)):
                return ("Incomplete: \(Format.count(summary.placed)) placed, \(Format.count(pending.count)) pending "
                    + "(rejected or not downloaded); they are offered again next run. " + resume, .warning)
            case .restored(.placementRejected(let group)):
                return ("The required group \"\(group)\" was not placed, so the restore stopped there. " + resume, .warning)
            case .restored(.failed(let failure)):
                return ("Failed: \(failure.description). Everything finished is recorded. " + resume, .bad)
            case .restored(let other):
                return (Explanations.of(other).what + ".", .warning)
            case .probe(let probe):
                switch probe {
                case .unavailable(let reason):
                    return (Explanations.of(reason, remote: request.remoteURL ?? profile?.remote ?? "").what + ".", .warning)
                case .failed(let error): return ("Cannot look at the remote: \(error.message)", .bad)
                case .damaged(let message): return ("Nothing was restored: \(message)", .bad)
                case .none: return ("The remote holds no files: there is nothing to restore.", .warning)
                case .notReady:
                    return ("The remote holds files but no readable marker: a sync may be running or was interrupted; "
                        + "let it finish, then restore.", .warning)
                case .found: return ("Unexpected probe result.", .bad)
                }
            }
        }
    }
}
