// Every key of the interface, as data: keys map to named actions, one table per screen plus
// one for everywhere. Screens look their keys up here, the footer shows the hints from here,
// and the help screen is built from these same tables, so help cannot drift from the keys.

import BackupTerminal

/// Something a key asks for.
enum Action: String, Sendable, CaseIterable {
    case help, quit, back, redraw
    case up, down, pageUp, pageDown, first, last, search, showNotes, dryRun
    case sync, restore, resume, hold, newProfile, refresh, showProfile
    case syncAgain, allowConsent, allowShrink, openHold, restoreFirst, enterPassword
    case place, reject, placeAll, viewList
    case overwrite, keepMine
    case continueRestore, retryFailed
    case setHold, clearHold
    case toggleAll, deleteProfile, editConfig, editProfile, restoreRemote, startNew
    case add, editEntry, removeEntry
    case toBackground, fromBackground, choosePaths, chooseDate, verify
    case nextField, previousField, submit, toggle, deleteBack, deleteForward, deleteWord, clearField
    case cursorLeft, cursorRight, cursorStart, cursorEnd
    case yes, no
}

/// Keys bound to one action, with what help says about it.
struct Binding: Sendable {
    let keys: [Key]
    let action: Action
    /// One line for the help screen.
    let summary: String
    /// The short word the footer shows next to the first key; nil keeps it out of the footer.
    let hint: String?

    init(_ keys: [Key], _ action: Action, _ summary: String, hint: String? = nil) {
        self.keys = keys
        self.action = action
        self.summary = summary
        self.hint = hint
    }

    /// "q/F10": the keys as help shows them.
    var keyLabel: String { keys.map(\.label).joined(separator: "/") }
}

/// The bindings of one screen (or of everywhere).
struct KeyMap: Sendable {
    /// The section title on the help screen.
    let name: String
    let bindings: [Binding]

    /// The action `key` is bound to here.
    func action(for key: Key) -> Action? {
        bindings.first { $0.keys.contains(key) }?.action
    }

    func binding(_ action: Action) -> Binding? {
        bindings.first { $0.action == action }
    }
}

/// The tables.
enum KeyMaps {
    private static let ch = Key.character

    static let global = KeyMap(name: "Everywhere", bindings: [
        Binding([ch("?"), .function(1)], .help, "show this help: every key of the screen you are on", hint: "help"),
        Binding([ch("q"), .function(10)], .quit, "quit; while a job runs, asks first, then stops it cleanly (its record is kept)", hint: "quit"),
        Binding([.escape], .back, "go back to the previous screen", hint: "back"),
        Binding([.control("l")], .redraw, "paint the whole screen again (after another program wrote over it)"),
    ])

    /// PgUp, PgDn, Home and End in a list of `what`.
    static func paging(_ what: String) -> [Binding] {
        [
            Binding([.pageUp], .pageUp, "a page of \(what) up"),
            Binding([.pageDown], .pageDown, "a page of \(what) down"),
            Binding([.home], .first, "to the first of the \(what)"),
            Binding([.end], .last, "to the last of the \(what)"),
        ]
    }

    static let home = KeyMap(name: "Profiles", bindings: [
        Binding([.up, ch("k")], .up, "select the previous profile"),
        Binding([.down, ch("j")], .down, "select the next profile"),
    ] + paging("profiles") + [
        Binding([ch("/")], .search, "find a profile by its name, source or remote (again: the next one)", hint: "find"),
        Binding([.enter], .showProfile, "show the selected profile in full (writes nothing)", hint: "show"),
        Binding([ch("s")], .sync, "back up the selected profile now", hint: "sync"),
        Binding([ch("d")], .dryRun, "what the next sync would upload and delete (a dry run: it writes nothing)", hint: "dry run"),
        Binding([ch("r")], .restore, "restore the selected profile's backup, group by group", hint: "restore"),
        Binding([ch("o")], .restoreRemote, "restore from another remote, one no profile names (its credentials from the environment, as for backup restore --remote)", hint: "restore a remote"),
        Binding([ch("c")], .resume, "see and continue the profile's unfinished restore", hint: "resume"),
        Binding([ch("h")], .hold, "set or clear the write hold", hint: "hold"),
        Binding([ch("V")], .verify, "verify the backup: its listing against its marker, then (r) every file's SHA-256 (as backup verify; writes nothing)"),
        Binding([ch("n")], .newProfile, "set up a new profile: every field of it in a form", hint: "new"),
        Binding([ch("e")], .editProfile, "edit the selected profile in a form: source, remote, user, password, groups, excludes, patterns, transfers", hint: "edit"),
        Binding([ch("E")], .editConfig, "edit the config file itself in $VISUAL or $EDITOR (vi); read again when the editor ends"),
        Binding([ch("x"), .delete], .deleteProfile, "delete the selected profile, after you confirm (the backup on its remote stays)"),
        Binding([ch("g"), .function(5)], .refresh, "read the profiles and their state again"),
        Binding([ch("b")], .fromBackground, "back to a job running in the background: the selected profile's, else the latest", hint: "to the job"),
    ])

