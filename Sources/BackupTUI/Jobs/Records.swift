// Reading what the home and resume screens show: each profile's state (last sync, counts,
// hold, an unfinished restore) and a restore record. Reads only: every write goes through
// the BackupApp jobs.

import BackupApp
import BackupEngine
import Foundation

/// One profile as the home screen lists it.
struct ProfileOverview: Sendable, Equatable {
    var profile: Profile
    var lastSync: Date?
    var files = 0
    var bytes: Int64 = 0
    var hold: WriteHold = .none
    /// How its last sync ended, whoever ran it.
    var lastOutcome: LastOutcome?
    /// A run of this profile holds its lock now (this process's, or another's: a cron job).
    var running = false
    /// The profile's restore record holds files not yet placed.
    var unfinishedRestore = false
    /// Why the state could not be read.
    var problem: String?

    /// The config's profiles with their state; a config that cannot be read is an error.
    static func load(_ app: BackupApp) throws(AppError) -> [ProfileOverview] {
        try app.loadConfig().profiles.map { profile in
            var overview = ProfileOverview(profile: profile)
            do throws(AppError) {
                let state = try app.stateSummary(profile)
                overview.lastSync = state.lastSync
                overview.files = state.files
                overview.bytes = state.bytes
                overview.hold = state.hold
                overview.lastOutcome = state.lastOutcome
            } catch {
                overview.problem = error.message
            }
            overview.running = ProfileLock.isHeld(path: app.paths.lockFile(profile: profile.name))
            if let record = try? RecordSnapshot.read(app.paths.restoreRecord(profile: profile.name)) {
                overview.unfinishedRestore = record.completedAt == nil && record.plan.filesPlaced < record.plan.filesTotal
            }
            return overview
        }
    }
}

/// A restore record as the resume screen shows it.
struct RecordSnapshot: Sendable {
    var plan: RestorePlanView
    var completedAt: Date?
    /// The folder the recorded restore goes into, as the record stores it.
    var target: String?

    /// The record at `path`; nil when there is none (no file, or no plan in it).
    static func read(_ path: String) throws(AppError) -> RecordSnapshot? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let record = try RestoreRecord(path: path)
            let files = try record.files()
            guard !files.isEmpty else { return nil }
            return RecordSnapshot(plan: RestorePlanView(files: files), completedAt: try record.completedAt(), target: try record.target())
        } catch let error as StateStoreError {
            throw AppError(.failure, error.message)
        } catch {
            throw AppError(.failure, "cannot read the restore record \(path): \(error)")
        }
    }
}
