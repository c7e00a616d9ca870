// Turning a probe into a restore plan (the remote listing grouped by the marker's groups,
// required groups first) and the placement that moves staged downloads into the target.

import BackupEngine
import Foundation

/// A plan, with the remote paths refused on the way (nothing is written for those).
public struct PlannedRestore: Sendable, Equatable {
    public var plan: RestorePlan
    public var refused: [RefusedPath]
    /// The groups in plan order, with their file counts.
    public var groups: [(name: String, required: Bool, files: Int)] {
        var result: [(name: String, required: Bool, files: Int)] = []
        for file in plan.files {
            let name = file.group ?? file.remotePath
            if let last = result.last, last.name == name {
                result[result.count - 1].files += 1
            } else {
                result.append((name, file.required, 1))
            }
        }
        return result
    }

    public static func == (lhs: PlannedRestore, rhs: PlannedRestore) -> Bool {
        lhs.plan == rhs.plan && lhs.refused == rhs.refused
    }
}

/// What planning found besides the files it handed on.
public struct PlanOutline: Sendable, Equatable {
    /// Remote paths refused (nothing is written for them), in byte order.
    public var refused: [RefusedPath] = []
    /// The folders and symbolic links to make, in byte order of their paths.
    public var tree: [TreeEntry] = []
    /// How many files were planned, and their listed bytes.
    public var files = 0
    public var bytes: Int64 = 0

    public init() {}
}

/// The files and folders a restore is limited to (`backup restore --path`): a path chosen
/// takes its file, or its folder with everything below it; the folders above a chosen path
/// come too (with their modes and times), and nothing else.
public struct PathSelection: Sendable, Equatable {
    /// The chosen paths, without a leading or trailing "/".
    public let chosen: Set<String>
    /// Every folder above a chosen path.
    private let above: Set<String>

    /// nil when a path is empty or climbs out (".", ".." or an empty component).
    public init?(_ paths: [String]) {
        var chosen = Set<String>(), above = Set<String>()
        for raw in paths {
            var path = Substring(raw)
            while path.hasPrefix("/") { path = path.dropFirst() }
            while path.hasSuffix("/") { path = path.dropLast() }
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            guard !path.isEmpty, !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else { return nil }
            chosen.insert(String(path))
            for count in parts.indices.dropLast() { above.insert(parts[...count].joined(separator: "/")) }
        }
        self.chosen = chosen
        self.above = above
    }

    /// Whether `path` is chosen or lies below a chosen folder.
    public func covers(_ path: String) -> Bool {
        if chosen.contains(path) { return true }
        var end = path.endIndex
        while let slash = path[..<end].lastIndex(of: "/") {
            if chosen.contains(String(path[..<slash])) { return true }
            end = slash
        }
        return false
    }

    /// Whether `path` is covered, or is a folder above a chosen path.
    public func reaches(_ path: String) -> Bool { above.contains(path) || covers(path) }
}

/// Builds restore plans from what a probe found.
public enum RestorePlanner {
    /// The group of files that match none of the marker's groups; optional, placed last.
    public static let otherFilesGroup = "(other files)"

    /// The plan for restoring the backup a probe found into `target`: every listed file but
    /// the marker, grouped by the marker's groups (required groups first, then optional ones,
    /// each by its order, then the files no group claims), paths in byte order within a group.
    ///
    /// - Parameter only: restore only these groups (by name); nil restores all.
    public static func plan(
        marker data: Data, source: SourceRef, files: RemoteFileList, target: RestoreTarget,
        markerPath: String = SyncEngine.defaultMarkerPath, only: Set<String>? = nil
    ) throws(MarkerError) -> PlannedRestore {
        var planned: [(id: Int64, file: RestoreFile)] = []
        let outline: PlanOutline
        do {
            outline = try plan(marker: data, files: files, target: target, markerPath: markerPath, only: only) { planned.append(($0, $1)) }
        } catch let error as MarkerError {
            throw error
        } catch {
            throw .damaged(String(describing: error))  // the sink above throws nothing
        }
        return collected(planned, outline, source: source, target: target)
    }

    /// The same plan from a listing given as an array (packed here).
    public static func plan(
        marker data: Data, source: SourceRef, files: [RemoteFile], target: RestoreTarget,
        markerPath: String = SyncEngine.defaultMarkerPath, only: Set<String>? = nil
    ) throws(MarkerError) -> PlannedRestore {
        try plan(marker: data, source: source, files: RemoteFileList(files), target: target, markerPath: markerPath, only: only)
    }

    /// The same plan from a marker already decoded, and a listing given as an array.
    public static func plan(
        marker: Marker, source: SourceRef, files: [RemoteFile], target: RestoreTarget,
        markerPath: String = SyncEngine.defaultMarkerPath, only: Set<String>? = nil
    ) -> PlannedRestore {
        plan(marker: marker, source: source, files: RemoteFileList(files), target: target, markerPath: markerPath, only: only)
    }

