// The words for outcomes: stable keys for JSON, and for people a sentence that says what
// happened and what to do about it.

import BackupApp
import BackupEngine

enum Words {
    static func key(_ kind: CloudError.Kind) -> String {
        switch kind {
        case .storageFull: "storageFull"
        case .transport: "transport"
        case .authRevoked: "authRevoked"
        case .offline: "offline"
        case .notFound: "notFound"
        case .notAvailable: "notAvailable"
        case .needsConsent: "needsConsent"
        }
    }

    static func key(_ reason: UnavailableReason) -> String {
        switch reason {
        case .noAccount: "noAccount"
        case .needsConsent: "needsConsent"
        case .restorePending: "restorePending"
        case .shrinkSuspected: "shrinkSuspected"
        case .writeHeld: "writeHeld"
        }
    }

    static func key(_ outcome: RestoreOutcome) -> String {
        switch outcome {
        case .completed: "completed"
        case .partial: "partial"
        case .failed: "failed"
        case .placementRejected: "placementRejected"
        case .sourceChanged: "sourceChanged"
        case .sourceUnavailable: "sourceUnavailable"
        case .notReady: "notReady"
        case .notAvailable: "notAvailable"
        case .needsConsent: "needsConsent"
        }
    }

    static func explain(_ reason: UnavailableReason, remote: String) -> String {
        switch reason {
        case .noAccount:
            "no credentials for \(remote): set them (see backup(1), CREDENTIALS), then run again; nothing was touched"
        case .needsConsent:
            "this is the first sync to \(remote): run again with --yes to allow writing to it; nothing was touched"
        case .restorePending:
            "the source is empty and \(remote) already holds a backup that was never synced from here: "
                + "nothing was written. Restore it first (`backup restore`), or point the profile at another remote"
        case .shrinkSuspected(let deletes, let known):
            "this run would delete \(deletes) of the \(known) files in the backup (more than half): nothing was written. "
                + "Check that the source is complete (an unmounted disk?); if you really deleted them, run again with --allow-shrink"
        case .writeHeld(let reason):
            "the write hold is set (\(reason)): nothing was written; clear it with `backup hold clear`"
        }
    }

    static func explain(_ outcome: RestoreOutcome) -> String {
        switch outcome {
        case .sourceChanged:
            "the backup changed since this restore started (a sync wrote a new marker): start a new restore without --resume"
        case .sourceUnavailable:
            "the backup this restore came from is gone (or its credentials are missing): nothing was restored this run"
        case .notReady:
            "the remote holds files but no readable marker: a sync may be running; try again once it finished"
        case .notAvailable:
            "the remote is not there (an unmounted disk, a missing bucket): make it available, then `backup restore --resume`"
        case .needsConsent:
            "the remote needs consent first: run `backup sync --yes` once, or restore with --remote"
        default:
            "\(outcome)"
        }
    }
}
