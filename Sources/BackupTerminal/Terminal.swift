// The one surface every screen draws on and reads keys from: the `Terminal` protocol, with
// its size, cell styles and colour roles. `CursesTerminal` implements it on ncursesw and
// `ScreenBuffer` in memory for tests; nothing above this module knows which one it has.

/// A terminal's size in character cells.
public struct Size: Sendable, Equatable, CustomStringConvertible {
    public var rows: Int
    public var columns: Int

    public init(rows: Int, columns: Int) {
        self.rows = rows
        self.columns = columns
    }

    public var description: String { "\(columns)x\(rows)" }
}

/// What a piece of text is, which the terminal turns into a colour or, without colours, an
/// attribute: screens name roles, never colours.
public enum ColorRole: Sendable, Equatable, CaseIterable {
    case normal
    /// The title bar and the footer.
    case chrome
    /// Headings and names.
    case accent
    /// Finished, placed, completed.
    case good
    /// Needs attention: a guard, a hold, a conflict.
    case warning
    /// Failed.
    case bad
    /// Secondary detail.
    case dim
    /// The filled part of a progress bar.
    case bar
    /// The selected row of a list.
    case selection
}

/// How a run of text is drawn.
public struct Style: Sendable, Equatable {
    public var role: ColorRole
    public var bold: Bool

    public init(_ role: ColorRole = .normal, bold: Bool = false) {
        self.role = role
        self.bold = bold
    }

    public static let normal = Style()
    public static let chrome = Style(.chrome)
    public static let accent = Style(.accent, bold: true)
    public static let good = Style(.good, bold: true)
    public static let warning = Style(.warning, bold: true)
    public static let bad = Style(.bad, bold: true)
    public static let dim = Style(.dim)
    public static let bar = Style(.bar)
    public static let selection = Style(.selection)
}

/// A character-cell terminal: draw into a frame, show it, read keys.
///
/// Implementations are not thread-safe: the one input/draw loop owns its terminal and calls
/// it from one thread only (curses keeps global state).
public protocol Terminal: AnyObject {
    /// The current size; it changes after a `.resize` key.
    var size: Size { get }
    /// Blanks the frame being drawn.
    func erase()
    /// Draws `text` from `row`, `column`, clipped at the right edge; wide characters take two
    /// cells and one that would not fit whole is not drawn. Control characters show as "?".
    func draw(_ text: String, row: Int, column: Int, style: Style)
    /// Where the cursor shows after `present()`; nil hides it.
    func placeCursor(row: Int, column: Int)
    func hideCursor()
    /// Shows the drawn frame.
    func present()
    /// Makes the next `present()` paint the whole screen again, whatever is on it now
    /// (Ctrl-L: another program wrote over the interface).
    func repaintAll()
    /// Gives the terminal to `body` (an editor) as the shell had it, then takes it back and
    /// paints everything again.
    func suspend(_ body: () -> Void)
    /// The next key, waiting at most `timeoutMilliseconds`; nil when none came.
    func readKey(timeoutMilliseconds: Int) -> Key?
}