    /// The same plan from a marker already decoded.
    public static func plan(
        marker: Marker, source: SourceRef, files: RemoteFileList, target: RestoreTarget,
        markerPath: String = SyncEngine.defaultMarkerPath, only: Set<String>? = nil
    ) -> PlannedRestore {
        var planned: [(id: Int64, file: RestoreFile)] = []
        var visitor = Planning(files: files, target: target, markerPath: markerPath, only: only) { planned.append(($0, $1)) }
        _ = visitor.header(groups: marker.groups, writer: marker.writer)
        // Its entries in byte order, then the hashes of files without one: as a stream gives them.
        do {
            for path in ByteOrder.sorted(Array(marker.entries.keys), by: { $0 }) {
                guard let entry = marker.entries[path] else { continue }
                try visitor.entry(path, entry, hash: marker.hashes[path], line: 0)
            }
            for (path, hash) in marker.hashes where marker.entries[path] == nil { try visitor.hash(path, hash, line: 0) }
        } catch {
            // Only the sink throws, and this one does not.
        }
        let outline = (try? visitor.finish()) ?? PlanOutline()
        return collected(planned, outline, source: source, target: target)
    }

    private static func collected(
        _ planned: [(id: Int64, file: RestoreFile)], _ outline: PlanOutline, source: SourceRef, target: RestoreTarget
    ) -> PlannedRestore {
        let files = planned.sorted { $0.id < $1.id }.map(\.file)
        return PlannedRestore(
            plan: RestorePlan(source: source, target: target.root, files: files, tree: outline.tree), refused: outline.refused)
    }

    /// Plans the restore as the marker streams in (`Marker.read`): each file is handed to
    /// `sink` with an id whose order is the plan's order (its group's rank, then its path's
    /// place in byte order), as soon as its entry is read. Nothing of the plan is held here
    /// but the folders and links, the refused paths and one bit per listed file: a caller
    /// that writes each file down (the restore record) never holds the plan.
    ///
    /// A hard link is kept only to a file this plan places (one placed before it: a link's
    /// target comes first in byte order).
    ///
    /// - Parameter paths: restore only these files and folders (nil: every one).
    public static func plan(
        marker data: Data, files: RemoteFileList, target: RestoreTarget, markerPath: String = SyncEngine.defaultMarkerPath,
        only: Set<String>? = nil, paths: PathSelection? = nil, pastTree: PastTree? = nil,
        into sink: (_ id: Int64, _ file: RestoreFile) throws -> Void
    ) throws -> PlanOutline {
        try withoutActuallyEscaping(sink) { sink in
            var visitor = Planning(files: files, target: target, markerPath: markerPath, only: only, paths: paths, pastTree: pastTree, sink: sink)
            do {
                try Marker.read(data, maxContentSize: Marker.contentLimit(listedFiles: files.count, markerSize: data.count), into: &visitor)
            } catch {
                // The sink's own error, not the marker's, when it was the sink that failed.
                if let failure = visitor.sinkFailure { throw failure }
                throw error
            }
            return try visitor.finish()
        }
    }

    /// A plan of a tree the backup was in the past (`restore --as-of`): its marker is a kept
    /// one, the listing holds the current files and the kept ones under their paths in the
    /// tree, and only the files that marker names are taken (a file made since is not of it).
    public struct PastTree: Sendable {
        /// Tree path → the remote path its content of then is read from, for the kept files.
        public var contentPaths: [String: String]

        public init(contentPaths: [String: String]) {
            self.contentPaths = contentPaths
        }
    }

    /// The planner as a marker's visitor: the listing, sorted once, walked beside the
    /// marker's entries (both in byte order).
    struct Planning: MarkerVisitor {
        let files: RemoteFileList
        let target: RestoreTarget
        let markerPath: String
        let only: Set<String>?
        let paths: PathSelection?
        let pastTree: PastTree?
        let sink: (Int64, RestoreFile) throws -> Void
        /// The listing's indices in byte order of their paths.
        let order: [Int]
        /// The next position of `order` no entry has reached.
        var cursor = 0
        /// Positions whose file has no entry: planned once the whole marker is read (a hash
        /// record for them may come after every entry).
        var withoutEntry: [Int] = []
        /// Hash records, by path.
        var hashes: [String: String] = [:]
        /// Whether the file at each position was planned.
        var planned: [Bool]
        var groups = Marker()
        var rank: [String: Int64] = [:]
        var tree: [TreeEntry] = []
        /// Every folder that holds something of the restore (a link may not stand there).
        var holders = Set<String>()
        var outline = PlanOutline()
        var sinkFailure: (any Error)?

