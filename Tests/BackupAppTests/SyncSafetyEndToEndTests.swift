// Issue 11's data-loss paths around the sync engine, end to end through the built binary:
// what is kept remotely, what a restore seeds, what `forget` keeps, what size_compared means.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class SyncSafetyEndToEndTests: XCTestCase {
    private func initialised(_ extra: [String] = [], config more: String = "") throws -> CLIFixture {
        let f = try CLIFixture()
        addTeardownBlock { f.dir.cleanup() }
        let result = try f.run(["init", "--source", f.source, "--remote", f.remote] + extra)
        XCTAssertEqual(result.status, 0, result.stderr)
        if !more.isEmpty {
            let config = f.dir.path("config/backup/config")
            try (try String(contentsOfFile: config, encoding: .utf8) + more).write(toFile: config, atomically: true, encoding: .utf8)
        }
        return f
    }

    @discardableResult
    private func synced(_ f: CLIFixture, _ arguments: String..., file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        let result = try f.run(["sync", "--json"] + arguments)
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr, file: file, line: line)
        XCTAssertEqual(result.result?["status"] as? String, "completed", result.stdout, file: file, line: line)
        return result.result ?? [:]
    }

    private func remoteFiles(_ f: CLIFixture) throws -> [String: Data] {
        try f.tree(f.remote).filter { !$0.key.hasPrefix(".backup") }
    }

    // MARK: Item 2: keep_remotely decided from the listing, not the cache

    func testItem02KeepRemotelySurvivesForgetAndANewMachine() throws {
        let f = try initialised(config: "keep_remotely = archive/\n")
        try f.write("archive/2019.txt", "old year")
        for i in 0..<3 { try f.write("f\(i).txt", "\(i)") }
        try synced(f, "--yes")
        try FileManager.default.removeItem(atPath: f.source + "/archive")
        XCTAssertEqual(try synced(f)["deleted"] as? Int, 0, "kept while the state knows it")

        // The state is lost (forget, a damaged state deleted, a new machine).
        XCTAssertEqual(try f.run("forget").status, 0)
        let after = try synced(f, "--yes")
        XCTAssertEqual(after["deleted"] as? Int, 0, "kept from the pattern and the listing alone")
        XCTAssertEqual(try remoteFiles(f)["archive/2019.txt"], Data("old year".utf8))
        XCTAssertEqual(try synced(f)["deleted"] as? Int, 0, "and on every run after")
    }

    // MARK: Item 3: a partial restore into the source keeps the rest until abandoned

    func testItem03PartialRestoreThenSyncKeepsTheGroupsNotYetRestored() throws {
        let f = try initialised(["--group", "papers=papers/,required", "--group", "photos=photos/"])
        for i in 0..<4 { try f.write("papers/p\(i).txt", "paper \(i)") }
        for i in 0..<4 { try f.write("photos/\(i).jpg", "photo \(i)") }
        try synced(f, "--yes")

        // A new disk: the source and the state are gone; only the papers are restored first.
        try FileManager.default.removeItem(atPath: f.source)
        try FileManager.default.createDirectory(atPath: f.source, withIntermediateDirectories: true)
        XCTAssertEqual(try f.run("forget").status, 0)
        let papers = try f.run("restore", "--only", "papers", "--json")
        XCTAssertEqual(papers.status, 0, papers.stdout + papers.stderr)
        XCTAssertEqual(papers.result?["placed"] as? Int, 4)

        let next = try synced(f, "--yes")
        XCTAssertEqual(next["deleted"] as? Int, 0, "the photos not yet restored are kept: \(next)")
        XCTAssertEqual(try remoteFiles(f).keys.filter { $0.hasPrefix("photos/") }.count, 4)
        // A forget in between does not drop what is kept for the restore.
        XCTAssertEqual(try f.run("forget").status, 0)
        XCTAssertEqual(try synced(f, "--yes")["deleted"] as? Int, 0)

        // Abandoned: the rest is no longer kept for the restore.
        let abandon = try f.run("restore", "--abandon", "--json")
        XCTAssertEqual(abandon.status, 0, abandon.stdout + abandon.stderr)
        XCTAssertEqual(abandon.result?["abandoned"] as? Int, 4, abandon.stdout)
        let human = try f.run("restore", "--abandon")
        XCTAssertEqual(human.status, 0, human.stderr)
        XCTAssertTrue(human.stdout.contains("nothing"), human.stdout)
        XCTAssertEqual(try synced(f)["deleted"] as? Int, 4, "abandoned: the next sync deletes them, as --abandon said")
    }

    func testItem03RestoringTheRestEndsTheKeep() throws {
        let f = try initialised(["--group", "papers=papers/,required", "--group", "photos=photos/"])
        for i in 0..<2 { try f.write("papers/p\(i).txt", "paper \(i)") }
        for i in 0..<2 { try f.write("photos/\(i).jpg", "photo \(i)") }
        try synced(f, "--yes")
        try FileManager.default.removeItem(atPath: f.source)
        try FileManager.default.createDirectory(atPath: f.source, withIntermediateDirectories: true)
        XCTAssertEqual(try f.run("restore", "--only", "papers", "--json").status, 0)
        XCTAssertEqual(try f.run("restore", "--only", "photos", "--json").status, 0)
        let abandon = try f.run("restore", "--abandon", "--json")
        XCTAssertEqual(abandon.result?["abandoned"] as? Int, 0, "everything was restored: nothing is kept for a restore")
        // Deleting a restored photo now deletes it remotely, like any other file.
        try FileManager.default.removeItem(atPath: f.source + "/photos/0.jpg")
        XCTAssertEqual(try synced(f)["deleted"] as? Int, 1)
    }

    // MARK: Item 6: forget keeps the write hold

    func testItem06ForgetKeepsTheWriteHold() throws {
        let f = try initialised()
        try f.write("a.txt", "a")
        try synced(f, "--yes")
        XCTAssertEqual(try f.run("hold", "set", "disk swap").status, 0)
        XCTAssertEqual(try f.run("forget").status, 0)
        XCTAssertTrue(try f.run("hold").stdout.contains("disk swap"))
        let held = try f.run("sync", "--yes", "--json")
        XCTAssertEqual(held.status, 3)
        XCTAssertEqual(held.result?["reason"] as? String, "writeHeld")
    }

    // MARK: Item 9: only a restore from the profile's own remote seeds its state

    func testItem09RestoreFromAnotherRemoteDoesNotSeedTheProfilesState() throws {
        let f = try initialised()
        try f.write("doc.txt", "mine")
        try synced(f, "--yes")

        // Another backup, with a file of the same name and size and other bytes.
        let other = try initialised()
        try other.write("doc.txt", "your")
        try synced(other, "--yes")

        let restored = try f.run("restore", "--profile", "default", "--remote", other.remote, "--to", f.source, "--overwrite", "--json")
        XCTAssertEqual(restored.status, 0, restored.stdout + restored.stderr)
        XCTAssertEqual(try f.tree(f.source)["doc.txt"], Data("your".utf8))
        let next = try synced(f)
        XCTAssertEqual(next["uploaded"] as? Int, 1, "the profile's remote still holds other bytes: \(next)")
        XCTAssertEqual(try remoteFiles(f)["doc.txt"], Data("your".utf8))
    }

    // MARK: Item 12: size_compared compares size and modification time

    func testItem12SizeComparedFileChangedInPlaceUploadsAgain() throws {
        let f = try initialised(config: "size_compared = *.img\n")
        let image = try f.write("disk.img", "AAAA")
        try f.write("notes.txt", "n")
        try synced(f, "--yes")
        let touch = { (text: String, seconds: Int) in
            try Data(text.utf8).write(to: URL(fileURLWithPath: image))
            var times = [timespec(tv_sec: 1_700_000_000 + seconds, tv_nsec: 0), timespec(tv_sec: 1_700_000_000 + seconds, tv_nsec: 0)]
            XCTAssertEqual(utimensat(AT_FDCWD, image, &times, 0), 0)
        }
        try touch("BBBB", 10)
        XCTAssertEqual(try synced(f)["uploaded"] as? Int, 1, "same size, another modification time: uploaded")
        XCTAssertEqual(try remoteFiles(f)["disk.img"], Data("BBBB".utf8))
        XCTAssertEqual(try synced(f)["uploaded"] as? Int, 0)

        // After forget the file is adopted: equal size counts as unchanged, and its mtime is
        // recorded, so a later change in place is still seen.
        XCTAssertEqual(try f.run("forget").status, 0)
        XCTAssertEqual(try synced(f, "--yes")["uploaded"] as? Int, 1, "only notes.txt, hash unknown after forget")
        XCTAssertEqual(try synced(f)["uploaded"] as? Int, 0)
        try touch("CCCC", 20)
        XCTAssertEqual(try synced(f)["uploaded"] as? Int, 1)
        XCTAssertEqual(try remoteFiles(f)["disk.img"], Data("CCCC".utf8))
    }

    // MARK: Hygiene: status --json ends with a result line

    func testStatusJSONEndsWithAResultLine() throws {
        let f = try initialised()
        try f.write("a.txt", "a")
        let status = try f.run("status", "--json")
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertEqual(status.jsonLines.last?["event"] as? String, "result", status.stdout)
        XCTAssertEqual(status.result?["status"] as? String, "completed")
        XCTAssertTrue(status.jsonLines.contains { $0["event"] as? String == "status" })
    }
}
