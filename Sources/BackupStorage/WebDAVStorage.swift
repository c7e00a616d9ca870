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
/// holds either its old file or the whole new one; `list()` hides temporary names. The remote
/// folder itself is never created: a missing one is `.notAvailable`. Safe to call from many
/// tasks at once.
public final class WebDAVStorage: RemoteStorage {
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

    /// A provider over the folder `endpoint.folder` on the server; nothing is contacted yet.
    ///
    /// `password` goes with `endpoint.user` as HTTP Basic credentials; `reloadPassword` is asked
    /// once after a 401 for a changed password.
    public init(
        endpoint: WebDAVEndpoint, password: String?, reloadPassword: (@Sendable () async throws -> String?)? = nil,
        settings: HTTPSettings = HTTPSettings()
    ) {
        self.endpoint = endpoint
        self.password = Mutex(password)
        self.reloadPassword = reloadPassword
        self.client = HTTPClient(server: endpoint.server, settings: settings)
    }

    // MARK: RemoteStorage

    /// The server's principal for the user (RFC 5397 `current-user-principal`) where the server
    /// names one, else the user at the server; followed by the folder, so another account, another
    /// server or another folder is another identity.
    public func identityKey() async throws -> String? {
        let response = try await propfind(folderURL: endpoint.folderURL, depth: "0", properties: [
            "<d:current-user-principal/>", "<d:resourcetype/>",
        ], what: "reading the account of \(endpoint.displayURL)")
        try checkRoot(response, what: "reading the account")
        let entries = try parseMultistatus(response, what: "reading the account")
        let principal = entries.first?.principal.flatMap { $0.isEmpty ? nil : $0 }
        let who = principal.map { "principal " + absoluteHref($0) }
            ?? "user \(endpoint.user ?? "(anonymous)")@\(endpoint.server)"
        return "webdav \(who) folder /\(endpoint.folder.joined(separator: "/"))"
    }

    /// Every file under the remote folder, temporaries left out.
    ///
    /// One `PROPFIND Depth: infinity` where the server allows it; otherwise (or when the answer
    /// looks cut to one level, as some servers do silently) a walk with `Depth: 1` per folder.
    public func list() async throws -> [RemoteFile] {
        if infiniteDepth.withLock({ $0 }) != false {
            let response = try await propfind(
                folderURL: endpoint.folderURL, depth: "infinity", properties: Self.fileProperties,
                what: "listing \(endpoint.displayURL)")
            try checkRoot(response, what: "listing")
            if response.status == 401 { throw failure(response, "listing", endpoint.displayURL) }
            if response.status == 207 {
                let entries = try parseMultistatus(response, what: "listing")
                let folders = entries.filter { $0.isCollection && !$0.path.isEmpty }
                let deepest = entries.map { $0.path.count }.max() ?? 0
                if folders.isEmpty || deepest > 1 {
                    infiniteDepth.withLock { $0 = true }
                    return files(in: entries)
                }
            } else {
                infiniteDepth.withLock { $0 = false }
            }
        }
        return try await walk()
    }

