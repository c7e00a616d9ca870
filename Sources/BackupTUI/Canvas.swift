// Drawing helpers every screen uses on top of a Terminal: text cut to a width, full-width
// rows, progress bars, boxes and word-wrapped paragraphs, plus the frame around every screen
// (title bar on the first row, key hints on the last). Every text drawn passes through
// `TerminalText.visible`: a control or bidi character (in a file name, a group name, a
// server's message) shows as an escape such as `\x1b`, never acts on the terminal.

import BackupApp
import BackupTerminal

/// A terminal seen as rows and columns to draw on.
struct Canvas {
    let terminal: any Terminal
    let rows: Int
    let columns: Int

    init(_ terminal: any Terminal) {
        self.terminal = terminal
        let size = terminal.size
        rows = size.rows
        columns = size.columns
    }

    /// A terminal too short for the blank rows and header lines of a roomy layout (40x12):
    /// screens drop those first, so their fields and lists stay in view.
    var compact: Bool { rows < 20 }

    /// The first and last rows screens may use between the title bar and the footer.
    var body: ClosedRange<Int> { 1...max(1, rows - 2) }

    /// Draws `text` at (row, column), cut with "…" to `width` cells (default: to the edge).
    func text(_ text: String, row: Int, column: Int = 1, width: Int? = nil, style: Style = .normal) {
        let room = min(width ?? (columns - column), columns - column)
        guard room > 0 else { return }
        terminal.draw(DisplayWidth.truncated(TerminalText.visible(text), to: room), row: row, column: column, style: style)
    }

    /// Draws a path, cut from the front so its end (the file name) stays.
    /// A "Label  value" line at `row` (the value a path when `path`), which then moves to the
    /// next row; nothing is drawn below the body.
    func field(_ name: String, _ value: String, row: inout Int, label: Int, style: Style = .normal, path isPath: Bool = false) {
        guard row < body.upperBound else { return }
        text(name, row: row, column: 1, width: label, style: .accent)
        if isPath {
            path(value, row: row, column: label + 1, style: style)
        } else {
            text(value, row: row, column: label + 1, style: style)
        }
        row += 1
    }

    func path(_ text: String, row: Int, column: Int, width: Int? = nil, style: Style = .normal) {
        let room = min(width ?? (columns - column), columns - column)
        guard room > 0 else { return }
        terminal.draw(DisplayWidth.truncatedHead(TerminalText.visible(text), to: room), row: row, column: column, style: style)
    }

    /// Fills a whole row with `text` padded to the width.
    func fill(_ text: String, row: Int, style: Style) {
        terminal.draw(DisplayWidth.padded(TerminalText.visible(text), to: columns), row: row, column: 0, style: style)
    }

    /// A bar of `width` cells, filled by `fraction` (0…1).
    func bar(_ fraction: Double, row: Int, column: Int, width: Int) {
        guard width > 0 else { return }
        let clamped = fraction.isFinite ? min(max(fraction, 0), 1) : 0
        let filled = Int((clamped * Double(width)).rounded(.down))
        terminal.draw(String(repeating: "█", count: filled), row: row, column: column, style: .bar)
        terminal.draw(String(repeating: "░", count: width - filled), row: row, column: column + filled, style: .dim)
    }

    /// Word-wraps `text` into rows from `row`, at most `maxRows`; returns the rows used. A line
    /// break in `text` shows as `\n` (it may come from a server's message): no row is forged.
    @discardableResult
    func paragraph(_ text: String, row: Int, column: Int = 1, width: Int? = nil, maxRows: Int = .max, style: Style = .normal) -> Int {
        let room = min(width ?? (columns - column - 1), columns - column)
        let lines = Self.wrap(TerminalText.visible(text), width: room)
        let shown = lines.prefix(maxRows)
        for (offset, line) in shown.enumerated() {
            var line = line
            if offset == maxRows - 1 && lines.count > maxRows { line = DisplayWidth.truncated(line + " …", to: room) }
            terminal.draw(line, row: row + offset, column: column, style: style)
        }
        return shown.count
    }

    /// A box with a title in its top border, its inside blanked.
    func box(top: Int, left: Int, height: Int, width: Int, title: String, style: Style = .accent) {
        guard height >= 2, width >= 4 else { return }
        let inner = width - 2
        let label = DisplayWidth.truncated(" \(TerminalText.visible(title)) ", to: max(inner - 2, 0))
        let rest = max(inner - 1 - DisplayWidth.of(label), 0)
        terminal.draw("┌─" + label + String(repeating: "─", count: rest) + "┐", row: top, column: left, style: style)
        for row in top + 1..<top + height - 1 {
            terminal.draw("│", row: row, column: left, style: style)
            terminal.draw(String(repeating: " ", count: inner), row: row, column: left + 1, style: .normal)
            terminal.draw("│", row: row, column: left + width - 1, style: style)
        }
        terminal.draw("└" + String(repeating: "─", count: inner) + "┘", row: top + height - 1, column: left, style: style)
    }

    /// The title bar: the tool, the screen's title, and where help is.
    func titleBar(_ title: String, typing: Bool = false) {
        let right = (typing ? "F1" : "?") + " help "
        let left = " backup · " + title
        let room = columns - DisplayWidth.of(right)
        // A long title is cut (…) one cell before the help key, so the two never touch.
        fill(room > 10 ? DisplayWidth.padded(DisplayWidth.truncated(left, to: room - 1), to: room) + right : left, row: 0, style: .chrome)
    }

    /// The footer: the hints of `actions`, from the key tables. While `typing`, a key is named
    /// by its first binding that is not a character (a character would be typed). On a narrow
    /// screen the hints go from the end, but help and quit always stay.
    func footer(_ actions: [Action], keys: KeyMap, typing: Bool = false) {
        var parts: [(action: Action, text: String)] = []
        for action in actions {
            guard let binding = keys.binding(action) ?? KeyMaps.global.binding(action), let hint = binding.hint else { continue }
            let key = typing ? binding.keys.first { if case .character = $0 { false } else { true } } : binding.keys.first
            guard let key else { continue }
            parts.append((action, "\(key.label) \(hint)"))
        }
        func line() -> String { " " + parts.map(\.text).joined(separator: "  ") }
        while DisplayWidth.of(line()) > columns, let last = parts.lastIndex(where: { $0.action != .help && $0.action != .quit }) {
            parts.remove(at: last)
        }
        fill(line(), row: rows - 1, style: .chrome)
    }

    /// Splits `text` into lines of at most `width` cells, at spaces where it can.
    static func wrap(_ text: String, width: Int) -> [String] {
        guard width > 0 else { return [] }
        var lines: [String] = []
        for paragraph in text.split(separator: "\n", omittingEmptySubsequences: false) {
            var line = ""
            for word in paragraph.split(separator: " ", omittingEmptySubsequences: true) {
                var word = String(word)
                let candidate = line.isEmpty ? word : line + " " + word
                if DisplayWidth.of(candidate) <= width {
                    line = candidate
                    continue
                }
                if !line.isEmpty { lines.append(line) }
                while DisplayWidth.of(word) > width {
                    let head = DisplayWidth.prefix(word, fitting: width)
                    lines.append(head)
                    word = String(word.dropFirst(head.count))
                }
                line = word
            }
            lines.append(line)
        }
        return lines
    }
}
