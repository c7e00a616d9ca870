// The sync screen: one run of `BackupApp.sync` for a profile, drawn from the job's latest
// state: the phase by name (the scan's running count, uploads, deletes, the marker), a bar
// that follows bytes, the rate and ETA over the last seconds, elapsed time, the files in
// flight, and at the end the outcome in words with the keys that act on it (allow the
// first write, sync anyway past the shrink guard after a confirmation, open the hold).

import BackupApp
import BackupEngine
import BackupTerminal

final class SyncScreen: ProfileJobScreen {
    private let context: Context
    let profile: Profile
    private var request: SyncRequest
    private(set) var job: SyncJob
    private(set) var state = SyncJobState()
    private var seen = -1
    private var secondHand = SecondHand()
    private var confirm: ConfirmDialog?
    private var password: InputDialog?
    /// Back from the hold screen with the hold that stopped this run cleared.
    private var holdCleared = false

    init(context: Context, profile: Profile, request: SyncRequest) {
        self.context = context
        self.profile = profile
        self.request = request
        job = context.startSync(profile, request)
    }

    var title: String { "sync \"\(profile.name)\"" }
    var keys: KeyMap { KeyMaps.sync }
    var runningJob: (any Job)? { job.isRunning ? job : nil }
    var profileName: String? { profile.name }

    /// The unavailable reason the run ended with, if it did.
    private var unavailable: UnavailableReason? {
        if case .success(let summary) = state.result, case .ran(.unavailable(let reason)) = summary.result { return reason }
        if case .success(let summary) = state.result, case .ran(.held(let reason, _)) = summary.result { return .writeHeld(reason: reason) }
        return nil
    }

    /// The keys that act on how the run ended.
    private var offered: [Action] {
        let notes: [Action] = state.noteCount > 0 ? [.showNotes] : []
        // While it runs, a hold can be set: the sync stops before its next write.
        guard state.result != nil else { return notes + [.openHold, .toBackground] }
        return notes + outcomeActions
    }

    /// Whether the run ended for want of a password this remote takes (missing or refused).
    /// Whether it ended for want of the encrypted remote's passphrase (missing or wrong).
    private var wantsPassphrase: Bool { PasswordQuestion.wantsPassphrase(state.result) }

    private var wantsPassword: Bool {
        if wantsPassphrase { return true }
        guard Remotes.takesPassword(profile.remote) else { return false }
        switch state.result {
        case .success(let summary)?: return summary.lacksCredentials
        case .failure(let error)?: return error.isAuthRefused
        case nil: return false
        }
    }

    /// The keys that act on how the run ended.
    private var outcomeActions: [Action] {
        if wantsPassword { return [.enterPassword, .syncAgain] }
        switch unavailable {
        case .needsConsent: return [.allowConsent]
        case .shrinkSuspected, .changeSuspected: return [.allowShrink]
        case .writeHeld: return holdCleared ? [.syncAgain] : [.openHold]
        case .restorePending: return [.restoreFirst]
        case .noAccount, .remoteMissing, .otherWriter, nil: return [.syncAgain]
        }
    }

    var typing: Bool { password != nil }

    var hints: [Action] {
        if confirm != nil || password != nil { return [] }
        return offered + [.back, .help, .quit]
    }

    func update() -> Bool {
        let snapshot = job.snapshot
        let tick = secondHand.moved(at: context.clock()) && snapshot.result == nil
        guard snapshot.version != seen else { return tick }
        seen = snapshot.version
        if state.result == nil, let result = snapshot.result {
            context.lastStatus = Self.status(result)
            context.lastSummary = "sync \"\(profile.name)\": " + outcome(result).0
        }
        state = snapshot
        return true
    }

    static func status(_ result: Result<SyncSummary, AppError>) -> ExitStatus {
        switch result {
        case .success(let summary): summary.status
        case .failure(let error): error.status
        }
    }

    private func restart(_ change: (inout SyncRequest) -> Void) {
        change(&request)
        holdCleared = false
        job = context.startSync(profile, request)
        state = SyncJobState()
        seen = -1
    }

