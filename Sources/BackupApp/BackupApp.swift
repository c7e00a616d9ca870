// The jobs both front ends run (the scripted command line and the TUI): each opens what it
// needs from a profile, runs the engine, and returns a summary; none of them prints.

import BackupEngine
import BackupStorage
import BackupTree
import Foundation

/// The tool's entry point for every job.
public struct BackupApp: Sendable {
    public var paths: AppPaths
    /// The config file in use (`--config`, else the default).
    public var configPath: String
    public var environment: [String: String]
    /// Passwords typed into the interface for this process (shared by every copy of the app).
    public let typedPasswords = TypedPasswords()
    /// How the front end asks for an encrypted remote's passphrase when neither the
    /// environment nor the profile gives it (a terminal prompt); nil: it cannot ask.
    public var askPassphrase: Encryption.Ask?
    /// `--accept-host-key`: the SFTP host key fingerprint the person checked and accepts for
    /// this command's remote (written to the tool's own known_hosts when it matches).
    public var acceptHostKey: String?

    public init(paths: AppPaths = AppPaths(), configPath: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.paths = paths
        self.configPath = configPath ?? paths.configFile
        self.environment = environment
    }

    /// Opens a remote with a profile's settings, the environment's credentials and any
    /// password typed for it in this process: the one way every job opens its remote.
    func openRemote(_ url: String, settings: [String: String], readOnly: Bool = false) throws(AppError) -> OpenedRemote {
        try Remotes.open(url, settings: settings, environment: environment, readOnly: readOnly,
                         typedPassword: typedPasswords.password(for: url, settings: settings), knownHosts: knownHosts)
    }

    /// Sets `acceptHostKey` (`--accept-host-key`), refusing what is not a SHA-256 fingerprint.
    public mutating func accept(hostKey fingerprint: String) throws(AppError) {
        guard KnownHosts.isFingerprint(fingerprint) else {
            throw AppError(.usage, "--accept-host-key \"\(TerminalText.visible(fingerprint))\": give the key's SHA-256 fingerprint "
                + "as ssh-keygen -lf prints it (SHA256: and 43 characters)")
        }
        acceptHostKey = fingerprint
    }

    /// Where SFTP host keys are checked: `~/.ssh/known_hosts`, then the tool's own file.
    var knownHosts: KnownHosts {
        KnownHosts.standard(home: environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory(),
                            configFolder: paths.configFolder, accept: acceptHostKey)
    }

    public func loadConfig() throws(AppError) -> Config {
        try Config.load(configPath)
    }

    /// The named profile, or a usage error saying how to create it.
    public func profile(_ name: String) throws(AppError) -> Profile {
        let config = try loadConfig()
        guard let profile = config.profile(name) else {
            let known = config.profiles.map(\.name)
            let hint = known.isEmpty ? "" : " (profiles in it: \(known.joined(separator: ", ")))"
            throw .usage("there is no profile \"\(name)\" in \(configPath)\(hint); create one with `backup init --profile \(name) --source DIR --remote URL`")
        }
        return profile
    }

    /// Opens the sync state of a profile, turning a damaged file into a clear failure.
    func openState(_ profile: Profile) throws(AppError) -> StateStore {
        do {
            return try StateStore(path: paths.syncState(profile: profile.name))
        } catch let error as StateStoreError {
            throw .failure(error.message)
        } catch {
            throw .failure("cannot open the state of profile \"\(profile.name)\": \(error)")
        }
    }

    // MARK: init

    /// Writes a profile as given: `initProfile(_:replace:creatingRemote:)` without looking at
    /// the remote at all (no groups taken from a marker there), so only a folder remote's last
    /// folder is created. For tests and tools that set every field themselves.
    public func initProfile(_ profile: Profile, replace: Bool) throws(AppError) -> Profile {
        let (checked, config) = try checkedProfile(profile, replace: replace)
        _ = try Self.createFolderRemote(checked.remote)
        var saving = config
        try saving.save(checked)
        return checked
    }

