// Setting up a profile (what the first run shows): the folder to back up, where to (a folder
// path works with nothing else set up), the profile's name, and the consent the first
// upload needs. Saving goes through BackupApp.initProfile; with consent the first sync
// starts at once.

import BackupApp
import BackupEngine
import BackupTerminal

final class FirstRunScreen: Screen {
    enum Field: Int, CaseIterable { case source, remote, name, consent }

    private let context: Context
    private(set) var source = TextField()
    private(set) var remote = TextField()
    private(set) var name: TextField
    private(set) var consent = false
    private(set) var focus = Field.source
    private(set) var problem: String?
    private let firstRun: Bool

    init(context: Context, takenNames: [String]) {
        self.context = context
        firstRun = takenNames.isEmpty
        name = TextField(takenNames.contains("default") ? "" : "default")
    }

    var title: String { firstRun ? "set up your first backup" : "new profile" }
    var keys: KeyMap { KeyMaps.firstRun }
    var hints: [Action] { [.submit, .nextField, .back, .help] }
    var typing: Bool { focus != .consent }

    func handle(_ key: Key) -> Response {
        if case .character(" ") = key, focus == .consent {
            consent.toggle()
            return .handled
        }
        switch keys.action(for: key) {
        case .nextField:
            focus = Field(rawValue: min(focus.rawValue + 1, Field.consent.rawValue)) ?? focus
            return .handled
        case .previousField:
            focus = Field(rawValue: max(focus.rawValue - 1, 0)) ?? focus
            return .handled
        case .submit:
            if focus != .consent {
                focus = Field(rawValue: focus.rawValue + 1) ?? .consent
                return .handled
            }
            return save()
        default:
            break
        }
        switch focus {
        case .source: return source.handle(key) ? .handled : .ignored
        case .remote: return remote.handle(key) ? .handled : .ignored
        case .name: return name.handle(key) ? .handled : .ignored
        case .consent:
            if case .character(let character) = key, "yYxX".contains(character) {
                consent = true
                return .handled
            }
            return .ignored
        }
    }

    private func save() -> Response {
        let profileName = name.value.isEmpty ? "default" : name.value
        guard Profile.isValidName(profileName) else {
            problem = "\"\(profileName)\" is not a valid profile name: use letters, digits, \"-\", \"_\" and \".\""
            focus = .name
            return .handled
        }
        guard !source.value.isEmpty else {
            problem = "Name the folder to back up."
            focus = .source
            return .handled
        }
        guard !remote.value.isEmpty else {
            problem = "Name where to back it up: a folder path, webdav://… or s3://…"
            focus = .remote
            return .handled
        }
        do {
            // The shared init: a remote that holds a backup gives the profile its groups. It looks
            // at the remote once (a folder at once; a server within its connect timeout).
            let app = context.app
            let profile = Profile(name: profileName, source: source.value, remote: remote.value)
            let saved = try Context.waiting { () async throws(AppError) in
                try await app.initProfile(profile, replace: false, creatingRemote: false).profile
            }
            problem = nil
            if consent {
                return .replace(SyncScreen(context: context, profile: saved, request: SyncRequest(consent: true)))
            }
            return .pop
        } catch {
            problem = error.message
            return .handled
        }
    }

    func draw(_ canvas: Canvas) {
        // A small terminal keeps every field and the consent box in view: the introduction
        // goes to one row, and the blank rows go.
        let compact = canvas.compact
        var row = compact ? 1 : 2
        row += canvas.paragraph(
            "Which folder to back up, and where to. A folder path as the remote (another disk, a NAS share) "
                + "needs nothing else set up.",
            row: row, maxRows: compact ? 1 : 3)
        if !compact { row += 1 }
        let label = 10
        let width = max(canvas.columns - label - 3, 8)
        func input(_ title: String, _ field: TextField, _ which: Field) {
            canvas.text(title, row: row, column: 1, width: label - 1, style: focus == which ? .accent : .normal)
            field.draw(canvas, row: row, column: label + 1, width: width, focused: focus == which)
            row += 1
        }
        input("Source", source, .source)
        input("Remote", remote, .remote)
        canvas.text("a folder, webdav://host/path or s3://bucket/path", row: row, column: label + 1, style: .dim)
        row += 1
        input("Profile", name, .name)
        if !compact { row += 1 }
        let box = consent ? "[x]" : "[ ]"
        canvas.text(box + " Allow the first upload to this remote (Space)", row: row, column: 1,
                    style: focus == .consent ? .selection : .normal)
        if focus == .consent { canvas.terminal.placeCursor(row: row, column: 2) }
        row += 1
        canvas.text(consent ? "Enter saves the profile and runs the first backup now." : "Enter saves the profile; the first backup asks again.",
                    row: row, column: 5, style: .dim)
        row += compact ? 1 : 2
        if let problem, row < canvas.body.upperBound {
            canvas.paragraph(problem, row: row, maxRows: max(canvas.body.upperBound - row + 1, 1), style: .bad)
        }
    }
}
