// `backup verify [--read-data[=PERCENT]]`: the remote against the backup's marker.

import BackupApp
import BackupEngine
import Foundation

enum VerifyCommand {
    static func run(_ command: ParsedCommand, app: BackupApp, profile: Profile?, output: Output) async throws(AppError) -> ExitStatus {
        var request = VerifyRequest(remoteURL: command.value("remote"))
        if let value = command.value("read-data") {
            if value.isEmpty {
                request.readData = 100
            } else {
                let digits = value.hasSuffix("%") ? String(value.dropLast()) : value
                guard let percent = Int(digits), (1...100).contains(percent) else {
                    throw AppError(.usage, "--read-data=\(value): give a percentage from 1 to 100 (--read-data=10), or --read-data alone for every file")
                }
                request.readData = percent
            }
        }
        let summary = try await app.verify(profile, request, events: output.events)
        var result: [String: Any] = ["event": "result"]
        if let profile { result["profile"] = profile.name }
        var lines: [String] = []
        if let probe = summary.probe {
            lines = [Words.noBackup(probe, remote: summary.remote, job: "verify", done: "verified", into: &result)]
            if output.json { output.emit(result) } else { output.summary(lines: lines) }
            return summary.status
        }
        let damaged = summary.damaged
        let extra = summary.findings.filter { $0.kind == .extra }
        result["status"] = damaged.isEmpty ? "completed" : "damaged"
        result["files"] = summary.files
        result["checked"] = summary.checked
        result["checked_bytes"] = summary.checkedBytes
        result["without_hash"] = summary.withoutHash
        result["damaged"] = damaged.map { ["path": $0.path, "error": $0.kind.rawValue, "message": $0.message] }
        result.merge(Output.pathList("extra", extra.map(\.path))) { a, _ in a }
        if let share = summary.share { result["share"] = ["from": share.from, "to": share.to] }
        var words = "verified \(summary.remote): \(summary.files) file(s) in the backup's marker"
        if summary.checked > 0 || request.readData != nil {
            words += ", \(summary.checked) read and checked (\(Output.bytes(summary.checkedBytes)))"
            if let share = summary.share { words += ", the share \(share.from)–\(share.to) of 100" }
        } else {
            words += ", listing compared (no data read: --read-data reads it)"
        }
        lines.append(words)
        if summary.withoutHash > 0 {
            lines.append("\(summary.withoutHash) of them have no SHA-256 in the marker (written by an older version): their size was checked only")
        }
        if damaged.isEmpty {
            lines.append("nothing is missing or damaged")
        } else {
            lines.append("\(damaged.count) file(s) missing or damaged:")
            lines += damaged.prefix(50).map { "  \($0.kind.rawValue): \($0.message)" }
            if damaged.count > 50 { lines.append("  … and \(damaged.count - 50) more (--json lists them all)") }
        }
        if !extra.isEmpty {
            lines.append("\(extra.count) file(s) on the remote that the marker does not name (not backed-up files; a restore puts them in \"(other files)\"):")
            lines += extra.prefix(10).map { "  \($0.path)" }
            if extra.count > 10 { lines.append("  … and \(extra.count - 10) more") }
        }
        if output.json { output.emit(result) } else { output.summary(lines: lines) }
        return summary.status
    }
}
