// `backup` end to end against real WebDAV and S3 servers (`rclone serve`, started per test
// on loopback): init, first sync, a change, restore to a new folder; credentials come from
// the environment, and a missing one makes the remote unavailable without touching it; a
// restore of many files with eight downloads in flight is byte-identical.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class RemoteEndToEndTests: XCTestCase {
    private func roundTrip(_ f: CLIFixture, remote: String, secret: String) throws {
        try f.write("docs/report.txt", "quarterly")
        try f.write("photos/日本 beach.jpg", String(repeating: "jpeg", count: 5000))
        try f.write("notes.md", "# notes")
        // Names servers rewrite unless they are spelt for the wire: not UTF-8, controls, `‛`.
        let awkward: [[UInt8]] = [
            Array("caf".utf8) + [0xE9] + Array(".txt".utf8), Array("tab\tand esc\u{1B}".utf8),
            Array("lone \u{201B}FF".utf8), Array("pua \u{EF41}".utf8), [0xFF, 0xFE] + Array("/inside".utf8),
        ]
        for (index, raw) in awkward.enumerated() {
            let path = f.source + "/" + FileName.string(fromBytes: raw)
            if let slash = raw.firstIndex(of: UInt8(ascii: "/")) {
                _ = FileName.withCString(f.source + "/" + FileName.string(fromBytes: raw[..<slash])) { mkdir($0, 0o755) }
            }
            let fd = FileName.withCString(path) { open($0, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
            XCTAssertGreaterThanOrEqual(fd, 0, path)
            XCTAssertEqual(write(fd, "awkward \(index)", 9), 9)
            close(fd)
        }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", remote, "--group", "docs=docs/,required").status, 0)

        let first = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(first.status, 0, first.stdout + first.stderr)
        XCTAssertEqual(first.result?["uploaded"] as? Int, 3 + awkward.count)
        try f.write("notes.md", "# notes, changed")
        // Once the server's directory cache has expired it lists the names from its disk.
        Thread.sleep(forTimeInterval: RcloneServer.directoryCacheTime * 5)
        let second = try f.run("sync", "--json")
        XCTAssertEqual(second.result?["uploaded"] as? Int, 1, second.stdout + second.stderr)
        XCTAssertEqual(second.result?["deleted"] as? Int, 0, second.stdout + second.stderr)

        let target = f.dir.path("restored")
        let restore = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(restore.status, 0, restore.stdout + restore.stderr)
        XCTAssertEqual(try f.tree(target), try f.tree(f.source))
        for output in [first, second, restore] {
            XCTAssertFalse((output.stdout + output.stderr).contains(secret), "a credential was printed")
        }
        let config = try String(contentsOfFile: f.dir.path("config/backup/config"), encoding: .utf8)
        XCTAssertFalse(config.contains(secret), "a credential was written to the config")
    }

    func testWebDAVProfileEndToEnd() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
        f.extraEnvironment = ["BACKUP_PASSWORD": server.secret]
        try roundTrip(f, remote: "webdav://\(server.user)@127.0.0.1:\(server.port)/backup", secret: server.secret)
    }

    func testS3ProfileEndToEnd() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.s3, root: try f.dir.makeFolder("s3-root"))
        addTeardownBlock { server.stop() }
        try FileManager.default.createDirectory(atPath: server.root + "/bucket", withIntermediateDirectories: true)
        f.extraEnvironment = [
            "AWS_ACCESS_KEY_ID": server.user, "AWS_SECRET_ACCESS_KEY": server.secret,
            "AWS_ENDPOINT_URL": server.address, "AWS_REGION": "us-east-1",
        ]
        try roundTrip(f, remote: "s3://bucket/laptop", secret: server.secret)
    }

    /// A restore of many files with up to eight downloads in flight (`transfers = 8`):
    /// byte-identical, every file counted once in the progress, nothing left in staging.
    private func parallelRestore(_ f: CLIFixture, remote: String) throws {
        let files = (0..<120).map { ("d\($0 % 6)/e\($0 % 4)/f\($0).txt", String(repeating: "\($0)-", count: 1 + $0 * 37)) }
        for (path, text) in files { try f.write(path, text) }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", remote, "--group", "d0=d0/,required").status, 0)
        let configPath = f.dir.path("config/backup/config")
        try (String(contentsOfFile: configPath, encoding: .utf8) + "transfers = 8\n").write(toFile: configPath, atomically: true, encoding: .utf8)
        let sync = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(sync.status, 0, sync.stdout + sync.stderr)

        let target = f.dir.path("restored")
        let restore = try f.run("restore", "--to", target, "--json")
        XCTAssertEqual(restore.status, 0, restore.stdout + restore.stderr)
        XCTAssertEqual(try f.tree(target), try f.tree(f.source))
        let done = restore.jsonLines.filter { $0["event"] as? String == "progress" }.compactMap { $0["done"] as? Int }
        XCTAssertEqual(done, done.sorted(), "files placed only ever grow")
        XCTAssertEqual(done.last, files.count)
    }

    func testWebDAVRestoreWithTransfersEightIsByteIdentical() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        f.extraEnvironment = ["BACKUP_PASSWORD": server.secret]
        try parallelRestore(f, remote: "webdav://\(server.user)@127.0.0.1:\(server.port)/")
    }

    func testS3RestoreWithTransfersEightIsByteIdentical() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.s3, root: try f.dir.makeFolder("s3-root"))
        addTeardownBlock { server.stop() }
        try FileManager.default.createDirectory(atPath: server.root + "/bucket", withIntermediateDirectories: true)
        f.extraEnvironment = [
            "AWS_ACCESS_KEY_ID": server.user, "AWS_SECRET_ACCESS_KEY": server.secret,
            "AWS_ENDPOINT_URL": server.address, "AWS_REGION": "us-east-1",
        ]
        try parallelRestore(f, remote: "s3://bucket/many")
    }

    func testMissingCredentialIsNoAccountAndTouchesNothing() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        try f.write("a.txt", "a")
        let remote = "webdav://\(server.user)@127.0.0.1:\(server.port)/"
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", remote).status, 0)
        let result = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(result.status, 3)
        XCTAssertEqual(result.result?["reason"] as? String, "noAccount")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: server.root), [])
        // Known before the scan: the source is not read for a run that cannot list or write.
        XCTAssertFalse(result.jsonLines.contains { $0["event"] as? String == "scanned" }, result.stdout)
        XCTAssertEqual(result.result?["files"] as? Int, 0, result.stdout)
    }

    func testWrongPasswordFailsFastAsAuthRevokedWithoutPrintingIt() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        try f.write("a.txt", "a")
        let wrong = "wrong-" + server.secret
        f.extraEnvironment = ["BACKUP_PASSWORD": wrong]
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", "webdav://\(server.user)@127.0.0.1:\(server.port)/").status, 0)
        let started = Date()
        let result = try f.run("sync", "--yes", "--json")
        XCTAssertLessThan(Date().timeIntervalSince(started), 30, "a wrong password must not hang")
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.result?["error"] as? String, "authRevoked")
        XCTAssertFalse((result.stdout + result.stderr).contains(wrong))
    }

    /// A listing that fails (here a refused password) stops the scan that runs beside it: the
    /// run cannot go on, so the source is not read to its end first. Eight sparse files of
    /// 1 GiB (no disk used) take seconds to hash; the 401 comes back in milliseconds, and the
    /// hashers stop before their next file.
    func testARefusedListingStopsTheScanBeforeItReadsTheWholeSource() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("webdav-root"))
        addTeardownBlock { server.stop() }
        let files = 8
        for index in 0..<files {
            let path = try f.write("big-\(index).bin", "")
            XCTAssertEqual(truncate(path, 1 << 30), 0, "a sparse file of 1 GiB")
        }
        f.extraEnvironment = ["BACKUP_PASSWORD": "wrong-" + server.secret]
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", "webdav://\(server.user)@127.0.0.1:\(server.port)/").status, 0)
        let result = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(result.status, 1, result.stdout + result.stderr)
        XCTAssertEqual(result.result?["error"] as? String, "authRevoked", result.stdout)
        let hashed = try XCTUnwrap(result.result?["hashed"] as? Int, result.stdout)
        XCTAssertLessThan(hashed, files, "the scan read every file of a run that had already failed: \(result.stdout)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: server.root), [], "nothing was written")
    }
}