    func handle(_ key: Key) -> Response {
        switch InputDialog.apply(key, to: &password) {
        case .consumed?: return .handled
        case .passed?: return .ignored
        case .submitted(let typed)?:
            guard !typed.isEmpty else { return .handled }
            PasswordQuestion.keep(typed, passphrase: wantsPassphrase, remote: profile.remote, settings: profile.settings, in: context.app.typedPasswords)
            restart { _ in }
            return .handled
        case nil: break
        }
        if let dialog = confirm {
            guard let yes = dialog.handle(key) else { return .handled }
            confirm = nil
            if yes {
                if case .changeSuspected = unavailable { restart { $0.allowChange = true } } else { restart { $0.allowShrink = true } }
            }
            return .handled
        }
        guard let action = keys.action(for: key), offered.contains(action) else { return .ignored }
        switch action {
        case .syncAgain: restart { _ in }
        case .allowConsent: restart { $0.consent = true }
        case .allowShrink:
            if case .shrinkSuspected(let deletes, let known) = unavailable {
                confirm = ConfirmDialog(title: "Sync anyway?", lines: [
                    "This run deletes \(deletes) of the \(known) files in the backup on \(profile.remote).",
                    "Do this only if you really deleted them here, and the source is complete.",
                ])
            } else if case .changeSuspected(let replaces, let known) = unavailable {
                confirm = ConfirmDialog(title: "Sync anyway?", lines: [
                    "This run replaces \(replaces) of the \(known) files in the backup on \(profile.remote) with new contents.",
                    "Files rewritten all at once can be ransomware or a script gone wrong: open a few of them first.",
                    "Do this only if the change is yours (the old contents are kept as versions where they are on).",
                ])
            }
        case .enterPassword: password = PasswordQuestion.dialog(remote: profile.remote, passphrase: wantsPassphrase)
        case .toBackground: return .background
        case .openHold: return .push(HoldScreen(context: context, profile: profile))
        case .showNotes: return .push(NotesScreen(what: "sync") { [weak self] in self?.state.notes ?? [] })
        case .restoreFirst:
            return .replace(RestoreScreen(context: context, profile: profile, request: RestoreRequest()))
        default: return .ignored
        }
        return .handled
    }

    func reappear() {
        // Back from the hold screen: clearing the hold only cleared it; `s` runs the sync.
        if case .writeHeld = unavailable { holdCleared = (try? context.app.hold(profile)) == WriteHold.none }
    }

    func draw(_ canvas: Canvas) {
        defer {
            confirm?.draw(canvas)
            password?.draw(canvas)
        }
        let label = 9
        // A small terminal loses the blank rows first.
        let roomy = !canvas.compact
        var row = roomy ? 2 : 1
        func field(_ name: String, _ value: String, style: Style = .normal, path: Bool = false) {
            canvas.field(name, value, row: &row, label: label, style: style, path: path)
        }
        field("Source", profile.source, path: true)
        field("Remote", profile.remote, path: true)
        if roomy { row += 1 }

        let finished = state.result != nil
        let completed: Bool = {
            if case .success(let summary) = state.result, case .ran(.completed) = summary.result { return true }
            return false
        }()
        let now = context.clock()
        var phase = phaseLine(completed: completed)
        if !finished { phase += "  " + String(TransferPanel.life(at: now)) }
        canvas.text(phase, row: row, style: .accent)
        row += 1
        TransferPanel.drawBar(completed ? 1 : fraction, canvas: canvas, row: row)
        row += 1

        TransferPanel.drawBytes("Sent", state.transfer, now: now, running: !finished, canvas: canvas, row: &row, label: label)
        if let started = state.startedAt, !finished { field("Elapsed", Format.duration(max(0, now - started))) }
        if !finished && !state.transfer.reading.moving.isEmpty {
            // Every row down to the one the scan's line needs.
            let room = max(1, min(state.transfer.reading.moving.count, canvas.body.upperBound - row - 1))
            canvas.text("Moving", row: row, column: 1, width: label, style: .accent)
            row += TransferPanel.drawMoving(state.transfer.reading.moving, canvas: canvas, row: row, label: label, maxRows: room)
        } else if !finished, let current = state.current {
            field("Last", current, path: true)
        }
        if let scanned = state.scanned {
            let later = scanned.whenSent > 0 ? ", \(Format.count(scanned.whenSent)) read as sent" : ""
            field("Scanned", "\(Format.files(scanned.files)) (\(Format.bytes(scanned.bytes))), \(Format.count(scanned.hashed)) read\(later)")
        }
        if state.noteCount > 0, let last = state.notes.last {
            field("Notes", "\(state.noteCount) (v shows them all), the last: \(last)", style: .warning)
        }
        if roomy { row += 1 }
        guard let result = state.result, row < canvas.body.upperBound else { return }
        let (words, style) = outcome(result)
        row += canvas.paragraph(words, row: row, maxRows: max(canvas.body.upperBound - row - offered.count, 1), style: style)
        for action in offered where row < canvas.body.upperBound {
            guard let binding = keys.binding(action), let key = binding.keys.first else { continue }
            canvas.text("\(key.label)  \(binding.summary)", row: row, column: 3, style: .accent)
            row += 1
        }
    }

