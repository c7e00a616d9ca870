// Text from outside the program (file names from a listing, group names from the marker, a
// server's error body) made safe to show on a terminal or write to a log: every character
// that could move the cursor, clear the screen, write the clipboard (OSC 52), start a new
// line or reorder what is shown (bidi overrides) becomes a visible escape. Both front ends
// call it where text reaches the terminal: the scripted mode's `Output`, the TUI's `Canvas`.

/// Visible escapes for the characters a terminal would act on.
public enum TerminalText {
    /// `text` with C0 controls, DEL and C1 controls as `\x1b` (lowercase, two digits; `\n`,
    /// `\t`, `\r` for those three), bidi controls and line separators as `\u{202E}`;
    /// everything else as is.
    ///
    /// A backslash is kept as it is, so escaping twice changes nothing: the second pass finds
    /// no character it would escape. The result holds no line break, so one call is one line.
    public static func visible(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar) else {
                result.unicodeScalars.append(scalar)
                continue
            }
            switch scalar.value {
            case 0x0A: result += "\\n"
            case 0x09: result += "\\t"
            case 0x0D: result += "\\r"
            case let value where value <= 0x9F:
                let hex = String(value, radix: 16)
                result += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            case let value:
                result += "\\u{" + String(value, radix: 16, uppercase: true) + "}"
            }
        }
        return result
    }

    /// Each line of `lines` made visible, joined by line breaks: for a message the program
    /// formats line by line, where a line break inside one piece must not start a line.
    public static func visible(lines: [String]) -> String {
        lines.map(visible).joined(separator: "\n")
    }

    /// Whether `scalar` is shown as an escape: C0 (U+0000–U+001F), DEL, C1 (U+0080–U+009F),
    /// the bidi controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) and the line
    /// and paragraph separators (U+2028, U+2029), which some viewers break lines at.
    public static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: true
        default: false
        }
    }
}
