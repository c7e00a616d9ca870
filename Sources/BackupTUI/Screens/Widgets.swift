// The small parts screens share: a one-line text field, a yes/no question and a text
// question drawn as boxes over a screen, and the table of restore groups with their bars.

import BackupApp
import BackupTerminal

/// A one-line text field with a cursor, edited as a shell line is: typing inserts at the
/// cursor, ←/→/Home/End (and Ctrl-A/Ctrl-E) move it, Backspace and Delete remove a character,
/// Ctrl-W the word before the cursor, Ctrl-U everything.
struct TextField {
    private(set) var characters: [Character]
    /// Where the next character goes: 0...characters.count.
    private(set) var cursor: Int
    /// A password: drawn as one "•" per character, never as itself.
    var secret = false

    init(_ value: String = "", secret: Bool = false) {
        characters = Array(value)
        cursor = characters.count
        self.secret = secret
    }

    var value: String {
        get { String(characters) }
        set {
            characters = Array(newValue)
            cursor = characters.count
        }
    }

    /// Applies `key`; false when the key is not an edit.
    mutating func handle(_ key: Key) -> Bool {
        if case .character(let character) = key {
            characters.insert(character, at: cursor)
            cursor += 1
            return true
        }
        switch KeyMaps.textField.action(for: key) {
        case .cursorLeft: cursor = max(cursor - 1, 0)
        case .cursorRight: cursor = min(cursor + 1, characters.count)
        case .cursorStart: cursor = 0
        case .cursorEnd: cursor = characters.count
        case .deleteBack:
            if cursor > 0 {
                characters.remove(at: cursor - 1)
                cursor -= 1
            }
        case .deleteForward: if cursor < characters.count { characters.remove(at: cursor) }
        case .deleteWord:
            // The spaces and slashes right before the cursor, then the word or path component
            // before them: "~/photos/2024/" loses "2024/", then "photos/".
            var start = cursor
            while start > 0 && (characters[start - 1] == " " || characters[start - 1] == "/") { start -= 1 }
            while start > 0 && characters[start - 1] != " " && characters[start - 1] != "/" { start -= 1 }
            characters.removeSubrange(start..<cursor)
            cursor = start
        case .clearField:
            characters = []
            cursor = 0
        default: return false
        }
        return true
    }

    /// Draws the field in `width` cells and, when `focused`, places the cursor. A text longer
    /// than the field scrolls so that the cursor stays in view.
    func draw(_ canvas: Canvas, row: Int, column: Int, width: Int, focused: Bool) {
        guard width > 2 else { return }
        let before = secret ? String(repeating: "•", count: cursor) : TerminalText.visible(String(characters[..<cursor]))
        let after = secret ? String(repeating: "•", count: characters.count - cursor) : TerminalText.visible(String(characters[cursor...]))
        // The end of what is before the cursor, and as much after it as still fits.
        let head = DisplayWidth.truncatedHead(before, to: width - 1)
        let tail = DisplayWidth.prefix(after, fitting: width - 1 - DisplayWidth.of(head))
        canvas.terminal.draw(DisplayWidth.padded(head + tail, to: width), row: row, column: column, style: focused ? .selection : Style(.dim))
        if focused { canvas.terminal.placeCursor(row: row, column: column + DisplayWidth.of(head)) }
    }
}

/// A yes/no question in a box.
struct ConfirmDialog {
    var title: String
    var lines: [String]

    /// true for yes, false for no, nil when the key is neither.
    func handle(_ key: Key) -> Bool? {
        switch KeyMaps.confirm.action(for: key) {
        case .yes: true
        case .no: false
        default: nil
        }
    }

    func draw(_ canvas: Canvas) {
        let width = min(canvas.columns - 4, 64)
        let wrapped = lines.flatMap { Canvas.wrap($0, width: width - 4) }
        let height = min(wrapped.count + 4, canvas.rows - 2)
        let top = max((canvas.rows - height) / 2, 1)
        let left = (canvas.columns - width) / 2
        canvas.box(top: top, left: left, height: height, width: width, title: title, style: .warning)
        for (offset, line) in wrapped.prefix(height - 4).enumerated() {
            canvas.text(line, row: top + 1 + offset, column: left + 2, width: width - 4)
        }
        canvas.text("y yes   n no", row: top + height - 2, column: left + 2, width: width - 4, style: .accent)
    }
}

