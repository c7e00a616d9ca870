// `backup schedule`: a profile's sync run by a systemd *user* timer, or by cron where there is
// no systemd. Both front ends call this one type; it decides the unit files' text, where they
// go and how the timer is enabled, so nothing else re-derives them.
//
// Units: the templates `backup@.service` and `backup@.timer` (a package ships them in
// /usr/lib/systemd/user; when none is installed they are written to the user's unit folder,
// running this very binary), and per profile two drop-ins: `backup@NAME.timer.d/schedule.conf`
// with the interval, `backup@NAME.service.d/schedule.conf` pinning where the profile's config
// and state are (the user manager has none of the shell's environment). NAME is the profile's
// name escaped as `systemd-escape` does it.

import BackupEngine
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How often a scheduled sync runs: `hourly`, `daily`, `weekly`, `Nh` or `Nm`.
public struct ScheduleInterval: Sendable, Equatable {
    /// The words as the person gave them, normalized (`daily`, `6h`, `45m`).
    public let words: String
    /// The interval in seconds.
    public let seconds: Int

    /// The longest interval `Nh`/`Nm` may give: 31 days.
    static let longest = 31 * 24 * 3600

    public init(parsing text: String) throws(AppError) {
        let word = text.trimmingCharacters(in: .whitespaces).lowercased()
        switch word {
        case "hourly": (words, seconds) = (word, 3600)
        case "daily": (words, seconds) = (word, 86400)
        case "weekly": (words, seconds) = (word, 7 * 86400)
        default:
            let digits = word.dropLast()
            let unit = word.last
            guard let unit, unit == "h" || unit == "m", !digits.isEmpty, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
                  digits.first != "0", digits.count <= 6, let count = Int(digits)
            else {
                throw .usage("--every \"\(TerminalText.visible(text))\": give hourly, daily, weekly, a number of hours (6h) or of minutes (30m)")
            }
            let total = count * (unit == "h" ? 3600 : 60)
            guard total <= Self.longest else {
                throw .usage("--every \(word) is longer than 31 days; a backup that rare is better run by hand")
            }
            (words, seconds) = (word, total)
        }
    }

    /// What systemd writes for `seconds` in a setting: `6h`, `45min`, `90s`.
    static func span(_ seconds: Int) -> String {
        if seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds % 60 == 0 { return "\(seconds / 60)min" }
        return "\(seconds)s"
    }

    /// The calendar event systemd runs this on, when there is one: intervals that divide an
    /// hour or a day (and whole days and weeks) are wall-clock times, so `Persistent=true`
    /// catches up a run missed while the machine was off. Other intervals have none.
    var calendar: String? {
        switch seconds {
        case 3600: return "hourly"
        case 86400: return "daily"
        case 7 * 86400: return "weekly"
        case let s where s < 3600 && 3600 % s == 0 && s % 60 == 0: return "*:00/\(s / 60)"
        case let s where s < 86400 && 86400 % s == 0 && s % 3600 == 0: return "00/\(s / 3600):00:00"
        default: return nil
        }
    }

    /// How far systemd may move each run, so that machines and profiles do not all start at
    /// once: a tenth of the interval, at most 30 minutes.
    var randomizedDelay: Int { max(1, min(seconds / 10, 1800)) }

    /// The `[Timer]` settings of the profile's drop-in.
    var timerSettings: [String] {
        var lines: [String]
        if let calendar {
            lines = ["OnCalendar=\(calendar)"]
        } else {
            // No wall-clock form: the first run one interval after the timer starts (at login
            // or boot), then one interval after each run started.
            lines = ["OnActiveSec=\(Self.span(seconds))", "OnUnitActiveSec=\(Self.span(seconds))"]
        }
        lines.append("RandomizedDelaySec=\(Self.span(randomizedDelay))")
        return lines
    }

