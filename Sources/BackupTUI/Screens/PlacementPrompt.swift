// The placement prompt: raised over the restore screen when a group has finished
// downloading. It shows the group's files, which of them would replace a different local
// file, what did not download, and takes place / reject / place all remaining / view list.

import BackupEngine
import BackupTerminal
import BackupTree

struct PlacementPrompt {
    enum Answer { case place, reject, placeAll }

    let offer: PlacementOffer
    /// The file list is showing.
    private(set) var listing = false
    private var scroll = 0

    init(offer: PlacementOffer) { self.offer = offer }

    var keys: KeyMap { KeyMaps.placement }

    /// The answer `key` gives; nil when it only changed the prompt (or was not its key).
    mutating func handle(_ key: Key) -> Answer? {
        switch keys.action(for: key) {
        case .place: return .place
        case .reject: return .reject
        case .placeAll: return .placeAll
        case .viewList:
            listing.toggle()
            scroll = 0
        case .up: scroll = max(scroll - 1, 0)
        case .down: scroll = min(scroll + 1, max(offer.group.files.count + offer.group.failed.count - 1, 0))
        default: break
        }
        return nil
    }

    private var group: RestoreGroup { offer.group }

    /// The prompt's text lines before the keys.
    private func lines(width: Int) -> [(text: String, style: Style, path: Bool)] {
        var lines: [(text: String, style: Style, path: Bool)] = []
        let bytes = group.files.reduce(Int64(0)) { $0 + ($1.size ?? 0) }
        lines.append(("\(Format.files(group.files.count)) downloaded and verified (\(Format.bytes(bytes))).", .normal, false))
        if group.required {
            lines.append(("Required: the restore stops here if you reject it.", .warning, false))
        }
        let conflicting = Set(offer.conflicts.map(\.remotePath))
        if listing {
            let entries = group.files.map { file in
                (conflicting.contains(file.remotePath) ? "≠ " : "  ") + file.remotePath
            } + group.failed.map { "✗ " + $0.remotePath }
            lines.append(("Files (≠ replaces a different local file, ✗ did not download):", .accent, false))
            lines += entries.dropFirst(scroll).map { ($0, .normal, true) }
            return lines
        }
        let replacing = offer.conflicts.filter { $0.kind == .differentFile }
        let blocked = offer.conflicts.filter { $0.kind != .differentFile }
        if conflicting.isEmpty {
            lines.append(("No local file would be replaced.", .good, false))
        }
        for (conflicts, words) in [(replacing, "would replace a different local file:"), (blocked, "would go where a folder, link or special file is:")]
        where !conflicts.isEmpty {
            lines.append(("\(conflicts.count) \(words)", .warning, false))
            for path in conflicts.prefix(3).map(\.remotePath) { lines.append(("  " + path, .warning, true)) }
            if conflicts.count > 3 { lines.append(("  … and \(conflicts.count - 3) more (l lists them)", .warning, false)) }
        }
        if !group.failed.isEmpty {
            lines.append(("\(group.failed.count) did not download; they are tried again next run.", .warning, false))
        }
        return lines
    }

    /// Puts the key hints on as few rows of `width` as they fit, three spaces apart.
    static func pack(_ items: [String], width: Int) -> [String] {
        var rows: [String] = []
        for item in items {
            if let last = rows.last, DisplayWidth.of(last) + 3 + DisplayWidth.of(item) <= width {
                rows[rows.count - 1] = last + "   " + item
            } else {
                rows.append(item)
            }
        }
        return rows
    }

    func draw(_ canvas: Canvas) {
        let width = min(canvas.columns - 2, 76)
        let inner = width - 4
        let body = lines(width: inner)
        let keyRows = Self.pack(keys.bindings.compactMap { binding in binding.hint.map { "\(binding.keys[0].label) \($0)" } }, width: inner)
        let wanted = body.count + keyRows.count + 3
        let height = min(wanted, canvas.rows - 3)
        let top = max(canvas.rows - 1 - height, 1)
        let left = (canvas.columns - width) / 2
        let name = group.label + (group.required ? " (required)" : "")
        canvas.box(top: top, left: left, height: height, width: width, title: "Place group \"\(name)\"?", style: .warning)
        let room = height - 3 - keyRows.count
        for (offset, line) in body.prefix(max(room, 0)).enumerated() {
            if line.path {
                // Two cells of marker, then the path cut from the front.
                canvas.text(String(line.text.prefix(2)), row: top + 1 + offset, column: left + 2, width: 2, style: line.style)
                canvas.path(String(line.text.dropFirst(2)), row: top + 1 + offset, column: left + 4, width: inner - 2, style: line.style)
            } else {
                canvas.text(line.text, row: top + 1 + offset, column: left + 2, width: inner, style: line.style)
            }
        }
        for (offset, line) in keyRows.enumerated() {
            canvas.text(line, row: top + height - 1 - keyRows.count + offset, column: left + 2, width: inner, style: .accent)
        }
    }
}
