// `backup verify`: proves what the remote holds against what its marker says. The listing
// against the marker (missing, extra, another size); with `--read-data`, every file (or a
// rolling share of them) downloaded and checked against the SHA-256 the marker gives. It
// never writes to the remote; the rolling share's place is kept in the profile's state.

import BackupEngine
import BackupStorage
import BackupTree
import Foundation
import Synchronization

/// What `backup verify` was asked to do.
public struct VerifyRequest: Sendable {
    /// `--remote`: verify this remote instead of a profile's.
    public var remoteURL: String?
    /// `--read-data[=PERCENT]`: nil reads no data; 100 every file; 1...99 a rolling share.
    public var readData: Int?

    public init(remoteURL: String? = nil, readData: Int? = nil) {
        self.remoteURL = remoteURL
        self.readData = readData
    }
}

/// One file verify found wrong.
public struct VerifyFinding: Sendable, Equatable {
    public enum Kind: String, Sendable {
        /// The marker names it, the remote does not list it.
        case missing
        /// The remote lists it at another size than the marker gives.
        case sizeMismatch
        /// Its bytes are not the ones the marker's SHA-256 names.
        case hashMismatch
        /// Encrypted, it does not decrypt: its bytes on the remote were changed.
        case undecryptable
        /// The remote lists it, the marker does not name it (not damage: a stray file).
        case extra
    }

    public var path: String
    public var kind: Kind
    public var message: String
}

/// How `backup verify` ended.
public struct VerifySummary: Sendable {
    public var remote: String
    /// Files the marker names.
    public var files = 0
    /// Files downloaded and checked, and their bytes.
    public var checked = 0
    public var checkedBytes: Int64 = 0
    /// Files chosen for reading that the marker gives no SHA-256 for (size-compared ones
    /// written by an older version): their size was checked only.
    public var withoutHash = 0
    public var findings: [VerifyFinding] = []
    /// The rolling share this run read: buckets `from..<to` of 100 (wrapping), nil when all or none.
    public var share: (from: Int, to: Int)?
    /// The probe found no backup to verify.
    public var probe: ProbeOutcome?

    public var damaged: [VerifyFinding] { findings.filter { $0.kind != .extra } }

    public var status: ExitStatus {
        if let probe {
            switch probe {
            case .failed: return .failure
            case .damaged: return .damaged
            default: return .unavailable
            }
        }
        return damaged.isEmpty ? .success : .damaged
    }
}

