// What the next sync of a profile would do, without doing it: `BackupApp.sync` with
// `dryRun` (the engine's preview, which writes nothing, the state included), then every
// upload and delete as one scrollable list. Only the rows in view are drawn each frame, so a
// plan of a million files scrolls as fast as one of ten.

import BackupApp
import BackupEngine
import BackupTerminal

final class DryRunScreen: Screen {
    private let context: Context
    let profile: Profile
    private let job: SyncJob
    private var state = SyncJobState()
    private var seen = -1
    private var scroll = 0
    private var room = 10
    /// The "find a file" question, what was looked for last, and the row it found.
    private var searchPrompt: InputDialog?
    private var lastSearch = ""
    private var found: Int?
    private var message: String?

    init(context: Context, profile: Profile) {
        self.context = context
        self.profile = profile
        job = context.startSync(profile, SyncRequest(dryRun: true))
    }

    var title: String { "dry run \"\(profile.name)\"" }
    var keys: KeyMap { KeyMaps.dryRun }
    var hints: [Action] {
        if searchPrompt != nil { return [.help, .quit] }
        return plan == nil ? [.back, .help, .quit] : [.sync, .search, .back, .help, .quit]
    }
    var typing: Bool { searchPrompt != nil }
    var runningJob: (any Job)? { job.isRunning ? job : nil }

    /// The plan, once the preview found one.
    private var plan: SyncPreview? {
        if case .success(let summary) = state.result, case .previewed(.wouldRun(let plan)) = summary.result { return plan }
        return nil
    }

    func update() -> Bool {
        let snapshot = job.snapshot
        guard snapshot.version != seen else { return false }
        seen = snapshot.version
        state = snapshot
        return true
    }

    func handle(_ key: Key) -> Response {
        switch InputDialog.apply(key, to: &searchPrompt) {
        case .consumed?: return .handled
        case .passed?: return .ignored
        case .submitted(let text)?:
            find(text)
            return .handled
        case nil: break
        }
        let action = keys.action(for: key)
        if action == .search, plan != nil {
            searchPrompt = InputDialog(title: "Find a file", label: "Path contains:", field: TextField(lastSearch))
            return .handled
        }
        if let plan, ListMove.apply(action, to: &scroll, count: max(plan.uploads.count + plan.deletes.count - room + 1, 1), page: room) {
            return .handled
        }
        if action == .sync, plan != nil {
            return .replace(SyncScreen(context: context, profile: profile, request: SyncRequest()))
        }
        return .ignored
    }

    /// Scrolls to the next upload or delete after the one found last (around the end) whose
    /// path contains `text`, ignoring case. Looks through the plan once per search, not per frame.
    private func find(_ text: String) {
        guard let plan, !text.isEmpty else { return }
        let total = plan.uploads.count + plan.deletes.count
        guard total > 0 else { return }
        let start = text == lastSearch ? (found ?? scroll) + 1 : scroll
        lastSearch = text
        let hit = ListMove.firstMatch(from: start, count: total) { index in
            let path = index < plan.uploads.count ? plan.uploads[index].path : plan.deletes[index - plan.uploads.count]
            return path.localizedCaseInsensitiveContains(text)
        }
        if let hit {
            found = hit
            scroll = hit
            message = nil
            return
        }
        message = "No file to upload or delete has \"\(text)\" in its path."
    }

    func draw(_ canvas: Canvas) {
        defer {
            if let message { canvas.text(message, row: canvas.body.upperBound, style: .warning) }
            searchPrompt?.draw(canvas)
        }
        // A small terminal gives the list the rows of the source and remote (the title names the profile).
        let compact = canvas.compact
        var row = compact ? 1 : 2
        func field(_ name: String, _ value: String, style: Style = .normal, path: Bool = false) {
            canvas.field(name, value, row: &row, label: 9, style: style, path: path)
        }
        if !compact {
            field("Source", profile.source, path: true)
            field("Remote", profile.remote, path: true)
            row += 1
        }
        guard let result = state.result else {
            var words = "Looking at what the next sync would do (nothing is written)…"
            if let scanning = state.scanning { words = "Scanning: \(Format.files(scanning.files)) found, \(Format.count(scanning.hashed)) read…" }
            if state.phase == "listing" { words = "Comparing with the remote (nothing is written)…" }
            canvas.text(words, row: row, style: .accent)
            return
        }
        switch result {
        case .failure(let error):
            canvas.paragraph("Cannot tell what a sync would do: \(error.message)", row: row, style: .bad)
        case .success(let summary):
            switch summary.result {
            case .previewed(.wouldRun(let plan)):
                draw(plan, canvas: canvas, row: row)
            case .previewed(.unavailable(let reason)):
                canvas.paragraph("A sync now would not run: " + Explanations.of(reason, remote: profile.remote).what + ".",
                                 row: row, style: .warning)
            case .previewed(.failed(let error)):
                canvas.paragraph("Cannot look at the remote: \(error.message)", row: row, style: .bad)
            case .ran:
                break
            }
        }
    }

    private func draw(_ plan: SyncPreview, canvas: Canvas, row start: Int) {
        var row = start
        var words = "The next sync would upload \(Format.files(plan.uploads.count)) (\(Format.bytes(plan.uploadBytes))) "
            + "and delete \(Format.files(plan.deletes.count)) from the remote; \(Format.count(plan.unchanged)) are unchanged."
        if plan.uploads.isEmpty && plan.deletes.isEmpty { words = "The next sync would change nothing: \(Format.files(plan.unchanged)) are up to date." }
        if plan.identityReset { words += " The remote's identity changed: everything is uploaded again." }
        row += canvas.paragraph(words, row: row, maxRows: 3, style: .accent)
        if !canvas.compact { row += 1 }
        let total = plan.uploads.count + plan.deletes.count
        room = max(canvas.body.upperBound - row, 1)
        scroll = min(scroll, max(total - room, 0))
        // Only the rows in view: an upload by its position, then the deletes after them.
        for index in scroll..<min(scroll + room, total) {
            let style: Style = index == found ? .selection : .normal
            if index < plan.uploads.count {
                let entry = plan.uploads[index]
                let size = Format.bytes(entry.size)
                canvas.text("+", row: row, column: 1, style: .good)
                canvas.path(entry.path, row: row, column: 3, width: max(canvas.columns - 5 - DisplayWidth.of(size) - 1, 4), style: style)
                canvas.text(size, row: row, column: canvas.columns - 1 - DisplayWidth.of(size), style: .dim)
            } else {
                canvas.text("−", row: row, column: 1, style: .bad)
                canvas.path(plan.deletes[index - plan.uploads.count], row: row, column: 3, style: style)
            }
            row += 1
        }
    }
}
