// The home screen: every profile with its source, remote, last sync and hold, the selected
// one in detail, and the keys to sync, restore, resume, hold or add a profile.

import BackupApp
import BackupEngine
import BackupTerminal
import Foundation

final class HomeScreen: Screen {
    private let context: Context
    private(set) var rows: [ProfileOverview] = []
    private var selected = 0
    private var problem: String?
    private var message: String?
    /// What a question asks for (at most one is up at a time).
    private enum Question {
        /// `/`: a profile to find.
        case search
        /// `r`: the folder to restore `profile` into.
        case target(Profile)
        /// `o`: a remote no profile names, then (`bareTarget`) the folder to restore it into.
        case remote
        case bareTarget(remote: String)
    }

    /// The question that is up, and what it is for.
    private var question: InputDialog?
    private var asking: Question = .search
    /// "Delete this profile?", and the profile it asks about.
    private var deleting: (dialog: ConfirmDialog, profile: Profile)?
    /// What `/` looked for last: asked again, it finds the next one.
    private var lastSearch = ""
    /// How many profiles the list showed last: a page for PgUp and PgDn.
    private var listRows = 10
    /// When the profiles were read last (clock seconds): the list reads them again on its own.
    private var loadedAt = -Double.infinity
    /// Seconds between two readings the list makes on its own.
    static let refreshInterval = 2.0
    private let load: (BackupApp) throws(AppError) -> [ProfileOverview]
    /// What the next sync of a profile would do, in words, as a dry run of it found (once a
    /// visit of the list: read again after a job or an edit, and with g).
    private var nextSync: [String: (String, Style)] = [:]
    /// The dry run under way for the selected profile.
    private var previewing: (name: String, job: SyncJob)?

    /// - Parameter load: reads the profiles and their state (tests give fixed ones).
    init(context: Context, selecting name: String? = nil,
         load: @escaping (BackupApp) throws(AppError) -> [ProfileOverview] = ProfileOverview.load) {
        self.context = context
        self.load = load
        reload()
        if let name, let index = rows.firstIndex(where: { $0.profile.name == name }) { selected = index }
    }

    var title: String { "profiles" }
    var keys: KeyMap { KeyMaps.home }
    var typing: Bool { question != nil }

    var hints: [Action] {
        if deleting != nil { return [] }
        if typing { return [.help, .quit] }
        let back: [Action] = context.background.isEmpty ? [] : [.fromBackground]
        return back + (rows.isEmpty ? [.newProfile, .restoreRemote, .editConfig, .help, .quit]
            : [.sync, .dryRun, .restore, .resume, .hold, .newProfile, .editProfile, .help, .quit])
    }

    /// Reads the profiles and their state again.
    func reload() {
        loadedAt = context.clock()
        do {
            rows = try load(context.app)
            problem = nil
        } catch {
            rows = []
            problem = error.message
        }
        selected = min(selected, max(rows.count - 1, 0))
    }


    private var current: ProfileOverview? { rows.indices.contains(selected) ? rows[selected] : nil }

    /// Asks `dialog` for `purpose`.
    private func ask(_ purpose: Question, _ dialog: InputDialog) {
        asking = purpose
        question = dialog
    }

