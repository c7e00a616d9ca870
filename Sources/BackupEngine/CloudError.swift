// The one error type every provider maps its failures onto (the contract's error mapping).
// The kind says what a caller can do about it; the message names the server, path or
// file involved and how the failure may be remedied. Messages never carry credentials.

/// A failure of the remote storage, classified so callers can react to its kind.
public struct CloudError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is; callers branch on this, never on the message.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// Out of space or over quota on the remote.
        case storageFull = "StorageFull"
        /// Any other failure: a 5xx after retries, a timeout, an unexpected errno.
        case transport = "Transport"
        /// The remote refused the credentials.
        case authRevoked = "AuthRevoked"
        /// The remote could not be reached at all.
        case offline = "Offline"
        /// A read or download of a path that does not exist.
        case notFound = "NotFound"
        /// The remote root itself is missing (an unmounted disk, a missing bucket).
        case notAvailable = "NotAvailable"
        /// The person has not confirmed the first write to this remote.
        case needsConsent = "NeedsConsent"

        /// The kind as a JSON key: "storageFull", "authRevoked".
        public var key: String { rawValue.prefix(1).lowercased() + rawValue.dropFirst() }
    }

    public let kind: Kind
    /// What went wrong and, where known, what to do about it.
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind.rawValue): \(message)" }
}