    static let verify = KeyMap(name: "Verify", bindings: [
        Binding([ch("l")], .syncAgain, "compare the remote's listing with the backup's marker again (missing files, other sizes)", hint: "listing"),
        Binding([ch("r")], .retryFailed, "read every file and check its SHA-256 against the marker (as --read-data)", hint: "read all"),
        Binding([ch("v")], .showNotes, "every missing, damaged or extra file, in full", hint: "all"),
    ])

    static let profile = KeyMap(name: "Profile", bindings: [
        Binding([ch("s")], .sync, "back up this profile now", hint: "sync"),
        Binding([ch("d")], .dryRun, "what the next sync would upload and delete (a dry run: it writes nothing)", hint: "dry run"),
        Binding([.up, ch("k")], .up, "scroll up"),
        Binding([.down, ch("j")], .down, "scroll down"),
    ] + paging("lines"))

    static let firstRun = KeyMap(name: "New profile", bindings: [
        Binding([.tab, .down], .nextField, "next field"),
        Binding([.backTab, .up], .previousField, "previous field"),
        Binding([ch(" ")], .toggle, "tick or untick the consent box"),
        Binding([.enter], .submit, "next field; on the last one, save (and run the first sync when allowed)", hint: "next/save"),
    ])

    static let profileForm = KeyMap(name: "Profile form", bindings: [
        Binding([.tab, .down], .nextField, "next field"),
        Binding([.backTab, .up], .previousField, "previous field"),
        Binding([.enter], .submit, "next field; on a list (groups, excludes, patterns) open it; on [ Save ] save the profile", hint: "next/open/save"),
    ])

    static let listEdit = KeyMap(name: "List", bindings: [
        Binding([.up, ch("k")], .up, "select the previous entry"),
        Binding([.down, ch("j")], .down, "select the next entry"),
    ] + paging("entries") + [
        Binding([ch("a")], .add, "add an entry", hint: "add"),
        Binding([.enter, ch("e")], .editEntry, "edit the selected entry", hint: "edit"),
        Binding([ch("x"), .delete], .removeEntry, "remove the selected entry", hint: "remove"),
        Binding([ch("/")], .search, "find an entry (again: the next one)", hint: "find"),
    ])

    static let textField = KeyMap(name: "Text fields", bindings: [
        Binding([.left], .cursorLeft, "move the cursor one character left"),
        Binding([.right], .cursorRight, "move the cursor one character right"),
        Binding([.home, .control("a")], .cursorStart, "move the cursor to the start"),
        Binding([.end, .control("e")], .cursorEnd, "move the cursor to the end"),
        Binding([.backspace], .deleteBack, "delete the character before the cursor"),
        Binding([.delete, .control("d")], .deleteForward, "delete the character under the cursor"),
        Binding([.control("w")], .deleteWord, "delete the word or path component before the cursor"),
        Binding([.control("u")], .clearField, "clear the field"),
        Binding([.function(1)], .help, "show help (in a text field, ? is typed)"),
    ])

    static let sync = KeyMap(name: "Sync", bindings: [
        Binding([ch("s")], .syncAgain, "run the sync again", hint: "sync again"),
        Binding([ch("y")], .allowConsent, "allow the first write to this remote, and sync", hint: "allow"),
        Binding([ch("a")], .allowShrink, "sync anyway (lift the guard): for this run only, after you confirm; the guard that stopped it saw too many deletes (--allow-shrink) or too many files rewritten (--allow-change)", hint: "sync anyway"),
        Binding([ch("v")], .showNotes, "view every note of the run in full (files skipped or unreadable, links, special files)", hint: "notes"),
        Binding([ch("h")], .openHold, "open the write hold: set one while the sync runs to stop it before its next write (what it wrote is recorded), or clear one that stopped it", hint: "hold"),
        Binding([ch("r")], .restoreFirst, "restore the backup into the empty source first", hint: "restore"),
        Binding([ch("p")], .enterPassword, passwordSummary, hint: "password"),
        Binding([ch("b")], .toBackground, backgroundSummary, hint: "background"),
    ])

    static let backgroundSummary = "while the job runs: keep it running in the background and go back (b on the profile list brings it back)"

    static let passwordSummary = "type the remote's password, when it is missing or the server refused it: kept in this session's memory only, never written, and the job runs again"

