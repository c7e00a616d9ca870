// The values that go into and come out of SyncEngine.sync(): the snapshot of the local
// side, the policy of the guards, and the outcome with its report.

import Foundation

/// Where the bytes of a snapshot entry come from.
public enum SyncSource: Sendable, Equatable {
    /// A local file, read when the entry uploads.
    case file(String)
    /// The local file at the entry's path below the snapshot's `localRoot`, read when the
    /// entry uploads: what a scan lists (one string per file fewer than `.file`).
    case underRoot
    /// Bytes in memory.
    case bytes(Data)
    /// The entry exists but is not available now (unreadable, or kept remotely after a
    /// local delete). It is never uploaded and never deleted from the remote.
    case absent
}

/// One file of the local side.
///
/// A scan holds one per file of the tree, so the entry is packed: the fields below that are
/// rarely more than a tag (a source other than the tree's, a hard link's target, owner names)
/// live in one shared box, and the rest in plain words: about 96 bytes and the path, where
/// the fields as declared took about 190.
public struct SyncEntry: Sendable, Equatable {
    /// The relative path the file has on the remote.
    public var path: String
    /// Everything but the path: what `SyncEntryList` holds per entry beside the path's bytes.
    var body: Body

    /// The local size in bytes.
    public var size: Int64 {
        get { body.size }
        set { body.size = newValue }
    }

    /// The SHA-256 of a hash-compared entry; nil for a size-compared one, and for one whose
    /// hash is to come.
    public var digest: SHA256Digest? {
        get { body.bits.contains(.hasDigest) ? body.digestValue : nil }
        set {
            body.digestValue = newValue ?? SHA256Digest.zero
            if newValue == nil { body.bits.remove(.hasDigest) } else { body.bits.insert(.hasDigest) }
            if newValue != nil { body.bits.remove(.hashToCome) }
        }
    }

    /// A hash-compared file the scan did not read: its SHA-256 is taken from the bytes its
    /// upload sends, so a new file is read once, not once to hash and again to send. The
    /// scan leaves only files to come that no state entry can hold a hash for (a first
    /// sync's); the engine uploads such an entry whatever the state holds, never skips it.
    public var hashToCome: Bool {
        get { body.bits.contains(.hashToCome) }
        set {
            if newValue {
                digest = nil  // leaves the bit alone: only a digest set ends a hash to come
                body.bits.insert(.hashToCome)
            } else {
                body.bits.remove(.hashToCome)
            }
        }
    }

    /// Compared by its SHA-256 (known, or to come), not by size and time.
    public var isHashCompared: Bool { body.bits.hashCompared }

    /// An entry's fields in plain words (80 bytes): the digest without an Optional's tag byte,
    /// which flags in `bits` stand for.
    struct Body: Sendable {
        var size: Int64 = 0
        var digestValue = SHA256Digest.zero
        var mtimeValue: Int64 = 0
        var metaMtime: Int64 = 0
        var rare: Rare?
        var metaMode: UInt32 = 0
        var metaUid: UInt32 = 0
        var metaGid: UInt32 = 0
        var bits: Bits = []
    }

    struct Bits: OptionSet, Sendable {
        let rawValue: UInt8
        static let hasMtime = Bits(rawValue: 1)
        static let hasMetadata = Bits(rawValue: 2)
        static let absent = Bits(rawValue: 4)
        static let hasDigest = Bits(rawValue: 8)
        static let hashToCome = Bits(rawValue: 16)

        /// A digest known, or to come from the upload.
        var hashCompared: Bool { !isDisjoint(with: [.hasDigest, .hashToCome]) }
    }

    /// The fields that are usually empty, immutable and shared by copies (a new box on change).
    final class Rare: Sendable {
        /// `.file` or `.bytes`; nil for `.underRoot` and `.absent`.
        let source: SyncSource?
        /// A kind other than `.file`.
        let kind: EntryKind?
        let user: String?
        let group: String?

