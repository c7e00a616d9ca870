// The errors the jobs end with, each carrying the kind of failure that picks the exit code,
// and a message that names the file, path, key or server involved and what to do.

import BackupEngine

/// How a job ended, as the exit code tells a script.
public enum ExitStatus: Int32, Sendable, Equatable, CaseIterable {
    /// Completed.
    case success = 0
    /// A failure: the remote or the local side failed.
    case failure = 1
    /// Bad usage or a bad config: nothing was touched.
    case usage = 2
    /// Unavailable: the gate, a guard, the hold, a changed source, a busy profile.
    case unavailable = 3
    /// A restore ended with files still pending.
    case incomplete = 4
    /// The remote's data failed a check: a hash or size mismatch, a refused name, damage found.
    case damaged = 5
    /// Interrupted by SIGINT or SIGTERM; state and record are saved.
    case interrupted = 130
}

/// A failure of a job before or around the engine, with its exit status.
public struct AppError: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: ExitStatus
    public let message: String
    /// Another run holds the profile's lock: this one did nothing at all.
    public let isBusyProfile: Bool
    /// The remote refused the credentials (the provider's AuthRevoked): a password typed in
    /// again may help.
    public let isAuthRefused: Bool
    /// The kind of failure as JSON names it (`wrongPassphrase`, `encryptionMismatch`), where it
    /// is more than its exit status says.
    public let kind: String?

    public init(_ status: ExitStatus, _ message: String) {
        self.init(status, message, busyProfile: false)
    }

    init(_ status: ExitStatus, _ message: String, busyProfile: Bool = false, authRefused: Bool = false, kind: String? = nil) {
        self.status = status
        self.message = message
        isBusyProfile = busyProfile
        isAuthRefused = authRefused
        self.kind = kind
    }

    public var description: String { message }

    /// An encrypted remote's passphrase is missing or wrong: one typed in may help.
    public var wantsPassphrase: Bool { kind == Encryption.missingPassphraseKind || kind == Encryption.wrongPassphraseKind }

    static func usage(_ message: String) -> AppError { AppError(.usage, message) }

    /// Any error as an AppError: its own status when it is one, else a failure with its text.
    static func from(_ error: any Error) -> AppError {
        switch error {
        case let error as AppError: error
        case let error as StateStoreError: AppError(.failure, error.message)
        case let error as CloudError: AppError(.failure, error.message, authRefused: error.kind == .authRevoked)
        case let error as LocalFileError: AppError(.failure, error.message)
        case is CancellationError: AppError(.interrupted, "interrupted; what was done is saved, and the next run continues")
        default: AppError(.failure, String(describing: error))
        }
    }
    static func failure(_ message: String) -> AppError { AppError(.failure, message) }
}