    func handle(_ key: Key) -> Response {
        switch InputDialog.apply(key, to: &question) {
        case .consumed?: return .handled
        case .passed?: return .ignored
        case .submitted(let text)?: return answered(text)
        case nil: break
        }
        if let (dialog, profile) = deleting {
            guard let yes = dialog.handle(key) else { return .handled }
            deleting = nil
            guard yes else { return .handled }
            do {
                try context.app.deleteProfile(profile)
                message = "Deleted profile \"\(profile.name)\"; its backup on \(profile.remote) is untouched."
            } catch {
                message = error.message
            }
            reload()
            return .handled
        }
        guard let action = keys.action(for: key) else { return .ignored }
        message = nil
        switch action {
        case .up, .down, .pageUp, .pageDown, .first, .last:
            _ = ListMove.apply(action, to: &selected, count: rows.count, page: listRows)
        case .search:
            ask(.search, InputDialog(title: "Find a profile", label: "Name, source or remote contains:", field: TextField(lastSearch)))
        case .refresh:
            forgetPreviews()
            reload()
        case .fromBackground:
            guard let screen = context.takeFromBackground(profile: current?.profile.name) else {
                message = "No job runs in the background."
                return .handled
            }
            return .push(screen)
        case .newProfile: return .push(ProfileFormScreen(context: context, editing: nil, takenNames: rows.map(\.profile.name)))
        case .editProfile:
            guard let profile = current?.profile else {
                message = "There is no profile yet: press n to set one up."
                return .handled
            }
            return .push(ProfileFormScreen(context: context, editing: profile, takenNames: rows.map(\.profile.name)))
        case .restoreRemote:
            ask(.remote, InputDialog(title: "Restore from a remote", label: "Remote (a folder, webdav://…, s3://…):", field: TextField()))
        case .editConfig:
            let path = context.app.configPath
            let editor = Self.editor(context.app.environment)
            return .outside { Self.edit(path, with: editor) }
        case .deleteProfile:
            guard let profile = current?.profile else { return .handled }
            deleting = (ConfirmDialog(title: "Delete profile \"\(profile.name)\"?", lines: [
                "Its section leaves the config file, and its local state (what is backed up, an unfinished restore, the hold) is forgotten.",
                "The backup on \(profile.remote) is not touched: a new profile for it takes its groups again.",
            ]), profile)
        case .sync, .restore, .resume, .hold, .showProfile, .dryRun, .verify:
            guard let overview = current else {
                message = "There is no profile yet: press n to set one up."
                return .handled
            }
            let profile = overview.profile
            // One job a profile: a sync or restore of it still running in the background comes back.
            if [.sync, .restore, .resume].contains(action),
               context.background.contains(where: { ($0 as? ProfileJobScreen)?.profileName == profile.name && $0.runningJob != nil }),
               let screen = context.takeFromBackground(profile: profile.name) {
                return .push(screen)
            }
            switch action {
            case .sync: return .push(SyncScreen(context: context, profile: profile, request: SyncRequest()))
            case .dryRun: return .push(DryRunScreen(context: context, profile: profile))
            case .verify: return .push(VerifyScreen(context: context, profile: profile))
            case .showProfile: return .push(ProfileScreen(context: context, overview: overview))
            case .restore:
                ask(.target(profile), InputDialog(
                    title: "Restore \"\(profile.name)\"", label: "Into which folder? (files that differ are asked about)",
                    field: TextField(profile.source)))
            case .resume:
                let request = RestoreRequest(resume: true)
                return .push(ResumeScreen(context: context, profile: profile, request: request))
            default: return .push(HoldScreen(context: context, profile: profile))
            }
        default: return .ignored
        }
        return .handled
    }

    /// What the answer to the question that was up leads to.
    private func answered(_ text: String) -> Response {
        switch asking {
        case .search:
            find(text)
        case .target(let profile):
            // The groups are chosen before anything is downloaded; local files that differ are
            // asked about at each group's prompt, never replaced unasked.
            return .push(GroupPickScreen(context: context, profile: profile, target: text.isEmpty ? nil : text))
        case .remote:
            guard !text.isEmpty else { return .handled }
            ask(.bareTarget(remote: text),
                InputDialog(title: "Restore from \(text)", label: "Into which folder? (a new one is made)", field: TextField()))
        case .bareTarget(let url):
            guard !text.isEmpty else {
                message = "A restore from a remote needs the folder to restore into."
                ask(.bareTarget(remote: url),
                    InputDialog(title: "Restore from \(url)", label: "Into which folder? (a new one is made)", field: TextField()))
                return .handled
            }
            let remote = url.contains("://") ? url : Context.absolute(url)
            let carrier = Profile(name: "remote", source: Context.absolute(text), remote: remote)
            return .push(GroupPickScreen(context: context, profile: carrier, target: text, bare: true))
        }
        return .handled
    }

