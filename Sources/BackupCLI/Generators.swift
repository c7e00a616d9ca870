// The man page and the shell completion scripts, made from the command tree.
//
// Commands, options, their values and their help come from `CommandTree`, so a new option
// shows up in man/backup.1 and in every completion script once they are regenerated. The
// prose no tree can hold (the config format, credentials, the guards, JSON lines, the error
// mapping, examples) is written here as string literals, next to the code that lays it out.
// The committed files are this file's output, compared byte for byte by GeneratedFilesTests;
// `BACKUP_RECORD=1 swift test --disable-swift-testing --filter GeneratedFilesTests` (or
// `make generate`) rewrites them.
//
// Every generator returns its text without the final newline: the command's output adds it.

import BackupApp
import BackupEngine

enum Generators {
    /// The man page, in mdoc(7).
    static func manual() -> String {
        Manual.page()
    }

    /// The completion script for `shell` (bash, zsh, fish), nil for another shell.
    static func completions(_ shell: String) -> String? {
        switch shell {
        case "bash": BashCompletion.script()
        case "zsh": ZshCompletion.script()
        case "fish": FishCompletion.script()
        default: nil
        }
    }
}

// MARK: - The tree, as the generators walk it

/// One command a person can type, and the words that reach it.
struct CommandEntry {
    /// The words after `backup`, e.g. ["hold", "set"]; empty for `backup` itself.
    let path: [String]
    let spec: CommandSpec

    /// `backup hold set`.
    var name: String { (["backup"] + path).joined(separator: " ") }
    /// `hold set`: the key the completion scripts switch on ("" for `backup` itself).
    var key: String { path.joined(separator: " ") }
    /// The options accepted here, in the parser's order: the command's own, then the global ones.
    var options: [OptionSpec] { spec.options + CommandTree.globalOptions }
    /// The subcommands a person may type (hidden ones left out).
    var subcommands: [CommandSpec] { spec.subcommands.filter { !$0.hidden } }
}

extension CommandTree {
    /// Every visible command, `backup` itself first, then depth first in tree order.
    static var entries: [CommandEntry] {
        var result: [CommandEntry] = []
        func visit(_ spec: CommandSpec, _ path: [String]) {
            result.append(CommandEntry(path: path, spec: spec))
            for sub in spec.subcommands where !sub.hidden { visit(sub, path + [sub.name]) }
        }
        visit(root, [])
        return result
    }
}

extension ValueKind {
    /// The kind's name in the completion scripts: what to offer for the value.
    var completionKind: String? {
        switch self {
        // A value only ever written inline (`--read-data=10`): the next word is not its.
        case .none, .optional: nil
        case .text: "text"
        case .choice(let words): "choice:" + words.joined(separator: " ")
        case .directory: "directory"
        case .file: "file"
        case .profile: "profile"
        // A folder path is the most common remote; URLs are typed by hand.
        case .remote: "directory"
        }
    }
}

// MARK: - The man page

/// mdoc(7) text, built line by line. Prose goes through `text`, which escapes it, so no
/// sentence can turn into a request by starting with a dot.
struct Mdoc {
    private(set) var lines: [String] = []

    /// A macro line; `line` is macro syntax (`Sh NAME`, `It Fl -json`).
    mutating func macro(_ line: String) {
        lines.append("." + line)
    }

    /// Running text: one sentence per line, as mdoc wants, with `code` shown as ‘code’. After
    /// a list or a display, it starts a new paragraph.
    mutating func text(_ prose: String) {
        if let last = lines.last, last == ".El" || last == ".Ed" { macro("Pp") }
        lines += Mdoc.textLines(prose)
    }

    /// Paragraphs (separated by a blank line in `prose`), with `.Pp` between them.
    mutating func paragraphs(_ prose: String) {
        for (index, paragraph) in prose.components(separatedBy: "\n\n").enumerated() {
            if index > 0 { macro("Pp") }
            text(paragraph.replacingOccurrences(of: "\n", with: " "))
        }
    }

    /// A literal display, indented: config files, shell lines, unit files.
    mutating func literal(_ block: String) {
        macro("Bd -literal -offset indent")
        for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
            lines.append(Mdoc.protect(Mdoc.escape(String(line))))
        }
        macro("Ed")
    }

    /// A tag list: each item's head is macro syntax, its body prose.
    mutating func tagList(_ items: [(head: String, body: String)], width: String = "Ds") {
        macro("Bl -tag -width \(width)")
        for item in items {
            macro("It \(item.head)")
            paragraphs(item.body)
        }
        macro("El")
    }

    /// Backslashes, which start every roff escape, and anything beyond ASCII as a `\[uXXXX]`
    /// escape, so the source stays ASCII for every formatter.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                out += "\\e"
            } else if scalar.isASCII {
                out.unicodeScalars.append(scalar)
            } else {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
        }
        return out
    }

    /// A text line that starts with "." or "'" would be read as a request.
    static func protect(_ line: String) -> String {
        line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : line
    }

    /// A macro argument: escaped, and quoted when it holds a space.
    static func argument(_ text: String) -> String {
        let escaped = escape(text).replacingOccurrences(of: "\"", with: "\\(dq")
        return escaped.contains(" ") ? "\"\(escaped)\"" : escaped
    }

    static func textLines(_ prose: String) -> [String] {
        var marked = ""
        var opening = true
        for character in escape(prose) {
            if character == "`" {
                marked += opening ? "\\(oq" : "\\(cq"
                opening.toggle()
            } else {
                marked.append(character)
            }
        }
        // A new sentence starts a new line: after ". " (or "? ", "! ", ".) ") before a capital
        // letter or a quote mark.
        let characters = Array(marked)
        var lines: [String] = []
        var current = ""
        for (index, character) in characters.enumerated() {
            if character == " ", index > 0, index + 1 < characters.count {
                let before = characters[index - 1]
                let ends = ".?!".contains(before)
                    || (before == ")" && index > 1 && characters[index - 2] == ".")
                let next = characters[index + 1]
                if ends && (next.isUppercase || next == "\\") {
                    lines.append(current)
                    current = ""
                    continue
                }
            }
            current.append(character)
        }
        lines.append(current)
        return lines
            .flatMap { wrap($0.trimmed) }
            .map(protect)
    }

    /// A sentence in lines of at most `width` bytes (mandoc's lint asks for 80), broken
    /// between words.
    static func wrap(_ sentence: String, width: Int = 80) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in sentence.split(separator: " ") {
            if !line.isEmpty && line.utf8.count + 1 + word.utf8.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }
}

private extension String {
    /// Without spaces and tabs at either end.
    var trimmed: String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return String(text)
    }

    /// The first letter in upper case: a summary ("create a profile") as a sentence.
    var sentence: String {
        guard let first else { return self }
        let text = first.uppercased() + dropFirst()
        return text.hasSuffix(".") ? text : text + "."
    }
}

enum Manual {
    /// The page's date: change it with the text.
    static let date = "November 30, 2026"

    static func page() -> String {
        var page = Mdoc()
        page.macro("Dd \(date)")
        page.macro("Dt BACKUP 1")
        page.macro("Os")
        page.macro("Sh NAME")
        page.macro("Nm backup")
        page.macro("Nd " + Mdoc.escape(CommandTree.root.summary))
        synopsis(&page)
        description(&page)
        commands(&page)
        configuration(&page)
        credentials(&page)
        guards(&page)
        restore(&page)
        kept(&page)
        versions(&page)
        encryption(&page)
        security(&page)
        json(&page)
        environment(&page)
        files(&page)
        exitStatus(&page)
        examples(&page)
        diagnostics(&page)
        seeAlso(&page)
        return page.lines.joined(separator: "\n")
    }

    // MARK: From the tree

    /// `Fl -place Cm all|ask`: an option and its value, as macro syntax.
    static func syntax(_ option: OptionSpec) -> String {
        let flag = "Fl -\(option.name)"
        switch option.value {
        case .none: return flag
        case .optional(let name): return flag + " Ns Oo = Ns Ar " + Mdoc.argument(name) + " Oc"
        case .choice(let words): return flag + " Cm " + Mdoc.argument(words.joined(separator: "|"))
        default: return flag + " Ar " + Mdoc.argument(option.value.placeholder ?? "")
        }
    }

    /// An option in a synopsis: bare when required, bracketed otherwise, `...` when repeatable.
    static func synopsisPart(_ option: OptionSpec) -> String {
        if option.required { return syntax(option) }
        return option.repeatable ? "Oo \(syntax(option)) Oc No ..." : "Op \(syntax(option))"
    }

    static func synopsis(_ page: inout Mdoc) {
        page.macro("Sh SYNOPSIS")
        page.macro("Nm")
        for option in CommandTree.globalOptions where option.value != .none {
            page.macro(synopsisPart(option))
        }
        page.macro("Ar command")
        page.macro("Op Ar options")
        for entry in CommandTree.entries.dropFirst() {
            page.macro("Nm")
            page.macro("Cm \(entry.path.joined(separator: " "))")
            for option in entry.spec.options { page.macro(synopsisPart(option)) }
            for argument in entry.spec.arguments {
                page.macro(argument.optional ? "Op Ar \(Mdoc.argument(argument.name))" : "Ar \(Mdoc.argument(argument.name))")
            }
        }
    }

