// How a profile's last sync ended, kept in its state beside the last sync's time, so that
// whoever looks next (the TUI's profile list, `backup status`) sees a run that failed too,
// whichever front end ran it: a person at the TUI, a cron job, a systemd timer.

import BackupEngine
import Foundation

/// The outcome of the last sync that ran, in a few words.
public struct LastOutcome: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// It completed.
        case completed
        /// A guard, the gate or the hold kept it from writing (or stopped it).
        case unavailable
        /// It failed: the remote, the local side, the config.
        case failed
        /// It was stopped (Ctrl-C, a signal, quitting the TUI).
        case stopped
    }

    public var kind: Kind
    public var at: Date
    /// What happened, in the words the profile list shows ("3 files uploaded, 1 deleted").
    public var words: String

    public init(kind: Kind, at: Date, words: String) {
        self.kind = kind
        self.at = at
        self.words = words
    }

    /// The outcome of a sync that returned.
    public init(_ summary: SyncSummary, remote: String, at: Date = Date()) {
        self.at = at
        switch summary.result {
        case .ran(.completed(let report)):
            kind = .completed
            words = "\(FileCount.text(report.fileCount)) uploaded, \(report.deleted.count) deleted"
                + (report.sourceFailures.isEmpty ? "" : ", \(FileCount.text(report.sourceFailures.count)) could not be read")
                + (report.deleteFailures.isEmpty ? "" : ", \(report.deleteFailures.count) deletes failed")
        case .ran(.held(let reason, let report)):
            kind = .unavailable
            words = "stopped by the write hold (\(reason)) after \(FileCount.text(report.fileCount)) uploaded"
        case .ran(.unavailable(let reason)), .previewed(.unavailable(let reason)):
            kind = .unavailable
            words = Explanations.of(reason, remote: remote).what
        case .ran(.failed(let error, let report)):
            kind = .failed
            words = "\(error.message) (after \(FileCount.text(report.fileCount)) uploaded)"
        case .previewed(.failed(let error)):
            kind = .failed
            words = error.message
        case .previewed(.wouldRun):
            kind = .completed
            words = "previewed"
        }
    }

    /// The outcome of a sync that threw.
    public init(_ error: AppError, at: Date = Date()) {
        self.at = at
        kind = error.status == .interrupted ? .stopped : .failed
        words = error.message
    }

    /// "last attempt failed: …", "not synced: …", "completed: …", with its time where `date`
    /// formats one.
    public func sentence(date: (Date) -> String) -> String {
        switch kind {
        case .completed: "completed \(date(at)): \(words)"
        case .unavailable: "not synced \(date(at)): \(words)"
        case .failed: "last attempt failed \(date(at)): \(words)"
        case .stopped: "last attempt stopped \(date(at)): \(words)"
        }
    }


    // MARK: Stored

    /// As the state keeps it: "kind seconds words" on one line.
    var stored: String {
        "\(kind.rawValue) \(at.timeIntervalSince1970) " + words.replacingOccurrences(of: "\n", with: " ")
    }

    /// Read back from the state; nil for a value this version cannot read.
    init?(stored: String) {
        let parts = stored.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let kind = Kind(rawValue: String(parts[0])), let seconds = Double(parts[1]), seconds.isFinite else {
            return nil
        }
        self.kind = kind
        at = Date(timeIntervalSince1970: seconds)
        words = String(parts[2])
    }
}

extension BackupApp {
    /// The state's key for the last outcome.
    static let lastOutcomeKey = "lastOutcome"

    /// Keeps `outcome` as the profile's last (best effort: a state that cannot be opened is
    /// what the outcome itself reports).
    func recordOutcome(_ profile: Profile, _ outcome: LastOutcome) {
        guard let state = try? openState(profile) else { return }
        try? state.setMeta(Self.lastOutcomeKey, outcome.stored)
    }
}