/// Asking for a remote's password, for remotes that take one (`Remotes.takesPassword`).
enum PasswordQuestion {
    static func dialog(remote url: String) -> InputDialog {
        InputDialog(title: "Password", label: "Password for \(Remotes.shownURL(url)) (kept in memory for this session only, never written)",
                    field: TextField(secret: true))
    }

    /// The passphrase of an encrypted remote (missing, or the one given did not open it).
    static func passphrase(remote url: String) -> InputDialog {
        InputDialog(title: "Passphrase", label: "Passphrase of the encrypted backup on \(Remotes.shownURL(url)) (kept in memory for this session only, never written)",
                    field: TextField(secret: true))
    }

    /// Whether a job ended for want of its encrypted remote's passphrase (missing or wrong),
    /// rather than the remote's password.
    static func wantsPassphrase<T>(_ result: Result<T, AppError>?) -> Bool {
        if case .failure(let error)? = result { return error.wantsPassphrase }
        return false
    }

    /// The question a job that ended for want of a secret asks: the passphrase or the password.
    static func dialog(remote url: String, passphrase: Bool) -> InputDialog {
        passphrase ? Self.passphrase(remote: url) : dialog(remote: url)
    }

    /// Keeps what was typed where the job's next run looks for it, for this session only.
    static func keep(_ typed: String, passphrase: Bool, remote url: String, settings: [String: String], in passwords: TypedPasswords) {
        if passphrase {
            passwords.setPassphrase(typed, for: url)
        } else {
            passwords.set(typed, for: url, settings: settings)
        }
    }
}

/// A question answered with a line of text, in a box.
struct InputDialog {
    /// `notAnEdit`: the key is not the dialog's (F1, F10): the loop's global keys may take it.
    enum Outcome { case editing, submitted(String), cancelled, notAnEdit }

    var title: String
    var label: String
    var field: TextField

    mutating func handle(_ key: Key) -> Outcome {
        switch key {
        case .enter: return .submitted(field.value)
        case .escape: return .cancelled
        default: return field.handle(key) ? .editing : .notAnEdit
        }
    }

    /// What a key did to the question in `dialog`, if one is up (nil when none is): typed into
    /// it (`consumed`), closed it (Esc: `consumed`; Enter: `submitted`, and `dialog` is nil
    /// after both), or is not the dialog's (`passed`: F1, F10, for the loop's global keys).
    enum Answer { case consumed, passed, submitted(String) }

    static func apply(_ key: Key, to dialog: inout InputDialog?) -> Answer? {
        guard var open = dialog else { return nil }
        switch open.handle(key) {
        case .editing:
            dialog = open
            return .consumed
        case .notAnEdit:
            return .passed
        case .cancelled:
            dialog = nil
            return .consumed
        case .submitted(let text):
            dialog = nil
            return .submitted(text)
        }
    }

    func draw(_ canvas: Canvas) {
        let width = min(canvas.columns - 4, 72)
        // The label wraps (up to three rows, fewer where the terminal is short).
        let wrapped = Array(Canvas.wrap(label, width: width - 4).prefix(max(min(3, canvas.rows - 7), 1)))
        let height = wrapped.count + 5
        let top = max((canvas.rows - height) / 2, 1)
        let left = (canvas.columns - width) / 2
        canvas.box(top: top, left: left, height: height, width: width, title: title)
        for (offset, line) in wrapped.enumerated() {
            canvas.text(line, row: top + 1 + offset, column: left + 2, width: width - 4)
        }
        field.draw(canvas, row: top + 1 + wrapped.count, column: left + 2, width: width - 4, focused: true)
        canvas.text("Enter ok   Esc cancel", row: top + height - 2, column: left + 2, width: width - 4, style: .accent)
    }
}

/// The restore groups, one row each: name (required ones marked), a bar, and where its
/// files stand.
enum GroupTable {
    /// Draws the groups from `first` into `rows` rows from `row`; returns the rows used.
    @discardableResult
    static func draw(_ groups: [GroupProgress], first: Int, canvas: Canvas, row: Int, rows: Int) -> Int {
        guard rows > 0 else { return 0 }
        let nameWidth = min(max(groups.map { DisplayWidth.of($0.label) }.max() ?? 0, 8), max(canvas.columns / 4, 8))
        let barWidth = max(min(canvas.columns - nameWidth - 38, 30), 6)
        let visible = groups.dropFirst(first).prefix(rows)
        for (offset, group) in visible.enumerated() {
            let y = row + offset
            canvas.text(group.required ? "!" : " ", row: y, column: 1, width: 1, style: .warning)
            canvas.text(DisplayWidth.padded(group.label, to: nameWidth), row: y, column: 3, width: nameWidth, style: .accent)
            var column = 3 + nameWidth + 1
            canvas.bar(fraction(group), row: y, column: column, width: barWidth)
            column += barWidth + 1
            let (words, style) = status(group)
            canvas.text(words, row: y, column: column, style: style)
        }
        return visible.count
    }