        init(files: RemoteFileList, target: RestoreTarget, markerPath: String, only: Set<String>?, paths: PathSelection? = nil,
             pastTree: PastTree? = nil, sink: @escaping (Int64, RestoreFile) throws -> Void) {
            self.files = files
            self.target = target
            self.markerPath = markerPath
            self.only = only
            self.paths = paths
            self.pastTree = pastTree
            self.sink = sink
            order = files.sortedIndicesByPath()
            planned = Array(repeating: false, count: files.count)
        }

        mutating func header(groups: [MarkerGroup], writer: String?) -> Bool {
            self.groups = Marker(groups: groups, writer: writer)
            let ordered = groups.enumerated().sorted { a, b in
                if a.element.required != b.element.required { return a.element.required }
                if a.element.order != b.element.order { return a.element.order < b.element.order }
                return a.offset < b.offset
            }.map(\.element.name) + [RestorePlanner.otherFilesGroup]
            for name in ordered where rank[name] == nil { rank[name] = Int64(rank.count) }
            return true
        }

        mutating func entry(_ path: String, _ entry: MarkerEntry, hash: String?, line: Int) throws(MarkerError) {
            // The listed files before this entry have none.
            while cursor < order.count, files.comparePath(at: order[cursor], with: path) < 0 {
                withoutEntry.append(cursor)
                cursor += 1
            }
            switch entry.kind {
            case .folder, .symlink:
                treeEntry(path, entry)
            case .file, .hardLink:
                var matched = false
                while cursor < order.count, files.comparePath(at: order[cursor], with: path) == 0 {
                    if !matched { try take(cursor, entry: entry, hash: hash) }
                    matched = true
                    cursor += 1
                }
            }
        }

        mutating func hash(_ path: String, _ hex: String, line: Int) throws(MarkerError) {
            hashes[path] = hex
        }

        /// A hard link's target was an earlier file of this plan (checked where it is taken).
        func isEarlierFile(_ path: String) -> Bool { true }

        /// Plans the files no entry named, and returns what was found besides the files.
        mutating func finish() throws -> PlanOutline {
            if let sinkFailure { throw sinkFailure }
            withoutEntry += Array(cursor..<order.count)
            cursor = order.count
            for position in withoutEntry {
                let hash = hashes.isEmpty ? nil : hashes[files.path(at: order[position])]
                // A past tree has only what its marker names.
                if pastTree != nil && hash == nil { continue }
                do {
                    try take(position, entry: nil, hash: hash)
                } catch {
                    throw sinkFailure ?? error
                }
            }
            for entry in tree { insertFolders(of: entry.path, into: &holders) }
            tree.removeAll { entry in
                guard case .symlink = entry.kind, holders.contains(entry.path) else { return false }
                outline.refused.append(RefusedPath(remotePath: entry.path, reason: "it is a symbolic link, and files of the backup lie below it; "
                    + "making it would put them behind a link"))
                return true
            }
            outline.tree = ByteOrder.sorted(tree, by: \.path)
            outline.refused.sort { $0.remotePath.utf8.lexicographicallyPrecedes($1.remotePath.utf8) }
            return outline
        }

        /// A folder or link of the marker, checked as a file's path is.
        private mutating func treeEntry(_ path: String, _ entry: MarkerEntry) {
            if let only, !only.contains(groups.group(for: path)?.name ?? RestorePlanner.otherFilesGroup) { return }
            // A folder above a chosen path comes too; a link only where it is covered.
            if let paths, !(entry.kind == .folder ? paths.reaches(path) : paths.covers(path)) { return }
            do throws(RefusedPath) {
                try target.check(path)
            } catch {
                outline.refused.append(error)
                return
            }
            tree.append(TreeEntry(path: path, kind: entry.kind, metadata: entry.metadata))
        }

