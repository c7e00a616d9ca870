// `backup forget`: drops the profile's local state; the remote is untouched.

import BackupApp

enum ForgetCommand {
    static func run(_ command: ParsedCommand, app: BackupApp, profile: Profile, output: Output) throws(AppError) -> ExitStatus {
        let removed = try app.forget(profile)
        output.summary(removed.isEmpty
            ? "profile \"\(profile.name)\" has no local state"
            : "forgot the local state of \"\(profile.name)\" (\(removed.count) file(s)); the remote is untouched and the next sync rebuilds the state from it")
        return .success
    }
}