        init(source: SyncSource?, kind: EntryKind?, user: String?, group: String?) {
            self.source = source
            self.kind = kind
            self.user = user
            self.group = group
        }

        static func make(source: SyncSource?, kind: EntryKind?, user: String?, group: String?) -> Rare? {
            source == nil && kind == nil && user == nil && group == nil ? nil : Rare(source: source, kind: kind, user: user, group: group)
        }
    }

    private var rare: Rare? {
        get { body.rare }
        set { body.rare = newValue }
    }

    private var bits: Bits {
        get { body.bits }
        set { body.bits = newValue }
    }

    public var source: SyncSource {
        get {
            if let source = rare?.source { return source }
            return bits.contains(.absent) ? .absent : .underRoot
        }
        set {
            switch newValue {
            case .underRoot, .absent:
                if newValue == .absent { bits.insert(.absent) } else { bits.remove(.absent) }
                rare = Rare.make(source: nil, kind: rare?.kind, user: rare?.user, group: rare?.group)
            case .file, .bytes:
                bits.remove(.absent)
                rare = Rare.make(source: newValue, kind: rare?.kind, user: rare?.user, group: rare?.group)
            }
        }
    }

    /// The local modification time (ns) of a size-compared entry: it uploads when this
    /// differs from the one the state recorded at upload (nil: compared by size alone).
    public var mtimeNanoseconds: Int64? {
        get { bits.contains(.hasMtime) ? body.mtimeValue : nil }
        set {
            body.mtimeValue = newValue ?? 0
            if newValue == nil { bits.remove(.hasMtime) } else { bits.insert(.hasMtime) }
        }
    }

    /// `.file`, or `.hardLink` for a second name of a file met earlier in the scan.
    public var kind: EntryKind {
        get { rare?.kind ?? .file }
        set { rare = Rare.make(source: rare?.source, kind: newValue == .file ? nil : newValue, user: rare?.user, group: rare?.group) }
    }

    /// The file's mode, times and owner as scanned; nil where unknown (an absent entry).
    /// A change of it alone uploads nothing: the state records it, and the marker carries it.
    public var metadata: EntryMetadata? {
        get {
            guard bits.contains(.hasMetadata) else { return nil }
            return EntryMetadata(
                mode: body.metaMode, mtimeNanoseconds: body.metaMtime, uid: body.metaUid, gid: body.metaGid,
                user: rare?.user, group: rare?.group)
        }
        set {
            body.metaMode = newValue?.mode ?? 0
            body.metaMtime = newValue?.mtimeNanoseconds ?? 0
            body.metaUid = newValue?.uid ?? 0
            body.metaGid = newValue?.gid ?? 0
            if newValue == nil { bits.remove(.hasMetadata) } else { bits.insert(.hasMetadata) }
            if rare?.user != newValue?.user || rare?.group != newValue?.group {
                rare = Rare.make(source: rare?.source, kind: rare?.kind, user: newValue?.user, group: newValue?.group)
            }
        }
    }

    public init(
        path: String, size: Int64, hash: String?, source: SyncSource, mtimeNanoseconds: Int64? = nil,
        kind: EntryKind = .file, metadata: EntryMetadata? = nil
    ) {
        self.init(
            path: path, size: size, digest: hash.flatMap(SHA256Digest.init(hex:)), source: source, mtimeNanoseconds: mtimeNanoseconds,
            kind: kind, metadata: metadata)
    }

    public init(
        path: String, size: Int64, digest: SHA256Digest?, source: SyncSource, mtimeNanoseconds: Int64? = nil,
        kind: EntryKind = .file, metadata: EntryMetadata? = nil
    ) {
        self.path = path
        body = Body()
        self.size = size
        self.digest = digest
        self.source = source
        self.mtimeNanoseconds = mtimeNanoseconds
        self.kind = kind
        self.metadata = metadata
    }

    init(path: String, body: Body) {
        self.path = path
        self.body = body
    }

