// The TUI's entry point: which screen a session opens on, and the thread it runs on. Curses
// keeps global state and is not thread-safe, so the terminal, the screens and the loop are
// created and used on one dedicated thread for the whole session; the jobs run as tasks
// elsewhere and meet the loop only through their locked latest state. Cancelling the
// calling task (Ctrl-C, SIGTERM) asks the loop to stop its jobs and return.

import BackupApp
import BackupEngine
import BackupTerminal
import Foundation
import Synchronization

public enum TUI {
    /// The screen a session opens on.
    public enum Start: Sendable {
        /// Profiles (and the setup of the first one when there is none).
        case home
        /// A sync of the profile, at once.
        case sync(Profile, SyncRequest)
        /// A restore; `placeAll` places every group unasked (`--place all`).
        case restore(Profile?, RestoreRequest, placeAll: Bool)
        /// The record of an unfinished restore, and continuing it.
        case resume(Profile?, RestoreRequest, placeAll: Bool)
    }

    /// Runs a session on the terminal; nil when the terminal cannot be started (the caller
    /// runs scripted instead), else the exit status.
    public static func run(_ start: Start, app: BackupApp) async -> ExitStatus? {
        let stop = StopFlag()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ExitStatus?, Never>) in
                let thread = Thread {
                    continuation.resume(returning: session(start, app: app, stop: stop))
                }
                thread.name = "backup-tui"
                thread.stackSize = 8 << 20
                thread.start()
            }
        } onCancel: {
            stop.raise()
        }
    }

    /// One session, on the calling thread.
    private static func session(_ start: Start, app: BackupApp, stop: StopFlag) -> ExitStatus? {
        let terminal: CursesTerminal
        do {
            terminal = try CursesTerminal()
        } catch {
            FileHandle.standardError.write(Data("backup: \(TerminalText.visible(String(describing: error)))\n".utf8))
            return nil
        }
        defer { terminal.close() }
        let context = Context(app: app)
        let status = Loop(terminal: terminal, context: context, screens: screens(for: start, context: context), stop: stop).run()
        terminal.close()
        context.stopHelpers()
        if let summary = context.lastSummary {
            // One line on the terminal given back, as the scripted mode would have ended.
            FileHandle.standardOutput.write(Data(("backup: " + TerminalText.visible(summary) + "\n").utf8))
        }
        return status
    }

    /// The stack a session opens with: home at the bottom, so going back always lands there.
    static func screens(for start: Start, context: Context) -> [any Screen] {
        switch start {
        case .home:
            let home = HomeScreen(context: context)
            if home.rows.isEmpty && (try? context.app.loadConfig()) != nil {
                return [home, FirstRunScreen(context: context, takenNames: [])]
            }
            return [home]
        case .sync(let profile, let request):
            return [HomeScreen(context: context, selecting: profile.name), SyncScreen(context: context, profile: profile, request: request)]
        case .restore(let profile, let request, let placeAll):
            // Local files that differ are asked about at the group's prompt (unless --overwrite).
            return [HomeScreen(context: context, selecting: profile?.name),
                    RestoreScreen(context: context, profile: profile, request: request, placeAll: placeAll)]
        case .resume(let profile, let request, let placeAll):
            return [HomeScreen(context: context, selecting: profile?.name),
                    ResumeScreen(context: context, profile: profile, request: request, placeAll: placeAll)]
        }
    }
}
