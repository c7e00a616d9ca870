// `backup restore`: plan, download, verify, place; `--resume` continues after any stop.

import BackupApp
import BackupEngine
import BackupTree
import Foundation

enum RestoreCommand {
    /// The request a command line asks for (the scripted run and the interface read it here).
    static func request(_ command: ParsedCommand) throws(AppError) -> RestoreRequest {
        var request = RestoreRequest(
            target: command.value("to"), remoteURL: command.value("remote"), resume: command.flag("resume"),
            resetAttempts: command.flag("reset-attempts"), only: command.all("only"), overwrite: command.flag("overwrite"))
        request.paths = command.all("path")
        if request.resume, !request.paths.isEmpty {
            throw AppError(.usage, "--path chooses what a new restore takes; --resume continues the recorded one as it was planned")
        }
        if let text = command.value("as-of") {
            guard let time = VersionTime.parse(text) else {
                throw AppError(.usage, "--as-of \(String(reflecting: text)) is not a date or time: write it as 2026-11-30, "
                    + "2026-11-30T14:05 or 2026-11-30T14:05:09 (local time), with Z or +01:00 at the end for another zone")
            }
            if request.resume {
                throw AppError(.usage, "--as-of chooses the tree a new restore takes; --resume continues the recorded one as it was planned")
            }
            request.asOf = time
        }
        return request
    }

    static func run(_ command: ParsedCommand, app: BackupApp, profile: Profile?, output: Output) async throws(AppError) -> ExitStatus {
        if command.flag("reset-attempts") && !command.flag("resume") {
            throw AppError(.usage, "--reset-attempts goes with --resume; see `backup restore --help`")
        }
        if command.flag("abandon") {
            guard let profile, command.value("remote") == nil else {
                throw AppError(.usage, "--abandon goes with a profile (not --remote): it stops keeping that profile's unrestored files")
            }
            let abandoned = try app.abandonRestore(profile)
            if output.json {
                output.emit(["event": "result", "status": "completed", "profile": profile.name,
                             "abandoned": abandoned.abandoned, "would_delete": abandoned.toDelete])
            } else if abandoned.abandoned == 0 {
                output.summary("nothing was kept on the remote for a restore into \(profile.source); the next sync deletes nothing because of it")
            } else {
                output.summary("no longer keeping \(abandoned.abandoned) file(s) that the restore into \(profile.source) did not restore; "
                    + "the next sync will delete \(abandoned.toDelete) of them from the remote (those the source lacks)")
            }
            return .success
        }
        var request = try Self.request(command)
        if command.value("place") == "ask" {
            guard isatty(STDIN_FILENO) == 1 else {
                throw AppError(.usage, "--place ask needs a terminal to ask on; use --place all in scripts")
            }
            request.decide = LinePrompt.decide
        }
        let summary = try await app.restore(profile, request, events: output.events)
        var result: [String: Any] = ["event": "result", "placed": summary.placed, "pending": summary.pending.count, "bytes": summary.downloadedBytes]
        result.merge(Output.pathFields("target", summary.target)) { a, _ in a }
        if !summary.refused.isEmpty { result.merge(Output.pathList("refused", summary.refused.map(\.remotePath))) { a, _ in a } }
        if !summary.pending.isEmpty { result.merge(Output.pathList("pending_paths", summary.pending)) { a, _ in a } }
        let continuing = BackupApp.resumeCommand(
            profile: profile, remoteURL: command.value("remote"), target: summary.target)
        let resumeHint = "run `\(continuing)` to continue"
        var lines: [String]
        switch summary.result {
        case .restored(.completed):
            result["status"] = summary.refused.isEmpty ? "completed" : "partial"
            lines = ["restored \(summary.placed) file(s) into \(summary.target)"]
            if !summary.refused.isEmpty { lines.append("\(summary.refused.count) remote path(s) were refused and not restored (they would land outside the target)") }
        case .restored(.partial(let pending)):
            result["status"] = "partial"
            lines = ["restore incomplete: \(summary.placed) placed, \(pending.count) not placed yet; \(resumeHint)"]
        case .restored(.placementRejected(let group)):
            result["status"] = "partial"
            result["reason"] = "placementRejected"
            result["group"] = group
            lines = ["the required group \"\(group)\" was not placed; \(resumeHint) (with --overwrite to replace local files that differ)"]
        case .restored(.failed(let failure)):
            result["status"] = "failed"
            result["message"] = failure.description
            result["error"] = failure.key
            lines = ["restore failed: \(failure.description)", "everything finished is recorded; \(resumeHint)"]
        case .restored(let outcome):
            result["status"] = "unavailable"
            result["reason"] = Words.key(outcome)
            lines = [Words.explain(outcome)]
        case .probe(let probe):
            lines = [Words.noBackup(probe, remote: command.value("remote") ?? profile?.remote ?? "", job: "restore", done: "restored",
                                    into: &result)]
        }
        if output.json { output.emit(result) } else { output.summary(lines: lines) }
        return summary.status
    }
}

/// `--place ask` without the TUI: one question per group on the terminal.
enum LinePrompt {
    /// Placing a group with local files that differ (without --overwrite) asks once more:
    /// overwrite them, or keep them (the default) and place the rest.
    static func overwriteOrKeep(_ offer: PlacementOffer) -> PlacementDecision {
        guard offer.asksBeforeOverwriting else { return .placed }
        let differing = offer.differing
        let kept = offer.keepingLocal
        let names = differing.prefix(3).map(\.localPath).joined(separator: ", ") + (differing.count > 3 ? ", …" : "")
        while true {
            FileHandle.standardError.write(Data(TerminalText.visible(
                "\(differing.count) local file(s) differ from the backup's copy (\(names)): "
                    + "[o]verwrite them (no copy of yours is kept), or [k]eep mine and place the rest? [k] ").utf8))
            guard let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased() else { return kept }
            switch answer {
            case "o", "overwrite": return .placed
            case "", "k", "keep": return kept
            default: continue
            }
        }
    }

    @Sendable static func decide(_ offer: PlacementOffer) async -> PlacementDecision {
        let group = offer.group
        var question = "place group \"\(group.label)\"\(group.required ? " (required)" : ""): \(group.files.count) file(s)"
        if !group.failed.isEmpty { question += ", \(group.failed.count) did not download" }
        if !offer.conflicts.isEmpty { question += ", \(offer.conflicts.count) would replace a different local file" }
        while true {
            FileHandle.standardError.write(Data("\n\(TerminalText.visible(question))\n[p]lace, [r]eject, [l]ist files? ".utf8))
            guard let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased() else { return .rejected }
            switch answer {
            case "p", "place", "y", "yes": return overwriteOrKeep(offer)
            case "r", "reject", "n", "no": return .rejected
            case "l", "list":
                let conflicting = Set(offer.conflicts.map(\.remotePath))
                let list = group.files.map { "  \($0.remotePath)\(conflicting.contains($0.remotePath) ? "  (replaces a different local file)" : "")" }
                FileHandle.standardError.write(Data((TerminalText.visible(lines: list) + "\n").utf8))
            default: continue
            }
        }
    }
}
