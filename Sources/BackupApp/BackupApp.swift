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

    public init(paths: AppPaths = AppPaths(), configPath: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.paths = paths
        self.configPath = configPath ?? paths.configFile
        self.environment = environment
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

    /// Writes a profile (the `init` command). The source must be a folder; a folder remote
    /// must exist (it is never created: a missing one is usually an unmounted disk).
    public func initProfile(_ profile: Profile, replace: Bool) throws(AppError) -> Profile {
        var config = try loadConfig()
        if config.profile(profile.name) != nil && !replace {
            throw .usage("profile \"\(profile.name)\" already exists in \(configPath); pass --force to replace it")
        }
        var profile = profile
        profile.source = Self.absolute(profile.source)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: profile.source, isDirectory: &isFolder), isFolder.boolValue else {
            throw .usage("the source folder \(profile.source) does not exist; create it or name another with --source")
        }
        if !profile.remote.contains("://") { profile.remote = Self.absolute(profile.remote) }
        _ = try Remotes.open(profile.remote, settings: profile.settings, environment: environment)
        if case .folder(let folder) = try? RemoteURL.parse(profile.remote),
            !FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) || !isFolder.boolValue
        {
            throw .usage("the remote folder \(folder) does not exist; mount the disk or create the folder, then run init again")
        }
        try Self.compilePatterns(profile)
        try config.save(profile)
        return profile
    }

    static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return (path as NSString).standardizingPath }
        if path == "~" || path.hasPrefix("~/") { return (path as NSString).expandingTildeInPath }
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
            for path in [base, base + "-wal", base + "-shm"] where FileManager.default.fileExists(atPath: path) {
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
    }

    public func stateSummary(_ profile: Profile) throws(AppError) -> StateSummary {
        do {
            let state = try openState(profile)
            let entries = try state.entries()
            return StateSummary(
                lastSync: try state.lastSync(), files: entries.count, bytes: entries.values.reduce(0) { $0 + $1.size },
                hold: try state.hold())
        } catch {
            throw AppError.from(error)
        }
    }

    /// The probe of a profile's remote.
    public func probe(_ profile: Profile) async throws(AppError) -> ProbeOutcome {
        let remote = try Remotes.open(profile.remote, settings: profile.settings, environment: environment)
        let availability = remote.availability
        return await Probe(storage: remote.storage, availability: { availability }).run()
    }
}
