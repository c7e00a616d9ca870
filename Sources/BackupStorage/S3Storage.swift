// S3Storage: a prefix in an S3 bucket (AWS, Backblaze B2, Wasabi, MinIO, Ceph, Garage, rclone
// serve s3). Owns addressing (path-style or virtual-hosted), signing every attempt afresh,
// ListObjectsV2 with continuation, PutObject and multipart upload (aborted on failure),
// GetObject, DeleteObject, the identity (endpoint, bucket and owner) and the S3 column of
// DESIGN.md's error table.

import BackupEngine
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A remote that is a key prefix in an S3 bucket.
///
/// A PUT of an object is atomic, so a failed write never shows under its key; a multipart
/// upload shows only once completed and is aborted when any part fails. A key listed again on
/// a later page keeps its first entry, with a note (`takeListingNotes()`). Safe to call from
/// many tasks at once.
public final class S3Storage: RemoteStorage, ListingNotesReporting {
    /// The most one ListObjectsV2 page (1,000 keys, ~300 KB on AWS) may take in memory; also
    /// below the 10,000,000 bytes libxml2 parses in one piece.
    static let listPageLimit = 8 << 20

    public let location: S3Location
    /// The endpoint as messages name it, e.g. "https://s3.us-east-1.amazonaws.com".
    public let endpoint: String
    public let region: String
    public let pathStyle: Bool

    private let secure: Bool
    /// The endpoint's host with a non-default port, as the Host header carries it.
    private let endpointHost: String
    private let signer: SigV4Signer
    private let client: HTTPClient
    private let mask: SecretMask
    private let multipartThreshold: Int64
    private let partSize: Int64
    /// How long after its start an incomplete multipart upload under the prefix is taken for a
    /// stopped run's by `sweepTemporaries()`. A day, as AWS's usual lifecycle rule: a live
    /// writer elsewhere may take hours over one large file, and its upload keeps its start time.
    public let staleUploadAge: Double
    /// What listings left out since the last `takeListingNotes()`.
    private let listingNotes = Mutex<[String]>([])

    /// A provider over `location`, addressed through `options.s3Endpoint` (AWS itself when nil)
    /// in `options.s3Region`; nothing is contacted yet.
    ///
    /// Throws `RemoteSetupError` (`.invalidOption`) for an endpoint that is not an http(s) URL
    /// or part sizes S3 cannot take.
    public init(
        location: S3Location, accessKeyId: String, secretAccessKey: String, sessionToken: String? = nil,
        options: ProviderOptions = ProviderOptions(), staleUploadAge: Double = 86_400
    ) throws {
        self.staleUploadAge = staleUploadAge
        let region = options.s3Region ?? "us-east-1"
        let endpointText = options.s3Endpoint ?? "https://s3.\(region).amazonaws.com"
        guard let schemeEnd = endpointText.range(of: "://"),
              ["http", "https"].contains(endpointText[..<schemeEnd.lowerBound].lowercased())
        else {
            throw RemoteSetupError(.invalidOption, "the S3 endpoint \(String(reflecting: endpointText)) is not valid: "
                + "it must start with https:// (or http://), e.g. https://s3.eu-central-1.amazonaws.com")
        }
        secure = endpointText[..<schemeEnd.lowerBound].lowercased() == "https"
        var authority = Substring(endpointText[schemeEnd.upperBound...])
        while authority.hasSuffix("/") { authority = authority.dropLast() }
        guard !authority.isEmpty, !authority.contains("/"), !authority.contains("@"), !authority.contains("?") else {
            throw RemoteSetupError(.invalidOption, "the S3 endpoint \(String(reflecting: endpointText)) is not valid: "
                + "give only the scheme, host and port, e.g. https://s3.eu-central-1.amazonaws.com")
        }
        // curl leaves a default port out of the Host header, and the signature must match it.
        let defaultPort = secure ? ":443" : ":80"
        if authority.hasSuffix(defaultPort) { authority = authority.dropLast(defaultPort.count) }
        endpointHost = String(authority)
        endpoint = (secure ? "https://" : "http://") + endpointHost
        guard options.multipartPartSize >= 5 << 20, options.multipartThreshold >= options.multipartPartSize else {
            throw RemoteSetupError(.invalidOption, "the S3 part size must be at least 5 MiB and the multipart "
                + "threshold at least the part size")
        }

        self.location = location
        self.region = region
        let dnsSafe = location.bucket.allSatisfy { $0.isLowercase || $0.isNumber || $0 == "-" }
        pathStyle = options.s3PathStyle ?? (options.s3Endpoint != nil || !dnsSafe)
        signer = SigV4Signer(accessKeyId: accessKeyId, secretAccessKey: secretAccessKey, sessionToken: sessionToken,
                             region: region, service: "s3")
        mask = SecretMask(secrets: [secretAccessKey, sessionToken], user: accessKeyId)
        client = HTTPClient(server: endpoint, settings: options.http)
        multipartThreshold = options.multipartThreshold
        partSize = options.multipartPartSize
    }