    public static func == (a: SyncEntry, b: SyncEntry) -> Bool {
        a.path == b.path && a.size == b.size && a.digest == b.digest && a.hashToCome == b.hashToCome && a.source == b.source
            && a.mtimeNanoseconds == b.mtimeNanoseconds && a.kind == b.kind && a.metadata == b.metadata
    }

    /// The SHA-256 as lowercase hex (64 digits); nil for a size-compared entry. Setting text
    /// that is not 64 hex digits makes the entry size-compared.
    public var hash: String? {
        get { digest?.hex }
        set { digest = newValue.flatMap(SHA256Digest.init(hex:)) }
    }

    /// The local file the entry's bytes are read from: `.file`'s path, or `.underRoot`'s below
    /// `root`; nil for bytes in memory and absent entries.
    public func localPath(root: String) -> String? {
        switch source {
        case .file(let path): path
        case .underRoot: root + "/" + path
        case .bytes, .absent: nil
        }
    }

    /// Whether the entry is a local file that is there to upload (`.file` or `.underRoot`).
    public var isLocalFile: Bool {
        switch source {
        case .file, .underRoot: true
        case .bytes, .absent: false
        }
    }

    /// An entry that exists but must not be touched on the remote this run.
    public static func absent(_ path: String, size: Int64 = 0, hash: String? = nil) -> SyncEntry {
        SyncEntry(path: path, size: size, hash: hash, source: .absent)
    }

    /// An entry that exists but must not be touched on the remote this run.
    public static func absent(_ path: String, size: Int64 = 0, digest: SHA256Digest?) -> SyncEntry {
        SyncEntry(path: path, size: size, digest: digest, source: .absent)
    }
}

/// The local side of one sync run.
public struct SyncSnapshot: Sendable {
    /// Every file, in the order hash-compared uploads should happen.
    public var entries: SyncEntryList
    /// Makes the marker's bytes, uploaded last (rule 7) to `SyncEngine.markerPath`, from
    /// what the remote holds at that point: the state's entries (the marker excluded, in path
    /// order, read one at a time), each
    /// with the hash and size recorded when it was uploaded, so an upload skipped this run
    /// never publishes a hash the remote lacks. Called only by a run that writes the marker:
    /// most runs of a large tree change nothing, and encoding a marker is not free.
    public var marker: @Sendable (_ held: HeldEntries) throws -> MarkerBody
    /// Remote files the snapshot lacks that stay on the remote (as if `.absent`): asked of
    /// every listed path with no snapshot entry, so what is kept never depends on the state
    /// cache (keep_remotely patterns, folders that cannot be read, files a restore has not
    /// restored yet).
    public var keep: @Sendable (_ path: String) -> Bool
    /// Whether the local side holds nothing the person made. Pass it explicitly when
    /// scaffold files are always listed; it defaults to `entries.isEmpty`.
    public var isEmpty: Bool
    /// Lifts the shrink guard (rule 11) for this run only.
    public var allowShrink: Bool
    /// Lifts the change guard for this run only (`sync --allow-change`).
    public var allowChange = false
    /// Lifts the remote-missing guard for this run only (`sync --allow-missing-remote`).
    public var allowMissingRemote: Bool
    /// The writer guard's input; nil: the marker's writer is not checked.
    public var writer: WriterCheck?
    /// A digest of what the marker holds besides the files' own records (folders, symbolic
    /// links, which names are hard links): when it differs from the one of the marker written
    /// last, the marker is written again though no file changed. Nil: not compared.
    public var treeDigest: String?
    /// The folders and symbolic links of the source, made on a remote that keeps them itself
    /// (a folder remote) by a run that writes its marker; and those the last marker had that
    /// the source lacks now, removed there first.
    public var tree: [TreeEntry] = []
    /// Asked only by a run that writes its marker (reading the last marker's record costs a run).
    public var treeRemoved: @Sendable () -> [TreeEntry] = { [] }
    /// The folder `.underRoot` entries are below (no "/" at its end; "" for "/").
    public var localRoot: String = ""
    /// Told, for each entry whose hash was to come (by its position in `entries`), the
    /// fingerprint its upload read and sent, once the state recorded the upload: for the
    /// fingerprint cache, so the next scan does not read the file again.
    public var hashLearnt: @Sendable (_ entry: Int, _ fingerprint: Fingerprint) -> Void = { _, _ in }