    static func description(_ page: inout Mdoc) {
        page.macro("Sh DESCRIPTION")
        page.text(CommandTree.root.discussion)
        page.macro("Pp")
        page.paragraphs("""
            A profile names a source folder and a remote, and says how files are grouped for a restore; \
            profiles live in the config file (see CONFIGURATION) and are chosen with `--profile` \
            (default: `default`). `backup init` writes one.

            With no arguments on a terminal, backup opens its full-screen interface; elsewhere it prints \
            the usage. `sync` and `restore` open their screen when standard input and output are a terminal, \
            and run scripted with `--no-tui`, with `--json`, or when either is not a terminal (cron, pipes, CI). \
            Scripted, a progress line goes to standard error, redrawn in place on a terminal and printed at \
            most once a second otherwise, and a summary goes to standard output at the end. \
            Progress, on the screen and in the line, follows bytes: a large file moves the bar, the \
            percentage and the ETA while it is sent or received; the rate is over the last five seconds, \
            so a stalled server shows 0 B/s. The bytes of an upload are those out of this machine: a \
            server that takes them at once and stores them slowly shows the file as sent, waiting for the \
            server. \
            With `--json`, standard output carries JSON lines instead (see JSON OUTPUT). When the interface \
            closes after a job finished, the outcome of the last one stays on the terminal as one line on \
            standard output, starting "backup: ". A terminal whose TERM is `dumb` (or unset) cannot draw it: \
            the commands run scripted there.

            In the interface, `?` (or F1) shows every key of the screen, `q` (or F10) quits (asking first \
            while a job runs, then stopping it cleanly), Esc goes back and Ctrl-L paints the screen again. \
            In a text field `?` and `q` are typed, so F1 and F10 do those there; the field edits at its \
            cursor (←, →, Home or Ctrl-A, End or Ctrl-E, Backspace, Delete or Ctrl-D, Ctrl-W for the word or \
            path component before the cursor, Ctrl-U to clear it), and a path typed there may start with \
            `~`, the home folder ($HOME). An Alt chord, or an escape sequence the terminal's description \
            does not name, does nothing. Lists page with PgUp and PgDn and go to their ends with Home and \
            End, and `/` finds a line in them (the help and the notes too). On the profile list `/` finds a \
            profile; `d` shows what its next sync would upload and delete (writing nothing; `/` there finds \
            a file); `n` and `e` create and edit a profile in a form, every field of it: source, remote, \
            user, password command, groups (required or not), excludes, size-compared and keep-remotely \
            patterns, transfers, each list in its own editor, saved as `backup init` saves; `E` edits the \
            config file itself in $VISUAL or $EDITOR (vi) and reads it again; `o` restores from a remote no \
            profile names (a new machine's first step); `V` verifies the profile's backup (the listing \
            against the marker at once, then `r` reads every file and checks its SHA-256, as `backup verify`); \
            and `x` deletes a profile after asking (its backup stays). Where a restore asks what to restore, \
            `d` asks for a date and time and restores the backup as it was then (as `--as-of`); a sync \
            stopped by the change guard offers `a` to sync anyway after you confirm. The list reads the profiles again every two seconds and shows how each one's last sync \
            ended, whoever ran it, a sync another process runs, and what the selected profile's next sync \
            would do (a dry run it makes on its own, writing nothing). On a sync's screen `h` sets a write \
            hold while it runs; on a job's screen `v` lists every note (files skipped or unreadable, \
            refused paths) in full, `b` keeps the job running in the background while you use other \
            screens (`b` on the profile list brings it back; quitting asks, then stops it cleanly), and \
            where a WebDAV remote's password is missing or refused, `p` asks for it: it is kept in the \
            process's memory for the session only and written nowhere (it comes before BACKUP_PASSWORD \
            and the password command).

            Options are spelled in full (`--name VALUE` or `--name=VALUE`) and may come before or after \
            the command words. These are accepted by every command:
            """)
        optionList(CommandTree.globalOptions, arguments: [], into: &page)
    }

    static func optionList(_ options: [OptionSpec], arguments: [ArgumentSpec], into page: inout Mdoc) {
        let items = arguments.map { (head: "Ar \(Mdoc.argument($0.name))", body: $0.help) }
            + options.map { option -> (head: String, body: String) in
                let repeatNoted = option.help.lowercased().contains("repeat")
                return (head: syntax(option), body: option.help + (option.repeatable && !repeatNoted ? " May be given more than once." : ""))
            }
        guard !items.isEmpty else { return }
        page.tagList(items)
    }

    static func commands(_ page: inout Mdoc) {
        page.macro("Sh COMMANDS")
        for entry in CommandTree.entries.dropFirst() {
            page.macro("Ss \(entry.name)")
            page.text(entry.spec.summary.sentence)
            if !entry.spec.discussion.isEmpty { page.paragraphs(entry.spec.discussion) }
            if !entry.subcommands.isEmpty {
                page.text("Its commands: " + entry.subcommands.map { "`\(entry.name) \($0.name)`" }.joined(separator: ", ") + ".")
            }
            optionList(entry.spec.options, arguments: entry.spec.arguments, into: &page)
        }
    }

    // MARK: Prose

    static func configuration(_ page: inout Mdoc) {
        page.macro("Sh CONFIGURATION")
        page.paragraphs("""
            The config file is `$XDG_CONFIG_HOME/backup/config` (default `~/.config/backup/config`), or the \
            file `--config` names. It holds one section per profile, like rclone's: a `[name]` header, then \
            `key = value` lines; lines starting with `#` or `;` are comments. Profile and group names are \
            letters, digits, `-`, `_` and `.`. `backup init` writes the file with mode 0600 and keeps the \
            other sections, comments included, as they were; it refuses a value holding a control character \
            (a line break, a tab, an escape), which would write a line of its own. Lines may end in LF or \
            CRLF. A mistake in it (a NUL byte too) names the file, the line and the key, and exits with \
            status 2 before anything is touched.
            """)
        var keys: [(head: String, body: String)] = [
            ("Cm source", "The folder to back up (required). Regular files, folders and symbolic links are backed up with their modes, times and owners (see WHAT IS KEPT); links are never followed, and FIFOs, sockets and devices are skipped with a note."),
            ("Cm remote", "Where the backup goes (required); see Remotes below."),
            ("Cm writer", "The profile's writer id, made by `backup init` and named in every marker it writes; see the writer guard under GUARANTEES AND GUARDS. Keep it when editing the file by hand: another id is another writer."),
            ("Cm exclude", "A pattern of paths never backed up. Repeat the key for more."),
            ("Cm size_compared", "A pattern of files compared by size and modification time only, never hashed: large media, disk images. A file uploads when its size or its modification time differs from the one recorded at its upload; a file whose time was never recorded (after `backup forget`) counts as unchanged when its size is, and its time is recorded then. Repeat for more."),
            ("Cm keep_remotely", "A pattern of files kept on the remote after they are deleted here, decided from the remote's listing: also after `backup forget` or on a new machine. Repeat for more."),
            ("Cm group.\\& Ns Ar NAME", "A pattern of the restore group NAME. Groups are restored in the order they first appear; repeat the key for more patterns. Files in no group form a last group of their own."),
            ("Cm group.\\& Ns Ar NAME Ns Cm .required", "`yes` or `no`: a required group is restored before every other group, and a failure in it fails the restore."),
        ]
        for key in Profile.providerKeys {
            keys.append(("Cm \(key)", providerKeys[key] ?? "Not yet described."))
        }
        page.tagList(keys, width: "keep_remotely")

        page.macro("Ss Remotes")
        page.tagList([
            ("Pa /path/to/folder , Pa file:///path/to/folder", "A folder on another disk or a mounted NAS share: the embedded default, needing no credentials. `backup init` creates its last folder when its parent exists, printing the filesystem's mount point; a missing parent is usually an unmounted disk and is refused. A sync never creates it."),
            ("Cm webdav://[user@]host[:port]/path , Cm webdavs://...", "A folder on a WebDAV server over http; `webdavs://` for https. `backup init` creates its last folder (its parent must exist on the server); a sync never creates it."),
            ("Cm s3://bucket[/prefix]", "A bucket, or a prefix in it, on AWS S3 or S3-compatible storage (Backblaze B2, Wasabi, MinIO, Ceph, Garage)."),
            ("Cm sftp://[user@]host[:port]/path", "A folder on an SSH server (a NAS, a Linux server), over SFTP; `sftp://host/~/path` is a folder in the user's login folder. The user defaults to the profile's `user`, else the local login name. `backup init` creates its last folder (its parent must exist); a sync never creates it. The server's host key must be trusted first (see SECURITY)."),
        ])
        page.text("A password in a URL is refused: it would end up in the shell history and the process list.")
        page.text("Every file name is kept byte for byte, on every remote. A folder remote and an SFTP remote hold the names as they are. On WebDAV and S3 a name is sent as it is, except what servers rewrite: each byte that is not part of valid UTF-8, and each control character, is sent as the private-use character U+EF00 plus its value (0xFF as U+EFFF, a tab as U+EF09); a name's own U+EF00 to U+EFFF characters are preceded by U+EF00, and \u{201B} is doubled. A file the server lists under a spelling backup never sends (a lone \u{201B}, a raw control character, such an escape standing for no byte) was not written by backup: a sync leaves it alone, and a restore refuses it (exit status 5).")

        page.macro("Ss Patterns")
        page.paragraphs("""
            Patterns are gitignore-style and match paths relative to the source. `*` matches within one \
            folder name and `?` one character; `**` as a whole segment matches any depth (`**/cache`, \
            `photos/**`); `[a-z]` matches a class. A pattern with no `/` matches a name at any depth \
            (`*.jpg`); one with a `/` is anchored at the source (`docs/taxes`); a trailing `/` matches \
            folders only (`cache/`); a pattern that matches a folder matches everything below it. A leading \
            `!` negates an earlier match. Matching is case-sensitive.

            A `.backupignore` file at the top of the source adds exclude patterns, one a line.
            """)

        page.macro("Ss Example profiles")
        page.text("One profile for each kind of remote:")
        page.literal("""
            # A folder on another disk (the default provider).
            [default]
            source = /home/alice
            remote = /mnt/backup/alice
            exclude = .cache/
            exclude = *.tmp
            size_compared = Videos/
            keep_remotely = Archive/
            group.papers = Documents/taxes/
            group.papers.required = yes
            group.photos = *.jpg

            # A WebDAV drive (a NAS; for Nextcloud, the folder's path
            # is /remote.php/dav/files/USER/FOLDER).
            [nas]
            source = /home/alice/Documents
            remote = webdavs://alice@nas.example.org/backup/laptop
            password_command = pass show cloud.example.org
            transfers = 8

            # S3-compatible storage; the keys come from AWS_ACCESS_KEY_ID
            # and AWS_SECRET_ACCESS_KEY.
            [b2]
            source = /home/alice/Photos
            remote = s3://alice-photos/laptop
            endpoint = https://s3.eu-central-003.backblazeb2.com
            region = eu-central-003

            # A folder on an SSH server (trust its host key once:
            # backup init ... --accept-host-key SHA256:...).
            [server]
            source = /home/alice/Music
            remote = sftp://alice@nas.example.org/~/backup/music
            identity_file = ~/.ssh/id_ed25519
            """)
    }

