// `backup schedule`: `--every INTERVAL` puts a profile's sync on a systemd user timer (or
// prints the cron line where there is no systemd), `--off` takes it off, and with neither it
// lists the profiles that have a timer. What is written and how it is enabled is the
// Scheduler's; this file only says what happened.

import BackupApp
import Foundation

enum ScheduleCommand {
    static func run(_ command: ParsedCommand, app: BackupApp, output: Output) throws(AppError) -> ExitStatus {
        let scheduler = Scheduler(environment: app.environment, paths: app.paths)
        // A --config given here is written into the timer as an absolute path.
        let configPath = command.value("config").map(BackupApp.absolute)
        let name = command.value("profile")
        if let every = command.value("every") {
            if command.flag("off") { throw AppError(.usage, "give either --every INTERVAL or --off, not both") }
            let interval = try ScheduleInterval(parsing: every)
            let profile = try app.profile(name ?? "default")
            var report = try scheduler.schedule(profile, every: interval, configPath: configPath)
            // A timer's run never gives the consent a first sync needs.
            let synced = FileManager.default.fileExists(atPath: app.paths.syncState(profile: profile.name))
                && (try? app.stateSummary(profile))?.lastSync != nil
            if !synced {
                report.warnings.append("profile \"\(profile.name)\" has not synced yet, and a scheduled run never consents to the first "
                    + "write to a remote: run `backup sync --profile \(profile.name) --yes` once yourself")
            }
            return show(report, output: output)
        }
        if command.flag("off") {
            let profile = name ?? "default"
            let removed = try scheduler.unschedule(profile)
            let words = removed.isEmpty
                ? "profile \"\(profile)\" has no timer in \(scheduler.unitFolder); nothing removed"
                : "profile \"\(profile)\" is no longer scheduled: \(Scheduler.timerName(profile)) disabled and its files removed"
            output.finish(["event": "result", "status": "completed", "profile": profile, "removed": removed],
                          lines: [words] + removed.map { "  removed \($0)" })
            return .success
        }
        let listed = scheduler.list().filter { name == nil || $0.profile == name }
        var lines = listed.map { entry in
            "\(entry.profile)  every \(entry.every)  \(entry.timer)\(entry.enabled ? "" : " (not enabled)")"
        }
        if listed.isEmpty {
            lines = [(name.map { "profile \"\($0)\" is not scheduled" } ?? "no profile is scheduled")
                + "; schedule one with `backup schedule --profile NAME --every daily`"]
        } else {
            lines.append("(`systemctl --user list-timers 'backup@*'` shows when each runs next)")
        }
        output.finish(["event": "result", "status": "completed",
                       "schedules": listed.map { ["profile": $0.profile, "every": $0.every, "timer": $0.timer, "enabled": $0.enabled] }],
                      lines: lines)
        return .success
    }

    private static func show(_ report: ScheduleReport, output: Output) -> ExitStatus {
        var result: [String: Any] = [
            "event": "result", "status": "completed", "profile": report.profile, "every": report.every.words,
            "timer": report.timer ?? NSNull(), "written": report.written, "templates": report.templates, "enabled": report.enabled,
            "enable_skipped": report.enableSkipped ?? NSNull(), "cron": report.cronLine ?? NSNull(), "warnings": report.warnings,
        ]
        result["systemd"] = report.timer != nil
        var lines: [String] = []
        if let timer = report.timer {
            lines.append("profile \"\(report.profile)\" runs every \(report.every.words) on the systemd user timer \(timer)"
                + (report.enabled ? " (enabled and started)" : " (written, not enabled)"))
            lines += report.written.map { "  wrote \($0)" }
            if let skipped = report.enableSkipped {
                lines.append("  \(skipped)")
                if let cron = report.cronLine { lines += ["  without systemd, this crontab line (crontab -e) runs it instead:", "    \(cron)"] }
            }
        } else if let cron = report.cronLine {
            lines += ["there is no systemd here (systemctl is not on PATH): add this line to your crontab (crontab -e) "
                + "to sync profile \"\(report.profile)\" every \(report.every.words):", cron]
        }
        if !output.json { report.warnings.forEach { output.line("warning: \($0)", level: .warning) } }
        output.finish(result, lines: lines)
        return .success
    }
}
