// A sandbox for restore attacks: one temporary folder holding a fake HOME (with
// .ssh/authorized_keys, a .bashrc, XDG config and state folders), a victim file beside the
// restore target, the target itself, a folder "outside" for links to point at, and room for
// a folder remote. A snapshot lists the WHOLE sandbox without following links (path, type,
// size, mode, inode, mtime, SHA-256 of regular files, link targets); comparing two shows
// whatever changed outside the places a restore may legitimately write.
//
//   <sandbox>/home/                    HOME
//   <sandbox>/home/.bashrc, .ssh/authorized_keys
//   <sandbox>/home/.config/            XDG_CONFIG_HOME (the tool writes only …/backup/)
//   <sandbox>/home/.local/state/       XDG_STATE_HOME  (the tool writes only …/backup/)
//   <sandbox>/home/restore/victim.txt  beside the target: what "../victim.txt" would hit
//   <sandbox>/home/restore/target/     the restore target: "../../.ssh/…" from it is HOME/.ssh
//   <sandbox>/outside/secret.txt       what planted links point at
//   <sandbox>/remote/                  for a hand-made folder remote

import BackupEngine
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// One entry of a sandbox snapshot.
public struct SandboxEntry: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable { case file, folder, link, fifo, other }

    public var kind: Kind
    /// Permission bits (and setuid/setgid/sticky).
    public var mode: UInt32
    /// Regular files and links only (a folder's size changes with its entries).
    public var size: Int64?
    public var inode: UInt64?
    /// Regular files only, in nanoseconds.
    public var mtime: Int64?
    /// Regular files only.
    public var sha256: String?
    /// Links only.
    public var linkTarget: String?

    public var description: String {
        var parts = [kind.rawValue, String(mode, radix: 8)]
        if let size { parts.append("\(size) B") }
        if let inode { parts.append("inode \(inode)") }
        if let mtime { parts.append("mtime \(mtime)") }
        if let sha256 { parts.append("sha256 \(sha256.prefix(12))…") }
        if let linkTarget { parts.append("-> \(linkTarget)") }
        return parts.joined(separator: ", ")
    }
}

/// Every entry under a folder, by path relative to it ("" is the folder itself).
public struct SandboxSnapshot: Sendable, Equatable {
    public var entries: [String: SandboxEntry]

    /// Lists `root` recursively with lstat, never following a link nor opening anything but
    /// regular files (a FIFO is listed, never opened).
    public init(of root: String) {
        var entries: [String: SandboxEntry] = [:]
        func visit(_ path: String, _ relative: String) {
            var info = stat()
            guard FileName.withCString(path, { lstat($0, &info) }) == 0 else { return }
            var entry = SandboxEntry(kind: .other, mode: UInt32(info.st_mode) & 0o7777)
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                entry.kind = .file
                entry.size = Int64(info.st_size)
                entry.inode = UInt64(info.st_ino)
                entry.mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
                let fd = FileName.withCString(path) { open($0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
                if fd >= 0 {
                    entry.sha256 = try? SHA256Hasher.hexOfOpenFile(fd, displayPath: path)
                    close(fd)
                }
            case S_IFDIR:
                entry.kind = .folder
            case S_IFLNK:
                entry.kind = .link
                entry.size = Int64(info.st_size)
                var buffer = [CChar](repeating: 0, count: 4097)
                let count = FileName.withCString(path) { readlink($0, &buffer, 4096) }
                if count >= 0 {
                    entry.linkTarget = FileName.string(fromBytes: buffer[0..<count].map { UInt8(bitPattern: $0) })
                }
            case S_IFIFO:
                entry.kind = .fifo
            default:
                entry.kind = .other
            }
            entries[relative] = entry
            guard entry.kind == .folder else { return }
            for name in Self.names(in: path) {
                visit(path + "/" + name, relative.isEmpty ? name : relative + "/" + name)
            }
        }
        visit(root, "")
        self.entries = entries
    }

    /// The names in a folder (FileName-escaped), "." and ".." left out.
    static func names(in path: String) -> [String] {
        guard let handle = FileName.withCString(path, { opendir($0) }) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: UInt8.self, capacity: 256) { pointer in
                    FileName.string(fromBytes: UnsafeBufferPointer(start: pointer, count: strlen(UnsafeRawPointer(pointer).assumingMemoryBound(to: CChar.self))))
                }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// What differs from `earlier`, one line per path, sorted; paths under `allowed`
    /// (relative prefixes: the path itself and everything below it) are left out.
    public func changes(since earlier: SandboxSnapshot, allowing allowed: [String] = []) -> [String] {
        func isAllowed(_ path: String) -> Bool {
            allowed.contains { path == $0 || path.hasPrefix($0 + "/") }
        }
        var lines: [String] = []
        for path in Set(entries.keys).union(earlier.entries.keys).sorted() where !isAllowed(path) {
            switch (earlier.entries[path], entries[path]) {
            case (nil, let now?): lines.append("added \(path.isEmpty ? "." : path): \(now)")
            case (let was?, nil): lines.append("removed \(path.isEmpty ? "." : path): \(was)")
            case (let was?, let now?) where was != now: lines.append("changed \(path.isEmpty ? "." : path): \(was) => \(now)")
            default: break
            }
        }
        return lines
    }
}

/// The sandbox folder of one attack test.
public final class Sandbox: Sendable {
    public let dir: TempDir
    public var root: String { dir.path }
    public var home: String { dir.path("home") }
    public var configHome: String { dir.path("home/.config") }
    public var stateHome: String { dir.path("home/.local/state") }
    /// The folder that holds the target and the victim file beside it.
    public var restoreFolder: String { dir.path("home/restore") }
    public var target: String { dir.path("home/restore/target") }
    public var victim: String { dir.path("home/restore/victim.txt") }
    public var authorizedKeys: String { dir.path("home/.ssh/authorized_keys") }
    public var outside: String { dir.path("outside") }
    public var remote: String { dir.path("remote") }

