// The one input/draw loop: it owns the screen stack, reads one key at a time, hands it to
// the top screen and then to the global keys, takes the latest state of running jobs, and
// redraws at most ten times a second however fast progress arrives (a key redraws at once).
// Quitting or going back while a job runs asks first, then cancels the job and waits for it
// to stop, so the job's record is saved before the loop lets go.

import BackupApp
import BackupTerminal
import Synchronization

final class Loop {
    /// What the loop does once the running jobs have stopped.
    private enum After {
        case quit(ExitStatus), pop

        var isQuit: Bool {
            if case .quit = self { return true }
            return false
        }
    }

    /// Whether any job runs, on the stack or in the background.
    private var jobsRun: Bool { (stack + context.background).contains { $0.runningJob != nil } }

    let terminal: any Terminal
    let context: Context
    private(set) var stack: [any Screen]
    private var confirm: (dialog: ConfirmDialog, then: After)?
    private var stopping: After?
    private(set) var finished: ExitStatus?
    /// Raised from another thread (Ctrl-C, SIGTERM): stop the jobs and leave.
    let stop: StopFlag
    private var stopSeen = false
    private var dirty = true
    private var lastDraw = -Double.infinity
    /// The shortest time between two redraws that progress (not keys) asks for.
    let frameInterval: Double

    init(terminal: any Terminal, context: Context, screens: [any Screen], stop: StopFlag = StopFlag(), frameInterval: Double = 0.1) {
        self.terminal = terminal
        self.context = context
        stack = screens
        self.stop = stop
        self.frameInterval = frameInterval
    }

    var top: (any Screen)? { stack.last }

    /// Runs until the person quits (or a stop is requested); returns the exit status.
    func run() -> ExitStatus {
        while finished == nil { step(timeoutMilliseconds: 50) }
        return finished ?? .success
    }

    /// One turn: at most one key, the jobs' latest state, and a redraw when one is due.
    func step(timeoutMilliseconds: Int) {
        if stop.isRaised && !stopSeen {
            stopSeen = true
            confirm = nil
            stopJobs(then: .quit(.interrupted))
        }
        var keyed = false
        if let key = terminal.readKey(timeoutMilliseconds: timeoutMilliseconds) {
            handle(key)
            keyed = true
            dirty = true
        }
        for screen in stack + context.background where screen.update() { dirty = true }
        // "Stop the running job?" asked of a job that has ended since: the question is gone,
        // and the screen shows how the job ended.
        if confirm != nil, stopping == nil, !jobsRun {
            confirm = nil
            dirty = true
        }
        if let after = stopping, !(after.isQuit ? jobsRun : top?.runningJob != nil) {
            stopping = nil
            dirty = true
            switch after {
            case .quit(let status): finished = status
            case .pop: pop()
            }
        }
        if stack.isEmpty && finished == nil { finished = context.lastStatus ?? .success }
        let now = context.clock()
        if dirty && finished == nil && (keyed || now - lastDraw >= frameInterval) {
            draw()
            lastDraw = now
            dirty = false
        }
    }

    private func handle(_ key: Key) {
        if key == .resize { return }
        // Everywhere, as in every curses program: paint the whole screen again.
        if key == .control("l") {
            terminal.repaintAll()
            return
        }
        if let (dialog, then) = confirm {
            guard let yes = dialog.handle(key) else { return }
            confirm = nil
            if yes { stopJobs(then: then) }
            return
        }
        if stopping != nil { return }
        guard let screen = top else { return }
        switch screen.handle(key) {
        case .handled: return
        case .push(let next): stack.append(next)
        case .replace(let next):
            stack.removeLast()
            stack.append(next)
        case .pop: pop()
        case .quit: quit()
        case .outside(let body):
            terminal.suspend(body)
            screen.reappear()
        case .background:
            guard stack.count > 1 else { return }
            context.background.append(stack.removeLast())
            top?.reappear()
        case .ignored:
            switch KeyMaps.global.action(for: key) {
            case .help: if !(screen is HelpScreen) { stack.append(HelpScreen(for: screen)) }
            case .quit: quit()
            case .back: back()
            default: break
            }
        }
    }

    private func pop() {
        guard stack.count > 1 else { return }
        stack.removeLast()
        top?.reappear()
    }

    private func quit() {
        let running = (stack + context.background).compactMap(\.runningJob)
        guard !running.isEmpty else {
            finished = context.lastStatus ?? .success
            return
        }
        confirm = (ConfirmDialog(title: "Quit?", lines: [
            (running.count == 1 ? "A job is" : "\(running.count) jobs are") + " still running"
                + (context.background.contains { $0.runningJob != nil } ? " (in the background too)" : "")
                + ". Quitting stops it cleanly: what it finished is recorded, and the next run "
                + "(or backup restore --resume) continues from there.",
        ]), .quit(.interrupted))
    }

    private func back() {
        guard stack.count > 1, let screen = top else { return }
        guard screen.runningJob != nil else { return pop() }
        confirm = (ConfirmDialog(title: "Stop and go back?", lines: [
            "The job on this screen is still running. Going back stops it cleanly: what it finished is recorded. "
                + "(n, then b, keeps it running in the background instead.)",
        ]), .pop)
    }

    private func stopJobs(then after: After) {
        switch after {
        case .quit: for job in (stack + context.background).compactMap(\.runningJob) { job.cancel() }
        case .pop: top?.runningJob?.cancel()
        }
        stopping = after
    }

    private func draw() {
        terminal.erase()
        terminal.hideCursor()
        let canvas = Canvas(terminal)
        guard let screen = top else { return }
        if canvas.columns < 40 || canvas.rows < 12 {
            canvas.paragraph("backup needs a terminal of at least 40x12 (this one is \(canvas.columns)x\(canvas.rows)).",
                             row: 0, column: 0, width: canvas.columns)
            terminal.present()
            return
        }
        canvas.titleBar(screen.title, typing: screen.typing)
        screen.draw(canvas)
        canvas.footer(confirm == nil ? screen.hints : [], keys: screen.keys, typing: screen.typing)
        if let (dialog, _) = confirm {
            terminal.hideCursor()
            dialog.draw(canvas)
        }
        if stopping != nil {
            canvas.fill(" Stopping: waiting for the job to save what it finished…", row: canvas.rows - 1, style: .warning)
        }
        terminal.present()
    }
}

/// A flag one thread raises and the loop's thread reads: the way out for Ctrl-C and SIGTERM.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)

    func raise() { value.store(true, ordering: .relaxed) }
    var isRaised: Bool { value.load(ordering: .relaxed) }
}
