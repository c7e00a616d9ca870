// Every note of a job, behind a key (v): what the scan skipped or could not read (unreadable
// files and folders, special files, files that changed while read), what the remote's listing
// held that backup does not take, refused paths and failed files of a restore. The job screen
// shows how many and the last; this one lists them all, each wrapped in full.

import BackupTerminal

final class NotesScreen: Screen {
    private let what: String
    private let notes: () -> [String]
    private var scroll = 0
    private var room = 10
    private var lineCount = 0
    /// The lines of the last frame, for `/`.
    private var shown: [String] = []
    private var search = LineSearch()

    /// - Parameter notes: read at every frame, so notes a running job adds appear.
    init(what: String, notes: @escaping () -> [String]) {
        self.what = what
        self.notes = notes
    }

    var title: String { "notes of the \(what)" }
    var keys: KeyMap { KeyMaps.notes }
    var hints: [Action] { search.dialog != nil ? [] : [.search, .back, .help, .quit] }
    var typing: Bool { search.dialog != nil }

    func update() -> Bool { true }

    func handle(_ key: Key) -> Response {
        let action = keys.action(for: key)
        if let response = search.handle(key, action: action, lines: { self.shown }, scroll: &scroll) { return response }
        return ListMove.apply(action, to: &scroll, count: max(lineCount - room + 1, 1), page: room) ? .handled : .ignored
    }

    func draw(_ canvas: Canvas) {
        let all = notes()
        var lines: [String] = ["\(all.count == 1 ? "1 note" : "\(all.count) notes"):"]
        for (index, note) in all.enumerated() {
            let number = "\(index + 1). "
            for (offset, line) in Canvas.wrap(note, width: max(canvas.columns - 3 - number.count, 10)).enumerated() {
                lines.append((offset == 0 ? number : String(repeating: " ", count: number.count)) + line)
            }
        }
        defer { search.draw(canvas) }
        room = canvas.body.count - 1
        lineCount = lines.count
        shown = lines
        scroll = min(scroll, max(lines.count - room, 0))
        for (offset, line) in lines.dropFirst(scroll).prefix(room).enumerated() {
            canvas.text(line, row: canvas.body.lowerBound + 1 + offset, column: 1, style: offset == 0 && scroll == 0 ? .accent : .normal)
        }
    }
}
