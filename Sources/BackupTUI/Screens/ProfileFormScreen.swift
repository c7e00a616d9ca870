// A profile in full as a form, to create one or edit one: source, remote, the WebDAV user and
// password command, a password typed for this session only, the groups (required or not),
// excludes, size-compared and keep-remotely patterns, and transfers. Lists open in their own
// editor (Enter). Saving goes through BackupApp.initProfile, as `backup init` does (a new
// profile with no groups for a remote that holds a backup takes the backup's groups); the
// settings the form does not show (ca_file, region, endpoint, path_style) are kept.

import BackupApp
import BackupEngine
import BackupTerminal

final class ProfileFormScreen: Screen {
    enum Field: Int, CaseIterable {
        case name, source, remote, user, password, passwordCommand, groups, excludes, sizeCompared, keepRemotely, transfers
        case encrypt, passphrase, passphraseAgain, cryptCommand, save

        var label: String {
            switch self {
            case .name: "Profile"
            case .source: "Source"
            case .remote: "Remote"
            case .user: "User"
            case .password: "Password"
            case .passwordCommand: "Pw command"
            case .groups: "Groups"
            case .excludes: "Excluded"
            case .sizeCompared: "By size"
            case .keepRemotely: "Kept"
            case .transfers: "Transfers"
            case .encrypt: "Encrypt"
            case .passphrase: "Passphrase"
            case .passphraseAgain: "Again"
            case .cryptCommand: "Crypt cmd"
            case .save: ""
            }
        }

        var isList: Bool { [.groups, .excludes, .sizeCompared, .keepRemotely].contains(self) }
        var isText: Bool { !isList && self != .save }

        /// What the field is, for the row under the form and the list editor.
        var explanation: String {
            switch self {
            case .name: "The profile's name: letters, digits, \"-\", \"_\" and \".\"."
            case .source: "The folder to back up (~ is your home folder)."
            case .remote: "Where to: a folder path, webdav://[user@]host/path, webdavs://… or s3://bucket/prefix."
            case .user: "The WebDAV user, when the remote's URL names none."
            case .password: "The WebDAV password, kept in memory for this session only and never written; "
                + "for later sessions set BACKUP_PASSWORD or a password command."
            case .passwordCommand: "A command whose first line of output is the WebDAV password (pass show nas, secret-tool lookup …)."
            case .groups: "One pattern a row, as NAME=PATTERN, or NAME=PATTERN,required for a group restored first; "
                + "rows of one name add patterns to that group."
            case .excludes: "Gitignore-style patterns of paths never backed up, one a row."
            case .sizeCompared: "Patterns of paths compared by size only, never hashed (large media, disk images), one a row."
            case .keepRemotely: "Patterns of paths kept on the remote after they are deleted here, one a row."
            case .transfers: "How many uploads or downloads are in flight at once: 1 to 64 (empty: \(Profile.defaultTransfers))."
            case .encrypt: "yes: encrypt every name and content in rclone crypt's format, readable by rclone alone (only for a new, empty remote)."
            case .passphrase: "The encryption passphrase, kept in memory for this session only and never written; "
                + "a lost passphrase means a lost backup. For later sessions set BACKUP_CRYPT_PASSWORD or a pass command."
            case .passphraseAgain: "The same passphrase again, so that a typing mistake does not become the only key."
            case .cryptCommand: "A command whose first line of output is the encryption passphrase (pass show backup-key …)."
            case .save: "Enter saves the profile to the config file (mode 0600)."
            }
        }
    }

    private let context: Context
    /// The profile edited (nil: a new one).
    private let original: Profile?
    private let takenNames: [String]
    private var texts: [Field: TextField] = [:]
    private var lists: [Field: [String]] = [:]
    private(set) var focus: Field
    private var message: (String, Style)?
    private var top = 0