    /// `backup init`: checks the profile, creates the last folder of the remote path where it
    /// is missing, then writes the profile. One rule for every provider: a folder remote's last
    /// folder is created only when its parent exists (a missing parent is usually an unmounted
    /// disk); a WebDAV folder by MKCOL (its parent must exist); S3 never creates a bucket, and a
    /// prefix needs no folder. A sync never creates the remote folder. Returns the profile and
    /// the lines to show: where a folder was created (for a folder remote, the mount point of
    /// the filesystem it is on, so an unmounted disk shows), or why it could not be.
    ///
    /// A profile given no groups, for a remote that already holds a backup, takes that backup's
    /// groups from its marker: its first sync would otherwise write a marker without them,
    /// and a restore would no longer know which files are required.
    public func initProfile(_ profile: Profile, replace: Bool, creatingRemote: Bool) async throws(AppError) -> (profile: Profile, notes: [String]) {
        var (checked, config) = try checkedProfile(profile, replace: replace)
        var notes: [String] = []
        if let created = try Self.createFolderRemote(checked.remote) { notes.append(created) }
        if creatingRemote, let parsed = try? RemoteURL.parse(checked.remote), parsed.isServerFolder {
            let remote = try openRemote(checked.remote, settings: checked.settings)
            if let server = remote.storage as? CreatesRemoteFolder {
                do {
                    if try await server.createRemoteFolder() { notes.append("created the remote folder \(remote.displayURL)") }
                } catch let error as CloudError where error.kind == .authRevoked && parsed.isSFTP {
                    // An SSH server whose host key is not trusted (or that refuses the login) is
                    // refused here, saying how to trust it: a profile it cannot reach is no use.
                    throw AppError(.failure, error.message + "; the profile was not written", authRefused: true)
                } catch {
                    notes.append("could not create the remote folder \(remote.displayURL): \(AppError.from(error).message); "
                        + "the profile is written: create the folder on the server (or correct the URL) before the first sync")
                }
            } else if let reason = remote.unavailableBecause {
                notes.append("the remote folder was not created: \(reason); the first sync needs it to exist")
            }
        }
        // An encrypted profile's remote is opened once, its passphrase asked (twice for a new
        // backup) and checked against the key file, which a new backup gets now: a passphrase
        // mistyped here is refused at the first sync instead of starting a second backup.
        var opened: OpenedRemote?
        if Encryption.isOn(checked.settings) {
            let remote = try await openJobRemote(checked.remote, settings: checked.settings, readOnly: false, encrypted: true,
                                                 lockedAllowed: true, confirmNew: true)
            opened = remote
            if remote.locked {
                notes.append("no passphrase was given: the first sync asks for it (or set BACKUP_CRYPT_PASSWORD or crypt_password_command)")
            } else if let crypt = remote.storage as? CryptStorage {
                do {
                    if try await crypt.writeKeyFileIfMissing() { notes.append("wrote the key file \(CryptStorage.keyFileName) to \(remote.displayURL)") }
                } catch {
                    notes.append("could not write the key file to \(remote.displayURL) (\(AppError.from(error).message)); the first sync writes it")
                }
            }
            // Said first: of everything init says, the one thing that cannot be undone later.
            notes.insert("this backup is encrypted: its passphrase is kept nowhere by backup, and a lost passphrase means a lost "
                + "backup (nobody can decrypt it). Keep it where you keep your other passwords", at: 0)
        } else {
            // A remote that holds an encrypted backup is refused for a profile that is not.
            _ = try await openJobRemote(checked.remote, settings: checked.settings, readOnly: true, encrypted: false)
        }
        if checked.groups.isEmpty, let adopted = await markerGroups(checked, opened: opened) {
            switch adopted {
            case .success(let groups) where !groups.isEmpty:
                checked.groups = groups
                notes.append("took the groups of the backup on \(checked.remote) from its marker: "
                    + groups.map { $0.name + ($0.required ? " (required)" : "") }.joined(separator: ", ")
                    + "; name others with --group")
            case .success:
                break
            case .failure(let reason):
                notes.append("the backup on \(checked.remote) has groups this profile could not take (\(reason)); "
                    + "name them with --group, or its first sync writes a marker without them")
            }
        }
        var saving = config
        try saving.save(checked)
        return (checked, notes)
    }