    // MARK: RemoteStorage

    /// The endpoint, the bucket, the bucket owner's id where ListBuckets gives it, and the
    /// prefix: new keys for the same bucket keep it, another bucket or account changes it.
    public func identityKey() async throws -> String? {
        let head = try await send("checking the bucket", method: "HEAD", path: bucketPath, repeatable: true)
        guard head.status == 200 else {
            // HEAD has no body to name the error; 404 on the bucket itself can only mean it is missing.
            if head.status == 404 { throw bucketMissing("checking the bucket") }
            throw failure(head, "checking the bucket of", location.displayURL)
        }
        // The owner comes from ListBuckets. Its answer must not change the identity from run to
        // run, since a changed identity resets the state (a full upload, and `restore --resume`
        // says sourceChanged):
        // - 200: the owner form, as every key that may list buckets always had, so no existing
        //   backup's state is reset by this rule (a server that names no owner: the form below);
        // - refused for good (403 AccessDenied: a key scoped to its bucket; 405/501: a server
        //   without ListBuckets): the form without the owner, which such keys always had;
        // - anything else (5xx past the retries, a dropped connection, a body that is not S3
        //   XML): Transport, the run stops, the identity is never guessed.
        // The trade-off: a key whose right to ListBuckets is granted or withdrawn changes form
        // once, and that one run uploads everything again (never a merge). Leaving the owner out
        // for everybody would avoid that, but would reset every existing backup once now and
        // stop telling two accounts' buckets of one name apart on a server that reuses names.
        var owner: String?
        let buckets = try await send("listing the buckets", method: "GET", path: "/", host: endpointHost,
                                     sink: .memory(limit: Self.listPageLimit), repeatable: true)
        let refusal = buckets.status == 403 ? XMLElementNode.parse(buckets.body).flatMap { $0.name == "Error" ? $0.text(of: "Code") : nil } : nil
        switch buckets.status {
        case 200:
            guard let root = XMLElementNode.parse(buckets.body), root.name == "ListAllMyBucketsResult" else {
                throw CloudError(.transport, "\(endpoint) sent a bucket list that is not S3 XML while reading the owner of "
                    + "\(location.displayURL); run again, and check that AWS_ENDPOINT_URL is an S3 endpoint")
            }
            owner = root.child("Owner")?.text(of: "ID").flatMap { $0.isEmpty ? nil : $0 }
        case 403 where refusal == nil || refusal == "AccessDenied":
            owner = nil
        case 405, 501:
            owner = nil
        default:
            let error = failure(buckets, "reading the owner of", location.displayURL)
            throw error.kind == .authRevoked || error.kind == .transport ? error : CloudError(.transport, error.message)
        }
        return "s3 \(endpoint) bucket \(location.bucket)" + (owner.map { " owner \($0)" } ?? "")
            + " prefix /\(location.prefix.joined(separator: "/"))"
    }

    /// Every object under the prefix, by ListObjectsV2 with continuation. The versions folder
    /// is listed around: a page that ends inside it is followed by a listing that starts after
    /// it (`start-after`), so its keys are never paged through.
    public func list() async throws -> RemoteFileList {
        try await listObjects(under: [], skippingVersions: true)
    }

