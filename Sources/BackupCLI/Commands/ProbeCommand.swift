// `backup probe`: the probe's outcome, without writing.

import BackupApp
import BackupEngine
import BackupTree
import Foundation

enum ProbeCommand {
    static func run(_ command: ParsedCommand, app: BackupApp, profile: Profile, output: Output) async throws(AppError) -> ExitStatus {
        let report = try await app.probe(profile)
        let outcome = report.outcome
        var result: [String: Any] = ["event": "result", "profile": profile.name, "encrypted": report.encrypted]
        let text: String
        let status: ExitStatus
        switch outcome {
        case .unavailable(let reason):
            (result["status"], result["reason"]) = ("unavailable", Words.key(reason))
            text = Words.explain(reason, remote: profile.remote)
            status = .unavailable
        case .failed(let error):
            (result["status"], result["error"], result["message"]) = ("failed", Words.key(error.kind), error.message)
            text = "cannot look at the remote: \(error.message)"
            status = .failure
        case .damaged(let message):
            (result["status"], result["error"], result["message"]) = ("failed", "damaged", message)
            text = "the remote's data failed a check: \(message)"
            status = .damaged
        case .none:
            (result["status"], result["probe"]) = ("completed", "none")
            text = "none: the remote holds no files"
            status = .success
        case .notReady:
            (result["status"], result["probe"]) = ("completed", "notReady")
            text = "notReady: the remote holds files but no readable marker"
            status = .success
        case .found(_, _, let files) where report.locked:
            // Only the plain names were read: the key file says an encrypted backup is there.
            (result["status"], result["probe"], result["locked"]) = ("completed", "found", true)
            result["remote_files"] = files.count - 1
            text = "found, encrypted: \(files.count - 1) encrypted files; give the passphrase (BACKUP_CRYPT_PASSWORD or "
                + "crypt_password_command) to read its marker"
            status = .success
        case .found(let marker, let source, let files):
            (result["status"], result["probe"]) = ("completed", "found")
            let groups = (try? Marker.header(marker, maxContentSize: Marker.contentLimit(listedFiles: files.count, markerSize: marker.count)).groups) ?? []
            let bytes = files.indices.reduce(Int64(0)) { $0 + files.size(at: $1) }
            result["files"] = files.count - 1
            result["bytes"] = bytes
            result["groups"] = groups.map { ["name": $0.name, "required": $0.required] }
            result["fingerprint"] = source.markerFingerprint
            text = "found\(report.encrypted ? ", encrypted" : ""): \(files.count - 1) files (\(Output.bytes(bytes))), groups: "
                + (groups.isEmpty ? "none" : groups.map { $0.name + ($0.required ? " (required)" : "") }.joined(separator: ", "))
            status = .success
        }
        if output.json { output.emit(result) } else { output.summary(text) }
        return status
    }
}