extension BackupApp {
    /// Verifies `profile`'s remote (or `request.remoteURL`), reporting progress through `events`.
    public func verify(_ profile: Profile?, _ request: VerifyRequest, events: @escaping JobEvents = { _ in }) async throws(AppError) -> VerifySummary {
        guard let url = request.remoteURL ?? profile?.remote else { throw .usage("verify needs a profile or --remote URL") }
        if let share = request.readData, !(1...100).contains(share) {
            throw .usage("--read-data=\(share): give a percentage from 1 to 100 (or --read-data alone for every file)")
        }
        let rollingProfile = request.readData.map { $0 < 100 } == true ? profile : nil
        if request.readData.map({ $0 < 100 }) == true, profile == nil || request.remoteURL != nil {
            throw .usage("--read-data=PERCENT reads a rolling share that successive runs carry on from: it needs a profile "
                + "(its state keeps where the last run stopped); with --remote, use --read-data for every file")
        }
        // A sync of the profile running meanwhile would make its own writes look like damage.
        var lock: ProfileLock?
        if let profile { lock = try ProfileLock(path: paths.lockFile(profile: profile.name), profile: profile.name) }
        defer { lock?.release() }
        let remote = try await openJobRemote(url, settings: profile?.settings ?? [:], readOnly: true, encrypted: Encryption.of(profile, url: url))
        let meter = TransferMeter()
        let storage = meter.observing(remote.storage)
        let availability = remote.availability
        var summary = VerifySummary(remote: remote.displayURL)
        do {
            events(.phase("listing"))
            let probe = await Probe(storage: storage, availability: { availability }).run()
            Self.reportListingNotes(remote.storage, events)
            guard case .found(let marker, _, let listed) = probe else {
                summary.probe = probe
                return summary
            }
            var expected = ExpectedFiles()
            do {
                try Marker.read(marker, maxContentSize: Marker.contentLimit(listedFiles: listed.count, markerSize: marker.count), into: &expected)
            } catch {
                throw AppError(.damaged, "the backup's marker on \(remote.displayURL) cannot be read: \(error); nothing was verified")
            }
            let files = expected.finish()
            summary.files = files.count

            // The listing against the marker, both in byte order.
            let order = listed.sortedIndicesByPath()
            var position = 0
            var toRead: [(file: Int, size: Int64)] = []
            var rolling: (from: Int, to: Int)?
            if let share = request.readData, share < 100, let rollingProfile {
                let from = Int(try openState(rollingProfile).meta(Self.verifyNextKey) ?? "0").map { (($0 % 100) + 100) % 100 } ?? 0
                rolling = (from, (from + share) % 100 == 0 ? 100 : (from + share) % 100)
                summary.share = rolling
            }
            func chosen(_ path: String) -> Bool {
                guard request.readData != nil else { return false }
                guard let (from, to) = rolling else { return true }
                let bucket = Self.verifyBucket(path)
                return from < to ? (from..<to).contains(bucket) : bucket >= from || bucket < to
            }
            func extra(_ index: Int) {
                let path = listed.path(at: index)
                guard path != SyncEngine.defaultMarkerPath else { return }
                summary.findings.append(VerifyFinding(path: path, kind: .extra, message: "\(path) is on the remote, but the marker does not name it"))
            }
            for (index, file) in files.enumerated() {
                while position < order.count, listed.comparePath(at: order[position], with: file.path) < 0 {
                    extra(order[position])
                    position += 1
                }
                guard position < order.count, listed.comparePath(at: order[position], with: file.path) == 0 else {
                    summary.findings.append(VerifyFinding(path: file.path, kind: .missing, message: "\(file.path) is in the backup's marker, but the remote does not hold it"))
                    continue
                }
                let size = listed.size(at: order[position])
                position += 1
                while position < order.count, listed.comparePath(at: order[position], with: file.path) == 0 { position += 1 }
                if let want = file.size, want != size {
                    summary.findings.append(VerifyFinding(path: file.path, kind: .sizeMismatch,
                        message: "\(file.path) is \(want) bytes in the backup's marker, but the remote lists \(size)"))
                    continue
                }
                if chosen(file.path) { toRead.append((index, size)) }
            }
            while position < order.count {
                extra(order[position])
                position += 1
            }
            for finding in summary.damaged {
                events(.fileFailed(path: finding.path, kind: finding.kind.rawValue, message: finding.message, damage: true))
            }

            if !toRead.isEmpty {
                events(.phase("reading"))
                meter.expect(toRead.reduce(0) { $0 + $1.size })
                let progress: @Sendable ((done: Int, total: Int)) -> Void = meter.progress { counts, reading in
                    events(.verifyProgress(done: counts.done, total: counts.total, transfer: reading))
                }
                progress((0, toRead.count))
                let read = try await Self.readAndCheck(toRead, of: files, storage: storage, transfers: profile?.transfers ?? Profile.defaultTransfers,
                                                       progress: progress, events: events)
                summary.checked = read.checked
                summary.checkedBytes = read.bytes
                summary.withoutHash = read.withoutHash
                summary.findings += read.findings
            }
            if let rolling, let rollingProfile {
                try openState(rollingProfile).setMeta(Self.verifyNextKey, String(rolling.to % 100))
            }
            summary.findings.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
            return summary
        } catch {
            throw AppError.from(error)
        }
    }

    /// Where the rolling `--read-data=PERCENT` starts next (0...99), in the profile's state.
    static let verifyNextKey = "verifyNext"

    /// A path's bucket of 100 for the rolling share: from the SHA-256 of its bytes, so it never
    /// moves, and the buckets fill evenly.
    static func verifyBucket(_ path: String) -> Int {
        let digest = SHA256Hasher.hex(Data(path.utf8))
        return Int(UInt32(digest.prefix(8), radix: 16) ?? 0) % 100
    }

