// `backup sync`: one run of the engine (or a preview with --dry-run).

import BackupApp
import BackupEngine

enum SyncCommand {
    static func run(_ command: ParsedCommand, app: BackupApp, profile: Profile, output: Output) async throws(AppError) -> ExitStatus {
        var request = SyncRequest(
            consent: command.flag("yes"), allowShrink: command.flag("allow-shrink"), dryRun: command.flag("dry-run"),
            allowMissingRemote: command.flag("allow-missing-remote"), takeOver: command.flag("take-over"))
        request.allowChange = command.flag("allow-change")
        let summary = try await app.sync(profile, request, events: output.events)
        var result: [String: Any] = [
            "event": "result", "profile": profile.name, "files": summary.files, "hashed": summary.hashedFiles,
            "symlinks": summary.symlinks, "folders": summary.folders,
        ]
        var lines: [String]
        switch summary.result {
        case .ran(.completed(let report)):
            // Files only: the marker is the tool's own and is reported on its own.
            let files = report.fileCount
            // Files left behind (each named below) make it partial: exit status 1.
            result["status"] = report.filesLeftBehind > 0 ? "partial" : "completed"
            result["uploaded"] = files
            result["marker_uploaded"] = report.markerUploaded
            result["deleted"] = report.deleted.count
            result["bytes"] = report.uploadedBytes
            result["marker_bytes"] = report.markerBytes
            result["unchanged"] = report.unchanged
            result["metadata_updated"] = report.metadataUpdated.count
            result["delete_failures"] = report.deleteFailures.map { ["path": $0.path, "error": Words.key($0.error.kind), "message": $0.error.message] }
            result["unreadable"] = report.sourceFailures.map(\.path)
            lines = ["synced \"\(profile.name)\": \(files) file(s) uploaded (\(Output.bytes(report.fileBytes))), \(report.deleted.count) deleted, \(report.unchanged) unchanged"
                + (report.markerUploaded ? "; the backup's marker written (\(Output.bytes(report.markerBytes)))" : "")
                + (report.metadataUpdated.isEmpty ? "" : " (\(report.metadataUpdated.count) with new modes, times or owners, recorded without uploading)")]
            for failure in report.deleteFailures { lines.append("not deleted (retried next run): \(failure.path): \(failure.error.message)") }
            for failure in report.sourceFailures { lines.append("not uploaded (retried next run): \(failure.message)") }
            for note in report.treeNotes { lines.append("note: \(note)") }
            lines += Self.versions(report, into: &result)
        case .ran(.unavailable(let reason)), .previewed(.unavailable(let reason)):
            result["status"] = "unavailable"
            result["reason"] = Words.key(reason)
            if case .otherWriter(let writer) = reason { result["writer"] = writer }
            lines = [Words.explain(reason, remote: profile.remote)]
        case .ran(.held(let reason, let report)):
            // Stopped by a hold set while it ran: what it wrote before is said, not "nothing".
            let files = report.fileCount
            result["status"] = "unavailable"
            result["reason"] = Words.key(UnavailableReason.writeHeld(reason: reason))
            result["uploaded"] = files
            result["deleted"] = report.deleted.count
            result["bytes"] = report.uploadedBytes
            lines = ["the write hold (\(reason)) stopped this sync after \(files) file(s) uploaded (\(Output.bytes(report.fileBytes))) "
                + "and \(report.deleted.count) deleted; what was written is recorded",
                     "clear the hold with `backup hold clear --profile \(profile.name)`, then sync again to finish"]
        case .ran(.failed(let error, let report)):
            result["status"] = "failed"
            result["error"] = Words.key(error.kind)
            result["message"] = error.message
            result["uploaded"] = report.fileCount
            lines = ["sync failed after \(report.uploaded.count) upload(s): \(error.message)", "what was uploaded is recorded; the next run continues from there"]
            lines += Self.versions(report, into: &result)
        case .previewed(.failed(let error)):
            result["status"] = "failed"
            result["error"] = Words.key(error.kind)
            result["message"] = error.message
            lines = ["cannot look at the remote: \(error.message)"]
        case .previewed(.wouldRun(let preview)):
            result["status"] = "completed"
            result["dry_run"] = true
            result.merge(Output.pathList("would_upload", preview.uploads.map(\.path))) { a, _ in a }
            result.merge(Output.pathList("would_delete", preview.deletes)) { a, _ in a }
            result["bytes"] = preview.uploadBytes
            lines = ["dry run: \(preview.uploads.count) to upload (\(Output.bytes(preview.uploadBytes))), \(preview.deletes.count) to delete, \(preview.unchanged) unchanged; nothing was written"]
            lines += preview.uploads.prefix(20).map { "  upload \($0.path)" }
            if preview.uploads.count > 20 { lines.append("  … and \(preview.uploads.count - 20) more uploads") }
            lines += preview.deletes.prefix(20).map { "  delete \($0)" }
            if preview.deletes.count > 20 { lines.append("  … and \(preview.deletes.count - 20) more deletes") }
        }
        output.finish(result, lines: lines)
        return summary.status
    }

    /// What the run kept as versions, what it could not keep (and so did not replace or
    /// delete), and what retention pruned: into the JSON result, and as lines for people.
    private static func versions(_ report: SyncReport, into result: inout [String: Any]) -> [String] {
        if let kept = report.versions {
            result["versions"] = ["run": kept.run, "replaced": kept.replaced, "deleted": kept.deleted, "bytes": kept.bytes,
                                  "marker": kept.marker]
        }
        result["keep_failures"] = report.keepFailures.map {
            ["path": $0.path, "deleting": $0.deleting, "error": Words.key($0.error.kind), "message": $0.error.message]
        }
        result["pruned"] = report.pruned
        var lines: [String] = []
        if let kept = report.versions, kept.files > 0 {
            lines.append("kept the old versions of \(kept.replaced) replaced and \(kept.deleted) deleted file(s) "
                + "(\(Output.bytes(kept.bytes))) in \(VersionStore.runFolder(kept.run))")
        }
        for failure in report.keepFailures {
            lines.append("not \(failure.deleting ? "deleted" : "replaced") (its old version could not be kept; retried next run): "
                + "\(failure.path): \(failure.error.message)")
        }
        if !report.pruned.isEmpty {
            lines.append("pruned \(report.pruned.count) run(s) of versions older than keep_versions: \(report.pruned.joined(separator: ", "))")
        }
        for note in report.versionNotes { lines.append("note: \(note)") }
        return lines
    }
}
