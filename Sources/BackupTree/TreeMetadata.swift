// Restoring what a backup keeps besides content: each file's mode, times and owner as it is
// placed, then — once every file is placed — hard links, folders (empty ones too) and
// symbolic links, and last the folders' own modes and times, deepest first (a folder's
// mtime changes while its contents are placed, and a read-only folder would refuse them).
//
// Owners are set only when running as root (by name when the name exists here, else by
// number, as tar and rsync do); setuid, setgid and sticky bits likewise, otherwise they are
// dropped with a note. Every call goes through descriptors opened without following links,
// and a link's target is only ever written, never opened.

import BackupEngine
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What restoring metadata could not do, for the notes of the run.
public final class TreeRestoreNotes: Sendable {
    private let notes = Mutex<[String]>([])
    private let droppedSpecialBits = Mutex<Int>(0)
    /// Ids of the user and group names met, looked up once each (nil: no such name here).
    let users = Mutex<[String: uid_t?]>([:])
    let groups = Mutex<[String: gid_t?]>([:])

    public init() {}

    func add(_ note: String) { notes.withLock { $0.append(note) } }
    func droppedSpecialBit() { droppedSpecialBits.withLock { $0 += 1 } }

    /// The notes so far, the count of dropped setuid/setgid/sticky bits as one.
    public var all: [String] {
        let dropped = droppedSpecialBits.withLock { $0 }
        return notes.withLock { $0 } + (dropped > 0
            ? ["\(dropped) entr\(dropped == 1 ? "y" : "ies") had setuid, setgid or sticky bits, dropped: only a restore run as root sets them (tar's rule)"]
            : [])
    }
}

/// The owner, group and permission bits a file certainly has when it is made.
struct MadeAs: Equatable {
    var uid: uid_t
    var gid: gid_t
    var mode: mode_t
}

/// Sets modes, times and owners as the restore's user may.
struct MetadataSetter {
    /// A restore sets a file's owner only as root.
    let asRoot = ThisProcess.runsAsRoot
    let notes: TreeRestoreNotes

    /// The uid and gid to give `metadata` here: by name when the name exists, else the numbers.
    func owner(_ metadata: EntryMetadata) -> (uid_t, gid_t) {
        var uid = uid_t(metadata.uid), gid = gid_t(metadata.gid)
        if let user = metadata.user, let found = notes.users.withLock({ cache in
            if let known = cache[user] { return known }
            let looked: uid_t? = Self.lookUp { buffer in
                var entry = passwd()
                var result: UnsafeMutablePointer<passwd>?
                let code = getpwnam_r(user, &entry, buffer.baseAddress.unsafelyUnwrapped, buffer.count, &result)
                return (code, result != nil ? entry.pw_uid : nil)
            }
            cache[user] = looked
            return looked
        }) { uid = found }
        if let group = metadata.group, let found = notes.groups.withLock({ cache in
            if let known = cache[group] { return known }
            let looked: gid_t? = Self.lookUp { buffer in
                var entry = Glibc.group()
                var result: UnsafeMutablePointer<Glibc.group>?
                let code = getgrnam_r(group, &entry, buffer.baseAddress.unsafelyUnwrapped, buffer.count, &result)
                return (code, result != nil ? entry.gr_gid : nil)
            }
            cache[group] = looked
            return looked
        }) { gid = found }
        return (uid, gid)
    }

    /// A `get*nam_r` call with a buffer grown while it answers ERANGE (a group of many members).
    private static func lookUp<T>(_ call: (UnsafeMutableBufferPointer<CChar>) -> (Int32, T?)) -> T? {
        var size = 4096
        while size <= 1 << 22 {
            var buffer = [CChar](repeating: 0, count: size)
            let (code, value) = buffer.withUnsafeMutableBufferPointer { raw -> (Int32, T?) in
                raw.baseAddress == nil ? (EINVAL, nil) : call(raw)
            }
            if code != ERANGE { return value }
            size *= 4
        }
        return nil
    }