        /// Plans the listed file at `position` (of `order`), or refuses it, or leaves it out.
        private mutating func take(_ position: Int, entry: MarkerEntry?, hash: String?) throws(MarkerError) {
            let file = files[order[position]]
            if file.path == markerPath { return }
            // A listing that names a path twice (a damaged or hostile server) keeps its first
            // entry; two names that differ only in Unicode normalisation are two files.
            if position > 0, files.comparePaths(order[position - 1], order[position]) == 0 { return }
            if file.foreignSpelling {
                outline.refused.append(RefusedPath(remotePath: file.path, reason: "the remote lists it under a spelling this program "
                    + "never writes (a lone \u{201B}, a control character, or a private-use escape that stands for no byte "
                    + "of a name), so it is not part of a backup and no request could read it"))
                return
            }
            let group = groups.group(for: file.path)
            let name = group?.name ?? RestorePlanner.otherFilesGroup
            if let only, !only.contains(name) { return }
            if let paths, !paths.covers(file.path) { return }
            do {
                try target.check(file.path)
            } catch {
                outline.refused.append(error)
                return
            }
            if file.size < 0 {
                outline.refused.append(RefusedPath(remotePath: file.path, reason: "the remote lists it with a negative size (\(file.size))"))
                return
            }
            // A hard link is made only to a file this restore places.
            var hardLinkTo: String?
            if case .hardLink(let first)? = entry?.kind, let at = listed(first), at < position, planned[at] {
                hardLinkTo = first
            }
            planned[position] = true
            insertFolders(of: file.path, into: &holders)
            outline.files += 1
            outline.bytes += file.size
            let id = (rank[name] ?? Int64(rank.count)) << 40 | Int64(position)
            do {
                try sink(id, RestoreFile(
                    remotePath: pastTree?.contentPaths[file.path] ?? file.path, placePath: file.path, required: group?.required ?? false, group: name,
                    sha256: hash, size: file.size, metadata: entry?.metadata, hardLinkTo: hardLinkTo))
            } catch {
                sinkFailure = error
                throw .damaged("the plan could not be written down")  // replaced by the sink's error
            }
        }

        /// Where `path` is in `order` (bisection by bytes), or nil when not listed.
        private func listed(_ path: String) -> Int? {
            var low = 0, high = order.count
            while low < high {
                let middle = (low + high) / 2
                let order = ByteOrder.compare(files[self.order[middle]].path, path)
                if order == 0 {
                    // The first of equal paths.
                    var first = middle
                    while first > 0, ByteOrder.compare(files[self.order[first - 1]].path, path) == 0 { first -= 1 }
                    return first
                }
                if order < 0 { low = middle + 1 } else { high = middle }
            }
            return nil
        }
    }
}

/// A group offered for placement, with what placing it would overwrite.
public struct PlacementOffer: Sendable, Equatable {
    public var group: RestoreGroup
    public var conflicts: [PlacementConflict]
    /// Whether the person already allowed replacing local files that differ (`--overwrite`);
    /// when not, whoever answers asks before placing over them.
    public var overwriteAllowed: Bool

    public init(group: RestoreGroup, conflicts: [PlacementConflict], overwriteAllowed: Bool = false) {
        self.group = group
        self.conflicts = conflicts
        self.overwriteAllowed = overwriteAllowed
    }

    /// The files whose local copy has other contents.
    public var differing: [PlacementConflict] { conflicts.filter { $0.kind == .differentFile } }
    /// Whether placing the group asks a second time first: it would replace local files that
    /// differ, and --overwrite did not already allow that.
    public var asksBeforeOverwriting: Bool { !overwriteAllowed && !differing.isEmpty }
    /// The answer that places the group but for those files, whose local copies stay.
    public var keepingLocal: PlacementDecision { .placedKeepingLocal(Set(differing.map(\.remotePath))) }
}

/// Placement into a RestoreTarget: a group is checked for conflicts, offered to `decide`,
/// and when placed its staged files are renamed into place.
public struct StagedPlacement: RestorePlacement {
    public let target: RestoreTarget
    /// Whether a local file with other contents may be replaced. When not, a group with such
    /// a conflict is rejected (and reported through `onConflict`) without asking.
    public let overwrite: Bool
    /// Whether a group with conflicts is still offered to `decide` (someone is asked) when
    /// `overwrite` is off; `decide` then asks before it answers `.placed` over them.
    public let offersConflicts: Bool
    private let decide: @Sendable (PlacementOffer) async -> PlacementDecision
    private let onConflict: @Sendable (PlacementOffer) -> Void

    public init(
        target: RestoreTarget, overwrite: Bool = false, offersConflicts: Bool = false,
        decide: @escaping @Sendable (PlacementOffer) async -> PlacementDecision = { _ in .placed },
        onConflict: @escaping @Sendable (PlacementOffer) -> Void = { _ in }
    ) {
        self.target = target
        self.overwrite = overwrite
        self.offersConflicts = offersConflicts
        self.decide = decide
        self.onConflict = onConflict
    }

    public func place(_ group: RestoreGroup) async throws -> PlacementDecision {
        let conflicts = try target.conflicts(for: group.files)
        let offer = PlacementOffer(group: group, conflicts: conflicts, overwriteAllowed: overwrite)
        if !overwrite && !offersConflicts && !conflicts.isEmpty {
            onConflict(offer)
            return .rejected
        }
        let decision = await decide(offer)
        // A quit while the question was open is a stop, not an answer: no attempt is counted.
        try Task.checkCancellation()
        switch decision {
        case .placed: try target.place(group.files)
        case .placedKeepingLocal(let kept):
            // The kept files' downloads stay staged, for the next run to ask about again.
            try target.place(group.files.filter { !kept.contains($0.remotePath) })
        case .rejected: break
        }
        return decision
    }
}
