// The in-memory terminal for tests: a grid of cells with their styles, keys queued by the
// test, and the frame as text to compare with an expected screen. It lays text out with the
// same width table as the curses terminal, so what a test sees is what a person would.

/// A terminal kept in memory: `text` is the last presented frame.
public final class ScreenBuffer: Terminal {
    /// One cell: the character drawn in it ("" for the right half of a wide character).
    public struct Cell: Equatable, Sendable {
        public var text: String
        public var style: Style
        static let blank = Cell(text: " ", style: .normal)
    }

    public private(set) var size: Size
    private var drawing: [[Cell]]
    /// The last frame shown by `present()`.
    public private(set) var frame: [[Cell]]
    /// Where the cursor showed in the last frame; nil when hidden.
    public private(set) var cursor: (row: Int, column: Int)?
    private var pendingCursor: (row: Int, column: Int)?
    /// Keys the loop will read, in order.
    public var keys: [Key] = []
    /// How many frames were presented.
    public private(set) var presented = 0

    public init(columns: Int, rows: Int) {
        size = Size(rows: rows, columns: columns)
        drawing = Self.blank(size)
        frame = drawing
    }

    private static func blank(_ size: Size) -> [[Cell]] {
        Array(repeating: Array(repeating: Cell.blank, count: max(size.columns, 0)), count: max(size.rows, 0))
    }

    /// Changes the size, as a terminal window does, and queues the `.resize` key.
    public func resize(columns: Int, rows: Int) {
        size = Size(rows: rows, columns: columns)
        drawing = Self.blank(size)
        keys.append(.resize)
    }

    public func erase() {
        drawing = Self.blank(size)
    }

    public func draw(_ text: String, row: Int, column: Int, style: Style) {
        guard row >= 0, row < size.rows else { return }
        var col = max(column, 0)
        for character in DisplayWidth.sanitized(text) {
            let cells = DisplayWidth.of(character)
            if cells == 0 { continue }
            if col + cells > size.columns { break }
            clearWide(row, col)
            drawing[row][col] = Cell(text: String(character), style: style)
            if cells == 2 {
                clearWide(row, col + 1)
                drawing[row][col + 1] = Cell(text: "", style: style)
            }
            col += cells
        }
    }

    /// Blanks the other half of a wide character that a write into (row, column) splits.
    private func clearWide(_ row: Int, _ column: Int) {
        if drawing[row][column].text.isEmpty, column > 0 {
            drawing[row][column - 1] = Cell.blank
        } else if column + 1 < size.columns, drawing[row][column + 1].text.isEmpty,
                  DisplayWidth.of(drawing[row][column].text) == 2 {
            drawing[row][column + 1] = Cell.blank
        }
    }

    public func placeCursor(row: Int, column: Int) { pendingCursor = (row, column) }
    public func hideCursor() { pendingCursor = nil }

    /// How many times a whole repaint was asked for (Ctrl-L).
    public private(set) var repaints = 0
    public func repaintAll() { repaints += 1 }

    /// How many times `suspend` gave the terminal away.
    public private(set) var suspensions = 0

    public func suspend(_ body: () -> Void) {
        suspensions += 1
        body()
        repaints += 1
    }

    public func present() {
        frame = drawing
        cursor = pendingCursor
        presented += 1
    }

    /// The next queued key; nil at once when none is queued.
    public func readKey(timeoutMilliseconds: Int) -> Key? {
        keys.isEmpty ? nil : keys.removeFirst()
    }

    // MARK: Reading the frame

    /// The presented frame, one line per row, trailing blanks removed.
    public var text: String { lines.joined(separator: "\n") }

    /// The rows of the presented frame, trailing blanks removed.
    public var lines: [String] {
        frame.map { row in
            var line = row.map(\.text).joined()
            while line.last == " " { line.removeLast() }
            return line
        }
    }

    /// The style of the cell at (row, column) in the presented frame.
    public func style(row: Int, column: Int) -> Style {
        frame[row][column].style
    }
}
