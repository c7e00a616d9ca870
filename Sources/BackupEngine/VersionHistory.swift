// What the versions folder holds, read back: the kept runs, the files each kept, and which
// tree was the backup at a given time (for `restore --as-of`, `backup versions`). Every name
// is the remote's word: only folders named as runs are read, only paths under them that are
// valid relative paths are taken, and a record that does not parse is no record.

import Foundation

/// The versions a remote keeps.
public struct VersionHistory: Sendable {
    /// One kept run.
    public struct Run: Sendable, Equatable {
        /// `YYYYMMDDTHHMMSSZ`: when the run began keeping.
        public var name: String
        public var date: Date
        /// Whether `<name>.json` is there (a run stopped before its marker has none).
        public var hasRecord: Bool
        /// Whether the run kept the marker it replaced: the tree before it can be rebuilt.
        public var hasMarker = false
        /// The files it kept (the marker left out), and their bytes, as listed.
        public var files = 0
        public var bytes: Int64 = 0
    }

    /// Oldest first.
    public var runs: [Run]
    /// Every kept file: its path in the tree, the run (an index of `runs`) and its size as listed.
    public var kept: [(path: String, run: Int, size: Int64)]
    /// Entries under the versions folder that are not a run's (left alone).
    public var foreign = 0

    /// Lists the versions folder of `storage` (one listing of its names, one of its files).
    public static func read(_ storage: any RemoteStorage, markerPath: String = SyncEngine.defaultMarkerPath) async throws -> VersionHistory {
        let names = try await storage.listNames(in: VersionStore.folder)
        var runs = VersionStore.runs(in: names).map { Run(name: $0.name, date: $0.date, hasRecord: $0.hasRecord) }
        var index: [String: Int] = [:]
        for (position, run) in runs.enumerated() { index[run.name] = position }
        var history = VersionHistory(runs: runs, kept: [])
        guard !runs.isEmpty else { return history }
        let files = try await storage.listFolder(VersionStore.folder)
        let prefix = VersionStore.folder + "/"
        for position in files.indices where !files.foreignSpelling(at: position) {
            let full = files.path(at: position)
            guard full.hasPrefix(prefix) else { continue }
            let rest = full.dropFirst(prefix.count)
            guard let slash = rest.firstIndex(of: "/"), let run = index[String(rest[..<slash])] else {
                history.foreign += 1
                continue
            }
            let path = String(rest[rest.index(after: slash)...])
            guard (try? RelativePath.components(of: path)) != nil else {
                history.foreign += 1
                continue
            }
            if path == markerPath {
                runs[run].hasMarker = true
                continue
            }
            runs[run].files += 1
            runs[run].bytes += files.size(at: position)
            history.kept.append((path, run, files.size(at: position)))
        }
        history.runs = runs
        return history
    }

    /// The record of `run` on `storage`, where it has one that parses.
    public static func record(of run: Run, on storage: any RemoteStorage) async -> VersionRecord? {
        guard run.hasRecord, let bytes = try? await storage.readBytes(VersionStore.recordPath(run: run.name)) else { return nil }
        return VersionRecord.decode(bytes)
    }

    /// Why no tree can be given for a time.
    public enum AsOfRefusal: Error, Sendable, Equatable {
        /// The remote keeps no versions at all.
        case noVersions
        /// The time is before the oldest tree kept: that of the oldest run, named, from `since`.
        case beforeOldest(Run, since: Date)
    }

    /// The tree the backup was at a time: the marker to read, and the files whose content of
    /// then is kept in a run's folder (the others are the remote's current files).
    public struct AsOf: Sendable {
        /// The run whose folder keeps the marker of then; nil: the current marker.
        public var markerRun: Run?
        /// Tree path → the remote path of its content of then and its size.
        public var fromVersions: [String: RemoteFile]
    }

    /// The oldest time a tree can be given for: when the marker the oldest run kept was
    /// written, where its record says, else when that run began.
    public func oldestTime(record: (Run) async -> VersionRecord?) async -> Date? {
        guard let oldest = runs.first else { return nil }
        return Self.treeSince(oldest, await record(oldest))
    }

    /// Since when the tree a run kept (the marker it replaced) was the backup's: its record's
    /// word where it has one that makes sense, else the run's own start.
    public static func treeSince(_ run: Run, _ record: VersionRecord?) -> Date {
        if run.hasMarker, let since = record?.previousDate, since <= run.date { return since }
        return run.date
    }

    /// The tree at `time`. `record` gives a run's record, asked for two runs at most: the
    /// oldest (for the oldest time) and the last one that began before `time`, which may have
    /// ended after it.
    public func asOf(_ time: Date, record: (Run) async -> VersionRecord?) async throws(AsOfRefusal) -> AsOf {
        guard let oldest = runs.first, let since = await oldestTime(record: record) else { throw .noVersions }
        guard time >= since else { throw .beforeOldest(oldest, since: since) }
        // The first run that began after the time changed the tree after it; so may the one
        // before it, if it ended after the time.
        var first = runs.firstIndex { $0.date > time } ?? runs.count
        if first > 0, let ended = await record(runs[first - 1])?.committedDate, ended > time { first -= 1 }
        // The tree of then is the marker the first of those runs to keep one kept (a run that
        // stopped before its marker changed no tree); none: the current marker.
        let markerRun = runs[first...].first { $0.hasMarker }
        // Each file's content of then: in the first of those runs that kept it (it moved its
        // content of then away), else still the remote's current file.
        var earliest: [String: (run: Int, size: Int64)] = [:]
        for file in kept where file.run >= first {
            if let found = earliest[file.path], found.run <= file.run { continue }
            earliest[file.path] = (file.run, file.size)
        }
        var fromVersions: [String: RemoteFile] = [:]
        for (path, found) in earliest {
            fromVersions[path] = RemoteFile(path: VersionStore.path(run: runs[found.run].name, path), size: found.size)
        }
        return AsOf(markerRun: markerRun, fromVersions: fromVersions)
    }

    /// The kept versions of one file (its path in the tree), oldest first: the run and the size.
    public func versions(of path: String) -> [(run: Run, size: Int64)] {
        kept.filter { $0.path == path }.sorted { $0.run < $1.run }.map { (runs[$0.run], $0.size) }
    }
}