    /// The groups of the backup already on `profile`'s remote, read from its marker (in their
    /// order); nil when the remote holds no readable marker, or cannot be read now. Everything
    /// in a marker is untrusted: a group whose name or patterns a profile could not hold is a
    /// failure that says which.
    func markerGroups(_ profile: Profile, opened: OpenedRemote? = nil) async -> Result<[ProfileGroup], MarkerGroupsRefused>? {
        guard let header = await markerHeader(profile, opened: opened) else { return nil }
        var groups: [ProfileGroup] = []
        for group in header.groups.sorted(by: { $0.order < $1.order }) {
            let shown = TerminalText.visible(group.name)
            guard Profile.isValidName(group.name), !group.patterns.isEmpty,
                  !group.patterns.contains(where: { $0.isEmpty || Config.holdsControlCharacter($0) }) else {
                return .failure(MarkerGroupsRefused(reason: "group \"\(shown)\" has a name or pattern a profile cannot hold"))
            }
            groups.append(ProfileGroup(name: group.name, patterns: group.patterns, required: group.required))
        }
        var trial = profile
        trial.groups = groups
        do {
            try Self.compilePatterns(trial)
        } catch {
            return .failure(MarkerGroupsRefused(reason: error.message))
        }
        return .success(groups)
    }

    /// The header (groups, writer) of the marker on `profile`'s remote, read by the probe; nil
    /// when the remote cannot be read now or holds no readable marker.
    private func markerHeader(_ profile: Profile, opened: OpenedRemote? = nil) async -> (groups: [MarkerGroup], writer: String?)? {
        let open: OpenedRemote? = if let opened { opened } else {
            try? await openJobRemote(profile.remote, settings: profile.settings, readOnly: true, encrypted: Encryption.isOn(profile.settings))
        }
        guard let remote = open, remote.availability == .available, !remote.locked else { return nil }
        guard case .found(let marker, _, let files) = await Probe(storage: remote.storage, availability: { .available }).run() else {
            return nil
        }
        let limit = Marker.contentLimit(listedFiles: files.count, markerSize: marker.count)
        return try? Marker.header(marker, maxContentSize: limit)
    }

    /// One group of a backup, as a restore can choose it (`RestoreRequest.only`).
    public struct BackupGroup: Sendable, Equatable {
        public var name: String
        public var required: Bool
    }

    /// The groups of the backup on `profile`'s remote, in restore order, with the group of the
    /// files no group claims last; nil when the remote holds no readable backup now (the
    /// restore then says what it found). Reads the marker only: nothing is downloaded.
    public func backupGroups(_ profile: Profile) async -> [BackupGroup]? {
        guard let header = await markerHeader(profile) else { return nil }
        let ordered = header.groups.sorted { ($0.required ? 0 : 1, $0.order) < ($1.required ? 0 : 1, $1.order) }
        return ordered.map { BackupGroup(name: $0.name, required: $0.required) }
            + [BackupGroup(name: RestorePlanner.otherFilesGroup, required: false)]
    }

