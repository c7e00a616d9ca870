// Versions end to end, with the real binary, on a folder remote and on real WebDAV and S3
// servers (`rclone serve`): three syncs that overwrite and delete, then `restore --as-of` each
// of the three times gives each tree back byte for byte, with its modes and times; retention
// prunes exactly what is older than keep_versions and nothing under a hold; a ransomware run is
// refused by the change guard and, allowed, keeps every old file; a lost answer to the version
// MOVE (or COPY) loses nothing and is reported.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class VersionsEndToEndTests: XCTestCase {
    private typealias Provider = ServedKind

    private func write(_ f: CLIFixture, _ path: String, _ text: String, mode: mode_t = 0o644, mtime: Int) throws {
        try f.write(path, text)
        let full = f.source + "/" + path
        chmod(full, mode)
        var times = [timespec(tv_sec: mtime, tv_nsec: 0), timespec(tv_sec: mtime, tv_nsec: 0)]
        XCTAssertEqual(utimensat(AT_FDCWD, full, &times, 0), 0)
    }

    /// The time now, as a person would copy it from `date -u`: whole seconds, UTC.
    private func now() -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date())
    }


    private func threeSyncsThenEachTimeRestores(_ provider: Provider) throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let (url, _, settle) = try servedRemote(provider, f)
        try write(f, "a.txt", "a, first", mtime: 1_700_000_000)
        try write(f, "b.txt", "b, only in the first tree", mode: 0o600, mtime: 1_700_000_100)
        try write(f, "docs/c.txt", "c, in the first two trees", mode: 0o640, mtime: 1_700_000_200)
        try write(f, "docs/same.txt", "never changes", mtime: 1_700_000_300)
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", url).status, 0)
        var trees: [(time: String, tree: [String: CLIFixture.Kept])] = []
        func sync(_ flags: String...) throws {
            let result = try f.run(["sync", "--json"] + flags)
            XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
            settle()
            Thread.sleep(forTimeInterval: 1.1)
            trees.append((now(), try f.snapshot(f.source)))
            Thread.sleep(forTimeInterval: 1.1)
        }
        try sync("--yes")
        try write(f, "a.txt", "a, second and longer", mode: 0o600, mtime: 1_700_001_000)
        try FileManager.default.removeItem(atPath: f.source + "/b.txt")
        try write(f, "new.txt", "new in the second tree", mtime: 1_700_001_100)
        try sync()
        try write(f, "a.txt", "a, third", mtime: 1_700_002_000)
        try FileManager.default.removeItem(atPath: f.source + "/docs/c.txt")
        try sync()

        let listing = try f.run("versions", "--json")
        XCTAssertEqual(listing.status, 0, listing.stdout + listing.stderr)
        let runs = listing.result?["runs"] as? [[String: Any]] ?? []
        XCTAssertEqual(runs.count, 2, listing.stdout)
        XCTAssertEqual(runs.compactMap { $0["replaced"] as? Int }, [1, 1])
        XCTAssertEqual(runs.compactMap { $0["deleted"] as? Int }, [1, 1])
        let aVersions = try f.run("versions", "a.txt", "--json")
        XCTAssertEqual((aVersions.result?["versions"] as? [[String: Any]])?.count, 2, aVersions.stdout)

        for (index, (time, tree)) in trees.enumerated() {
            let target = f.dir.path("as-of-\(index)")
            let restore = try f.run("restore", "--to", target, "--as-of", time, "--json")
            XCTAssertEqual(restore.status, 0, "as of \(time): " + restore.stdout + restore.stderr)
            let restored = try f.snapshot(target)
            XCTAssertEqual(restored, tree, "the tree as of \(time) (sync \(index + 1)) came back otherwise")
        }
        // Before the first tree: refused, naming the oldest.
        let early = try f.run("restore", "--to", f.dir.path("too-early"), "--as-of", "2020-01-01")
        XCTAssertEqual(early.status, 2, early.stderr)
        XCTAssertTrue(early.stderr.contains("oldest tree"), early.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.dir.path("too-early/a.txt")))
    }

    func testThreeSyncsThenEachTimeRestoresOnAFolderRemote() throws { try threeSyncsThenEachTimeRestores(.folder) }
    func testThreeSyncsThenEachTimeRestoresOnWebDAV() throws { try threeSyncsThenEachTimeRestores(.webdav) }
    func testThreeSyncsThenEachTimeRestoresOnS3() throws { try threeSyncsThenEachTimeRestores(.s3) }
    func testThreeSyncsThenEachTimeRestoresOnSFTP() throws { try threeSyncsThenEachTimeRestores(.sftp) }

    private func setKey(_ f: CLIFixture, _ line: String) throws {
        let path = f.dir.path("config/backup/config")
        let text = try String(contentsOfFile: path, encoding: .utf8)
        try (text + line + "\n").write(toFile: path, atomically: false, encoding: .utf8)
    }

    func testKeepVersionsPrunesExactlyWhatIsOlderAndAHoldStopsIt() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        try f.write("a.txt", "1")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        try setKey(f, "keep_versions = 2h")
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        // Runs of another day, as an earlier sync left them: one just past the two hours, one within.
        let old = VersionStore.runName(Date().addingTimeInterval(-2 * 3600 - 120))
        let recent = VersionStore.runName(Date().addingTimeInterval(-2 * 3600 + 600))
        for run in [old, recent] {
            try f.dir.write("remote/" + VersionStore.path(run: run, "a.txt"), Data("kept \(run)".utf8))
            try f.dir.write("remote/" + VersionStore.recordPath(run: run), Data("{\"replaced\":1,\"deleted\":0,\"bytes\":1,\"marker\":false}".utf8))
        }
        try f.dir.write("remote/" + VersionStore.folder + "/my notes/x.txt", Data("not a run".utf8))
        let versions = f.remote + "/" + VersionStore.folder

        XCTAssertEqual(try f.run("hold", "set", "checking").status, 0)
        try f.write("a.txt", "2")
        XCTAssertEqual(try f.run("sync").status, 3)
        XCTAssertTrue(FileManager.default.fileExists(atPath: versions + "/" + old), "pruned under a hold")
        XCTAssertEqual(try f.run("hold", "clear").status, 0)

        let run = try f.run("sync", "--json")
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        XCTAssertEqual(run.result?["pruned"] as? [String], [old])
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: versions))
        let mine = try XCTUnwrap((run.result?["versions"] as? [String: Any])?["run"] as? String)
        XCTAssertEqual(left, [recent, recent + ".json", mine, mine + ".json", "my notes"])
    }

    func testARansomwareRunIsRefusedAndAllowedKeepsEveryOldFile() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let originals = (0..<30).map { ("docs/page \($0).txt", "the plain text of page \($0), written by hand") }
        for (path, text) in originals { try f.write(path, text) }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        Thread.sleep(forTimeInterval: 1.1)
        // Every file rewritten in place: the same names, the same sizes.
        for (path, text) in originals { try f.write(path, String(text.map { $0 == " " ? "#" : Character($0.uppercased()) })) }
        let refused = try f.run("sync", "--json")
        XCTAssertEqual(refused.status, 3, refused.stdout + refused.stderr)
        XCTAssertEqual(refused.result?["reason"] as? String, "changeSuspected")
        for (path, text) in originals {
            XCTAssertEqual(try String(contentsOfFile: f.remote + "/" + path, encoding: .utf8), text, "the guard let \(path) be written")
        }
        let allowed = try f.run("sync", "--allow-change", "--json")
        XCTAssertEqual(allowed.status, 0, allowed.stdout + allowed.stderr)
        let run = try XCTUnwrap((allowed.result?["versions"] as? [String: Any])?["run"] as? String)
        for (path, text) in originals {
            XCTAssertEqual(try String(contentsOfFile: f.remote + "/" + VersionStore.path(run: run, path), encoding: .utf8), text)
        }
    }

    func testMaxChangeOfTheProfileSetsTheShare() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        for index in 0..<20 { try f.write("f\(index).txt", "version one of \(index)") }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        try setKey(f, "max_change = 10%")
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        for index in 0..<3 { try f.write("f\(index).txt", "version two of \(index)") }
        XCTAssertEqual(try f.run("sync", "--json").result?["reason"] as? String, "changeSuspected", "3 of 20 is more than 10%")
        let config = f.dir.path("config/backup/config")
        let text = try String(contentsOfFile: config, encoding: .utf8).replacingOccurrences(of: "max_change = 10%", with: "max_change = off")
        try text.write(toFile: config, atomically: false, encoding: .utf8)
        XCTAssertEqual(try f.run("sync").status, 0)
        try text.replacingOccurrences(of: "max_change = off", with: "max_change = lots").write(toFile: config, atomically: false, encoding: .utf8)
        let bad = try f.run("sync")
        XCTAssertEqual(bad.status, 2)
        XCTAssertTrue(bad.stderr.contains("max_change"), bad.stderr)
    }

    /// The answer to the version MOVE (of a deleted file) and COPY (of a replaced one) is
    /// lost: the server did it, the provider looks before it would send again, nothing is lost,
    /// and the run says so.
    func testALostAnswerToTheVersionMoveLosesNothingAndIsReported() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let server = try RcloneServer(.webdav, root: try f.dir.makeFolder("served"))
        addTeardownBlock { server.stop() }
        try FileManager.default.createDirectory(atPath: server.root + "/backup", withIntermediateDirectories: true)
        let proxy = try FaultProxy(upstreamPort: server.port)
        f.extraEnvironment = ["BACKUP_PASSWORD": server.secret]
        for index in 0..<8 { try f.write("keep \(index).txt", "kept \(index)") }
        try f.write("gone.txt", "to be deleted")
        try f.write("changed.txt", "the old content")
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", "webdav://\(server.user)@127.0.0.1:\(proxy.port)/backup").status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        Thread.sleep(forTimeInterval: RcloneServer.directoryCacheTime * 5)
        try FileManager.default.removeItem(atPath: f.source + "/gone.txt")
        try f.write("changed.txt", "the new content, longer")
        proxy.add("MOVE", path: "/backup/gone.txt", .cutResponse(afterBytes: 0))
        proxy.add("COPY", path: "/backup/changed.txt", .cutResponse(afterBytes: 0))
        let run = try f.run("sync", "--json")
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        let notes = run.jsonLines.filter { $0["event"] as? String == "note" }.compactMap { $0["message"] as? String }
        XCTAssertTrue(notes.contains { $0.contains("keeping gone.txt") && $0.contains("was lost") }, "\(notes)")
        XCTAssertTrue(notes.contains { $0.contains("keeping changed.txt") && $0.contains("was lost") }, "\(notes)")
        XCTAssertEqual(proxy.log().filter { $0.method == "MOVE" && $0.path.hasSuffix("/gone.txt") }.count, 1, "the MOVE was sent again")
        XCTAssertEqual(proxy.log().filter { $0.method == "COPY" && $0.path.hasSuffix("/changed.txt") }.count, 1, "the COPY was sent again")
        let run1 = try XCTUnwrap((run.result?["versions"] as? [String: Any])?["run"] as? String)
        let kept = server.root + "/backup/" + VersionStore.runFolder(run1)
        XCTAssertEqual(try String(contentsOfFile: kept + "/gone.txt", encoding: .utf8), "to be deleted")
        XCTAssertEqual(try String(contentsOfFile: kept + "/changed.txt", encoding: .utf8), "the old content")
        XCTAssertFalse(FileManager.default.fileExists(atPath: server.root + "/backup/gone.txt"))
        XCTAssertEqual(try String(contentsOfFile: server.root + "/backup/changed.txt", encoding: .utf8), "the new content, longer")
    }
}