    init(context: Context, editing profile: Profile?, takenNames: [String]) {
        self.context = context
        original = profile
        self.takenNames = takenNames
        let settings = profile?.settings ?? [:]
        texts[.name] = TextField(profile?.name ?? (takenNames.contains("default") ? "" : "default"))
        texts[.source] = TextField(profile?.source ?? "")
        texts[.remote] = TextField(profile?.remote ?? "")
        texts[.user] = TextField(settings["user"] ?? "")
        texts[.password] = TextField(secret: true)
        texts[.passwordCommand] = TextField(settings["password_command"] ?? "")
        texts[.transfers] = TextField(settings["transfers"] ?? "")
        texts[.encrypt] = TextField(Encryption.isOn(settings) ? "yes" : "")
        texts[.passphrase] = TextField(secret: true)
        texts[.passphraseAgain] = TextField(secret: true)
        texts[.cryptCommand] = TextField(settings["crypt_password_command"] ?? "")
        lists[.groups] = ProfileGroup.specs(profile?.groups ?? [])
        lists[.excludes] = profile?.excludes ?? []
        lists[.sizeCompared] = profile?.sizeCompared ?? []
        lists[.keepRemotely] = profile?.keepRemotely ?? []
        focus = profile == nil ? .name : .source
    }

    var title: String { original.map { "edit profile \"\($0.name)\"" } ?? "new profile" }
    var keys: KeyMap { KeyMaps.profileForm }
    var typing: Bool { focus.isText }
    var hints: [Action] { [.submit, .nextField, .back, .help, .quit] }

    /// The fields that can take the focus: a profile's name is fixed once it exists (its state
    /// and lock are kept under it).
    private var fields: [Field] { Field.allCases.filter { $0 != .name || original == nil } }

    private func move(_ by: Int) {
        guard let index = fields.firstIndex(of: focus) else { return }
        focus = fields[min(max(index + by, 0), fields.count - 1)]
    }

    func handle(_ key: Key) -> Response {
        switch keys.action(for: key) {
        case .nextField:
            move(1)
            return .handled
        case .previousField:
            move(-1)
            return .handled
        case .submit:
            if focus == .save { return save() }
            if focus.isList { return .push(listEditor(focus)) }
            move(1)
            return .handled
        default:
            break
        }
        guard focus.isText, var field = texts[focus] else { return .ignored }
        let edited = field.handle(key)
        texts[focus] = field
        if edited { message = nil }
        return edited ? .handled : .ignored
    }

    private func listEditor(_ field: Field) -> ListEditScreen {
        let check: (String) -> String? = { entry in
            if Config.holdsControlCharacter(entry) { return "An entry cannot hold a control character (a tab, a line break)." }
            guard field == .groups else { return nil }
            do throws(AppError) {
                _ = try ProfileGroup.parse(specs: [entry], label: "group")
                return nil
            } catch {
                return error.message
            }
        }
        return ListEditScreen(name: field.label.lowercased() + " of the profile", explanation: field.explanation,
                              items: lists[field] ?? [], check: check) { [weak self] items in
            self?.lists[field] = items
            self?.message = nil
        }
    }

    private func value(_ field: Field) -> String { texts[field]?.value ?? "" }