    /// The profile as it will be saved, checked, and the config it goes into.
    private func checkedProfile(_ profile: Profile, replace: Bool) throws(AppError) -> (Profile, Config) {
        let config = try loadConfig()
        if config.profile(profile.name) != nil && !replace {
            throw .usage("profile \"\(profile.name)\" already exists in \(configPath); pass --force to replace it")
        }
        var profile = profile
        // A replaced profile keeps its writer id: its remote's marker names it.
        profile.writer = profile.writer ?? config.profile(profile.name)?.writer ?? Profile.makeWriterId(profile: profile.name)
        profile.source = Self.absolute(profile.source)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: profile.source, isDirectory: &isFolder), isFolder.boolValue else {
            throw .usage("the source folder \(profile.source) does not exist; create it or name another with --source")
        }
        if !profile.remote.contains("://") { profile.remote = Self.absolute(profile.remote) }
        _ = try openRemote(profile.remote, settings: profile.settings)
        try Self.compilePatterns(profile)
        return (profile, config)
    }

    /// Why a marker's groups were not taken.
    struct MarkerGroupsRefused: Error {
        let reason: String
    }

    /// Creates a folder remote's last folder when it is missing and its parent exists; nil
    /// when it exists already (or the remote is not a folder). A missing parent is refused:
    /// it is usually a disk that is not mounted.
    static func createFolderRemote(_ remote: String) throws(AppError) -> String? {
        guard case .folder(let folder)? = try? RemoteURL.parse(remote) else { return nil }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) {
            guard isFolder.boolValue else { throw .usage("the remote \(folder) is a file, not a folder; name a folder") }
            return nil
        }
        let parent = (folder as NSString).deletingLastPathComponent
        guard FileManager.default.fileExists(atPath: parent, isDirectory: &isFolder), isFolder.boolValue else {
            throw .usage("the remote folder \(folder) does not exist, and neither does its parent \(parent): is the disk "
                + "mounted? Mount it, or create the parent folder, then run init again")
        }
        if FileName.withCString(folder, { mkdir($0, 0o755) }) != 0 && errno != EEXIST {
            throw .usage("cannot create the remote folder \(folder): \(String(cString: strerror(errno)))")
        }
        let mount = mountPoint(of: folder)
        return "created the remote folder \(folder) on the filesystem mounted at \(mount)"
            + (mount == "/" ? " (the system disk: if the backup should go to another disk, that disk is not mounted)" : "")
    }

    /// The mount point of the filesystem `path` is on: the highest folder above it on the same
    /// device (st_dev), symbolic links resolved first.
    static func mountPoint(of path: String) -> String {
        var current = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        func device(_ path: String) -> dev_t? {
            var info = stat()
            return FileName.withCString(path, { stat($0, &info) }) == 0 ? info.st_dev : nil
        }
        guard let dev = device(current) else { return current }
        while current != "/" {
            let parent = (current as NSString).deletingLastPathComponent
            guard device(parent) == dev else { break }
            current = parent
        }
        return current
    }

    /// `path` made absolute: `~` is the home folder ($HOME), a relative path is below the
    /// current folder. The one rule for every path a person types, in the CLI and the TUI.
    public static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return (path as NSString).standardizingPath }
        if path == "~" || path.hasPrefix("~/") {
            // $HOME, as a shell has it (Foundation's expansion reads the password database).
            let environment = ProcessInfo.processInfo.environment["HOME"] ?? ""
            let home = environment.hasPrefix("/") ? environment : NSHomeDirectory()
            return ((home as NSString).appendingPathComponent(String(path.dropFirst())) as NSString).standardizingPath
        }
        return ((FileManager.default.currentDirectoryPath as NSString).appendingPathComponent(path) as NSString).standardizingPath
    }

    /// Every pattern of a profile, compiled, or a usage error naming the bad one.
    @discardableResult
    static func compilePatterns(_ profile: Profile) throws(AppError) -> (excludes: PatternList, sizeCompared: PatternList, keepRemotely: PatternList) {
        func compile(_ patterns: [String], _ key: String) throws(AppError) -> PatternList {
            do {
                return try PatternList(patterns)
            } catch {
                throw .usage("profile \"\(profile.name)\", key \"\(key)\": \(error.description)")
            }
        }
        for group in profile.groups { _ = try compile(group.patterns, "group.\(group.name)") }
        return (try compile(profile.excludes, "exclude"), try compile(profile.sizeCompared, "size_compared"),
                try compile(profile.keepRemotely, "keep_remotely"))
    }

    /// The writer id of `profile`, made when it has none (a profile written before there were
    /// writer ids): saved into its config section, or, for a profile that is not in the config
    /// file, kept in its state. With `persist` false (a dry run) nothing is saved.
    func writerId(_ profile: Profile, state: StateStore, persist: Bool) throws(AppError) -> String {
        if let writer = profile.writer { return writer }
        var config = try loadConfig()
        if var saved = config.profile(profile.name) {
            if let writer = saved.writer { return writer }
            let writer = Profile.makeWriterId(profile: profile.name)
            if persist {
                saved.writer = writer
                try config.save(saved)
            }
            return writer
        }
        do {
            if let writer = try state.meta(Self.writerKey) { return writer }
            let writer = Profile.makeWriterId(profile: profile.name)
            if persist { try state.setMeta(Self.writerKey, writer) }
            return writer
        } catch {
            throw AppError.from(error)
        }
    }

    // MARK: hold, forget

    /// The write hold of a profile.
    public func hold(_ profile: Profile) throws(AppError) -> WriteHold {
        do { return try openState(profile).hold() } catch { throw AppError.from(error) }
    }

    /// Sets or clears the write hold. It is read before every write of a running sync, so
    /// setting it from another terminal stops that sync before its next write.
    public func setHold(_ profile: Profile, _ hold: WriteHold) throws(AppError) {
        do { try openState(profile).setHold(hold) } catch { throw AppError.from(error) }
    }

    /// Drops the profile's local state (sync state, restore record); the remote is untouched.
    /// The write hold and the files kept for a restore into the source are not a cache of
    /// the remote: they are carried into the new state file.
    /// Deletes a profile: its section leaves the config file and its local state (the record
    /// of what is backed up, the restore record, the hold) goes. The remote is not touched. A
    /// profile a run is using is refused (the lock).
    public func deleteProfile(_ profile: Profile) throws(AppError) {
        let lock = try ProfileLock(path: paths.lockFile(profile: profile.name), profile: profile.name, wait: .zero)
        defer { lock.release() }
        var config = try loadConfig()
        guard config.profile(profile.name) != nil else { throw .usage("there is no profile \"\(profile.name)\" in \(configPath)") }
        try config.remove(profile.name)
        let folder = paths.stateFolder(profile: profile.name)
        do {
            try FileManager.default.removeItem(atPath: folder)
        } catch {
            throw .failure("profile \"\(profile.name)\" left the config, but its state in \(folder) could not be removed: "
                + "\(error.localizedDescription); remove the folder by hand")
        }
    }

    public func forget(_ profile: Profile) throws(AppError) -> [String] {
        let lock = try ProfileLock(path: paths.lockFile(profile: profile.name), profile: profile.name)
        defer { lock.release() }
        // A state that cannot be opened (damaged) has no hold to carry over. The old store is
        // closed before its files are removed (SQLite unlinks the WAL by name on close).
        let statePath = paths.syncState(profile: profile.name)
        let (hold, pending): (WriteHold, [String]) = {
            guard FileManager.default.fileExists(atPath: statePath), let old = try? StateStore(path: statePath) else { return (.none, []) }
            return ((try? old.hold()) ?? .none, (try? old.restorePending()) ?? [])
        }()
        var removed: [String] = []
        for base in [paths.syncState(profile: profile.name), paths.restoreRecord(profile: profile.name)] {
            let journals = [PutJournal.path(forState: base), RestoreRecord.stepsPath(forRecord: base)]
            for path in [base, base + "-wal", base + "-shm"] + journals where FileManager.default.fileExists(atPath: path) {
                do {
                    try FileManager.default.removeItem(atPath: path)
                    removed.append(path)
                } catch {
                    throw .failure("cannot remove \(path): \(error.localizedDescription)")
                }
            }
        }
        if hold != .none || !pending.isEmpty {
            do {
                let fresh = try StateStore(path: statePath)
                try fresh.setHold(hold)
                try fresh.addRestorePending(pending)
            } catch {
                throw .failure("forgot the state of \"\(profile.name)\" but could not keep its write hold in \(statePath): \(error); "
                    + "set it again with `backup hold set`")
            }
        }
        return removed
    }
}

