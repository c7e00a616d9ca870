// WebDAVStorage: a folder on a WebDAV server (Nextcloud, ownCloud, a NAS, rclone serve webdav).
// Owns the WebDAV verbs (PROPFIND listing, MKCOL, PUT to a temporary name then MOVE into
// place, GET, DELETE), the multistatus parsing, the identity (the user's principal), quota
// (RFC 4331) and the WebDAV column of DESIGN.md's error table.

import BackupEngine
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Space on a WebDAV server, as RFC 4331 reports it.
public struct WebDAVQuota: Sendable, Equatable {
    /// Bytes still free for this user, where the server says.
    public var available: Int64?
    /// Bytes used by this user, where the server says.
    public var used: Int64?
}

/// A remote that is a folder on a WebDAV server.
///
/// Every write goes to a temporary name beside the target and is moved into place, so a path
/// holds either its old file or the whole new one; `list()` hides temporary names, and leaves
/// out (with a note, see `takeListingNotes()`) hrefs on another server or outside the remote
/// folder and a second href for the same file. The remote folder itself is never created: a
/// missing one is `.notAvailable`. Redirects are never followed. Safe to call from many tasks
/// at once.
public final class WebDAVStorage: RemoteStorage, ListingNotesReporting {
    /// The prefix of temporary files; `list()` hides them in every folder.
    public static let temporaryFilePrefix = ".backup-tmp."

    public let endpoint: WebDAVEndpoint
    private let client: HTTPClient
    private let password: Mutex<String?>
    private let reloadPassword: (@Sendable () async throws -> String?)?
    /// Folders (relative paths, "/"-joined) known to exist, so a write does not MKCOL them again.
    private let knownFolders = Mutex<Set<String>>([])
    /// MKCOLs under way, by folder, so concurrent writes wait for one rather than send their own.
    private let folderCreations = Mutex<[String: Task<Void, Error>]>([:])
    /// Whether the ETag of a PUT survives the MOVE into place on this server (nil: not yet seen).
    private let etagSurvivesMove = Mutex<Bool?>(nil)
    /// Whether the server honours `Depth: infinity` (nil: not yet tried).
    private let infiniteDepth = Mutex<Bool?>(nil)
    /// What listings left out since the last `takeListingNotes()`.
    private let listingNotes = Mutex<[String]>([])
    /// The temporary files the last listing saw, with their DAV:getlastmodified, for
    /// `sweepTemporaries()`.
    private let listedTemporaries = Mutex<[(parts: [String], lastModified: String?)]>([])
    /// How old (by the server's DAV:getlastmodified) a temporary file must be before
    /// `sweepTemporaries()` takes it for a stopped run's: younger ones may belong to a live
    /// writer on another machine. Far above the stall timeout, so an upload that still moves
    /// bytes is never taken; a server whose clock is an hour off this machine's is not expected.
    public let staleTemporaryAge: Double

    /// A provider over the folder `endpoint.folder` on the server; nothing is contacted yet.
    ///
    /// `password` goes with `endpoint.user` as HTTP Basic credentials; `reloadPassword` is asked
    /// once after a 401 for a changed password.
    public init(
        endpoint: WebDAVEndpoint, password: String?, reloadPassword: (@Sendable () async throws -> String?)? = nil,
        settings: HTTPSettings = HTTPSettings(), staleTemporaryAge: Double = 3600
    ) {
        self.staleTemporaryAge = staleTemporaryAge
        self.endpoint = endpoint
        self.password = Mutex(password)
        self.reloadPassword = reloadPassword
        self.client = HTTPClient(server: endpoint.server, settings: settings)
    }

    /// Creates the remote folder itself, the last folder of the URL's path, when it is missing;
    /// its parent must exist. Only `backup init` calls it: a sync never creates the remote folder
    /// (a missing one at sync time is a wrong URL). Returns whether it was created.
    public func createRemoteFolder() async throws -> Bool {
        let (found, _) = try await propfind(
            folderURL: endpoint.folderURL, depth: "0", properties: ["<d:resourcetype/>"],
            what: "looking for \(endpoint.displayURL)")
        if found.status == 207 { return false }  // it exists
        let response = try await sendWhileLocked(
            "creating \(endpoint.displayURL)", method: "MKCOL", url: endpoint.folderURL, repeatable: false)
        switch response.status {
        case 200, 201, 204: return true
        case 405: return false  // it exists
        case 404, 409:
            throw CloudError(.notAvailable, "the parent folder of \(endpoint.displayURL) does not exist on \(endpoint.server); "
                + "create it on the server, or correct the remote URL")
        default:
            throw failure(response, "creating the folder", endpoint.displayURL)
        }
    }

    // MARK: RemoteStorage

    /// The server's principal for the user (RFC 5397 `current-user-principal`) where the server
    /// names one, else the user at the server; followed by the folder, so another account, another
    /// server or another folder is another identity.
    public func identityKey() async throws -> String? {
        let (response, stream) = try await propfind(folderURL: endpoint.folderURL, depth: "0", properties: [
            "<d:current-user-principal/>", "<d:resourcetype/>",
        ], what: "reading the account of \(endpoint.displayURL)")
        try checkRoot(response, what: "reading the account")
        let entries = try parseMultistatus(response, stream, what: "reading the account")
        let principal = entries.first?.principal.flatMap { $0.isEmpty ? nil : $0 }
        let who = principal.map { "principal " + absoluteHref($0) }
            ?? "user \(endpoint.user ?? "(anonymous)")@\(endpoint.server)"
        return "webdav \(who) folder /\(endpoint.folder.joined(separator: "/"))"
    }

