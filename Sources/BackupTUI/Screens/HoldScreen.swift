// The write hold of one profile: see it, set it with a reason, clear it. Both go through
// BackupApp.setHold, which a running sync reads before every write.

import BackupApp
import BackupEngine
import BackupTerminal

final class HoldScreen: Screen {
    private let context: Context
    let profile: Profile
    private(set) var hold: WriteHold = .none
    private var problem: String?
    private var reasonPrompt: InputDialog?
    /// When the hold was read last (clock seconds): read again each second, so a hold another
    /// process set or cleared (`backup hold`, a script) is shown as it is now.
    private var readAt = -Double.infinity

    init(context: Context, profile: Profile) {
        self.context = context
        self.profile = profile
        reload()
    }

    func update() -> Bool {
        guard context.clock() - readAt >= 1 else { return false }
        let before = (hold, problem)
        reload()
        return hold != before.0 || problem != before.1
    }

    private func reload() {
        readAt = context.clock()
        do {
            hold = try context.app.hold(profile)
            problem = nil
        } catch {
            problem = error.message
        }
    }

    var title: String { "hold \"\(profile.name)\"" }
    var keys: KeyMap { KeyMaps.hold }
    var typing: Bool { reasonPrompt != nil }

    var hints: [Action] {
        if reasonPrompt != nil { return [.help, .quit] }
        return (hold.isHeld ? [.clearHold, .setHold] : [.setHold]) + [.back, .help, .quit]
    }

    func handle(_ key: Key) -> Response {
        switch InputDialog.apply(key, to: &reasonPrompt) {
        case .consumed?: return .handled
        case .passed?: return .ignored
        case .submitted(let reason)?:
            change(.held(reason: reason.isEmpty ? "set in backup's interface" : reason))
            return .handled
        case nil: break
        }
        switch keys.action(for: key) {
        case .setHold:
            var current = ""
            if case .held(let reason) = hold { current = reason }
            reasonPrompt = InputDialog(title: "Set the write hold", label: "Why? (status shows it)", field: TextField(current))
        case .clearHold where hold.isHeld: change(.none)
        default: return .ignored
        }
        return .handled
    }

    private func change(_ new: WriteHold) {
        do {
            try context.app.setHold(profile, new)
            problem = nil
        } catch {
            problem = error.message
        }
        reload()
    }

    func draw(_ canvas: Canvas) {
        defer { reasonPrompt?.draw(canvas) }
        var row = 2
        switch hold {
        case .none:
            canvas.text("No write hold is set on \"\(profile.name)\".", row: row, style: .good)
        case .held(let reason):
            canvas.text("The write hold is set on \"\(profile.name)\":", row: row, style: .warning)
            row += 1
            canvas.text(reason, row: row, column: 3, style: .warning)
        }
        row += 2
        row += canvas.paragraph(
            "While the hold is set, no sync writes anything to \(profile.remote); a sync already running stops before "
                + "its next write. Set it before you move or check the remote; clear it when you are done.", row: row)
        if let problem { canvas.paragraph(problem, row: row + 1, style: .bad) }
    }
}
