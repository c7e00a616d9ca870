// The terminal on ncursesw: the only file that imports CCurses. It starts curses (wide
// characters, keypad, no echo, a short Esc delay), maps colour roles to colour pairs or,
// on a monochrome terminal and under NO_COLOR, to attributes, reads keys with get_wch, and
// puts the terminal back on every way out: `close()`, exit() and a crash (the guard in the
// shim). SIGINT and SIGTERM stay with the command line, which cancels the running task;
// the loop then returns and calls `close()`.

import CCurses
import Foundation

/// Why curses could not start.
public struct TerminalError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// The real terminal. Curses keeps global state: create one, and use it from one thread.
public final class CursesTerminal: Terminal {
    private var open = true
    /// Attributes per colour role: colour pairs when colours are on, else plain attributes.
    private var attributes: [ColorRole: Int32] = [:]
    private var cursorAt: (row: Int, column: Int)?
    /// Whether colours are in use (false on a monochrome terminal or under NO_COLOR).
    public private(set) var colors = false

    /// Starts curses on the process's terminal.
    ///
    /// - Parameter environment: read for `NO_COLOR` (any non-empty value turns colours off).
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        // Wide characters need a UTF-8 locale; file names are UTF-8 whatever LANG says, so a
        // C locale falls back to C.UTF-8 rather than drawing every non-ASCII name as "?".
        setlocale(LC_ALL, "")
        if backup_locale_is_utf8() == 0 { setlocale(LC_CTYPE, "C.UTF-8") }
        backup_guard_save_modes()
        guard backup_start() != 0 else {
            throw TerminalError(description: "cannot start the full-screen interface: the terminal type \"\(environment["TERM"] ?? "")\" is unknown; use --no-tui")
        }
        backup_guard_arm()
        cbreak()
        noecho()
        nonl()
        keypad(backup_stdscr(), true)
        set_escdelay(25)
        curs_set(0)
        let noColor = !(environment["NO_COLOR"] ?? "").isEmpty
        colors = !noColor && has_colors()
        setUpStyles()
    }

    deinit { close() }

    private func setUpStyles() {
        let bold = Int32(backup_a_bold())
        let reverse = Int32(backup_a_reverse())
        let dim = Int32(backup_a_dim())
        let underline = Int32(backup_a_underline())
        guard colors else {
            attributes = [
                .normal: 0, .chrome: reverse, .accent: bold, .good: bold, .warning: bold | underline,
                .bad: bold | reverse, .dim: dim, .bar: reverse, .selection: reverse,
            ]
            return
        }
        start_color()
        use_default_colors()
        let pairs: [(ColorRole, Int16, Int16)] = [
            (.chrome, Int16(COLOR_WHITE), Int16(COLOR_BLUE)),
            (.accent, Int16(COLOR_CYAN), -1),
            (.good, Int16(COLOR_GREEN), -1),
            (.warning, Int16(COLOR_YELLOW), -1),
            (.bad, Int16(COLOR_RED), -1),
            (.bar, Int16(COLOR_GREEN), -1),
            (.selection, Int16(COLOR_BLACK), Int16(COLOR_CYAN)),
        ]
        attributes = [.normal: 0, .dim: dim]
        for (number, (role, foreground, background)) in pairs.enumerated() {
            let pair = Int16(number + 1)
            init_pair(pair, foreground, background)
            attributes[role] = Int32(backup_color_pair(Int32(pair)))
        }
    }

    /// Ends curses and restores the terminal (idempotent).
    public func close() {
        guard open else { return }
        open = false
        curs_set(1)
        endwin()
        backup_guard_disarm()
    }

    public var size: Size { Size(rows: Int(backup_lines()), columns: Int(backup_cols())) }

    public func erase() { werase(backup_stdscr()) }

    public func draw(_ text: String, row: Int, column: Int, style: Style) {
        let size = self.size
        guard row >= 0, row < size.rows, column < size.columns else { return }
        let start = max(column, 0)
        let fitted = DisplayWidth.prefix(DisplayWidth.sanitized(text), fitting: size.columns - start)
        guard !fitted.isEmpty else { return }
        var wide = fitted.unicodeScalars.map { wchar_t(bitPattern: $0.value) }
        var attribute = attributes[style.role] ?? 0
        if style.bold { attribute |= Int32(backup_a_bold()) }
        backup_attrset(attribute)
        let count = Int32(wide.count)
        wide.append(0)
        _ = wide.withUnsafeBufferPointer { buffer in
            backup_mvaddnwstr(Int32(row), Int32(start), buffer.baseAddress, count)
        }
        backup_attrset(0)
    }

    public func placeCursor(row: Int, column: Int) { cursorAt = (row, column) }
    public func hideCursor() { cursorAt = nil }

    public func present() {
        if let cursorAt {
            wmove(backup_stdscr(), Int32(cursorAt.row), Int32(cursorAt.column))
            curs_set(1)
        } else {
            curs_set(0)
        }
        wrefresh(backup_stdscr())
    }

    public func repaintAll() {
        clearok(backup_stdscr(), true)
    }

    public func suspend(_ body: () -> Void) {
        def_prog_mode()
        endwin()
        body()
        reset_prog_mode()
        clearok(backup_stdscr(), true)
        refresh()
    }

    public func readKey(timeoutMilliseconds: Int) -> Key? {
        wtimeout(backup_stdscr(), Int32(timeoutMilliseconds))
        var value: wint_t = 0
        let result = backup_get_wch(&value)
        if result == OK {
            guard let scalar = Unicode.Scalar(UInt32(value)) else { return nil }
            // Esc with more right behind it is no Esc: an Alt chord (Esc x) or a sequence this
            // terminal's description does not know (curses gave up matching it). It is read to
            // its end and dropped, so it never acts as "back", nor types its tail.
            if scalar.value == 27, Self.pendingInput() {
                while Self.pendingInput() {}
                return nil
            }
            return Key.fromScalar(scalar)
        }
        guard result == KEY_CODE_YES else { return nil }
        return Self.key(code: Int32(value))
    }

    /// Reads one more key if one is already there (no wait); whether there was one.
    private static func pendingInput() -> Bool {
        wtimeout(backup_stdscr(), 0)
        var value: wint_t = 0
        let result = backup_get_wch(&value)
        return result == OK || result == KEY_CODE_YES
    }

    /// The key for a curses key code; nil for codes the screens do not use.
    private static func key(code: Int32) -> Key? {
        switch code {
        case KEY_UP: return .up
        case KEY_DOWN: return .down
        case KEY_LEFT: return .left
        case KEY_RIGHT: return .right
        case KEY_HOME: return .home
        case KEY_END: return .end
        case KEY_PPAGE: return .pageUp
        case KEY_NPAGE: return .pageDown
        case KEY_BACKSPACE: return .backspace
        case KEY_DC: return .delete
        case KEY_ENTER: return .enter
        case KEY_BTAB: return .backTab
        case KEY_RESIZE: return .resize
        default:
            let function = code - backup_key_f(0)
            return (1...12).contains(function) ? .function(Int(function)) : nil
        }
    }
}
