// Where the command line hands over to the full-screen interface: `backup` with no
// arguments (or `backup tui`) on a terminal, and `sync`/`restore` on a terminal unless
// --no-tui or --json is given. Until the TUI lands, everything runs scripted.

import BackupApp

enum TUIBridge {
    /// Runs the TUI for `command` when it applies, else returns nil (run scripted).
    static func run(_ command: ParsedCommand, app: BackupApp) async -> ExitStatus? {
        nil
    }
}