    /// The person's editor: $VISUAL, else $EDITOR, else vi.
    static func editor(_ environment: [String: String]) -> String {
        [environment["VISUAL"], environment["EDITOR"]].compactMap { $0 }.first { !$0.isEmpty } ?? "vi"
    }

    /// Runs `editor` on `path` with the terminal (through /bin/sh, so an editor given with its
    /// options works; the path goes as an argument, never into the command text), and waits.
    static func edit(_ path: String, with editor: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", editor + " \"$1\"", "sh", path]
        do {
            try process.run()
            process.waitUntilExit()
        } catch {
            FileHandle.standardError.write(Data("backup: cannot run the editor \(editor): \(error.localizedDescription)\n".utf8))
        }
    }

    /// Reads the profiles again every few seconds while nothing is being typed, so a sync of
    /// another process (a cron job), a hold set elsewhere, or a run that ended shows by itself.
    func update() -> Bool {
        let previewed = updatePreview()
        guard !typing, context.clock() - loadedAt >= Self.refreshInterval else { return previewed }
        let before = (rows, problem)
        reload()
        return previewed || rows != before.0 || problem != before.1
    }

    func reappear() {
        forgetPreviews()
        reload()
    }

    private func forgetPreviews() {
        previewing?.job.cancel()
        previewing = nil
        nextSync = [:]
    }

    /// Takes the end of the selected profile's dry run, or starts one where none was made
    /// (not while a run of it holds its lock); true when there is something new to draw.
    private func updatePreview() -> Bool {
        if let (name, job) = previewing {
            guard let result = job.snapshot.result else { return false }
            previewing = nil
            nextSync[name] = Self.nextSyncWords(result, remote: rows.first { $0.profile.name == name }?.profile.remote ?? "")
            return true
        }
        guard let start = context.startPreview, let overview = current, !overview.running,
              nextSync[overview.profile.name] == nil else { return false }
        previewing = (overview.profile.name, start(overview.profile))
        return false
    }

    /// What a dry run found, as the "Next sync" row says it.
    static func nextSyncWords(_ result: Result<SyncSummary, AppError>, remote: String) -> (String, Style) {
        switch result {
        case .failure(let error): return ("cannot tell: \(error.message)", .warning)
        case .success(let summary):
            switch summary.result {
            case .previewed(.wouldRun(let plan)):
                if plan.uploads.isEmpty && plan.deletes.isEmpty { return ("nothing to upload or delete", .normal) }
                return ("\(Format.files(plan.uploads.count)) to upload (\(Format.bytes(plan.uploadBytes))), "
                    + "\(Format.count(plan.deletes.count)) to delete from the remote (d lists them)", .normal)
            case .previewed(.unavailable(let reason)), .ran(.unavailable(let reason)):
                return ("would not run: " + Explanations.of(reason, remote: remote).what, .warning)
            case .previewed(.failed(let error)): return ("cannot look at the remote: \(error.message)", .warning)
            case .ran: return ("", .normal)
            }
        }
    }

    /// Selects the next profile after the selected one (around the end) whose name, source or
    /// remote contains `text`, ignoring case; says so when none does.
    private func find(_ text: String) {
        guard !text.isEmpty, !rows.isEmpty else { return }
        // The same text again goes on from the one found; a new one starts at the selection.
        let start = text == lastSearch ? selected + 1 : selected
        lastSearch = text
        let hit = ListMove.firstMatch(from: start, count: rows.count) { index in
            let profile = rows[index].profile
            return [profile.name, profile.source, profile.remote].contains { $0.localizedCaseInsensitiveContains(text) }
        }
        if let hit {
            selected = hit
            return
        }
        message = "No profile's name, source or remote contains \"\(text)\"."
    }

    func draw(_ canvas: Canvas) {
        defer {
            if let message { canvas.text(message, row: canvas.body.upperBound, style: .warning) }
            question?.draw(canvas)
            deleting?.dialog.draw(canvas)
        }
        var row = 2
        if let problem {
            row += canvas.paragraph("The config cannot be read: \(problem)", row: row, style: .bad)
            canvas.paragraph("Fix the file, then press g to read it again.", row: row + 1)
            return
        }
        if rows.isEmpty {
            canvas.paragraph(
                "No profiles yet. Press n to set one up: the folder to back up and where to "
                    + "(a folder path on another disk or a NAS share works with nothing else set up). "
                    + "On a new machine, o restores a backup from its remote first.", row: row)
            return
        }
        let nameWidth = min(max(rows.map { DisplayWidth.of($0.profile.name) }.max() ?? 0, 7), 20)
        let listRows = min(rows.count, max(canvas.body.upperBound - 10, 3))
        self.listRows = listRows
        let first = min(max(selected - listRows + 1, 0), max(rows.count - listRows, 0))
        for (offset, overview) in rows.dropFirst(first).prefix(listRows).enumerated() {
            let index = first + offset
            let isSelected = index == selected
            var line = (isSelected ? " ▸ " : "   ") + DisplayWidth.padded(overview.profile.name, to: nameWidth) + "  "
            line += overview.lastSync.map { "synced " + Format.date($0, zone: context.timeZone) } ?? "never synced"
            if let job = context.background.last(where: { ($0 as? ProfileJobScreen)?.profileName == overview.profile.name }) {
                line += job.runningJob == nil ? " · finished in the background (b)" : job.waitsForAnswer ? " · waits for you (b)" : " · running in the background (b)"
            } else if overview.running {
                line += " · running now"
            } else if let outcome = overview.lastOutcome, outcome.kind != .completed {
                line += outcome.kind == .unavailable ? " · not synced last time" : " · last attempt " + (outcome.kind == .failed ? "failed" : "stopped")
            }
            if overview.hold.isHeld { line += " · held" }
            if overview.unfinishedRestore { line += " · restore unfinished" }
            if isSelected {
                canvas.fill(line, row: row + offset, style: .selection)
            } else {
                canvas.text(line, row: row + offset, column: 0, style: overview.hold.isHeld ? .warning : .normal)
            }
        }
        row += listRows + 1
        guard let overview = current, row < canvas.body.upperBound else { return }
        canvas.text(String(repeating: "─", count: max(canvas.columns - 2, 0)), row: row, style: .dim)
        row += 1
        let label = 11
        func field(_ name: String, _ value: String, style: Style = .normal, path: Bool = false) {
            canvas.field(name, value, row: &row, label: label, style: style, path: path)
        }
        field("Source", overview.profile.source, path: true)
        field("Remote", overview.profile.remote, path: true)
        field("Last sync", overview.lastSync.map { Format.date($0, zone: context.timeZone) } ?? "never")
        if let outcome = overview.lastOutcome {
            let zone = context.timeZone
            field("Last run", outcome.sentence { Format.date($0, zone: zone) }, style: outcome.kind == .completed ? .normal : .warning)
        }
        field("Backed up", "\(Format.files(overview.files)) (\(Format.bytes(overview.bytes)))")
        if context.startPreview != nil, !overview.running {
            let (words, style) = nextSync[overview.profile.name] ?? ("looking (a dry run: it writes nothing)…", .dim)
            field("Next sync", words, style: style)
        }
        switch overview.hold {
        case .none: field("Hold", "none")
        case .held(let reason): field("Hold", "set: \(reason)", style: .warning)
        }
        if overview.unfinishedRestore { field("Restore", "unfinished: press c to see and continue it", style: .warning) }
        if let problem = overview.problem { field("State", problem, style: .bad) }
    }
}