    public init(
        entries: SyncEntryList, marker: Data, isEmpty: Bool? = nil, allowShrink: Bool = false,
        keep: @escaping @Sendable (String) -> Bool = { _ in false }, allowMissingRemote: Bool = false,
        writer: WriterCheck? = nil
    ) {
        self.init(
            entries: entries, makeMarker: { _ in marker }, isEmpty: isEmpty, allowShrink: allowShrink, keep: keep,
            allowMissingRemote: allowMissingRemote, writer: writer)
    }

    /// A snapshot of `entries` given as an array (packed here).
    public init(
        entries: [SyncEntry], marker: Data, isEmpty: Bool? = nil, allowShrink: Bool = false,
        keep: @escaping @Sendable (String) -> Bool = { _ in false }, allowMissingRemote: Bool = false,
        writer: WriterCheck? = nil
    ) {
        self.init(
            entries: SyncEntryList(entries), marker: marker, isEmpty: isEmpty, allowShrink: allowShrink, keep: keep,
            allowMissingRemote: allowMissingRemote, writer: writer)
    }

    public init(
        entries: SyncEntryList, makeMarker: @escaping @Sendable (_ held: HeldEntries) throws -> Data, isEmpty: Bool? = nil,
        allowShrink: Bool = false, keep: @escaping @Sendable (String) -> Bool = { _ in false },
        allowMissingRemote: Bool = false, writer: WriterCheck? = nil
    ) {
        self.init(
            entries: entries, writeMarker: { .bytes(try makeMarker($0)) }, isEmpty: isEmpty, allowShrink: allowShrink, keep: keep,
            allowMissingRemote: allowMissingRemote, writer: writer)
    }

    /// A snapshot whose marker may be made into a file (`MarkerBody.file`).
    public init(
        entries: SyncEntryList, writeMarker: @escaping @Sendable (_ held: HeldEntries) throws -> MarkerBody, isEmpty: Bool? = nil,
        allowShrink: Bool = false, keep: @escaping @Sendable (String) -> Bool = { _ in false },
        allowMissingRemote: Bool = false, writer: WriterCheck? = nil
    ) {
        self.entries = entries
        self.marker = writeMarker
        self.isEmpty = isEmpty ?? entries.isEmpty
        self.allowShrink = allowShrink
        self.keep = keep
        self.allowMissingRemote = allowMissingRemote
        self.writer = writer
    }
}

/// A marker's bytes as made for its upload.
public enum MarkerBody: Sendable {
    /// In memory.
    case bytes(Data)
    /// In this local file (a marker of a large backup is tens of megabytes, not held): a
    /// temporary file the engine uploads and then removes, whatever the upload's outcome.
    case file(String)

    /// Its size in bytes (0 for a file that cannot be looked at: it then fails to upload).
    public var size: Int64 {
        switch self {
        case .bytes(let data): return Int64(data.count)
        case .file(let path):
            var info = stat()
            return FileName.withCString(path) { stat($0, &info) } == 0 ? Int64(info.st_size) : 0
        }
    }
}

/// What the remote holds after a run's writes, as the state recorded each upload: every entry
/// but the marker, in path order (bytes), read one at a time, so that the marker of a large
/// tree is made without holding the state.
public struct HeldEntries: Sendable {
    private let read: @Sendable (_ body: (StateEntry) throws -> Void) throws -> Void

    /// These entries (sorted by the caller), for tests and callers that hold them already.
    public init(_ entries: [StateEntry]) {
        read = { body in for entry in entries { try body(entry) } }
    }

    /// The state's entries but `markerPath`, read when `forEach` is called.
    init(state: StateStore, excluding markerPath: String) {
        read = { body in try state.forEachSortedEntry { entry in if entry.path != markerPath { try body(entry) } } }
    }