    /// What each provider setting does; a key without an entry shows as "Not yet described."
    /// and fails ManPageTests.
    static let providerKeys: [String: String] = [
        "user": "WebDAV and SFTP: the user, when the remote URL names none.",
        "identity_file": "SFTP: the private key to log in with (set by `init --identity-file`; `~/` is the home folder). Its passphrase, if it has one, comes from `BACKUP_PASSWORD` or `password_command`. Without it, `~/.ssh/id_ed25519`, `id_ecdsa` and `id_rsa` are tried, as ssh does.",
        "password_command": "WebDAV and SFTP: a command run by /bin/sh whose first line of output is the password, used when `BACKUP_PASSWORD` is not set. It is run again once if the server refuses the password.",
        "ca_file": "WebDAV and S3 over https: a PEM file of the certificate authorities to trust, for a NAS with a self-signed certificate. TLS is always verified; there is no way to turn it off.",
        "transfers": "How many uploads (a sync) or downloads (a restore) run at once, 1 to 64 (default 4); WebDAV and S3 gain the most from more. On SFTP each is an SSH connection of its own.",
        "region": "S3: the region (default: `AWS_REGION`, else us-east-1).",
        "endpoint": "S3: the endpoint URL of S3-compatible storage (default: `AWS_ENDPOINT_URL`, else AWS itself).",
        "path_style": "S3: `yes` for path-style addressing (endpoint/bucket/key) rather than bucket.endpoint/key; by default path style is used for a custom endpoint or a bucket name DNS cannot carry.",
        "keep_versions": "How long the old contents of replaced and deleted files are kept on the remote, in `.backup-versions` (see VERSIONS): a number of hours, days or weeks (`12h`, `30d`, `8w`; default `30d`), or `0` to keep none (versions already kept then stay until you remove them).",
        "encrypt": "`yes` to encrypt the backup in rclone crypt's format (set by `init --encrypt`; see ENCRYPTED REMOTES). It is part of the backup's identity: a remote that holds a backup is never switched between encrypted and plain.",
        "crypt_password_command": "An encrypted profile: a command run by /bin/sh whose first line of output is the passphrase, used when `BACKUP_CRYPT_PASSWORD` is not set.",
        "crypt_password2_command": "An encrypted profile: the same for the second passphrase (rclone's `password2`, the salt), used when `BACKUP_CRYPT_PASSWORD2` is not set. Leave both unset for rclone's default salt.",
        "on_failure": "A command run by /bin/sh after every `backup sync` that ends with a non-zero exit status (a failure, a guard, the hold, a busy profile), with the run's result as one JSON object on standard input (the `result` line of JSON OUTPUT, with `exit` and `profile`) and `BACKUP_STATUS` (its `status`), `BACKUP_EXIT` and `BACKUP_PROFILE` set: one line sends mail, an ntfy or desktop notification, or a webhook. Its output goes to standard error; it is stopped after 60 seconds, and its own failure is reported without changing the sync's exit status.",
        "on_success": "The same after a `backup sync` that ends with exit status 0.",
        "max_change": "The change guard: the largest share of the files compared by content that one sync may replace, once at least 20 are known (default `50%`); `100%` or `off` turns the guard off. See GUARANTEES AND GUARDS.",
    ]

    static func credentials(_ page: inout Mdoc) {
        page.macro("Sh CREDENTIALS")
        page.paragraphs("""
            Credentials never go on the command line, and never appear in messages, logs or JSON output. \
            A folder remote needs none. A server that echoes a credential back in an error has it masked \
            as `***` in every form it may take: as is, percent-encoded, in base64 as HTTP Basic sends it, \
            JSON- or XML-escaped. Names and messages that come from a remote (file names, group names, a \
            server's error text) are shown on a terminal with control and bidi characters as visible \
            escapes (`\\x1b`, `\\n`, `\\u{202E}`), so they cannot clear the screen, write the clipboard or \
            start a line of their own; JSON output carries them exactly.

            WebDAV: the user comes from the remote URL (`webdavs://alice@host/path`), else from the profile's \
            `user` key; the password from the environment variable `BACKUP_PASSWORD`, else from the profile's \
            `password_command` (for example `pass show nas`, or `secret-tool lookup service backup`).

            SFTP: the ssh-agent's keys (`SSH_AUTH_SOCK`) are tried first, then the profile's `identity_file` \
            (its passphrase from `BACKUP_PASSWORD`, else `password_command`), else OpenSSH's default keys \
            (`~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa`); with no key file set, `BACKUP_PASSWORD` or \
            `password_command` is the account's password (password or keyboard-interactive login). The host \
            key is checked before any of them is sent (see SECURITY).

            S3: the keys come from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`, with `AWS_SESSION_TOKEN` for \
            temporary keys. The endpoint and region come from the profile's `endpoint` and `region` keys, else \
            from `AWS_ENDPOINT_URL` and `AWS_REGION`. The same bucket reached with rotated keys keeps its \
            identity; another account or bucket is a new remote.

            When a credential is missing, nothing touches the remote: the run ends unavailable with reason \
            `noAccount` (exit status 3). A refused credential fails fast with `authRevoked` (exit status 1); \
            it never hangs.
            """)
    }

    static func guards(_ page: inout Mdoc) {
        page.macro("Sh GUARANTEES AND GUARDS")
        page.paragraphs("""
            The remote is the truth and the local state only a cache of it: every sync lists the remote \
            and compares it with the source, so `backup forget` is always safe (it keeps the write hold, and \
            the files a restore into the source has not restored yet). A sync uploads first \
            (size-compared files before hashed ones), deletes after, and writes the marker last: the marker \
            is the commit point, and it names only the hashes of bytes the remote holds (a run whose \
            uploads were all skipped leaves it as it was). Every file goes to a temporary name and is renamed into place, so no \
            half-written file ever has its real name, and the state is saved after every write: a run \
            stopped at any point, even by `kill -9` or a power cut, continues with only what it had not \
            finished. The state never claims a file the remote lacks: a file being replaced or deleted is \
            taken out of it first, so one caught by a kill mid-write is compared afresh next run. The \
            temporary files a stopped run leaves are removed by the next run that writes, once they are an \
            hour old (so another machine's live upload is never touched; on S3, incomplete multipart \
            uploads under the prefix, once a day old); a preview or a held run leaves them. A file that \
            cannot be read now is kept on the remote, never deleted. If the remote's \
            identity changes (another disk, account or bucket), the state starts over with a full upload, \
            never a merge. Two runs of one profile never interleave: the second waits two seconds, then \
            exits with status 3 naming the process that holds the profile.

            Each guard below stops a sync before it writes anything, reports why (the `reason` key of \
            the JSON result) and exits with status 3.
            """)
        page.tagList([
            ("Sy Consent Pq Cm needsConsent", "The first sync to a remote nobody has confirmed writes nothing. It protects a remote typed by mistake, or someone else's folder. Lift it once with `backup sync --yes` (the full-screen interface asks); the consent is stored."),
            ("Sy Empty guard Pq Cm restorePending", "An empty source (an unmounted drive, a new machine, a mistyped path) is never mirrored over a remote that already holds files and was never synced from here: that would delete the whole backup. Lift it by restoring first (`backup restore`), which also seeds the state so the next sync uploads nothing, or by pointing the profile at another remote. Once this machine has synced to the remote, an emptied source meets the shrink guard instead."),
            ("Sy Remote-missing guard Pq Cm remoteMissing", "A remote that this profile has completed a sync to and that no longer holds its marker is not written (a completed sync always leaves one): it is an unmounted disk's bare mount point, empty or with a stray file (writing there would fill the system disk with a backup nobody can find, and delete the stray file), another disk mounted in its place, a disconnected share, a wrong URL, or a folder emptied by hand. Nothing is written, not even the folder's volume id, and the state is kept, so every run is refused until the remote is back. Beyond the contract, it is checked before the empty guard. It holds while the remote's identity is the same or can no longer be told (a bare mount point has no volume id); a provider that names another identity is an account switch, which starts over instead. If the backup there is really gone, lift it for one run with `backup sync --allow-missing-remote`."),
            ("Sy Writer guard Pq Cm otherWriter", "Each profile has a writer id, made by `backup init` (the `writer` key of its config section; a profile written before there were writer ids gets one at its first sync that writes), and the marker names the writer that wrote it. A sync that finds the remote's marker written by another writer (another profile or machine on the same remote folder, which would delete each other's files at every run) writes nothing and names that writer. It is checked after the empty guard, so a new machine with an empty source is told to restore first, and before the shrink guard. A restore from the profile's own remote into its source takes the writer over by itself, so restoring on a new machine and then syncing needs no flag (a restore continued with `--resume` does not; use the flag then). A marker written before markers carried a writer id is taken over silently. To make this profile the remote's writer on purpose, run `backup sync --take-over`; the other profile is then refused in turn."),
            ("Sy Shrink guard Pq Cm shrinkSuspected", "A run that would delete more than half of the files in the backup (once it holds at least four) is refused: a half-mounted disk, a moved folder, or an `rm -rf` in the wrong place would otherwise take the backup with it. Check that the source is complete; if you really deleted those files, lift it for one run with `backup sync --allow-shrink`."),
            ("Sy Change guard Pq Cm changeSuspected", "Beyond the contract, beside the shrink guard: a run that would replace more than the profile's `max_change` (default 50%) of the files it compares by content is refused, once at least 20 such files are known. Ransomware, or a script gone wrong, rewrites files in place: the names, sizes and count stay the same, so the shrink guard sees nothing. Files compared by size only are not counted (a rewrite cannot be told from a touch). Open a few of the files; if the change is yours, lift it for one run with `backup sync --allow-change` (the full-screen interface asks). With versions on, every file the run replaces is kept anyway."),
            ("Sy Hold Pq Cm writeHeld", "`backup hold set REASON` stops every sync of the profile from writing, including one already running, before its next write. Use it when something looks wrong (files encrypted by malware, a disk about to be swapped) and you want the backup left exactly as it is. `backup hold` shows it, `backup status` shows the reason, and `backup hold clear` lifts it. Restores are not held."),
        ], width: "Ds")
        page.paragraphs("""
            Looking writes nothing: `backup probe`, `backup sync --dry-run`, `backup status` and a run \
            refused by any guard leave the remote exactly as it was. A folder remote's volume id \
            (`.backup-volume-id`) is created by the first run that writes, right before its first write.

            `backup init` creates the last folder of the remote path when it is missing, one rule for \
            every provider: a folder remote only when its parent folder exists (a missing parent is \
            usually an unmounted disk, and init refuses it), printing the mount point of the filesystem \
            the folder was created on, so a folder created on the system disk instead of a disk shows; a \
            WebDAV folder by MKCOL (its parent must exist on the server; if it cannot be created, init \
            says why and still writes the profile); S3 never creates a bucket. A sync never creates the \
            remote folder: a missing one is an unmounted disk or a wrong URL, and the sync fails as \
            `notAvailable`.
            """)
    }

