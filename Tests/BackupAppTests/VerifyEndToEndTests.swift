// `backup verify` end to end on a folder remote and real WebDAV and S3 servers: a file
// corrupted at the same size, a truncated one and a missing one are each named, exit 5; a
// stray file is reported, not damage; `--read-data=10` ten times reads every file once; and
// verify never writes to the remote.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class VerifyEndToEndTests: XCTestCase {
    private typealias Provider = ServedKind

    /// The remote's files on disk (path → bytes), to show verify changed none of them.
    private func onDisk(_ f: CLIFixture, _ root: String) throws -> [String: Data] { try f.tree(root) }


    private func damageIsFoundAndNamed(_ provider: Provider) throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let (url, root, settle) = try servedRemote(provider, f)
        for index in 0..<12 { try f.write("docs/file \(index).txt", "the content of file number \(index)") }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", url).status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        settle()
        let clean = try f.run("verify", "--read-data", "--json")
        XCTAssertEqual(clean.status, 0, clean.stdout + clean.stderr)
        XCTAssertEqual(clean.result?["checked"] as? Int, 12)

        // Corrupted at the same size, truncated, gone; and a stray file.
        let corrupted = root + "/docs/file 3.txt"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: corrupted))
        bytes[4] ^= 0x20
        try bytes.write(to: URL(fileURLWithPath: corrupted))
        XCTAssertEqual(truncate(root + "/docs/file 5.txt", 7), 0)
        try FileManager.default.removeItem(atPath: root + "/docs/file 8.txt")
        try Data("not from a sync".utf8).write(to: URL(fileURLWithPath: root + "/stray.txt"))
        settle()
        let before = try onDisk(f, root)

        let listing = try f.run("verify", "--json")
        XCTAssertEqual(listing.status, 5, listing.stdout + listing.stderr)
        let named = (listing.result?["damaged"] as? [[String: Any]] ?? []).map { "\($0["error"] ?? "") \($0["path"] ?? "")" }
        XCTAssertEqual(Set(named), ["sizeMismatch docs/file 5.txt", "missing docs/file 8.txt"], "the listing alone cannot see a same-size corruption")
        XCTAssertEqual(listing.result?["extra"] as? [String], ["stray.txt"])

        let read = try f.run("verify", "--read-data", "--json")
        XCTAssertEqual(read.status, 5, read.stdout + read.stderr)
        let damaged = (read.result?["damaged"] as? [[String: Any]] ?? []).map { "\($0["error"] ?? "") \($0["path"] ?? "")" }
        XCTAssertEqual(Set(damaged), ["hashMismatch docs/file 3.txt", "sizeMismatch docs/file 5.txt", "missing docs/file 8.txt"])
        let human = try f.run("verify", "--read-data")
        XCTAssertEqual(human.status, 5)
        for name in ["docs/file 3.txt", "docs/file 5.txt", "docs/file 8.txt", "stray.txt"] {
            XCTAssertTrue(human.stdout.contains(name) || human.stderr.contains(name), "\(name) is not named:\n\(human.stdout)\(human.stderr)")
        }
        XCTAssertEqual(try onDisk(f, root), before, "verify wrote to the remote")
    }

    func testDamageIsFoundAndNamedOnAFolderRemote() throws { try damageIsFoundAndNamed(.folder) }
    func testDamageIsFoundAndNamedOnWebDAV() throws { try damageIsFoundAndNamed(.webdav) }
    func testDamageIsFoundAndNamedOnSFTP() throws { try damageIsFoundAndNamed(.sftp) }
    func testDamageIsFoundAndNamedOnS3() throws { try damageIsFoundAndNamed(.s3) }

    func testTenRunsOfReadDataTenPercentReadEveryFileOnce() throws {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let paths = (0..<200).map { "d\($0 % 7)/f\($0).txt" }
        for path in paths { try f.write(path, "original \(path)") }
        XCTAssertEqual(try f.run("init", "--source", f.source, "--remote", f.remote).status, 0)
        XCTAssertEqual(try f.run("sync", "--yes").status, 0)
        // Every file corrupted at its size: each run names exactly the files it read.
        for path in paths {
            let full = f.remote + "/" + path
            var bytes = try Data(contentsOf: URL(fileURLWithPath: full))
            bytes[0] ^= 0x01
            try bytes.write(to: URL(fileURLWithPath: full))
        }
        var seen: [String: Int] = [:]
        var counts: [Int] = []
        for _ in 0..<10 {
            let run = try f.run("verify", "--read-data=10", "--json")
            XCTAssertEqual(run.status, 5, run.stdout + run.stderr)
            let damaged = (run.result?["damaged"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
            counts.append(damaged.count)
            for path in damaged { seen[path, default: 0] += 1 }
        }
        XCTAssertEqual(Set(seen.keys), Set(paths), "ten runs of 10% did not read every file")
        XCTAssertEqual(Set(seen.values), [1], "a file was read twice in ten runs")
        XCTAssertTrue(counts.allSatisfy { (5...40).contains($0) }, "a run read far from 10%: \(counts)")
        let bad = try f.run("verify", "--read-data=0")
        XCTAssertEqual(bad.status, 2, bad.stderr)
        let bare = try f.run("verify", "--remote", f.remote, "--read-data=10")
        XCTAssertEqual(bare.status, 2, bare.stderr)
    }
}