    /// Calls `body` with each entry in path order. `body` must not use the sync state: it is
    /// being read meanwhile.
    public func forEach(_ body: (StateEntry) throws -> Void) throws {
        try read(body)
    }

    /// Every entry at once (tests; a large tree's are better read with `forEach`).
    public func all() throws -> [StateEntry] {
        var entries: [StateEntry] = []
        try forEach { entries.append($0) }
        return entries
    }
}

/// Who may write over the remote's marker (the writer guard, beyond the contract): the marker
/// names the writer that wrote it, and a run that finds another writer's marker writes nothing.
public struct WriterCheck: Sendable {
    /// This profile's writer id, the one its marker carries.
    public var id: String
    /// `sync --take-over`: write over another writer's backup on purpose.
    public var takeOver: Bool
    /// A writer this profile took over without the flag (by a restore into its source).
    public var adopted: String?
    /// The writer id a marker's bytes carry; nil for a marker without one (written before
    /// markers carried it, or unreadable), which is taken over silently.
    public var read: @Sendable (Data) -> String?

    public init(id: String, takeOver: Bool = false, adopted: String? = nil, read: @escaping @Sendable (Data) -> String?) {
        self.id = id
        self.takeOver = takeOver
        self.adopted = adopted
        self.read = read
    }
}

/// The shrink guard's thresholds (rule 11).
public struct ShrinkGuard: Sendable, Equatable {
    /// The largest fraction of the known remote entries one run may delete.
    public var maxDeleteFraction: Double
    /// Below this many known remote entries the guard does not apply.
    public var minRemoteEntries: Int

    public init(maxDeleteFraction: Double = 0.5, minRemoteEntries: Int = 4) {
        self.maxDeleteFraction = maxDeleteFraction
        self.minRemoteEntries = minRemoteEntries
    }

    /// Whether deleting `deletes` of `known` entries exceeds the fraction, in exact integer
    /// arithmetic: the fraction is taken as the decimal it was written as (to a millionth),
    /// so 57 of 100 at 0.57 is exactly the fraction and allowed (in floating point
    /// 0.57 × 100 is 56.99999999999999, which refused it).
    public func exceeded(deletes: Int, known: Int) -> Bool {
        let scale: Int64 = 1_000_000
        if maxDeleteFraction.isNaN { return false }  // as the comparison with NaN always was
        let fraction = min(max(maxDeleteFraction, 0), 1)
        let parts = Int64((fraction * Double(scale)).rounded())
        return Int128(deletes) * Int128(scale) > Int128(parts) * Int128(known)
    }
}

/// The guards of a sync engine.
public struct SyncPolicy: Sendable, Equatable {
    /// Rule 11; nil disables the shrink guard.
    public var shrinkGuard: ShrinkGuard?
    /// Rule 4; false disables the empty guard.
    public var guardEmptyOverExisting: Bool
    /// Beyond the contract: a remote synced before that now lists nothing (an unmounted disk)
    /// is refused; false disables the remote-missing guard.
    public var guardMissingRemote: Bool
    /// Beyond the contract: too many files replaced at once; nil disables the change guard.
    public var changeGuard: ChangeGuard?

    public init(
        shrinkGuard: ShrinkGuard? = ShrinkGuard(), guardEmptyOverExisting: Bool = true, guardMissingRemote: Bool = true,
        changeGuard: ChangeGuard? = ChangeGuard()
    ) {
        self.shrinkGuard = shrinkGuard
        self.guardEmptyOverExisting = guardEmptyOverExisting
        self.guardMissingRemote = guardMissingRemote
        self.changeGuard = changeGuard
    }
}

/// Whether the remote may be used at all (rule 1), answered by the app before any call.
public enum Availability: Sendable, Equatable {
    case available
    /// No remote is configured, or its credentials are missing.
    case noAccount
    /// Nobody has confirmed the first write to this remote.
    case needsConsent
}

/// A write hold: while one is set, the engine writes nothing to the remote.
public enum WriteHold: Sendable, Equatable {
    case none
    case held(reason: String)

