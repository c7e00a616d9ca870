// Where the tool keeps its files: the config under $XDG_CONFIG_HOME/backup/, each profile's
// state under $XDG_STATE_HOME/backup/<profile>/. Both variables are honoured, so tests and
// people can isolate a run.

import BackupEngine
import Foundation

/// The tool's folders, from the environment.
public struct AppPaths: Sendable, Equatable {
    /// `$XDG_CONFIG_HOME/backup` (default `~/.config/backup`).
    public var configFolder: String
    /// `$XDG_STATE_HOME/backup` (default `~/.local/state/backup`).
    public var stateFolder: String

    public init(configFolder: String, stateFolder: String) {
        self.configFolder = configFolder
        self.stateFolder = stateFolder
    }

    /// The folders the XDG Base Directory variables name, falling back to their defaults.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        func base(_ variable: String, _ fallback: String) -> String {
            // The spec says relative values are invalid and must be ignored.
            if let value = environment[variable], value.hasPrefix("/") { return value }
            return home + "/" + fallback
        }
        configFolder = base("XDG_CONFIG_HOME", ".config") + "/backup"
        stateFolder = base("XDG_STATE_HOME", ".local/state") + "/backup"
    }

    /// The default config file.
    public var configFile: String { configFolder + "/config" }

    /// The state folder of a profile.
    public func stateFolder(profile: String) -> String { stateFolder + "/" + profile }

    /// The sync state file of a profile.
    public func syncState(profile: String) -> String { stateFolder(profile: profile) + "/sync.db" }

    /// The restore record of a profile.
    public func restoreRecord(profile: String) -> String { stateFolder(profile: profile) + "/restore.db" }

    /// The lock file that keeps two runs of one profile apart.
    public func lockFile(profile: String) -> String { stateFolder(profile: profile) + "/lock" }

    /// The restore record of a restore without a profile, kept per target folder.
    public func restoreRecord(target: String) -> String {
        stateFolder + "/restore-" + String(SHA256Hasher.hex(Data(target.utf8)).prefix(16)) + "/restore.db"
    }
}
