// `backup versions [PATH]`: the kept runs, or one file's kept versions.

import BackupApp
import BackupEngine
import Foundation

enum VersionsCommand {
    static func run(_ command: ParsedCommand, app: BackupApp, profile: Profile?, output: Output) async throws(AppError) -> ExitStatus {
        let path = command.arguments.first
        let listing = try await app.versions(profile, remoteURL: command.value("remote"), path: path)
        var result: [String: Any] = ["event": "result", "status": "completed"]
        if let profile { result["profile"] = profile.name }
        var lines: [String] = []
        func time(_ date: Date) -> String { VersionTime.shown(date) }
        if let path {
            result["path"] = path
            result["versions"] = listing.fileVersions.map { ["run": $0.run.name, "time": iso($0.run.date), "size": $0.size] }
            result["current"] = listing.current.map { ["size": $0.size] } ?? NSNull()
            if listing.fileVersions.isEmpty {
                lines.append("no kept versions of \(TerminalText.visible(path))")
            } else {
                lines.append("kept versions of \(TerminalText.visible(path)) (each as it was before the run of that time):")
                for (run, size) in listing.fileVersions {
                    lines.append("  \(time(run.date))  \(Output.bytes(size))  \(VersionStore.path(run: run.name, path))")
                }
            }
            lines.append(listing.current.map { "the backup holds it now (\(Output.bytes($0.size)))" } ?? "the backup does not hold it now")
        } else {
            result["runs"] = listing.runs.map { kept -> [String: Any] in
                var entry: [String: Any] = ["run": kept.run.name, "time": iso(kept.run.date), "files": kept.run.files,
                                            "bytes": kept.run.bytes, "marker": kept.run.hasMarker]
                if let record = kept.record {
                    entry["replaced"] = record.replaced
                    entry["deleted"] = record.deleted
                }
                return entry
            }
            if listing.runs.isEmpty {
                lines.append("no versions are kept on this remote yet (syncs keep what they replace or delete, for keep_versions)")
            } else {
                lines.append("TIME                         REPLACED   DELETED      BYTES")
                for kept in listing.runs {
                    let replaced = kept.record.map { String($0.replaced) } ?? "?"
                    let deleted = kept.record.map { String($0.deleted) } ?? "?"
                    lines.append(time(kept.run.date).padding(toLength: 26, withPad: " ", startingAt: 0)
                        + replaced.leftPadded(11) + deleted.leftPadded(10) + Output.bytes(kept.run.bytes).leftPadded(11)
                        + (kept.run.hasMarker ? "" : "  (stopped before its marker)"))
                }
                if let oldest = listing.oldest {
                    lines.append("restore --as-of takes any time from \(time(oldest)) on")
                }
            }
        }
        if output.json { output.emit(result) } else { output.summary(lines: lines) }
        return .success
    }

    private static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: date)
    }
}

extension String {
    /// Right-aligned in `width` columns.
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? " " + self : String(repeating: " ", count: width - count) + self
    }
}