    /// Every file under the remote folder, temporaries left out.
    ///
    /// One `PROPFIND Depth: infinity` where the server allows it; otherwise (or when the answer
    /// looks cut to one level, as some servers do silently) a walk with `Depth: 1` per folder.
    ///
    /// The root's own level is read first (`Depth: 1`; a root without folders is then listed):
    /// where it holds the versions folder, each other folder at the root is listed on its own,
    /// so the server never walks the versions (30 days of them can outnumber the tree).
    public func list() async throws -> RemoteFileList {
        if infiniteDepth.withLock({ $0 }) != false {
            let (rootLevel, rootFiles, belowRoot) = try await listRootLevel()
            // No folder at the root (and a server that answered the depth asked): its own level
            // is the whole listing.
            if !belowRoot && !rootLevel.contains(where: \.isCollection) { return files(in: rootLevel, collected: rootFiles) }
            if rootLevel.contains(where: { $0.isCollection && $0.path == [VersionStore.folder] }) {
                let others = rootLevel.filter { $0.path != [VersionStore.folder] }
                if let listed = try await listAroundVersions(others, rootFiles) { return listed }
                return try await walk()
            }
            let (response, stream) = try await propfind(
                folderURL: endpoint.folderURL, depth: "infinity", properties: Self.fileProperties,
                what: "listing \(endpoint.displayURL)", collecting: FileCollection(folder: nil, temporaryPrefix: Self.temporaryFilePrefix))
            try checkRoot(response, what: "listing")
            // A redirect is not a refusal of the depth: it is never followed, nor walked around.
            if response.status == 401 || (300..<400).contains(response.status) {
                throw failure(response, "listing", endpoint.displayURL)
            }
            if response.status == 207 {
                let entries = try parseMultistatus(response, stream, what: "listing", notes: true)
                let folders = entries.filter { $0.isCollection && !$0.path.isEmpty }
                let deepest = max(entries.map { $0.path.count }.max() ?? 0, stream.deepestFile)
                if folders.isEmpty || deepest > 1 {
                    infiniteDepth.withLock { $0 = true }
                    return files(in: entries, collected: stream.files)
                }
            } else {
                infiniteDepth.withLock { $0 = false }
            }
        }
        return try await walk()
    }

    /// The root's files and, each listed with `Depth: infinity` (up to `listingConcurrency`
    /// at once), its folders but the versions folder; nil where the server refuses the depth.
    private func listAroundVersions(_ rootLevel: [WebDAVEntry], _ rootFiles: RemoteFileList) async throws -> RemoteFileList? {
        let folders = rootLevel.filter { $0.isCollection && !$0.foreignSpelling && $0.path.count == 1 && $0.path != [VersionStore.folder] }
        var entries = rootLevel
        var collected = rootFiles
        var refused = false
        try await withThrowingTaskGroup(of: ([WebDAVEntry], RemoteFileList)?.self) { group in
            var pending = folders.map(\.path)
            var running = 0
            while true {
                while running < Self.listingConcurrency, !refused, let folder = pending.popLast() {
                    group.addTask { try await self.listInfinite(folder) }
                    running += 1
                }
                guard running > 0, let result = try await group.next() else { break }
                running -= 1
                guard let (level, files) = result else {
                    refused = true
                    continue
                }
                entries += level
                collected.append(contentsOf: files)
            }
        }
        if refused {
            infiniteDepth.withLock { $0 = false }
            return nil
        }
        infiniteDepth.withLock { $0 = true }
        return files(in: entries, collected: collected)
    }

    /// One folder below the root with `Depth: infinity`: its entries (itself left out) and its
    /// files; nil where the server refuses the depth or cut the answer to one level.
    private func listInfinite(_ folder: [String]) async throws -> ([WebDAVEntry], RemoteFileList)? {
        let display = folder.joined(separator: "/")
        let (response, stream) = try await propfind(
            folderURL: folderURL(folder), depth: "infinity", properties: Self.fileProperties, what: "listing \(display)",
            collecting: FileCollection(folder: nil, temporaryPrefix: Self.temporaryFilePrefix))
        if response.status == 404 { return ([], []) }  // removed meanwhile
        if response.status == 401 || (300..<400).contains(response.status) { throw failure(response, "listing", display) }
        guard response.status == 207 else { return nil }
        let entries = try parseMultistatus(response, stream, what: "listing \(display)", notes: true).filter {
            $0.path.count > folder.count && $0.path.starts(with: folder)
        }
        let subfolders = entries.filter { $0.isCollection }
        let deepest = max(entries.map { $0.path.count }.max() ?? 0, stream.deepestFile)
        if !subfolders.isEmpty && deepest <= folder.count + 1 { return nil }
        return (entries, stream.files)
    }