    static func restore(_ page: inout Mdoc) {
        page.macro("Sh RESTORE AND RESUME")
        page.paragraphs("""
            `backup restore` probes the remote, reads the marker the last sync wrote and plans by its groups, \
            required groups first. Files download into the staging folder `.backup-staging` inside the target, \
            are checked against the size the remote listed and the SHA-256 in the marker, and are then placed \
            one group at a time. Up to `transfers` files of a group (4 by default) download at once; the next \
            group starts downloading once the one before it is placed.

            Everything the remote says is untrusted: names, sizes, bodies, the marker. Nothing is ever written \
            outside the target. A remote path that is absolute, holds a `.` or `..` component, or an escape \
            that would stand for `/`, NUL, `.` or `..`, is refused and named in a note. Every folder on the \
            way is opened without following links (a link in the way is refused, never written through), \
            every download goes into a new file made inside the target, and nothing a FIFO could hang is \
            opened. A body longer than the listed size is stopped at that size; a shorter one, or one whose \
            SHA-256 differs from the marker's, is refused and reported (`hashMismatch` or `sizeMismatch`), and \
            never placed. A listing that names a file twice keeps its first entry. A marker larger than a \
            backup of the listed size can need (8 MiB and 1 KiB per file) is refused before it is read \
            further. Before downloading, a restore that needs more space than the target has free is refused. \
            Each of these checks ends the run with exit status 5 once everything else is restored.

            A local file that differs from the backup is never replaced without being asked for. With \
            `--place all`, the default, its group is not placed without `--overwrite`, and reported (a \
            `conflict` event). `--place ask` asks before each group on the terminal (place, reject, or list \
            the files), and the interface does the same; placing a group over local files that differ asks \
            a second time: overwrite them (no copy of yours is kept), or keep yours, the default, which \
            places the rest of the group and leaves those files unrestored, asked about again on \
            `--resume`. `--only GROUP` restores only the groups named; a group left out is not downloaded \
            at all. `--path PATH` restores only that file, or that folder and everything in it (a path as the \
            backup names it, like `docs/taxes`; repeat it for more; the folders above come with their modes \
            and times); a path the backup does not hold is refused (exit status 2) before anything is \
            downloaded. In the interface, `f` on the list of groups chooses such paths. The interface's restore (r on the profile list) asks for the target folder, then \
            lists the backup's groups, read from its marker, to tick before anything is downloaded.

            A file gets three tries: a failed download or check, and a rejection of its group, each use one. \
            A file out of tries is skipped (the restore ends incomplete, exit status 4); a failure \
            in a required group fails the restore. The restore's record is saved after every download and \
            every placement, so after any stop `backup restore --resume` continues where it stopped; \
            `--reset-attempts` tries skipped files again. If a sync wrote a new backup in the meantime, the \
            resume ends with `sourceChanged`: start a new restore. The record names the target folder once and, \
            per file, the remote path and the path it is placed at, never a local path; `--resume` continues \
            into that target, and a different `--to` is refused (exit status 2) with the command that continues. \
            A file staged by an earlier run is checked again (size and SHA-256) before it is placed. A restore \
            that completes leaves exactly the restored tree: no staging folder, no temporary files.

            `backup restore --remote URL --to DIR` restores without a profile, as on a new machine (its record \
            is kept per target folder). A restore into a profile's own source seeds its sync state with every \
            file it verified, so the next `backup sync` uploads none of them again; a restore from another \
            remote (`--remote` naming another backup) seeds nothing. Until the backup's other files are \
            restored too (after `--only`, or a restore that stopped), every sync keeps them on the remote \
            instead of deleting them as gone from the source; this is kept in the sync state, not the restore \
            record, so a new restore does not lose it. `backup restore --abandon` stops keeping them and says \
            how many files the next sync will then delete.
            """)
    }

    static func kept(_ page: inout Mdoc) {
        page.macro("Sh WHAT IS KEPT")
        page.paragraphs("""
            A backup keeps the tree, not only the files. For every regular file: its content, permission bits, \
            modification time to the nanosecond, and owner (numeric uid and gid, and the user and group names). \
            Symbolic links are kept as links: their target text byte for byte, never followed on either side. \
            Folders are kept, empty ones too, with their modes, times and owners (the source folder itself is \
            not: the target of a restore is yours to choose). Two names of one file (a hard link, found by its \
            device and inode) are uploaded as a file each and restored as one file with two names. FIFOs, \
            sockets and devices are not kept: each is named in a note.

            The marker records all of it, for every provider. A folder remote is also a mirror of the tree \
            itself, as `rsync -a` would leave it: each file gets its source's permission bits and modification \
            time (it is created 0600 first, never more permissive than its source) and, when the sync runs as \
            root, its owner and setuid, setgid and sticky bits; folders (empty ones too) and symbolic links are \
            made there with their modes and times, and those gone from the source are removed; the two names \
            of a hard link are two files there. A file system that cannot keep modes or links (vfat, exFAT, \
            some CIFS) gets a note, and the marker stays the record. An SFTP remote is a mirror too: each file \
            gets its source's permission bits and modification time in whole seconds (SFTP carries no finer \
            time), folders and links are made there with their modes and times, and those gone are removed; \
            owners are left as the server sets them. On WebDAV and S3, folders and links live \
            in the marker only; WebDAV uploads send the time in whole seconds as `X-OC-Mtime` (Nextcloud, \
            ownCloud and `rclone serve webdav` keep it), S3 uploads send it as `x-amz-meta-mtime`, as rclone \
            writes it. A change of mode, time or owner alone uploads no file: the marker is written again \
            (and, on a folder remote, the file's mode and time are set on it).

            A restore sets each file's mode and time as it is placed; once every file is placed, it makes the \
            hard links, the folders and the symbolic links (a link is only ever created: it is never opened, \
            nothing is written through it, and a link where files of the backup lie below it is refused), and \
            sets the folders' modes and times last, deepest first. Owners, and setuid, setgid and sticky bits, \
            are set only when the restore runs as root (owners by name when the name exists on this machine, \
            else by number, as tar and rsync do); otherwise they are dropped, with a note for the special bits. \
            Access times, ACLs and extended attributes are not kept. A backup written before markers recorded \
            this restores its files with the defaults of new files.
            """)
    }

    static func encryption(_ page: inout Mdoc) {
        page.macro("Sh ENCRYPTED REMOTES")
        page.paragraphs("""
            A remote you do not control (a WebDAV host, an S3 bucket) can hold the backup encrypted, file by \
            file, in the format of rclone's crypt remote: `backup init --encrypt` sets `encrypt = yes`. The \
            backup stays a mirror (one encrypted file per file, in the same folders), and rclone alone can \
            read it, so the backup never depends on this tool. Encrypted: every file's name (each folder and \
            file name, with rclone's `standard` name encryption: EME over AES-256, base32hex) and content \
            (64 KiB chunks of XSalsa20-Poly1305), the marker (with the groups, the modes, times and links) \
            and the versions. Plain, at the remote's root: the key file `.backup-encrypted` (a short text \
            sealed under the keys), a folder remote's volume id, and the name of the versions folder \
            `.backup-versions` (what is in it is encrypted). Sizes are not hidden: an encrypted file is 32 \
            bytes plus 16 a chunk larger than its plain one.

            The passphrase comes from `BACKUP_CRYPT_PASSWORD`, else the profile's `crypt_password_command`, \
            else a prompt on the terminal (asked twice by `init`); an optional second passphrase (rclone's \
            `password2`, used as the salt) from `BACKUP_CRYPT_PASSWORD2` or `crypt_password2_command`. \
            Neither is written to the config, the state, a log or the JSON output. The keys come from them by \
            scrypt, so there is nothing else to keep: but a lost passphrase means a lost backup, since nobody \
            can decrypt it without.

            Every job checks the passphrase against the key file before it reads or writes anything: a wrong \
            one ends it with `wrongPassphrase` (exit status 2), and no passphrase at all (in a script) with \
            `missingPassphrase` (exit status 2). `backup probe` works without one, and says `found, \
            encrypted`. An encrypted profile is refused on a remote that holds a plain backup, and a plain \
            profile on a remote that holds an encrypted one (`encryptionMismatch`, exit status 2): start an \
            encrypted backup on a new, empty remote. `restore --remote` without a profile sees from the key \
            file that the remote is encrypted and asks for the passphrase. A name whose encrypted form would \
            be over 255 bytes (a name of about 143 bytes or more) cannot be stored: the sync backs up \
            everything else, names the file and ends with exit status 1.

            To read a backup with rclone alone, without this tool:
            """)
        page.literal("""
            # 1. Your passphrase in rclone's obscured form:
            $ rclone obscure 'your passphrase'
            # 2. A crypt remote over the backup's storage (here a
            #    folder remote; for WebDAV or S3, name the storage
            #    with `rclone config` and use it as remote=NAME:PATH):
            $ C=':crypt,remote=/mnt/backup/alice,password=OBSCURED:'
            $ rclone copy "$C" ~/restored --exclude '.backup*'
            # 3. Check every file against your own copy:
            $ rclone cryptcheck ~/Documents "$C" --exclude '.backup*'
            # 4. The kept versions, with a crypt remote rooted there:
            $ V=':crypt,remote=/mnt/backup/alice/.backup-versions,'
            $ rclone copy "${V}password=OBSCURED:" ~/versions
            """)
        page.text("Set `filename_encryption = standard` and `directory_name_encryption = true` (rclone's defaults), and `password2` to the obscured second passphrase if the backup has one. rclone skips the three plain names with a notice; `.backup-marker` comes out as a file of its own (the marker), which a copy may leave out with `--exclude '.backup*'`. Modes, times and links are in the marker, not in the files: rclone gives the files back with their contents, and `backup restore` gives them back with their metadata.")
    }