    public func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        try await place(path, body: .data(data))
    }

    /// Uploads the local file at `localPath`, streaming it; a file that cannot be read throws
    /// `LocalFileError`.
    public func writeFile(_ path: String, from localPath: String) async throws -> RemoteFile {
        let (fd, size) = try openLocalSource(localPath)
        defer { close(fd) }
        return try await place(path, body: .file(fd: fd, path: localPath, offset: 0, length: size))
    }

    public func readBytes(_ path: String) async throws -> Data {
        let parts = try Self.components(of: path)
        let response = try await send("reading \(path)", method: "GET", url: fileURL(parts), repeatable: true)
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

    // MARK: Quota

    /// The space the server reports for this user (RFC 4331), or nil where it reports none.
    public func quota() async throws -> WebDAVQuota? {
        let response = try await propfind(folderURL: endpoint.folderURL, depth: "0", properties: [
            "<d:quota-available-bytes/>", "<d:quota-used-bytes/>",
        ], what: "reading the quota of \(endpoint.displayURL)")
        try checkRoot(response, what: "reading the quota")
        guard let entry = try parseMultistatus(response, what: "reading the quota").first else { return nil }
        if entry.quotaAvailable == nil && entry.quotaUsed == nil { return nil }
        return WebDAVQuota(available: entry.quotaAvailable, used: entry.quotaUsed)
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

    private func fileURL(_ parts: [String]) -> String {
        endpoint.server + endpoint.encodedPath(endpoint.folder + parts)
    }

    private func folderURL(_ parts: [String]) -> String {
        endpoint.server + endpoint.encodedPath(endpoint.folder + parts) + "/"
    }

    /// An href as an absolute URL on this server, for the identity.
    private func absoluteHref(_ href: String) -> String {
        href.hasPrefix("/") ? endpoint.server + href : href
    }

    // MARK: Writing

    private func place(_ path: String, body: HTTPBody) async throws -> RemoteFile {
        let parts = try Self.components(of: path)
        let folder = Array(parts.dropLast())
        let temporaryParts = folder + [Self.temporaryFilePrefix + String(UInt64.random(in: .min ... .max), radix: 16)]
        let temporaryURL = fileURL(temporaryParts)

        var put: HTTPResponse?
        for attempt in 0..<2 {
            try await ensureFolders(folder, path: path)
            let response = try await uploadTemporary(temporaryURL, body: body, path: path)
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

        let move: HTTPResponse
        do {
            move = try await send(
                "moving \(path) into place", method: "MOVE", url: temporaryURL,
                headers: [("Destination", fileURL(parts)), ("Overwrite", "T")], repeatable: true)
        } catch {
            await discard(temporaryURL)
            throw error
        }
        guard [200, 201, 204].contains(move.status) else {
            await discard(temporaryURL)
            throw failure(move, "moving into place", path)
        }

        let putId = put.header("oc-fileid") ?? put.header("etag")
        if etagSurvivesMove.withLock({ $0 }) == true, let putId {
            return RemoteFile(path: path, size: body.length, remoteId: putId)
        }
        // Whether the id of the PUT is the id the listing will show is a property of the server:
        // asked once, then trusted, or asked after every write where it is not.
        let placed = try await stat(parts, path: path)
        etagSurvivesMove.withLock { $0 = (putId != nil && putId == placed.remoteId) }
        return RemoteFile(path: path, size: placed.size, remoteId: placed.remoteId)
    }

    private func uploadTemporary(_ url: String, body: HTTPBody, path: String) async throws -> HTTPResponse {
        do {
            return try await send("uploading \(path)", method: "PUT", url: url, body: body, repeatable: true)
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
        let response = try await propfind(
            folderURL: fileURL(parts), depth: "0", properties: Self.fileProperties, what: "checking \(path)")
        guard response.status == 207 else { throw failure(response, "checking", path) }
        guard let entry = try parseMultistatus(response, what: "checking \(path)").first(where: { !$0.isCollection })
        else {
            throw CloudError(.transport, "\(endpoint.server) did not describe \(path) after writing it; run again")
        }
        return RemoteFile(path: path, size: entry.size, remoteId: entry.remoteId)
    }

    // MARK: Listing

    private static let fileProperties = [
        "<d:resourcetype/>", "<d:getcontentlength/>", "<d:getetag/>", "<oc:fileid/>",
    ]

    /// One `<d:response>` of a multistatus.
    private struct Entry {
        /// Path components relative to the remote folder.
        var path: [String]
        var isCollection = false
        var size: Int64 = 0
        var remoteId: String?
        var principal: String?
        var quotaAvailable: Int64?
        var quotaUsed: Int64?
    }

    private func files(in entries: [Entry]) -> [RemoteFile] {
        var folders = Set<String>()
        var result: [RemoteFile] = []
        for entry in entries {
            if entry.isCollection {
                if !entry.path.isEmpty { folders.insert(entry.path.joined(separator: "/")) }
                continue
            }
            guard let name = entry.path.last, !name.hasPrefix(Self.temporaryFilePrefix) else { continue }
            result.append(RemoteFile(path: entry.path.joined(separator: "/"), size: entry.size, remoteId: entry.remoteId))
        }
        knownFolders.withLock { $0.formUnion(folders) }
        return result
    }

    /// Lists folder by folder with `Depth: 1`, a few folders at a time.
    private func walk() async throws -> [RemoteFile] {
        var pending: [[String]] = [[]]
        var entries: [Entry] = []
        while !pending.isEmpty {
            let batch = Array(pending.prefix(4))
            pending.removeFirst(batch.count)
            let results = try await withThrowingTaskGroup(of: [Entry].self) { group in
                for folder in batch {
                    group.addTask { try await self.listOneLevel(folder) }
                }
                var all: [[Entry]] = []
                for try await result in group { all.append(result) }
                return all
            }
            for level in results {
                for entry in level {
                    entries.append(entry)
                    if entry.isCollection { pending.append(entry.path) }
                }
            }
        }
        return files(in: entries)
    }

    /// The entries directly inside `folder` (not the folder itself).
    private func listOneLevel(_ folder: [String]) async throws -> [Entry] {
        let display = folder.isEmpty ? endpoint.displayURL : folder.joined(separator: "/")
        let response = try await propfind(
            folderURL: folderURL(folder), depth: "1", properties: Self.fileProperties, what: "listing \(display)")
        if folder.isEmpty {
            try checkRoot(response, what: "listing")
        } else if response.status == 404 {
            return []  // removed while the walk was under way
        }
        guard response.status == 207 else { throw failure(response, "listing", display) }
        return try parseMultistatus(response, what: "listing \(display)").filter {
            $0.path.count == folder.count + 1 && $0.path.starts(with: folder)
        }
    }

    private func propfind(folderURL url: String, depth: String, properties: [String], what: String) async throws
        -> HTTPResponse
    {
        let body = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
            + "<d:propfind xmlns:d=\"DAV:\" xmlns:oc=\"http://owncloud.org/ns\"><d:prop>"
            + properties.joined() + "</d:prop></d:propfind>"
        return try await send(
            what, method: "PROPFIND", url: url,
            headers: [("Depth", depth), ("Content-Type", "application/xml; charset=utf-8")],
            body: .data(Data(body.utf8)), repeatable: true)
    }

    /// The entries of a 207 multistatus, paths made relative to the remote folder; entries
    /// outside it, or whose properties all failed, are left out.
    private func parseMultistatus(_ response: HTTPResponse, what: String) throws -> [Entry] {
        guard response.status == 207 else { throw failure(response, what, endpoint.displayURL) }
        guard let root = XMLElementNode.parse(response.body), root.name == "multistatus" else {
            throw CloudError(.transport, "\(endpoint.server) sent a listing that is not WebDAV XML while \(what); "
                + "check that \(endpoint.displayURL) is a WebDAV address")
        }
        let base = endpoint.folder
        var entries: [Entry] = []
        for response in root.children("response", "DAV:") {
            guard let href = response.text(of: "href", "DAV:"), let components = Self.hrefComponents(href),
                  components.starts(with: base)
            else { continue }
            var entry = Entry(path: Array(components.dropFirst(base.count)))
            for propstat in response.children("propstat", "DAV:") {
                let status = propstat.text(of: "status", "DAV:") ?? ""
                guard status.contains(" 200"), let prop = propstat.child("prop", "DAV:") else { continue }
                if prop.child("resourcetype", "DAV:")?.child("collection", "DAV:") != nil { entry.isCollection = true }
                if let length = prop.text(of: "getcontentlength", "DAV:"), let size = Int64(length) { entry.size = size }
                if let fileId = prop.text(of: "fileid", "http://owncloud.org/ns"), !fileId.isEmpty {
                    entry.remoteId = fileId
                } else if entry.remoteId == nil, let etag = prop.text(of: "getetag", "DAV:"), !etag.isEmpty {
                    entry.remoteId = etag
                }
                if let principal = prop.child("current-user-principal", "DAV:")?.text(of: "href", "DAV:") {
                    entry.principal = principal
                }
                if let available = prop.text(of: "quota-available-bytes", "DAV:") { entry.quotaAvailable = Int64(available) }
                if let used = prop.text(of: "quota-used-bytes", "DAV:") { entry.quotaUsed = Int64(used) }
            }
            // A trailing "/" marks a collection even where resourcetype was not returned.
            if href.hasSuffix("/") { entry.isCollection = true }
            entries.append(entry)
        }
        return entries
    }

    /// The decoded path components of an href, which may be a path or a full URL.
    static func hrefComponents(_ href: String) -> [String]? {
        var path = Substring(href)
        if let schemeEnd = path.range(of: "://") {
            let afterScheme = path[schemeEnd.upperBound...]
            path = afterScheme[(afterScheme.firstIndex(of: "/") ?? afterScheme.endIndex)...]
        }
        var parts: [String] = []
        for raw in path.split(separator: "/") {
            guard let part = raw.removingPercentEncoding else { return nil }
            if part == "." { continue }
            parts.append(part)
        }
        return parts
    }

    // MARK: Requests and errors

    /// Sends one request with the user's credentials, reading the password again once after
    /// a 401 where the app can.
    private func send(
        _ what: String, method: String, url: String, headers: [(String, String)] = [], body: HTTPBody = .empty,
        sink: HTTPSink = .memory, repeatable: Bool
    ) async throws -> HTTPResponse {
        var reloaded = false
        while true {
            let current = password.withLock { $0 }
            let auth = endpoint.user.map { (user: $0, password: current ?? "") }
            let response = try await client.send(what, repeatable: repeatable) {
                HTTPRequest(method: method, url: url, headers: headers, body: body, sink: sink, basicAuth: auth)
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

// MARK: Local files shared by the HTTP providers

/// Opens a regular local file for upload and returns it with its size; the caller closes it.
func openLocalSource(_ localPath: String) throws -> (fd: Int32, size: Int64) {
    // O_NONBLOCK so that a FIFO given by mistake is refused below instead of hanging the open.
    let fd = open(localPath, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
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
    return (fd, Int64(status.st_size))
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