    /// The objects whose keys start with the prefix and `folder` (names), paths from the prefix.
    private func listObjects(under folder: [String], skippingVersions: Bool) async throws -> RemoteFileList {
        let rootPrefix = location.prefix.isEmpty ? "" : location.prefix.joined(separator: "/") + "/"
        let keyPrefix = rootPrefix + folder.map { WireName.encode($0) + "/" }.joined()
        let versionsPrefix = rootPrefix + WireName.encode(VersionStore.folder) + "/"
        // Past every key in the versions folder: U+10FFFF is the largest UTF-8 sequence.
        let pastVersions = versionsPrefix + "\u{10FFFF}"
        var files = RemoteFileList()
        var undecodable = 0
        var token: String?
        var startAfter: String?
        var more = true
        while more {
            var query = [("list-type", "2"), ("prefix", keyPrefix)]
            if let token { query.append(("continuation-token", token)) }
            if let startAfter, token == nil { query.append(("start-after", startAfter)) }
            let response = try await send("listing \(location.displayURL)", method: "GET", path: bucketPath,
                                          query: query, sink: .memory(limit: Self.listPageLimit), repeatable: true)
            guard response.status == 200 else { throw failure(response, "listing", location.displayURL) }
            guard let root = XMLElementNode.parse(response.body), root.name == "ListBucketResult" else {
                throw CloudError(.transport, "\(endpoint) sent a listing that is not S3 XML while listing "
                    + "\(location.displayURL); check that AWS_ENDPOINT_URL is an S3 endpoint")
            }
            var lastKey: String?
            for object in root.children("Contents") {
                guard let key = object.exactText(of: "Key"), key.hasPrefix(keyPrefix) else { continue }
                lastKey = key
                if skippingVersions && key.hasPrefix(versionsPrefix) { continue }
                let wirePath = key.dropFirst(rootPrefix.count)
                // Folder placeholders ("a/") are not files. Any other key is listed under the
                // names it spells, even one no local path can take ("../x"): restore refuses it
                // by name (exit status 5) rather than never hearing of it. A key spelling a name
                // `WireName` does not make could not be named again by any request: left out.
                guard !wirePath.isEmpty, !wirePath.hasSuffix("/") else { continue }
                let wireNames = wirePath.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
                let names = wireNames.map(WireName.decode)
                if names.contains(nil) {
                    undecodable += 1
                    if undecodable <= 50 {
                        listingNotes.withLock { $0.append("\(wirePath): it is spelt as this program never spells a name (a lone "
                            + "\u{201B}, a control character, or a private-use escape that stands for no byte of a name): no "
                            + "request can name it, so it is left alone") }
                    }
                    let listed = zip(wireNames, names).map { $1 ?? $0 }.joined(separator: "/")
                    files.append(RemoteFile(path: listed, size: object.text(of: "Size").flatMap { Int64($0) } ?? 0,
                                            foreignSpelling: true))
                    continue
                }
                let path = names.compactMap { $0 }.joined(separator: "/")
                let size = object.text(of: "Size").flatMap { Int64($0) } ?? 0
                files.append(RemoteFile(path: path, size: size, remoteId: object.text(of: "ETag").map(Self.unquoted)))
            }
            token = root.text(of: "IsTruncated") == "true" ? root.text(of: "NextContinuationToken") : nil
            if skippingVersions, token != nil, let lastKey, lastKey.hasPrefix(versionsPrefix),
               Array(lastKey.utf8).lexicographicallyPrecedes(Array(pastVersions.utf8))
            {
                // The page ended inside the versions folder: start again after all of it.
                token = nil
                startAfter = pastVersions
                continue
            }
            startAfter = nil
            more = token != nil
        }
        // A key on two pages (a server's paging slipped): the first is kept. Found by sorting
        // the listing, not with a set of every path.
        let (unique, repeatedPaths) = files.removingRepeatedPaths()
        files = unique
        for path in repeatedPaths.prefix(50) { listingNotes.withLock { $0.append("left out of the listing: \(path) was listed again") } }
        if repeatedPaths.count > 50 { listingNotes.withLock { $0.append("… and \(repeatedPaths.count - 50) more keys listed again") } }
        if undecodable > 50 { listingNotes.withLock { $0.append("… and \(undecodable - 50) more keys spelt as this program never spells a name") } }
        return files
    }

    /// Aborts the incomplete multipart uploads under the prefix (ListMultipartUploads, then
    /// AbortMultipartUpload) started `staleUploadAge` or more before the server's time now;
    /// their parts are billed and invisible. Returns how many were aborted.
    public func sweepTemporaries() async throws -> Int {
        let keyPrefix = location.prefix.isEmpty ? "" : location.prefix.joined(separator: "/") + "/"
        var stale: [(key: String, uploadId: String)] = []
        var markers: (key: String, uploadId: String)?
        repeat {
            var query = [("uploads", ""), ("prefix", keyPrefix)]
            if let markers { query += [("key-marker", markers.key), ("upload-id-marker", markers.uploadId)] }
            let response = try await send("listing the unfinished uploads in \(location.displayURL)", method: "GET",
                                          path: bucketPath, query: query, sink: .memory(limit: Self.listPageLimit),
                                          repeatable: true)
            guard response.status == 200 else { throw failure(response, "listing the unfinished uploads in", location.displayURL) }
            guard let root = XMLElementNode.parse(response.body), root.name == "ListMultipartUploadsResult" else {
                throw CloudError(.transport, "\(endpoint) sent a list of uploads that is not S3 XML")
            }
            let now = response.header("date").flatMap(HTTPClient.httpDate) ?? Date()
            for upload in root.children("Upload") {
                guard let key = upload.exactText(of: "Key"), key.hasPrefix(keyPrefix), let id = upload.text(of: "UploadId"),
                      let initiated = upload.text(of: "Initiated").flatMap(Self.isoDate),
                      now.timeIntervalSince(initiated) + 1 >= staleUploadAge  // the Date header has whole seconds
                else { continue }
                stale.append((key, id))
            }
            markers = root.text(of: "IsTruncated") == "true"
                ? root.text(of: "NextKeyMarker").map { ($0, root.text(of: "NextUploadIdMarker") ?? "") } : nil
        } while markers != nil
        var aborted = 0
        for upload in stale {
            let path = (pathStyle ? "/" + location.bucket : "") + "/" + SigV4Signer.uriEncode(upload.key, keepSlash: true)
            let response = try await send("aborting an unfinished upload of \(upload.key)", method: "DELETE", path: path,
                                          query: [("uploadId", upload.uploadId)], repeatable: true)
            if [200, 204].contains(response.status) { aborted += 1 }
        }
        return aborted
    }

