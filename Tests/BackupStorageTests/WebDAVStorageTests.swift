// WebDAVStorage against a real server (rclone serve webdav on 127.0.0.1): the storage contract
// suite, then what only WebDAV has — listing by depth, temporaries, identity, credentials,
// HTTPS with a ca_file — and every WebDAV row of DESIGN.md's error table, produced for real or
// through the fault proxy.

import BackupEngine
@testable import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class WebDAVStorageTests: XCTestCase {
    // One server for the whole class (each test gets its own folder on it): starting rclone
    // takes about a second. nonisolated(unsafe): XCTest runs the tests of a class one at a
    // time, and only class tearDown clears it.
    nonisolated(unsafe) private static var shared: (server: RcloneServer, served: TempDir)?

    override class func tearDown() {
        shared?.server.stop()
        shared?.served.cleanup()
        shared = nil
        super.tearDown()
    }

    // MARK: The contract

    func testContractEmptyRemoteListsNothing() async throws {
        try await StorageContract.emptyRemoteListsNothing(makeRemote().storage)
    }

    func testContractWrittenFileIsListedWithItsSize() async throws {
        try await StorageContract.writtenFileIsListedWithItsSize(makeRemote().storage)
    }

    func testContractWriteBytesThenReadBytesRoundTrips() async throws {
        try await StorageContract.writeBytesThenReadBytesRoundTrips(makeRemote().storage)
    }

    func testContractWriteFileThenDownloadFileRoundTrips() async throws {
        let remote = try makeRemote()
        try await StorageContract.writeFileThenDownloadFileRoundTrips(remote.storage, scratch: remote.scratch)
    }

    func testContractWriteFileHashingTellsTheHashOfWhatItSent() async throws {
        let remote = try makeRemote()
        try await StorageContract.writeFileHashingTellsTheHashOfWhatItSent(remote.storage, scratch: remote.scratch)
    }

    func testContractOverwriteReplacesContentAndSize() async throws {
        try await StorageContract.overwriteReplacesContentAndSize(makeRemote().storage)
    }

    func testContractKeptVersionsAreListedApartFromTheTree() async throws {
        try await StorageContract.keptVersionsAreListedApartFromTheTree(makeRemote().storage)
    }

    func testContractDeleteRemovesTheFile() async throws {
        try await StorageContract.deleteRemovesTheFile(makeRemote().storage)
    }

    func testContractDeleteOfAbsentPathSucceeds() async throws {
        try await StorageContract.deleteOfAbsentPathSucceeds(makeRemote().storage)
    }

    func testContractReadOfAbsentPathThrowsNotFound() async throws {
        try await StorageContract.readOfAbsentPathThrowsNotFound(makeRemote().storage)
    }

    func testContractDownloadOfAbsentPathThrowsNotFound() async throws {
        let remote = try makeRemote()
        try await StorageContract.downloadOfAbsentPathThrowsNotFound(remote.storage, scratch: remote.scratch)
    }

    func testContractTransfersReportBytesAsTheyGo() async throws {
        let remote = try makeRemote()
        try await StorageContract.transfersReportBytesAsTheyGo(remote.storage, scratch: remote.scratch)
    }

    func testContractDownloadRefusesABodyOfAnotherSize() async throws {
        let remote = try makeRemote()
        try await StorageContract.downloadRefusesABodyOfAnotherSize(remote.storage, scratch: remote.scratch)
    }

    func testContractSpacesAndUnicodeInNamesRoundTrip() async throws {
        try await StorageContract.spacesAndUnicodeInNamesRoundTrip(makeRemote().storage)
    }

    func testContractDeepFoldersRoundTrip() async throws {
        try await StorageContract.deepFoldersRoundTrip(makeRemote().storage)
    }

    func testContractIdentityKeyIsStable() async throws {
        let remote = try makeRemote()
        try await StorageContract.identityKeyIsStable { remote.makeStorage(remote.server.secret) }
    }

    func testContractFailedWriteLeavesNothing() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        try await StorageContract.failedWriteLeavesNothing(remote.storage, failMidway: failMidway(remote, proxy))
        try assertNoTemporaryFiles(remote)
    }

    func testContractFailedOverwriteKeepsTheOldFile() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        try await StorageContract.failedOverwriteKeepsTheOldFile(remote.storage, failMidway: failMidway(remote, proxy))
        try assertNoTemporaryFiles(remote)
    }

    // MARK: Listing

    func testListUsesOneInfiniteDepthRequestWhereTheServerAllowsIt() async throws {
        let remote = try makeRemote()
        for path in ["a/b/c/one.txt", "a/two.txt", "three.txt"] {
            _ = try await remote.storage.writeBytes(path, Data(path.utf8))
        }
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let listed = try await remote.storage(through: proxy).list()
        XCTAssertEqual(Set(listed.map(\.path)), ["a/b/c/one.txt", "a/two.txt", "three.txt"])
        // The root's own level (to see whether it holds the versions folder), then one request for all.
        XCTAssertEqual(proxy.log().filter { $0.method == "PROPFIND" }.count, 2)
    }

    func testTheListingNeverDescendsIntoTheVersionsFolder() async throws {
        let remote = try makeRemote()
        for path in ["a/b/one.txt", "c/two.txt", "three.txt"] { _ = try await remote.storage.writeBytes(path, Data(path.utf8)) }
        for index in 0..<20 { try remote.writeOnDisk(VersionStore.path(run: "20261130T140509Z", "a/v\(index).txt"), Data("v".utf8)) }
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let listed = try await remote.storage(through: proxy).list()
        XCTAssertEqual(Set(listed.map(\.path)), ["a/b/one.txt", "c/two.txt", "three.txt"])
        let asked = proxy.log().filter { $0.method == "PROPFIND" }.map(\.path)
        XCTAssertFalse(asked.contains { $0.contains(VersionStore.folder) }, "\(asked)")
        XCTAssertEqual(asked.count, 3, "the root's level, then a and c each: \(asked)")
    }

    func testListWalksFolderByFolderWhenInfiniteDepthIsRefused() async throws {
        let remote = try makeRemote()
        for path in ["a/b/c/one.txt", "a/two.txt", "three.txt"] {
            _ = try await remote.storage.writeBytes(path, Data(path.utf8))
        }
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PROPFIND", depth: "infinity", .status(403, body: "<error xmlns=\"DAV:\"><propfind-finite-depth/></error>"))
        let storage = remote.storage(through: proxy)
        let listed = try await storage.list()
        XCTAssertEqual(Set(listed.map(\.path)), ["a/b/c/one.txt", "a/two.txt", "three.txt"])
        XCTAssertEqual(Set(listed.map(\.size)), [13, 9, 9].reduce(into: Set<Int64>()) { $0.insert(Int64($1)) })
        // The root's level, the refused infinite one, then root, a, a/b, a/b/c.
        XCTAssertEqual(proxy.log().filter { $0.method == "PROPFIND" }.count, 6)
    }

    func testListHidesTemporaryFilesLeftOnTheServer() async throws {
        let remote = try makeRemote()
        _ = try await remote.storage.writeBytes("kept.txt", Data("kept".utf8))
        try remote.writeOnDisk("sub/.backup-tmp.deadbeef", Data("partial".utf8))
        try remote.writeOnDisk(".backup-tmp.cafe", Data("partial".utf8))
        let listed = try await remote.storage.list()
        XCTAssertEqual(listed.map(\.path), ["kept.txt"])
    }

    /// Issue 11, hygiene, against rclone: the temporaries of the run's listing that are an
    /// hour old go (by DAV:getlastmodified); not in a preview, not under a hold.
    func testHygieneStaleTemporariesAreSweptByASyncOnly() async throws {
        let remote = try makeRemote()
        let root = remote.served + "/" + remote.folder + "/"
        try await sweepHygiene(remote.storage, scratch: remote.scratch, place: { relative, age in
            try remote.writeOnDisk(relative, Data("partial".utf8))
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -age)], ofItemAtPath: root + relative)
            Thread.sleep(forTimeInterval: RcloneServer.directoryCacheTime * 2)
        }, exists: { FileManager.default.fileExists(atPath: root + $0) })
    }

    func testATwentyThousandFileBackupListsAndSyncsASecondTime() async throws {
        // rclone answers Depth: infinity for 20,000 files with ~17 MB of XML: past the 10 MB that
        // XMLParser(data:) (libxml2 in one chunk) accepts, so this listing used to be refused.
        // The files are made on the server's disk: uploading 20,000 would take a minute.
        let remote = try makeRemote()
        let count = 20_000
        var entries: [SyncEntry] = []
        entries.reserveCapacity(count)
        let root = remote.served + "/" + remote.folder
        for index in 0..<count {
            let folder = "Documents/Projects and archives/project \(index / 1000)/sources of module \(index / 100 % 10)"
            let path = folder + "/a file with a name as long as in a real home folder \(index).txt"
            if index % 100 == 0 {
                try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
            }
            let size = index % 7
            let fd = open(root + "/" + path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            XCTAssertGreaterThanOrEqual(fd, 0)
            XCTAssertEqual(write(fd, "tiny..", size), size)
            close(fd)
            entries.append(SyncEntry(path: path, size: Int64(size), hash: nil, source: .file(remote.scratch + "/unused")))
        }
        try await Task.sleep(nanoseconds: UInt64(RcloneServer.directoryCacheTime * 2e9))
        let engine = SyncEngine(storage: remote.storage, state: try StateStore(path: remote.scratch + "/state.db"))
        let snapshot = SyncSnapshot(entries: entries, marker: Data("twenty thousand".utf8))
        for run in 1...2 {
            let started = Date()
            let outcome = try await engine.sync(snapshot)
            guard case .completed(let report) = outcome else { return XCTFail("run \(run): \(outcome)") }
            XCTAssertEqual(report.uploaded, run == 1 ? [SyncEngine.defaultMarkerPath] : [], "run \(run)")
            XCTAssertEqual(report.unchanged, count, "run \(run)")
            print("20,000-file sync run \(run): \(String(format: "%.2f", Date().timeIntervalSince(started))) s")
        }
    }

    func testAHugeListingIsParsedAsAStreamInBoundedMemory() async throws {
        // 20,000 entries of ~5 KB each: a 100 MB multistatus, streamed by the proxy as it is
        // generated, listed by a process of its own whose peak RSS is read before it exits.
        let proxy = try FaultProxy(upstreamPort: nil)
        let folder = "huge"
        // The root's own level first (it holds a folder, so the whole tree is asked for next).
        let rootLevel = "<?xml version=\"1.0\"?><d:multistatus xmlns:d=\"DAV:\">"
            + ["/\(folder)/", "/\(folder)/big/"].map {
                "<d:response><d:href>\($0)</d:href><d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype>"
                    + "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
            }.joined() + "</d:multistatus>"
        proxy.add("PROPFIND", depth: "1", .status(207, headers: ["Content-Type": "application/xml"], body: rootLevel))
        proxy.add("PROPFIND", depth: "infinity", .propfindEntries(count: 20_000, padding: 5_000, prefix: "/" + folder))
        let helper = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("BackupListHelper").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: helper)
        process.arguments = ["webdav", "127.0.0.1", String(proxy.port), "someone", folder]
        process.environment = ["BACKUP_TEST_PASSWORD": "secret"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        process.waitUntilExit()
        print("huge listing: \(text)")
        XCTAssertEqual(process.terminationStatus, 0, text)
        XCTAssertTrue(text.hasPrefix("files=20000 "), text)
        let peak = text.split(separator: " ").first { $0.hasPrefix("peak_rss_kib=") }.flatMap { Int($0.dropFirst(13)) }
        // The body alone is 100 MB; the listing itself (20,000 short paths) is a few MB. Parsed
        // whole (XMLParser over the body in memory), the peak was 462 MB and the listing failed.
        XCTAssertLessThan(peak ?? .max, 80 << 10, "peak RSS in KiB, for a 100 MB listing")
    }

    func testHrefsOnAnotherServerOrOutsideTheFolderAndRepeatedHrefsAreLeftOutWithNotes() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let f = "/" + remote.folder
        func response(_ href: String, size: Int = 1) -> String {
            "<d:response><d:href>\(href)</d:href><d:propstat><d:prop><d:getcontentlength>\(size)</d:getcontentlength>"
                + "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        }
        let hrefs = [
            f + "/ok.txt", "http://elsewhere.example\(f)/other-host.txt", "http://127.0.0.1:1\(f)/other-port.txt",
            "/another-folder/outside.txt", f + "/d%C3%BCp.txt", f + "/d%c3%bcp.txt", f + "/ok.txt",
            "http://127.0.0.1:\(proxy.port)\(f)/absolute%20here.txt",
        ]
        let body = "<?xml version=\"1.0\"?><d:multistatus xmlns:d=\"DAV:\">" + response(f + "/")
            + hrefs.enumerated().map { response($0.element, size: $0.offset) }.joined() + "</d:multistatus>"
        proxy.add("PROPFIND", .status(207, headers: ["Content-Type": "application/xml"], body: body))
        let storage = remote.storage(through: proxy)
        let listed = try await storage.list()
        XCTAssertEqual(listed.map(\.path), ["ok.txt", "düp.txt", "absolute here.txt"])
        XCTAssertEqual(listed.map(\.size), [0, 4, 7], "the first of two entries for one path is kept")
        let notes = storage.takeListingNotes()
        XCTAssertEqual(notes.count, 5, "\(notes)")
        for expected in ["other-host.txt", "other-port.txt", "outside.txt", "düp.txt was listed again", "ok.txt was listed again"] {
            XCTAssertTrue(notes.contains { $0.contains(expected) }, "no note about \(expected): \(notes)")
        }
        XCTAssertEqual(storage.takeListingNotes(), [], "notes are handed over once")
    }

    /// A pretty-printed listing: fields wrapped in spaces, tabs and line breaks, and a propstat
    /// whose status is not 200 (a property the server does not have) carrying values that
    /// must not be taken. Only the 200 propstat's size and ETag count; the text is trimmed.
    func testAPrettyPrintedListingIsTrimmedAndAPropstatThatIsNot200IsIgnored() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let f = "/" + remote.folder
        let body = """
            <?xml version="1.0"?>
            <d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns">
              <d:response>
                <d:href>\(f)/</d:href>
                <d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype></d:prop>
                  <d:status>HTTP/1.1 200 OK</d:status></d:propstat>
              </d:response>
              <d:response>
                <d:href>
            \t\(f)/a%20b.txt\r
                </d:href>
                <d:propstat>
                  <d:prop><d:getcontentlength> 12
            </d:getcontentlength><d:getetag>\t"e-1" </d:getetag></d:prop>
                  <d:status>  HTTP/1.1 200 OK
                  </d:status>
                </d:propstat>
                <d:propstat>
                  <d:prop><d:getcontentlength>999</d:getcontentlength><oc:fileid>not-mine</oc:fileid></d:prop>
                  <d:status>HTTP/1.1 404 Not Found</d:status>
                </d:propstat>
              </d:response>
              <d:response>
                <d:href>\(f)/c.txt</d:href>
                <d:propstat><d:prop><d:getcontentlength>5</d:getcontentlength></d:prop>
                  <d:status>HTTP/1.1 2000 OK</d:status></d:propstat>
              </d:response>
            </d:multistatus>
            """
        proxy.add("PROPFIND", .status(207, headers: ["Content-Type": "application/xml"], body: body))
        let listed = try await remote.storage(through: proxy).list()
        XCTAssertEqual(listed.map(\.path), ["a b.txt", "c.txt"])
        XCTAssertEqual(listed.map(\.size), [12, 0], "the 404 propstat's size is not taken, nor one whose status is 2000")
        XCTAssertEqual(listed.map(\.remoteId), ["\"e-1\"", nil], "the 200 propstat's ETag, not the 404's file id")
    }

    /// Apache lists a file changed in the last second with a weak ETag (`W/"…"`) and the same
    /// tag strong a second later: one version. The id is the tag without `W/`, so the next
    /// sync finds the file unchanged instead of uploading it again; an id an earlier version
    /// recorded with its `W/` names the same version too, and another tag never does.
    func testAWeakETagAndTheStrongOneOfTheSameTagAreOneVersion() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let f = "/" + remote.folder
        func listing(_ etag: String) -> String {
            "<?xml version=\"1.0\"?><d:multistatus xmlns:d=\"DAV:\"><d:response><d:href>\(f)/</d:href><d:propstat><d:prop>"
                + "<d:resourcetype><d:collection/></d:resourcetype></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
                + "<d:response><d:href>\(f)/a.txt</d:href><d:propstat><d:prop><d:getcontentlength>3</d:getcontentlength>"
                + "<d:getetag>\(etag)</d:getetag></d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>"
        }
        let storage = remote.storage(through: proxy)
        proxy.add("PROPFIND", .status(207, headers: ["Content-Type": "application/xml"], body: listing("W/\"3-61a\"")))
        let weak = try await storage.list()
        proxy.add("PROPFIND", .status(207, headers: ["Content-Type": "application/xml"], body: listing("\"3-61a\"")))
        let strong = try await storage.list()
        XCTAssertEqual(weak.map(\.remoteId), ["\"3-61a\""])
        XCTAssertEqual(weak.map(\.remoteId), strong.map(\.remoteId))
        let listed = try XCTUnwrap(strong.first)
        XCTAssertTrue(storage.isSameVersion(recorded: "W/\"3-61a\"", listed: listed))
        XCTAssertFalse(storage.isSameVersion(recorded: "W/\"3-61b\"", listed: listed))
        XCTAssertFalse(storage.isSameVersion(recorded: "\"3-61b\"", listed: listed))
    }

    func testADTDInAListingIsRefusedAndItsEntitiesAreNeverExpanded() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let laughs = (1...9).map { "<!ENTITY l\($0) \"" + String(repeating: "&l\($0 - 1);", count: 10) + "\">" }.joined()
        let body = "<?xml version=\"1.0\"?><!DOCTYPE d:multistatus [<!ENTITY l0 \"lol\">\(laughs)"
            + "<!ENTITY name \"planted.txt\">]><d:multistatus xmlns:d=\"DAV:\"><d:response><d:href>/\(remote.folder)/&name;"
            + "</d:href><d:propstat><d:prop><d:getcontentlength>&l9;</d:getcontentlength></d:prop>"
            + "<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>"
        proxy.add("PROPFIND", times: 10, .status(207, body: body))
        do {
            let listed = try await remote.storage(through: proxy).list()
            XCTFail("a listing with a DTD was read: \(listed)")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("DTD") && error.message.contains("127.0.0.1:\(proxy.port)"), error.message)
        }
    }

    func testRedirectsOnGETAndPROPFINDAreErrorsAndNeverFollowed() async throws {
        let remote = try makeRemote()
        _ = try await remote.storage.writeBytes("here.txt", Data("here".utf8))
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let storage = remote.storage(through: proxy)
        for (method, status) in [("GET", 302), ("PROPFIND", 301)] {
            proxy.clear()
            proxy.add(method, .status(status, headers: ["Location": "http://127.0.0.1:\(proxy.port)/elsewhere/"]))
            do {
                if method == "GET" { _ = try await storage.readBytes("here.txt") } else { _ = try await storage.list() }
                XCTFail("\(method) answered \(status) and yet succeeded")
            } catch let error as CloudError {
                XCTAssertEqual(error.kind, .transport)
                XCTAssertTrue(error.message.contains("HTTP \(status)") && error.message.contains("/elsewhere/"), error.message)
            }
            XCTAssertEqual(proxy.log().map(\.method), [method], "nothing after the redirect")
        }
    }

    func testBodiesInMemoryAreCappedAndAnOverflowIsTransportNamingTheServer() async throws {
        let remote = try makeRemote()
        _ = try await remote.storage.writeBytes("big.bin", Data(count: 5000))
        var settings = HTTPSettings()
        settings.readBytesLimit = 4096
        let storage = WebDAVStorage(endpoint: remote.endpoint(), password: remote.server.secret, settings: settings)
        do {
            _ = try await storage.readBytes("big.bin")
            XCTFail("a body past the caller's limit was read")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("127.0.0.1:\(remote.server.port)") && error.message.contains("reading big.bin")
                && error.message.contains("4096"), error.message)
        }
        _ = try await remote.storage.writeBytes("fits.bin", Data(count: 4096))
        let fits = try await storage.readBytes("fits.bin")
        XCTAssertEqual(fits.count, 4096, "a body of exactly the limit is read")
    }

    func testRemoteIdOfAWriteMatchesTheListingAndChangesWithTheContent() async throws {
        let remote = try makeRemote()
        let first = try await remote.storage.writeBytes("v.txt", Data("one".utf8))
        XCTAssertNotNil(first.remoteId)
        try await Task.sleep(nanoseconds: 20_000_000)
        let second = try await remote.storage.writeBytes("v.txt", Data("second".utf8))
        XCTAssertNotEqual(first.remoteId, second.remoteId)
        let listed = try await remote.storage.list()
        XCTAssertEqual(listed.first { $0.path == "v.txt" }?.remoteId, second.remoteId)
        // A second instance learns the same about the server and gives the same ids.
        let third = try await remote.makeStorage(remote.server.secret).writeBytes("w.txt", Data("w".utf8))
        let listedAgain = try await remote.storage.list()
        XCTAssertEqual(listedAgain.first { $0.path == "w.txt" }?.remoteId, third.remoteId)
    }

    func testWritesFromManyTasksAtOnceAllLand() async throws {
        let remote = try makeRemote()
        let storage = remote.storage
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask {
                    _ = try await storage.writeBytes("folder\(index % 3)/deeper/file\(index).txt", Data("\(index)".utf8))
                }
            }
            try await group.waitForAll()
        }
        let listed = try await storage.list()
        XCTAssertEqual(listed.count, 40)
        try assertNoTemporaryFiles(remote)
    }

    func testQuotaIsReportedAsNumbersOrNil() async throws {
        let remote = try makeRemote()
        if let quota = try await remote.storage.quota() {
            XCTAssertTrue((quota.available ?? 0) >= 0 && (quota.used ?? 0) >= 0, "\(quota)")
        }
    }

    // MARK: Identity

    func testIdentityIsTheUserAtTheServerAndTheFolderWhereNoPrincipalIsOffered() async throws {
        let remote = try makeRemote()
        let key = try await remote.storage.identityKey()
        XCTAssertEqual(key, "webdav user \(remote.server.user)@http://127.0.0.1:\(remote.server.port) "
            + "folder /\(remote.folder)")
        let other = try makeRemote()
        let otherKey = try await other.storage.identityKey()
        XCTAssertNotEqual(key, otherKey, "another folder must be another identity")
    }

    func testIdentityIsThePrincipalWhereTheServerOffersOne() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        let multistatus = """
            <?xml version="1.0"?><d:multistatus xmlns:d="DAV:"><d:response><d:href>/\(remote.folder)/</d:href>\
            <d:propstat><d:prop><d:current-user-principal><d:href>/principals/users/alice/</d:href>\
            </d:current-user-principal><d:resourcetype><d:collection/></d:resourcetype></d:prop>\
            <d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>
            """
        proxy.add("PROPFIND", .status(207, headers: ["Content-Type": "application/xml"], body: multistatus))
        let key = try await remote.storage(through: proxy).identityKey()
        XCTAssertEqual(key, "webdav principal http://127.0.0.1:\(proxy.port)/principals/users/alice/ folder /\(remote.folder)")
    }

    // MARK: Credentials

    func testWrongPasswordIsAuthRevokedAtOnceAndTheMessageHoldsNoPassword() async throws {
        let remote = try makeRemote()
        let wrong = "Wrong-Secret-" + RcloneServer.randomToken(12)
        let storage = remote.makeStorage(wrong)
        let start = Date()
        for operation in ["list", "write", "read", "identity"] {
            do {
                switch operation {
                case "list": _ = try await storage.list()
                case "write": _ = try await storage.writeBytes("a.txt", Data("x".utf8))
                case "read": _ = try await storage.readBytes("a.txt")
                default: _ = try await storage.identityKey()
                }
                XCTFail("\(operation) with a wrong password succeeded")
            } catch let error as CloudError {
                XCTAssertEqual(error.kind, .authRevoked, "\(operation): \(error)")
                XCTAssertFalse(error.message.contains(wrong), error.message)
                XCTAssertFalse(error.message.contains(remote.server.secret), error.message)
                XCTAssertTrue(error.message.contains("127.0.0.1:\(remote.server.port)"), error.message)
                XCTAssertTrue(error.message.contains("BACKUP_PASSWORD"), error.message)
            }
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, "a wrong password must fail fast")
    }

    func testAPasswordTheServerEchoesIsMaskedInTheMessage() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("GET", .status(418, body: "I refuse; you sent \(remote.server.secret)"))
        do {
            _ = try await remote.storage(through: proxy).readBytes("x.txt")
            XCTFail("a 418 succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertFalse(error.message.contains(remote.server.secret), error.message)
            XCTAssertTrue(error.message.contains("HTTP 418") && error.message.contains("***"), error.message)
        }
    }

    func testPasswordIsReadAgainOnceAfterA401() async throws {
        let remote = try makeRemote()
        let calls = Counter()
        let right = remote.server.secret
        let storage = WebDAVStorage(endpoint: remote.endpoint(), password: "stale", reloadPassword: {
            calls.increment()
            return right
        })
        _ = try await storage.writeBytes("a.txt", Data("x".utf8))
        _ = try await storage.list()
        XCTAssertEqual(calls.value, 1, "the fresh password is kept after the reload")

        let stillWrong = WebDAVStorage(endpoint: remote.endpoint(), password: "stale", reloadPassword: {
            calls.increment()
            return "also-wrong"
        })
        await StorageContract.assertThrows(.authRevoked, "a reloaded password that is also wrong") {
            _ = try await stillWrong.list()
        }
        XCTAssertEqual(calls.value, 2, "reloaded exactly once for the one request")
    }

    // MARK: The remote folder

    func testMissingRemoteFolderIsNotAvailableAndIsNotCreated() async throws {
        let remote = try makeRemote()
        let missing = WebDAVStorage(endpoint: remote.endpoint(folder: ["no-such-folder"]), password: remote.server.secret)
        await StorageContract.assertThrows(.notAvailable, "listing") { _ = try await missing.list() }
        await StorageContract.assertThrows(.notAvailable, "identity") { _ = try await missing.identityKey() }
        await StorageContract.assertThrows(.notAvailable, "writing at the root") {
            _ = try await missing.writeBytes("a.txt", Data("x".utf8))
        }
        await StorageContract.assertThrows(.notAvailable, "writing in a folder") {
            _ = try await missing.writeBytes("sub/a.txt", Data("x".utf8))
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: remote.served + "/no-such-folder"))
    }

    func testRootAnswering405IsNotAvailable() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PROPFIND", times: 5, .status(405))
        await StorageContract.assertThrows(.notAvailable, "listing a root that is not a collection") {
            _ = try await remote.storage(through: proxy).list()
        }
    }

    // MARK: Error table, through the fault proxy

    func testThrottlingWithRetryAfterIsWaitedOutAndThenSucceeds() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PUT", times: 2, .status(429, headers: ["Retry-After": "1"]))
        let start = Date()
        _ = try await remote.storage(through: proxy).writeBytes("t.txt", Data("throttled".utf8))
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 2, "Retry-After: 1 was not honoured twice")
        XCTAssertEqual(proxy.log().filter { $0.method == "PUT" }.count, 3)
        let read = try await remote.storage.readBytes("t.txt")
        XCTAssertEqual(read, Data("throttled".utf8))
    }

    func testThrottlingPastThreeRetriesIsTransportAndLeavesNothing() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PUT", times: 10, .status(503, headers: ["Retry-After": "0"]))
        do {
            _ = try await remote.storage(through: proxy).writeBytes("t.txt", Data("x".utf8))
            XCTFail("a write throttled for good succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("throttling") && error.message.contains("127.0.0.1"), error.message)
        }
        XCTAssertEqual(proxy.log().filter { $0.method == "PUT" }.count, 4, "one try and three retries")
        let listed = try await remote.storage.list()
        XCTAssertEqual(listed, [])
    }

    func testInsufficientStorageIsStorageFull() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("PUT", .status(507))
        await StorageContract.assertThrows(.storageFull, "a PUT answered 507") {
            _ = try await remote.storage(through: proxy).writeBytes("full.txt", Data("x".utf8))
        }
        let listed = try await remote.storage.list()
        XCTAssertEqual(listed, [])
    }

    func testForbiddenIsAuthRevoked() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("GET", .status(403))
        _ = try await remote.storage.writeBytes("f.txt", Data("x".utf8))
        await StorageContract.assertThrows(.authRevoked, "a GET answered 403") {
            _ = try await remote.storage(through: proxy).readBytes("f.txt")
        }
    }

    func testDroppedConnectionIsRetriedAndThenSucceeds() async throws {
        let remote = try makeRemote()
        let data = StorageContract.randomData(count: 300_000)
        _ = try await remote.storage.writeBytes("d.bin", data)
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("GET", .drop)
        proxy.add("GET", .cutResponse(afterBytes: 50_000))
        let read = try await remote.storage(through: proxy).readBytes("d.bin")
        XCTAssertTrue(read == data, "the retried read differs")
        XCTAssertEqual(proxy.log().filter { $0.method == "GET" }.count, 3)
    }

    /// Issue 11, item 1: the server did the MOVE but its answer was lost. Sending the MOVE
    /// again (Overwrite: T) would delete the file just placed and then find no source; the
    /// provider asks (PROPFIND Depth 0) instead, and the write stands. The proxy forwards the
    /// first MOVE to rclone and cuts its response at byte 0.
    func testItem01MoveWhoseResponseIsLostIsCheckedNotRepeated() async throws {
        let remote = try makeRemote()
        _ = try await remote.storage.writeBytes("m.txt", Data("old".utf8))
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("MOVE", .cutResponse(afterBytes: 0))
        let written = try await remote.storage(through: proxy).writeBytes("m.txt", Data("the new one".utf8))
        XCTAssertEqual(written.size, 11)
        let read = try await remote.storage.readBytes("m.txt")
        XCTAssertEqual(String(decoding: read, as: UTF8.self), "the new one")
        XCTAssertEqual(proxy.log().filter { $0.method == "MOVE" }.count, 1, "the MOVE was sent again")
        let listed = try await remote.storage.list()
        XCTAssertEqual(listed.first { $0.path == "m.txt" }?.remoteId, written.remoteId)
        try assertNoTemporaryFiles(remote)

        // A MOVE whose request never reached the server (dropped before it was forwarded)
        // is found not done (the temporary is still there) and sent again.
        proxy.clear()
        proxy.add("MOVE", .drop)
        _ = try await remote.storage(through: proxy).writeBytes("m.txt", Data("third".utf8))
        let third = try await remote.storage.readBytes("m.txt")
        XCTAssertEqual(third, Data("third".utf8))
        XCTAssertEqual(proxy.log().filter { $0.method == "MOVE" }.count, 2)
        try assertNoTemporaryFiles(remote)
    }

    func testConnectionDroppedEveryTimeIsTransport() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("GET", times: 10, .drop)
        _ = try await remote.storage.writeBytes("d.txt", Data("x".utf8))
        await StorageContract.assertThrows(.transport, "a GET dropped every time") {
            _ = try await remote.storage(through: proxy).readBytes("d.txt")
        }
        XCTAssertEqual(proxy.log().filter { $0.method == "GET" }.count, 4, "one try and three retries")
    }

    func testStalledResponseTimesOutAsTransport() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("GET", times: 5, .stall(seconds: 30))
        var settings = HTTPSettings()
        settings.stallTimeout = 1
        settings.stallRetries = 1
        let storage = remote.storage(through: proxy, settings: settings)
        let start = Date()
        await StorageContract.assertThrows(.transport, "a stalled GET") { _ = try await storage.readBytes("s.txt") }
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertTrue((1.5..<10).contains(elapsed), "took \(elapsed) s")
    }

    func testServerErrorsAreRetriedThenTransport() async throws {
        let remote = try makeRemote()
        let proxy = try FaultProxy(upstreamPort: remote.server.port)
        proxy.add("DELETE", times: 10, .status(500, body: "database on fire"))
        do {
            try await remote.storage(through: proxy).delete("x.txt")
            XCTFail("a delete answered 500 succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("HTTP 500") && error.message.contains("database on fire"), error.message)
        }
        XCTAssertEqual(proxy.log().filter { $0.method == "DELETE" }.count, 3, "one try and two retries")
    }

    func testConnectionRefusedIsOffline() async throws {
        let port = try RcloneServer.freePort()
        let storage = WebDAVStorage(endpoint: WebDAVEndpoint(secure: false, host: "127.0.0.1", port: port, user: "u"),
                                    password: "p")
        do {
            _ = try await storage.list()
            XCTFail("listing a server that is not there succeeded")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .offline)
            XCTAssertTrue(error.message.contains("127.0.0.1:\(port)"), error.message)
        }
    }

    // MARK: HTTPS

    func testHTTPSIsRefusedWithoutTheCAAndAcceptedWithCAFile() async throws {
        let dir = try TempDir("webdav-tls")
        addTeardownBlock { dir.cleanup() }
        let (ca, certificate, key) = try makeCertificates(in: dir)
        try dir.makeFolder("served/backup")
        let server = try RcloneServer(.webdav, root: dir.path("served"), certificate: certificate, key: key)
        addTeardownBlock { server.stop() }
        let endpoint = WebDAVEndpoint(secure: true, host: "127.0.0.1", port: server.port, user: server.user,
                                      folder: ["backup"])

        let untrusting = WebDAVStorage(endpoint: endpoint, password: server.secret)
        do {
            _ = try await untrusting.list()
            XCTFail("a self-signed server was trusted without ca_file")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .offline)
            XCTAssertTrue(error.message.contains("ca_file"), error.message)
        }

        let trusting = WebDAVStorage(endpoint: endpoint, password: server.secret, settings: HTTPSettings(caFile: ca))
        _ = try await trusting.writeBytes("secure.txt", Data("over TLS".utf8))
        let read = try await trusting.readBytes("secure.txt")
        XCTAssertEqual(read, Data("over TLS".utf8))
    }

    // MARK: The source's metadata

    /// The PUT carries X-OC-Mtime, and rclone serve webdav keeps it through the MOVE into
    /// place: the file on the server's disk has the source's mtime in whole seconds (sources
    /// of mode 0600 and 0755, mtime 2001-02-03 04:05:06.123456789), PROPFIND shows it as
    /// getlastmodified, and the id the write returns is the listing's.
    func testWriteFileKeepsTheSourcesModificationTimeInWholeSecondsThroughTheMove() async throws {
        let remote = try makeRemote()
        for mode: mode_t in [0o600, 0o755] {
            let name = "sub/mode-\(String(mode, radix: 8)).bin"
            let source = try makeMetadataSource(remote.scratch + "/" + String(mode, radix: 8), Data("bytes \(mode)".utf8), mode: mode)
            let written = try await remote.storage.writeFile(name, from: source)
            var placed = stat()
            XCTAssertEqual(stat(remote.served + "/" + remote.folder + "/" + name, &placed), 0)
            XCTAssertEqual(placed.st_mtim.tv_sec, metadataSourceTime.tv_sec, "mode \(String(mode, radix: 8))")

            let client = HTTPClient(server: remote.server.address, settings: HTTPSettings())
            let url = remote.server.address + "/" + remote.folder + "/" + name
            let response = try await client.send("checking", repeatable: true) {
                HTTPRequest(method: "PROPFIND", url: url, headers: [("Depth", "0")],
                            basicAuth: (remote.server.user, remote.server.secret))
            }
            XCTAssertEqual(response.status, 207)
            let body = String(decoding: response.body, as: UTF8.self)
            XCTAssertTrue(body.contains("<D:getlastmodified>Sat, 03 Feb 2001 04:05:06 GMT</D:getlastmodified>"), body)
            let listed = try await remote.storage.list().first { $0.path == name }
            XCTAssertEqual(listed?.remoteId, written.remoteId)
        }
        XCTAssertEqual(WebDAVStorage.mtimeHeader(timespec(tv_sec: 981_173_106, tv_nsec: 999_999_999)), "981173106")
        XCTAssertEqual(WebDAVStorage.mtimeHeader(timespec(tv_sec: -2, tv_nsec: 500_000_000)), "-2", "the floor of -1.5")
        try assertNoTemporaryFiles(remote)
    }

    // MARK: End to end

    func testSyncEngineRoundTripUploadsOnceThenNothingThenTheChange() async throws {
        let remote = try makeRemote()
        try await engineRoundTrip(remote.storage, scratch: remote.scratch)
    }

    func testNamesNotUTF8WithControlsOrTheEscapeRoundTripByteExactThroughAColdServer() async throws {
        let remote = try makeRemote()
        var coldServer: RcloneServer?
        defer { coldServer?.stop() }
        try await awkwardNamesRoundTrip(remote.storage, scratch: remote.scratch) {
            let server = try RcloneServer(.webdav, root: remote.served)
            coldServer = server
            return WebDAVStorage(endpoint: WebDAVEndpoint(secure: false, host: "127.0.0.1", port: server.port, user: server.user,
                                                          folder: [remote.folder]), password: server.secret)
        }
    }

    func testAFileListedUnderASpellingNeverWrittenIsLeftAloneAndNeverTakenForALocalFile() async throws {
        let remote = try makeRemote()
        try await foreignSpellingsAreLeftAlone(
            remote.storage, scratch: remote.scratch, writeOnDisk: remote.writeOnDisk,
            readOnDisk: { try Data(contentsOf: URL(fileURLWithPath: remote.served + "/" + remote.folder + "/" + $0)) })
    }

    // MARK: Factory

    func testMakeStorageBuildsAWorkingWebDAVProvider() async throws {
        let remote = try makeRemote()
        let url = "webdav://\(remote.server.user)@127.0.0.1:\(remote.server.port)/\(remote.folder)"
        let storage = try makeStorage(url, credentials: ProviderCredentials(webdavPassword: remote.server.secret),
                                      options: ProviderOptions())
        XCTAssertTrue(storage is WebDAVStorage)
        _ = try await storage.writeBytes("made.txt", Data("by the factory".utf8))
        let read = try await remote.storage.readBytes("made.txt")
        XCTAssertEqual(read, Data("by the factory".utf8))
    }

    // MARK: Helpers

    /// A folder of its own on the shared server, and a scratch folder for local files.
    struct Remote {
        let server: RcloneServer
        /// The folder rclone serves.
        let served: String
        /// This test's folder name under it.
        let folder: String
        let scratchDir: TempDir
        var scratch: String { scratchDir.path }

        func endpoint(folder: [String]? = nil, port: Int? = nil) -> WebDAVEndpoint {
            WebDAVEndpoint(secure: false, host: "127.0.0.1", port: port ?? server.port, user: server.user,
                           folder: folder ?? [self.folder])
        }

        func makeStorage(_ password: String) -> WebDAVStorage {
            WebDAVStorage(endpoint: endpoint(), password: password)
        }

        var storage: WebDAVStorage { makeStorage(server.secret) }

        func storage(through proxy: FaultProxy, settings: HTTPSettings = HTTPSettings()) -> WebDAVStorage {
            var settings = settings
            settings.backoff = 0.05
            return WebDAVStorage(endpoint: endpoint(port: proxy.port), password: server.secret, settings: settings)
        }

        func writeOnDisk(_ relative: String, _ data: Data) throws {
            let path = served + "/" + folder + "/" + relative
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: path))
            Thread.sleep(forTimeInterval: RcloneServer.directoryCacheTime * 2)
        }
    }

    private func makeRemote() throws -> Remote {
        if Self.shared == nil {
            let served = try TempDir("webdav-served")
            Self.shared = (try RcloneServer(.webdav, root: served.path), served)
        }
        guard let shared = Self.shared else { throw RcloneServer.ServerError(message: "no server") }
        let folder = "t-" + RcloneServer.randomToken(10)
        try shared.served.makeFolder(folder)
        Thread.sleep(forTimeInterval: RcloneServer.directoryCacheTime * 2)
        let scratch = try TempDir("webdav-scratch")
        addTeardownBlock { scratch.cleanup() }
        return Remote(server: shared.server, served: shared.served.path, folder: folder, scratchDir: scratch)
    }

    /// A write that breaks midway for real: the proxy forwards the PUT to the server and cuts
    /// it after 100 KiB of a 1 MiB body, every time it is tried.
    private func failMidway(_ remote: Remote, _ proxy: FaultProxy) -> StorageContract.FailMidway {
        let storage = remote.storage(through: proxy)
        return { path in
            proxy.add("PUT", times: 10, .cutRequest(afterBytes: 100 << 10))
            let source = remote.scratch + "/one-mebibyte.bin"
            try StorageContract.randomData(count: 1 << 20).write(to: URL(fileURLWithPath: source))
            _ = try await storage.writeFile(path, from: source)
        }
    }

    /// Fails if a temporary file is left on the server's disk, where list() would not show it.
    private func assertNoTemporaryFiles(_ remote: Remote, file: StaticString = #filePath, line: UInt = #line) throws {
        let root = remote.served + "/" + remote.folder
        let leftovers = (FileManager.default.enumerator(atPath: root)?.compactMap { $0 as? String } ?? [])
            .filter { ($0 as NSString).lastPathComponent.hasPrefix(WebDAVStorage.temporaryFilePrefix) }
        XCTAssertEqual(leftovers, [], "temporary files left on the server", file: file, line: line)
    }
}

