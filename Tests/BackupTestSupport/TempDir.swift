// Temporary directories for tests: made with mkdtemp, removed with their contents on deinit or
// by an explicit cleanup().

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A fresh directory under `$TMPDIR` (or /tmp), removed with everything in it on deinit or `cleanup()`.
///
/// Swift may end a local's lifetime at its last use, not at the end of its scope, so a test
/// keeps the directory alive with `defer { dir.cleanup() }` or `addTeardownBlock { dir.cleanup() }`
/// rather than relying on deinit.
public final class TempDir: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates the directory; `label` shows in its name to tell test leftovers apart.
    public init(_ label: String = "backup-test") throws {
        var base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        if base.isEmpty { base = "/tmp" }
        while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
        var template = Array("\(base)/\(label).XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let start = buffer.baseAddress, mkdtemp(start) != nil else { return nil }
            return String(cString: start)
        }
        guard let made else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        path = made
    }

    deinit { cleanup() }

    /// The absolute path of `relative` inside the directory.
    public func path(_ relative: String) -> String {
        path + "/" + relative
    }

    /// Creates the folder `relative` (and its parents) inside the directory and returns its path.
    @discardableResult
    public func makeFolder(_ relative: String) throws -> String {
        let folder = path(relative)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }

    /// Writes `data` to `relative` inside the directory, creating its folders, and returns its path.
    @discardableResult
    public func write(_ relative: String, _ data: Data) throws -> String {
        let file = path(relative)
        let folder = (file as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try data.write(to: URL(fileURLWithPath: file))
        return file
    }

    /// The relative paths of every entry (files, folders, links) under `relative`, sorted.
    public func entries(under relative: String = "") throws -> [String] {
        let top = relative.isEmpty ? path : path(relative)
        guard let enumerator = FileManager.default.enumerator(atPath: top) else { return [] }
        return enumerator.compactMap { $0 as? String }.sorted()
    }

    /// Removes the directory and everything in it; calling it again does nothing.
    public func cleanup() {
        // Already removed, or never fully made: nothing left to do either way.
        _ = try? FileManager.default.removeItem(atPath: path)
    }
}
