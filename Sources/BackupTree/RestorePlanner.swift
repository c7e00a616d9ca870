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
        marker data: Data, source: SourceRef, files: [RemoteFile], target: RestoreTarget,
        markerPath: String = SyncEngine.defaultMarkerPath, only: Set<String>? = nil
    ) throws(MarkerError) -> PlannedRestore {
        let marker = try Marker.decode(data, maxContentSize: Marker.contentLimit(listedFiles: files.count, markerSize: data.count))
        return plan(marker: marker, source: source, files: files, target: target, markerPath: markerPath, only: only)
    }

    /// The same plan from a marker already decoded (a caller that also reads its groups or
    /// writer decodes it once).
    public static func plan(
        marker: Marker, source: SourceRef, files: [RemoteFile], target: RestoreTarget,
        markerPath: String = SyncEngine.defaultMarkerPath, only: Set<String>? = nil
    ) -> PlannedRestore {
        var refused: [RefusedPath] = []
        var byGroup: [String: [RestoreFile]] = [:]
        // The listing in byte order, so each group's files come out sorted. A listing that names
        // a path twice (a damaged or hostile server) keeps its first entry; two names that differ
        // only in Unicode normalisation are two files.
        let order = ByteOrder.sortedIndices(files.map(\.path))
        for (position, index) in order.enumerated() {
            let file = files[index]
            if file.path == markerPath { continue }
            if position > 0, files[order[position - 1]].path.utf8.elementsEqual(file.path.utf8) { continue }
            if file.foreignSpelling {
                refused.append(RefusedPath(remotePath: file.path, reason: "the remote lists it under a spelling this program "
                    + "never writes (a lone \u{201B}, a control character, or a private-use escape that stands for no byte "
                    + "of a name), so it is not part of a backup and no request could read it"))
                continue
            }
            let group = marker.group(for: file.path)
            let name = group?.name ?? otherFilesGroup
            if let only, !only.contains(name) { continue }
            do {
                try target.check(file.path)
            } catch {
                refused.append(error)
                continue
            }
            if file.size < 0 {
                refused.append(RefusedPath(remotePath: file.path, reason: "the remote lists it with a negative size (\(file.size))"))
                continue
            }
            let entry = marker.entries[file.path]
            var hardLinkTo: String?
            if case .hardLink(let first)? = entry?.kind { hardLinkTo = first }
            byGroup[name, default: []].append(RestoreFile(
                remotePath: file.path, placePath: file.path, required: group?.required ?? false, group: name,
                sha256: marker.hashes[file.path], size: file.size, metadata: entry?.metadata, hardLinkTo: hardLinkTo))
        }
        let ordered = marker.groups.enumerated().sorted { a, b in
            if a.element.required != b.element.required { return a.element.required }
            if a.element.order != b.element.order { return a.element.order < b.element.order }
            return a.offset < b.offset
        }.map(\.element.name) + [otherFilesGroup]
        var planned: [RestoreFile] = []
        planned.reserveCapacity(byGroup.values.reduce(0) { $0 + $1.count })
        var named = Set<String>()
        for name in ordered where named.insert(name).inserted {
            // Taken out of the dictionary and appended (already in byte order): never two copies of a group.
            guard let group = byGroup.removeValue(forKey: name) else { continue }
            planned += group
        }
        // A hard link is made only to a file this restore places.
        if planned.contains(where: { $0.hardLinkTo != nil }) {
            let placed = Set(planned.map(\.placePath))
            for index in planned.indices where planned[index].hardLinkTo.map({ !placed.contains($0) }) ?? false {
                planned[index].hardLinkTo = nil
            }
        }
        let tree = treeEntries(marker, files: planned, target: target, only: only, refused: &refused)
        refused.sort { $0.remotePath.utf8.lexicographicallyPrecedes($1.remotePath.utf8) }
        return PlannedRestore(plan: RestorePlan(source: source, target: target.root, files: planned, tree: tree), refused: refused)
    }

    /// The marker's folders and symbolic links to make, sorted by path: each checked as a
    /// file's path is, and a link refused where a file or folder of the restore lies below it
    /// (making it would put them behind the link; a link's target is never a path inside the
    /// target, it is only ever created).
    static func treeEntries(
        _ marker: Marker, files: [RestoreFile], target: RestoreTarget, only: Set<String>?, refused: inout [RefusedPath]
    ) -> [TreeEntry] {
        var tree: [TreeEntry] = []
        for (path, entry) in marker.entries {
            switch entry.kind {
            case .folder, .symlink: break
            case .file, .hardLink: continue
            }
            if let only, !only.contains(marker.group(for: path)?.name ?? otherFilesGroup) { continue }
            do throws(RefusedPath) {
                try target.check(path)
            } catch {
                refused.append(error)
                continue
            }
            tree.append(TreeEntry(path: path, kind: entry.kind, metadata: entry.metadata))
        }
        // Every folder that holds something of the restore: a link may not stand there.
        var holders = Set<String>()
        for file in files { insertFolders(of: file.placePath, into: &holders) }
        for entry in tree { insertFolders(of: entry.path, into: &holders) }
        tree.removeAll { entry in
            guard case .symlink = entry.kind, holders.contains(entry.path) else { return false }
            refused.append(RefusedPath(remotePath: entry.path, reason: "it is a symbolic link, and files of the backup lie below it; "
                + "making it would put them behind a link"))
            return true
        }
        return ByteOrder.sorted(tree, by: \.path)
    }
}

/// A group offered for placement, with what placing it would overwrite.
public struct PlacementOffer: Sendable, Equatable {
    public var group: RestoreGroup
    public var conflicts: [PlacementConflict]
}

/// Placement into a RestoreTarget: a group is checked for conflicts, offered to `decide`,
/// and when placed its staged files are renamed into place.
public struct StagedPlacement: RestorePlacement {
    public let target: RestoreTarget
    /// Whether a local file with other contents may be replaced. When not, a group with such
    /// a conflict is rejected (and reported through `onConflict`) without asking.
    public let overwrite: Bool
    private let decide: @Sendable (PlacementOffer) async -> PlacementDecision
    private let onConflict: @Sendable (PlacementOffer) -> Void

    public init(
        target: RestoreTarget, overwrite: Bool = false,
        decide: @escaping @Sendable (PlacementOffer) async -> PlacementDecision = { _ in .placed },
        onConflict: @escaping @Sendable (PlacementOffer) -> Void = { _ in }
    ) {
        self.target = target
        self.overwrite = overwrite
        self.decide = decide
        self.onConflict = onConflict
    }

    public func place(_ group: RestoreGroup) async throws -> PlacementDecision {
        let conflicts = try group.files.compactMap { try target.conflict(for: $0) }
        let offer = PlacementOffer(group: group, conflicts: conflicts)
        if !overwrite && !conflicts.isEmpty {
            onConflict(offer)
            return .rejected
        }
        let decision = await decide(offer)
        // A quit while the question was open is a stop, not an answer: no attempt is counted.
        try Task.checkCancellation()
        if decision == .placed { try target.place(group.files) }
        return decision
    }
}
