// Where the command line hands over to the full-screen interface: `backup` with no
// arguments (or `backup tui`) on a terminal, and `sync`/`restore` on a terminal unless
// --no-tui or --json is given (or --dry-run, whose list of paths reads better as text).
// "On a terminal" means standard input and output both are, and TERM names a terminal
// that can draw a screen. Anything the TUI cannot open with (an unknown profile, a bad
// option) stays with the scripted mode, which says what is wrong.

import BackupApp
import BackupTUI
import Foundation

enum TUIBridge {
    /// Runs the TUI for `command` when it applies, else returns nil (run scripted).
    static func run(_ command: ParsedCommand, app: BackupApp) async -> ExitStatus? {
        guard let start = start(for: command, app: app, terminal: onTerminal()) else { return nil }
        return await TUI.run(start, app: app)
    }

    /// Whether standard input and output are a terminal that can draw a screen.
    static func onTerminal(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        let term = environment["TERM"] ?? ""
        // A scheduled run (the timer's service) is a scripted run, whatever it is attached to.
        guard !Scheduler.isScheduledRun(environment) else { return false }
        return isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1 && !term.isEmpty && term != "dumb"
    }

    /// The screen `command` opens with, or nil when it runs scripted.
    static func start(for command: ParsedCommand, app: BackupApp, terminal: Bool) -> TUI.Start? {
        guard terminal else { return nil }
        switch command.path {
        case [], ["tui"]:
            return .home
        case ["sync"]:
            guard !command.flag("no-tui"), !command.flag("json"), !command.flag("dry-run"),
                  let profile = try? app.profile(command.value("profile") ?? "default") else { return nil }
            return .sync(profile, SyncRequest(consent: command.flag("yes"), allowShrink: command.flag("allow-shrink")))
        case ["restore"]:
            guard !command.flag("no-tui"), !command.flag("json"), !(command.flag("reset-attempts") && !command.flag("resume")) else {
                return nil
            }
            let bare = command.value("remote") != nil && command.value("profile") == nil
            let profile = bare ? nil : try? app.profile(command.value("profile") ?? "default")
            if !bare && profile == nil { return nil }
            if bare && command.value("to") == nil { return nil }
            // A request the command line refuses is refused by the scripted run, which says why.
            guard let request = try? RestoreCommand.request(command) else { return nil }
            let placeAll = command.value("place") == "all"
            return request.resume ? .resume(profile, request, placeAll: placeAll) : .restore(profile, request, placeAll: placeAll)
        default:
            return nil
        }
    }
}
