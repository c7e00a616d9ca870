// The target folder of a restore: the staging area inside it where downloads wait, the
// check of what placing a file would overwrite, and placement itself — renames that walk
// the target without following links, so nothing is ever written outside it.

import BackupEngine
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A remote path that cannot be restored, and why; nothing is written for it.
public struct RefusedPath: Error, Sendable, Equatable, CustomStringConvertible {
    public let remotePath: String
    public let reason: String

    public var description: String { "refused to restore \(String(reflecting: remotePath)): \(reason)" }
}

/// What placing a file would replace.
public struct PlacementConflict: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A regular file with other contents.
        case differentFile
        /// A folder, a link or a special file is where the file would go.
        case notARegularFile
    }

    public let remotePath: String
    /// The local path that is in the way.
    public let localPath: String
    public let kind: Kind
}

/// The folder a restore writes into.
public struct RestoreTarget: Sendable {
    /// The name of the staging folder inside the target.
    public static let stagingName = ".backup-staging"

    /// The target folder.
    public let root: String

    public init(root: String) {
        var trimmed = Substring(root)
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        self.root = String(trimmed)
    }

    /// Where downloads wait for placement: inside the target, so placing is a rename.
    public var stagingRoot: String { root + "/" + Self.stagingName }

    /// The staging path of a remote path, or why that path may not be restored.
    public func stagingPath(for remotePath: String) throws(RefusedPath) -> String {
        let parts = try Self.parts(remotePath)
        return stagingRoot + "/" + parts.joined(separator: "/")
    }

    /// The final local path of a remote path (for messages and listings).
    public func finalPath(for remotePath: String) -> String {
        root + "/" + remotePath
    }

    /// Creates the target folder (and its parents) if it is missing.
    public func prepare() throws {
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        } catch {
            throw LocalFileError(path: root, message: "cannot create the restore target \(root): \(error.localizedDescription)")
        }
    }

    static func parts(_ remotePath: String) throws(RefusedPath) -> [String] {
        do {
            let parts = try RelativePath.components(of: remotePath)
            if parts.first == stagingName {
                throw RefusedPath(remotePath: remotePath, reason: "\(stagingName) is the restore's own staging folder")
            }
            return parts
        } catch let error as InvalidPathError {
            throw RefusedPath(remotePath: remotePath, reason: "\(error.reason); a backup only holds paths inside its own folder")
        } catch let error as RefusedPath {
            throw error
        } catch {
            throw RefusedPath(remotePath: remotePath, reason: "\(error)")
        }
    }

    // MARK: Conflicts

    /// What placing `file` would overwrite: nil when nothing is there, or when what is there
    /// already has the file's contents (its SHA-256, or for a size-compared file its size).
    public func conflict(for file: RestoreFile) throws -> PlacementConflict? {
        let parts = try Self.parts(file.remotePath)
        let finalPath = finalPath(for: file.remotePath)
        let rootFD = try openRoot()
        defer { close(rootFD) }
        let chain: [Int32]
        do {
            chain = try openFolderChain(parts.dropLast(), under: rootFD, create: false, operation: "reading", displayRoot: root)
        } catch {
            if error.code == ENOENT { return nil }  // the folder is not there yet: nothing to overwrite
            if error.code == ELOOP || error.code == ENOTDIR {
                return PlacementConflict(remotePath: file.remotePath, localPath: error.path, kind: .notARegularFile)
            }
            throw LocalFileError(errno: error.code, reading: error.path)
        }
        defer { chain.forEach { close($0) } }
        let folderFD = chain.last ?? rootFD
        let name = parts[parts.count - 1]
        var info = stat()
        if FileName.withCString(name, { fstatat(folderFD, $0, &info, AT_SYMLINK_NOFOLLOW) }) != 0 {
            if errno == ENOENT { return nil }
            throw LocalFileError(errno: errno, reading: finalPath)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            return PlacementConflict(remotePath: file.remotePath, localPath: finalPath, kind: .notARegularFile)
        }
        let different = PlacementConflict(remotePath: file.remotePath, localPath: finalPath, kind: .differentFile)
        if let size = file.size, size != Int64(info.st_size) { return different }
        guard let expected = file.sha256 else {
            // Size-compared: the same size is the same file, as in the backup itself. Without
            // a known size, compare with the staged copy.
            if file.size != nil { return nil }
            var staged = stat()
            guard stat(file.toLocalPath, &staged) == 0 else { return different }
            return staged.st_size == info.st_size ? nil : different
        }
        return try SHA256Hasher.hexOfFile(at: folderFD, name: name, displayPath: finalPath) == expected ? nil : different
    }

    // MARK: Placing

    /// Moves each staged file to its final place, creating folders as needed. The walk
    /// never follows a link: a link in the way is an error naming it, never a way out.
    public func place(_ files: [RestoreFile]) throws {
        let rootFD = try openRoot()
        defer { close(rootFD) }
        for file in files {
            let parts = try Self.parts(file.remotePath)
            let name = parts[parts.count - 1]
            let finalPath = finalPath(for: file.remotePath)
            let target: [Int32]
            do {
                target = try openFolderChain(parts.dropLast(), under: rootFD, create: true, operation: "placing", displayRoot: root)
            } catch {
                if error.code == ELOOP || error.code == ENOTDIR {
                    throw RefusedPath(remotePath: file.remotePath, reason: "\(error.path) is a link or not a folder; "
                        + "placing through it could write outside \(root)")
                }
                throw LocalFileError(path: error.path, message: "cannot create the folder \(error.path): \(String(cString: strerror(error.code)))")
            }
            defer { target.forEach { close($0) } }
            let staging: [Int32]
            do {
                staging = try openFolderChain([Self.stagingName] + parts.dropLast(), under: rootFD, create: false, operation: "reading", displayRoot: root)
            } catch {
                throw LocalFileError(errno: error.code, reading: error.path)
            }
            defer { staging.forEach { close($0) } }
            let from = staging.last ?? rootFD
            let to = target.last ?? rootFD
            if FileName.withCString(name, { renameat(from, $0, to, $0) }) != 0 {
                let code = errno
                throw LocalFileError(path: finalPath, message: "cannot place \(finalPath): \(String(cString: strerror(code)))")
            }
        }
    }

    /// Removes the staging folder once nothing is left in it but empty folders.
    public func removeEmptyStaging() {
        func prune(_ path: String) -> Bool {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return false }
            var empty = true
            for name in names {
                let child = path + "/" + name
                var info = stat()
                if lstat(child, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, prune(child) { continue }
                empty = false
            }
            return empty && rmdir(path) == 0
        }
        _ = prune(stagingRoot)
    }

    private func openRoot() throws -> Int32 {
        let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw LocalFileError(errno: errno, reading: root) }
        return fd
    }
}
