// `backup profiles`: every profile of the config file with its source, remote, last sync and
// how the last run ended (whichever front end ran it), the hold, and its timer. Reads the state
// and the unit folder only.

import BackupApp
import Foundation

enum ProfilesCommand {
    static func run(app: BackupApp, output: Output) throws(AppError) -> ExitStatus {
        let config = try app.loadConfig()
        let iso = ISO8601DateFormatter()
        var listed: [[String: Any]] = []
        var lines: [String] = []
        let schedules = Dictionary(Scheduler(environment: app.environment, paths: app.paths).list().map { ($0.profile, $0) }) { a, _ in a }
        for profile in config.profiles {
            var entry: [String: Any] = ["name": profile.name, "source": profile.source, "remote": profile.remote]
            var last = "never synced"
            do {
                let state = try app.stateSummary(profile)
                entry["last_sync"] = state.lastSync.map { iso.string(from: $0) } ?? NSNull()
                entry["last_outcome"] = state.lastOutcome.map(StatusCommand.json) ?? NSNull()
                if case .held(let reason) = state.hold { entry["hold"] = reason } else { entry["hold"] = NSNull() }
                if let outcome = state.lastOutcome {
                    last = outcome.sentence(date: iso.string(from:))
                } else if let synced = state.lastSync {
                    last = "synced \(iso.string(from: synced))"
                }
                if case .held(let reason) = state.hold { last += "; write hold set: \(reason)" }
            } catch {
                entry["error"] = error.message
                last = "state cannot be read: \(error.message)"
            }
            let schedule = schedules[profile.name]
            entry["schedule"] = schedule.map { ["every": $0.every, "timer": $0.timer, "enabled": $0.enabled] as [String: Any] } ?? NSNull()
            listed.append(entry)
            lines.append("\(profile.name)  \(profile.source) → \(profile.remote)")
            lines.append("    \(last)")
            lines.append("    " + (schedule.map { "scheduled every \($0.every) (\($0.timer)\($0.enabled ? "" : ", not enabled"))" } ?? "not scheduled"))
        }
        if config.profiles.isEmpty { lines = ["no profiles in \(config.path); create one with `backup init --source DIR --remote URL`"] }
        output.finish(["event": "result", "status": "completed", "profiles": listed], lines: lines)
        return .success
    }
}
