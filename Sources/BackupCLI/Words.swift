// The words for outcomes: stable keys for JSON, and for people a sentence that says what
// happened and what to do about it.

import BackupApp
import BackupEngine

enum Words {
    static func key(_ kind: CloudError.Kind) -> String { kind.key }

    static func key(_ reason: UnavailableReason) -> String {
        switch reason {
        case .noAccount: "noAccount"
        case .needsConsent: "needsConsent"
        case .restorePending: "restorePending"
        case .shrinkSuspected: "shrinkSuspected"
        case .changeSuspected: "changeSuspected"
        case .remoteMissing: "remoteMissing"
        case .otherWriter: "otherWriter"
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

    // The sentences themselves live in BackupApp's Explanations, beside the TUI's wording.
    static func explain(_ reason: UnavailableReason, remote: String) -> String {
        Explanations.of(reason, remote: remote).scripted
    }

    static func explain(_ outcome: RestoreOutcome) -> String {
        Explanations.of(outcome).scripted
    }

    /// A probe that found no backup to `job` ("restore", "verify"; `done` is its past,
    /// "restored"): the result's fields, and the line for people.
    static func noBackup(_ probe: ProbeOutcome, remote: String, job: String, done: String, into result: inout [String: Any]) -> String {
        switch probe {
        case .failed(let error):
            (result["status"], result["error"], result["message"]) = ("failed", key(error.kind), error.message)
            return "cannot look at the remote: \(error.message)"
        case .damaged(let message):
            (result["status"], result["error"], result["message"]) = ("failed", "damaged", message)
            return "nothing was \(done): \(message)"
        case .unavailable(let reason):
            (result["status"], result["reason"]) = ("unavailable", key(reason))
            return explain(reason, remote: remote)
        case .none:
            (result["status"], result["reason"]) = ("unavailable", "none")
            return "the remote holds no files: there is nothing to \(job)"
        case .notReady:
            (result["status"], result["reason"]) = ("unavailable", "notReady")
            return "the remote holds files but no readable marker: a sync may be running or was interrupted; run it to completion, then \(job)"
        case .found:
            result["status"] = "failed"
            return "unexpected probe result"
        }
    }
}
