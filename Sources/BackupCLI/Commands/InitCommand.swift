// `backup init`: writes a profile. A value with a control character in it is refused before
// anything is read or written: a line break would write a config line of its own.

import BackupApp
import Foundation

enum InitCommand {
    static func run(_ command: ParsedCommand, app: BackupApp, profileName: String, output: Output) async throws(AppError) -> ExitStatus {
        for option in ["profile", "source", "remote", "group", "exclude", "identity-file"] {
            for value in command.all(option) where Config.holdsControlCharacter(value) {
                throw AppError(.usage, "--\(option) \"\(TerminalText.visible(value))\": a value written to the config file cannot "
                    + "hold a control character (a line break, a tab, an escape); nothing was written")
            }
        }
        guard let source = command.value("source") else { throw AppError(.usage, "backup init needs --source DIR; see `backup init --help`") }
        guard let remote = command.value("remote") else { throw AppError(.usage, "backup init needs --remote URL; see `backup init --help`") }
        guard Profile.isValidName(profileName) else {
            throw AppError(.usage, "\"\(profileName)\" is not a valid profile name: use letters, digits, \"-\", \"_\" and \".\"")
        }
        var profile = Profile(name: profileName, source: source, remote: remote)
        profile.excludes = command.all("exclude")
        profile.groups = try ProfileGroup.parse(specs: command.all("group"), label: "--group")
        if command.flag("encrypt") { profile.settings["encrypt"] = "yes" }
        if let identityFile = command.value("identity-file") { profile.settings["identity_file"] = try keyFile(identityFile) }
        let (saved, notes) = try await app.initProfile(profile, replace: command.flag("force"), creatingRemote: true)
        output.summary(lines: notes + [
            "profile \"\(saved.name)\" written to \(app.configPath): \(saved.source) → \(saved.remote)",
            "next: `backup sync --profile \(saved.name) --yes` for the first backup",
        ])
        return .success
    }

    /// `--identity-file` as the profile keeps it: absolute (a scheduled run starts elsewhere),
    /// and a file that can be read.
    private static func keyFile(_ given: String) throws(AppError) -> String {
        let path = given.hasPrefix("/") || given.hasPrefix("~") ? given : FileManager.default.currentDirectoryPath + "/" + given
        let expanded = path.hasPrefix("~/") ? NSHomeDirectory() + path.dropFirst(1) : path
        guard FileManager.default.isReadableFile(atPath: expanded) else {
            throw AppError(.usage, "--identity-file \(TerminalText.visible(given)): cannot read the key file; give the path of the "
                + "private key (like ~/.ssh/id_ed25519); nothing was written")
        }
        return path
    }
}