    /// An S3 timestamp ("2026-12-01T12:00:00.000Z", with or without the fraction).
    private static func isoDate(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// What listings left out since the last call, and why (a key listed twice), once each.
    public func takeListingNotes() -> [String] {
        listingNotes.withLock { notes in defer { notes.removeAll() }; return notes }
    }

    public func writeBytes(_ path: String, _ data: Data) async throws -> RemoteFile {
        let key = try objectPath(path)
        return try await putObject(path, key: key, body: .data(data), payloadHash: SHA256Hasher.hex(data))
    }

    /// Uploads the local file, in parts above the multipart threshold; a file that cannot be
    /// read throws `LocalFileError`.
    ///
    /// The PUT (or the CreateMultipartUpload) carries the source's modification time as the
    /// object's `mtime` metadata (`x-amz-meta-mtime`, signed like the other x-amz headers), in
    /// rclone's form: Unix seconds with the nanoseconds as a fraction, trailing zeros dropped
    /// (`1700000000.123456789`, `1700000000.5`, `1700000000`). rclone reads it as the file's
    /// time, and rclone serve s3 (1.75) gives it to the file on its disk to the nanosecond; it
    /// keeps the metadata itself only in memory, so after a restart a HEAD has no
    /// x-amz-meta-mtime and its Last-Modified is the source's time (which `landedObject` then
    /// cannot take for a completion it did not see answered: that write fails as Transport).
    public func writeFile(
        _ path: String, from localPath: String, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws -> RemoteFile {
        let key = try objectPath(path)
        let (fd, size, modified) = try openLocalSource(localPath)
        defer { close(fd) }
        let metadata = [("x-amz-meta-mtime", Self.mtimeMetadata(modified))]
        if size > multipartThreshold {
            return try await multipartUpload(
                path, key: key, fd: fd, localPath: localPath, size: size, headers: metadata, onSent: onBytes)
        }
        let hash = try sha256(fd: fd, path: localPath, offset: 0, length: size)
        return try await putObject(path, key: key, body: .file(fd: fd, path: localPath, offset: 0, length: size),
                                   payloadHash: hash, headers: metadata, onSent: onBytes)
    }

    /// `time` as rclone writes the `mtime` metadata (its swift.TimeToFloatString): the Unix
    /// time in seconds in fixed point, nanoseconds as up to 9 decimals with trailing zeros
    /// dropped, and no point for a whole second; a time before 1970 is "-" and its distance.
    static func mtimeMetadata(_ time: timespec) -> String {
        let nanoseconds = clampedNanoseconds(time)
        let magnitude = nanoseconds.magnitude
        var text = String(magnitude / 1_000_000_000)
        var fraction = String(magnitude % 1_000_000_000)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        if !fraction.isEmpty { text += "." + fraction }
        return (nanoseconds < 0 ? "-" : "") + text
    }

    /// The object's bytes, at most `HTTPSettings.readBytesLimit` of them.
    public func readBytes(_ path: String) async throws -> Data {
        let key = try objectPath(path)
        let response = try await send("reading \(path)", method: "GET", path: key,
                                      sink: .memory(limit: client.settings.readBytesLimit), repeatable: true)
        guard response.status == 200 else { throw failure(response, "reading", path) }
        return response.body
    }

    /// Streams the body into `fd`, stopped at the first byte past `expectedSize`.
    public func downloadFile(
        _ path: String, into fd: Int32, expectedSize: Int64?, onBytes: @escaping @Sendable (Int64) -> Void
    ) async throws {
        let key = try objectPath(path)
        try await downloadChecked(path, into: fd, expectedSize: expectedSize) {
            let response = try await self.send(
                "downloading \(path)", method: "GET", path: key,
                sink: .file(fd: fd, path: localCopyName(path), limit: expectedSize, onBytes: onBytes), repeatable: true)
            guard response.status == 200 else { throw self.failure(response, "downloading", path) }
        }
    }

    /// Deletes the object; an absent one is success, a missing bucket is not.
    public func delete(_ path: String) async throws {
        let key = try objectPath(path)
        let response = try await send("deleting \(path)", method: "DELETE", path: key, repeatable: true)
        if [200, 204].contains(response.status) { return }
        let error = failure(response, "deleting", path)
        if error.kind == .notFound { return }
        throw error
    }

    // MARK: Versions

    /// The largest object one CopyObject may copy; above it, UploadPartCopy.
    static let copyObjectLimit: Int64 = 5 << 30

    /// CopyObject into the version's key (its metadata, the mtime among it, copied with it);
    /// above 5 GiB a multipart upload of UploadPartCopy parts. The file stays at `path` (S3
    /// has no move): the engine then overwrites or deletes it. A copy is repeatable (the same
    /// source gives the same bytes), so a lost answer is simply sent again.
    public func keepVersion(_ path: String, as destination: String, size: Int64, copy: Bool) async throws -> Bool {
        let source = try copySource(path)
        let key = try objectPath(destination)
        // S3 copies over anything: a version already kept there is looked for first.
        let existing = try await send("checking \(destination)", method: "HEAD", path: key, repeatable: true)
        if existing.status == 200 {
            throw CloudError(.transport, "\(destination) already exists in \(location.displayURL); \(path) was not kept over it")
        }
        guard existing.status == 404 else { throw failure(existing, "checking", destination) }
        if size > Self.copyObjectLimit {
            try await multipartCopy(path, source: source, to: key, destination: destination, size: size)
            return true
        }
        let response = try await send("keeping \(path) as \(destination)", method: "PUT", path: key,
                                      headers: [("x-amz-copy-source", source)], sink: .memory(limit: 1 << 20), repeatable: true)
        // S3 can answer 200 and still fail the copy, with an <Error> body.
        guard response.status == 200, XMLElementNode.parse(response.body)?.name == "CopyObjectResult" else {
            throw copyFailure(response, path)
        }
        return true
    }

    /// The parts of a multipart copy of `size` bytes: (part number, "bytes=first-last"), each
    /// at least `partSize` (the last may be shorter) and at most 5 GiB, 10,000 at most.
    static func copyParts(size: Int64, partSize: Int64) -> [(number: Int, range: String)] {
        let part = min(copyObjectLimit, max(partSize, (size + 9_999) / 10_000))
        var parts: [(Int, String)] = []
        var offset: Int64 = 0
        while offset < size {
            let length = min(part, size - offset)
            parts.append((parts.count + 1, "bytes=\(offset)-\(offset + length - 1)"))
            offset += length
        }
        return parts
    }

    private func multipartCopy(_ path: String, source: String, to key: String, destination: String, size: Int64) async throws {
        let created = try await send("starting to keep \(path)", method: "POST", path: key, query: [("uploads", "")],
                                     sink: .memory(limit: 1 << 20), repeatable: false)
        guard created.status == 200, let uploadId = XMLElementNode.parse(created.body)?.text(of: "UploadId"), !uploadId.isEmpty else {
            throw created.status == 200
                ? CloudError(.transport, "\(endpoint) did not start a multipart copy of \(path) (no UploadId); run again")
                : failure(created, "starting to keep", path)
        }
        do {
            var etags: [String] = []
            for (number, range) in Self.copyParts(size: size, partSize: partSize) {
                let response = try await send(
                    "keeping part \(number) of \(path)", method: "PUT", path: key,
                    query: [("partNumber", String(number)), ("uploadId", uploadId)],
                    headers: [("x-amz-copy-source", source), ("x-amz-copy-source-range", range)],
                    sink: .memory(limit: 1 << 20), repeatable: true)
                guard response.status == 200, let result = XMLElementNode.parse(response.body), result.name == "CopyPartResult",
                      let etag = result.text(of: "ETag")
                else { throw copyFailure(response, path) }
                etags.append(etag)
            }
            let parts = etags.enumerated().map {
                "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\(xmlEscaped($0.element))</ETag></Part>"
            }
            let xml = Data(("<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                + parts.joined() + "</CompleteMultipartUpload>").utf8)
            let response = try await send(
                "completing the copy of \(path)", method: "POST", path: key, query: [("uploadId", uploadId)],
                headers: [("Content-Type", "application/xml")], body: .data(xml), sink: .memory(limit: 1 << 20),
                payloadHash: SHA256Hasher.hex(xml), repeatable: false)
            guard response.status == 200, XMLElementNode.parse(response.body)?.name == "CompleteMultipartUploadResult" else {
                throw copyFailure(response, path)
            }
        } catch {
            _ = try? await send("aborting the copy of \(path)", method: "DELETE", path: key,
                                query: [("uploadId", uploadId)], repeatable: true)
            throw error
        }
    }

    /// A failed copy: NoSuchKey is the source missing (`.notFound`), the rest as any failure.
    private func copyFailure(_ response: HTTPResponse, _ path: String) -> CloudError {
        let error = failure(response, "keeping a version of", path)
        if XMLElementNode.parse(response.body)?.text(of: "Code") == "NoSuchKey" {
            return CloudError(.notFound, "\(path) does not exist in \(location.displayURL) (while keeping it as a version)")
        }
        return error.kind == .notFound || response.status != 200 ? error
            : CloudError(.transport, "\(endpoint) did not copy \(path) (an answer without CopyObjectResult); run again")
    }

    /// The `x-amz-copy-source` of `path`: "bucket/key", URI-encoded.
    private func copySource(_ path: String) throws -> String {
        let parts: [String]
        do {
            parts = try RelativePath.components(of: path)
        } catch {
            throw CloudError(.transport, "the remote path \(String(reflecting: path)) is not valid: \(error.reason)")
        }
        let key = (location.prefix + parts.map(WireName.encode)).joined(separator: "/")
        return SigV4Signer.uriEncode(location.bucket + "/" + key, keepSlash: true)
    }

    /// ListObjectsV2 with a delimiter: the folder's keys and common prefixes, one level.
    public func listNames(in folder: String) async throws -> [String] {
        let parts = try RelativePath.components(of: folder)
        let rootPrefix = location.prefix.isEmpty ? "" : location.prefix.joined(separator: "/") + "/"
        let keyPrefix = rootPrefix + parts.map { WireName.encode($0) + "/" }.joined()
        var names: [String] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", keyPrefix), ("delimiter", "/")]
            if let token { query.append(("continuation-token", token)) }
            let response = try await send("listing \(folder) in \(location.displayURL)", method: "GET", path: bucketPath,
                                          query: query, sink: .memory(limit: Self.listPageLimit), repeatable: true)
            guard response.status == 200 else { throw failure(response, "listing", folder) }
            guard let root = XMLElementNode.parse(response.body), root.name == "ListBucketResult" else {
                throw CloudError(.transport, "\(endpoint) sent a listing that is not S3 XML while listing \(folder)")
            }
            for object in root.children("Contents") {
                guard let key = object.exactText(of: "Key"), key.hasPrefix(keyPrefix) else { continue }
                if let name = WireName.decode(String(key.dropFirst(keyPrefix.count))), !name.isEmpty, !name.contains("/") {
                    names.append(name)
                }
            }
            for common in root.children("CommonPrefixes") {
                guard let prefix = common.exactText(of: "Prefix"), prefix.hasPrefix(keyPrefix), prefix.hasSuffix("/") else { continue }
                if let name = WireName.decode(String(prefix.dropFirst(keyPrefix.count).dropLast())), !name.isEmpty, !name.contains("/") {
                    names.append(name)
                }
            }
            token = root.text(of: "IsTruncated") == "true" ? root.text(of: "NextContinuationToken") : nil
        } while token != nil
        return names
    }

    public func listFolder(_ folder: String) async throws -> RemoteFileList {
        try await listObjects(under: try RelativePath.components(of: folder), skippingVersions: false)
    }

    /// Every object under the folder, deleted one by one (absent is success).
    public func deleteFolder(_ folder: String) async throws {
        let files = try await listFolder(folder)
        for index in files.indices where !files.foreignSpelling(at: index) {
            try await delete(files.path(at: index))
        }
    }

    // MARK: Uploads

    /// One PutObject; `headers` (the metadata) are sent and signed with it.
    private func putObject(
        _ path: String, key: String, body: HTTPBody, payloadHash: String, headers: [(String, String)] = [],
        onSent: (@Sendable (Int64) -> Void)? = nil
    ) async throws -> RemoteFile {
        let response = try await send("uploading \(path)", method: "PUT", path: key, headers: headers, body: body,
                                      payloadHash: payloadHash, onSent: onSent, repeatable: true)
        guard response.status == 200 else { throw failure(response, "uploading", path) }
        return RemoteFile(path: path, size: body.length, remoteId: response.header("etag").map(Self.unquoted))
    }

    /// A multipart upload; `headers` (the metadata) go with the CreateMultipartUpload, where S3
    /// takes an object's metadata, and are signed with it.
    private func multipartUpload(
        _ path: String, key: String, fd: Int32, localPath: String, size: Int64, headers: [(String, String)] = [],
        onSent: (@Sendable (Int64) -> Void)? = nil
    ) async throws -> RemoteFile {
        // S3 takes at most 10,000 parts.
        let part = max(partSize, (size + 9_999) / 10_000)
        let created = try await send("starting the upload of \(path)", method: "POST", path: key,
                                     query: [("uploads", "")], headers: headers, sink: .memory(limit: 1 << 20),
                                     repeatable: false)
        guard created.status == 200, let uploadId = XMLElementNode.parse(created.body)?.text(of: "UploadId"),
              !uploadId.isEmpty
        else {
            throw created.status == 200
                ? CloudError(.transport, "\(endpoint) did not start a multipart upload of \(path) (no UploadId); run again")
                : failure(created, "starting the upload of", path)
        }
        do {
            var etags: [String] = []
            var offset: Int64 = 0
            while offset < size {
                let length = min(part, size - offset)
                let number = etags.count + 1
                let hash = try sha256(fd: fd, path: localPath, offset: offset, length: length)
                let partStart = offset
                let response = try await send(
                    "uploading part \(number) of \(path)", method: "PUT", path: key,
                    query: [("partNumber", String(number)), ("uploadId", uploadId)],
                    body: .file(fd: fd, path: localPath, offset: offset, length: length), payloadHash: hash,
                    onSent: onSent.map { report in { @Sendable sent in report(partStart + sent) } }, repeatable: true)
                guard response.status == 200, let etag = response.header("etag") else {
                    throw failure(response, "uploading part \(number) of", path)
                }
                etags.append(etag)
                offset += length
            }
            let parts = etags.enumerated().map {
                "<Part><PartNumber>\($0.offset + 1)</PartNumber><ETag>\(xmlEscaped($0.element))</ETag></Part>"
            }
            let xml = Data(("<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                + parts.joined() + "</CompleteMultipartUpload>").utf8)
            // Not repeatable as such: a completion the server did whose answer was lost is
            // answered NoSuchUpload when sent again. Sent again here, and a NoSuchUpload after a
            // lost answer is checked (HEAD) rather than failed.
            var lostAnswer: CloudError?
            var lost = 0
            var response: HTTPResponse
            while true {
                do {
                    response = try await send(
                        "completing the upload of \(path)", method: "POST", path: key, query: [("uploadId", uploadId)],
                        headers: [("Content-Type", "application/xml")], body: .data(xml), sink: .memory(limit: 1 << 20),
                        payloadHash: SHA256Hasher.hex(xml), repeatable: false)
                } catch let error as CloudError where error.kind == .transport && lost < client.settings.connectionRetries {
                    lostAnswer = error
                    lost += 1
                    continue
                }
                if [500, 502, 504].contains(response.status), lost < client.settings.serverErrorRetries {
                    lostAnswer = failure(response, "completing the upload of", path)
                    lost += 1
                    continue
                }
                break
            }
            // S3 can answer 200 and still fail the completion, with an <Error> body.
            let result = XMLElementNode.parse(response.body)
            guard response.status == 200, let result, result.name == "CompleteMultipartUploadResult" else {
                if lostAnswer != nil, result?.name == "Error", result?.text(of: "Code") == "NoSuchUpload",
                   let landed = try await landedObject(path, key: key, size: size, notBefore: created.header("date")) {
                    return landed
                }
                throw failure(response, "completing the upload of", path)
            }
            // Some servers list a multipart object under another ETag than the completion
            // gives (rclone serve s3: the MD5 of the whole); the listing's is the one to keep.
            var remoteId = result.text(of: "ETag").map(Self.unquoted)
            if let head = try? await send("checking \(path)", method: "HEAD", path: key, repeatable: true),
               head.status == 200, let etag = head.header("etag")
            {
                remoteId = Self.unquoted(etag)
            }
            return RemoteFile(path: path, size: size, remoteId: remoteId)
        } catch {
            // Incomplete parts are billed storage, and invisible: abort them.
            _ = try? await send("aborting the upload of \(path)", method: "DELETE", path: key,
                                query: [("uploadId", uploadId)], repeatable: true)
            throw error
        }
    }

    /// The object at `key` when a completion whose answer was lost landed: it is there, of
    /// `size` bytes, and no older than the upload's start (`notBefore`, the server's Date
    /// header of the CreateMultipartUpload answer, so the two times come from one clock); an
    /// older object of that size is not taken for it. Nil when it cannot be told.
    private func landedObject(_ path: String, key: String, size: Int64, notBefore: String?) async throws -> RemoteFile? {
        let head = try await send("checking \(path)", method: "HEAD", path: key, repeatable: true)
        guard head.status == 200, head.header("content-length").flatMap({ Int64($0) }) == size,
              let started = notBefore.flatMap(HTTPClient.httpDate),
              let modified = head.header("last-modified").flatMap(HTTPClient.httpDate),
              modified.timeIntervalSince(started) >= -1  // HTTP dates have whole seconds
        else { return nil }
        return RemoteFile(path: path, size: size, remoteId: head.header("etag").map(Self.unquoted))
    }

    /// The SHA-256 of `length` bytes of `fd` from `offset`, as lowercase hex.
    private func sha256(fd: Int32, path: String, offset: Int64, length: Int64) throws -> String {
        var hasher = SHA256Hasher()
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var done: Int64 = 0
        while done < length {
            let count = pread(fd, buffer.baseAddress, Int(min(Int64(chunk), length - done)), off_t(offset + done))
            if count < 0 && errno == EINTR { continue }
            if count < 0 { throw localFileError(errno: errno, operation: "read", path: path) }
            if count == 0 {
                throw LocalFileError(path: path, message: "cannot read the local file \(path): it became shorter while it was uploaded")
            }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            done += Int64(count)
        }
        return hasher.finalizeHex()
    }

    // MARK: Addressing

    /// The request path of the bucket itself.
    private var bucketPath: String { pathStyle ? "/" + location.bucket : "/" }

    /// The host requests to the bucket go to.
    private var bucketHost: String { pathStyle ? endpointHost : location.bucket + "." + endpointHost }

    /// The encoded request path of the object for `path`, or a `.transport` error naming what
    /// is wrong with the path.
    private func objectPath(_ path: String) throws -> String {
        let parts: [String]
        do {
            parts = try RelativePath.components(of: path)
        } catch {
            throw CloudError(.transport, "the remote path \(String(reflecting: path)) is not valid: \(error.reason); "
                + "remote paths are relative to the remote prefix and \"/\"-separated")
        }
        let key = (location.prefix + parts.map(WireName.encode)).joined(separator: "/")
        return (pathStyle ? "/" + location.bucket : "") + "/" + SigV4Signer.uriEncode(key, keepSlash: true)
    }

    private static func unquoted(_ etag: String) -> String {
        etag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }

    // MARK: Requests and errors

    /// Sends one signed request; the signature is made afresh for every attempt.
    private func send(
        _ what: String, method: String, path: String, host: String? = nil, query: [(String, String)] = [],
        headers: [(String, String)] = [], body: HTTPBody = .empty, sink: HTTPSink = .memory(limit: HTTPSink.smallBodyLimit),
        payloadHash: String = SigV4Signer.emptyPayloadHash, onSent: (@Sendable (Int64) -> Void)? = nil, repeatable: Bool
    ) async throws -> HTTPResponse {
        let host = host ?? bucketHost
        let queryString = query
            .map { SigV4Signer.uriEncode($0.0, keepSlash: false) + "=" + SigV4Signer.uriEncode($0.1, keepSlash: false) }
            .sorted().joined(separator: "&")
        let url = (secure ? "https://" : "http://") + host + path + (queryString.isEmpty ? "" : "?" + queryString)
        let signer = self.signer
        do {
            return try await client.send(what, repeatable: repeatable) {
                let signed = signer.headersToAdd(
                    method: method, path: path, query: query, headers: headers + [("host", host)],
                    payloadHash: payloadHash, date: Date())
                return HTTPRequest(method: method, url: url, headers: headers + signed, body: body, sink: sink, onSent: onSent)
            }
        } catch let error as CloudError {
            throw redacted(error)
        }
    }

    /// The error with any secret masked in every form (SecretMask); the layers below never
    /// see a secret, but a server could echo one back.
    private func redacted(_ error: CloudError) -> CloudError {
        mask.masked(error)
    }

    private func bucketMissing(_ what: String) -> CloudError {
        CloudError(.notAvailable, "the bucket \(location.bucket) does not exist at \(endpoint) (while \(what)); "
            + "create it, or correct the remote URL, AWS_ENDPOINT_URL or AWS_REGION, then run again")
    }

    /// The CloudError a final response stands for (DESIGN.md's error table, S3 column), with
    /// the secrets masked: every case names something the server sent.
    func failure(_ response: HTTPResponse, _ operation: String, _ path: String) -> CloudError {
        redacted(unmaskedFailure(response, operation, path))
    }

    private func unmaskedFailure(_ response: HTTPResponse, _ operation: String, _ path: String) -> CloudError {
        let root = XMLElementNode.parse(response.body)
        let code = root?.name == "Error" ? root?.text(of: "Code") ?? "" : ""
        let detail = root?.text(of: "Message").map { ": \($0)" } ?? ""
        let named = code.isEmpty ? "HTTP \(response.status)" : "\(code), HTTP \(response.status)"
        switch (response.status, code) {
        case (_, "QuotaExceeded"), (507, _), (_, "StorageFull"):
            return redacted(CloudError(.storageFull, "\(endpoint) has no space left for this account (\(named)) while "
                + "\(operation) \(path); free some space or raise the quota, then run again"))
        case (_, "NoSuchBucket"):
            return bucketMissing("\(operation) \(path)")
        case (_, "RequestTimeTooSkewed"):
            return CloudError(.transport, "\(endpoint) refused the request because this machine's clock is off "
                + "(\(named)) while \(operation) \(path); set the clock right, then run again")
        case (401, _), (403, _):
            return redacted(CloudError(.authRevoked, "\(endpoint) refused the keys (\(named)\(detail)) while "
                + "\(operation) \(path); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the profile's keys) "
                + "and that they may use the bucket \(location.bucket)"))
        case (404, _):
            return CloudError(.notFound, "\(path) does not exist in \(location.displayURL) (while \(operation) it)")
        case (301, _), (307, _), (_, "PermanentRedirect"), (_, "AuthorizationHeaderMalformed"):
            let region = response.header("x-amz-bucket-region").map { " (it is in \($0))" } ?? ""
            return CloudError(.transport, "the bucket \(location.bucket) is not in the region \(self.region)\(region) "
                + "(\(named)) while \(operation) \(path); set AWS_REGION or AWS_ENDPOINT_URL to the bucket's region")
        default:
            return redacted(CloudError(.transport, "\(endpoint) answered \(named)\(detail) while \(operation) \(path)"))
        }
    }
}