    static func versions(_ page: inout Mdoc) {
        page.macro("Sh VERSIONS")
        page.paragraphs("""
            A plain mirror alone loses the only good copy when a file is deleted or overwritten by mistake and \
            the next sync runs. So a sync keeps what it replaces: before it writes over or deletes a file on the \
            remote, it keeps the old one, on the server itself, in `.backup-versions/<run time>/<path>` beside \
            the tree, where the run time is when the run began keeping, in UTC (`20261130T140509Z`: no colons, \
            which vfat, exFAT and SMB refuse). A file to be replaced is copied there first (a folder remote \
            makes a hard link; WebDAV sends COPY; S3 CopyObject, UploadPartCopy parts above 5 GiB), so its path \
            holds the old content until the new one lands; a file to be deleted is moved there (a rename; WebDAV \
            MOVE; S3 CopyObject, then DeleteObject). A WebDAV MOVE or COPY is never sent twice blindly: after a \
            lost answer the provider looks where the file is first (and the run says so in a note); an S3 copy, \
            which gives the same bytes again, is simply sent again. A version already kept is never kept over. \
            If the old file cannot be kept, that file is neither replaced nor deleted this run: the run says so \
            (the `keep_failures` of its JSON result) and the next run tries again, so an old version is never \
            lost without its copy. The marker a run replaces is kept in its folder too, so any kept tree can be \
            rebuilt, and beside the folder a small record, `<run time>.json`, says how many files it replaced \
            and deleted, their bytes, and when its own marker was written.

            The versions folder is the tool's own: listings go around it (on WebDAV, the folders beside it are \
            listed one by one; on S3 the listing starts again after it), it counts toward no guard, and a source \
            folder of that name at the top of the source is not backed up. Browse it like the tree: each run's \
            folder is a plain folder of plain files.

            Retention: after every sync that completed (one that wrote nothing too), the runs older than \
            `keep_versions` (default 30 days) are removed, oldest first, each run's kept marker before its \
            files. Never while the write hold is set, never after a guard refused the run. Only folders named as \
            runs are ever removed. With `keep_versions = 0` nothing is kept, and nothing already kept is \
            removed.

            `backup versions` lists the kept runs: their time (local), the files each replaced and deleted, and \
            the bytes kept. `backup versions PATH` lists one file's kept versions, each as it was before the run \
            of that time, and whether the backup holds it now.

            `backup restore --as-of TIME` restores the tree the backup was at that time: the files and the \
            folders, links and metadata of the marker that was current then, each file from the remote's current \
            copy where it is still that content, else from the first run after it that kept it; every file is \
            checked against the SHA-256 that marker gives. TIME is an ISO 8601 date or date-time, local time \
            unless it ends in `Z` or an offset (`2026-11-30`, `2026-11-30T14:05`, `2026-11-30T14:05:09Z`, \
            `2026-11-30 14:05:09+01:00`), or `@` and seconds since 1970 (`@1764511509`); a time is taken as the end of the last unit it names, so a date means \
            the backup as that day left it and a time copied from `date` just after a sync includes that sync. A \
            time before the oldest kept tree is refused (exit status 2), naming it. It goes with `--only`, \
            `--path` and `--to`; the full-screen interface asks for the time with `d` where it asks what to \
            restore. A restore as of a time never speaks for the sync state: the next sync compares the restored \
            files afresh, and uploads them (keeping what they replace) if they went into the source.

            `backup verify` proves what the remote holds against the marker the last sync wrote, and never \
            writes to the remote. It lists the remote and names every file the marker has that the remote \
            lacks (`missing`) or lists at another size (`sizeMismatch`); a file the remote holds that the \
            marker does not name is reported too (`extra`: a stray file, not damage). With `--read-data` it \
            also downloads every file, up to `transfers` at once, each into a private temporary file, and \
            checks its SHA-256 against the marker's (`hashMismatch`: the bytes were changed at the same size). \
            `--read-data=PERCENT` reads only that share of the files: each file belongs to one of 100 buckets \
            (by the SHA-256 of its path), each run reads the next PERCENT of them, and the profile's state \
            keeps where it stopped, so successive runs cover the whole backup (ten runs of \
            `--read-data=10` read every file once). It shows a progress bar (JSON `progress` events), names \
            each damaged file as it is found (`error` events), and exits with status 5 when anything is \
            missing or damaged. It takes the profile's lock, so it never reads a remote that a sync of the \
            same profile is writing.
            """)
    }

    static func security(_ page: inout Mdoc) {
        page.macro("Sh SECURITY")
        page.paragraphs("""
            A remote may be a server someone else runs, or one whose keys have leaked: everything it says \
            is untrusted. A restore writes only inside its target and the staging folder there, whatever \
            the remote lists (see RESTORE AND RESUME for what is checked and refused); it reads a folder \
            remote without writing to it. The restore record names no local path, so an edited record \
            cannot point a restore elsewhere either. A body of another size than listed, or whose SHA-256 \
            differs from the marker's, is never placed. WebDAV listings are read as a stream with no DTD \
            and no entities, and every body kept in memory is capped, so a huge or hostile answer is \
            refused within a bounded amount of memory. Redirects are never followed, and TLS certificates \
            are always verified (`ca_file` names the certificates to trust for a self-signed server; nothing turns the check off).

            An SFTP server's host key is checked before any credential is sent, against \
            `~/.ssh/known_hosts` (read, never written) and the tool's own `$XDG_CONFIG_HOME/backup/known_hosts`. \
            An unknown key is refused, printing its SHA-256 fingerprint and the command that trusts it: check \
            the fingerprint on the server (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), then give it \
            to `--accept-host-key` (on `init`, `probe`, `restore`, `verify` and `versions`), which writes the key \
            to the tool's own file (mode 0600). A key that differs from the one trusted is refused loudly: \
            someone may be in between. Only `--accept-host-key` with the new key's fingerprint trusts it \
            again; the old fingerprint, or any other, is refused.

            Names, group names and server messages are shown with control characters escaped, and \
            credentials are masked in every form (see CREDENTIALS). `init` refuses control characters in \
            any value it writes, and the config parser refuses a NUL byte, so no value can add a line to \
            the config. The config file and every state and record file are created with mode 0600.

            When a check of the remote's data fails (a hash or size mismatch, a refused name, a damaged \
            marker), the run restores everything else and ends with exit status 5, naming each file.
            """)
    }

    static func json(_ page: inout Mdoc) {
        page.macro("Sh JSON OUTPUT")
        page.paragraphs("""
            With `--json`, `sync`, `restore`, `status`, `probe`, `verify` and `versions` print JSON lines on standard output: one \
            object per line, each with an `event` key. The last line of a run is its `result`. Messages for \
            people still go to standard error. Scripts should ignore keys they do not know.
            """)
        page.tagList([
            ("Cm scanning", "While the source is scanned, at most ten a second: `files` found so far, and of them `hashed` (read and hashed) with their `hashed_bytes`."),
            ("Cm scanned", "The scan of the source finished: `files`, `bytes`, and `hashed`, the files the scan read and hashed (the others came from the fingerprint cache; on a first sync, new files are not read by the scan: each is hashed as its upload reads it: `hashed_when_sent` counts them, and the result's `hashed` includes them)."),
            ("Cm note", "Something about one path: `path` and `message` (a special file skipped, a file that cannot be read)."),
            ("Cm stage", "A part of a sync's writes begins: `stage` is `uploading` (with `files` and `bytes`, as scanned), `deleting` (with `files`), `updating metadata` (with `files`) or `writing the marker` (with its `bytes`)."),
            ("Cm progress", "At most ten a second, and always the last one; during a large file too, as its bytes move. For a sync, `done` and `total` steps (uploads, deletes and the marker). For a restore, `done` and `total` files placed, `staged` (downloaded and checked), `groups_done` and `groups_total`. For a verify, `done` and `total` files read and checked. All carry `bytes` (moved so far, the part of each file in flight included: sent by a sync, received by a restore), `bytes_total` (what the run expects to move: the planned uploads and, once it is made, the marker; or the files a restore has to download; 0 until known) and `in_flight`, the files moving now, each with `path`, `bytes` moved and `size`."),
            ("Cm conflict", "A group was not placed because it would replace local files that differ: `group` and `paths`."),
            ("Cm error", "One file of a restore failed this attempt: `path`, `message`, and `error`: `hashMismatch`, `sizeMismatch` or `undecryptable` (an encrypted file whose bytes were changed) (the remote's data failed a check, exit status 5), `refusedPath` (its path may not be restored), `local`, or a kind under DIAGNOSTICS."),
            ("Cm status", "The answer of `backup status`: `profile`, `source`, `remote`, `remote_files` and `remote_bytes` (what the state records), `local_files`, `local_folders`, `local_symlinks` (null when the source cannot be read: then `would` is `failed`, `error` is `local` and `message` says why), `last_sync` (ISO 8601, or null), `last_outcome` (how the last sync that ran ended, whoever ran it: an object with `status` — `completed`, `unavailable`, `failed` or `stopped` —, `at` and `message`; or null), `hold` (its reason, or null), and what a sync would do now: `would_upload` and `would_delete`, or `would` (the reason it would not run, or `failed` with `error`)."),
            ("Cm result", "The outcome: `status` is `completed`, `partial` (a restore with files pending or a group not placed; a sync that left files behind, exit status 1), `unavailable` (with `reason`) or `failed` (with `error` and `message`; for exit status 2, `error` is `usage`, or `wrongPassphrase`, `missingPassphrase` or `encryptionMismatch` for an encrypted remote, see ENCRYPTED REMOTES)."),
        ], width: "conflict")
        page.text("The other keys of `result`, by command:")
        page.tagList([
            ("Cm sync", "`profile`, `files`, `hashed`; when completed, `uploaded` (files, the marker not counted), `marker_uploaded`, `deleted`, `bytes` (sent, the marker's included), `marker_bytes` (the marker's), `unchanged`, `metadata_updated` (files whose mode, times or owner alone changed: recorded, not uploaded), `symlinks`, `folders`, `delete_failures` (objects with `path`, `error` and `message`, retried next run), `unreadable` (paths not uploaded), `versions` (what the run kept: `run`, `replaced`, `deleted`, `bytes`, `marker`; absent when it kept nothing), `keep_failures` (files neither replaced nor deleted because their old version could not be kept: `path`, `deleting`, `error`, `message`) and `pruned` (the runs' folders retention removed); with `--dry-run`, `dry_run`, `would_upload`, `would_delete` and `bytes`; when failed, `uploaded` too; when a write hold set while it ran stopped it (reason `writeHeld`), `uploaded`, `deleted` and `bytes`, what it wrote before the stop."),
            ("Cm restore", "`target`, `placed`, `pending` (a count), `bytes` (received), `pending_paths`, `refused` (remote paths that would land outside the target); `group` when a required group was not placed (reason `placementRejected`); `error` is `local` for a failure on this machine, `hashMismatch`, `sizeMismatch` or `refusedPath` when a required file failed a check, and `damaged` when the marker did; with `--abandon`, `abandoned` (files no longer kept) and `would_delete` (those the next sync deletes)."),
            ("Cm probe", "`profile`, `encrypted`; when completed, `probe` is `none` (an empty remote), `notReady` (files but no readable marker) or `found`, with `files`, `bytes`, `groups` (`name`, `required`) and `fingerprint`; an encrypted remote probed without its passphrase gives `found` with `locked` and `remote_files` (the encrypted files) only."),
            ("Cm verify", "`files` (in the marker), `checked` and `checked_bytes` (read and checked), `without_hash` (read, but the marker gives no SHA-256: only the size was checked), `damaged` (objects with `path`, `error` — `missing`, `sizeMismatch`, `hashMismatch` or, on an encrypted remote, `undecryptable` — and `message`), `extra` (paths the marker does not name) and, for `--read-data=PERCENT`, `share` (`from` and `to`, of 100 buckets); `status` is `damaged` (exit status 5) when `damaged` is not empty."),
            ("Cm versions", "`runs`, each with `run` (its folder's name), `time` (ISO 8601, UTC), `files` and `bytes` (kept), `marker` (whether it kept the marker it replaced), and `replaced` and `deleted` where its record says; with PATH, `path`, `versions` (`run`, `time`, `size`) and `current` (`size`, or null when the backup does not hold it now)."),
        ], width: "restore")
        let reasons = [
            ("noAccount", "credentials are missing"),
            ("needsConsent", "the first sync to this remote needs `--yes`"),
            ("restorePending", "the empty guard"),
            ("shrinkSuspected", "the shrink guard"),
            ("changeSuspected", "the change guard"),
            ("remoteMissing", "the remote-missing guard: a remote synced before no longer holds its marker"),
            ("otherWriter", "the writer guard: the remote's marker names another writer (the `writer` key of the sync result)"),
            ("writeHeld", "the hold"),
            ("sourceChanged", "a new backup was written since the restore started"),
            ("sourceUnavailable", "the backup a resumed restore came from is gone"),
            ("notReady", "files but no readable marker, as while a sync runs"),
            ("notAvailable", "the remote is not there"),
            ("none", "the remote holds nothing to restore"),
        ]
        page.text("The `reason` of an unavailable result: " + reasons.map { "`\($0.0)` (\($0.1))" }.joined(separator: ", ")
            + ". The `error` of a failed result is one of the kinds under DIAGNOSTICS.")
        page.macro("Pp")
        page.paragraphs("""
            When a command cannot run at all (a usage or config error, a busy profile, an interruption), the \
            result is `{"event":"result","status":"error","exit":2,"message":"..."}`, with `status` \
            `interrupted` after SIGINT or SIGTERM.

            A file name that is not valid UTF-8 is shown with each invalid byte written as \
            \u{201B} and two hex digits; a path key then has a twin with `_base64` added (`path_base64`, \
            `target_base64`) holding the name's exact bytes, and a list of paths (`would_upload`, \
            `would_delete`, `refused`, `pending_paths`) has a twin object mapping each such path to its bytes.
            """)
    }