    /// The cron time fields for this interval (the nearest cron can express when it has no exact
    /// form, and a note saying so), `spread` (0..<60) placing the minute like the timer's delay.
    func cronTimes(spread: Int) -> (fields: String, note: String?) {
        let minute = spread % 60
        let minutes = seconds / 60
        if minutes < 60 {
            let every = [30, 20, 15, 12, 10, 6, 5, 4, 3, 2, 1].first { $0 <= max(1, minutes) } ?? 1
            let note = every * 60 == seconds ? nil : "cron cannot run every \(words) exactly; this line runs every \(every) minutes"
            return (every == 1 ? "* * * * *" : "*/\(every) * * * *", note)
        }
        let hours = seconds / 3600
        if seconds == 7 * 86400 { return ("\(minute % 30) 0 * * 1", nil) }
        if hours < 24 {
            let every = [12, 8, 6, 4, 3, 2, 1].first { $0 <= hours } ?? 1
            let note = every * 3600 == seconds ? nil : "cron cannot run every \(words) exactly; this line runs every \(every) hours"
            return (every == 1 ? "\(minute) * * * *" : "\(minute) */\(every) * * *", note)
        }
        let days = hours / 24
        let note = days * 86400 == seconds && days == 1 ? nil
            : "cron has no exact form for every \(words); this line runs \(days == 1 ? "daily" : "on every \(days)th day of the month")"
        return (days == 1 ? "\(minute % 30) 0 * * *" : "\(minute % 30) 0 */\(days) * *", note)
    }
}

/// A profile's schedule as the unit files on disk say it.
public struct ScheduledProfile: Sendable, Equatable {
    /// The profile's name (unescaped from the drop-in folder's name).
    public let profile: String
    /// The interval's words (`daily`, `6h`), as `schedule --every` was given them.
    public let every: String
    /// `backup@NAME.timer`.
    public let timer: String
    /// Enabled: the timer's link in `timers.target.wants/` exists.
    public let enabled: Bool
}

/// What `schedule --every` did.
public struct ScheduleReport: Sendable {
    public var profile: String
    public var every: ScheduleInterval
    /// `backup@NAME.timer`, nil when only a cron line was printed.
    public var timer: String?
    /// The files written.
    public var written: [String] = []
    /// The template units in use (written by this run, or installed by a package).
    public var templates: [String] = []
    /// The timer was enabled and (re)started by the user manager.
    public var enabled = false
    /// Why enabling was skipped, and the command that does it later.
    public var enableSkipped: String?
    /// The crontab line, where there is no systemd (or as an alternative when no user manager runs).
    public var cronLine: String?
    /// Things the person should know: lingering off, credentials only the shell has.
    public var warnings: [String] = []
}

/// Writes, lists and removes the systemd user timers (and cron lines) of profiles.
public struct Scheduler: Sendable {
    /// The environment this runs in: PATH, HOME, XDG_CONFIG_HOME, XDG_RUNTIME_DIR, USER.
    public var environment: [String: String]
    /// Where the tool's config and state are, pinned into each profile's service drop-in.
    public var paths: AppPaths
    /// Folders a package installs user units in (in systemd's search order).
    public var systemUnitFolders: [String]
    /// The binary the self-written units and cron lines run.
    public var executable: String
    /// Where lingering is recorded, one file per user.
    public var lingerFolder = "/var/lib/systemd/linger"

    /// The variable the service sets: a scheduled run.
    static let scheduledVariable = "BACKUP_SCHEDULED"

    /// Whether this is a scheduled run (the timer's service, or the cron line): scripted
    /// whatever it is attached to, no prompt, one line per event. The one test of it.
    public static func isScheduledRun(_ environment: [String: String]) -> Bool {
        environment[scheduledVariable] == "1"
    }

    /// A header line that marks the files this tool wrote (and may rewrite or remove).
    static let header = "# Written by backup schedule"
    static let service = "backup@.service"
    static let timer = "backup@.timer"

    public init(environment: [String: String] = ProcessInfo.processInfo.environment, paths: AppPaths? = nil, executable: String? = nil) {
        self.environment = environment
        self.paths = paths ?? AppPaths(environment: environment)
        systemUnitFolders = ["/etc/systemd/user", "/usr/local/lib/systemd/user", "/usr/lib/systemd/user", "/lib/systemd/user"]
        self.executable = executable ?? Self.runningExecutable()
    }