    public func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        try await place(path, body: .data(data))
    }

    /// Uploads the local file at `localPath`, streaming it; a file that cannot be read throws
    /// `LocalFileError`.
    ///
    /// The PUT carries `X-OC-Mtime` with the source's modification time in whole seconds (the
    /// floor; rclone ignores a fraction), which Nextcloud, ownCloud and rclone serve webdav
    /// give the file; the MOVE into place keeps it on those servers (rclone renames the file
    /// on its disk). A server that ignores the header gives the file the time of the upload.
    public func writeFile(
        _ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws -> RemoteFile {
        let (fd, size, modified) = try openLocalSource(localPath)
        defer { close(fd) }
        return try await place(path, body: .file(fd: fd, path: localPath, offset: 0, length: size),
                               headers: [("X-OC-Mtime", Self.mtimeHeader(modified))], onSent: onBytes)
    }

    /// The value of `X-OC-Mtime` for `time`: whole seconds since 1970, rounded down (so a time
    /// before 1970 with a fraction goes to the earlier second, as `stat` would show it).
    static func mtimeHeader(_ time: timespec) -> String {
        // tv_nsec is 0..<1e9, so tv_sec is already the floor.
        String(Int64(time.tv_sec))
    }

    /// The file's bytes, at most `HTTPSettings.readBytesLimit` of them.
    public func readBytes(_ path: String) async throws -> Data {
        let parts = try Self.components(of: path)
        let response = try await send("reading \(path)", method: "GET", url: fileURL(parts),
                                      sink: .memory(limit: client.settings.readBytesLimit), repeatable: true)
        guard response.status == 200 else { throw failure(response, "reading", path) }
        return response.body
    }

    /// Streams the body into `fd`, stopped at the first byte past `expectedSize`.
    public func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        let parts = try Self.components(of: path)
        try await downloadChecked(path, into: fd, expectedSize: expectedSize) {
            let response = try await self.send(
                "downloading \(path)", method: "GET", url: self.fileURL(parts),
                sink: .file(fd: fd, path: localCopyName(path), limit: expectedSize, onBytes: onBytes), repeatable: true)
            guard response.status == 200 else { throw self.failure(response, "downloading", path) }
        }
    }

    /// Deletes the file; an absent one (404) is success. Emptied folders are left in place.
    public func delete(_ path: String) async throws {
        let parts = try Self.components(of: path)
        let response = try await send("deleting \(path)", method: "DELETE", url: fileURL(parts), repeatable: true)
        guard [200, 202, 204, 404].contains(response.status) else { throw failure(response, "deleting", path) }
    }

    /// Deletes the temporary files of stopped runs that the last `list()` saw: those not
    /// modified for `staleTemporaryAge` seconds (a temporary without a date is left alone).
    /// Returns how many went. Called by the engine only in a run that may write.
    public func sweepTemporaries() async throws -> Int {
        let now = Date()
        let stale = listedTemporaries.withLock { seen in
            defer { seen.removeAll() }
            return seen.filter { temporary in
                guard let modified = temporary.lastModified.flatMap(HTTPClient.httpDate) else { return false }
                return now.timeIntervalSince(modified) >= staleTemporaryAge
            }
        }
        var swept = 0
        for temporary in stale {
            let response = try await send("removing a temporary file left by a stopped run", method: "DELETE",
                                          url: fileURL(temporary.parts), repeatable: true)
            if [200, 202, 204].contains(response.status) { swept += 1 }
        }
        return swept
    }

    // MARK: Versions

    /// MOVE (or with `copy`, COPY) with `Overwrite: F` into the version's place, its folders
    /// made first. Neither is repeatable blindly: after a lost answer (a dropped connection, a
    /// stall, a 500/502/504) the provider asks (PROPFIND Depth 0) where the file is, and sends
    /// the request again only when the source is still there and the destination is not.
    public func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool {
        let parts = try Self.components(of: path)
        let target = try Self.components(of: destination)
        let method = copy ? "COPY" : "MOVE"
        var lost = 0
        var remade = false
        while true {
            try await ensureFolders(Array(target.dropLast()), path: destination)
            var answer: HTTPResponse?
            var lostAnswer = CloudError(.transport, "no answer from \(endpoint.server)")
            do {
                answer = try await send(
                    "keeping \(path) as \(destination)", method: method, url: fileURL(parts),
                    headers: [("Destination", fileURL(target)), ("Overwrite", "F")], repeatable: false)
            } catch let error as CloudError where error.kind == .transport {
                lostAnswer = error
            }
            if let response = answer {
                switch response.status {
                case 200, 201, 204: return copy
                case 404: throw CloudError(.notFound, "\(path) does not exist on \(endpoint.displayURL) (while keeping it as a version)")
                case 409 where !remade:
                    // The version's folder went away since it was made: made again, once.
                    forgetFolders(Array(target.dropLast()))
                    remade = true
                    continue
                case 412:
                    throw CloudError(.transport, "\(destination) already exists on \(endpoint.displayURL); \(path) was not kept over it")
                case 500, 502, 504:
                    lostAnswer = failure(response, "keeping a version of", path)
                default:
                    // Some servers refuse a MOVE or COPY of a missing source with 403 or 409.
                    if [403, 409].contains(response.status), try await !exists(parts, what: "checking \(path)") {
                        throw CloudError(.notFound, "\(path) does not exist on \(endpoint.displayURL) (while keeping it as a version)")
                    }
                    throw failure(response, "keeping a version of", path)
                }
            }
            lost += 1
            let source = try await exists(parts, what: "checking whether \(path) was kept")
            let kept = try await exists(target, what: "checking whether \(path) was kept")
            if kept && (copy || !source), let placed = try? await stat(target, path: destination), placed.size == size {
                listingNotes.withLock {
                    $0.append("the answer to keeping \(path) as \(destination) was lost (\(lostAnswer.message)); "
                        + "\(endpoint.server) had kept it, so the run went on")
                }
                return copy || source
            }
            if source && !kept && lost <= client.settings.connectionRetries { continue }  // not done: the source is still the source
            throw CloudError(.transport, "the answer to keeping \(path) as a version was lost (\(lostAnswer.message)); "
                + (source && !kept ? "it was not kept, so it was not replaced or deleted; run again"
                    : "\(endpoint.server) now shows \(source ? "it" : "no file") at \(path) and \(kept ? "a file" : "none") at \(destination); run again"))
        }
    }

    /// Whether a file or folder is at `parts` (PROPFIND Depth 0: 207 yes, 404 no).
    private func exists(_ parts: [String], what: String) async throws -> Bool {
        let response = try await propfind(folderURL: fileURL(parts), depth: "0", properties: ["<d:resourcetype/>"], what: what).0
        switch response.status {
        case 207: return true
        case 404: return false
        default: throw failure(response, what, parts.joined(separator: "/"))
        }
    }

    public func listNames(in folder: String) async throws -> [String] {
        let parts = try Self.components(of: folder)
        let (entries, files) = try await listOneLevel(parts, versions: true)
        return entries.compactMap(\.path.last) + files.indices.compactMap { files.path(at: $0).split(separator: "/").last.map(String.init) }
    }

    public func listFolder(_ folder: String) async throws -> RemoteFileList {
        try await walk(from: try Self.components(of: folder), versions: true)
    }

    /// DELETE of the collection (the server removes what is in it); absent is success.
    public func deleteFolder(_ folder: String) async throws {
        let parts = try Self.components(of: folder)
        let response = try await sendWhileLocked("removing \(folder)", method: "DELETE", url: folderURL(parts), repeatable: true)
        guard [200, 202, 204, 404].contains(response.status) else { throw failure(response, "removing", folder) }
        forgetFolders(parts)
        knownFolders.withLock { known in known = known.filter { !$0.hasPrefix(parts.joined(separator: "/") + "/") } }
    }

    // MARK: Quota

    /// The space the server reports for this user (RFC 4331), or nil where it reports none.
    public func quota() async throws -> WebDAVQuota? {
        let (response, stream) = try await propfind(folderURL: endpoint.folderURL, depth: "0", properties: [
            "<d:quota-available-bytes/>", "<d:quota-used-bytes/>",
        ], what: "reading the quota of \(endpoint.displayURL)")
        try checkRoot(response, what: "reading the quota")
        guard let entry = try parseMultistatus(response, stream, what: "reading the quota").first else { return nil }
        if entry.quotaAvailable == nil && entry.quotaUsed == nil { return nil }
        return WebDAVQuota(available: entry.quotaAvailable, used: entry.quotaUsed)
    }

    // MARK: Listing notes

    /// What listings left out since the last call, and why (an href naming another server or
    /// a path outside the remote folder, a file listed twice), once each; a listing that left
    /// nothing out adds nothing.
    public func takeListingNotes() -> [String] {
        listingNotes.withLock { notes in defer { notes.removeAll() }; return notes }
    }

    // MARK: Paths

    /// The components of a remote path, or a `.transport` error naming what is wrong with it.
    static func components(of path: String) throws -> [String] {
        let parts: [String]
        do {
            parts = try RelativePath.components(of: path)
        } catch {
            throw CloudError(.transport, "the remote path \(String(reflecting: path)) is not valid: \(error.reason); "
                + "remote paths are relative to the remote folder and \"/\"-separated")
        }
        if let name = parts.last, name.hasPrefix(temporaryFilePrefix) {
            throw CloudError(.transport, "the remote path \(String(reflecting: path)) is not valid: "
                + "the name is reserved for the provider's temporary files")
        }
        return parts
    }

    /// The URL of the file at `parts` (names in FileName's codec, spelt on the wire by `WireName`).
    private func fileURL(_ parts: [String]) -> String {
        endpoint.server + endpoint.encodedPath(endpoint.folder + parts.map(WireName.encode))
    }

    private func folderURL(_ parts: [String]) -> String {
        endpoint.server + endpoint.encodedPath(endpoint.folder + parts.map(WireName.encode)) + "/"
    }

    /// An href as an absolute URL on this server, for the identity.
    private func absoluteHref(_ href: String) -> String {
        href.hasPrefix("/") ? endpoint.server + href : href
    }

    // MARK: Writing

    /// PUTs `body` (with `headers`) to a temporary name beside `path`, then MOVEs it into place.
    private func place(
        _ path: String, body: HTTPBody, headers: [(String, String)] = [], onSent: (@Sendable (Int64) -> Void)? = nil
    ) async throws -> RemoteFile {
        let parts = try Self.components(of: path)
        let folder = Array(parts.dropLast())
        let temporaryParts = folder + [Self.temporaryFilePrefix + String(UInt64.random(in: .min ... .max), radix: 16)]
        let temporaryURL = fileURL(temporaryParts)

        var put: HTTPResponse?
        for attempt in 0..<2 {
            try await ensureFolders(folder, path: path)
            let response = try await uploadTemporary(temporaryURL, body: body, headers: headers, path: path, onSent: onSent)
            if [200, 201, 204].contains(response.status) {
                put = response
                break
            }
            // The folder went away since it was made or listed (a concurrent delete elsewhere):
            // forget it and make it again, once.
            if (response.status == 404 || response.status == 409) && attempt == 0 {
                forgetFolders(folder)
                continue
            }
            if (response.status == 404 || response.status == 409) && folder.isEmpty {
                throw rootMissing("writing \(path)")
            }
            throw failure(response, "writing", path)
        }
        guard let put else { throw CloudError(.transport, "writing \(path) to \(endpoint.displayURL) failed") }

        if let landed = try await moveIntoPlace(temporaryParts, parts, path: path, size: body.length) {
            return landed
        }

        let putId = put.header("oc-fileid") ?? put.header("etag").flatMap(Self.versionId(etag:))
        if etagSurvivesMove.withLock({ $0 }) == true, let putId {
            return RemoteFile(path: path, size: body.length, remoteId: putId)
        }
        // Whether the id of the PUT is the id the listing will show is a property of the server:
        // asked once, then trusted, or asked after every write where it is not.
        let placed = try await stat(parts, path: path)
        etagSurvivesMove.withLock { $0 = (putId != nil && putId == placed.remoteId) }
        return RemoteFile(path: path, size: placed.size, remoteId: placed.remoteId)
    }

    /// MOVEs the temporary file onto `parts`. Returns nil when the server answered the MOVE, or
    /// the placed file when the answer was lost but the server did it.
    ///
    /// A MOVE is not repeatable: sent again after the server did it, its `Overwrite: T` deletes
    /// the file just placed and then finds no source. So after a lost answer (a dropped
    /// connection, a stall, a 500/502/504) the provider asks first (PROPFIND Depth 0): the
    /// temporary still there means the MOVE did not happen and it is sent again; the temporary
    /// gone and the path holding a file of the written size means it did. Anything else
    /// cannot be told apart from another writer's work and is Transport.
    private func moveIntoPlace(_ temporaryParts: [String], _ parts: [String], path: String, size: Int64) async throws
        -> RemoteFile?
    {
        let temporaryURL = fileURL(temporaryParts)
        var lost = 0
        while true {
            let lostAnswer: CloudError
            do {
                let move = try await send(
                    "moving \(path) into place", method: "MOVE", url: temporaryURL,
                    headers: [("Destination", fileURL(parts)), ("Overwrite", "T")], repeatable: false)
                if [200, 201, 204].contains(move.status) { return nil }
                guard [500, 502, 504].contains(move.status) else {
                    await discard(temporaryURL)
                    throw failure(move, "moving into place", path)
                }
                lostAnswer = failure(move, "moving into place", path)
            } catch let error as CloudError where error.kind == .transport {
                lostAnswer = error
            } catch {
                await discard(temporaryURL)
                throw error
            }
            lost += 1
            let temporary = try await propfind(folderURL: temporaryURL, depth: "0", properties: ["<d:resourcetype/>"],
                                               what: "checking whether \(path) was moved into place").0
            if temporary.status == 207 {
                guard lost <= client.settings.connectionRetries else {
                    await discard(temporaryURL)
                    throw lostAnswer
                }
                continue  // not moved: the temporary is still the source
            }
            if temporary.status == 404, let placed = try? await stat(parts, path: path), placed.size == size {
                return placed
            }
            await discard(temporaryURL)
            throw CloudError(.transport, "the answer to moving \(path) into place was lost (\(lostAnswer.message)), "
                + "and \(endpoint.server) now holds neither the temporary file nor a file of \(size) bytes there; "
                + "run again")
        }
    }

    private func uploadTemporary(
        _ url: String, body: HTTPBody, headers: [(String, String)], path: String, onSent: (@Sendable (Int64) -> Void)?
    ) async throws -> HTTPResponse {
        do {
            return try await send(
                "uploading \(path)", method: "PUT", url: url, headers: headers, body: body, onSent: onSent, repeatable: true)
        } catch {
            // A broken PUT can leave a partial temporary file on the server.
            await discard(url)
            throw error
        }
    }

    /// Best-effort removal of a temporary file after a failure; list() hides it anyway.
    private func discard(_ url: String) async {
        _ = try? await sendWhileLocked("removing a temporary file", method: "DELETE", url: url, repeatable: true)
    }

    /// Sends a request again while the server answers 423 Locked, a few times: servers lock a
    /// path for the length of a request on it (a concurrent MKCOL of the same folder, or a PUT
    /// whose connection broke and that the server is still winding up).
    private func sendWhileLocked(_ what: String, method: String, url: String, repeatable: Bool) async throws
        -> HTTPResponse
    {
        var response = try await send(what, method: method, url: url, repeatable: repeatable)
        for attempt in 0..<6 where response.status == 423 {
            try await Task.sleep(nanoseconds: UInt64(50_000_000) << UInt64(attempt))
            response = try await send(what, method: method, url: url, repeatable: repeatable)
        }
        return response
    }

    /// Makes each missing folder of `folder`, top down; the remote folder itself must exist.
    ///
    /// Concurrent writes into the same new folder share one MKCOL: the server locks the path
    /// for each MKCOL, and a crowd of them would mostly be refused with 423 Locked.
    private func ensureFolders(_ folder: [String], path: String) async throws {
        for depth in folder.indices {
            let prefix = Array(folder[...depth])
            let key = prefix.joined(separator: "/")
            let task: Task<Void, Error>? = folderCreations.withLock { creations in
                if knownFolders.withLock({ $0.contains(key) }) { return nil }
                if let running = creations[key] { return running }
                let created = Task { try await self.makeFolder(prefix, key: key, isTop: depth == 0, path: path) }
                creations[key] = created
                return created
            }
            guard let task else { continue }
            defer { _ = folderCreations.withLock { $0.removeValue(forKey: key) } }
            try await task.value
        }
    }

    private func makeFolder(_ prefix: [String], key: String, isTop: Bool, path: String) async throws {
        let response = try await sendWhileLocked(
            "creating the folder \(key)", method: "MKCOL", url: folderURL(prefix), repeatable: true)
        switch response.status {
        case 200, 201, 204, 405:
            // 405: it exists already (made by another client, or before).
            knownFolders.withLock { _ = $0.insert(key) }
        case let status where (status == 404 || status == 409) && isTop:
            throw rootMissing("writing \(path)")
        default:
            throw failure(response, "creating the folder \(key) for", path)
        }
    }

    private func forgetFolders(_ folder: [String]) {
        knownFolders.withLock { known in
            for depth in folder.indices { known.remove(folder[...depth].joined(separator: "/")) }
        }
    }

    /// The size and id of one file, by PROPFIND Depth 0.
    private func stat(_ parts: [String], path: String) async throws -> RemoteFile {
        let (response, stream) = try await propfind(
            folderURL: fileURL(parts), depth: "0", properties: Self.fileProperties, what: "checking \(path)")
        guard response.status == 207 else { throw failure(response, "checking", path) }
        guard let entry = try parseMultistatus(response, stream, what: "checking \(path)").first(where: { !$0.isCollection })
        else {
            throw CloudError(.transport, "\(endpoint.server) did not describe \(path) after writing it; run again")
        }
        return RemoteFile(path: path, size: entry.size, remoteId: entry.remoteId)
    }

    // MARK: Listing

    private static let fileProperties = [
        "<d:resourcetype/>", "<d:getcontentlength/>", "<d:getetag/>", "<oc:fileid/>", "<d:getlastmodified/>",
    ]

    /// The files among `entries` and those `collected` as they were parsed, temporaries left
    /// out; a path listed again (the same href twice, or spelt with another percent-encoding)
    /// keeps its first entry, with a note.
    private func files(in entries: [WebDAVEntry], collected: RemoteFileList, recordTemporaries: Bool = true) -> RemoteFileList {
        var folders = Set<String>()
        var result = collected
        var temporaries: [(parts: [String], lastModified: String?)] = []
        for entry in entries {
            let path = entry.path.joined(separator: "/")
            if entry.isCollection {
                if !entry.path.isEmpty { folders.insert(path) }
                continue
            }
            guard let name = entry.path.last else { continue }
            if entry.foreignSpelling {
                result.append(RemoteFile(path: path, size: entry.size, remoteId: entry.remoteId, foreignSpelling: true))
                continue
            }
            if name.hasPrefix(Self.temporaryFilePrefix) {
                temporaries.append((entry.path, entry.lastModified))
                continue
            }
            result.append(RemoteFile(path: path, size: entry.size, remoteId: entry.remoteId))
        }
        knownFolders.withLock { $0.formUnion(folders) }
        if recordTemporaries { listedTemporaries.withLock { $0 = temporaries } }
        let (unique, duplicates) = result.removingRepeatedPaths()
        if !duplicates.isEmpty {
            let shown = duplicates.prefix(MultistatusStream.maxNotes).map { "left out of the listing: \($0) was listed again" }
            let more = duplicates.count > shown.count ? ["… and \(duplicates.count - shown.count) more files listed again"] : []
            listingNotes.withLock { $0 += shown + more }
        }
        return unique
    }

    /// How many `Depth: 1` listings a walk keeps in flight (rclone's checkers: 8).
    static let listingConcurrency = 8

    /// Lists folder by folder with `Depth: 1`, up to `listingConcurrency` folders at once, a
    /// new one sent as soon as any answers (the files in the order the answers came: a sorted
    /// copy of a large listing would double it while it is made; the sync sorts positions).
    private func walk(from start: [String] = [], versions: Bool = false) async throws -> RemoteFileList {
        var pending: [[String]] = [start]
        var entries: [WebDAVEntry] = []
        var collected = RemoteFileList()
        try await withThrowingTaskGroup(of: ([WebDAVEntry], RemoteFileList).self) { group in
            var running = 0
            while true {
                while running < Self.listingConcurrency, let folder = pending.popLast() {
                    group.addTask { try await self.listOneLevel(folder, versions: versions) }
                    running += 1
                }
                guard running > 0, let (level, files) = try await group.next() else { break }
                running -= 1
                collected.append(contentsOf: files)
                for entry in level {
                    entries.append(entry)
                    // A folder spelt as no request can name it cannot be listed either.
                    if entry.isCollection && !entry.foreignSpelling { pending.append(entry.path) }
                }
            }
        }
        return files(in: entries, collected: collected, recordTemporaries: !versions)
    }

    /// The root's own level, the versions folder among it, and whether the server sent
    /// entries from below it too (it ignored `Depth: 1`).
    private func listRootLevel() async throws -> ([WebDAVEntry], RemoteFileList, Bool) {
        let (response, stream) = try await propfind(
            folderURL: folderURL([]), depth: "1", properties: Self.fileProperties, what: "listing \(endpoint.displayURL)",
            collecting: FileCollection(folder: [], temporaryPrefix: Self.temporaryFilePrefix, skipsVersions: false))
        try checkRoot(response, what: "listing")
        guard response.status == 207 else { throw failure(response, "listing", endpoint.displayURL) }
        let all = try parseMultistatus(response, stream, what: "listing \(endpoint.displayURL)", notes: true)
        let level = all.filter { $0.path.count == 1 }
        return (level, stream.files, stream.belowLevel > 0 || all.contains { $0.path.count > 1 })
    }

    /// The entries directly inside `folder` (not the folder itself), plain files packed.
    private func listOneLevel(_ folder: [String], versions: Bool = false) async throws -> ([WebDAVEntry], RemoteFileList) {
        let display = folder.isEmpty ? endpoint.displayURL : folder.joined(separator: "/")
        let (response, stream) = try await propfind(
            folderURL: folderURL(folder), depth: "1", properties: Self.fileProperties, what: "listing \(display)",
            collecting: FileCollection(folder: folder, temporaryPrefix: Self.temporaryFilePrefix, skipsVersions: !versions))
        if folder.isEmpty {
            try checkRoot(response, what: "listing")
        } else if response.status == 404 {
            return ([], [])  // removed while the walk was under way
        }
        guard response.status == 207 else { throw failure(response, "listing", display) }
        let entries = try parseMultistatus(response, stream, what: "listing \(display)", notes: true).filter {
            $0.path.count == folder.count + 1 && $0.path.starts(with: folder)
        }
        return (entries, stream.files)
    }

    /// Sends a PROPFIND whose 207 body is parsed as it arrives into the returned stream.
    private func propfind(
        folderURL url: String, depth: String, properties: [String], what: String, collecting: FileCollection? = nil
    ) async throws -> (HTTPResponse, MultistatusStream) {
        let body = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
            + "<d:propfind xmlns:d=\"DAV:\" xmlns:oc=\"http://owncloud.org/ns\"><d:prop>"
            + properties.joined() + "</d:prop></d:propfind>"
        let stream = MultistatusStream(endpoint: endpoint, collecting: collecting)
        let response = try await send(
            what, method: "PROPFIND", url: url,
            headers: [("Depth", depth), ("Content-Type", "application/xml; charset=utf-8")],
            body: .data(Data(body.utf8)), sink: .stream(stream), repeatable: true)
        return (response, stream)
    }

    /// The entries of a 207 multistatus, paths made relative to the remote folder; entries
    /// on another server or outside the folder are left out (noted, where `notes`).
    private func parseMultistatus(
        _ response: HTTPResponse, _ stream: MultistatusStream, what: String, notes: Bool = false
    ) throws -> [WebDAVEntry] {
        guard response.status == 207 else { throw failure(response, what, endpoint.displayURL) }
        if notes {
            let left = stream.notes
            if !left.isEmpty { listingNotes.withLock { $0 += left } }
        }
        return stream.entries
    }

    /// Where an href points: a path on this server (decoded components), another server, or
    /// nowhere this provider can name (a percent-encoding that is malformed or not UTF-8).
    enum HrefLocation: Equatable {
        case path([String])
        case otherServer
        case undecodable
    }

    /// Where `href` (a path, or a full URL) points, seen from `endpoint`'s server.
    static func hrefLocation(_ href: String, on endpoint: WebDAVEndpoint) -> HrefLocation {
        var path = Substring(href)
        if !href.hasPrefix("/"), let schemeEnd = path.firstRange(of: "://") {
            let scheme = path[..<schemeEnd.lowerBound].lowercased()
            let afterScheme = path[schemeEnd.upperBound...]
            let authority = afterScheme[..<(afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex)]
            path = afterScheme[authority.endIndex...]
            // host[:port], the port defaulting by scheme; credentials in an href are not ours either.
            let secure = scheme == "https"
            guard scheme == "http" || secure, secure == endpoint.secure, !authority.contains("@") else { return .otherServer }
            var host = Substring(authority), port = secure ? 443 : 80
            if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]"), let number = Int(authority[authority.index(after: colon)...]) {
                host = authority[..<colon]
                port = number
            }
            guard host.lowercased() == endpoint.host.lowercased(), port == (endpoint.port ?? (secure ? 443 : 80)) else {
                return .otherServer
            }
        }
        var parts: [String] = []
        for raw in path.split(separator: "/") {
            guard let part = percentDecoded(raw) else { return .undecodable }
            if part == "." { continue }
            parts.append(part)
        }
        return .path(parts)
    }

    /// The decoded path components of an href, which may be a path or a full URL on any server.
    static func hrefComponents(_ href: String) -> [String]? {
        var path = Substring(href)
        if !href.hasPrefix("/"), let schemeEnd = path.firstRange(of: "://") {
            let afterScheme = path[schemeEnd.upperBound...]
            path = afterScheme[(afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex)...]
        }
        var parts: [String] = []
        for raw in path.split(separator: "/") {
            guard let part = percentDecoded(raw) else { return nil }
            if part == "." { continue }
            parts.append(part)
        }
        return parts
    }

    /// `text` with its %XX escapes decoded (either case), or nil where one is malformed or the
    /// bytes are not UTF-8: names are sent as the UTF-8 of their String form, so a listing
    /// gives that form back.
    private static func percentDecoded(_ text: Substring) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
        var bytes: [UInt8] = []
        var utf8 = text.utf8[...]
        while let byte = utf8.popFirst() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            let digits = Array(utf8.prefix(2))
            guard digits.count == 2, digits.allSatisfy({ UInt8(ascii: "0")...UInt8(ascii: "9") ~= $0
                || UInt8(ascii: "a")...UInt8(ascii: "f") ~= $0 || UInt8(ascii: "A")...UInt8(ascii: "F") ~= $0 }),
                let value = UInt8(String(decoding: digits, as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
            utf8 = utf8.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    // MARK: Requests and errors

    /// Sends one request with the user's credentials, reading the password again once after
    /// a 401 where the app can.
    private func send(
        _ what: String, method: String, url: String, headers: [(String, String)] = [], body: HTTPBody = .empty,
        sink: HTTPSink = .memory(limit: HTTPSink.smallBodyLimit), onSent: (@Sendable (Int64) -> Void)? = nil, repeatable: Bool
    ) async throws -> HTTPResponse {
        var reloaded = false
        while true {
            let current = password.withLock { $0 }
            let auth = endpoint.user.map { (user: $0, password: current ?? "") }
            let response = try await client.send(what, repeatable: repeatable) {
                HTTPRequest(method: method, url: url, headers: headers, body: body, sink: sink, onSent: onSent, basicAuth: auth)
            }
            if response.status == 401, !reloaded, let reloadPassword {
                reloaded = true
                if let fresh = try await reloadPassword(), fresh != current {
                    password.withLock { $0 = fresh }
                    continue
                }
            }
            return response
        }
    }

    /// `.notAvailable` for a remote folder the server does not have (404, 405 or 409 on it).
    private func checkRoot(_ response: HTTPResponse, what: String) throws {
        if [404, 405, 409].contains(response.status) { throw rootMissing(what) }
    }

    private func rootMissing(_ what: String) -> CloudError {
        CloudError(.notAvailable, "the remote folder \(endpoint.displayURL) does not exist on \(endpoint.server) "
            + "(while \(what)); create it on the server, or correct the remote URL, then run again")
    }

    /// The CloudError a final response stands for (DESIGN.md's error table, WebDAV column),
    /// with the password masked in every form should the server have echoed it (SecretMask).
    func failure(_ response: HTTPResponse, _ operation: String, _ path: String) -> CloudError {
        let mask = SecretMask(secrets: [password.withLock { $0 }], user: endpoint.user)
        return mask.masked(unmaskedFailure(response, operation, path, mask: mask))
    }

    private func unmaskedFailure(_ response: HTTPResponse, _ operation: String, _ path: String, mask: SecretMask) -> CloudError {
        let server = endpoint.server
        switch response.status {
        case 401:
            return CloudError(.authRevoked, "\(server) refused the credentials of \(endpoint.user ?? "the anonymous user") "
                + "(HTTP 401) while \(operation) \(path); check the user name and the password "
                + "(BACKUP_PASSWORD or the profile's password_command)")
        case 403:
            return CloudError(.authRevoked, "\(server) refused access (HTTP 403) while \(operation) \(path); "
                + "check that \(endpoint.user ?? "the user") may read and write \(endpoint.displayURL)")
        case 404:
            return CloudError(.notFound, "\(path) does not exist on \(endpoint.displayURL) (while \(operation) it)")
        case 300..<400:
            let target = response.header("location").map { " to \($0)" } ?? ""
            return CloudError(.transport, "\(server) answered with a redirect (HTTP \(response.status))\(target) while "
                + "\(operation) \(path); redirects are not followed: put the address it points to in the remote URL")
        case 507:
            return CloudError(.storageFull, "\(server) has no space left for this account (HTTP 507) while "
                + "\(operation) \(path); free some space on it or raise the quota, then run again")
        default:
            // Masked before it is cut, so a cut cannot leave part of a secret unrecognised.
            let excerpt = mask.masked(response.bodyExcerpt)
            return CloudError(.transport, "\(server) answered HTTP \(response.status) while \(operation) \(path)"
                + (excerpt.isEmpty ? "" : ": \(excerpt.prefix(300))"))
        }
    }
}

// MARK: Shared by the HTTP providers

/// A provider whose `list()` can leave entries out for a reason the person should hear (an
/// href naming another server, a key listed twice). The notes wait in the provider until
/// taken, so `list()` and every caller of it stay as they are; a front end that wants them
/// asks `(storage as? ListingNotesReporting)?.takeListingNotes()` after a listing.
public protocol ListingNotesReporting: AnyObject, Sendable {
    /// What listings left out since the last call, and why; each note is returned once.
    func takeListingNotes() -> [String]
}

/// Opens a regular local file for upload and returns it with its size and modification time
/// (from the `fstat` of the opened descriptor, so the time is the uploaded file's even if the
/// path is replaced meanwhile); the caller closes it.
///
/// `localPath` is in `FileName`'s String form: a name that is not UTF-8 (or holds the escape
/// character) is opened by the bytes it stands for, never by its escaped spelling.
func openLocalSource(_ localPath: String) throws -> (fd: Int32, size: Int64, modified: timespec) {
    // O_NONBLOCK so that a FIFO given by mistake is refused below instead of hanging the open.
    let fd = FileName.withCString(localPath) { open($0, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
    guard fd >= 0 else { throw localFileError(errno: errno, operation: "read", path: localPath) }
    var status = stat()
    guard fstat(fd, &status) == 0 else {
        let code = errno
        close(fd)
        throw localFileError(errno: code, operation: "read", path: localPath)
    }
    guard status.st_mode & S_IFMT == S_IFREG else {
        close(fd)
        throw LocalFileError(path: localPath, message: "cannot read the local file \(localPath): it is not a regular file")
    }
    return (fd, Int64(status.st_size), status.st_mtim)
}

/// How a download's local copy is named in messages: providers see only its descriptor.
func localCopyName(_ remotePath: String) -> String { "the local copy of \(remotePath)" }

/// Runs `fetch` (which writes into `fd`), then checks what it wrote against `expectedSize`:
/// a body stopped past the limit or ending short throws `DownloadSizeMismatch`.
func downloadChecked(
    _ path: String, into fd: Int32, expectedSize: Int64?, _ fetch: () async throws -> Void
) async throws {
    do {
        try await fetch()
    } catch let overflow as SinkOverflow {
        throw DownloadSizeMismatch(path: path, expected: expectedSize ?? overflow.written, received: overflow.written + 1, longer: true)
    }
    guard let expectedSize else { return }
    var info = stat()
    guard fstat(fd, &info) == 0 else { throw localFileError(errno: errno, operation: "write", path: localCopyName(path)) }
    if Int64(info.st_size) != expectedSize {
        throw DownloadSizeMismatch(path: path, expected: expectedSize, received: Int64(info.st_size), longer: Int64(info.st_size) > expectedSize)
    }
}

extension WebDAVStorage {
    /// The version id an ETag gives: its opaque tag, with a weak one's `W/` taken off. Apache
    /// calls the ETag of a file changed in the last second weak (`W/"2-61a…"`) and the same tag
    /// strong (`"2-61a…"`) once that second is past: one version, which a comparison of the
    /// whole text took for two, so a sync uploaded every file written in the second before it
    /// listed again (RFC 9110 §8.8.3.2: the weak comparison, which is the one for "same bytes
    /// on the server", compares the opaque tags). nil for an empty ETag.
    static func versionId(etag: String) -> String? {
        let tag = etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
        return tag.isEmpty ? nil : tag
    }

    /// An id an earlier version recorded with its `W/` names the version whose tag it carries.
    public func isSameVersion(recorded: String, listed: RemoteFile) -> Bool {
        guard recorded.hasPrefix("W/"), let id = listed.remoteId else { return false }
        return Self.versionId(etag: recorded) == id
    }
}