    static func environment(_ page: inout Mdoc) {
        page.macro("Sh ENVIRONMENT")
        page.tagList([
            ("Ev XDG_CONFIG_HOME", "The folder of the config file, `backup/config` below it (default `~/.config`). A relative value is ignored."),
            ("Ev XDG_STATE_HOME", "The folder of each profile's state, `backup/PROFILE/` below it (default `~/.local/state`). A relative value is ignored."),
            ("Ev BACKUP_PASSWORD", "The WebDAV password, or for SFTP the passphrase of `identity_file` (the account's password when no key file is set); the profile's `password_command` is used when it is not set."),
            ("Ev SSH_AUTH_SOCK", "The ssh-agent whose keys an SFTP login tries first."),
            ("Ev AWS_ACCESS_KEY_ID , Ev AWS_SECRET_ACCESS_KEY", "The S3 keys."),
            ("Ev AWS_SESSION_TOKEN", "The session token of temporary S3 keys."),
            ("Ev AWS_ENDPOINT_URL", "The S3 endpoint, when the profile has no `endpoint` key (`AWS_ENDPOINT_URL_S3` wins over it)."),
            ("Ev AWS_REGION", "The S3 region, when the profile has no `region` key (`AWS_DEFAULT_REGION` is read when it is not set)."),
            ("Ev BACKUP_CRYPT_PASSWORD", "The passphrase of an encrypted profile; the profile's `crypt_password_command` is used when it is not set, and a terminal prompt when neither is."),
            ("Ev BACKUP_CRYPT_PASSWORD2", "The second passphrase (rclone's `password2`) of an encrypted profile, if it has one; else `crypt_password2_command`."),
            ("Ev NO_COLOR", "When set and not empty, the full-screen interface draws without colour."),
            ("Ev BACKUP_SCHEDULED", "Set to 1 by the service of `backup schedule`: the run is scripted whatever it is attached to (no interface, no prompt), and prints one line per event, never a progress line each second."),
            ("Ev JOURNAL_STREAM", "Set by systemd when standard error goes to the journal: each line then starts with its priority (`<3>` an error or a run that did not complete, `<4>` a warning, `<5>` a note, `<6>` the rest), which journald reads."),
        ], width: "XDG_CONFIG_HOME")
    }

    static func files(_ page: inout Mdoc) {
        page.macro("Sh FILES")
        page.tagList([
            ("Pa ~/.config/backup/config", "The config file (mode 0600)."),
            ("Pa ~/.config/backup/known_hosts", "The SFTP host keys trusted with `--accept-host-key` (mode 0600), in OpenSSH's format."),
            ("Pa ~/.ssh/known_hosts", "OpenSSH's host keys, trusted for SFTP too; never written."),
            ("Pa ~/.config/backup/ Ns Ar PROFILE Ns Pa .env", "Variables a scheduled run of the profile gets (NAME=value lines, read by its service when the file exists): credentials the timer has no other way to get. Keep it mode 0600."),
            ("Pa ~/.config/systemd/user/backup@.service , Pa backup@.timer", "The template units of `backup schedule`, when no package installed them in /usr/lib/systemd/user."),
            ("Pa ~/.config/systemd/user/backup@ Ns Ar NAME Ns Pa .timer.d/schedule.conf", "A profile's interval; `backup@NAME.service.d/schedule.conf` beside it pins its config and state folders."),
            ("Pa ~/.local/state/backup/ Ns Ar PROFILE Ns Pa /sync.db", "The sync state: what the remote holds, the fingerprint cache, the consent and the hold (SQLite)."),
            ("Pa ~/.local/state/backup/ Ns Ar PROFILE Ns Pa /sync.db-puts", "While a sync uploads: each upload it recorded, one record a file, folded into sync.db every few thousand uploads, at least once a second and when the uploads end. One left by a killed sync holds what it uploaded last; the next sync folds it in. Removed by `backup forget` with the rest."),
            ("Pa ~/.local/state/backup/ Ns Ar PROFILE Ns Pa /restore.db", "The record of the last restore, for `--resume`."),
            ("Pa ~/.local/state/backup/ Ns Ar PROFILE Ns Pa /restore.db-steps", "While a restore downloads: each verified download, folded into restore.db as sync.db-puts is into sync.db; `--resume` folds one a killed restore left."),
            ("Pa ~/.local/state/backup/ Ns Ar PROFILE Ns Pa /lock", "Keeps two runs of the profile apart; holds the running process's id."),
            ("Pa ~/.local/state/backup/restore- Ns Ar ID Ns Pa /restore.db", "The record of a restore with `--remote` and no profile, one per target folder."),
            ("Ar SOURCE Ns Pa /.backupignore", "Exclude patterns kept with the source."),
            ("Ar REMOTE Ns Pa /.backup-marker", "The marker: the writer id of the profile that wrote it, the groups and every hashed file's SHA-256, written last by each sync."),
            ("Ar REMOTE Ns Pa /.backup-volume-id", "A folder remote's identity, created by the first sync that writes to it."),
            ("Ar TARGET Ns Pa /.backup-staging", "Where a restore's downloads wait to be placed."),
        ])
    }

    static func exitStatus(_ page: inout Mdoc) {
        page.macro("Sh EXIT STATUS")
        page.tagList(ExitStatus.allCases.map { (head: "\($0.rawValue)", body: meaning($0)) }, width: "130")
    }

    /// What an exit status tells a script; a switch, so a new status cannot go undocumented.
    static func meaning(_ status: ExitStatus) -> String {
        switch status {
        case .success: "Completed."
        case .failure: "Failed: the remote or this machine failed (see DIAGNOSTICS), or a sync finished but left files behind (a file it could not read, a name the remote cannot hold, a delete or a version that failed: each named). What finished is recorded, and the next run continues from there."
        case .usage: "A usage or config error: a wrong option, a mistake in the config file, an unknown profile. Nothing was touched."
        case .unavailable: "Unavailable: missing credentials, consent not given, a guard, the hold, a backup changed under a resumed restore, or another run using the profile. Nothing was written."
        case .incomplete: "The restore is incomplete: files are pending or a group was not placed. Run `backup restore --resume`."
        case .damaged: "The remote's data failed a check: a hash or size mismatch, a refused name, a damaged marker. Everything else was restored; the files named were not placed."
        case .interrupted: "Interrupted by SIGINT or SIGTERM. The state and the restore record are saved; the next run continues."
        }
    }

    static func examples(_ page: inout Mdoc) {
        page.macro("Sh EXAMPLES")
        page.text("The first backup of your home folder to a mounted disk, then every later one:")
        page.literal("""
            $ backup init --source ~ --remote /mnt/backup/home \\
                --group papers=Documents/,required --exclude .cache/
            $ backup sync --yes
            $ backup sync
            """)
        page.text("Restore the backup into a new folder, to look at it or copy files back:")
        page.literal("$ backup restore --to ~/restored")
        page.text("A sync every night at 02:30 from cron(8); cron mails what it prints, and the exit status tells a wrapper what happened:")
        page.literal("30 2 * * * /usr/local/bin/backup sync --profile default")
        page.text("The same with a systemd user timer, written and enabled by `backup schedule` (a guard or the hold makes the service fail with exit status 3, so it shows in `systemctl --user --failed`; its lines are in the journal):")
        page.literal("""
            $ backup schedule --profile default --every daily
            $ journalctl --user -u 'backup@default.service'
            $ backup schedule --profile default --off
            """)
        page.text("Restore to a new machine from the remote alone, with no profile:")
        page.literal("""
            $ export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...
            $ backup restore --remote s3://alice-photos/laptop --to ~/Photos
            """)
        page.text("Or create the profile first and restore into its source, so the next sync uploads nothing again:")
        page.literal("""
            $ mkdir ~/Documents
            $ backup init --profile docs --source ~/Documents \\
                --remote webdavs://alice@cloud.example.org/backup
            $ BACKUP_PASSWORD=... backup restore --profile docs
            $ BACKUP_PASSWORD=... backup sync --profile docs --yes
            """)
        page.text("Stop every write while something is wrong, and let syncs go on later:")
        page.literal("""
            $ backup hold set "files look encrypted, checking"
            $ backup hold clear
            """)
        page.text("In a script, the result line of a sync:")
        page.literal("$ backup sync --json | jq -c 'select(.event == \"result\")'")
    }

