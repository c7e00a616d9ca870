// SFTPStorage against a real OpenSSH sshd on 127.0.0.1 (its own host key and authorized_keys):
// the storage contract suite, key, agent and password authentication, host keys (unknown,
// accepted, changed), metadata on the remote files, and every SFTP row of the error table.

import BackupEngine
@testable import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class SFTPStorageTests: XCTestCase {
    // One server for the class (each test gets its own folder): nonisolated(unsafe) because
    // XCTest runs a class's tests one at a time, and only class tearDown clears it.
    nonisolated(unsafe) private static var shared: (server: SSHServer, folder: TempDir)?

    override class func tearDown() {
        shared?.server.stop()
        shared?.folder.cleanup()
        shared = nil
        super.tearDown()
    }

    private var server: SSHServer {
        get throws {
            if let shared = Self.shared { return shared.server }
            let folder = try TempDir("backup-sshd")
            let server = try SSHServer(folder: folder.path)
            Self.shared = (server, folder)
            return server
        }
    }

    private struct Remote {
        let storage: SFTPStorage
        /// The remote folder on the server's disk.
        let root: String
        let scratch: String
        let knownHosts: String
        let make: @Sendable (SSHCredentials, KnownHosts) -> SFTPStorage
    }

    /// A fresh remote folder for this test, reached as root with the client key.
    private func makeRemote(connections: Int = 4) throws -> Remote {
        let server = try server
        let dir = try TempDir("backup-sftp")
        addTeardownBlock { dir.cleanup() }
        let root = try dir.makeFolder("remote")
        let scratch = try dir.makeFolder("scratch")
        let knownHosts = dir.path("known_hosts")
        try server.knownHostsLine.write(toFile: knownHosts, atomically: true, encoding: .utf8)
        let endpoint = SFTPEndpoint(host: "127.0.0.1", port: server.port, user: "root",
                                    folder: root.split(separator: "/").map(String.init))
        let make: @Sendable (SSHCredentials, KnownHosts) -> SFTPStorage = { credentials, hosts in
            SFTPStorage(endpoint: endpoint, credentials: credentials, knownHosts: hosts, connections: connections)
        }
        let storage = make(SSHCredentials(user: "root", identityFile: server.clientKey), KnownHosts(ownFile: knownHosts))
        return Remote(storage: storage, root: root, scratch: scratch, knownHosts: knownHosts, make: make)
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
        let server = try server
        try await StorageContract.identityKeyIsStable {
            remote.make(SSHCredentials(user: "root", identityFile: server.clientKey), KnownHosts(ownFile: remote.knownHosts))
        }
    }

    func testContractFailedWriteLeavesNothing() async throws {
        let remote = try makeRemote()
        // The temporary of a write whose connection was dropped stays on the server, unlisted,
        // until a later sync's sweep (testStaleTemporariesAreSwept).
        try await StorageContract.failedWriteLeavesNothing(remote.storage, failMidway: try failMidway(remote))
    }

    func testContractFailedOverwriteKeepsTheOldFile() async throws {
        let remote = try makeRemote()
        try await StorageContract.failedOverwriteKeepsTheOldFile(remote.storage, failMidway: try failMidway(remote))
    }

    // MARK: What SFTP adds

    /// A real sshd whose SFTP server is Tests/Fixtures/hostile_sftp_server.py: it lists names
    /// no folder can hold, and under /deep a tree that never ends.
    func testAHostileServersImpossibleNamesAreDroppedAndAnEndlessTreeIsRefused() async throws {
        let dir = try TempDir("backup-sshd-hostile")
        addTeardownBlock { dir.cleanup() }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/hostile_sftp_server.py").path
        let server = try SSHServer(folder: dir.path, passwords: false, subsystem: "/usr/bin/python3 \(script)")
        defer { server.stop() }
        let knownHosts = dir.path("known_hosts")
        try server.knownHostsLine.write(toFile: knownHosts, atomically: true, encoding: .utf8)
        func storage(_ folder: String) -> SFTPStorage {
            SFTPStorage(endpoint: SFTPEndpoint(host: "127.0.0.1", port: server.port, user: "root", folder: [folder]),
                        credentials: SSHCredentials(user: "root", identityFile: server.clientKey), knownHosts: KnownHosts(ownFile: knownHosts),
                        connections: 1)
        }
        let listed = try await storage("names").list().map(\.path)
        XCTAssertEqual(listed, ["good.txt"], "a name with a / or a NUL, or an empty one, reached the listing")
        do {
            _ = try await storage("deep").list()
            XCTFail("an endless tree was listed")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .transport)
            XCTAssertTrue(error.message.contains("deeper than 4096 bytes"), error.message)
        }
    }

    func testRawByteNamesRoundTripAsOnTheFolderRemote() async throws {
        let remote = try makeRemote()
        let name = FileName.string(fromBytes: Array("raw-".utf8) + [0xff, 0xfe] + Array(".bin".utf8))
        _ = try await remote.storage.writeBytes("dir/" + name, Data("x".utf8))
        let awaited1 = try await remote.storage.list().map(\.path)
        XCTAssertEqual(awaited1, ["dir/" + name])
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: remote.root + "/dir")
        XCTAssertEqual(onDisk.count, 1)
        var found = false
        if let dir = opendir(remote.root + "/dir") {
            while let entry = readdir(dir) {
                let bytes = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix(while: { $0 != 0 })) }
                if bytes == Array("raw-".utf8) + [0xff, 0xfe] + Array(".bin".utf8) { found = true }
            }
            closedir(dir)
        }
        XCTAssertTrue(found, "the name on the server is not the raw bytes")
    }

    func testAnUploadCarriesItsModeAndTimeOntoTheServer() async throws {
        let remote = try makeRemote()
        let source = remote.scratch + "/script.sh"
        try Data("#!/bin/sh\n".utf8).write(to: URL(fileURLWithPath: source))
        chmod(source, 0o751)
        var times = [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)]
        utimensat(AT_FDCWD, source, &times, 0)
        _ = try await remote.storage.writeFile("bin/script.sh", from: source)
        var status = stat()
        XCTAssertEqual(stat(remote.root + "/bin/script.sh", &status), 0)
        XCTAssertEqual(status.st_mode & 0o7777, 0o751)
        XCTAssertEqual(status.st_mtim.tv_sec, 1_600_000_000)

        let changed = EntryMetadata(mode: 0o640, mtimeNanoseconds: 1_500_000_000_000_000_000, uid: 0, gid: 0)
        let listed = try await remote.storage.applyMetadata("bin/script.sh", changed)
        XCTAssertEqual(stat(remote.root + "/bin/script.sh", &status), 0)
        XCTAssertEqual(status.st_mode & 0o7777, 0o640)
        XCTAssertEqual(status.st_mtim.tv_sec, 1_500_000_000)
        let awaited2 = try await remote.storage.list().first?.remoteId
        XCTAssertEqual(listed?.remoteId, awaited2)
    }

    func testFoldersAndLinksAreMadeOnTheServerAndRemovedWhenGone() async throws {
        let remote = try makeRemote()
        let folder = TreeEntry(path: "docs", kind: .folder, metadata: EntryMetadata(mode: 0o750, mtimeNanoseconds: 1_400_000_000_000_000_000, uid: 0, gid: 0))
        let link = TreeEntry(path: "docs/latest", kind: .symlink(target: "../notes.txt"), metadata: EntryMetadata(mode: 0o777, mtimeNanoseconds: 0, uid: 0, gid: 0))
        let notes = await remote.storage.makeTreeEntries([folder, link])
        XCTAssertEqual(notes, [])
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: remote.root + "/docs/latest"), "../notes.txt")
        var status = stat()
        XCTAssertEqual(stat(remote.root + "/docs", &status), 0)
        XCTAssertEqual(status.st_mode & 0o7777, 0o750)
        XCTAssertEqual(status.st_mtim.tv_sec, 1_400_000_000)
        let awaited3 = try await remote.storage.list().count
        XCTAssertEqual(awaited3, 0, "a link is not a file of the listing")

        let retargeted = TreeEntry(path: "docs/latest", kind: .symlink(target: "other.txt"), metadata: link.metadata)
        _ = await remote.storage.makeTreeEntries([retargeted])
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: remote.root + "/docs/latest"), "other.txt")

        await remote.storage.removeTreeEntries([folder, retargeted])
        XCTAssertFalse(FileManager.default.fileExists(atPath: remote.root + "/docs"))
    }

    func testTheMarkerIsWrittenThroughATemporaryAndPosixRename() async throws {
        let remote = try makeRemote()
        _ = try await remote.storage.writeBytes("marker", Data("one".utf8))
        var before = stat()
        XCTAssertEqual(stat(remote.root + "/marker", &before), 0)
        _ = try await remote.storage.writeBytes("marker", Data("two, longer".utf8))
        var after = stat()
        XCTAssertEqual(stat(remote.root + "/marker", &after), 0)
        XCTAssertNotEqual(before.st_ino, after.st_ino, "the file was rewritten in place, not replaced by a rename")
        XCTAssertEqual(try String(contentsOfFile: remote.root + "/marker", encoding: .utf8), "two, longer")
        try assertNoTemporaryFiles(remote)
    }

    func testStaleTemporariesAreSwept() async throws {
        let remote = try makeRemote()
        try FileManager.default.createDirectory(atPath: remote.root + "/a", withIntermediateDirectories: true)
        let stale = remote.root + "/a/" + SFTPStorage.temporaryFilePrefix + "dead"
        let fresh = remote.root + "/a/" + SFTPStorage.temporaryFilePrefix + "live"
        try Data("x".utf8).write(to: URL(fileURLWithPath: stale))
        try Data("y".utf8).write(to: URL(fileURLWithPath: fresh))
        var old = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
        utimensat(AT_FDCWD, stale, &old, 0)
        let awaited4 = try await remote.storage.list().count
        XCTAssertEqual(awaited4, 0, "temporaries are listed")
        let awaited5 = try await remote.storage.sweepTemporaries()
        XCTAssertEqual(awaited5, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: stale))
        XCTAssertTrue(FileManager.default.fileExists(atPath: fresh), "a live writer's temporary was swept")
    }

    func testManyConcurrentTransfersShareTheSessions() async throws {
        let remote = try makeRemote(connections: 3)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask { _ = try await remote.storage.writeBytes("many/\(index).txt", Data("file \(index)".utf8)) }
            }
            try await group.waitForAll()
        }
        let listed = try await remote.storage.list()
        XCTAssertEqual(listed.count, 40)
        let awaited6 = try await remote.storage.readBytes("many/17.txt")
        XCTAssertEqual(awaited6, Data("file 17".utf8))
    }

    // MARK: Authentication

    func testAgentAuthentication() async throws {
        let remote = try makeRemote()
        let server = try server
        let dir = try TempDir("backup-agent")
        defer { dir.cleanup() }
        let agent = try SSHAgent(folder: dir.path, key: server.clientKey)
        defer { agent.stop() }
        let storage = remote.make(SSHCredentials(user: "root", agentSocket: agent.socket), KnownHosts(ownFile: remote.knownHosts))
        _ = try await storage.writeBytes("by-agent.txt", Data("ok".utf8))
        let awaited7 = try await storage.readBytes("by-agent.txt")
        XCTAssertEqual(awaited7, Data("ok".utf8))
    }

    func testAKeyFileWithItsPassphraseAuthenticatesAndAWrongPassphraseIsRefusedUnprinted() async throws {
        let remote = try makeRemote()
        let server = try server
        let good = remote.make(SSHCredentials(user: "root", identityFile: server.protectedKey, secret: server.keyPassphrase),
                               KnownHosts(ownFile: remote.knownHosts))
        _ = try await good.writeBytes("by-key.txt", Data("ok".utf8))
        let wrong = "not-the-passphrase-\(UUID().uuidString)"
        let bad = remote.make(SSHCredentials(user: "root", identityFile: server.protectedKey, secret: wrong),
                              KnownHosts(ownFile: remote.knownHosts))
        do {
            _ = try await bad.list()
            XCTFail("a wrong passphrase was accepted")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .authRevoked)
            XCTAssertFalse(error.message.contains(wrong))
            XCTAssertTrue(error.message.contains(server.protectedKey), error.message)
        }
    }

    func testPasswordAuthenticationOfAThrowawayUserAndAWrongPasswordFailsFastUnprinted() async throws {
        let server = try server
        let dir = try TempDir("backup-sftp-user")
        defer { dir.cleanup() }
        chmod(dir.path, 0o755)
        let home = try dir.makeFolder("home")
        let user = try ThrowawayUser(home: home)
        defer { user.remove() }
        let knownHosts = dir.path("known_hosts")
        try server.knownHostsLine.write(toFile: knownHosts, atomically: true, encoding: .utf8)
        let endpoint = SFTPEndpoint(host: "127.0.0.1", port: server.port, user: user.name, folder: [], inHome: true)
        let storage = SFTPStorage(endpoint: endpoint, credentials: SSHCredentials(user: user.name, secret: user.password),
                                  knownHosts: KnownHosts(ownFile: knownHosts), connections: 2)
        _ = try await storage.writeBytes("mine.txt", Data("hello".utf8))
        var status = stat()
        XCTAssertEqual(stat(home + "/mine.txt", &status), 0, "the file is not in the user's login folder")

        let wrong = "wrong-\(UUID().uuidString)"
        let refused = SFTPStorage(endpoint: endpoint, credentials: SSHCredentials(user: user.name, secret: wrong),
                                  knownHosts: KnownHosts(ownFile: knownHosts), connections: 2)
        let started = Date()
        do {
            _ = try await refused.list()
            XCTFail("a wrong password was accepted")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .authRevoked)
            XCTAssertFalse(error.message.contains(wrong), "the password is in the message")
            XCTAssertTrue(error.message.contains(user.name), error.message)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 10, "a refused password is retried instead of failing at once")
    }

    // MARK: Host keys

    func testAnUnknownHostKeyIsRefusedWithItsFingerprintAndTheFlagThatAcceptsIt() async throws {
        let remote = try makeRemote()
        let server = try server
        let empty = remote.scratch + "/empty_known_hosts"
        let storage = remote.make(SSHCredentials(user: "root", identityFile: server.clientKey), KnownHosts(ownFile: empty))
        await StorageContract.assertThrows(.authRevoked, "an unknown host key") { _ = try await storage.list() }
        do {
            _ = try await storage.list()
        } catch let error as CloudError {
            XCTAssertTrue(error.message.contains(server.fingerprint), error.message)
            XCTAssertTrue(error.message.contains("--accept-host-key \(server.fingerprint)"), error.message)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: empty), "refusing a key wrote the known_hosts file")
    }

    func testAcceptingTheFingerprintWritesTheKeyToTheOwnFileAndAWrongOneIsRefused() async throws {
        let remote = try makeRemote()
        let server = try server
        let own = remote.scratch + "/config/backup/known_hosts"
        let wrong = remote.make(SSHCredentials(user: "root", identityFile: server.clientKey),
                                KnownHosts(ownFile: own, acceptFingerprint: "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"))
        await StorageContract.assertThrows(.authRevoked, "a fingerprint that is not the server's") { _ = try await wrong.list() }
        XCTAssertFalse(FileManager.default.fileExists(atPath: own))

        let accepting = remote.make(SSHCredentials(user: "root", identityFile: server.clientKey),
                                    KnownHosts(ownFile: own, acceptFingerprint: server.fingerprint))
        _ = try await accepting.list()
        var status = stat()
        XCTAssertEqual(stat(own, &status), 0)
        XCTAssertEqual(status.st_mode & 0o777, 0o600)
        XCTAssertTrue(try String(contentsOfFile: own, encoding: .utf8).hasPrefix("[127.0.0.1]:\(server.port) ssh-ed25519 "))
        // Later runs need no flag.
        let later = remote.make(SSHCredentials(user: "root", identityFile: server.clientKey), KnownHosts(ownFile: own))
        _ = try await later.list()
    }

    func testAChangedHostKeyIsRefusedLoudlyAndTheOldFingerprintDoesNotAcceptIt() async throws {
        let remote = try makeRemote()
        let server = try server
        let other = remote.scratch + "/other_host_key"
        try SSHServer.shell(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other])
        let otherKey = try String(contentsOfFile: other + ".pub", encoding: .utf8).split(separator: " ")
        let stale = remote.scratch + "/stale_known_hosts"
        try "[127.0.0.1]:\(server.port) \(otherKey[0]) \(otherKey[1])\n".write(toFile: stale, atomically: true, encoding: .utf8)
        let storage = remote.make(SSHCredentials(user: "root", identityFile: server.clientKey), KnownHosts(ownFile: stale))
        do {
            _ = try await storage.list()
            XCTFail("a changed host key was accepted")
        } catch let error as CloudError {
            XCTAssertEqual(error.kind, .authRevoked)
            XCTAssertTrue(error.message.contains("CHANGED"), error.message)
            XCTAssertTrue(error.message.contains(server.fingerprint), error.message)
        }
        let oldFingerprint = try SSHServer.shell(["ssh-keygen", "-l", "-E", "sha256", "-f", other + ".pub"]).split(separator: " ")[1]
        let withOld = remote.make(SSHCredentials(user: "root", identityFile: server.clientKey),
                                  KnownHosts(ownFile: stale, acceptFingerprint: String(oldFingerprint)))
        await StorageContract.assertThrows(.authRevoked, "the old fingerprint for a changed key") { _ = try await withOld.list() }
        // The new fingerprint, checked by the person, replaces the old line.
        let withNew = remote.make(SSHCredentials(user: "root", identityFile: server.clientKey),
                                  KnownHosts(ownFile: stale, acceptFingerprint: server.fingerprint))
        _ = try await withNew.list()
        let lines = try String(contentsOfFile: stale, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, 1)
        XCTAssertFalse(lines[0].contains(otherKey[1]))
    }

    // MARK: The error table

    func testConnectionRefusedIsOffline() async throws {
        let port = try RcloneServer.freePort()
        let storage = SFTPStorage(endpoint: SFTPEndpoint(host: "127.0.0.1", port: port, user: "root", folder: ["x"]),
                                  credentials: SSHCredentials(user: "root", secret: "x"), knownHosts: KnownHosts(), connections: 1)
        await StorageContract.assertThrows(.offline, "a refused connection") { _ = try await storage.list() }
    }

    func testAnUnknownHostNameIsOffline() async throws {
        let storage = SFTPStorage(endpoint: SFTPEndpoint(host: "no-such-host.invalid", port: 22, user: "root", folder: ["x"]),
                                  credentials: SSHCredentials(user: "root", secret: "x"), knownHosts: KnownHosts(), connections: 1)
        await StorageContract.assertThrows(.offline, "a name DNS does not know") { _ = try await storage.list() }
    }

    func testAMissingRootFolderIsNotAvailableAndNeverCreated() async throws {
        let remote = try makeRemote()
        let server = try server
        let missing = remote.root + "/not-mounted"
        let storage = SFTPStorage(endpoint: SFTPEndpoint(host: "127.0.0.1", port: server.port, user: "root",
                                                         folder: missing.split(separator: "/").map(String.init)),
                                  credentials: SSHCredentials(user: "root", identityFile: server.clientKey),
                                  knownHosts: KnownHosts(ownFile: remote.knownHosts), connections: 1)
        await StorageContract.assertThrows(.notAvailable, "listing a missing root") { _ = try await storage.list() }
        await StorageContract.assertThrows(.notAvailable, "writing into a missing root") { _ = try await storage.writeBytes("a", Data()) }
        XCTAssertFalse(FileManager.default.fileExists(atPath: missing), "the root was created")
    }

    func testAnAbsentPathIsNotFound() async throws {
        let remote = try makeRemote()
        await StorageContract.assertThrows(.notFound, "reading an absent file") { _ = try await remote.storage.readBytes("nope/none.txt") }
    }

    func testAWriteToAFullFilesystemIsStorageFullAndLeavesNothing() async throws {
        let remote = try makeRemote()
        let small = remote.root + "/small"
        try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
        try SSHServer.shell(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", small])
        defer { _ = try? SSHServer.shell(["umount", small], allowFailure: true) }
        let source = remote.scratch + "/big.bin"
        try StorageContract.randomData(count: 3 << 20).write(to: URL(fileURLWithPath: source))
        await StorageContract.assertThrows(.storageFull, "a write that fills the disk") {
            _ = try await remote.storage.writeFile("small/big.bin", from: source)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: small), [], "a failed write left a file behind")
    }

    func testOtherFailuresAreTransport() async throws {
        let remote = try makeRemote()
        try Data("a file".utf8).write(to: URL(fileURLWithPath: remote.root + "/blocker"))
        // A file where a folder must be made.
        await StorageContract.assertThrows(.transport, "a file in the way of a folder") {
            _ = try await remote.storage.writeBytes("blocker/inside.txt", Data("x".utf8))
        }
    }

    // MARK: Helpers

    /// A fresh storage whose upload of 8 MiB is cut by the server dropping every connection
    /// after the first MiB (every attempt, so a retry fails too).
    private func failMidway(_ remote: Remote) throws -> StorageContract.FailMidway {
        let server = try server
        let storage = remote.make(SSHCredentials(user: "root", identityFile: server.clientKey), KnownHosts(ownFile: remote.knownHosts))
        return { path in
            let source = remote.scratch + "/eight-mebibytes.bin"
            try StorageContract.randomData(count: 8 << 20).write(to: URL(fileURLWithPath: source))
            _ = try await storage.writeFile(path, from: source) { sent in
                if sent > 1 << 20 { server.dropConnections() }
            }
        }
    }

    private func assertNoTemporaryFiles(_ remote: Remote, file: StaticString = #filePath, line: UInt = #line) throws {
        let leftovers = (FileManager.default.enumerator(atPath: remote.root)?.compactMap { $0 as? String } ?? [])
            .filter { ($0 as NSString).lastPathComponent.hasPrefix(SFTPStorage.temporaryFilePrefix) }
        XCTAssertEqual(leftovers, [], "temporary files left on the server", file: file, line: line)
    }
}
