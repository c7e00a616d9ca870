// The resume screen: the persisted restore record (what is placed, staged, pending, and the
// failed attempts, group by group), and the keys to continue it, or to continue trying
// again the files that ran out of attempts.

import BackupApp
import BackupEngine
import BackupTerminal

final class ResumeScreen: Screen {
    private let context: Context
    let profile: Profile?
    private let request: RestoreRequest
    private let placeAll: Bool
    private(set) var record: RecordSnapshot?
    private var problem: String?
    private var scroll = 0

    init(context: Context, profile: Profile?, request: RestoreRequest, placeAll: Bool = false) {
        self.context = context
        self.profile = profile
        var request = request
        request.resume = true
        self.request = request
        self.placeAll = placeAll
        reload()
    }

    private func reload() {
        guard let path = context.recordPath(profile: profile, request: request) else {
            problem = "a restore without a profile needs the folder it restored into"
            return
        }
        do {
            record = try RecordSnapshot.read(path)
            problem = nil
        } catch {
            problem = error.message
        }
    }

    func reappear() { reload() }

    var title: String { profile.map { "resume \"\($0.name)\"" } ?? "resume restore" }
    var keys: KeyMap { KeyMaps.resume }
    private var resumable: Bool { record.map { $0.plan.filesPlaced < $0.plan.filesTotal } ?? false }
    var hints: [Action] {
        (resumable ? [.continueRestore, .retryFailed] : []) + (otherTarget != nil ? [.startNew] : []) + [.back, .help, .quit]
    }

    /// A folder asked for (`--to`) that is not the one the unfinished restore goes into.
    private var otherTarget: String? {
        guard resumable, let asked = request.target, let stored = record?.target,
              !BackupApp.sameFolder(Context.absolute(asked), stored) else { return nil }
        return Context.absolute(asked)
    }

    /// Continuing goes into the folder the record stores, whatever was asked.
    private var continuing: RestoreRequest {
        var continuing = request
        if let stored = record?.target { continuing.target = stored }
        return continuing
    }

    func handle(_ key: Key) -> Response {
        switch keys.action(for: key) {
        case .continueRestore where resumable:
            return .replace(RestoreScreen(context: context, profile: profile, request: continuing, placeAll: placeAll))
        case .retryFailed where resumable:
            var retry = continuing
            retry.resetAttempts = true
            return .replace(RestoreScreen(context: context, profile: profile, request: retry, placeAll: placeAll))
        case .startNew:
            guard let other = otherTarget else { return .ignored }
            var fresh = request
            fresh.resume = false
            fresh.resetAttempts = false
            fresh.target = other
            return .replace(RestoreScreen(context: context, profile: profile, request: fresh, placeAll: placeAll))
        case let move? where ListMove.apply(move, to: &scroll, count: record?.plan.groups.count ?? 1, page: 10): break
        default: return .ignored
        }
        return .handled
    }

    func draw(_ canvas: Canvas) {
        var row = 2
        // The folder the record stores: the one a continued restore goes into.
        if let target = record?.target ?? request.target ?? profile?.source {
            canvas.text("Into", row: row, column: 1, width: 9, style: .accent)
            canvas.path(Context.absolute(target), row: row, column: 10)
            row += 1
        }
        if let other = otherTarget, let stored = record?.target {
            row += 1
            row += canvas.paragraph("The unfinished restore goes into \(stored), not \(other): Enter continues it there; "
                + "n starts a new restore into \(other) instead, and this record is replaced.", row: row, maxRows: 3, style: .warning)
        }
        if let problem {
            canvas.paragraph("The restore record cannot be read: \(problem)", row: row + 1, style: .bad)
            return
        }
        guard let record else {
            canvas.paragraph("There is no restore to resume" + (profile.map { " for \"\($0.name)\"" } ?? "") + ".", row: row + 1)
            return
        }
        let plan = record.plan
        if record.completedAt != nil || plan.filesPlaced == plan.filesTotal {
            canvas.paragraph("The last restore completed: all \(Format.files(plan.filesTotal)) are placed. Nothing to resume.", row: row + 1, style: .good)
            return
        }
        row += 1
        canvas.text("The record of the unfinished restore:", row: row, style: .accent)
        row += 1
        // The words of the CLI and the man page: placed (moved into place), downloaded and
        // checked (staged), not downloaded yet; "not placed yet" is the CLI's "pending".
        row += canvas.paragraph("\(Format.count(plan.filesPlaced)) placed · \(Format.count(plan.filesTotal - plan.filesPlaced)) not placed yet: "
            + "\(Format.count(plan.filesStaged)) downloaded and checked, \(Format.count(plan.filesPending)) not downloaded · "
            + "\(Format.count(plan.filesWithFailures)) tried before", row: row, maxRows: 2)
        row += 1
        let shown = GroupTable.draw(plan.groups, first: min(scroll, max(plan.groups.count - 1, 0)), canvas: canvas, row: row,
                                    rows: max(canvas.body.upperBound - row - 4, 1))
        row += shown + 1
        // A rejection is a try that ended "not now", not a failure: tries are counted either way.
        for group in plan.groups where group.attempts > 0 && row < canvas.body.upperBound - 2 {
            canvas.text("\(group.label): tried \(group.attempts) time\(group.attempts == 1 ? "" : "s"), not placed"
                + (group.lastError.map { " (\($0))" } ?? ""), row: row, style: .warning)
            row += 1
        }
        if plan.filesSkipped > 0 && row < canvas.body.upperBound - 2 {
            row += canvas.paragraph("\(Format.files(plan.filesSkipped)) skipped after \(RestorePlanView.maxAttempts) tries: press t to try "
                + "them again (backup restore --resume --reset-attempts).", row: row, maxRows: 2, style: .warning)
        }
        if row < canvas.body.upperBound {
            canvas.paragraph("Enter continues from here: files downloaded and checked are not downloaded again.", row: row + 1, maxRows: 2)
        }
    }
}