    static func diagnostics(_ page: inout Mdoc) {
        page.macro("Sh DIAGNOSTICS")
        page.paragraphs("""
            Messages go to standard error, start with `backup:`, and say what happened, which file, key, \
            server or path was involved, and what to do.

            Every failure of a remote maps onto one kind, the same for each provider; the kind is the `error` \
            of a failed JSON result. Throttling (HTTP 429 or 503) is retried three times, waiting as \
            `Retry-After` says (ten seconds at most); a dropped connection, a stalled transfer and HTTP 500, \
            502 and 504 are retried too, for requests that can be repeated.
            """)
        page.macro("Bl -tag -width Ds")
        for kind in CloudError.Kind.allCases {
            guard let row = mapping(kind) else { continue }
            page.macro("It Cm \(Words.key(kind))")
            page.text(row.situation.sentence)
            page.macro("Bl -tag -width WebDAV: -compact")
            for (provider, cause) in [("folder:", row.folder), ("WebDAV:", row.webdav), ("S3:", row.s3), ("SFTP:", row.sftp)] {
                page.macro("It \(provider)")
                page.text(cause)
            }
            page.macro("El")
        }
        page.macro("El")
    }

    /// The error mapping of DESIGN.md, as the providers implement it; a switch, so a new kind
    /// cannot go undocumented. Nil for a kind no provider returns.
    static func mapping(_ kind: CloudError.Kind) -> (situation: String, folder: String, webdav: String, s3: String, sftp: String)? {
        switch kind {
        case .storageFull:
            ("out of space or over quota",
             "ENOSPC, EDQUOT",
             "HTTP 507",
             "`QuotaExceeded`, `StorageFull`, HTTP 507",
             "a write that fails while the server's file system has less than 1 MiB free (statvfs@openssh.com)")
        case .authRevoked:
            ("the credentials were refused",
             "does not occur (permissions are `transport`)",
             "HTTP 401 (after running `password_command` once more), HTTP 403",
             "HTTP 401, HTTP 403 (`AccessDenied`, `InvalidAccessKeyId`, `SignatureDoesNotMatch`, ...)",
             "the login refused (agent, key, passphrase or password), or the host key unknown or changed")
        case .offline:
            ("the remote cannot be reached",
             "does not occur",
             "connection refused, host not found, connect timeout, TLS certificate refused or bad `ca_file`",
             "the same",
             "connection refused, host not found, connect timeout")
        case .notFound:
            ("a file to read is absent (a delete of an absent file succeeds)",
             "ENOENT",
             "HTTP 404",
             "HTTP 404 (`NoSuchKey`)",
             "no such file")
        case .notAvailable:
            ("the remote itself is missing: an unmounted disk, a missing folder or bucket",
             "the folder does not exist or is not a folder",
             "HTTP 404, 405 or 409 on the folder",
             "`NoSuchBucket`",
             "the folder does not exist or is not a folder")
        case .transport:
            ("anything else, including throttling that outlasts its retries",
             "EACCES, EPERM, EROFS and any other errno",
             "HTTP 429 or 503 after three retries, other statuses, a dropped or stalled connection",
             "the same as WebDAV, `SlowDown`, `RequestTimeTooSkewed` (a wrong clock), a bucket in another region",
             "any other status (permission denied, a file in the way), a dropped or stalled connection")
        case .needsConsent:
            nil
        }
    }

    static func seeAlso(_ page: inout Mdoc) {
        page.macro("Sh SEE ALSO")
        // Not .Xr: mandoc -Tlint reports a referenced page that is not installed, and container
        // images ship without manual pages.
        page.tagList([
            ("Sy rsync Pq Lk https://rsync.samba.org/", "Copies and mirrors trees fast; nothing stops it from mirroring an emptied source."),
            ("Sy rclone Pq Lk https://rclone.org/", "Syncs to and from dozens of cloud services; the same INI-style config and the same plain files on the remote."),
            ("Sy restic Pq Lk https://restic.net/", "Encrypted, deduplicated snapshots; the backup is readable only through restic."),
        ])
    }
}

// MARK: - Completion scripts

/// Words quoted for the scripts, so help text with quotes or `$` stays literal.
enum ShellQuote {
    /// A POSIX single-quoted word (bash, zsh).
    static func posix(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// A fish single-quoted word.
    static func fish(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }

    /// The first sentence of a help text, without its period: what fits a completion menu.
    static func short(_ help: String) -> String {
        var text = help
        if let end = text.range(of: ". ") { text = String(text[..<end.lowerBound]) }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }
}

/// The bash script: tables made from the tree (subcommands, options, value kinds per command
/// path), and a fixed walker that finds the command path in the words typed so far.
enum BashCompletion {
    static func script() -> String {
        let entries = CommandTree.entries
        var lines: [String] = [
            "# bash completion for backup(1)",
            "# Generated by `backup generate-completions bash` from the command tree; do not edit.",
            "# Installed as $PREFIX/share/bash-completion/completions/backup.",
            "",
            "# The commands that follow the command path $1 (\"\" for backup itself, \"hold\", ...).",
            "_backup_subcommands() {",
            "    case $1 in",
        ]
        for entry in entries where !entry.subcommands.isEmpty {
            lines.append("        \(ShellQuote.posix(entry.key))) echo \(ShellQuote.posix(entry.subcommands.map(\.name).joined(separator: " "))) ;;")
        }
        lines += [
            "    esac",
            "}",
            "",
            "# The options of the command at path $1.",
            "_backup_options() {",
            "    case $1 in",
        ]
        for entry in entries {
            lines.append("        \(ShellQuote.posix(entry.key))) echo \(ShellQuote.posix(entry.options.map { "--" + $0.name }.joined(separator: " "))) ;;")
        }
        lines += [
            "    esac",
            "}",
            "",
            "# What option $2 takes at path $1: choice:WORDS, directory, file, profile or text;",
            "# nothing for a flag.",
            "_backup_value() {",
            "    case \"$1:$2\" in",
        ]
        for entry in entries {
            for option in entry.spec.options {
                guard let kind = option.value.completionKind else { continue }
                lines.append("        \(ShellQuote.posix(entry.key + ":--" + option.name))) echo \(ShellQuote.posix(kind)) ;;")
            }
        }
        for option in CommandTree.globalOptions {
            guard let kind = option.value.completionKind else { continue }
            lines.append("        *:--\(option.name)) echo \(ShellQuote.posix(kind)) ;;")
        }
        lines += [
            "    esac",
            "}",
        ]
        return lines.joined(separator: "\n") + "\n" + walker
    }

    static let walker = #"""