    /// How far the run is: by bytes while files (or the marker) are uploaded, by files while
    /// they are deleted, by steps otherwise.
    private var fraction: Double {
        switch state.stage {
        case .deleting(let files) where files > 0:
            return Double(state.done - state.stageStart) / Double(files)
        case .uploading, .writingMarker:
            if let fraction = state.transfer.reading.fraction { return fraction }
        default:
            break
        }
        return state.total > 0 ? Double(state.done) / Double(state.total) : 0
    }

    private func phaseLine(completed: Bool) -> String {
        switch state.result {
        case nil: break
        case .success where completed: return "Completed"
        case .success where unavailable != nil: return "Not synced"
        case .failure(let error) where error.status == .interrupted: return "Stopped"
        default: return "Failed"
        }
        switch state.phase {
        case "scanning":
            guard let scanning = state.scanning else { return "Scanning the source…" }
            return "Scanning: \(Format.files(scanning.files)) found, \(Format.count(scanning.hashed)) read "
                + "(\(Format.bytes(scanning.hashedBytes)))"
        case "listing": return "Listing the remote…"
        case "syncing":
            let inStage = state.done - state.stageStart
            switch state.stage {
            case .uploading(let files, _)?: return "Uploading: \(Format.count(inStage)) of \(Format.files(files))"
            case .deleting(let files)?: return "Deleting from the remote: \(Format.count(inStage)) of \(Format.files(files))"
            case .updatingMetadata(let files)?: return "Setting the mode and times of \(Format.files(files)) on the remote"
            case .writingMarker(let bytes)?: return "Writing the backup's marker (\(Format.bytes(bytes)))"
            case nil: return "Comparing with the remote…"
            }
        default: return "Starting…"
        }
    }

    /// How the run ended, in words, and the style to show them in.
    private func outcome(_ result: Result<SyncSummary, AppError>) -> (String, Style) {
        switch result {
        case .failure(let error) where error.status == .interrupted:
            return ("Stopped: what was uploaded is recorded, and the next run continues from there.", .warning)
        case .failure(let error):
            return ("Could not sync: \(error.message)", .bad)
        case .success(let summary):
            switch summary.result {
            case .ran(.completed(let report)):
                // Files, as the scripted mode counts them: the marker is not one of them.
                let files = report.fileCount
                var words = "Completed: \(Format.files(files)) uploaded (\(Format.bytes(report.fileBytes))), "
                    + "\(Format.count(report.deleted.count)) deleted, \(Format.count(report.unchanged)) unchanged."
                if report.markerUploaded { words += " The backup's marker was written (\(Format.bytes(report.markerBytes)))." }
                if !report.deleteFailures.isEmpty { words += " \(report.deleteFailures.count) deletes failed; the next run retries them." }
                if !report.sourceFailures.isEmpty { words += " \(Format.files(report.sourceFailures.count)) could not be read; the next run uploads them." }
                if report.identityReset { words += " The remote's identity changed, so everything was uploaded again." }
                if let kept = report.versions, kept.files > 0 {
                    words += " The old versions of \(Format.files(kept.files)) (\(Format.bytes(kept.bytes))) are kept in \(VersionStore.runFolder(kept.run))."
                }
                if !report.keepFailures.isEmpty {
                    words += " \(Format.files(report.keepFailures.count)) not replaced or deleted: their old versions could not be kept; the next run retries them."
                }
                let clean = report.deleteFailures.isEmpty && report.sourceFailures.isEmpty && report.keepFailures.isEmpty
                return (words, clean ? .good : .warning)
            case .ran(.held(let reason, let report)):
                let files = report.fileCount
                return ("Stopped by the write hold (\(reason)) after \(Format.files(files)) uploaded (\(Format.bytes(report.fileBytes))) "
                    + "and \(Format.count(report.deleted.count)) deleted; what was written is recorded."
                    + (holdCleared ? " The hold is cleared now; s finishes the sync." : " Clear the hold, then sync again to finish."), .warning)
            case .ran(.unavailable(.writeHeld)) where holdCleared:
                return ("Not synced: the write hold stopped this run. The hold is cleared now; nothing was synced since.", .warning)
            case .ran(.unavailable(let reason)), .previewed(.unavailable(let reason)):
                return ("Not synced: " + Explanations.of(reason, remote: profile.remote).what + ".", .warning)
            case .ran(.failed(let error, let report)) where report.fileCount == 0 && report.deleted.isEmpty && !report.markerUploaded:
                return ("Failed: \(error.message). Nothing was written to the remote.", .bad)
            case .ran(.failed(let error, let report)):
                return ("Failed after \(Format.files(report.fileCount)) uploaded: \(error.message). "
                    + "What was uploaded is recorded; the next run continues from there.", .bad)
            case .previewed(.failed(let error)):
                return ("Cannot look at the remote: \(error.message)", .bad)
            case .previewed(.wouldRun):
                return ("Previewed.", .normal)
            }
        }
    }
}
