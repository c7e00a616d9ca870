// The one failure of an upload that is the local side's fault, not the remote's.

/// A local file could not be read while uploading it (deleted or made unreadable after the
/// scan). The engine skips that entry for this run, keeps its state as it was, and goes on.
public struct LocalReadError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let message: String

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { message }
}
