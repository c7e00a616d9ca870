// After a sync: the profile's `on_failure` command (any exit status but 0: a failure, a guard,
// the hold, a busy profile) or `on_success` command (status 0), run by /bin/sh with the run's
// result JSON on standard input and BACKUP_STATUS, BACKUP_EXIT and BACKUP_PROFILE set. Its
// output goes to standard error (standard output carries the JSON lines), and it may not hold
// the run up: after `timeout` it is killed. Its failure is said, never turned into the run's.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

public enum Notifications {
    /// How long a notification command may run.
    public static let timeout: TimeInterval = 60

    /// The key whose command runs after a run that ended with `status`.
    public static func key(for status: ExitStatus) -> String {
        status == .success ? "on_success" : "on_failure"
    }

    /// Runs the command the profile names for `status`, if any, given `resultJSON` (the run's
    /// result line); returns what to tell the person about it (nil when it ran and exited 0, or there is none).
    public static func run(
        _ profile: Profile, status: ExitStatus, result resultJSON: Data,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        let key = key(for: status)
        guard let command = profile.settings[key], !command.trimmingCharacters(in: .whitespaces).isEmpty else { return nil }
        let result = ((try? JSONSerialization.jsonObject(with: resultJSON)) as? [String: Any]) ?? ["event": "result"]
        var body = result
        body["exit"] = Int(status.rawValue)
        body["profile"] = profile.name
        let json = (try? JSONSerialization.data(withJSONObject: body, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        var env = environment
        env["BACKUP_STATUS"] = (result["status"] as? String) ?? (status == .success ? "completed" : "failed")
        env["BACKUP_EXIT"] = String(status.rawValue)
        env["BACKUP_PROFILE"] = profile.name
        process.environment = env
        // The JSON is given as a file, already unlinked: a command that never reads it cannot
        // hold the run up, whatever its size.
        var template = Array(((NSTemporaryDirectory() as NSString).appendingPathComponent("backup-result.XXXXXX")).utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
        guard fd >= 0 else { return "the profile's \(key) was not run: cannot write its input (\(String(cString: strerror(errno))))" }
        template.withUnsafeBufferPointer { buffer in _ = buffer.baseAddress.map { unlink($0) } }
        let input = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        let bytes = json + Data("\n".utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, lseek(fd, 0, SEEK_SET) == 0 else {
            return "the profile's \(key) was not run: cannot write its input"
        }
        process.standardInput = input
        process.standardOutput = FileHandle.standardError
        process.standardError = FileHandle.standardError
        do {
            try process.run()
        } catch {
            return "the profile's \(key) could not be started: \(error.localizedDescription)"
        }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return "the profile's \(key) was still running after \(Int(timeout)) s and was stopped"
        }
        guard process.terminationStatus == 0 else {
            return "the profile's \(key) exited with status \(process.terminationStatus); run it yourself to see why"
        }
        return nil
    }
}
