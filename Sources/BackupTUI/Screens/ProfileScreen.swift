// One profile in full, opened with Enter on the home screen: where it backs up from and to,
// its groups, patterns and settings, its last sync and hold. Opening it writes nothing; `s`
// syncs from here, as on the home screen.

import BackupApp
import BackupEngine
import BackupTerminal

final class ProfileScreen: Screen {
    private let context: Context
    private let overview: ProfileOverview
    private var scroll = 0

    init(context: Context, overview: ProfileOverview) {
        self.context = context
        self.overview = overview
    }

    var title: String { "profile \"\(overview.profile.name)\"" }
    var keys: KeyMap { KeyMaps.profile }
    var hints: [Action] { [.sync, .dryRun, .back, .help, .quit] }

    func handle(_ key: Key) -> Response {
        switch keys.action(for: key) {
        case .sync: return .replace(SyncScreen(context: context, profile: overview.profile, request: SyncRequest()))
        case .dryRun: return .push(DryRunScreen(context: context, profile: overview.profile))
        case let move? where ListMove.apply(move, to: &scroll, count: lines.count, page: 10): break
        default: return .ignored
        }
        return .handled
    }

    /// Label and value of every row, in order.
    private var lines: [(String, String, Style)] {
        let profile = overview.profile
        var lines: [(String, String, Style)] = [
            ("Source", profile.source, .normal), ("Remote", profile.remote, .normal),
            ("Last sync", overview.lastSync.map { Format.date($0, zone: context.timeZone) } ?? "never", .normal),
            ("Backed up", "\(Format.files(overview.files)) (\(Format.bytes(overview.bytes)))", .normal),
        ]
        switch overview.hold {
        case .none: lines.append(("Hold", "none", .normal))
        case .held(let reason): lines.append(("Hold", "set: \(reason)", .warning))
        }
        if overview.unfinishedRestore { lines.append(("Restore", "unfinished: c on the profile list continues it", .warning)) }
        if let problem = overview.problem { lines.append(("State", problem, .bad)) }
        if profile.groups.isEmpty { lines.append(("Groups", "none (one restore of every file)", .normal)) }
        for group in profile.groups {
            lines.append(("Group", "\(group.name)\(group.required ? " (required)" : ""): \(group.patterns.joined(separator: " "))", .normal))
        }
        for (label, patterns) in [("Excluded", profile.excludes), ("By size", profile.sizeCompared), ("Kept", profile.keepRemotely)]
        where !patterns.isEmpty {
            lines.append((label, patterns.joined(separator: " "), .normal))
        }
        for key in profile.settings.keys.sorted() where key != "password" {
            lines.append((key, profile.settings[key] ?? "", .normal))
        }
        return lines
    }

    func draw(_ canvas: Canvas) {
        var row = 2
        for (label, value, style) in lines.dropFirst(scroll) where row < canvas.body.upperBound {
            canvas.field(label, value, row: &row, label: 11, style: style, path: label == "Source" || label == "Remote")
        }
    }
}
