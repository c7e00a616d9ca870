// The placement prompt: raised over the restore screen when a group has finished
// downloading. It shows the group's files, which of them would replace a different local
// file, what did not download, and takes place / reject / place all remaining / view list.

import BackupEngine
import BackupTerminal
import BackupTree

struct PlacementPrompt {
    enum Answer: Equatable {
        /// Place the group; `keepingLocal` leaves the local files that differ as they are.
        case place(keepingLocal: Bool)
        case reject
        /// Place the group (as `place`) and every remaining one without a conflict.
        case placeAll(keepingLocal: Bool)
    }

    let offer: PlacementOffer
    /// The file list is showing.
    private(set) var listing = false
    private var scroll = 0
    /// Placing over local files that differ was asked for (`p` or `a`): the second question,
    /// overwrite them or keep them, is up.
    private(set) var askingOverwrite: Answer?

    init(offer: PlacementOffer) { self.offer = offer }

    var keys: KeyMap { askingOverwrite == nil ? KeyMaps.placement : KeyMaps.overwrite }

    /// The answer `key` gives; nil when it only changed the prompt (or was not its key).
    mutating func handle(_ key: Key) -> Answer? {
        if let asked = askingOverwrite {
            let keep: Bool
            switch keys.action(for: key) {
            case .overwrite: keep = false
            case .keepMine: keep = true
            case .back:
                askingOverwrite = nil
                return nil
            default: return nil
            }
            askingOverwrite = nil
            switch asked {
            case .placeAll: return .placeAll(keepingLocal: keep)
            default: return .place(keepingLocal: keep)
            }
        }
        // Nothing replaces a local file that differs without a second, explicit answer
        // (unless --overwrite said so already).
        let asks = offer.asksBeforeOverwriting
        switch keys.action(for: key) {
        case .place:
            if asks { askingOverwrite = .place(keepingLocal: true); return nil }
            return .place(keepingLocal: false)
        case .reject: return .reject
        case .placeAll:
            if asks { askingOverwrite = .placeAll(keepingLocal: true); return nil }
            return .placeAll(keepingLocal: false)
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
        if askingOverwrite != nil {
            let differing = offer.differing
            lines.append(("\(Format.files(differing.count)) here \(differing.count == 1 ? "differs" : "differ") from the backup's copy:", .warning, false))
            for path in differing.prefix(3).map(\.localPath) { lines.append(("  " + path, .warning, true)) }
            if differing.count > 3 { lines.append(("  … and \(differing.count - 3) more", .warning, false)) }
            lines.append(("Overwrite replaces them with the backup's and keeps no copy of yours.", .normal, false))
            lines.append(("Keep mine places the rest; these stay as they are (asked again next run).", .normal, false))
            return lines
        }
        let bytes = group.files.reduce(Int64(0)) { $0 + ($1.size ?? 0) }
        lines.append(("\(Format.files(group.files.count)) downloaded and checked (\(Format.bytes(bytes))).", .normal, false))
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
        let title = askingOverwrite == nil ? "Place group \"\(name)\"?" : "Overwrite your files in \"\(name)\"?"
        canvas.box(top: top, left: left, height: height, width: width, title: title, style: .warning)
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
