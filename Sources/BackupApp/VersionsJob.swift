// `backup versions [PATH]`: the runs a remote keeps versions of (when, what they replaced and
// deleted, how many bytes), or one file's kept versions. It only reads.

import BackupEngine
import BackupStorage
import Foundation

/// One kept run, as `backup versions` shows it.
public struct KeptRun: Sendable, Equatable {
    public var run: VersionHistory.Run
    /// Its record, where it has one that parses (a run stopped before its marker has none).
    public var record: VersionRecord?
}

/// What `backup versions` found.
public struct VersionsListing: Sendable {
    /// Oldest first.
    public var runs: [KeptRun]
    /// For `backup versions PATH`: that file's kept versions, oldest first (run, size).
    public var fileVersions: [(run: VersionHistory.Run, size: Int64)] = []
    /// For `backup versions PATH`: the file as the remote holds it now, if it does.
    public var current: RemoteFile?
    /// The oldest time `restore --as-of` takes, nil without versions: when the marker the
    /// oldest run kept was written, where its record says, else when that run began.
    public var oldest: Date? {
        runs.first.map { VersionHistory.treeSince($0.run, $0.record) }
    }
}

extension BackupApp {
    /// The versions `profile`'s remote (or `remoteURL`) keeps; with `path`, that file's too.
    public func versions(_ profile: Profile?, remoteURL: String?, path: String?) async throws(AppError) -> VersionsListing {
        guard let url = remoteURL ?? profile?.remote else { throw .usage("versions needs a profile or --remote URL") }
        if let path, (try? RelativePath.components(of: path)) == nil {
            throw .usage("\(TerminalText.visible(path)) is not a path in the backup: give it as the backup names it "
                + "(relative to its top, like docs/taxes/2025.pdf), without \".\", \"..\" or empty parts")
        }
        let remote = try await openJobRemote(url, settings: profile?.settings ?? [:], readOnly: true, encrypted: Encryption.of(profile, url: url))
        if remote.availability == .noAccount {
            throw AppError(.unavailable, Explanations.of(.noAccount, remote: remote.displayURL).scripted)
        }
        let storage = remote.storage
        do {
            let history = try await VersionHistory.read(storage)
            // The records, a few at a time: one small read each.
            var records: [String: VersionRecord] = [:]
            try await withThrowingTaskGroup(of: (String, VersionRecord?).self) { group in
                var pending = history.runs.filter(\.hasRecord)
                var running = 0
                while true {
                    while running < 8, let run = pending.popLast() {
                        group.addTask { (run.name, await VersionHistory.record(of: run, on: storage)) }
                        running += 1
                    }
                    guard running > 0, let (name, record) = try await group.next() else { break }
                    running -= 1
                    records[name] = record
                }
            }
            var listing = VersionsListing(runs: history.runs.map { KeptRun(run: $0, record: records[$0.name]) })
            if let path {
                listing.fileVersions = history.versions(of: path)
                let files = try await storage.list()
                if let at = files.indices.first(where: { files.comparePath(at: $0, with: path) == 0 && !files.foreignSpelling(at: $0) }) {
                    listing.current = files[at]
                }
            }
            return listing
        } catch {
            throw AppError.from(error)
        }
    }
}
