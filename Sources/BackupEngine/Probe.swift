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
    /// A complete backup: the marker's bytes, its reference, and every file (marker included).
    case found(marker: Data, source: SourceRef, files: [RemoteFile])
}
