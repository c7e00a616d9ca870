// Checking and walking relative "/"-separated paths, shared by every side that turns a
// path it did not choose (from a remote listing, from a marker) into a place on disk: the
// folder provider and restore placement. Walking never follows a link, so a path can only
// ever land below the folder it is resolved in.

#if canImport(Glibc)
import CLinux
import Glibc
import Synchronization
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
        if let fast = path.utf8.withContiguousStorageIfAvailable(plainComponents), let parts = fast { return parts }
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

    /// The components of a path that needs none of the checks above to be refused or decoded,
    /// in one pass over its bytes; nil for any other (empty, absolute, a NUL, an empty, "." or
    /// ".." component, or a byte 0xE2 that may begin an escape), which the full check handles.
    /// Every path a restore places passes here several times, so this one is kept cheap.
    private static func plainComponents(_ bytes: UnsafeBufferPointer<UInt8>) -> [String]? {
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        guard let first = bytes.first, first != slash else { return nil }
        var parts: [String] = []
        var start = 0
        for index in 0...bytes.count {
            let byte = index < bytes.count ? bytes[index] : slash
            if byte == 0 || byte == 0xE2 { return nil }
            guard byte == slash else { continue }
            let length = index - start
            if length == 0 || (length <= 2 && bytes[start] == dot && (length == 1 || bytes[start + 1] == dot)) { return nil }
            parts.append(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
            start = index + 1
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

/// Whether this kernel refused openat2 once (ENOSYS, or EPERM from a seccomp filter): then
/// `openBeneath` is not tried again, and callers walk folder by folder.
private let openBeneathUnsupported = Atomic<Bool>(false)

/// Opens `path` (a path `RelativePath.components` accepted, in the name codec) below `rootFD`
/// in one system call: openat2 resolving beneath `rootFD` and following no link on the way or
/// at its end, as `openFolderChain` and an O_NOFOLLOW open do in several. Returns the
/// descriptor, or -1 with errno set; nil where the kernel has no openat2, for the caller to
/// walk the folders one by one instead.
public func openBeneath(_ rootFD: Int32, _ path: String, flags: Int32, mode: mode_t = 0) -> Int32? {
    #if canImport(Glibc)
    if openBeneathUnsupported.load(ordering: .relaxed) { return nil }
    let fd = FileName.withCString(path) { backup_open_beneath(rootFD, $0, flags, mode) }
    // A seccomp filter (as in older container runtimes) refuses openat2 with EPERM. A plain
    // read-only open has no other cause for it, so that too means "walk instead" (and the walk
    // reports any real refusal); an open for writing may be refused by the file itself.
    if fd < 0 && (errno == ENOSYS || errno == E2BIG || (errno == EPERM && flags & O_ACCMODE == O_RDONLY)) {
        openBeneathUnsupported.store(true, ordering: .relaxed)
        return nil
    }
    return fd
    #else
    return nil
    #endif
}

/// Opens each of `folders` below `rootFD` in turn with O_NOFOLLOW, creating missing ones
/// when `create`: a link anywhere on the way fails (ELOOP or ENOTDIR) rather than leading
/// elsewhere. The caller closes the returned descriptors; on a failure none stay open.
public func openFolderChain<C: Collection<String>>(
    _ folders: C, under rootFD: Int32, create: Bool, operation: String, displayRoot: @autoclosure () -> String
) throws(FolderWalkError) -> [Int32] {
    var chain: [Int32] = []
    chain.reserveCapacity(folders.count)
    // The path walked so far is made only for a message.
    func failure(_ code: Int32, _ operation: String) -> FolderWalkError {
        chain.forEach { close($0) }
        return FolderWalkError(
            code: code, operation: operation, path: ([displayRoot()] + folders.prefix(chain.count + 1)).joined(separator: "/"))
    }
    for name in folders {
        let parentFD = chain.last ?? rootFD
        var fd = FileName.withCString(name) { openat(parentFD, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        if fd < 0 && errno == ENOENT && create {
            if FileName.withCString(name, { mkdirat(parentFD, $0, 0o777) }) != 0 && errno != EEXIST {
                throw failure(errno, "creating the folder")
            }
            fd = FileName.withCString(name) { openat(parentFD, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        }
        guard fd >= 0 else { throw failure(errno, operation) }
        chain.append(fd)
    }
    return chain
}