    /// The mode to set: all of it as root; otherwise without setuid, setgid and sticky (noted).
    func mode(_ metadata: EntryMetadata) -> mode_t {
        if asRoot || metadata.mode & 0o7000 == 0 { return mode_t(metadata.mode) }
        notes.droppedSpecialBit()
        return mode_t(metadata.mode & 0o777)
    }


    /// Sets `metadata` on the open file or folder `fd`: owner first (chown clears setuid
    /// bits), then mode, then times; each step is tried whatever the others did (a file
    /// system without owners still keeps times). Returns the errno of the first that failed.
    ///
    /// With `madeAs`, what a new file certainly got when it was made (its owner, group and
    /// mode), a step that would set what it already has is left out.
    @discardableResult
    func apply(_ metadata: EntryMetadata, to fd: Int32, madeAs: MadeAs? = nil) -> Int32? {
        var failure: Int32?
        if asRoot {
            let (uid, gid) = owner(metadata)
            if madeAs.map({ $0.uid != uid || $0.gid != gid }) ?? true, fchown(fd, uid, gid) != 0 { failure = failure ?? errno }
        }
        let mode = mode(metadata)
        if madeAs.map({ $0.mode != mode }) ?? true, fchmod(fd, mode) != 0 { failure = failure ?? errno }
        let times = modificationTimes(nanoseconds: metadata.mtimeNanoseconds)
        if futimens(fd, times) != 0 { failure = failure ?? errno }
        return failure
    }

    /// Sets the owner (as root) and times of the symbolic link `name` in `folderFD`, never
    /// following it (a link's own mode means nothing on Linux).
    func applyToLink(_ metadata: EntryMetadata, folderFD: Int32, name: String) {
        if asRoot {
            let (uid, gid) = owner(metadata)
            _ = FileName.withCString(name) { fchownat(folderFD, $0, uid, gid, AT_SYMLINK_NOFOLLOW) }
        }
        let times = modificationTimes(nanoseconds: metadata.mtimeNanoseconds)
        _ = FileName.withCString(name) { utimensat(folderFD, $0, times, AT_SYMLINK_NOFOLLOW) }
    }
}

