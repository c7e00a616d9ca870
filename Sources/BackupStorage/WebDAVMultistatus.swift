// The WebDAV multistatus (RFC 4918 §13) read as a stream: each `<response>` becomes one entry
// as its closing tag arrives, with only the fields the provider uses (href, resourcetype
// collection, getcontentlength, getetag, oc:fileid, current-user-principal, RFC 4331 quota).
// Memory is the entries themselves plus one href's text; a listing of any size never sits
// in memory as a body or a tree. A listing's plain files go straight into a packed list
// (`FileCollection`): only folders, temporaries and foreign spellings stay entries. Hrefs naming another server or a path outside the remote
// folder, or spelling a name `WireName` does not make, are left out with a note.

import BackupEngine
import Foundation

/// One `<d:response>` of a multistatus, its path made relative to the remote folder.
struct WebDAVEntry: Sendable {
    /// Path components relative to the remote folder.
    var path: [String]
    var isCollection = false
    var size: Int64 = 0
    var remoteId: String?
    var principal: String?
    var quotaAvailable: Int64?
    var quotaUsed: Int64?
    /// DAV:getlastmodified as the server sent it (an HTTP date), where asked for.
    var lastModified: String?
    /// A component of the href is not a spelling `WireName` makes: `path` holds it as listed.
    var foreignSpelling = false
}

/// Which file entries of a listing go into its packed list rather than its entries.
struct FileCollection: Sendable {
    /// The folder a `Depth: 1` listing is of: files in it only (nil: any depth).
    var folder: [String]?
    /// Temporary files (this name prefix) stay entries: their times decide their sweep.
    var temporaryPrefix: String
    /// Whether the versions folder at the root, and all in it, is left out (as `list()` must).
    var skipsVersions = true
}

/// Gathers the entries of a 207 body as libcurl delivers it.
final class MultistatusStream: HTTPBodyStream, @unchecked Sendable {
    // @unchecked: one transfer uses it at a time. The HTTP thread calls reset/consume/finish
    // while the transfer runs; the sending task reads `entries` and `notes` only after the
    // transfer's continuation resumed, which orders those accesses after the last write.

    /// The longest text kept for one field (an href, an ETag).
    static let maxFieldText = 64 << 10
    /// Notes kept per listing; more are counted.
    static let maxNotes = 50

    private let base: [String]
    private let server: WebDAVEndpoint
    private let collection: FileCollection?
    private var tokenizer = XMLTokenizer()
    private var handler: Handler

    init(endpoint: WebDAVEndpoint, collecting collection: FileCollection? = nil) {
        base = endpoint.folder
        server = endpoint
        self.collection = collection
        handler = Handler(base: endpoint.folder, server: endpoint, collection: collection)
    }

    /// The entries, in the order the server sent them (the collected files left out).
    var entries: [WebDAVEntry] { handler.entries }
    /// The plain files collected, in the order the server sent them.
    var files: RemoteFileList { handler.files }
    /// The most path components of a collected file.
    var deepestFile: Int { handler.deepestFile }
    /// Files a `Depth: 1` listing was sent from below its folder's own level (left out).
    var belowLevel: Int { handler.belowLevel }
    /// What was left out, and why, for the person to read.
    var notes: [String] {
        handler.notes + (handler.notesDropped > 0 ? ["… and \(handler.notesDropped) more entries left out"] : [])
    }

    func reset() {
        tokenizer = XMLTokenizer()
        handler = Handler(base: base, server: server, collection: collection)
    }

    func consume(_ bytes: UnsafeRawBufferPointer) throws {
        try tokenizer.feed(bytes, &handler)
    }

    func finish() throws {
        try tokenizer.finish()
    }

    // MARK: The handler

    private struct Handler: XMLStreamHandler {
        enum Field { case contentLength, etag, fileId, quotaAvailable, quotaUsed, lastModified }
        enum Slot: Equatable {
            case multistatus, response, href, propstat, status, prop, resourcetype, principal, principalHref
            case field(Field)
            case ignored
        }

        let base: [String]
        let server: WebDAVEndpoint
        let collection: FileCollection?
        var entries: [WebDAVEntry] = []
        var files = RemoteFileList()
        var deepestFile = 0
        var belowLevel = 0
        var notes: [String] = []
        var notesDropped = 0

        private var slots: [Slot] = []
        private var text: [UInt8] = []
        private var href: String?
        private var response = WebDAVEntry(path: [])
        /// The properties of the propstat being read; kept only if its status is 200.
        private var found = WebDAVEntry(path: [])
        private var foundSize: Int64?
        private var foundETag: String?
        private var foundFileId: String?
        private var statusOK = false

        init(base: [String], server: WebDAVEndpoint, collection: FileCollection?) {
            self.base = base
            self.server = server
            self.collection = collection
        }

        /// Keeps a parsed response: a plain file into `files` when collecting, else as an entry.
        private mutating func keep(_ entry: WebDAVEntry) {
            if let collection, collection.skipsVersions, entry.path.first == VersionStore.folder { return }
            guard let collection, !entry.isCollection, !entry.foreignSpelling, let name = entry.path.last,
                  !name.hasPrefix(collection.temporaryPrefix)
            else { return entries.append(entry) }
            if let folder = collection.folder, entry.path.count != folder.count + 1 || !entry.path.starts(with: folder) {
                if entry.path.count > folder.count + 1 { belowLevel += 1 }
                return
            }
            deepestFile = max(deepestFile, entry.path.count)
            files.append(RemoteFile(path: entry.path.joined(separator: "/"), size: entry.size, remoteId: entry.remoteId))
        }