    /// What a restore may change, relative to the sandbox: the target and the tool's own
    /// config and state folders ($XDG_CONFIG_HOME/backup, $XDG_STATE_HOME/backup). Nothing else.
    public static let writable = ["home/restore/target", "home/.config/backup", "home/.local/state/backup"]

    public init() throws {
        dir = try TempDir("backup-hostile")
        for folder in ["home/.ssh", "home/.config", "home/.local/state", "home/restore/target", "outside", "remote"] {
            try dir.makeFolder(folder)
        }
        try dir.write("home/.ssh/authorized_keys", Data("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeep legit@host\n".utf8))
        chmod(dir.path("home/.ssh/authorized_keys"), 0o600)
        chmod(dir.path("home/.ssh"), 0o700)
        try dir.write("home/.bashrc", Data("export PATH=$HOME/bin:$PATH\n".utf8))
        try dir.write("home/restore/victim.txt", Data("the victim's own words\n".utf8))
        try dir.write("outside/secret.txt", Data("outside secret\n".utf8))
    }

    /// HOME and the XDG folders for the binary.
    public var environment: [String: String] {
        ["HOME": home, "XDG_CONFIG_HOME": configHome, "XDG_STATE_HOME": stateHome]
    }

    /// The whole sandbox now.
    public func snapshot() -> SandboxSnapshot { SandboxSnapshot(of: root) }

    /// The target's entries now, relative to the target.
    public func targetSnapshot() -> SandboxSnapshot { SandboxSnapshot(of: target) }

    /// Fails the test for every change since `before` outside `Sandbox.writable` (plus `alsoAllowed`).
    public func assertNothingChangedOutsideTarget(
        since before: SandboxSnapshot, alsoAllowed: [String] = [], _ context: String = "",
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let changes = snapshot().changes(since: before, allowing: Self.writable + alsoAllowed)
        XCTAssertEqual(changes, [], "the restore changed the sandbox outside its target\(context.isEmpty ? "" : " (\(context))"):\n"
            + changes.joined(separator: "\n"), file: file, line: line)
    }

    /// Staging folders and temporary files left in the target (a completed restore leaves none).
    public func leftoversInTarget() -> [String] {
        targetSnapshot().entries.keys.filter { path in
            let name = path.split(separator: "/").last.map(String.init) ?? path
            return name == ".backup-staging" || name.hasPrefix(".backup-tmp.")
        }.sorted()
    }

    /// The regular files of the target: relative path → contents' SHA-256.
    public func targetFiles() -> [String: String] {
        var files: [String: String] = [:]
        for (path, entry) in targetSnapshot().entries where entry.kind == .file {
            files[path] = entry.sha256 ?? "(unreadable)"
        }
        return files
    }

    public func cleanup() { dir.cleanup() }
}
