// The command tree as data: every command, argument and option the binary accepts. The
// parser, the help text, the man page and the shell completions are all made from this one
// tree, so none of them can drift from what the binary does.

/// What kind of value an option takes, which also tells completions what to offer.
public enum ValueKind: Sendable, Equatable {
    /// A flag: no value.
    case none
    /// Free text, shown as the placeholder.
    case text(String)
    /// One of these words.
    case choice([String])
    /// A folder.
    case directory(String)
    /// A file.
    case file(String)
    /// A profile name from the config.
    case profile
    /// A remote URL or folder.
    case remote(String)
    /// Either a flag or, written `--name=VALUE` (never as the next word), a value.
    case optional(String)

    /// The placeholder shown in usage lines, nil for a flag.
    public var placeholder: String? {
        switch self {
        case .none: nil
        case .text(let name), .directory(let name), .file(let name), .remote(let name): name
        case .optional(let name): name
        case .choice(let words): words.joined(separator: "|")
        case .profile: "NAME"
        }
    }
}

/// One option, `--name [VALUE]`.
public struct OptionSpec: Sendable, Equatable {
    public var name: String
    public var value: ValueKind
    public var repeatable: Bool
    /// The command needs it (`init --source`); the man page's synopsis shows it without brackets.
    public var required: Bool
    public var help: String

    public init(_ name: String, _ value: ValueKind = .none, repeatable: Bool = false, required: Bool = false, help: String) {
        self.name = name
        self.value = value
        self.repeatable = repeatable
        self.required = required
        self.help = help
    }

    /// `--name VALUE` as shown in usage.
    public var usage: String {
        if case .optional(let placeholder) = value { return "--\(name)[=\(placeholder)]" }
        return value.placeholder.map { "--\(name) \($0)" } ?? "--\(name)"
    }
}

/// One positional argument.
public struct ArgumentSpec: Sendable, Equatable {
    public var name: String
    public var optional: Bool
    public var help: String
}

/// One command (or a group of subcommands).
public struct CommandSpec: Sendable, Equatable {
    public var name: String
    /// One line: what it does.
    public var summary: String
    /// Paragraphs for help and the man page.
    public var discussion: String
    public var arguments: [ArgumentSpec]
    public var options: [OptionSpec]
    public var subcommands: [CommandSpec]
    /// Hidden from usage and help (tools for packaging).
    public var hidden: Bool

    public init(
        _ name: String, summary: String, discussion: String = "", arguments: [ArgumentSpec] = [],
        options: [OptionSpec] = [], subcommands: [CommandSpec] = [], hidden: Bool = false
    ) {
        self.name = name
        self.summary = summary
        self.discussion = discussion
        self.arguments = arguments
        self.options = options
        self.subcommands = subcommands
        self.hidden = hidden
    }

    public func subcommand(_ name: String) -> CommandSpec? { subcommands.first { $0.name == name } }
}

/// The tool's tree.
public enum CommandTree {
    public static let version = "0.1.0"

    /// Options every command takes.
    public static let globalOptions: [OptionSpec] = [
        OptionSpec("profile", .profile, help: "The profile to use (default: \"default\")."),
        OptionSpec("config", .file("FILE"), help: "The config file (default: $XDG_CONFIG_HOME/backup/config)."),
        OptionSpec("help", help: "Show help for the command."),
        OptionSpec("version", help: "Show the version."),
    ]

    static let json = OptionSpec("json", help: "Print JSON lines on standard output: progress events and a last \"result\" line.")
    static let noTUI = OptionSpec("no-tui", help: "Run without the full-screen interface even on a terminal.")
    static let acceptHostKey = OptionSpec(
        "accept-host-key", .text("SHA256:FINGERPRINT"),
        help: "For an sftp:// remote: trust the server's host key when its SHA-256 fingerprint is this one (check it on the server with ssh-keygen -lf), writing the key to $XDG_CONFIG_HOME/backup/known_hosts; also how a key that changed is trusted again.")

