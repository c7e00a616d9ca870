// A restore whose process is killed (SIGKILL) at any download or placement, resumed by a
// new process: the target ends byte-identical to the backup and no file that was placed
// before the kill is downloaded again.

import BackupEngine
import BackupStorage
import BackupTestSupport
import BackupTree
import Foundation
import XCTest

final class KilledRestoreTests: XCTestCase {
    private let files: [(String, String)] = [
        ("docs/a.txt", "alpha"), ("docs/b.txt", "bravo"), ("docs/sub/c.txt", "charlie"),
        ("pics/1.jpg", "one"), ("pics/2.jpg", "two"), ("pics/3.jpg", "three"),
        ("loose.txt", "loose"), ("more/loose.bin", String(repeating: "x", count: 300_000)),
    ]
    private let groups = [
        MarkerGroup(name: "documents", required: true, patterns: ["docs/"], order: 0),
        MarkerGroup(name: "pictures", required: false, patterns: ["*.jpg"], order: 1),
    ]

    private var helper: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("BackupKillHelper").path
    }

    private func makeBackup(_ dir: TempDir) async throws -> String {
        let remote = try dir.makeFolder("remote")
        let engine = SyncEngine(storage: FolderStorage(root: remote), state: try StateStore(path: dir.path("sync.db")))
        let marker = Marker(groups: groups, hashes: Dictionary(uniqueKeysWithValues: files.map { ($0.0, SHA256Hasher.hex(Data($0.1.utf8))) }))
        let entries = files.map { SyncEntry(path: $0.0, size: Int64($0.1.utf8.count), hash: SHA256Hasher.hex(Data($0.1.utf8)), source: .bytes(Data($0.1.utf8))) }
        guard case .completed = try await engine.sync(SyncSnapshot(entries: SyncEntryList(entries), marker: try marker.encoded())) else {
            XCTFail("backup failed")
            return remote
        }
        return remote
    }

    /// Runs the helper and returns the signal that ended it (0 when it exited).
    private func runHelper(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: helper)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal ? process.terminationStatus : 0
    }

    /// Kills a restore with `transfers` downloads in flight at `point` `n`, resumes it with as many.
    private func killAndResume(point: String, n: Int, transfers: Int = 1) async throws {
        let dir = try TempDir("backup-killed")
        defer { dir.cleanup() }
        let remote = try await makeBackup(dir)
        let targetRoot = dir.path("target")
        let recordPath = dir.path("record.db")

        let signal = try runHelper([remote, targetRoot, recordPath, point, String(n), String(transfers)])
        XCTAssertEqual(signal, SIGKILL, "\(point) \(n), \(transfers) in flight: the helper must die by SIGKILL")

        let record = try RestoreRecord(path: recordPath, writer: true)
        let placedBefore = Set(try record.files().filter { $0.status == .done }.map(\.file.remotePath))
        let storage = FaultyStorage(FolderStorage(root: remote))
        let target = RestoreTarget(root: targetRoot)
        let engine = RestoreEngine(storage: storage, record: record, staging: target, transfers: transfers)
        let outcome = try await engine.resume(placement: StagedPlacement(target: target))
        guard case .completed = outcome else { return XCTFail("\(point) \(n), \(transfers) in flight: resume ended \(outcome)") }

        let downloaded = storage.calls.compactMap { if case .download(let path) = $0 { path } else { nil } }
        XCTAssertTrue(placedBefore.isDisjoint(with: downloaded), "\(point) \(n), \(transfers) in flight: a placed file was downloaded again")
        for (path, text) in files {
            XCTAssertEqual(FileManager.default.contents(atPath: targetRoot + "/" + path), Data(text.utf8), "\(point) \(n), \(transfers) in flight: \(path)")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: targetRoot).sorted()
        XCTAssertEqual(left, ["docs", "loose.txt", "more", "pics"], "\(point) \(n), \(transfers) in flight: nothing else in the target")
    }

    func testRestoreKilledBeforeAnyDownloadResumesByteIdentical() async throws {
        for n in 1...files.count { try await killAndResume(point: "before-download", n: n) }
    }

    func testRestoreKilledAfterAnyDownloadBeforeItsRecordResumesByteIdentical() async throws {
        for n in 1...files.count { try await killAndResume(point: "after-download", n: n) }
    }

    func testParallelRestoreKilledBeforeOrAfterAnyDownloadResumesByteIdentical() async throws {
        for n in 1...files.count {
            try await killAndResume(point: "before-download", n: n, transfers: 4)
            try await killAndResume(point: "after-download", n: n, transfers: 4)
        }
    }

    func testRestoreKilledMidPlacementOfAnyGroupResumesByteIdentical() async throws {
        // documents, pictures, and the other files.
        for n in 1...3 { try await killAndResume(point: "mid-placement", n: n) }
    }
}