extension BackupApp {
    /// What the state records of a profile: for `status`.
    public struct StateSummary: Sendable {
        public var lastSync: Date?
        /// Files the state says the remote holds.
        public var files: Int
        public var bytes: Int64
        public var hold: WriteHold
        /// How the last sync that ran (from any front end, a scheduled one too) ended.
        public var lastOutcome: LastOutcome?
    }

    public func stateSummary(_ profile: Profile) throws(AppError) -> StateSummary {
        do {
            let state = try openState(profile)
            let totals = try state.totals()
            return StateSummary(
                lastSync: try state.lastSync(), files: totals.files, bytes: totals.bytes, hold: try state.hold(),
                lastOutcome: (try state.meta(Self.lastOutcomeKey)).flatMap(LastOutcome.init(stored:)))
        } catch {
            throw AppError.from(error)
        }
    }

    /// What the probe of a profile's remote found, and whether the remote is encrypted.
    public struct ProbeReport: Sendable {
        public var outcome: ProbeOutcome
        public var encrypted: Bool
        /// Encrypted, and probed without the passphrase: `outcome` is what the plain names say
        /// (`.found` with the key file as its marker and every listed file), nothing was decrypted.
        public var locked: Bool
    }

    /// The probe of a profile's remote. An encrypted remote is probed without its passphrase
    /// when none is given: its plain key file says a backup is there.
    public func probe(_ profile: Profile) async throws(AppError) -> ProbeReport {
        let remote = try await openJobRemote(profile.remote, settings: profile.settings, readOnly: true,
                                             encrypted: Encryption.isOn(profile.settings), lockedAllowed: true)
        let availability = remote.availability
        let probe = Probe(storage: remote.storage, markerPath: remote.locked ? CryptStorage.keyFileName : SyncEngine.defaultMarkerPath,
                          availability: { availability })
        return ProbeReport(outcome: await probe.run(), encrypted: remote.encrypted, locked: remote.locked)
    }
}
