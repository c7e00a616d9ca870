// The command line's one entry point: parse, dispatch to the command's file, and turn every
// error into its message and exit code in exactly one place. SIGINT and SIGTERM cancel the
// running job; what it finished is saved, and it exits 130.

import BackupApp
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

public enum BackupCLI {
    /// Runs the command line `arguments` (program name first) and returns the exit code.
    public static func main(_ arguments: [String]) async -> Int32 {
        let task = Task { await run(Array(arguments.dropFirst())) }
        let sources = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { task.cancel() }
            source.resume()
            return source
        }
        let status = await task.value
        sources.forEach { $0.cancel() }
        return status.rawValue
    }

    static func run(_ arguments: [String]) async -> ExitStatus {
        let json = arguments.contains("--json")
        let output = Output(json: json)
        do {
            let command = try Parser.parse(arguments)
            if command.flag("version") {
                output.document("backup \(CommandTree.version)")
                return .success
            }
            if command.flag("help") {
                output.document(Help.text(for: command.path))
                return .success
            }
            var app = BackupApp(configPath: command.value("config"))
            if let fingerprint = command.value("accept-host-key") { try app.accept(hostKey: fingerprint) }
            if let status = await TUIBridge.run(command, app: app) { return status }
            // A passphrase neither the environment nor the profile gives is asked on the
            // terminal, when there is one (never in a script without one).
            if isatty(STDIN_FILENO) == 1 && !Scheduler.isScheduledRun(app.environment) { app.askPassphrase = PassphrasePrompt.ask }
            guard let name = command.path.first else {
                FileHandle.standardError.write(Data(Help.text(for: []).utf8))
                return .usage
            }
            switch name {
            case "generate-manual":
                output.document(Generators.manual())
                return .success
            case "generate-completions":
                guard let shell = command.arguments.first, let script = Generators.completions(shell) else {
                    throw AppError(.usage, "generate-completions needs bash, zsh or fish")
                }
                output.document(script)
                return .success
            case "generate-unit":
                let executable = command.value("exec") ?? Scheduler(environment: app.environment).executable
                switch command.arguments.first {
                case "service": output.document(String(try Scheduler.serviceTemplate(executable: executable, packaged: true).dropLast()))
                case "timer": output.document(String(Scheduler.timerTemplate(packaged: true).dropLast()))
                default: throw AppError(.usage, "generate-unit needs service or timer")
                }
                return .success
            case "tui":
                throw AppError(.usage, "the full-screen interface needs a terminal on standard input and output")
            default:
                break
            }
            let profileName = command.value("profile") ?? "default"
            if name == "init" { return try await InitCommand.run(command, app: app, profileName: profileName, output: output) }
            if name == "profiles" { return try ProfilesCommand.run(app: app, output: output) }
            if name == "schedule" { return try ScheduleCommand.run(command, app: app, output: output) }
            if name == "restore" && command.value("remote") != nil && command.value("profile") == nil {
                return try await RestoreCommand.run(command, app: app, profile: nil, output: output)
            }
            if name == "versions" && command.value("remote") != nil && command.value("profile") == nil {
                return try await VersionsCommand.run(command, app: app, profile: nil, output: output)
            }
            if name == "verify" && command.value("remote") != nil && command.value("profile") == nil {
                return try await VerifyCommand.run(command, app: app, profile: nil, output: output)
            }
            let profile = try app.profile(profileName)
            switch name {
            case "sync":
                // A sync ends with the profile's notification command, whatever its outcome.
                let status: ExitStatus
                do {
                    status = try await SyncCommand.run(command, app: app, profile: profile, output: output)
                } catch {
                    status = report(error, output: output)
                }
                if let problem = Notifications.run(profile, status: status, result: output.result ?? Data()) {
                    FileHandle.standardError.write(Data("backup: \(TerminalText.visible(problem))\n".utf8))
                }
                return status
            case "status": return try await StatusCommand.run(command, app: app, profile: profile, output: output)
            case "probe": return try await ProbeCommand.run(command, app: app, profile: profile, output: output)
            case "restore": return try await RestoreCommand.run(command, app: app, profile: profile, output: output)
            case "hold": return try HoldCommand.run(command, app: app, profile: profile, output: output)
            case "forget": return try ForgetCommand.run(command, app: app, profile: profile, output: output)
            case "versions": return try await VersionsCommand.run(command, app: app, profile: profile, output: output)
            case "verify": return try await VerifyCommand.run(command, app: app, profile: profile, output: output)
            default: throw AppError(.usage, "unknown command \"\(name)\"; see `backup --help`")
            }
        } catch {
            return report(error, output: output)
        }
    }

    /// A run that ended by throwing: its result line with --json, else the message; kept for
    /// the notification command.
    static func report(_ error: Error, output: Output) -> ExitStatus {
        let failure = (error as? AppError) ?? AppError(.failure, String(describing: error))
        var result: [String: Any] = ["event": "result", "exit": Int(failure.status.rawValue), "message": failure.message]
        switch failure.status {
        case .interrupted: result["status"] = "interrupted"
        case .unavailable: (result["status"], result["reason"]) = ("unavailable", "busy")
        case .usage: (result["status"], result["error"]) = ("failed", failure.kind ?? "usage")
        default: (result["status"], result["error"]) = ("failed", "local")
        }
        if output.json {
            output.finish(result, lines: [])
        } else {
            output.keep(result)
            output.line("backup: \(failure.message)", level: .error)
        }
        return failure.status
    }
}