    private func save() -> Response {
        let name = value(.name).isEmpty ? "default" : value(.name)
        func refuse(_ words: String, at field: Field) -> Response {
            message = (words, .bad)
            focus = field
            return .handled
        }
        guard Profile.isValidName(name) else {
            return refuse("\"\(name)\" is not a valid profile name: use letters, digits, \"-\", \"_\" and \".\"", at: .name)
        }
        if original == nil, takenNames.contains(name) {
            return refuse("A profile \"\(name)\" exists already: give this one another name, or edit that one (e on the list).", at: .name)
        }
        guard !value(.source).isEmpty else { return refuse("Name the folder to back up.", at: .source) }
        guard !value(.remote).isEmpty else { return refuse("Name where to back it up: a folder path, webdav://… or s3://…", at: .remote) }
        let transfers = value(.transfers)
        if !transfers.isEmpty, Int(transfers).map({ (1...64).contains($0) }) != true {
            return refuse("Transfers must be a number from 1 to 64, not \"\(transfers)\".", at: .transfers)
        }
        let encrypt = value(.encrypt).isEmpty ? false : Config.bool(value(.encrypt))
        guard let encrypt else { return refuse("Encrypt is yes or no, not \"\(value(.encrypt))\".", at: .encrypt) }
        let passphrase = value(.passphrase)
        guard passphrase == value(.passphraseAgain) else {
            return refuse("The two passphrases differ: type the same one twice.", at: .passphraseAgain)
        }
        var profile = original ?? Profile(name: name, source: "", remote: "")
        profile.source = BackupApp.absolute(value(.source))
        profile.remote = value(.remote)
        for (field, key) in [(Field.user, "user"), (.passwordCommand, "password_command"), (.transfers, "transfers"),
                             (.cryptCommand, "crypt_password_command")] {
            profile.settings[key] = value(field).isEmpty ? nil : value(field)
        }
        profile.settings["encrypt"] = encrypt ? "yes" : nil
        profile.excludes = lists[.excludes] ?? []
        profile.sizeCompared = lists[.sizeCompared] ?? []
        profile.keepRemotely = lists[.keepRemotely] ?? []
        let app = context.app
        let password = value(.password)
        do {
            profile.groups = try ProfileGroup.parse(specs: lists[.groups] ?? [], label: "group")
            // A password typed here opens the remote for this session: the remote is looked at
            // with it (a marker's groups), and the jobs use it.
            if !password.isEmpty { app.typedPasswords.set(password, for: profile.remote, settings: profile.settings) }
            if encrypt, !passphrase.isEmpty { app.typedPasswords.setPassphrase(passphrase, for: profile.remote) }
            let replacing = original != nil
            let draft = profile
            let (saved, notes) = try Context.waiting { () async throws(AppError) in
                try await app.initProfile(draft, replace: replacing, creatingRemote: false)
            }
            lists[.groups] = ProfileGroup.specs(saved.groups)
            message = ("Saved profile \"\(saved.name)\" to \(app.configPath)." + notes.map { " " + $0.prefix(1).uppercased() + $0.dropFirst() + "." }.joined()
                + " Esc goes back.", .good)
            return .handled
        } catch {
            message = (error.message, .bad)
            return .handled
        }
    }

    /// What a list field shows on its row.
    private func summary(_ field: Field) -> String {
        let items = lists[field] ?? []
        guard !items.isEmpty else { return "none (Enter adds)" }
        if field == .groups, let groups = try? ProfileGroup.parse(specs: items, label: "group") {
            return groups.map { "\($0.name)\($0.required ? " (required)" : ""): \($0.patterns.joined(separator: " "))" }.joined(separator: " · ")
        }
        return items.joined(separator: " · ")
    }

    func draw(_ canvas: Canvas) {
        let label = 12
        let width = max(canvas.columns - label - 3, 8)
        let first = canvas.body.lowerBound + (canvas.compact ? 0 : 1)
        // The rows under the form: what the focused field is, and what saving said.
        let below = canvas.compact ? 2 : 4
        let room = max(canvas.body.upperBound - first + 1 - below, 1)
        let all = Field.allCases
        let focusRow = all.firstIndex(of: focus) ?? 0
        // The form scrolls so that the focused field stays in view.
        if focusRow < top { top = focusRow }
        if focusRow >= top + room { top = focusRow - room + 1 }
        top = min(top, max(all.count - room, 0))
        var row = first
        for field in all.dropFirst(top).prefix(room) {
            let focused = focus == field
            if field == .save {
                canvas.text("[ Save ]", row: row, column: label + 1, style: focused ? .selection : .accent)
                if focused { canvas.terminal.placeCursor(row: row, column: label + 3) }
            } else {
                let fixed = field == .name && original != nil
                canvas.text(field.label, row: row, column: 1, width: label - 1, style: focused ? .accent : (fixed ? .dim : .normal))
                if field.isList {
                    canvas.text(summary(field), row: row, column: label + 1, width: width, style: focused ? .selection : .normal)
                    if focused { canvas.terminal.placeCursor(row: row, column: label + 1) }
                } else if fixed {
                    canvas.text(value(.name), row: row, column: label + 1, width: width, style: .dim)
                } else if let text = texts[field] {
                    text.draw(canvas, row: row, column: label + 1, width: width, focused: focused)
                }
            }
            row += 1
        }
        row = first + room + (canvas.compact ? 0 : 1)
        if let (words, style) = message {
            canvas.paragraph(words, row: row, maxRows: max(canvas.body.upperBound - row + 1, 1), style: style)
        } else {
            canvas.paragraph(focus.explanation + (focus.isList ? " Enter edits the list." : ""), row: row,
                             maxRows: max(canvas.body.upperBound - row + 1, 1), style: .dim)
        }
    }
}
