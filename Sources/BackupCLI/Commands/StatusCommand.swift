// `backup status`: the profile, its last sync, counts, the hold, and what a sync would do now.

import BackupApp
import BackupEngine
import Foundation

enum StatusCommand {
    /// How the last run ended, as `status` and `profiles` give it in JSON.
    static func json(_ outcome: LastOutcome) -> [String: Any] {
        ["status": outcome.kind.rawValue, "at": ISO8601DateFormatter().string(from: outcome.at), "message": outcome.words]
    }

    static func run(_ command: ParsedCommand, app: BackupApp, profile: Profile, output: Output) async throws(AppError) -> ExitStatus {
        let state = try app.stateSummary(profile)
        // A source that cannot be scanned (an unmounted disk) still leaves the state to tell.
        let preview: SyncSummary?
        let scanFailure: AppError?
        do {
            preview = try await app.sync(profile, SyncRequest(dryRun: true))
            scanFailure = nil
        } catch where error.status != .usage && error.status != .interrupted {
            preview = nil
            scanFailure = error
        }
        var result: [String: Any] = [
            "event": "status", "profile": profile.name, "source": profile.source, "remote": profile.remote,
            "remote_files": state.files, "remote_bytes": state.bytes,
            "local_files": preview?.files ?? NSNull(), "local_symlinks": preview?.symlinks ?? NSNull(),
            "local_folders": preview?.folders ?? NSNull(),
        ]
        result["last_sync"] = state.lastSync.map { ISO8601DateFormatter().string(from: $0) } ?? NSNull()
        result["last_outcome"] = state.lastOutcome.map(Self.json) ?? NSNull()
        switch state.hold {
        case .none: result["hold"] = NSNull()
        case .held(let reason): result["hold"] = reason
        }
        var lines = [
            "profile   \(profile.name)",
            "source    \(profile.source)",
            "remote    \(profile.remote)",
            "last sync \(state.lastSync.map { ISO8601DateFormatter().string(from: $0) } ?? "never")",
            "last run  \(state.lastOutcome.map { $0.sentence(date: ISO8601DateFormatter().string(from:)) } ?? "none recorded")",
            "backed up \(state.files) files (\(Output.bytes(state.bytes)))",
            "hold      \(state.hold == .none ? "none" : "set")" + { if case .held(let reason) = state.hold { ": \(reason)" } else { "" } }(),
        ]
        if let preview {
            lines.append("local     \(preview.files) files (\(Output.bytes(preview.bytes))), \(preview.folders) folders, \(preview.symlinks) symbolic links")
        } else if let scanFailure {
            result["would"] = "failed"
            result["error"] = "local"
            result["message"] = scanFailure.message
            lines.append("local     cannot be read: \(scanFailure.message)")
        }
        switch preview?.result {
        case .previewed(.wouldRun(let plan)):
            result["would_upload"] = plan.uploads.count
            result["would_delete"] = plan.deletes.count
            lines.append("next sync \(plan.uploads.count) to upload (\(Output.bytes(plan.uploadBytes))), \(plan.deletes.count) to delete")
        case .previewed(.unavailable(let reason)):
            result["would"] = Words.key(reason)
            lines.append("next sync would not run: " + Words.explain(reason, remote: profile.remote))
        case .previewed(.failed(let error)):
            result["would"] = "failed"
            result["error"] = Words.key(error.kind)
            lines.append("next sync cannot look at the remote: \(error.message)")
        case .ran?, nil:
            break
        }
        if output.json {
            output.emit(result)
            // Every JSON run ends with its result line (the man page's JSON OUTPUT).
            output.emit(["event": "result", "status": "completed", "profile": profile.name])
        } else {
            output.summary(lines: lines)
        }
        return .success
    }
}