extension RestoreTarget {
    /// Once every file is placed: hard links made of the pairs `links` (each a placed file
    /// and a placed file recorded as a hard link of it) whose both names were verified to hold
    /// the same bytes, folders made (empty ones too) and symbolic links created where nothing
    /// is in the way, then the folders' modes and times set, deepest first, but not those of
    /// the folders that hold a `pending` path (a file not yet placed). Nothing is replaced: an
    /// entry in the way is noted and left as it is.
    public func restoreTree(
        _ tree: [TreeEntry], links: [(first: RestoreFile, second: RestoreFile)], pending: (_ each: (String) -> Void) throws -> Void
    ) throws {
        let rootFD = try openRoot()
        defer { close(rootFD) }
        let setter = MetadataSetter(notes: treeNotes)
        for (original, file) in links {
            guard file.hardLinkTo == original.placePath, original.digest != nil, original.digest == file.digest,
                  original.size == file.size
            else { continue }
            linkPair(first: original.placePath, second: file, rootFD: rootFD)
        }
        // The folders that still wait for files: only they are held, never the files.
        var waiting = Set<String>()
        try pending { path in insertFolders(of: path, into: &waiting) }
        for entry in tree {
            guard let parts = try? Self.parts(entry.path), let name = parts.last else { continue }
            let chain: [Int32]
            do {
                chain = try openFolderChain(
                    entry.kind == .folder ? parts : Array(parts.dropLast()), under: rootFD, create: true, operation: "making",
                    displayRoot: root)
            } catch {
                treeNotes.add("not made: \(finalPath(for: entry.path)): \(error.path) is a link or not a folder")
                continue
            }
            defer { chain.forEach { close($0) } }
            guard case .symlink(let target) = entry.kind else { continue }
            let folderFD = chain.last ?? rootFD
            var info = stat()
            if FileName.withCString(name, { fstatat(folderFD, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 {
                if info.st_mode & S_IFMT == S_IFLNK, readLinkTarget(folderFD, name) == target {
                    setter.applyToLink(entry.metadata, folderFD: folderFD, name: name)
                } else {
                    treeNotes.add("not made: the symbolic link \(finalPath(for: entry.path)): something else is there")
                }
                continue
            }
            let made = FileName.withCString(target) { targetBytes in
                FileName.withCString(name) { symlinkat(targetBytes, folderFD, $0) }
            }
            if made != 0 {
                treeNotes.add("not made: the symbolic link \(finalPath(for: entry.path)): \(String(cString: strerror(errno)))")
                continue
            }
            setter.applyToLink(entry.metadata, folderFD: folderFD, name: name)
        }
        // Folders last, deepest first: placing below a folder changes its mtime. A folder that
        // still waits for files keeps its defaults until the restore that places them.
        for entry in tree.reversed() where entry.kind == .folder && !waiting.contains(entry.path) {
            guard let parts = try? Self.parts(entry.path),
                  let chain = try? openFolderChain(parts, under: rootFD, create: false, operation: "setting", displayRoot: root)
            else { continue }
            defer { chain.forEach { close($0) } }
            guard let fd = chain.last else { continue }
            if let code = setter.apply(entry.metadata, to: fd) {
                treeNotes.add("the mode, times or owner of the folder \(finalPath(for: entry.path)) could not be set: \(String(cString: strerror(code)))")
            }
        }
    }

    /// Replaces the placed `second` with a hard link of the placed `first` (through a
    /// temporary name, so a failure leaves the copy as it was).
    private func linkPair(first: String, second: RestoreFile, rootFD: Int32) {
        guard let firstParts = try? Self.parts(first), let secondParts = try? Self.parts(second.placePath),
              let firstName = firstParts.last, let secondName = secondParts.last,
              let from = try? openFolderChain(firstParts.dropLast(), under: rootFD, create: false, operation: "linking", displayRoot: root)
        else { return }
        defer { from.forEach { close($0) } }
        guard let to = try? openFolderChain(secondParts.dropLast(), under: rootFD, create: false, operation: "linking", displayRoot: root)
        else { return }
        defer { to.forEach { close($0) } }
        let fromFD = from.last ?? rootFD, toFD = to.last ?? rootFD
        // The first name must be a regular file, not a link planted meanwhile (its own mode
        // may not let this user read it: it is not opened).
        var info = stat()
        guard FileName.withCString(firstName, { fstatat(fromFD, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0,
              info.st_mode & S_IFMT == S_IFREG
        else { return }
        let temporary = Self.temporaryPrefix + String(UInt64.random(in: .min ... .max), radix: 16)
        let linked = FileName.withCString(firstName) { linkat(fromFD, $0, toFD, temporary, 0) }
        guard linked == 0 else {
            treeNotes.add("\(finalPath(for: second.placePath)) is restored as a copy, not a hard link of \(finalPath(for: first)): "
                + String(cString: strerror(errno)))
            return
        }
        if FileName.withCString(secondName, { renameat(toFD, temporary, toFD, $0) }) != 0 { unlinkat(toFD, temporary, 0) }
    }
}

/// Adds the folders `path` lies in ("a/b" and "a" for "a/b/c") to `folders`, stopping at the
/// first already there (its own folders are then there too).
func insertFolders(of path: String, into folders: inout Set<String>) {
    // Each folder is a prefix up to a "/" (an ASCII byte, so a valid index of the String):
    // no split and no join per path, and most paths stop at their parent, already in.
    var end = path.utf8.endIndex
    while let slash = path.utf8[..<end].lastIndex(of: UInt8(ascii: "/")), folders.insert(String(path[..<slash])).inserted {
        end = slash
    }
}
