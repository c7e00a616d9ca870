// The help screen, built from the key tables: the keys of the screen it was opened from,
// then text fields where that screen has them, then the keys that work everywhere.

import BackupTerminal

final class HelpScreen: Screen {
    /// The tables shown, in order.
    let sections: [KeyMap]
    private var scroll = 0
    /// The rows and lines of the last frame, for paging and the end.
    private var room = 10
    private var lineCount = 0
    private var width = 80
    private var search = LineSearch()

    init(for screen: any Screen) {
        var sections = [screen.keys]
        if screen is FirstRunScreen || screen is ProfileFormScreen || screen.typing { sections.append(KeyMaps.textField) }
        sections.append(KeyMaps.global)
        self.sections = sections
    }

    var title: String { "help" }
    var keys: KeyMap { KeyMaps.help }
    var hints: [Action] { search.dialog != nil ? [] : [.search, .back] }
    var typing: Bool { search.dialog != nil }

    /// The help text, one entry per line.
    func lines(width: Int) -> [(String, Style)] {
        var lines: [(String, Style)] = []
        for section in sections {
            lines.append((section.name, .accent))
            let keyWidth = min(section.bindings.map { DisplayWidth.of($0.keyLabel) }.max() ?? 0, 16)
            for binding in section.bindings {
                let wrapped = Canvas.wrap(binding.summary, width: max(width - keyWidth - 4, 10))
                for (offset, text) in wrapped.enumerated() {
                    let key = offset == 0 ? binding.keyLabel : ""
                    lines.append(("  " + DisplayWidth.padded(key, to: keyWidth) + "  " + text, .normal))
                }
            }
            lines.append(("", .normal))
        }
        return lines
    }

    func handle(_ key: Key) -> Response {
        let action = keys.action(for: key)
        let width = width
        if let response = search.handle(key, action: action, lines: { self.lines(width: width).map(\.0) }, scroll: &scroll) {
            return response
        }
        if ListMove.apply(action, to: &scroll, count: max(lineCount - room + 1, 1), page: room) { return .handled }
        switch action {
        case .back: return .pop
        default: return .ignored
        }
    }

    func draw(_ canvas: Canvas) {
        defer { search.draw(canvas) }
        width = canvas.columns - 2
        let all = lines(width: width)
        let room = canvas.body.count
        self.room = room
        lineCount = all.count
        scroll = min(scroll, max(all.count - room, 0))
        for (offset, line) in all.dropFirst(scroll).prefix(room).enumerated() {
            canvas.text(line.0, row: canvas.body.lowerBound + offset, column: 1, style: line.1)
        }
    }
}