        # The profile names: the section headers of the config file (--config FILE when given,
        # else $XDG_CONFIG_HOME/backup/config, default ~/.config/backup/config).
        _backup_profile_names() {
            local config="" i line
            for ((i = 1; i < cword; i++)); do
                case ${words[i]} in
                    --config) config=${words[i + 1]} ;;
                    --config=*) config=${words[i]#--config=} ;;
                esac
            done
            if [[ -z $config ]]; then
                local base=${XDG_CONFIG_HOME-}
                [[ $base == /* ]] || base=$HOME/.config
                config=$base/backup/config
            fi
            [[ $config == "~/"* ]] && config=$HOME/${config#"~/"}
            [[ -r $config ]] || return 0
            local header='^[[:space:]]*\[[[:space:]]*([^][:space:]]+)[[:space:]]*\][[:space:]]*$'
            while IFS= read -r line || [[ -n $line ]]; do
                [[ $line =~ $header ]] && printf '%s\n' "${BASH_REMATCH[1]}"
            done <"$config"
        }

        # Offers a value of kind $1 (see _backup_value) for the word at the cursor.
        _backup_complete_value() {
            local IFS=$' \t\n'
            case $1 in
                choice:*) COMPREPLY=($(compgen -W "${1#choice:}" -- "$cur")) ;;
                profile) COMPREPLY=($(compgen -W "$(_backup_profile_names)" -- "$cur")) ;;
                directory)
                    if declare -F _filedir >/dev/null; then
                        _filedir -d
                    else
                        compopt -o filenames 2>/dev/null
                        IFS=$'\n'
                        COMPREPLY=($(compgen -d -- "$cur"))
                    fi
                    ;;
                file)
                    if declare -F _filedir >/dev/null; then
                        _filedir
                    else
                        compopt -o filenames 2>/dev/null
                        IFS=$'\n'
                        COMPREPLY=($(compgen -f -- "$cur"))
                    fi
                    ;;
            esac
        }

        _backup() {
            local cur prev words cword split=false
            if declare -F _init_completion >/dev/null; then
                _init_completion -s || return
            else
                # Without bash-completion: the words of the line up to the cursor.
                local line=${COMP_LINE:0:COMP_POINT}
                read -ra words <<<"$line"
                [[ $line == *[[:space:]] || ${#words[@]} -eq 0 ]] && words+=("")
                cword=$((${#words[@]} - 1))
                ((cword > 0)) || return 0
                cur=${words[cword]}
                prev=${words[cword - 1]}
                if [[ $cur == --*=* ]]; then
                    prev=${cur%%=*} cur=${cur#*=} split=true
                fi
            fi

            # Walk the words before the cursor: command words deepen the path, an option that
            # takes a value skips it, anything else is an argument.
            local path="" word i skip=false arguments=0
            for ((i = 1; i < cword; i++)); do
                word=${words[i]}
                if $skip; then
                    skip=false
                    continue
                fi
                case $word in
                    --*=* | -) ;;
                    --*) [[ -n $(_backup_value "$path" "$word") ]] && skip=true ;;
                    -*) ;;
                    *)
                        if ((arguments == 0)) && [[ " $(_backup_subcommands "$path") " == *" $word "* ]]; then
                            path=${path:+$path }$word
                        else
                            arguments=$((arguments + 1))
                        fi
                        ;;
                esac
            done

            if $split; then
                _backup_complete_value "$(_backup_value "$path" "$prev")"
            elif $skip; then
                _backup_complete_value "$(_backup_value "$path" "${words[cword - 1]}")"
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$(_backup_options "$path")" -- "$cur"))
            elif ((arguments == 0)); then
                COMPREPLY=($(compgen -W "$(_backup_subcommands "$path")" -- "$cur"))
            fi
            return 0
        }

        complete -F _backup backup
        """#
}

/// The zsh script: one `_arguments` function per command, made from the tree.
enum ZshCompletion {
    static func script() -> String {
        var lines: [String] = [
            "#compdef backup",
            "# zsh completion for backup(1)",
            "# Generated by `backup generate-completions zsh` from the command tree; do not edit.",
            "# Installed as $PREFIX/share/zsh/site-functions/_backup.",
            profiles,
        ]
        for entry in CommandTree.entries {
            lines.append("")
            lines += function(entry)
        }
        lines += ["", "_backup \"$@\""]
        return lines.joined(separator: "\n")
    }

    static func functionName(_ entry: CommandEntry) -> String {
        (["_backup"] + entry.path).joined(separator: "_").replacingOccurrences(of: "-", with: "_")
    }

    /// `_arguments` text: `\`, `:` and, inside a `[description]`, the brackets escaped.
    static func escape(_ text: String, brackets: Bool = false) -> String {
        var out = ""
        for character in text {
            if "\\:".contains(character) || (brackets && "[]".contains(character)) { out.append("\\") }
            out.append(character)
        }
        return out
    }

    static func spec(_ option: OptionSpec) -> String {
        let help = escape(ShellQuote.short(option.help), brackets: true)
        let prefix = option.repeatable ? "*" : ""
        guard let placeholder = option.value.placeholder, option.value.completionKind != nil else {
            return ShellQuote.posix("\(prefix)--\(option.name)[\(help)]")
        }
        let action: String
        switch option.value {
        case .none, .text, .optional: action = " "
        case .choice(let words): action = "(" + words.joined(separator: " ") + ")"
        case .directory, .remote: action = "_files -/"
        case .file: action = "_files"
        case .profile: action = "_backup_profile_names"
        }
        return ShellQuote.posix("\(prefix)--\(option.name)=[\(help)]:\(escape(placeholder)):\(action)")
    }

    static func function(_ entry: CommandEntry) -> [String] {
        var specs = entry.options.map(spec)
        for argument in entry.spec.arguments {
            specs.append(ShellQuote.posix("\(argument.optional ? "::" : ":")\(escape(argument.name)): "))
        }
        let name = functionName(entry)
        let context = entry.path.isEmpty ? "backup" : "backup-" + entry.path.joined(separator: "-")
        guard !entry.subcommands.isEmpty else {
            return ["\(name)() {", "  _arguments -S \\"] + specs.map { "    \($0) \\" } + ["    && return 0", "  return 1", "}"]
        }
        var lines = [
            "\(name)() {",
            "  local curcontext=$curcontext state state_descr line ret=1",
            "  typeset -A opt_args",
        ]
        if entry.path.isEmpty {
            // Every word of the line, before `*::` narrows $words, for _backup_profile_names.
            lines.append("  local -a _backup_words")
            lines.append("  _backup_words=(\"${words[@]}\")")
        }
        lines.append("  _arguments -C -S \\")
        lines += specs.map { "    \($0) \\" }
        lines += [
            "    '1: :->command' \\",
            "    '*:: :->argument' && ret=0",
            "  case $state in",
            "    (command)",
            "      local -a commands",
            "      commands=(",
        ]
        lines += entry.subcommands.map { "        " + ShellQuote.posix(escape($0.name) + ":" + $0.summary) }
        lines += [
            "      )",
            "      _describe -t commands \(ShellQuote.posix(entry.name + " command")) commands && ret=0",
            "      ;;",
            "    (argument)",
            "      curcontext=${curcontext%:*:*}:\(context)-$words[1]:",
            "      case $words[1] in",
        ]
        for sub in entry.subcommands {
            let child = CommandEntry(path: entry.path + [sub.name], spec: sub)
            lines.append("        (\(sub.name)) \(functionName(child)) && ret=0 ;;")
        }
        lines += [
            "      esac",
            "      ;;",
            "  esac",
            "  return ret",
            "}",
        ]
        return lines
    }

    static let profiles = #"""

        # The profile names: the section headers of the config file (--config FILE when given,
        # else $XDG_CONFIG_HOME/backup/config, default ~/.config/backup/config).
        (( $+functions[_backup_profile_names] )) ||
        _backup_profile_names() {
          local config line i base
          local -a profiles
          for (( i = 1; i < $#_backup_words; i++ )); do
            case $_backup_words[i] in
              (--config) config=$_backup_words[i+1] ;;
              (--config=*) config=${_backup_words[i]#--config=} ;;
            esac
          done
          if [[ -z $config ]]; then
            base=$XDG_CONFIG_HOME
            [[ $base == /* ]] || base=$HOME/.config
            config=$base/backup/config
          fi
          [[ $config == '~/'* ]] && config=$HOME/${config#'~/'}
          if [[ -r $config ]]; then
            while IFS= read -r line || [[ -n $line ]]; do
              [[ $line =~ '^[[:space:]]*\[[[:space:]]*([^][:space:]]+)[[:space:]]*\][[:space:]]*$' ]] &&
                profiles+=($match[1])
            done <$config
          fi
          _wanted profiles expl 'profile' compadd -a profiles
        }
        """#
}

/// The fish script: `complete` lines made from the tree, guarded by the command path.
enum FishCompletion {
    static func script() -> String {
        let entries = CommandTree.entries
        var lines: [String] = [
            "# fish completion for backup(1)",
            "# Generated by `backup generate-completions fish` from the command tree; do not edit.",
            "# Installed as $PREFIX/share/fish/vendor_completions.d/backup.fish.",
            "",
            "# The commands that follow the command path $argv[1] (\"\" for backup itself).",
            "function __backup_subcommands",
            "    switch \"$argv[1]\"",
        ]
        for entry in entries where !entry.subcommands.isEmpty {
            lines.append("        case \(ShellQuote.fish(entry.key))")
            lines.append("            printf '%s\\n' \(entry.subcommands.map { ShellQuote.fish($0.name) }.joined(separator: " "))")
        }
        lines += [
            "    end",
            "end",
            "",
            "# Whether option $argv[2] takes a value at path $argv[1].",
            "function __backup_takes_value",
            "    switch \"$argv[1]:$argv[2]\"",
        ]
        var valued: [String] = []
        for entry in entries {
            for option in entry.spec.options where option.value != .none {
                valued.append(ShellQuote.fish(entry.key + ":--" + option.name))
            }
        }
        valued += CommandTree.globalOptions.filter { $0.value != .none }.map { ShellQuote.fish("*:--" + $0.name) }
        lines += [
            "        case \(valued.joined(separator: " "))",
            "            return 0",
            "    end",
            "    return 1",
            "end",
            walker,
        ]

        lines.append("complete -c backup -f")
        for option in CommandTree.globalOptions {
            lines.append(complete(option, condition: nil))
        }
        for entry in entries {
            for sub in entry.subcommands {
                lines.append("complete -c backup -n \(ShellQuote.fish("__backup_wants_command \"\(entry.key)\"")) -a \(ShellQuote.fish(sub.name)) -d \(ShellQuote.fish(sub.summary))")
            }
            for option in entry.spec.options {
                // Command words are plain words ([a-z-]), so double quotes inside need no escape.
                lines.append(complete(option, condition: "__backup_at \"\(entry.key)\""))
            }
        }
        return lines.joined(separator: "\n")
    }

    static func complete(_ option: OptionSpec, condition: String?) -> String {
        var line = "complete -c backup"
        if let condition { line += " -n " + ShellQuote.fish(condition) }
        line += " -l " + option.name
        switch option.value {
        case .none, .optional: break
        case .text: line += " -x"
        case .choice(let words): line += " -x -a " + ShellQuote.fish(words.joined(separator: " "))
        case .directory, .remote: line += " -x -a '(__fish_complete_directories)'"
        case .file: line += " -r -F"
        case .profile: line += " -x -a '(__backup_profile_names)'"
        }
        return line + " -d " + ShellQuote.fish(ShellQuote.short(option.help))
    }

    static let walker = #"""

        # "ARGUMENTS:PATH" for the words before the cursor: the command path typed so far
        # (option values skipped) and how many other arguments follow it.
        function __backup_state
            set -l tokens (commandline -opc)
            set -e tokens[1]
            set -l path ''
            set -l skip 0
            set -l arguments 0
            for token in $tokens
                if test $skip -eq 1
                    set skip 0
                    continue
                end
                switch $token
                    case '--*=*' -
                    case '--*'
                        __backup_takes_value "$path" $token; and set skip 1
                    case '-*'
                    case '*'
                        if test $arguments -eq 0; and contains -- $token (__backup_subcommands "$path")
                            set path (string trim -- "$path $token")
                        else
                            set arguments (math $arguments + 1)
                        end
                end
            end
            echo "$arguments:$path"
        end

        # Whether the command path typed so far is $argv[1].
        function __backup_at
            test (string replace -r -- '^[0-9]+:' '' (__backup_state)) = "$argv[1]"
        end

        # Whether a command word for path $argv[1] may come next.
        function __backup_wants_command
            test (__backup_state) = "0:$argv[1]"
        end

        # The profile names: the section headers of the config file (--config FILE when given,
        # else $XDG_CONFIG_HOME/backup/config, default ~/.config/backup/config).
        function __backup_profile_names
            set -l tokens (commandline -opc)
            set -l config
            for i in (seq (count $tokens))
                switch $tokens[$i]
                    case --config
                        test $i -lt (count $tokens); and set config $tokens[(math $i + 1)]
                    case '--config=*'
                        set config (string replace -- '--config=' '' $tokens[$i])
                end
            end
            if test -z "$config"
                set -l base "$XDG_CONFIG_HOME"
                string match -q -- '/*' "$base"; or set base "$HOME/.config"
                set config "$base/backup/config"
            end
            set config (string replace -r -- '^~/' "$HOME/" "$config")
            test -r "$config"; or return 0
            string match -r -g -- '^\s*\[\s*([^\]\s]+)\s*\]\s*$' <"$config"
        end

        """#
}