    /// This process's binary, as an absolute path.
    static func runningExecutable() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments.first ?? "backup"
    }

    // MARK: Names and folders

    /// `name` escaped for a unit name as `systemd-escape` does it: `/` becomes `-`, and every
    /// byte but ASCII letters, digits, `:`, `_` and `.` (and a `.` that leads) becomes `\xNN`.
    public static func escape(_ name: String) -> String {
        var result = ""
        for (index, byte) in name.utf8.enumerated() {
            let scalar = Unicode.Scalar(byte)
            let plain = (byte < 0x80 && (Character(scalar).isLetter || Character(scalar).isNumber)) || byte == UInt8(ascii: ":")
                || byte == UInt8(ascii: "_") || (byte == UInt8(ascii: ".") && index > 0)
            if byte == UInt8(ascii: "/") {
                result += "-"
            } else if plain {
                result.unicodeScalars.append(scalar)
            } else {
                result += "\\x" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
            }
        }
        return result
    }

    /// The name `escape` made `escaped` from, nil when it is not one a profile can have.
    public static func unescape(_ escaped: String) -> String? {
        var bytes: [UInt8] = []
        var rest = Substring(escaped)
        while let first = rest.first {
            if rest.hasPrefix("\\x"), rest.count >= 4, let byte = UInt8(rest.dropFirst(2).prefix(2), radix: 16) {
                bytes.append(byte)
                rest = rest.dropFirst(4)
            } else if first == "-" {
                bytes.append(UInt8(ascii: "/"))
                rest = rest.dropFirst()
            } else {
                bytes.append(contentsOf: Array(String(first).utf8))
                rest = rest.dropFirst()
            }
        }
        guard let name = String(bytes: bytes, encoding: .utf8), Profile.isValidName(name) else { return nil }
        return name
    }

    /// `$XDG_CONFIG_HOME` and `$XDG_STATE_HOME` as AppPaths resolved them (their defaults
    /// when unset): pinned into the service and the cron line.
    var configHome: String { (paths.configFolder as NSString).deletingLastPathComponent }
    var stateHome: String { (paths.stateFolder as NSString).deletingLastPathComponent }

    /// `$XDG_CONFIG_HOME/systemd/user`: the user's own unit folder.
    public var unitFolder: String { configHome + "/systemd/user" }

    public static func timerName(_ profile: String) -> String { "backup@\(escape(profile)).timer" }

    func timerDropIn(_ profile: String) -> String { unitFolder + "/backup@\(Self.escape(profile)).timer.d/schedule.conf" }
    func serviceDropIn(_ profile: String) -> String { unitFolder + "/backup@\(Self.escape(profile)).service.d/schedule.conf" }
    func wantsLink(_ profile: String) -> String { unitFolder + "/timers.target.wants/" + Self.timerName(profile) }

    /// The file with the variables a profile's scheduled runs get (credentials only the shell
    /// has), read by the service when it exists: `$XDG_CONFIG_HOME/backup/NAME.env`.
    public func environmentFile(_ profile: String) -> String { paths.configFolder + "/\(profile).env" }

    /// An installed (packaged) copy of the template `name`, if any.
    func installedTemplate(_ name: String) -> String? {
        systemUnitFolders.map { $0 + "/" + name }.first { FileManager.default.fileExists(atPath: $0) }
    }

    /// `tool` on PATH, if it is there.
    func find(_ tool: String) -> String? {
        let path = environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(tool)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// systemd is the service manager here (its tools are installed).
    var hasSystemd: Bool { find("systemctl") != nil }

    /// A user manager runs for this session: its private socket is in XDG_RUNTIME_DIR.
    var hasUserManager: Bool {
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else { return false }
        var info = stat()
        return stat(runtime + "/systemd/private", &info) == 0 && (info.st_mode & S_IFMT) == S_IFSOCK
    }

    var userName: String {
        if let user = environment["USER"], !user.isEmpty { return user }
        if let entry = getpwuid(getuid()), let name = entry.pointee.pw_name { return String(cString: name) }
        return "\(getuid())"
    }

    // MARK: Unit text

    /// A value quoted for a unit file setting: in double quotes, with `\`, `"`, `%` (a
    /// specifier) and, in a command line (`exec`), `$` (a variable) escaped; a control
    /// character is refused.
    static func quoted(_ value: String, exec: Bool = true) throws(AppError) -> String {
        try refuseControls(value)
        var result = "\""
        for character in value {
            switch character {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "%": result += "%%"
            case "$" where exec: result += "$$"
            default: result.append(character)
            }
        }
        return result + "\""
    }

    /// A path for a setting that takes it unquoted (EnvironmentFile=): `%` escaped.
    static func unquotedPath(_ value: String) throws(AppError) -> String {
        try refuseControls(value)
        return value.replacingOccurrences(of: "%", with: "%%")
    }

    static func refuseControls(_ value: String) throws(AppError) {
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .usage("\"\(TerminalText.visible(value))\" holds a control character and cannot be written into a systemd unit")
        }
    }

    /// The first line of a template: whose it is. A copy of ours is rewritten by each
    /// `schedule` (and removed once a package's is installed); a package's is never touched.
    static func templateHeader(_ what: String, packaged: Bool) -> String {
        packaged ? "# Installed with backup: \(what)." : header + ": \(what) (rewritten by each `backup schedule`: put changes in a drop-in)."
    }

    /// A template's text: its header and `[Unit]` section (a package's copy names the man
    /// page it installs beside it), then `body`.
    static func template(_ what: String, description: String, packaged: Bool, body: [String]) -> String {
        var lines = [templateHeader(what, packaged: packaged), "[Unit]", "Description=\(description)"]
        if packaged { lines.append("Documentation=man:backup(1)") }
        return (lines + [""] + body).joined(separator: "\n") + "\n"
    }

    /// The template service: one scripted, low-priority sync of the instance's profile.
    public static func serviceTemplate(executable: String, packaged: Bool) throws(AppError) -> String {
        template("one scheduled sync of the profile %I", description: "backup: scheduled sync of profile %I", packaged: packaged, body: [
            "[Service]",
            "Type=oneshot",
            "Environment=\(scheduledVariable)=1",
            "ExecStart=\(try quoted(executable)) sync --profile %I --no-tui",
            "Nice=10",
            "IOSchedulingClass=idle",
            "SyslogIdentifier=backup",
        ])
    }

    /// The template timer; each profile's drop-in gives its interval.
    public static func timerTemplate(packaged: Bool) -> String {
        template("the timer of the profile %I, its interval in backup@%i.timer.d/schedule.conf", description: "backup: timer of profile %I",
                 packaged: packaged, body: [
            "[Timer]",
            "Persistent=true",
            "FixedRandomDelay=true",
            "",
            "[Install]",
            "WantedBy=timers.target",
        ])
    }

    func timerDropInText(_ profile: String, _ every: ScheduleInterval) -> String {
        ([
            Self.header + " --profile \(profile) --every \(every.words); `backup schedule --profile \(profile) --off` removes it.",
            "# every=\(every.words)",
            "[Timer]",
        ] + every.timerSettings).joined(separator: "\n") + "\n"
    }

    func serviceDropInText(_ profile: String, configPath: String?) throws(AppError) -> String {
        var lines = [
            Self.header + " --profile \(profile): where this profile's config and state are, as the shell that scheduled it saw them.",
            "[Service]",
            "Environment=\(try Self.quoted("XDG_CONFIG_HOME=" + configHome, exec: false))",
            "Environment=\(try Self.quoted("XDG_STATE_HOME=" + stateHome, exec: false))",
            // Variables only the shell had (credentials): in a 0600 file, read when it exists.
            "EnvironmentFile=-\(try Self.unquotedPath(environmentFile(profile)))",
        ]
        if let configPath {
            lines += ["ExecStart=", "ExecStart=\(try Self.quoted(executable)) --config \(try Self.quoted(configPath)) sync --profile %I --no-tui"]
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The crontab line that runs the profile's sync every `every` where there is no systemd.
    func cronLine(_ profile: String, _ every: ScheduleInterval, configPath: String?) -> (line: String, note: String?) {
        func sh(_ value: String) -> String {
            "'" + value.replacingOccurrences(of: "'", with: "'\\''").replacingOccurrences(of: "%", with: "\\%") + "'"
        }
        let spread = Int(profile.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 } % 60)
        let (fields, note) = every.cronTimes(spread: spread)
        var command = "\(Self.scheduledVariable)=1 XDG_CONFIG_HOME=\(sh(configHome)) XDG_STATE_HOME=\(sh(stateHome))"
            + " nice -n 10 ionice -c 3 \(sh(executable))"
        if let configPath { command += " --config \(sh(configPath))" }
        command += " sync --profile \(profile) --no-tui"
        return ("\(fields) \(command)", note)
    }

    // MARK: Jobs

    /// Schedules `profile`'s sync every `every`: writes the units (and the templates when no
    /// package installed them), then enables and starts the timer when a user manager runs.
    /// Where there is no systemd, writes nothing and gives the cron line.
    public func schedule(_ profile: Profile, every: ScheduleInterval, configPath: String?) throws(AppError) -> ScheduleReport {
        var report = ScheduleReport(profile: profile.name, every: every)
        report.warnings = credentialWarnings(profile)
        guard hasSystemd else {
            let (line, note) = cronLine(profile.name, every, configPath: configPath)
            report.cronLine = line
            if let note { report.warnings.append(note) }
            return report
        }
        report.timer = Self.timerName(profile.name)
        for (name, text) in [(Self.service, try Self.serviceTemplate(executable: executable, packaged: false)),
                             (Self.timer, Self.timerTemplate(packaged: false))] {
            let own = unitFolder + "/" + name
            if let installed = installedTemplate(name) {
                // A package's copy is in use; an older copy of ours would shadow it.
                if Self.isOurs(own) { try remove(own) }
                report.templates.append(installed)
            } else {
                if !FileManager.default.fileExists(atPath: own) || Self.isOurs(own) {
                    try write(text, to: own)
                    report.written.append(own)
                }
                report.templates.append(own)
            }
        }
        try write(timerDropInText(profile.name, every), to: timerDropIn(profile.name))
        try write(try serviceDropInText(profile.name, configPath: configPath), to: serviceDropIn(profile.name))
        report.written += [timerDropIn(profile.name), serviceDropIn(profile.name)]

        if !FileManager.default.fileExists(atPath: lingerFolder + "/" + userName) {
            report.warnings.append("lingering is off for \(userName): the timer runs only while you are logged in; "
                + "`loginctl enable-linger \(userName)` keeps it running after you log out")
        }
        if hasUserManager {
            try systemctl(["daemon-reload"])
            try systemctl(["enable", report.timer ?? ""])
            try systemctl(["restart", report.timer ?? ""])
            report.enabled = true
        } else {
            let folder = environment["XDG_RUNTIME_DIR"].map { "\($0)/systemd/private is missing" } ?? "XDG_RUNTIME_DIR is not set"
            report.enableSkipped = "no systemd user manager runs for this session (\(folder)), so the timer was written but not enabled; "
                + "in a login session run `systemctl --user daemon-reload && systemctl --user enable --now \(report.timer ?? "")`"
            report.cronLine = cronLine(profile.name, every, configPath: configPath).line
        }
        return report
    }

    /// Removes `profile`'s timer (disabling it first when a user manager runs); returns the
    /// files removed (none when it had no timer). The templates stay: other profiles use them.
    public func unschedule(_ profile: String) throws(AppError) -> [String] {
        let files = [timerDropIn(profile), serviceDropIn(profile)].filter { FileManager.default.fileExists(atPath: $0) }
        let link = wantsLink(profile)
        let linked = (try? FileManager.default.destinationOfSymbolicLink(atPath: link)) != nil
        let manager = hasUserManager
        if manager, !files.isEmpty || linked {
            // disable removes the link itself; one left (or made by hand) is removed below.
            try systemctl(["disable", "--now", Self.timerName(profile)])
        }
        var removed: [String] = []
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: link)) != nil {
            try remove(link)
            removed.append(link)
        }
        for file in files {
            try remove(file)
            removed.append(file)
            rmdir((file as NSString).deletingLastPathComponent)
        }
        if manager, !removed.isEmpty { try systemctl(["daemon-reload"]) }
        return removed
    }

    /// Every profile with a timer in the user's unit folder, by name.
    public func list() -> [ScheduledProfile] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: unitFolder) else { return [] }
        var found: [ScheduledProfile] = []
        for folder in names.sorted() where folder.hasPrefix("backup@") && folder.hasSuffix(".timer.d") {
            let escaped = String(folder.dropFirst("backup@".count).dropLast(".timer.d".count))
            guard let profile = Self.unescape(escaped), Self.escape(profile) == escaped,
                  let text = try? String(contentsOfFile: timerDropIn(profile), encoding: .utf8), text.hasPrefix(Self.header)
            else { continue }
            let every = text.split(separator: "\n").first { $0.hasPrefix("# every=") }.map { String($0.dropFirst("# every=".count)) } ?? "?"
            let enabled = (try? FileManager.default.destinationOfSymbolicLink(atPath: wantsLink(profile))) != nil
            found.append(ScheduledProfile(profile: profile, every: every, timer: Self.timerName(profile), enabled: enabled))
        }
        return found
    }

    /// Variables this shell gives the profile's runs that a scheduled run will not have.
    func credentialWarnings(_ profile: Profile) -> [String] {
        var missing: [String] = []
        func given(_ name: String) -> Bool { !(environment[name] ?? "").isEmpty }
        let remote = profile.remote
        if remote.hasPrefix("webdav") || remote.hasPrefix("sftp"), profile.settings["password_command"] == nil, given("BACKUP_PASSWORD") {
            missing.append("BACKUP_PASSWORD")
        }
        if remote.hasPrefix("s3:") {
            missing += ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
                        "AWS_REGION", "AWS_DEFAULT_REGION"].filter(given)
        }
        if remote.hasPrefix("sftp"), given("SSH_AUTH_SOCK") { missing.append("SSH_AUTH_SOCK") }
        if Config.bool(profile.settings["encrypt"] ?? "no") == true, profile.settings["crypt_password_command"] == nil, given("BACKUP_CRYPT_PASSWORD") {
            missing.append("BACKUP_CRYPT_PASSWORD")
        }
        guard !missing.isEmpty else { return [] }
        return ["this shell sets \(missing.joined(separator: ", ")), which a scheduled run does not get: put "
            + "what the profile needs in \(environmentFile(profile.name)) (NAME=value lines, mode 0600), "
            + "or use the profile's password_command"]
    }

    // MARK: Files and systemctl

    static func isOurs(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let start = (try? handle.read(upToCount: header.utf8.count)) ?? Data()
        return start == Data(header.utf8)
    }

    /// Writes `text` to `path` (mode 0644, as systemd's own units) through a temporary and a
    /// rename, making its folders.
    func write(_ text: String, to path: String) throws(AppError) {
        do throws(ReplacedFile.Failure) {
            try ReplacedFile.write(Data(text.utf8), to: path, mode: 0o644)
        } catch {
            throw .failure("cannot write \(path): \(error.reason); check that \((path as NSString).deletingLastPathComponent) is yours and writable")
        }
    }

    func remove(_ path: String) throws(AppError) {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw .failure("cannot remove \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Runs `systemctl --user ARGS`, turning a failure into one that names the command and
    /// says what systemctl said.
    func systemctl(_ arguments: [String]) throws(AppError) {
        guard let tool = find("systemctl") else { throw .failure("systemctl is not on PATH") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["--user"] + arguments
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw .failure("cannot run systemctl: \(error.localizedDescription)")
        }
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = TerminalText.visible(said.trimmingCharacters(in: .whitespacesAndNewlines))
            throw .failure("`systemctl --user \(arguments.joined(separator: " "))` failed (status \(process.terminationStatus))"
                + (text.isEmpty ? "" : ": \(text)"))
        }
    }
}
