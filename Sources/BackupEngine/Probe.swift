// What SyncEngine.probe() finds on the remote, and the reference that pins a backup so a
// later restore can tell whether it is still the same one.

import Foundation

/// Pins one backup: the remote's identity and the exact marker it was read from.
public struct SourceRef: Sendable, Equatable, Codable {
    /// The identity of the remote (rule 3) when the probe ran.
    public var identityKey: String
    /// The marker's remote id, where the provider has one.
    public var markerRemoteId: String?
    /// The SHA-256 of the marker's bytes.
    public var markerFingerprint: String

    public init(identityKey: String, markerRemoteId: String?, markerFingerprint: String) {
        self.identityKey = identityKey
        self.markerRemoteId = markerRemoteId
        self.markerFingerprint = markerFingerprint
    }

    /// Whether `other` is the same backup: same identity and same marker bytes. Any write
    /// of the marker with different bytes counts as a changed source.
    public func matches(_ other: SourceRef) -> Bool {
        identityKey == other.identityKey && markerFingerprint == other.markerFingerprint
    }
}

/// The outcome of a probe, in the contract's order of checks.
public enum ProbeOutcome: Sendable, Equatable {
    /// The availability gate said no; the remote was not touched.
    case unavailable(UnavailableReason)
    /// Listing the remote failed.
    case failed(CloudError)
    /// The remote holds no files at all.
    case none
    /// The remote holds files but no marker, or a marker that cannot be read yet.
    case notReady
    /// The remote's data failed a check before it was read (a marker larger than a backup of
    /// the listed size can need); the message says what and what to do.
    case damaged(String)
    /// A complete backup: the marker's bytes, its reference, and every file (marker included).
    case found(marker: Data, source: SourceRef, files: RemoteFileList)
}

extension Availability {
    /// Why the gate (rule 1) says no, or nil when the remote may be used.
    var unavailableReason: UnavailableReason? {
        switch self {
        case .available: nil
        case .noAccount: .noAccount
        case .needsConsent: .needsConsent
        }
    }
}

/// The probe of the contract, shared by the sync engine, the restore engine's resume, and a
/// restore from a remote that has no profile (and so no sync state) on this machine.
public struct Probe: Sendable {
    let storage: any RemoteStorage
    let markerPath: String
    let availability: @Sendable () async -> Availability

    public init(
        storage: any RemoteStorage, markerPath: String = SyncEngine.defaultMarkerPath,
        availability: @escaping @Sendable () async -> Availability = { .available }
    ) {
        self.storage = storage
        self.markerPath = markerPath
        self.availability = availability
    }

    /// Looks at the remote without writing; never throws for cloud failures.
    public func run() async -> ProbeOutcome {
        if let reason = await availability().unavailableReason { return .unavailable(reason) }
        let listing: RemoteFileList
        do {
            listing = try await storage.list()
        } catch {
            return .failed(Probe.cloudError(error))
        }
        // Files listed under a spelling no request can name are not a backup's: a remote holding
        // only those holds none, and one of them is never taken for the marker. They stay in
        // the files found, for a restore to refuse by name.
        if listing.indices.allSatisfy(listing.foreignSpelling(at:)) { return .none }
        guard let markerIndex = listing.indices.first(where: { !listing.foreignSpelling(at: $0) && listing.comparePath(at: $0, with: markerPath) == 0 })
        else { return .notReady }
        let marker = listing[markerIndex]
        // Compressed, a marker is never larger than its content may be: one that is cannot be
        // ours, and is not read into memory at all.
        let limit = Probe.markerSizeLimit(listedFiles: listing.count)
        if marker.size > Int64(limit) {
            return .damaged("the marker \(markerPath) is \(marker.size) bytes, more than a backup of "
                + "\(listing.count) files can need (\(limit)); it is damaged or was not written by backup. Run `backup sync` "
                + "from the source to write a new one")
        }
        let bytes: Data
        let identity: String
        do {
            bytes = try await storage.readBytes(markerPath)
            identity = try await storage.identityKey() ?? marker.remoteId ?? ""
        } catch let error as CloudError where error.kind == .notFound {
            return .notReady  // listed but not readable (yet): another run is mid-write
        } catch {
            return .failed(Probe.cloudError(error))
        }
        let source = SourceRef(
            identityKey: identity, markerRemoteId: marker.remoteId, markerFingerprint: SHA256Hasher.hex(bytes))
        return .found(marker: bytes, source: source, files: listing)
    }

    /// The most a marker of a backup with `listedFiles` files may hold, compressed or not:
    /// 8 MiB for the groups and the entries that are no listed file (folders and symlinks are
    /// in the marker only), and 1 KiB per file (a file's line is at most about 110 bytes plus
    /// its path).
    public static func markerSizeLimit(listedFiles: Int) -> Int {
        (8 << 20) + 1024 * max(0, listedFiles)
    }

    static func cloudError(_ error: any Error) -> CloudError {
        (error as? CloudError) ?? CloudError(.transport, String(describing: error))
    }
}