    public static let root = CommandSpec(
        "backup",
        summary: "mirror a folder to a remote and restore it group by group",
        discussion: """
            backup keeps a plain mirror of a folder on a remote: a folder on another disk or a NAS share, \
            a WebDAV server, an S3 bucket, or an SSH server over SFTP. Files on the remote are the files you see, under the same names. \
            Guards keep a bad day from deleting the backup: an empty or missing source, a run that would delete \
            more than half of the backup, a switched account, a remote that vanished (an unmounted disk), a \
            remote another profile writes to, and a write hold you can set at any time.
            """,
        subcommands: [
            CommandSpec(
                "init", summary: "create or replace a profile",
                discussion: "Writes a profile to the config file (mode 0600), with a new writer id (an existing profile keeps its own). The source folder must exist. The last folder of the remote path is created when it is missing: a folder remote only when its parent exists (a missing parent usually means a disk that is not mounted), printing the mount point of the filesystem it was created on; a WebDAV folder by MKCOL; never an S3 bucket. Given no --group, a profile for a remote that already holds a backup takes that backup's groups from its marker (and says so), so its first sync keeps them; a group the marker names that a profile could not hold (a name with a control character, an invalid pattern) is not taken, and a note says to give the groups with --group.",
                options: [
                    OptionSpec("source", .directory("DIR"), required: true, help: "The folder to back up."),
                    OptionSpec("remote", .remote("URL"), required: true, help: "Where to: a folder path or file:///path, webdav://, webdavs://, s3://bucket/prefix, sftp://user@host[:port]/path (sftp://host/~/path: under the user's home)."),
                    OptionSpec("identity-file", .file("FILE"), help: "For an sftp:// remote: the private key to log in with (identity_file in the profile); its passphrase comes from BACKUP_PASSWORD or the profile's password_command. An ssh-agent (SSH_AUTH_SOCK) is tried first."),
                    OptionSpec("group", .text("NAME=PATTERN[,required]"), repeatable: true, help: "A restore group: files matching PATTERN; required groups are restored first. Repeat for more patterns or groups."),
                    OptionSpec("exclude", .text("PATTERN"), repeatable: true, help: "A gitignore-style pattern of paths never backed up."),
                    OptionSpec("encrypt", help: "Encrypt the backup in rclone crypt's format (encrypt = yes): every file's name and content, the marker and the versions. The passphrase comes from BACKUP_CRYPT_PASSWORD, the profile's crypt_password_command, or a prompt on a terminal (asked twice); it is written nowhere, and a lost passphrase means a lost backup."),
                    OptionSpec("force", help: "Replace an existing profile of the same name."),
                    acceptHostKey,
                ]),
            CommandSpec(
                "sync", summary: "back up the source to the remote",
                discussion: "One run of the sync engine: scan, upload what changed, delete what is gone, write the marker last. The first sync to a new remote needs --yes.",
                options: [
                    OptionSpec("yes", help: "Consent to the first write to this remote."),
                    OptionSpec("allow-shrink", help: "Lift the shrink guard for this run: allow deleting more than half of the backup."),
                    OptionSpec("allow-change", help: "Lift the change guard for this run: allow replacing more of the files than the profile's max_change (50% by default)."),
                    OptionSpec("allow-missing-remote", help: "Lift the remote-missing guard for this run: write to a remote synced before that now holds nothing (check first that it is not an unmounted disk)."),
                    OptionSpec("take-over", help: "Write over a backup whose marker names another writer (another profile or machine), making this profile the remote's writer."),
                    OptionSpec("dry-run", help: "Show what would be uploaded and deleted; write nothing."),
                    json, noTUI,
                ]),
            CommandSpec(
                "status", summary: "show a profile's state and what a sync would do now",
                options: [json]),
            CommandSpec(
                "profiles", summary: "list the profiles and how each one's last run ended",
                discussion: "One entry per profile of the config file: its source and remote, when it last synced, how its last run ended (whichever front end or timer ran it) and the write hold if one is set. Reads the state only; never touches a remote.",
                options: [json]),
            CommandSpec(
                "schedule", summary: "run a profile's sync on a timer, take it off, or list the timers",
                discussion: "With --every: puts the profile's sync on a systemd user timer, backup@NAME.timer (NAME escaped as systemd-escape does), and enables and starts it when a user manager runs for the session (else says so, with the command that enables it later, and the cron line that would do the same). The interval goes in a drop-in, backup@NAME.timer.d/schedule.conf, under $XDG_CONFIG_HOME/systemd/user; the template units backup@.service and backup@.timer are a package's (in /usr/lib/systemd/user), or are written there beside it, running this binary, when none is installed. Intervals that divide an hour or a day, and daily and weekly, are wall-clock times that a run missed while the machine was off catches up (Persistent=true); each run is moved by up to a tenth of the interval (at most 30 minutes). The service runs a scripted sync (BACKUP_SCHEDULED=1: no interface, one journal line per event) at Nice=10 and idle I/O priority, with the config and state folders pinned as this shell sees them, and the variables in $XDG_CONFIG_HOME/backup/NAME.env when that file exists (a scheduled run has none of the shell's environment: credentials such as BACKUP_PASSWORD or AWS_SECRET_ACCESS_KEY go there, in a file of mode 0600, or come from password_command). It warns when lingering is off: the user's timers then stop when they log out. Where there is no systemd, it writes nothing and prints the crontab line. With --off: disables the timer and removes its files. With neither: lists the scheduled profiles.",
                options: [
                    OptionSpec("every", .text("hourly|daily|weekly|Nh|Nm"), help: "How often: hourly, daily, weekly, every N hours (6h) or every N minutes (30m), up to 31 days."),
                    OptionSpec("off", help: "Take the profile off its timer: disable it and remove its files."),
                    json,
                ]),
            CommandSpec(
                "probe", summary: "look at the remote without writing",
                discussion: "Reports the probe's outcome: unavailable, failed, none (an empty remote), notReady (files but no readable marker) or found. An encrypted remote is probed without its passphrase when none is given: its plain key file says \"found, encrypted\".",
                options: [json, acceptHostKey]),
            CommandSpec(
                "restore", summary: "restore a backup, group by group",
                discussion: "Downloads into a staging folder inside the target, verifies each file's SHA-256 against the marker, and places group by group, required groups first. Interrupted restores continue with --resume. Nothing is ever written outside the target.",
                options: [
                    OptionSpec("to", .directory("DIR"), help: "The folder to restore into (default: the profile's source)."),
                    OptionSpec("remote", .remote("URL"), help: "Restore from this remote without a profile (a new machine)."),
                    OptionSpec("resume", help: "Continue the last restore from its record."),
                    OptionSpec("reset-attempts", help: "With --resume: try again files that failed three times."),
                    OptionSpec("only", .text("GROUP"), repeatable: true, help: "Restore only this group; repeat for more."),
                    OptionSpec("path", .text("PATH"), repeatable: true, help: "Restore only this file, or this folder and everything in it (a path in the backup, like docs/taxes); repeat for more."),
                    OptionSpec("as-of", .text("TIME"), help: "Restore the tree as it was at TIME (2026-11-30, 2026-11-30T14:05:09, local time unless it ends in Z or an offset; or @SECONDS since 1970), from the current files and the kept versions; a time before the oldest kept version is refused."),
                    OptionSpec("place", .choice(["all", "ask"]), help: "Place every group (all, the default) or ask per group (ask)."),
                    OptionSpec("overwrite", help: "Replace local files that differ; without it their group is rejected and reported."),
                    OptionSpec("abandon", help: "Stop keeping on the remote the files a restore into the source has not restored yet (syncs keep them until then); says how many files the next sync will then delete. Restores nothing."),
                    acceptHostKey, json, noTUI,
                ]),
            CommandSpec(
                "verify", summary: "check the remote against the backup's marker",
                discussion: "Compares the remote's listing with the marker the last sync wrote: files missing, files of another size, and files the marker does not name (reported, not damage). With --read-data it also downloads files and checks each one's SHA-256 against the marker. Never writes to the remote. Exit status 5 when anything is missing or damaged, naming each file.",
                options: [
                    OptionSpec("read-data", .optional("PERCENT"), help: "Download and check every file's SHA-256; with =PERCENT (1 to 100) only that share of the files, chosen so that successive runs cover the whole backup (where the last run stopped is kept in the profile's state)."),
                    OptionSpec("remote", .remote("URL"), help: "Verify this remote without a profile."),
                    acceptHostKey, json, noTUI,
                ]),
            CommandSpec(
                "versions", summary: "list the kept versions, or one file's",
                discussion: "Each sync that replaces or deletes files keeps their old contents, and the marker it replaces, in .backup-versions/<run time>/ on the remote, for keep_versions (30 days by default). Without PATH: one line per kept run (its time, files replaced, files deleted, bytes). With PATH: that file's kept versions, and whether the remote holds it now. Only reads.",
                arguments: [ArgumentSpec(name: "PATH", optional: true, help: "A file as the backup names it (like docs/taxes/2025.pdf).")],
                options: [
                    OptionSpec("remote", .remote("URL"), help: "Look at this remote without a profile."),
                    acceptHostKey, json, noTUI,
                ]),
            CommandSpec(
                "hold", summary: "show, set or clear the write hold",
                discussion: "While the hold is set, no sync writes anything; a sync already running stops before its next write.",
                subcommands: [
                    CommandSpec("set", summary: "set the write hold", arguments: [ArgumentSpec(name: "REASON", optional: true, help: "Why, shown by status.")]),
                    CommandSpec("clear", summary: "clear the write hold"),
                ]),
            CommandSpec(
                "forget", summary: "drop the profile's local state (the remote is untouched)",
                discussion: "The state is a cache of what the remote holds; the next sync rebuilds it from the remote's listing."),
            CommandSpec(
                "tui", summary: "open the full-screen interface",
                discussion: "The same as `backup` with no arguments on a terminal."),
            CommandSpec(
                "generate-manual", summary: "print the man page (mdoc) made from this command tree", hidden: true),
            CommandSpec(
                "generate-unit", summary: "print the systemd user unit KIND (service or timer) a package installs",
                arguments: [ArgumentSpec(name: "KIND", optional: false, help: "service or timer.")],
                options: [OptionSpec("exec", .file("PATH"), help: "The binary the service runs (default: this one).")], hidden: true),
            CommandSpec(
                "generate-completions", summary: "print the shell completion script for SHELL",
                arguments: [ArgumentSpec(name: "SHELL", optional: false, help: "bash, zsh or fish.")], hidden: true),
        ])
}
