// Checking and walking relative "/"-separated paths, shared by every side that turns a
// path it did not choose (from a remote listing, from a marker) into a place on disk: the
// folder provider and restore placement. Walking never follows a link, so a path can only
// ever land below the folder it is resolved in.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a string is not a safe relative path.
public struct InvalidPathError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    /// What is wrong, as a clause ("it is absolute").
    public let reason: String

    public var description: String { "the path \(String(reflecting: path)) is not valid: \(reason)" }
}

/// Relative paths: "a/b/c", never "/a", "a/../b", "a//b", "./a" or "" (nor a NUL byte).
public enum RelativePath {
    /// The components of `path`, or why it is not a safe relative path.
    ///
    /// Splits on the "/" byte, not on Characters: "/" followed by a combining mark is one
    /// Character, and splitting on Characters would let "../\u{301}x" through.
    public static func components(of path: String) throws(InvalidPathError) -> [String] {
        func refuse(_ why: String) -> InvalidPathError { InvalidPathError(path: path, reason: why) }
        if path.isEmpty { throw refuse("it is empty") }
        if path.utf8.contains(0) { throw refuse("it contains a NUL character") }
        if path.utf8.first == UInt8(ascii: "/") { throw refuse("it is absolute") }
        let parts = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        for part in parts {
            if part.isEmpty { throw refuse("it has an empty component (a doubled or trailing \"/\")") }
            if part.utf8.elementsEqual(".".utf8) || part.utf8.elementsEqual("..".utf8) {
                throw refuse("it has a \".\" or \"..\" component")
            }
            // A component with an escape is checked again on the bytes it stands for (one
            // without stands for its own UTF-8, checked above). Only a canonical escape is
            // decoded, so the second check holds by construction; it keeps it so.
            guard FileName.isEscaped(part) else { continue }
            guard let bytes = FileName.canonicalBytes(of: part) else {
                throw refuse("it has an escape (\u{201B}) that stands for no byte of a real name, "
                    + "such as \u{201B}2E for \".\" or \u{201B}2F for \"/\"")
            }
            if bytes.isEmpty || bytes.contains(0) || bytes.contains(UInt8(ascii: "/")) || bytes == [0x2E] || bytes == [0x2E, 0x2E] {
                throw refuse("a component stands for \"/\", NUL, \".\" or \"..\"")
            }
        }
        return parts
    }
}

/// A failed system call while walking folders: the errno and the path reached.
public struct FolderWalkError: Error, Sendable, Equatable {
    public let code: Int32
    /// A verb phrase for messages: "reading", "creating the folder".
    public let operation: String
    /// The path walked so far, joined onto the display root.
    public let path: String

    public init(code: Int32, operation: String, path: String) {
        self.code = code
        self.operation = operation
        self.path = path
    }
}

/// Opens each of `folders` below `rootFD` in turn with O_NOFOLLOW, creating missing ones
/// when `create`: a link anywhere on the way fails (ELOOP or ENOTDIR) rather than leading
/// elsewhere. The caller closes the returned descriptors; on a failure none stay open.
public func openFolderChain<C: Collection<String>>(
    _ folders: C, under rootFD: Int32, create: Bool, operation: String, displayRoot: String
) throws(FolderWalkError) -> [Int32] {
    var chain: [Int32] = []
    var walked = [displayRoot]
    for name in folders {
        let parentFD = chain.last ?? rootFD
        walked.append(name)
        var fd = FileName.withCString(name) { openat(parentFD, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        if fd < 0 && errno == ENOENT && create {
            if FileName.withCString(name, { mkdirat(parentFD, $0, 0o777) }) != 0 && errno != EEXIST {
                let code = errno
                chain.forEach { close($0) }
                throw FolderWalkError(code: code, operation: "creating the folder", path: walked.joined(separator: "/"))
            }
            fd = FileName.withCString(name) { openat(parentFD, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        }
        guard fd >= 0 else {
            let code = errno
            chain.forEach { close($0) }
            throw FolderWalkError(code: code, operation: operation, path: walked.joined(separator: "/"))
        }
        chain.append(fd)
    }
    return chain
}