    /// The bar says what the words beside it count: while a group is downloaded or asked
    /// about, its downloaded share of what it has left; otherwise its placed share.
    static func fraction(_ group: GroupProgress) -> Double {
        switch group.stage {
        case .downloading, .asking:
            let left = group.total - group.placed
            return left == 0 ? 1 : Double(group.staged) / Double(left)
        case .pending, .placed, .rejected:
            return group.total == 0 ? 0 : Double(group.placed) / Double(group.total)
        }
    }

    /// The group's state in a few words.
    static func status(_ group: GroupProgress) -> (String, Style) {
        let counts = "\(group.placed)/\(group.total)"
        switch group.stage {
        case .placed where group.placed == group.total: return ("\(counts) placed", .good)
        case .placed: return ("\(counts) placed, \(group.total - group.placed) missing", .warning)
        case .asking: return ("\(group.staged) downloaded and checked: place?", .warning)
        case .rejected: return ("\(counts) placed, rejected", .warning)
        case .downloading: return ("\(group.staged)/\(group.total - group.placed) downloaded", .normal)
        case .pending where group.staged > 0: return ("\(counts) placed, \(group.staged) downloaded", .dim)
        case .pending: return ("\(counts) placed", .dim)
        }
    }
}

/// Moving through a list: one step, a page, or to either end.
enum ListMove {
    /// `index` moved by `action` in a list of `count` with `page` rows shown; false when the
    /// action is no move.
    static func apply(_ action: Action?, to index: inout Int, count: Int, page: Int) -> Bool {
        let last = max(count - 1, 0)
        switch action {
        case .up?: index = max(index - 1, 0)
        case .down?: index = min(index + 1, last)
        case .pageUp?: index = max(index - max(page, 1), 0)
        case .pageDown?: index = min(index + max(page, 1), last)
        case .first?: index = 0
        case .last?: index = last
        default: return false
        }
        return true
    }

    /// The first position from `start` on, around the end, in a list of `count` that
    /// `matches`; nil when none does. How `/` finds the next hit in a list.
    static func firstMatch(from start: Int, count: Int, _ matches: (Int) -> Bool) -> Int? {
        guard count > 0 else { return nil }
        return (0..<count).lazy.map { (start + $0) % count }.first(where: matches)
    }
}

/// `/` in a scrolled page of text lines (help, notes): asks what to find and scrolls to the
/// next line holding it (around the end; the same text again goes on from the last hit).
struct LineSearch {
    private(set) var dialog: InputDialog?
    private var last = ""
    private var found: Int?
    /// Said on the page's last row when nothing matched.
    private(set) var message: String?

    /// The key applied: nil when it is not the search's (no question up, and not `/`).
    mutating func handle(_ key: Key, action: Action?, lines: () -> [String], scroll: inout Int) -> Response? {
        switch InputDialog.apply(key, to: &dialog) {
        case .consumed?: return .handled
        case .passed?: return .ignored
        case .submitted(let text)?:
            find(text, in: lines(), scroll: &scroll)
            return .handled
        case nil: break
        }
        guard action == .search else { return nil }
        message = nil
        dialog = InputDialog(title: "Find", label: "Line contains:", field: TextField(last))
        return .handled
    }

    private mutating func find(_ text: String, in lines: [String], scroll: inout Int) {
        guard !text.isEmpty else { return }
        let start = text == last ? (found ?? scroll) + 1 : scroll
        last = text
        if let hit = ListMove.firstMatch(from: start, count: lines.count, { lines[$0].localizedCaseInsensitiveContains(text) }) {
            found = hit
            scroll = hit
            message = nil
        } else {
            message = "No line has \"\(text)\" in it."
        }
    }

    func draw(_ canvas: Canvas) {
        if let message { canvas.text(message, row: canvas.body.upperBound, style: .warning) }
        dialog?.draw(canvas)
    }
}
