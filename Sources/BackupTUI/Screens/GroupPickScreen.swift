// Choosing what to restore before anything is downloaded: the backup's groups, read from its
// marker (the probe only: nothing is written, not even the restore record), each ticked or not;
// Enter starts the restore of the ticked ones (`--only`), and a group left out is never
// downloaded. A remote with no readable backup goes straight on to the restore screen,
// which says what the probe found.

import BackupApp
import BackupEngine
import BackupTerminal
import BackupTree
import Foundation
import Synchronization

final class GroupPickScreen: Screen {
    private enum Loaded: Sendable {
        case groups([BackupApp.BackupGroup])
        /// No backup's groups to choose from (the restore screen says why).
        case nothing
    }

    private let context: Context
    let profile: Profile
    let target: String?
    /// A restore of a remote no profile names: `profile` only carries its URL and target.
    let bare: Bool
    private let loaded = Slot<Loaded>()
    private var groups: [BackupApp.BackupGroup]?
    private var chosen: [Bool] = []
    private var selected = 0
    private var problem: String?
    private var task: Task<Void, Never>?
    /// The files and folders chosen (f); empty: all of the ticked groups.
    private var paths: [String] = []
    /// The time chosen (d), as typed and as read; nil: the backup as it is now.
    private var asOf: (text: String, time: Date)?
    private var dateQuestion: InputDialog?

    init(context: Context, profile: Profile, target: String?, bare: Bool = false) {
        self.context = context
        self.profile = profile
        self.target = target
        self.bare = bare
        let app = context.app
        let loaded = self.loaded
        task = Task.detached {
            let groups = await app.backupGroups(profile)
            loaded.set(groups.map(Loaded.groups) ?? .nothing)
        }
    }

    deinit { task?.cancel() }

    var title: String { bare ? "restore from a remote: choose" : "restore \"\(profile.name)\": choose" }
    var keys: KeyMap { KeyMaps.pick }
    var hints: [Action] {
        if dateQuestion != nil { return [] }
        return groups == nil ? [.back, .help, .quit] : [.submit, .toggle, .toggleAll, .choosePaths, .chooseDate, .back, .help, .quit]
    }

    var typing: Bool { dateQuestion != nil }

    func update() -> Bool {
        guard groups == nil, let value = loaded.value else { return false }
        switch value {
        case .groups(let found):
            groups = found
            chosen = Array(repeating: true, count: found.count)
        case .nothing:
            groups = []
        }
        return true
    }

    func handle(_ key: Key) -> Response {
        switch InputDialog.apply(key, to: &dateQuestion) {
        case .consumed?: return .handled
        case .passed?: return .ignored
        case .submitted(let typed)?:
            let text = typed.trimmingCharacters(in: .whitespaces)
            if text.isEmpty {
                asOf = nil
            } else if let time = VersionTime.parse(text) {
                asOf = (text, time)
                problem = nil
            } else {
                problem = "\"\(text)\" is not a date or time: write 2026-11-30, 2026-11-30T14:05 or 2026-11-30T14:05:09."
            }
            return .handled
        case nil: break
        }
        guard let groups else { return .ignored }
        let action = keys.action(for: key)
        if ListMove.apply(action, to: &selected, count: groups.count, page: 10) { return .handled }
        switch action {
        case .toggle where !groups.isEmpty:
            chosen[selected].toggle()
            problem = nil
        case .toggleAll where !groups.isEmpty:
            let all = !chosen.allSatisfy { $0 }
            chosen = Array(repeating: all, count: groups.count)
            problem = nil
        case .choosePaths:
            return .push(ListEditScreen(
                name: "files and folders to restore",
                explanation: "Paths in the backup, one a row: a file, or a folder and everything in it (docs/taxes, notes.txt). "
                    + "None: every file of the ticked groups.",
                items: paths, check: { PathSelection([$0]) == nil ? "Not a path in the backup: no \".\", \"..\" or empty parts." : nil }
            ) { [weak self] chosen in self?.paths = chosen })
        case .chooseDate:
            dateQuestion = InputDialog(
                title: "Restore as of",
                label: "The backup as it was at (2026-11-30, 2026-11-30T14:05; local time, Z for UTC). Empty: as it is now.",
                field: TextField(asOf?.text ?? ""))
        case .submit:
            var request = RestoreRequest(target: target, remoteURL: bare ? profile.remote : nil)
            request.paths = paths
            request.asOf = asOf?.time
            if !groups.isEmpty {
                guard chosen.contains(true) else {
                    problem = "Tick at least one group (Space), or go back with Esc."
                    return .handled
                }
                if chosen.contains(false) { request.only = zip(groups, chosen).filter(\.1).map(\.0.name) }
            }
            return .replace(RestoreScreen(context: context, profile: bare ? nil : profile, request: request))
        default:
            return .ignored
        }
        return .handled
    }

    func draw(_ canvas: Canvas) {
        // A small terminal gives the groups the rows of the remote and the target.
        let compact = canvas.compact
        var row = compact ? 1 : 2
        if !compact {
            canvas.field("From", profile.remote, row: &row, label: 9, path: true)
            canvas.field("Into", Context.absolute(target ?? profile.source), row: &row, label: 9, path: true)
            row += 1
        }
        guard let groups else {
            canvas.text("Reading the backup's groups (nothing is downloaded yet)…", row: row, style: .accent)
            return
        }
        if groups.isEmpty {
            canvas.paragraph("No groups to choose from here: Enter goes on to the restore, which says what the remote holds.", row: row)
            return
        }
        row += canvas.paragraph("Tick what to restore: nothing is downloaded until Enter, and a group left out is not downloaded at all. "
            + "Required groups (!) are placed first.", row: row, maxRows: compact ? 2 : 3)
        if !compact { row += 1 }
        let rows = max(canvas.body.upperBound - row - 1, 1)
        let first = min(max(selected - rows + 1, 0), max(groups.count - rows, 0))
        for index in first..<min(first + rows, groups.count) {
            let group = groups[index]
            let line = " \(chosen[index] ? "[x]" : "[ ]") \(group.required ? "!" : " ") " + group.name
            if index == selected {
                canvas.fill(line, row: row, style: .selection)
            } else {
                canvas.text(line, row: row, column: 0)
            }
            row += 1
        }
        if !paths.isEmpty, row < canvas.body.upperBound {
            canvas.text("Only: " + paths.joined(separator: " · ") + " (f changes)", row: row + (compact ? 0 : 1), column: 1,
                        width: canvas.columns - 2, style: .accent)
        }
        if let asOf, row + 1 < canvas.body.upperBound {
            canvas.text("As of: " + VersionTime.shown(asOf.time) + " (d changes)", row: row + (compact ? 1 : 2), column: 1,
                        width: canvas.columns - 2, style: .accent)
        }
        if let problem { canvas.text(problem, row: canvas.body.upperBound, style: .warning) }
        dateQuestion?.draw(canvas)
    }
}

/// One value a task hands to the loop's thread, under a lock.
final class Slot<Value: Sendable>: Sendable {
    private let stored = Mutex<Value?>(nil)
    var value: Value? { stored.withLock { $0 } }
    func set(_ value: Value) { stored.withLock { $0 = value } }
}
