// Keys as the screens see them: one enum for characters, control chords, the special keys
// and the resize event, with the label the help screen and the footer show.

/// One key press (or the resize event, which curses delivers as a key).
public enum Key: Hashable, Sendable {
    case character(Character)
    /// Ctrl and a letter, lower case: `.control("u")` is Ctrl-U.
    case control(Character)
    case enter, escape, tab, backTab, backspace, delete
    case up, down, left, right, home, end, pageUp, pageDown
    /// F1…F12.
    case function(Int)
    /// The terminal changed size: redraw at the new size.
    case resize

    /// How help and the footer name the key.
    public var label: String {
        switch self {
        case .character(" "): "Space"
        case .character(let character): String(character)
        case .control(let letter): "Ctrl-" + letter.uppercased()
        case .enter: "Enter"
        case .escape: "Esc"
        case .tab: "Tab"
        case .backTab: "Shift-Tab"
        case .backspace: "Backspace"
        case .delete: "Delete"
        case .up: "↑"
        case .down: "↓"
        case .left: "←"
        case .right: "→"
        case .home: "Home"
        case .end: "End"
        case .pageUp: "PgUp"
        case .pageDown: "PgDn"
        case .function(let number): "F\(number)"
        case .resize: "resize"
        }
    }

    /// The key for a character read from the terminal: the C0 controls become named keys.
    public static func fromScalar(_ scalar: Unicode.Scalar) -> Key {
        switch scalar.value {
        case 10, 13: .enter
        case 9: .tab
        case 27: .escape
        case 8, 127: .backspace
        case 1...26: .control(Character(Unicode.Scalar(scalar.value + 96) ?? "?"))
        default: .character(Character(scalar))
        }
    }
}
