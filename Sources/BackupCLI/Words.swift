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
}
