// `backup hold`, `backup hold set [REASON]`, `backup hold clear`.

import BackupApp
import BackupEngine

enum HoldCommand {
    static func run(_ command: ParsedCommand, app: BackupApp, profile: Profile, output: Output) throws(AppError) -> ExitStatus {
        switch command.path.dropFirst().first {
        case "set":
            let reason = command.arguments.first ?? "set by backup hold set"
            try app.setHold(profile, .held(reason: reason))
            output.summary("write hold set on \"\(profile.name)\": \(reason)", "no sync writes until `backup hold clear`; a running sync stops before its next write")
        case "clear":
            try app.setHold(profile, .none)
            output.summary("write hold cleared on \"\(profile.name)\"")
        default:
            switch try app.hold(profile) {
            case .none: output.summary("no write hold on \"\(profile.name)\"")
            case .held(let reason): output.summary("write hold set on \"\(profile.name)\": \(reason)")
            }
        }
        return .success
    }
}