    public var isHeld: Bool { self != .none }
}

/// Why a run did not write anything.
public enum UnavailableReason: Sendable, Equatable {
    /// Rule 1: no remote or no credentials.
    case noAccount
    /// Rule 1: the first write to this remote has not been confirmed.
    case needsConsent
    /// Rule 4: the local side is empty, this remote was never synced from here, and it
    /// already holds files: restore first rather than mirror an empty tree over them.
    case restorePending
    /// Rule 11: the run would delete `deletes` of the `known` remote entries.
    case shrinkSuspected(deletes: Int, known: Int)
    /// Beyond the contract, the change guard: the run would replace `replaces` of the `known`
    /// files compared by content (every file rewritten in place, as ransomware does).
    case changeSuspected(replaces: Int, known: Int)
    /// Beyond the contract: this profile completed a sync to the remote before, and it now
    /// lists no files and no marker (an unmounted disk, a wrong URL, an emptied folder).
    case remoteMissing
    /// Beyond the contract: the remote's marker was written by another writer (another
    /// profile or machine), named here.
    case otherWriter(writer: String)
    /// The write hold is set.
    case writeHeld(reason: String)
}

/// A delete that failed; it is retried by the next run (rule 8).
public struct DeleteFailure: Sendable, Equatable {
    public var path: String
    public var error: CloudError
}

/// A file whose old content could not be kept as a version: its replace or delete was
/// skipped this run (the remote still holds it) and is retried by the next.
public struct KeepFailure: Sendable, Equatable {
    public var path: String
    /// Whether the file was to be deleted (else replaced).
    public var deleting: Bool
    public var error: CloudError
}

/// What a run kept in the versions folder.
public struct KeptVersions: Sendable, Equatable {
    /// The run's folder name (`YYYYMMDDTHHMMSSZ`).
    public var run: String
    public var replaced = 0
    public var deleted = 0
    /// The kept files' bytes.
    public var bytes: Int64 = 0
    /// Whether the marker the run replaced was kept.
    public var marker = false

    public var files: Int { replaced + deleted }

    public init(run: String, replaced: Int = 0, deleted: Int = 0, bytes: Int64 = 0, marker: Bool = false) {
        self.run = run
        self.replaced = replaced
        self.deleted = deleted
        self.bytes = bytes
        self.marker = marker
    }
}

/// What one run did.
public struct SyncReport: Sendable, Equatable {
    /// What this run kept as versions (nil: nothing, or versions are off).
    public var versions: KeptVersions?
    /// Replaces and deletes skipped because the old file could not be kept first.
    public var keepFailures: [KeepFailure] = []
    /// The old runs' folders pruned from the versions folder (`keep_versions`).
    public var pruned: [String] = []
    /// What keeping and pruning versions could not do (never fatal).
    public var versionNotes: [String] = []
    /// Paths uploaded, in upload order (the marker included when it was uploaded).
    public var uploaded: PathList = []
    /// Whether the run wrote to the remote: a file uploaded or deleted, or metadata changed.
    public var wroteAnything: Bool { !uploaded.isEmpty || !deleted.isEmpty || !metadataUpdated.isEmpty }
    /// Bytes uploaded, the marker included.
    public var uploadedBytes: Int64 = 0
    /// Of `uploadedBytes`, the marker's (0 when it was not uploaded).
    public var markerBytes: Int64 = 0
    /// The bytes of the uploaded files, the marker's left out.
    public var fileBytes: Int64 { uploadedBytes - markerBytes }
    /// How many files were uploaded, the marker left out (it is the tool's own).
    public var fileCount: Int { uploaded.count - (markerUploaded ? 1 : 0) }
    /// Files this run left as they were on the remote although the source changed them: not
    /// uploaded (unreadable, or a name the remote cannot hold), not deleted, not replaced.
    /// Each is retried by the next run; until then the backup is behind the source.
    public var filesLeftBehind: Int { sourceFailures.count + deleteFailures.count + keepFailures.count }
    /// Paths deleted from the remote.
    public var deleted: [String] = []
    /// Deletes that failed and will be retried next run.
    public var deleteFailures: [DeleteFailure] = []
    /// Local files that could not be read when their turn came; uploaded by a later run.
    public var sourceFailures: [LocalFileError] = []
    /// Entries that were already up to date.
    public var unchanged: Int = 0
    /// Whether the state was reset because the remote's identity changed (rule 3).
    public var identityReset: Bool = false
    /// Whether the marker was uploaded.
    public var markerUploaded: Bool = false
    /// Remote files the snapshot lacks that were kept (`SyncSnapshot.keep`).
    public var kept: Int = 0
    /// Files whose mode, times or owner changed while their content did not: recorded in the
    /// marker (and applied to the remote's copy where the provider can), never uploaded.
    public var metadataUpdated: [String] = []
    /// What making folders and links on the remote could not do (a folder remote).
    public var treeNotes: [String] = []
    /// Uploaded files whose hash was to come: read and hashed once, as they were sent.
    public var hashedWhileSending: Int = 0