    /// Downloads each file into a private temporary file (one per transfer in flight, reused)
    /// and checks its size and SHA-256.
    private static func readAndCheck(
        _ chosen: [(file: Int, size: Int64)], of all: [ExpectedFiles.File], storage: any RemoteStorage, transfers: Int,
        progress: @escaping @Sendable ((done: Int, total: Int)) -> Void, events: @escaping JobEvents
    ) async throws -> (checked: Int, bytes: Int64, withoutHash: Int, findings: [VerifyFinding]) {
        var checked = 0, bytes: Int64 = 0, withoutHash = 0
        var findings: [VerifyFinding] = []
        let workers = max(1, min(transfers, chosen.count))
        var descriptors: [Int32] = []
        defer { descriptors.forEach { close($0) } }
        for _ in 0..<workers {
            var template = Array((NSTemporaryDirectory() + "/backup-verify.XXXXXX").utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.map { mkstemp($0) } ?? -1 }
            guard fd >= 0 else { throw AppError(.failure, "cannot make a temporary file to verify into: \(String(cString: strerror(errno)))") }
            template.withUnsafeBufferPointer { buffer in _ = buffer.baseAddress.map { unlink($0) } }
            descriptors.append(fd)
        }
        try await withThrowingTaskGroup(of: (Int, VerifyFinding?).self) { group in
            var next = 0
            var free = descriptors
            var busy: [Int: Int32] = [:]
            var done = 0
            while true {
                while next < chosen.count, let fd = free.popLast() {
                    let index = next
                    let file = (path: all[chosen[index].file].path, size: chosen[index].size, hash: all[chosen[index].file].hash)
                    busy[index] = fd
                    next += 1
                    group.addTask {
                        try Task.checkCancellation()
                        guard ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) == 0 else {
                            throw AppError(.failure, "cannot write the temporary file to verify into: \(String(cString: strerror(errno)))")
                        }
                        do {
                            try await storage.downloadFile(file.path, into: fd, expectedSize: file.size, onBytes: { _ in })
                        } catch let mismatch as DownloadSizeMismatch {
                            return (index, VerifyFinding(path: file.path, kind: .sizeMismatch, message: mismatch.description))
                        } catch let damaged as UndecryptableDownload {
                            return (index, VerifyFinding(path: file.path, kind: .undecryptable, message: damaged.description))
                        } catch let error as CloudError where error.kind == .notFound {
                            return (index, VerifyFinding(path: file.path, kind: .missing, message: "\(file.path) was listed, but cannot be read: \(error.message)"))
                        }
                        guard let want = file.hash else { return (index, nil) }
                        // Read back from its first byte in one pass (pread: the offset stays), as a restore checks a download.
                        let (got, _) = try SHA256Hasher.digestAndSize(
                            ofOpenFile: fd, expectedSize: file.size, displayPath: "the downloaded copy of \(file.path)")
                        return (index, got == want ? nil : VerifyFinding(path: file.path, kind: .hashMismatch,
                            message: "\(file.path) does not hold the bytes the backup's marker names (SHA-256 \(got.hex), not \(want.hex))"))
                    }
                }
                guard let (index, finding) = try await group.next() else { break }
                if let fd = busy.removeValue(forKey: index) { free.append(fd) }
                done += 1
                if let finding {
                    findings.append(finding)
                    events(.fileFailed(path: finding.path, kind: finding.kind.rawValue, message: finding.message, damage: true))
                } else {
                    checked += 1
                    bytes += chosen[index].size
                    if all[chosen[index].file].hash == nil { withoutHash += 1 }
                }
                progress((done, chosen.count))
            }
        }
        return (checked, bytes, withoutHash, findings)
    }
}

/// The files a marker names, with their sizes (format 3) and SHA-256s, in byte order of paths.
struct ExpectedFiles: MarkerVisitor {
    struct File {
        var path: String
        var size: Int64?
        var hash: SHA256Digest?
    }

    private var entries: [File] = []
    /// Hash records (markers before format 3 have only those).
    private var hashes: [String: SHA256Digest] = [:]

    mutating func header(groups: [MarkerGroup], writer: String?) -> Bool { true }

    mutating func entry(_ path: String, _ entry: MarkerEntry, hash: String?, line: Int) throws(MarkerError) {
        switch entry.kind {
        case .file, .hardLink:
            entries.append(File(path: path, size: entry.size, hash: hash.flatMap(SHA256Digest.init(hex:))))
        case .folder, .symlink:
            break
        }
    }

    mutating func hash(_ path: String, _ hex: String, line: Int) throws(MarkerError) {
        hashes[path] = SHA256Digest(hex: hex)
    }

    /// Verify reads no link: a hard link is checked as the file it names is.
    func isEarlierFile(_ path: String) -> Bool { true }

    /// Every file, sorted by its path's bytes: the entries, and the files only a hash record names.
    mutating func finish() -> [File] {
        guard !hashes.isEmpty else { return entries }
        var all = entries
        let named = Set(entries.map(\.path))
        for (path, digest) in hashes where !named.contains(path) { all.append(File(path: path, size: nil, hash: digest)) }
        for index in all.indices where all[index].hash == nil { all[index].hash = hashes[all[index].path] }
        return ByteOrder.sorted(all, by: \.path)
    }
}