/// The sync engine over `storage`: a first run uploads every file and the marker, a second
/// run with nothing changed uploads nothing (the ids a write returns match the listing's), a
/// third uploads the changed file and deletes the removed one; every file downloads intact.
func engineRoundTrip(_ storage: any RemoteStorage, scratch: String, file: StaticString = #filePath,
                     line: UInt = #line) async throws {
    let tree = scratch + "/tree"
    var contents: [String: Data] = [:]
    for index in 0..<24 {
        let path = "folder\(index % 4)/sub \(index % 3)/file \(index).bin"
        contents[path] = StorageContract.randomData(count: index == 0 ? 0 : index * 3000 + (index == 5 ? 2 << 20 : 0))
    }
    func snapshot() throws -> SyncSnapshot {
        let entries = try contents.keys.sorted().map { path -> SyncEntry in
            let local = tree + "/" + path
            try FileManager.default.createDirectory(atPath: (local as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            if !FileManager.default.fileExists(atPath: local) { try contents[path]?.write(to: URL(fileURLWithPath: local)) }
            return SyncEntry(path: path, size: Int64(contents[path]?.count ?? 0),
                             hash: try SHA256Hasher.hexOfFile(atPath: local), source: .file(local))
        }
        return SyncSnapshot(entries: entries, marker: Data(contents.keys.sorted().joined(separator: "\n").utf8))
    }
    let engine = SyncEngine(storage: storage, state: try StateStore(path: scratch + "/state.db"))

    guard case .completed(let first) = try await engine.sync(try snapshot()) else {
        return XCTFail("the first run did not complete", file: file, line: line)
    }
    XCTAssertEqual(first.uploaded.count, contents.count + 1, "every file and the marker", file: file, line: line)
    guard case .completed(let second) = try await engine.sync(try snapshot()) else {
        return XCTFail("the second run did not complete", file: file, line: line)
    }
    XCTAssertEqual(second.uploaded, [], "nothing changed, yet files were uploaded again", file: file, line: line)

    let removed = "folder1/sub 1/file 1.bin", changed = "folder2/sub 2/file 2.bin"
    contents[removed] = nil
    contents[changed] = Data("changed".utf8)
    try FileManager.default.removeItem(atPath: tree + "/" + changed)
    guard case .completed(let third) = try await engine.sync(try snapshot()) else {
        return XCTFail("the third run did not complete", file: file, line: line)
    }
    XCTAssertEqual(third.uploaded, [changed, SyncEngine.defaultMarkerPath], file: file, line: line)
    XCTAssertEqual(third.deleted, [removed], file: file, line: line)

    let listed = try await storage.list()
    XCTAssertEqual(Set(listed.map(\.path)), Set(contents.keys).union([SyncEngine.defaultMarkerPath]), file: file, line: line)
    for (path, data) in contents {
        let local = scratch + "/restored/" + path
        try await storage.downloadFile(path, toPath: local)
        XCTAssertTrue(try Data(contentsOf: URL(fileURLWithPath: local)) == data, "\(path) differs", file: file, line: line)
    }
}

/// Names no server keeps as the codec spells them, every kind the test can make: not UTF-8
/// (Latin-1 "café", 0xFF 0xFE, a folder named by an invalid byte, a truncated sequence), every
/// control character and DEL, the escape character alone, doubled and spelling an escape it is
/// not, code points of the wire's private-use block, and the characters `rclone serve` shows
/// for controls (U+2409) or uses for its own encodings (fullwidth "／", "．"). Plus 200 seeded
/// random byte names. The engine uploads them from local files with those raw names; then a
/// second server, started cold over the same folder (its cache empty, as after a restart),
/// lists them: a sync through it uploads and deletes nothing, and each file downloads into a
/// file whose raw name and bytes are the original's.
func awkwardNamesRoundTrip(_ storage: any RemoteStorage, scratch: String,
                           cold: () async throws -> any RemoteStorage,
                           file: StaticString = #filePath, line: UInt = #line) async throws {
    let escape = "\u{201B}"
    var rawNames: [[UInt8]] = [
        Array("quote \(escape) inside".utf8),
        Array("lit\(escape)FF and \(escape)\(escape)".utf8),
        Array("in \(escape) folder/file \(escape)41".utf8),
        Array("lone\(escape)".utf8),
        Array("caf".utf8) + [0xE9] + Array(".txt".utf8),
        [0xFF, 0xFE],
        Array("d".utf8) + [0xFF] + Array("/in folder".utf8),
        Array("cut ".utf8) + [0xE2, 0x80],
        Array("ctl\u{1B}[2J".utf8),
        Array("block \u{EF00} \u{EF41} \u{EFFF}".utf8),
        Array("block then byte \u{EF00}".utf8) + [0xFF],
        Array("pictures \u{2409}\u{2400}\u{2421} fullwidth \u{FF0F}\u{FF0E}".utf8),
        Array("c1 \u{85}\u{9B} bidi \u{202E}".utf8),
    ]
    for byte in UInt8(1)...0x1F { rawNames.append(Array("control ".utf8) + [byte] + Array(" in".utf8)) }
    rawNames.append(Array("del ".utf8) + [0x7F])
    var generator = SeededGenerator(seed: 0x5EED)
    var randomNames = Set<[UInt8]>()
    while randomNames.count < 200 {
        let name = (0..<Int.random(in: 1...10, using: &generator)).map { _ in
            UInt8.random(in: 1...0xFF, using: &generator)
        }.filter { $0 != UInt8(ascii: "/") }
        if name.isEmpty || name == Array(".".utf8) || name == Array("..".utf8) { continue }
        randomNames.insert(Array("r ".utf8) + name)
    }
    rawNames += randomNames.sorted { $0.lexicographicallyPrecedes($1) }
    func rawOpen(_ path: String, _ flags: Int32) -> Int32 { FileName.withCString(path) { open($0, flags, 0o644) } }
    let tree = scratch + "/tree", restored = scratch + "/restored"
    var entries: [SyncEntry] = []
    var contents: [String: Data] = [:]
    for (index, raw) in rawNames.enumerated() {
        let path = FileName.string(fromBytes: raw)
        let data = Data("content \(index) of \(path)".utf8)
        contents[path] = data
        for root in [tree, restored] {
            let parts = path.split(separator: "/").map(String.init)
            var folder = root
            for part in [""] + parts.dropLast() {
                folder += part.isEmpty ? "" : "/" + part
                _ = FileName.withCString(folder) { mkdir($0, 0o755) }
            }
        }
        let fd = rawOpen(tree + "/" + path, O_WRONLY | O_CREAT | O_TRUNC)
        XCTAssertGreaterThanOrEqual(fd, 0, "\(path)", file: file, line: line)
        data.withUnsafeBytes { _ = write(fd, $0.baseAddress, $0.count) }
        close(fd)
        entries.append(SyncEntry(path: path, size: Int64(data.count), hash: try SHA256Hasher.hexOfFile(atPath: tree + "/" + path),
                                 source: .file(tree + "/" + path)))
    }
    let snapshot = SyncSnapshot(entries: entries, marker: Data("names".utf8))
    let state = scratch + "/names-state.db"
    guard case .completed(let first) = try await SyncEngine(storage: storage, state: try StateStore(path: state)).sync(snapshot) else {
        return XCTFail("the first run did not complete", file: file, line: line)
    }
    XCTAssertEqual(first.sourceFailures.map(\.path), [], "every name is carried", file: file, line: line)
    XCTAssertEqual(Set(first.uploaded), Set(contents.keys).union([SyncEngine.defaultMarkerPath]), file: file, line: line)

    // The same server once its directory cache has expired (it reads the names from its disk
    // again): a sync uploads and deletes nothing. A new server's URL is another remote, so
    // the sync runs on this one; the new one lists and downloads.
    try await Task.sleep(nanoseconds: UInt64(RcloneServer.directoryCacheTime * 5 * 1e9))
    guard case .completed(let second) = try await SyncEngine(storage: storage, state: try StateStore(path: state)).sync(snapshot) else {
        return XCTFail("the second run did not complete", file: file, line: line)
    }
    XCTAssertEqual(second.uploaded, [], "the listing did not give the names back as sent", file: file, line: line)
    XCTAssertEqual(second.deleted, [], "a sync after a cold listing deleted files it had uploaded", file: file, line: line)
    let coldStorage = try await cold()
    let listed = try await coldStorage.list()
    XCTAssertEqual(Set(listed.map(\.path)), Set(contents.keys).union([SyncEngine.defaultMarkerPath]),
                   "a cold listing gives every name back as sent", file: file, line: line)
    for (path, data) in contents {
        let fd = rawOpen(restored + "/" + path, O_RDWR | O_CREAT | O_EXCL)
        XCTAssertGreaterThanOrEqual(fd, 0, file: file, line: line)
        defer { close(fd) }
        try await coldStorage.downloadFile(path, into: fd, expectedSize: Int64(data.count), onBytes: { _ in })
        var back = [UInt8](repeating: 0, count: data.count + 1)
        XCTAssertEqual(pread(fd, &back, back.count, 0), data.count, "\(path): size on disk", file: file, line: line)
        XCTAssertEqual(Data(back.prefix(data.count)), data, "\(path): bytes on disk", file: file, line: line)
    }
    // The names on disk are the original bytes, not their escaped spelling.
    var found = Set<[UInt8]>()
    if let dir = opendir(restored) {
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
            if name != Array(".".utf8) && name != Array("..".utf8) { found.insert(name) }
        }
        closedir(dir)
    }
    let tops = Set(rawNames.map { Array($0.prefix { $0 != UInt8(ascii: "/") }) })
    XCTAssertEqual(found, tops, file: file, line: line)
}

/// A file another tool left on the server under a spelling this program never writes (a code
/// point of the wire's block standing for no byte): the listing flags it, a sync neither
/// deletes it nor takes it for the local file whose name it resembles (it uploads that one
/// under its own spelling), and a second sync does nothing. (A lone `‛` on rclone's disk is
/// listed as the pair, a spelling of `‛` itself: a plain file, deleted like any other.)
func foreignSpellingsAreLeftAlone(
    _ storage: any RemoteStorage, scratch: String, writeOnDisk: (String, Data) throws -> Void,
    readOnDisk: (String) throws -> Data, file: StaticString = #filePath, line: UInt = #line
) async throws {
    let lookalike = "pua \u{EF41}.txt"
    try writeOnDisk(lookalike, Data("them".utf8))  // the size of the local file
    try await Task.sleep(nanoseconds: UInt64(RcloneServer.directoryCacheTime * 3 * 1e9))
    let listed = try await storage.list()
    XCTAssertEqual(listed.map(\.path), [lookalike], file: file, line: line)
    XCTAssertEqual(listed.map(\.foreignSpelling), [true], file: file, line: line)

    let local = scratch + "/lookalike-source"
    try Data("mine".utf8).write(to: URL(fileURLWithPath: local))
    let snapshot = SyncSnapshot(entries: [SyncEntry(path: lookalike, size: 4, hash: try SHA256Hasher.hexOfFile(atPath: local),
                                                    source: .file(local))], marker: Data("m".utf8))
    let engine = SyncEngine(storage: storage, state: try StateStore(path: scratch + "/foreign-state.db"))
    guard case .completed(let first) = try await engine.sync(snapshot) else { return XCTFail("first run", file: file, line: line) }
    XCTAssertEqual(Set(first.uploaded), [lookalike, SyncEngine.defaultMarkerPath], file: file, line: line)
    XCTAssertEqual(first.deleted, [], "a sync deleted a file it cannot name", file: file, line: line)
    XCTAssertEqual(try readOnDisk(lookalike), Data("them".utf8), file: file, line: line)
    XCTAssertEqual(try readOnDisk("pua \u{EF00}\u{EF41}.txt"), Data("mine".utf8), file: file, line: line)
    let readBack = try await storage.readBytes(lookalike)
    XCTAssertEqual(readBack, Data("mine".utf8), file: file, line: line)
    try await Task.sleep(nanoseconds: UInt64(RcloneServer.directoryCacheTime * 3 * 1e9))
    guard case .completed(let second) = try await engine.sync(snapshot) else { return XCTFail("second run", file: file, line: line) }
    XCTAssertEqual(second.uploaded, [], file: file, line: line)
    XCTAssertEqual(second.deleted, [], file: file, line: line)
}

/// A thread-safe call counter for credential callbacks.
final class Counter: @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    private let lock = NSLock()
    private var count = 0

    func increment() { lock.lock(); count += 1; lock.unlock() }

    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

/// A CA and a server certificate for 127.0.0.1 it signed, made with the openssl tool; returns
/// the CA file, the server certificate and its key.
func makeCertificates(in dir: TempDir) throws -> (ca: String, certificate: String, key: String) {
    let ca = dir.path("ca.pem"), caKey = dir.path("ca.key")
    let key = dir.path("server.key"), request = dir.path("server.csr"), certificate = dir.path("server.pem")
    let extensions = try dir.write("server.ext", Data("subjectAltName=IP:127.0.0.1\n".utf8))
    for arguments in [
        ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", caKey, "-out", ca, "-days", "2",
         "-subj", "/CN=backup test CA"],
        ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", certificate,
         "-days", "2", "-extfile", extensions],
    ] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            XCTFail("openssl \(arguments.joined(separator: " ")) failed; run .ci/run to install openssl")
            throw RcloneServer.ServerError(message: "openssl failed")
        }
    }
    return (ca, certificate, key)
}