    static let restore = KeyMap(name: "Restore", bindings: [
        Binding([.up, ch("k")], .up, "scroll the groups up"),
        Binding([.down, ch("j")], .down, "scroll the groups down"),
    ] + paging("groups") + [
        Binding([ch("c")], .resume, "continue what is still pending (resume)", hint: "resume"),
        Binding([ch("v")], .showNotes, "view every note of the restore in full (refused paths, failed files, conflicts)", hint: "notes"),
        Binding([ch("p")], .enterPassword, passwordSummary, hint: "password"),
        Binding([ch("b")], .toBackground, backgroundSummary, hint: "background"),
    ])

    static let placement = KeyMap(name: "Placement prompt", bindings: [
        Binding([ch("p")], .place, "place the group: move its files into the target", hint: "place"),
        Binding([ch("r")], .reject, "reject the group: leave it downloaded and checked, not placed; each of its files uses one of its 3 tries, and it is offered again next run", hint: "reject"),
        Binding([ch("a")], .placeAll, "place this group and every remaining one (still asks where a local file differs)", hint: "place all remaining"),
        Binding([ch("l")], .viewList, "view the list of the group's files (again to hide it)", hint: "list"),
        Binding([.up, ch("k")], .up, "scroll the list up"),
        Binding([.down, ch("j")], .down, "scroll the list down"),
    ])

    static let overwrite = KeyMap(name: "Overwrite question", bindings: [
        Binding([ch("o")], .overwrite, "overwrite: replace the local files that differ with the backup's (no copy of yours is kept)", hint: "overwrite"),
        Binding([ch("k"), .enter], .keepMine, "keep mine: place the rest of the group, leave the differing files as they are", hint: "keep mine"),
        Binding([.escape], .back, "back to the group's question", hint: "back"),
    ])

    static let resume = KeyMap(name: "Resume", bindings: [
        Binding([.enter, ch("c")], .continueRestore, "continue the restore from its record", hint: "continue"),
        Binding([ch("n")], .startNew, "start a new restore into the folder you asked for, when it is not the one the unfinished restore goes into", hint: "new restore"),
        Binding([ch("t")], .retryFailed, "continue, and try again files that failed three times", hint: "retry failed"),
        Binding([.up, ch("k")], .up, "scroll the groups up"),
        Binding([.down, ch("j")], .down, "scroll the groups down"),
    ] + paging("groups"))

    static let hold = KeyMap(name: "Write hold", bindings: [
        Binding([ch("s")], .setHold, "set the hold, with a reason: no sync writes until it is cleared", hint: "set"),
        Binding([ch("c")], .clearHold, "clear the hold", hint: "clear"),
    ])

    static let confirm = KeyMap(name: "Questions", bindings: [
        Binding([ch("y")], .yes, "yes", hint: "yes"),
        Binding([ch("n"), .escape], .no, "no", hint: "no"),
    ])

    static let pick = KeyMap(name: "Choose groups", bindings: [
        Binding([.enter], .submit, "restore the ticked groups (only they are downloaded)", hint: "restore"),
        Binding([ch(" ")], .toggle, "tick or untick the selected group", hint: "tick"),
        Binding([ch("a")], .toggleAll, "tick every group, or none when all are ticked", hint: "all"),
        Binding([ch("f")], .choosePaths, "restore only some files or folders of the ticked groups: their paths in the backup, one a row (as --path)", hint: "files"),
        Binding([ch("d")], .chooseDate, "restore the backup as it was at a date and time, from the kept versions (as --as-of); empty: as it is now", hint: "as of"),
        Binding([.up, ch("k")], .up, "select the previous group"),
        Binding([.down, ch("j")], .down, "select the next group"),
    ] + paging("groups"))

    static let dryRun = KeyMap(name: "Dry run", bindings: [
        Binding([ch("s")], .sync, "run this sync now", hint: "sync"),
        Binding([ch("/")], .search, "find a file by its path (again: the next one)", hint: "find"),
        Binding([.up, ch("k")], .up, "scroll up"),
        Binding([.down, ch("j")], .down, "scroll down"),
    ] + paging("files"))

    static let notes = KeyMap(name: "Notes", bindings: [
        Binding([.up, ch("k")], .up, "scroll up"),
        Binding([.down, ch("j")], .down, "scroll down"),
        Binding([ch("/")], .search, "find a line (again: the next one)", hint: "find"),
    ] + paging("lines"))

    static let help = KeyMap(name: "Help", bindings: [
        Binding([.up, ch("k")], .up, "scroll up"),
        Binding([.down, ch("j")], .down, "scroll down"),
        Binding([ch("/")], .search, "find a line (again: the next one)", hint: "find"),
    ] + paging("lines") + [
        Binding([.escape, ch("q"), ch("?")], .back, "close help", hint: "close"),
    ])

    /// Every table, in the order help lists them.
    static let all: [KeyMap] = [global, home, profile, firstRun, profileForm, listEdit, textField, sync, restore, placement, overwrite, resume, hold, pick, dryRun, notes, confirm, help]
}