        mutating func startElement(namespace: String, name: String) throws {
            let dav = namespace == "DAV:"
            let slot: Slot
            switch slots.last {
            case nil:
                guard dav && name == "multistatus" else {
                    throw XMLStreamError(reason: "it is not WebDAV XML: the root element is <\(name)> in "
                        + "\(namespace.isEmpty ? "no namespace" : namespace), not DAV: multistatus")
                }
                slot = .multistatus
            case .multistatus?:
                slot = dav && name == "response" ? .response : .ignored
                if slot == .response {
                    href = nil
                    response = WebDAVEntry(path: [])
                }
            case .response?:
                if dav && name == "href" {
                    slot = .href
                } else if dav && name == "propstat" {
                    slot = .propstat
                    found = WebDAVEntry(path: [])
                    (foundSize, foundETag, foundFileId, statusOK) = (nil, nil, nil, false)
                } else {
                    slot = .ignored
                }
            case .propstat?:
                slot = dav && name == "prop" ? .prop : dav && name == "status" ? .status : .ignored
            case .prop?:
                switch (namespace, name) {
                case ("DAV:", "resourcetype"): slot = .resourcetype
                case ("DAV:", "getcontentlength"): slot = .field(.contentLength)
                case ("DAV:", "getetag"): slot = .field(.etag)
                case ("DAV:", "getlastmodified"): slot = .field(.lastModified)
                case ("DAV:", "quota-available-bytes"): slot = .field(.quotaAvailable)
                case ("DAV:", "quota-used-bytes"): slot = .field(.quotaUsed)
                case ("DAV:", "current-user-principal"): slot = .principal
                case ("http://owncloud.org/ns", "fileid"): slot = .field(.fileId)
                default: slot = .ignored
                }
            case .resourcetype?:
                if dav && name == "collection" { found.isCollection = true }
                slot = .ignored
            case .principal?:
                slot = dav && name == "href" ? .principalHref : .ignored
            default:
                slot = .ignored
            }
            text.removeAll(keepingCapacity: true)
            slots.append(slot)
        }

        mutating func text(_ bytes: UnsafeRawBufferPointer) throws {
            switch slots.last {
            case .href?, .status?, .principalHref?, .field?:
                guard bytes.count <= MultistatusStream.maxFieldText - text.count else {
                    throw XMLStreamError(reason: "the text of one element is longer than "
                        + "\(MultistatusStream.maxFieldText >> 10) KiB")
                }
                text.append(contentsOf: bytes)
            default:
                break
            }
        }

        mutating func endElement() throws {
            guard let slot = slots.popLast() else { return }
            var value: String { ASCIIText.trimmedString(text) }
            switch slot {
            case .href: href = value
            case .status: statusOK = Self.isSuccess(statusLine: value)
            case .principalHref: found.principal = value
            case .field(.contentLength): foundSize = Int64(value)
            case .field(.etag): foundETag = WebDAVStorage.versionId(etag: value)
            case .field(.fileId): foundFileId = value.isEmpty ? nil : value
            case .field(.quotaAvailable): found.quotaAvailable = Int64(value)
            case .field(.quotaUsed): found.quotaUsed = Int64(value)
            case .field(.lastModified): found.lastModified = value.isEmpty ? nil : value
            case .propstat where statusOK:
                if found.isCollection { response.isCollection = true }
                if let foundSize { response.size = foundSize }
                // The oc:fileid where the server has one (it survives a MOVE), else the ETag.
                if let foundFileId {
                    response.remoteId = foundFileId
                } else if response.remoteId == nil, let foundETag {
                    response.remoteId = foundETag
                }
                if let principal = found.principal { response.principal = principal }
                if let available = found.quotaAvailable { response.quotaAvailable = available }
                if let used = found.quotaUsed { response.quotaUsed = used }
                if let modified = found.lastModified { response.lastModified = modified }
            case .response:
                finishResponse()
            default:
                break
            }
        }

        /// Whether a propstat's `HTTP/1.1 200 OK` says 200: its second word.
        static func isSuccess(statusLine: String) -> Bool {
            statusLine.split(separator: " ", maxSplits: 2).dropFirst().first == "200"
        }

        private mutating func finishResponse() {
            guard let href else { return note("a response without an href") }
            switch WebDAVStorage.hrefLocation(href, on: server) {
            case .otherServer:
                note("\(href): it names another server than \(server.server)")
            case .undecodable:
                note("\(href): its percent-encoding is not UTF-8 or is malformed")
            case .path(let components):
                guard components.starts(with: base) else {
                    return note("\(href): it is outside the remote folder /\(base.joined(separator: "/"))")
                }
                var path: [String] = []
                for wire in components.dropFirst(base.count) {
                    if let name = WireName.decode(wire) {
                        path.append(name)
                    } else {
                        path.append(wire)
                        response.foreignSpelling = true
                    }
                }
                response.path = path
                if response.foreignSpelling {
                    note("\(href): it is spelt as this program never spells a name (a lone \u{201B}, a control character, "
                        + "or a private-use escape that stands for no byte of a name): no request can name it, so it is left alone")
                }
                // A trailing "/" marks a collection even where resourcetype was not returned.
                if href.hasSuffix("/") { response.isCollection = true }
                keep(response)
            }
        }

        private mutating func note(_ text: String) {
            if notes.count < MultistatusStream.maxNotes { notes.append("left out of the listing: " + text) } else { notesDropped += 1 }
        }
    }
}