    public init() {}
}

/// How a run ended.
public enum SyncOutcome: Sendable, Equatable {
    /// Every upload succeeded; some deletes may have failed (see the report).
    case completed(SyncReport)
    /// Nothing was written, for the reason given.
    case unavailable(UnavailableReason)
    /// A write hold set while the run went on stopped it before its next write, after the
    /// writes the report lists (with none, the run is `unavailable(.writeHeld)`).
    case held(reason: String, SyncReport)
    /// A listing or an upload failed; the report says what happened before it.
    case failed(CloudError, SyncReport)
}

extension SyncOutcome {
    /// The same outcome, its report saying what the run kept as versions.
    func with(versions: KeptVersions?) -> SyncOutcome {
        switch self {
        case .completed(var report):
            report.versions = versions
            return .completed(report)
        case .held(let reason, var report):
            report.versions = versions
            return .held(reason: reason, report)
        case .failed(let error, var report):
            report.versions = versions
            return .failed(error, report)
        case .unavailable:
            return self
        }
    }
}

/// The engine's progress: `done` of `total` steps (puts and deletes).
public typealias SyncProgress = @Sendable (_ done: Int, _ total: Int) -> Void

/// The part of a run that begins, said once as it begins, for a front end to name what the
/// run is doing and to size its byte bar.
public enum SyncStage: Sendable, Equatable {
    /// This many files, of this many bytes in all (as scanned), are uploaded.
    case uploading(files: Int, bytes: Int64)
    /// This many files are deleted from the remote.
    case deleting(files: Int)
    /// This many files changed their mode, times or owner only: recorded and set remotely.
    case updatingMetadata(files: Int)
    /// The marker, of this many bytes, is uploaded: the commit point of the run.
    case writingMarker(bytes: Int64)
}

/// Told each `SyncStage` as the run reaches it; called on the engine's task, must not block.
public typealias SyncStageHandler = @Sendable (SyncStage) -> Void

/// What a sync would do, as `SyncEngine.preview` found it.
public struct SyncPreview: Sendable, Equatable {
    /// The uploads, in the order they would happen (the marker not included).
    public var uploads: [SyncEntry]
    /// The remote paths that would be deleted.
    public var deletes: [String]
    /// Whether the marker would be written.
    public var markerUpload: Bool
    /// Entries already up to date.
    public var unchanged: Int
    /// Whether the remote's identity changed since the last run (a full re-upload).
    public var identityReset: Bool
    /// Remote files the snapshot lacks that would be kept (`SyncSnapshot.keep`).
    public var kept: Int = 0

    /// The bytes the uploads would send.
    public var uploadBytes: Int64 { uploads.reduce(0) { $0 + $1.size } }
}

/// The outcome of a preview.
public enum SyncPreviewOutcome: Sendable, Equatable {
    case wouldRun(SyncPreview)
    /// A sync now would write nothing, for this reason.
    case unavailable(UnavailableReason)
    case failed(CloudError)
}
