// One list of a profile form (its groups, excludes, size-compared or keep-remotely patterns),
// one entry a row: `a` adds, Enter edits the selected entry, `x` removes it, `/` finds one.
// Every change goes straight back to the form, which saves them all together; an entry
// the form's check refuses (a group spec without NAME=) is said at once and not taken.

import BackupTerminal

final class ListEditScreen: Screen {
    private let name: String
    private let explanation: String
    private(set) var items: [String]
    /// Why an entry cannot be taken (nil: it can).
    private let check: (String) -> String?
    /// Told every change, with the whole list.
    private let changed: ([String]) -> Void
    private var selected = 0
    private var room = 10
    private enum Question { case add, edit(Int), search }
    private var question: (Question, InputDialog)?
    private var lastSearch = ""
    private var message: (String, Style)?

    init(name: String, explanation: String, items: [String], check: @escaping (String) -> String? = { _ in nil },
         changed: @escaping ([String]) -> Void) {
        self.name = name
        self.explanation = explanation
        self.items = items
        self.check = check
        self.changed = changed
    }

    var title: String { name }
    var keys: KeyMap { KeyMaps.listEdit }
    var typing: Bool { question != nil }
    var hints: [Action] {
        if question != nil { return [] }
        return (items.isEmpty ? [.add] : [.add, .editEntry, .removeEntry, .search]) + [.back, .help, .quit]
    }

    func handle(_ key: Key) -> Response {
        if question != nil {
            var dialog: InputDialog? = question?.1
            let asked = question?.0
            let answer = InputDialog.apply(key, to: &dialog)
            question = dialog.flatMap { open in asked.map { ($0, open) } }
            switch answer {
            case .consumed?: return .handled
            case .passed?: return .ignored
            case .submitted(let text)?:
                if let asked { answered(asked, text) }
                return .handled
            case nil: break
            }
        }
        guard let action = keys.action(for: key) else { return .ignored }
        message = nil
        switch action {
        case .add:
            question = (.add, InputDialog(title: "Add to \(name)", label: explanation, field: TextField()))
        case .editEntry where items.indices.contains(selected):
            question = (.edit(selected), InputDialog(title: "Edit", label: explanation, field: TextField(items[selected])))
        case .removeEntry where items.indices.contains(selected):
            let removed = items.remove(at: selected)
            selected = min(selected, max(items.count - 1, 0))
            changed(items)
            message = ("Removed \"\(removed)\" (saved with the profile).", .normal)
        case .search where !items.isEmpty:
            question = (.search, InputDialog(title: "Find", label: "Entry contains:", field: TextField(lastSearch)))
        case let move where ListMove.apply(move, to: &selected, count: items.count, page: room):
            break
        default:
            return .ignored
        }
        return .handled
    }

    private func answered(_ asked: Question, _ text: String) {
        switch asked {
        case .search:
            let start = text == lastSearch ? selected + 1 : selected
            lastSearch = text
            guard !text.isEmpty else { return }
            if let hit = ListMove.firstMatch(from: start, count: items.count, { self.items[$0].localizedCaseInsensitiveContains(text) }) {
                selected = hit
            } else {
                message = ("No entry has \"\(text)\" in it.", .warning)
            }
        case .add, .edit:
            guard !text.isEmpty else { return }
            if let problem = check(text) {
                message = (problem, .bad)
                // Asked again with what was typed, to mend it.
                question = (asked, InputDialog(title: "Add to \(name)", label: explanation, field: TextField(text)))
                return
            }
            if case .edit(let index) = asked, items.indices.contains(index) {
                items[index] = text
                selected = index
            } else {
                items.append(text)
                selected = items.count - 1
            }
            changed(items)
        }
    }

    func draw(_ canvas: Canvas) {
        defer { question?.1.draw(canvas) }
        var row = canvas.body.lowerBound + (canvas.compact ? 0 : 1)
        row += canvas.paragraph(explanation, row: row, maxRows: canvas.compact ? 1 : 2, style: .dim)
        if !canvas.compact { row += 1 }
        let bottom = canvas.body.upperBound - (message == nil ? 0 : 1)
        room = max(bottom - row + 1, 1)
        if items.isEmpty {
            canvas.text("(none: a adds one)", row: row, column: 3, style: .dim)
        } else {
            let first = min(max(selected - room + 1, 0), max(items.count - room, 0))
            let top = selected < first ? selected : first
            for (offset, item) in items.enumerated().dropFirst(top).prefix(room) {
                let isSelected = offset == selected
                canvas.text((isSelected ? "> " : "  ") + item, row: row + offset - top, column: 1, width: canvas.columns - 2,
                            style: isSelected ? .selection : .normal)
            }
        }
        if let (words, style) = message { canvas.text(words, row: canvas.body.upperBound, style: style) }
    }
}
