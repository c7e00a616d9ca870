// S3Storage against a real server (rclone serve s3 on 127.0.0.1, each subfolder a bucket): the
// storage contract suite, multipart upload and its abort, identity under rotated keys, and
// every S3 row of DESIGN.md's error table, produced for real or through the fault proxy.

import BackupEngine
@testable import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class S3StorageTests: XCTestCase {
    // One server for the class, each test in a bucket of its own. nonisolated(unsafe): XCTest
    // runs the tests of a class one at a time, and only class tearDown clears it.
    nonisolated(unsafe) private static var shared: (server: RcloneServer, served: TempDir)?
    private static let rotatedKey = ("AKROTATED" + RcloneServer.randomToken(6).uppercased(), RcloneServer.randomToken(20))
    private static let bucketCount = 40

    override class func tearDown() {
        shared?.server.stop()
        shared?.served.cleanup()
        shared = nil
        super.tearDown()
    }

    // MARK: The contract

    func testContractEmptyRemoteListsNothing() async throws {
        try await StorageContract.emptyRemoteListsNothing(makeRemote().storage())
    }

    func testContractWrittenFileIsListedWithItsSize() async throws {
        try await StorageContract.writtenFileIsListedWithItsSize(makeRemote().storage())
    }

    func testContractWriteBytesThenReadBytesRoundTrips() async throws {
        try await StorageContract.writeBytesThenReadBytesRoundTrips(makeRemote().storage())
    }

    func testContractWriteFileThenDownloadFileRoundTrips() async throws {
        let remote = try makeRemote()
        try await StorageContract.writeFileThenDownloadFileRoundTrips(try remote.storage(), scratch: remote.scratch)
    }

    func testContractWriteFileHashingTellsTheHashOfWhatItSent() async throws {
        let remote = try makeRemote()
        try await StorageContract.writeFileHashingTellsTheHashOfWhatItSent(try remote.storage(), scratch: remote.scratch)
    }

    func testContractOverwriteReplacesContentAndSize() async throws {
        try await StorageContract.overwriteReplacesContentAndSize(makeRemote().storage())
    }

    func testContractKeptVersionsAreListedApartFromTheTree() async throws {
        try await StorageContract.keptVersionsAreListedApartFromTheTree(makeRemote().storage())
    }

    /// rclone serve s3 has no UploadPartCopy: the copy of an object above 5 GiB is checked on
    /// the requests' shape, against the fault proxy answering as S3 would.
    func testKeepingAnObjectAbove5GiBIsAMultipartUploadOfPartCopies() async throws {
        let size: Int64 = (5 << 30) + 1
        let parts = S3Storage.copyParts(size: size, partSize: 64 << 20)
        XCTAssertEqual(parts.count, 81)
        var next: Int64 = 0
        for (index, part) in parts.enumerated() {
            XCTAssertEqual(part.number, index + 1)
            let bounds = part.range.dropFirst("bytes=".count).split(separator: "-").compactMap { Int64($0) }
            XCTAssertEqual(bounds.first, next, "the ranges are contiguous")
            XCTAssertLessThanOrEqual(bounds[1] - bounds[0] + 1, 5 << 30)
            next = bounds[1] + 1
        }
        XCTAssertEqual(next, size, "the ranges cover the object exactly")
        XCTAssertLessThanOrEqual(S3Storage.copyParts(size: 5 << 40, partSize: 5 << 20).count, 10_000)

        let proxy = try FaultProxy(upstreamPort: nil)
        proxy.add("HEAD", path: VersionStore.folder, .status(404))
        proxy.add("POST", path: "?uploads", .status(200, body: "<InitiateMultipartUploadResult><UploadId>up-1</UploadId></InitiateMultipartUploadResult>"))
        proxy.add("PUT", path: "partNumber", times: parts.count, .status(200, body: "<CopyPartResult><ETag>\"e\"</ETag></CopyPartResult>"))
        proxy.add("POST", path: "uploadId=up-1", .status(200, body: "<CompleteMultipartUploadResult><ETag>\"x-81\"</ETag></CompleteMultipartUploadResult>"))
        var options = ProviderOptions()
        options.s3Endpoint = proxy.address
        options.multipartPartSize = 64 << 20
        options.multipartThreshold = 64 << 20
        let storage = try S3Storage(location: S3Location(bucket: "bucket"), accessKeyId: "key", secretAccessKey: "secret", options: options)
        let stillThere = try await storage.keepVersion("big.img", as: VersionStore.path(run: "20261130T140509Z", "big.img"), size: size, copy: true)
        XCTAssertTrue(stillThere)
        let log = proxy.log()
        XCTAssertEqual(log.map(\.method), ["HEAD", "POST"] + Array(repeating: "PUT", count: parts.count) + ["POST"])
        XCTAssertTrue(log[1].path.hasSuffix("/bucket/.backup-versions/20261130T140509Z/big.img?uploads="), log[1].path)
        XCTAssertTrue(log[2].path.contains("partNumber=1&uploadId=up-1"), log[2].path)
        XCTAssertTrue(log.last?.path.hasSuffix("?uploadId=up-1") == true)
    }

    /// A listing page that ends inside the versions folder is followed by one that starts after it.
    func testTheListingGoesAroundTheVersionsFolder() async throws {
        let remote = try makeRemote()
        for index in 0..<1_100 {
            try remote.writeOnDisk(VersionStore.path(run: "20261130T140509Z", "v\(index).txt"), Data("v".utf8))
        }
        try remote.writeOnDisk("a.txt", Data("a".utf8))
        try remote.writeOnDisk("z.txt", Data("z".utf8))
        try await Task.sleep(nanoseconds: UInt64(RcloneServer.directoryCacheTime * 2 * 1e9))
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let listed = try await remote.storage(through: proxy).list()
        XCTAssertEqual(Set(listed.map(\.path)), ["a.txt", "z.txt"])
        let requests = proxy.log().filter { $0.method == "GET" }
        XCTAssertEqual(requests.count, 2, "\(requests.map(\.path))")
        XCTAssertTrue(requests.last?.path.contains("start-after=") == true, "\(requests.map(\.path))")
        let kept = try await remote.storage().listFolder(VersionStore.folder)
        XCTAssertEqual(kept.count, 1_100)
    }

    func testContractDeleteRemovesTheFile() async throws {
        try await StorageContract.deleteRemovesTheFile(makeRemote().storage())
    }

    func testContractDeleteOfAbsentPathSucceeds() async throws {
        try await StorageContract.deleteOfAbsentPathSucceeds(makeRemote().storage())
    }

    func testContractReadOfAbsentPathThrowsNotFound() async throws {
        try await StorageContract.readOfAbsentPathThrowsNotFound(makeRemote().storage())
    }

    func testContractDownloadOfAbsentPathThrowsNotFound() async throws {
        let remote = try makeRemote()
        try await StorageContract.downloadOfAbsentPathThrowsNotFound(try remote.storage(), scratch: remote.scratch)
    }

    func testContractTransfersReportBytesAsTheyGo() async throws {
        let remote = try makeRemote()
        try await StorageContract.transfersReportBytesAsTheyGo(try remote.storage(), scratch: remote.scratch)
    }

    func testContractDownloadRefusesABodyOfAnotherSize() async throws {
        let remote = try makeRemote()
        try await StorageContract.downloadRefusesABodyOfAnotherSize(try remote.storage(), scratch: remote.scratch)
    }

    func testContractSpacesAndUnicodeInNamesRoundTrip() async throws {
        try await StorageContract.spacesAndUnicodeInNamesRoundTrip(makeRemote().storage())
    }

    func testContractDeepFoldersRoundTrip() async throws {
        try await StorageContract.deepFoldersRoundTrip(makeRemote().storage())
    }

    func testContractIdentityKeyIsStable() async throws {
        let remote = try makeRemote()
        try await StorageContract.identityKeyIsStable { try remote.storage() }
    }

    func testContractFailedWriteLeavesNothing() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        try await StorageContract.failedWriteLeavesNothing(try remote.storage(), failMidway: failMidway(remote, proxy))
    }

    func testContractFailedOverwriteKeepsTheOldFile() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        try await StorageContract.failedOverwriteKeepsTheOldFile(try remote.storage(), failMidway: failMidway(remote, proxy))
    }

    // MARK: Prefix and listing

    func testPrefixKeepsFilesApartAndListsRelativePaths() async throws {
        let remote = try makeRemote()
        let laptop = try remote.storage(prefix: ["machines", "laptop"])
        let desktop = try remote.storage(prefix: ["machines", "desktop"])
        _ = try await laptop.writeBytes("a/one.txt", Data("1".utf8))
        _ = try await desktop.writeBytes("a/one.txt", Data("22".utf8))
        let fromLaptop = try await laptop.list()
        XCTAssertEqual(fromLaptop.map(\.path), ["a/one.txt"])
        XCTAssertEqual(fromLaptop.map(\.size), [1])
        let whole = try await remote.storage().list()
        XCTAssertEqual(Set(whole.map(\.path)), ["machines/laptop/a/one.txt", "machines/desktop/a/one.txt"])
    }

    func testListFollowsContinuationPastOneThousandKeys() async throws {
        let remote = try makeRemote()
        // Made on disk: 1,100 PUTs would be slow in a debug build, and rclone lists the disk.
        for index in 0..<1100 {
            try remote.writeOnDisk("many/file\(index).txt", Data("\(index)".utf8))
        }
        try await Task.sleep(nanoseconds: UInt64(RcloneServer.directoryCacheTime * 2e9))
        let listed = try await remote.storage().list()
        XCTAssertEqual(listed.count, 1100)
        XCTAssertEqual(Set(listed.map(\.path)).count, 1100)
    }

    func testAKeyRepeatedOnALaterPageIsListedOnceWithANote() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        func page(_ keys: [String], next: String?) -> String {
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                + keys.enumerated().map { "<Contents><Key>\($0.element)</Key><Size>\($0.offset + 1)</Size><ETag>&quot;\($0.element)&quot;</ETag></Contents>" }.joined()
                + "<IsTruncated>\(next != nil)</IsTruncated>" + (next.map { "<NextContinuationToken>\($0)</NextContinuationToken>" } ?? "")
                + "</ListBucketResult>"
        }
        proxy.add("GET", path: "list-type=2", .status(200, body: page(["a.txt", "b.txt"], next: "t1")))
        proxy.add("GET", path: "list-type=2", .status(200, body: page(["b.txt", "c.txt"], next: nil)))
        let storage = try remote.storage(through: proxy)
        let listed = try await storage.list()
        XCTAssertEqual(listed.map(\.path), ["a.txt", "b.txt", "c.txt"])
        XCTAssertEqual(listed.map(\.size), [1, 2, 2], "the first b.txt is kept")
        XCTAssertEqual(storage.takeListingNotes(), ["left out of the listing: b.txt was listed again"])
    }

    func testRemoteIdOfAWriteMatchesTheListing() async throws {
        let remote = try makeRemote()
        let storage = try remote.storage()
        let written = try await storage.writeBytes("e.txt", Data("etag".utf8))
        XCTAssertNotNil(written.remoteId)
        let listed = try await storage.list()
        XCTAssertEqual(listed.first?.remoteId, written.remoteId)
    }

    // MARK: Multipart

    func testLargeFileGoesUpInPartsAndRoundTrips() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let storage = try remote.storage(through: proxy, multipart: true)
        let data = StorageContract.randomData(count: (11 << 20) + 123)
        let source = remote.scratch + "/large.bin"
        try data.write(to: URL(fileURLWithPath: source))
        let written = try await storage.writeFile("large.bin", from: source)
        XCTAssertEqual(written.size, Int64(data.count))
        let parts = proxy.log().filter { $0.method == "PUT" && $0.path.contains("partNumber=") }
        XCTAssertEqual(parts.count, 3, "11 MiB in 5 MiB parts")
        try await storage.downloadFile("large.bin", toPath: remote.scratch + "/back.bin")
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: remote.scratch + "/back.bin")) == data)
        let listed = try await storage.list()
        XCTAssertEqual(listed.map(\.size), [Int64(data.count)])
        XCTAssertEqual(listed.first?.remoteId, written.remoteId)
    }

    func testFailedPartAbortsTheUploadAndLeavesNothing() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PUT", path: "partNumber=2", times: 10, .cutRequest(afterBytes: 1 << 20))
        let storage = try remote.storage(through: proxy, multipart: true)
        let source = remote.scratch + "/large.bin"
        try StorageContract.randomData(count: 12 << 20).write(to: URL(fileURLWithPath: source))
        await StorageContract.assertThrows(.transport, "a multipart upload whose second part breaks") {
            _ = try await storage.writeFile("large.bin", from: source)
        }
        let log = proxy.log()
        XCTAssertTrue(log.contains { $0.method == "DELETE" && $0.path.contains("uploadId=") }, "no abort was sent: \(log)")
        XCTAssertFalse(log.contains { $0.method == "POST" && $0.path.contains("uploadId=") }, "completed anyway")
        let listed = try await remote.storage().list()
        XCTAssertEqual(listed, [])
    }

    /// Issue 11, item 1 (S3): the server completed the multipart upload but its answer was
    /// lost; the retry hears NoSuchUpload. The object is there whole, so the write stands (it
    /// is checked by HEAD: the size, and the ETag of the parts), and nothing is aborted.
    func testItem01CompletionWhoseAnswerIsLostStandsWhenTheObjectLanded() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("POST", path: "uploadId=", .cutResponse(afterBytes: 0))
        let storage = try remote.storage(through: proxy, multipart: true)
        let data = StorageContract.randomData(count: (6 << 20) + 7)
        let source = remote.scratch + "/large.bin"
        try data.write(to: URL(fileURLWithPath: source))
        let written = try await storage.writeFile("large.bin", from: source)
        XCTAssertEqual(written.size, Int64(data.count))
        let log = proxy.log()
        XCTAssertFalse(log.contains { $0.method == "DELETE" }, "the landed upload was aborted: \(log)")
        let listed = try await remote.storage().list()
        XCTAssertEqual(listed.map(\.size), [Int64(data.count)])
        XCTAssertEqual(listed.first?.remoteId, written.remoteId)
        try await storage.downloadFile("large.bin", toPath: remote.scratch + "/back.bin")
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: remote.scratch + "/back.bin")) == data)
    }

    /// Issue 11, hygiene: a multipart upload started and never completed (a killed run: its
    /// completion and its abort both dropped) under the prefix is aborted by the sweep, which
    /// lists with the prefix; a young one is not.
    func testHygieneIncompleteMultipartUploadsUnderThePrefixAreAborted() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let options = remote.options(port: proxy.port)
        let inside = try S3Storage(location: S3Location(bucket: remote.bucket, prefix: ["p"]), accessKeyId: remote.server.user,
                                   secretAccessKey: remote.server.secret, options: options, staleUploadAge: 0)
        // A killed run: the part went up, the completion never came (the proxy drops it).
        var small = options
        small.multipartThreshold = 5 << 20
        small.multipartPartSize = 5 << 20
        for prefix in ["p"] {
            let writer = try S3Storage(location: S3Location(bucket: remote.bucket, prefix: [prefix]), accessKeyId: remote.server.user,
                                       secretAccessKey: remote.server.secret, options: small)
            proxy.add("POST", path: "uploadId=", times: 4, .drop)
            proxy.add("DELETE", path: "uploadId=", times: 4, .drop)  // and its abort never arrived
            let source = remote.scratch + "/big.bin"
            try StorageContract.randomData(count: (5 << 20) + 1).write(to: URL(fileURLWithPath: source))
            await StorageContract.assertThrows(.transport, "a completion dropped every time") {
                _ = try await writer.writeFile("big.bin", from: source)
            }
        }
        proxy.clear()
        let young = try S3Storage(location: S3Location(bucket: remote.bucket, prefix: ["p"]), accessKeyId: remote.server.user,
                                  secretAccessKey: remote.server.secret, options: options)
        let none = try await young.sweepTemporaries()
        XCTAssertEqual(none, 0, "a young upload was aborted")
        let aborted = try await inside.sweepTemporaries()
        XCTAssertEqual(aborted, 1)
        let log = proxy.log()
        XCTAssertTrue(log.contains { $0.method == "GET" && $0.path.contains("uploads") && $0.path.contains("prefix=p%2F") }, "\(log)")
        XCTAssertEqual(log.filter { $0.method == "DELETE" && $0.path.contains("uploadId=") }.count, 1)
        let again = try await inside.sweepTemporaries()
        XCTAssertEqual(again, 0, "the aborted upload is still listed")
    }

    // MARK: Identity

    /// Issue 11, item 5: one failed ListBuckets (500 past the retries) is Transport, never an
    /// identity without the owner (which reset the state and re-uploaded everything); a key
    /// that may not call ListBuckets (403 AccessDenied every time: a bucket-scoped key) gets
    /// one identity, the same on every run.
    func testItem05ListBucketsFailingOnceIsTransportAndRefusedForGoodIsOneStableIdentity() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let storage = try remote.storage(through: proxy)
        let key = try await storage.identityKey()
        XCTAssertTrue(key?.contains(" owner ") == true, key ?? "nil")
        proxy.add("GET", times: 3, .status(500, body: "<Error><Code>InternalError</Code><Message>try again</Message></Error>"))
        await StorageContract.assertThrows(.transport, "ListBuckets answered 500 three times") {
            _ = try await storage.identityKey()
        }
        let again = try await storage.identityKey()
        XCTAssertEqual(again, key)

        let denied = "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
        proxy.add("GET", times: 2, .status(403, body: denied))
        let scoped = try await storage.identityKey()
        let scopedAgain = try await storage.identityKey()
        XCTAssertEqual(scoped, scopedAgain)
        XCTAssertEqual(scoped, "s3 \(storage.endpoint) bucket \(remote.bucket) prefix /")
    }

    func testIdentityKeepsWithRotatedKeysAndChangesWithTheBucket() async throws {
        let remote = try makeRemote()
        let key = try await remote.storage().identityKey()
        let rotated = try S3Storage(location: S3Location(bucket: remote.bucket), accessKeyId: Self.rotatedKey.0,
                                    secretAccessKey: Self.rotatedKey.1, options: remote.options())
        let rotatedKey = try await rotated.identityKey()
        XCTAssertEqual(key, rotatedKey)
        let other = try makeRemote()
        let otherKey = try await other.storage().identityKey()
        XCTAssertNotEqual(key, otherKey)
        let prefixed = try await remote.storage(prefix: ["elsewhere"]).identityKey()
        XCTAssertNotEqual(key, prefixed)
        XCTAssertTrue(key?.contains(remote.bucket) == true, key ?? "nil")
    }

    // MARK: Credentials

    func testWrongSecretIsAuthRevokedAtOnceAndTheMessageHoldsNoSecret() async throws {
        let remote = try makeRemote()
        let wrong = "WrongSecret" + RcloneServer.randomToken(16)
        for (keyId, secret) in [(remote.server.user, wrong), ("AKUNKNOWN0000000", wrong)] {
            let storage = try S3Storage(location: S3Location(bucket: remote.bucket), accessKeyId: keyId,
                                        secretAccessKey: secret, options: remote.options())
            let start = Date()
            for operation in ["list", "write", "read", "identity"] {
                do {
                    switch operation {
                    case "list": _ = try await storage.list()
                    case "write": _ = try await storage.writeBytes("a.txt", Data("x".utf8))
                    case "read": _ = try await storage.readBytes("a.txt")
                    default: _ = try await storage.identityKey()
                    }
                    XCTFail("\(operation) with wrong keys succeeded")
                } catch let error as CloudError {
                    XCTAssertEqual(error.kind, .authRevoked, "\(operation): \(error)")
                    XCTAssertFalse(error.message.contains(wrong), error.message)
                    XCTAssertFalse(error.message.contains(remote.server.secret), error.message)
                    XCTAssertTrue(error.message.contains("127.0.0.1:\(remote.server.port)"), error.message)
                }
            }
            XCTAssertLessThan(Date().timeIntervalSince(start), 5, "wrong keys must fail fast")
        }
    }

    // MARK: Error table

    func testMissingBucketIsNotAvailable() async throws {
        let remote = try makeRemote()
        let storage = try S3Storage(location: S3Location(bucket: "no-such-bucket"), accessKeyId: remote.server.user,
                                    secretAccessKey: remote.server.secret, options: remote.options())
        await StorageContract.assertThrows(.notAvailable, "listing") { _ = try await storage.list() }
        await StorageContract.assertThrows(.notAvailable, "identity") { _ = try await storage.identityKey() }
        await StorageContract.assertThrows(.notAvailable, "writing") {
            _ = try await storage.writeBytes("a.txt", Data("x".utf8))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: remote.served + "/no-such-bucket"))
    }

    func testSlowDownIsRetriedThenSucceeds() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PUT", times: 2, .status(503, headers: ["Retry-After": "0"], body: Self.error("SlowDown")))
        _ = try await remote.storage(through: proxy).writeBytes("s.txt", Data("slow".utf8))
        let read = try await remote.storage().readBytes("s.txt")
        XCTAssertEqual(read, Data("slow".utf8))
        XCTAssertEqual(proxy.log().filter { $0.method == "PUT" }.count, 3)
    }

    func testSlowDownPastThreeRetriesIsTransport() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PUT", times: 10, .status(503, body: Self.error("SlowDown")))
        await StorageContract.assertThrows(.transport, "SlowDown for good") {
            _ = try await remote.storage(through: proxy).writeBytes("s.txt", Data("x".utf8))
        }
        XCTAssertEqual(proxy.log().filter { $0.method == "PUT" }.count, 4)
        let listed = try await remote.storage().list()
        XCTAssertEqual(listed, [])
    }

    func testQuotaExceededAndInsufficientStorageAreStorageFull() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PUT", .status(403, body: Self.error("QuotaExceeded")))
        proxy.add("PUT", .status(507))
        for label in ["403 QuotaExceeded", "507"] {
            await StorageContract.assertThrows(.storageFull, label) {
                _ = try await remote.storage(through: proxy).writeBytes("q.txt", Data("x".utf8))
            }
        }
    }

    func testASecretTheServerEchoesIsMaskedInTheMessage() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("GET", .status(400, body: Self.error("InvalidRequest").replacingOccurrences(
            of: "injected InvalidRequest", with: "you signed with \(remote.server.secret)")))
        do {
            _ = try await remote.storage(through: proxy).list()
            XCTFail("a 400 succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertFalse(error.message.contains(remote.server.secret), error.message)
            XCTAssertTrue(error.message.contains("InvalidRequest") && error.message.contains("***"), error.message)
        }
    }

    func testAccessDeniedIsAuthRevoked() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("GET", .status(403, body: Self.error("AccessDenied")))
        await StorageContract.assertThrows(.authRevoked, "AccessDenied") {
            _ = try await remote.storage(through: proxy).list()
        }
    }

    func testDroppedDownloadIsRetriedAndThenSucceeds() async throws {
        let remote = try makeRemote()
        let data = StorageContract.randomData(count: 400_000)
        _ = try await remote.storage().writeBytes("d.bin", data)
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("GET", path: "d.bin", .cutResponse(afterBytes: 100_000))
        let storage = try remote.storage(through: proxy)
        try await storage.downloadFile("d.bin", toPath: remote.scratch + "/d.bin")
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: remote.scratch + "/d.bin")) == data)
    }

    func testConnectionRefusedIsOffline() async throws {
        var options = ProviderOptions()
        options.s3Endpoint = "http://127.0.0.1:\(try RcloneServer.freePort())"
        let storage = try S3Storage(location: S3Location(bucket: "bucket"), accessKeyId: "a", secretAccessKey: "b",
                                    options: options)
        await StorageContract.assertThrows(.offline, "a server that is not there") { _ = try await storage.list() }
    }

    // MARK: The source's metadata

    /// A single PUT and a multipart upload both carry `x-amz-meta-mtime` in rclone's form;
    /// rclone serve s3 gives the file on its disk the source's mtime to the nanosecond
    /// (2001-02-03 04:05:06.123456789, sources of mode 0600 and 0755), and a HEAD gives the
    /// metadata back while the server is warm.
    func testWriteFileSendsTheSourcesModificationTimeAsMtimeMetadataOnPutAndMultipart() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let storage = try remote.storage(through: proxy, multipart: true)
        let cases: [(String, mode_t, Int)] = [("small-600.bin", 0o600, 1000), ("small-755.bin", 0o755, 10),
                                              ("large.bin", 0o600, (6 << 20) + 77)]
        for (name, mode, size) in cases {
            let source = try makeMetadataSource(remote.scratch + "/" + name, StorageContract.randomData(count: size), mode: mode)
            let written = try await storage.writeFile(name, from: source)
            var placed = stat()
            XCTAssertEqual(stat(remote.served + "/" + remote.bucket + "/" + name, &placed), 0)
            XCTAssertEqual(placed.st_mtim.tv_sec, metadataSourceTime.tv_sec, name)
            XCTAssertEqual(placed.st_mtim.tv_nsec, metadataSourceTime.tv_nsec, name)
            let head = try await signedHead(remote, key: name)
            XCTAssertEqual(head.status, 200)
            XCTAssertEqual(head.header("x-amz-meta-mtime"), "981173106.123456789", name)
            let listed = try await storage.list().first { $0.path == name }
            XCTAssertEqual(listed?.remoteId, written.remoteId, name)
        }
        XCTAssertTrue(proxy.log().contains { $0.method == "POST" && $0.path.contains("uploads") }, "no multipart upload")
        XCTAssertEqual(S3Storage.mtimeMetadata(timespec(tv_sec: 1_700_000_000, tv_nsec: 500_000_000)), "1700000000.5")
        XCTAssertEqual(S3Storage.mtimeMetadata(timespec(tv_sec: 1_700_000_000, tv_nsec: 0)), "1700000000")
        XCTAssertEqual(S3Storage.mtimeMetadata(timespec(tv_sec: 1_700_000_000, tv_nsec: 1)), "1700000000.000000001")
        XCTAssertEqual(S3Storage.mtimeMetadata(timespec(tv_sec: -2, tv_nsec: 500_000_000)), "-1.5")
    }

    /// A HEAD of `key` in the test's bucket, signed with the server's key.
    private func signedHead(_ remote: Remote, key: String) async throws -> HTTPResponse {
        let host = "127.0.0.1:\(remote.server.port)"
        let path = "/" + remote.bucket + "/" + SigV4Signer.uriEncode(key, keepSlash: true)
        let signer = SigV4Signer(accessKeyId: remote.server.user, secretAccessKey: remote.server.secret, sessionToken: nil,
                                 region: "us-east-1", service: "s3")
        return try await HTTPClient(server: "http://" + host, settings: HTTPSettings()).send("checking", repeatable: true) {
            let signed = signer.headersToAdd(method: "HEAD", path: path, query: [], headers: [("host", host)],
                                             payloadHash: SigV4Signer.emptyPayloadHash, date: Date())
            return HTTPRequest(method: "HEAD", url: "http://" + host + path, headers: signed)
        }
    }

    // MARK: End to end

    func testSyncEngineRoundTripUploadsOnceThenNothingThenTheChange() async throws {
        let remote = try makeRemote()
        try await engineRoundTrip(try remote.storage(prefix: ["laptop"]), scratch: remote.scratch)
    }

    func testSyncEngineRoundTripWithMultipartUploads() async throws {
        let remote = try makeRemote()
        var options = remote.options(multipart: true)
        options.multipartThreshold = 5 << 20
        let storage = try S3Storage(location: S3Location(bucket: remote.bucket), accessKeyId: remote.server.user,
                                    secretAccessKey: remote.server.secret, options: options)
        let big = remote.scratch + "/big.bin"
        let data = StorageContract.randomData(count: (7 << 20) + 5)
        try data.write(to: URL(fileURLWithPath: big))
        let engine = SyncEngine(storage: storage, state: try StateStore(path: remote.scratch + "/state.db"))
        let snapshot = SyncSnapshot(entries: [SyncEntry(path: "big.bin", size: Int64(data.count),
                                                        hash: try SHA256Hasher.hexOfFile(atPath: big), source: .file(big))],
                                    marker: Data("m".utf8))
        guard case .completed(let first) = try await engine.sync(snapshot) else { return XCTFail("first run") }
        XCTAssertEqual(first.uploaded, ["big.bin", SyncEngine.defaultMarkerPath])
        guard case .completed(let second) = try await engine.sync(snapshot) else { return XCTFail("second run") }
        XCTAssertEqual(second.uploaded, [], "a multipart object's id must match its listing")
    }

    func testNamesNotUTF8WithControlsOrTheEscapeRoundTripByteExactThroughAColdServer() async throws {
        let remote = try makeRemote()
        var coldServer: RcloneServer?
        defer { coldServer?.stop() }
        try await awkwardNamesRoundTrip(try remote.storage(prefix: ["laptop"]), scratch: remote.scratch) {
            let server = try RcloneServer(.s3, root: remote.served)
            coldServer = server
            var options = remote.options(port: server.port)
            options.http.backoff = 0.05
            return try S3Storage(location: S3Location(bucket: remote.bucket, prefix: ["laptop"]), accessKeyId: server.user,
                                 secretAccessKey: server.secret, options: options)
        }
    }

    func testAFileListedUnderASpellingNeverWrittenIsLeftAloneAndNeverTakenForALocalFile() async throws {
        let remote = try makeRemote()
        try await foreignSpellingsAreLeftAlone(
            try remote.storage(), scratch: remote.scratch, writeOnDisk: remote.writeOnDisk,
            readOnDisk: { try Data(contentsOf: URL(fileURLWithPath: remote.served + "/" + remote.bucket + "/" + $0)) })
    }

    // MARK: Factory

    func testMakeStorageBuildsAWorkingS3Provider() async throws {
        let remote = try makeRemote()
        let storage = try makeStorage(
            "s3://\(remote.bucket)/via/factory",
            credentials: ProviderCredentials(awsAccessKeyId: remote.server.user, awsSecretAccessKey: remote.server.secret),
            options: remote.options())
        XCTAssertTrue(storage is S3Storage)
        _ = try await storage.writeBytes("made.txt", Data("by the factory".utf8))
        let listed = try await remote.storage().list()
        XCTAssertEqual(listed.map(\.path), ["via/factory/made.txt"])
    }

    // MARK: Helpers

    static func error(_ code: String) -> String {
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>\(code)</Code><Message>injected \(code)</Message></Error>"
    }

    struct Remote {
        let server: RcloneServer
        let served: String
        let bucket: String
        let scratchDir: TempDir
        var scratch: String { scratchDir.path }

        func options(port: Int? = nil, multipart: Bool = false) -> ProviderOptions {
            var options = ProviderOptions()
            options.s3Endpoint = "http://127.0.0.1:\(port ?? server.port)"
            options.http.backoff = 0.05
            if multipart {
                options.multipartThreshold = 6 << 20
                options.multipartPartSize = 5 << 20
            }
            return options
        }

        func storage(prefix: [String] = []) throws -> S3Storage {
            try S3Storage(location: S3Location(bucket: bucket, prefix: prefix), accessKeyId: server.user,
                          secretAccessKey: server.secret, options: options())
        }

        func storage(through proxy: FaultProxy, multipart: Bool = false) throws -> S3Storage {
            try S3Storage(location: S3Location(bucket: bucket), accessKeyId: server.user,
                          secretAccessKey: server.secret, options: options(port: proxy.port, multipart: multipart))
        }

        func writeOnDisk(_ relative: String, _ data: Data) throws {
            let path = served + "/" + bucket + "/" + relative
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: path))
        }
    }

    private func makeRemote() throws -> Remote {
        if Self.shared == nil {
            let served = try TempDir("s3-served")
            Self.shared = (try RcloneServer(.s3, root: served.path, extraKeys: [Self.rotatedKey]), served)
        }
        guard let shared = Self.shared else { throw RcloneServer.ServerError(message: "no server") }
        let bucket = "b-" + RcloneServer.randomToken(10)
        try shared.served.makeFolder(bucket)
        Thread.sleep(forTimeInterval: RcloneServer.directoryCacheTime * 2)
        let scratch = try TempDir("s3-scratch")
        addTeardownBlock { scratch.cleanup() }
        return Remote(server: shared.server, served: shared.served.path, bucket: bucket, scratchDir: scratch)
    }

    /// A write that breaks midway for real: the proxy forwards the PUT and cuts it after
    /// 100 KiB of a 1 MiB body, every time it is tried.
    private func failMidway(_ remote: Remote, _ proxy: FaultProxy) throws -> StorageContract.FailMidway {
        let storage = try remote.storage(through: proxy)
        return { path in
            proxy.add("PUT", times: 10, .cutRequest(afterBytes: 100 << 10))
            let source = remote.scratch + "/one-mebibyte.bin"
            try StorageContract.randomData(count: 1 << 20).write(to: URL(fileURLWithPath: source))
            _ = try await storage.writeFile(path, from: source)
        }
    }
}
