// The sentences for outcomes that both front ends show: what happened and what it means.
// Each comes in two forms side by side, so they cannot drift apart: `scripted` tells a
// person at a shell which flag or command to use; `what` names none, and the TUI adds the
// key that acts on it from its own key table.

import BackupEngine

/// One outcome in words.
public struct Explanation: Sendable, Equatable {
    /// What happened and what it means, without a command or flag to type.
    public let what: String
    /// The full sentence for the scripted mode, with the command or flag that helps.
    public let scripted: String

    init(what: String, scripted: String) {
        self.what = what
        self.scripted = scripted
    }

    init(_ both: String) {
        what = both
        scripted = both
    }
}

public enum Explanations {
    /// Why a sync wrote nothing.
    public static func of(_ reason: UnavailableReason, remote: String) -> Explanation {
        switch reason {
        case .noAccount:
            Explanation(
                what: "there are no credentials for \(remote): set them (see backup(1), CREDENTIALS); nothing was touched",
                scripted: "no credentials for \(remote): set them (see backup(1), CREDENTIALS), then run again; nothing was touched")
        case .needsConsent:
            Explanation(
                what: "this is the first sync to \(remote): nothing is written there until you allow it",
                scripted: "this is the first sync to \(remote): run again with --yes to allow writing to it; nothing was touched")
        case .restorePending:
            Explanation(
                what: "the source is empty and \(remote) already holds a backup that was never synced from here: "
                    + "nothing was written. Restore it first, or point the profile at another remote",
                scripted: "the source is empty and \(remote) already holds a backup that was never synced from here: "
                    + "nothing was written. Restore it first (`backup restore`), or point the profile at another remote")
        case .shrinkSuspected(let deletes, let known):
            Explanation(
                what: "this run would delete \(deletes) of the \(known) files in the backup (more than half): nothing was written. "
                    + "Check that the source is complete (an unmounted disk?)",
                scripted: "this run would delete \(deletes) of the \(known) files in the backup (more than half): nothing was written. "
                    + "Check that the source is complete (an unmounted disk?); if you really deleted them, run again with --allow-shrink")
        case .changeSuspected(let replaces, let known):
            Explanation(
                what: "this run would replace \(replaces) of the \(known) files it compares by content, more than the "
                    + "profile's max_change allows: nothing was written. Files rewritten all at once can be ransomware or a "
                    + "script gone wrong; check a few of them",
                scripted: "this run would replace \(replaces) of the \(known) files it compares by content, more than the "
                    + "profile's max_change allows: nothing was written. Files rewritten all at once can be ransomware or a "
                    + "script gone wrong; check a few of them, and if the change is yours, run again with --allow-change")
        case .remoteMissing:
            Explanation(
                what: "\(remote) was synced from here before and no longer holds its marker (it is empty, or holds files that are not this backup): nothing was written. "
                    + "Is the disk mounted, the share connected, the URL right?",
                scripted: "\(remote) was synced from here before and no longer holds its marker (it is empty, or holds files that are not this backup): nothing was written. "
                    + "Is the disk mounted, the share connected, the URL right? If the backup there is really gone, "
                    + "run again with --allow-missing-remote to write a new one")
        case .otherWriter(let writer):
            Explanation(
                what: "\(remote) holds the backup of another writer (\(TerminalText.visible(writer))): nothing was written. "
                    + "Two profiles or machines on one remote would delete each other's files; point this profile at "
                    + "its own remote",
                scripted: "\(remote) holds the backup of another writer (\(TerminalText.visible(writer))): nothing was written. "
                    + "Two profiles or machines on one remote would delete each other's files; point this profile at "
                    + "its own remote, restore that backup here first (`backup restore`), or run again with --take-over "
                    + "to make this profile the remote's writer")
        case .writeHeld(let reason):
            Explanation(
                what: "the write hold is set (\(reason)): nothing was written",
                scripted: "the write hold is set (\(reason)): nothing was written; clear it with `backup hold clear`")
        }
    }

    /// Why a restore (mostly a resumed one) did not run to the end.
    public static func of(_ outcome: RestoreOutcome) -> Explanation {
        switch outcome {
        case .sourceChanged:
            Explanation(
                what: "the backup changed since this restore started (a sync wrote a new marker): start a new restore",
                scripted: "the backup changed since this restore started (a sync wrote a new marker): start a new restore without --resume")
        case .sourceUnavailable:
            Explanation("the backup this restore came from is gone (or its credentials are missing): nothing was restored this run")
        case .notReady:
            Explanation("the remote holds files but no readable marker: a sync may be running; try again once it finished")
        case .notAvailable:
            Explanation(
                what: "the remote is not there (an unmounted disk, a missing bucket): make it available, then resume",
                scripted: "the remote is not there (an unmounted disk, a missing bucket): make it available, then `backup restore --resume`")
        case .needsConsent:
            Explanation(
                what: "the remote needs consent first: sync once, allowing the first write, then restore",
                scripted: "the remote needs consent first: run `backup sync --yes` once, or restore with --remote")
        default:
            Explanation("\(outcome)")
        }
    }
}
