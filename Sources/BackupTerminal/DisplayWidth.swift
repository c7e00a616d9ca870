// How many terminal cells text takes: CJK and emoji two, combining marks none, everything
// else one (the rules of wcwidth, as tmux and xterm apply them). One table serves both the
// curses terminal and the in-memory buffer, so tests lay out text as the terminal does and
// the layout never depends on the test machine's locale. Also clipping and truncation by
// cells, and the replacement of control characters (a file name may hold a newline or an
// escape, which must not reach the terminal).

/// Cell widths of characters and strings, and cutting text to a number of cells.
public enum DisplayWidth {
    /// Ranges of scalars that take two cells (East Asian Wide and Fullwidth, emoji).
    private static let wide: [ClosedRange<UInt32>] = [
        0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0...0x23F0,
        0x23F3...0x23F3, 0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F...0x267F,
        0x2693...0x2693, 0x26A1...0x26A1, 0x26AA...0x26AB, 0x26BD...0x26BE, 0x26C4...0x26C5,
        0x26CE...0x26CE, 0x26D4...0x26D4, 0x26EA...0x26EA, 0x26F2...0x26F3, 0x26F5...0x26F5,
        0x26FA...0x26FA, 0x26FD...0x26FD, 0x2705...0x2705, 0x270A...0x270B, 0x2728...0x2728,
        0x274C...0x274C, 0x274E...0x274E, 0x2753...0x2755, 0x2757...0x2757, 0x2795...0x2797,
        0x27B0...0x27B0, 0x27BF...0x27BF, 0x2B1B...0x2B1C, 0x2B50...0x2B50, 0x2B55...0x2B55,
        0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
        0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F,
        0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x16FE0...0x16FE4, 0x17000...0x18AFF, 0x1B000...0x1B2FF,
        0x1F004...0x1F004, 0x1F0CF...0x1F0CF, 0x1F18E...0x1F18E, 0x1F191...0x1F19A, 0x1F200...0x1F202,
        0x1F210...0x1F23B, 0x1F240...0x1F248, 0x1F250...0x1F251, 0x1F260...0x1F265, 0x1F300...0x1F320,
        0x1F32D...0x1F335, 0x1F337...0x1F37C, 0x1F37E...0x1F393, 0x1F3A0...0x1F3CA, 0x1F3CF...0x1F3D3,
        0x1F3E0...0x1F3F0, 0x1F3F4...0x1F3F4, 0x1F3F8...0x1F43E, 0x1F440...0x1F440, 0x1F442...0x1F4FC,
        0x1F4FF...0x1F53D, 0x1F54B...0x1F54E, 0x1F550...0x1F567, 0x1F57A...0x1F57A, 0x1F595...0x1F596,
        0x1F5A4...0x1F5A4, 0x1F5FB...0x1F64F, 0x1F680...0x1F6C5, 0x1F6CC...0x1F6CC, 0x1F6D0...0x1F6D2,
        0x1F6D5...0x1F6D7, 0x1F6EB...0x1F6EC, 0x1F6F4...0x1F6FC, 0x1F7E0...0x1F7EB, 0x1F90C...0x1F93A,
        0x1F93C...0x1F945, 0x1F947...0x1F9FF, 0x1FA70...0x1FAFF, 0x20000...0x2FFFD, 0x30000...0x3FFFD,
    ]

    /// The cells one scalar takes: 0, 1 or 2; control characters count 1 (they are drawn as "?").
    public static func of(_ scalar: Unicode.Scalar) -> Int {
        let value = scalar.value
        if value < 0x300 { return value == 0 ? 0 : 1 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if (0x1160...0x11FF).contains(value) || value == 0x200B { return 0 }
        var low = 0
        var high = wide.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if value < wide[middle].lowerBound {
                high = middle - 1
            } else if value > wide[middle].upperBound {
                low = middle + 1
            } else {
                return 2
            }
        }
        return 1
    }

    /// The cells one character (a grapheme cluster) takes: its scalars' widths, at most 2.
    public static func of(_ character: Character) -> Int {
        if character.isASCII { return 1 }
        var total = 0
        for scalar in character.unicodeScalars { total += of(scalar) }
        return min(total, 2)
    }

    /// The cells `text` takes.
    public static func of(_ text: String) -> Int {
        var total = 0
        for character in text { total += of(character) }
        return total
    }

    /// `text` with every control character (C0, DEL, C1, line and paragraph separators)
    /// replaced by "?", so nothing drawn can move the cursor or change the terminal.
    public static func sanitized(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars { result.append(isControl(scalar) ? "?" : scalar) }
        return String(result)
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x2028 || value == 0x2029
    }

    /// The longest prefix of `text` that fits in `width` cells (a wide character that would
    /// be cut in half is left out).
    public static func prefix(_ text: String, fitting width: Int) -> String {
        guard width > 0 else { return "" }
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            let cells = of(text[index])
            if used + cells > width { break }
            used += cells
            end = text.index(after: index)
        }
        return String(text[..<end])
    }

    /// `text` cut to `width` cells, ending in "…" when something was cut.
    public static func truncated(_ text: String, to width: Int) -> String {
        if of(text) <= width { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        return prefix(text, fitting: width - 1) + "…"
    }

    /// `text` cut to `width` cells from the front, starting with "…": for paths, whose end
    /// (the file name) says the most.
    public static func truncatedHead(_ text: String, to width: Int) -> String {
        if of(text) <= width { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        var used = 0
        var start = text.endIndex
        while start > text.startIndex {
            let previous = text.index(before: start)
            let cells = of(text[previous])
            if used + cells > width - 1 { break }
            used += cells
            start = previous
        }
        return "…" + text[start...]
    }

    /// `text` truncated to `width` cells and padded with spaces to exactly `width`.
    public static func padded(_ text: String, to width: Int) -> String {
        let cut = truncated(text, to: width)
        let missing = width - of(cut)
        return missing > 0 ? cut + String(repeating: " ", count: missing) : cut
    }
}
