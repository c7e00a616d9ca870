// One test (or more) per restore rule of the contract, named after it, on a real
// FolderStorage holding a real backup and a real SQLite restore record.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class RestoreEngineTests: XCTestCase {
    private let backup: [(String, String)] = [
        ("docs/a.txt", "alpha"), ("docs/b.txt", "bravo"), ("photos/1.jpg", "one"), ("photos/2.jpg", "two"),
        ("notes.md", "notes"), ("music/x.mp3", "x"),
    ]

    private func completedAt(_ outcome: RestoreOutcome, file: StaticString = #filePath, line: UInt = #line) -> Date? {
        if case .completed(let date) = outcome { return date }
        XCTFail("expected completed, got \(outcome)", file: file, line: line)
        return nil
    }

    // MARK: Rule 1: the plan is recorded; prefetch first

    func testRestoreRule01StartRecordsThePlanAndPrefetchesEveryPendingPathFirst() async throws {
        let f = try await RestoreFixture(backup)
        let plan = try await f.plan([("docs/a.txt", true, "docs"), ("docs/b.txt", true, "docs"), ("notes.md", false, nil)])
        f.storage.resetCalls()
        _ = completedAt(try await f.engine.start(plan))
        XCTAssertEqual(try f.record.plan(), plan)
        let calls = f.storage.calls
        XCTAssertEqual(calls.first, .prefetch(["docs/a.txt", "docs/b.txt", "notes.md"]))
        XCTAssertEqual(f.downloads, ["docs/a.txt", "docs/b.txt", "notes.md"])
    }

    func testRestoreRule01PlanIsRecordedEvenWhenTheRunFails() async throws {
        let f = try await RestoreFixture(backup)
        f.storage.failAlways(.download, with: CloudError(.offline, "no network"))
        let plan = try await f.plan([("docs/a.txt", true, nil)])
        let outcome = try await f.engine.start(plan)
        XCTAssertEqual(outcome, .failed(.cloud(CloudError(.offline, "no network"))))
        try f.reopen()
        XCTAssertEqual(try f.record.plan(), plan)
    }

    // MARK: Rule 2: placement one group at a time

    func testRestoreRule02GroupsOfferedOneAtATimeAndAFileWithNoGroupIsItsOwnGroup() async throws {
        let f = try await RestoreFixture(backup)
        let placement = ScriptedPlacement()
        let plan = try await f.plan([
            ("photos/1.jpg", false, "photos"), ("notes.md", false, nil), ("photos/2.jpg", false, "photos"), ("music/x.mp3", false, nil),
        ])
        _ = completedAt(try await f.engine.start(plan, placement: placement))
        XCTAssertEqual(placement.labels, ["photos", "notes.md", "music/x.mp3"])
        XCTAssertEqual(placement.offered[0].files.map(\.remotePath), ["photos/1.jpg", "photos/2.jpg"])
    }

    func testRestoreRule02DefaultPlacementKeepsFilesWhereTheyLanded() async throws {
        let f = try await RestoreFixture(backup)
        let plan = try await f.plan([("docs/a.txt", false, "docs"), ("notes.md", false, nil)])
        _ = completedAt(try await f.engine.start(plan))
        XCTAssertEqual(f.local("docs/a.txt"), Data("alpha".utf8))
        XCTAssertEqual(f.local("notes.md"), Data("notes".utf8))
        XCTAssertEqual(try f.record.files().map(\.status), [.done, .done])
    }

    func testRestoreRule02RejectedCountsAnAttemptAndIsOfferedAgainNextRun() async throws {
        let f = try await RestoreFixture(backup)
        let placement = ScriptedPlacement(["photos": .rejected])
        let plan = try await f.plan([("docs/a.txt", true, "docs"), ("photos/1.jpg", false, "photos"), ("photos/2.jpg", false, "photos")])
        let outcome = try await f.engine.start(plan, placement: placement)
        XCTAssertEqual(outcome, .partial(pending: ["photos/1.jpg", "photos/2.jpg"]))
        let photos = try f.record.files().filter { $0.file.group == "photos" }
        XCTAssertEqual(photos.map(\.attempts), [1, 1])
        XCTAssertEqual(photos.map(\.status), [.downloaded, .downloaded])

        placement.answer("photos", .placed)
        f.storage.resetCalls()
        _ = completedAt(try await f.engine.resume(placement: placement))
        XCTAssertEqual(placement.labels, ["docs", "photos", "photos"])
        XCTAssertEqual(f.downloads, [], "still staged: offered again without a new download")
    }

    // MARK: Rule 3: required groups first; the first failure ends the run

    func testRestoreRule03RequiredGroupsFirstInPlanOrder() async throws {
        let f = try await RestoreFixture(backup)
        let placement = ScriptedPlacement()
        let plan = try await f.plan([
            ("photos/1.jpg", false, "photos"), ("docs/a.txt", true, "docs"), ("music/x.mp3", false, "music"), ("notes.md", true, nil),
        ])
        _ = completedAt(try await f.engine.start(plan, placement: placement))
        XCTAssertEqual(placement.labels, ["docs", "notes.md", "photos", "music"])
        XCTAssertEqual(f.downloads, ["docs/a.txt", "notes.md", "photos/1.jpg", "music/x.mp3"])
    }

    func testRestoreRule03FirstRequiredDownloadFailureEndsTheRunOptionalUntouched() async throws {
        let f = try await RestoreFixture(backup)
        f.storage.fail(.download, nth: 2, with: CloudError(.transport, "server error"))
        let placement = ScriptedPlacement()
        let plan = try await f.plan([
            ("photos/1.jpg", false, "photos"), ("docs/a.txt", true, "docs"), ("docs/b.txt", true, "docs"), ("notes.md", true, nil),
        ])
        let outcome = try await f.engine.start(plan, placement: placement)
        XCTAssertEqual(outcome, .failed(.cloud(CloudError(.transport, "server error"))))
        XCTAssertEqual(f.downloads, ["docs/a.txt", "docs/b.txt"], "nothing after the failure, no optional file")
        XCTAssertEqual(placement.offered, [], "a required group with a failed file is not placed")
        XCTAssertNil(f.local("photos/1.jpg"))
        XCTAssertEqual(try f.record.files().first { $0.file.remotePath == "docs/b.txt" }?.attempts, 1)
    }

    func testRestoreRule03RequiredRejectionEndsTheRunAsPlacementRejected() async throws {
        let f = try await RestoreFixture(backup)
        let placement = ScriptedPlacement(["docs": .rejected])
        let plan = try await f.plan([("docs/a.txt", true, "docs"), ("notes.md", true, nil), ("photos/1.jpg", false, "photos")])
        let outcome = try await f.engine.start(plan, placement: placement)
        XCTAssertEqual(outcome, .placementRejected(group: "docs"))
        XCTAssertEqual(placement.labels, ["docs"])
        XCTAssertEqual(f.downloads, ["docs/a.txt"])
    }

    // MARK: Rule 4: optional groups best-effort; attempts

    func testRestoreRule04OptionalGroupPlacedEvenWhenASiblingFailed() async throws {
        let f = try await RestoreFixture(backup)
        f.storage.fail(.download, nth: 2, with: CloudError(.notFound, "gone"))
        let placement = ScriptedPlacement()
        let plan = try await f.plan([("photos/1.jpg", false, "photos"), ("photos/2.jpg", false, "photos"), ("notes.md", false, nil)])
        let outcome = try await f.engine.start(plan, placement: placement)
        XCTAssertEqual(outcome, .partial(pending: ["photos/2.jpg"]))
        XCTAssertEqual(placement.offered.first?.files.map(\.remotePath), ["photos/1.jpg"])
        XCTAssertEqual(placement.offered.first?.failed.map(\.remotePath), ["photos/2.jpg"])
        XCTAssertEqual(placement.labels, ["photos", "notes.md"], "the run goes on after an optional failure")
    }

    func testRestoreRule04FileSkippedAfterMaxAttemptsUntilResetAttempts() async throws {
        let f = try await RestoreFixture(backup)
        let plan = try await f.plan([("photos/1.jpg", false, nil), ("notes.md", false, nil)])
        f.storage.setHook { call, _ in
            if call == .download("photos/1.jpg") { throw CloudError(.transport, "flaky") }
        }
        _ = try await f.engine.start(plan)
        _ = try await f.engine.resume()
        _ = try await f.engine.resume()
        XCTAssertEqual(f.downloads.filter { $0 == "photos/1.jpg" }.count, 3)
        XCTAssertEqual(try f.record.files().first?.attempts, 3)

        f.storage.resetCalls()
        let skipped = try await f.engine.resume()
        XCTAssertEqual(skipped, .partial(pending: ["photos/1.jpg"]))
        XCTAssertEqual(f.downloads, [], "out of attempts: skipped")

        f.storage.setHook(nil)
        _ = completedAt(try await f.engine.resume(resetAttempts: true))
        XCTAssertEqual(f.downloads, ["photos/1.jpg"])
        XCTAssertEqual(f.local("photos/1.jpg"), Data("one".utf8))
    }

    // MARK: Rule 5: the record after every download and placement

    func testRestoreRule05RecordSavedAfterEveryDownloadAndEveryPlacement() async throws {
        let f = try await RestoreFixture(backup)
        let recordPath = f.recordPath
        // Before every download, a second connection sees every earlier download recorded.
        f.storage.setHook { call, count in
            guard case .download = call else { return }
            let landed = try RestoreRecord(path: recordPath).files().filter { $0.status != .pending }.count
            XCTAssertEqual(landed, count - 1)
        }
        // At placement, the group is recorded downloaded; after it, done.
        let placement = ScriptedPlacement(check: { group in
            let files = try RestoreRecord(path: recordPath).files()
            for file in group.files {
                XCTAssertEqual(files.first { $0.file.remotePath == file.remotePath }?.status, .downloaded)
            }
            let earlierGroupsDone = files.filter { $0.status == .done }.count
            XCTAssertEqual(earlierGroupsDone, group.label == "docs" ? 0 : 2)
        })
        let plan = try await f.plan([("docs/a.txt", true, "docs"), ("docs/b.txt", true, "docs"), ("notes.md", false, nil)])
        _ = completedAt(try await f.engine.start(plan, placement: placement))
        XCTAssertEqual(try RestoreRecord(path: recordPath).files().map(\.status), [.done, .done, .done])
    }

    func testRestoreRule05DownloadedKeptApartFromDone() async throws {
        let f = try await RestoreFixture(backup)
        let plan = try await f.plan([("docs/a.txt", false, "docs"), ("notes.md", false, nil)])
        _ = try await f.engine.start(plan, placement: ScriptedPlacement(["docs": .rejected]))
        try f.reopen()
        let files = try f.record.files()
        XCTAssertEqual(files.map(\.status), [.downloaded, .done])
    }

    func testRestoreRule05CancellingTheCallerStopsAndResumeContinues() async throws {
        let f = try await RestoreFixture(backup)
        let plan = try await f.plan(backup.map { ($0.0, false, nil) })
        let reached = AsyncStream<Void>.makeStream()
        f.storage.setHook { call, count in
            if case .download = call, count == 3 {
                reached.continuation.yield()
                try await Task.sleep(for: .seconds(30))
            }
        }
        let engine = f.engine
        let task = Task { try await engine.start(plan) }
        var waiter = reached.stream.makeAsyncIterator()
        _ = await waiter.next()
        task.cancel()
        do {
            let outcome = try await task.value
            XCTFail("expected cancellation, got \(outcome)")
        } catch is CancellationError {
        }
        f.storage.setHook(nil)
        f.storage.resetCalls()
        try f.reopen()
        _ = completedAt(try await f.engine.resume())
        XCTAssertEqual(f.downloads, backup.dropFirst(2).map(\.0), "the two placed files are not downloaded again")
        for (path, text) in backup { XCTAssertEqual(f.local(path), Data(text.utf8), path) }
    }

    // MARK: Rule 6: progress; completed or partial

    func testRestoreRule06ProgressSentOnlyWhenACountChanges() async throws {
        let f = try await RestoreFixture(backup)
        let log = RestoreProgressLog()
        let plan = try await f.plan([
            ("docs/a.txt", true, "docs"), ("docs/b.txt", true, "docs"), ("notes.md", false, nil), ("music/x.mp3", false, nil),
        ])
        // The last download fails: an attempt is counted, but no reported count changes.
        f.storage.fail(.download, nth: 4, with: CloudError(.transport, "x"))
        let outcome = try await f.engine.start(plan, onProgress: log.callback)
        XCTAssertEqual(outcome, .partial(pending: ["music/x.mp3"]))
        let reports = log.all
        XCTAssertEqual(reports.first, RestoreProgress(filesDone: 0, filesStaged: 0, filesTotal: 4, groupsDone: 0, groupsTotal: 3))
        XCTAssertEqual(reports.last, RestoreProgress(filesDone: 3, filesStaged: 0, filesTotal: 4, groupsDone: 2, groupsTotal: 3))
        for (previous, next) in zip(reports, reports.dropFirst()) { XCTAssertNotEqual(previous, next, "a report without a change") }
        // Initial, two downloads, docs placed, one download, notes placed; nothing for the failure.
        XCTAssertEqual(reports.count, 6)
    }

    func testRestoreRule06CompletedIsStampedElsePartialListsPending() async throws {
        let f = try await RestoreFixture(backup)
        let before = Date()
        let plan = try await f.plan([("docs/a.txt", false, nil), ("notes.md", false, nil)])
        f.storage.fail(.download, nth: 2, with: CloudError(.transport, "x"))
        let first = try await f.engine.start(plan)
        XCTAssertEqual(first, .partial(pending: ["notes.md"]))
        XCTAssertNil(try f.record.completedAt())
        let outcome = try await f.engine.resume()
        let stamp = try XCTUnwrap(completedAt(outcome))
        XCTAssertGreaterThanOrEqual(stamp.timeIntervalSince1970, before.timeIntervalSince1970 - 1)
        XCTAssertEqual(try f.record.completedAt().map { Int($0.timeIntervalSince1970) }, Int(stamp.timeIntervalSince1970))
    }

    // MARK: Rule 7: resume revalidates; nothing fetched twice

    func testRestoreRule07ResumeContinuesWhenTheSourceMatches() async throws {
        let f = try await RestoreFixture(backup)
        let plan = try await f.plan([("docs/a.txt", false, nil), ("notes.md", false, nil)])
        f.storage.fail(.download, nth: 2, with: CloudError(.transport, "x"))
        _ = try await f.engine.start(plan)
        f.storage.resetCalls()
        _ = completedAt(try await f.engine.resume())
        XCTAssertEqual(f.storage.calls.first, .list, "the probe comes first")
        XCTAssertEqual(f.downloads, ["notes.md"], "a done file is never downloaded again")
        XCTAssertEqual(f.storage.calls.filter { if case .prefetch = $0 { true } else { false } }, [.prefetch(["notes.md"])],
                       "nor asked for: only pending files are prefetched")
    }

    func testRestoreRule07ResumeSourceChangedWhenTheMarkerChanged() async throws {
        let f = try await RestoreFixture(backup)
        let plan = try await f.plan([("docs/a.txt", false, nil)])
        _ = try await f.engine.start(plan, placement: ScriptedPlacement(["docs/a.txt": .rejected]))
        let files = backup.map { hashed($0.0, $0.1) } + [hashed("new.txt", "n")]
        _ = completed(try await f.sync.engine.sync(snapshot(files, marker: "M2")))
        f.storage.resetCalls()
        let outcome = try await f.engine.resume()
        XCTAssertEqual(outcome, .sourceChanged)
        XCTAssertEqual(f.downloads, [])
    }

    func testRestoreRule07ResumeNotReadyWhenTheMarkerIsGone() async throws {
        let f = try await RestoreFixture(backup)
        _ = try await f.engine.start(try await f.plan([("docs/a.txt", false, nil)]), placement: ScriptedPlacement(["docs/a.txt": .rejected]))
        try f.sync.removeRemote(SyncEngine.defaultMarkerPath)
        let outcome = try await f.engine.resume()
        XCTAssertEqual(outcome, .notReady)
    }

    func testRestoreRule07ResumeSourceUnavailableWhenTheBackupIsGoneOrNoAccount() async throws {
        let f = try await RestoreFixture(backup)
        _ = try await f.engine.start(try await f.plan([("docs/a.txt", false, nil)]), placement: ScriptedPlacement(["docs/a.txt": .rejected]))
        try f.reopen(availability: { .noAccount })
        let noAccount = try await f.engine.resume()
        XCTAssertEqual(noAccount, .sourceUnavailable)
        try f.reopen()
        for entry in try FileManager.default.contentsOfDirectory(atPath: f.sync.remoteRoot) where entry != ".backup-volume-id" {
            try FileManager.default.removeItem(atPath: f.sync.remoteRoot + "/" + entry)
        }
        let gone = try await f.engine.resume()
        XCTAssertEqual(gone, .sourceUnavailable)
    }

    func testRestoreRule07ResumeNeedsConsentNotAvailableAndTransport() async throws {
        let f = try await RestoreFixture(backup)
        _ = try await f.engine.start(try await f.plan([("docs/a.txt", false, nil)]), placement: ScriptedPlacement(["docs/a.txt": .rejected]))
        try f.reopen(availability: { .needsConsent })
        let consent = try await f.engine.resume()
        XCTAssertEqual(consent, .needsConsent)

        try f.reopen()
        f.storage.fail(.list, nth: 1, with: CloudError(.offline, "no route"))
        f.storage.resetCalls()
        let offline = try await f.engine.resume()
        XCTAssertEqual(offline, .failed(.cloud(CloudError(.offline, "no route"))))

        try FileManager.default.moveItem(atPath: f.sync.remoteRoot, toPath: f.sync.remoteRoot + ".unmounted")
        let missing = try await f.engine.resume()
        XCTAssertEqual(missing, .notAvailable)
    }

    func testRestoreRule07AStagedFileStillOnDiskIsNotFetchedAgain() async throws {
        let f = try await RestoreFixture(backup)
        let plan = try await f.plan([("docs/a.txt", false, "docs"), ("docs/b.txt", false, "docs")])
        _ = try await f.engine.start(plan, placement: ScriptedPlacement(["docs": .rejected]))
        // One staged file is lost (a cleaned temp folder): only that one is fetched again.
        try FileManager.default.removeItem(atPath: f.target + "/docs/b.txt")
        f.storage.resetCalls()
        _ = completedAt(try await f.engine.resume())
        XCTAssertEqual(f.downloads, ["docs/b.txt"])
    }

    func testResumeWithoutARecordSaysThereIsNothingToResume() async throws {
        let f = try await RestoreFixture(backup)
        do {
            _ = try await f.engine.resume()
            XCTFail("expected an error")
        } catch let error as StateStoreError {
            XCTAssertEqual(error.code, .nothingToResume)
            XCTAssertTrue(error.message.contains(f.recordPath))
        }
    }

    // MARK: Verification

    func testRestoreHashMismatchIsAFailedAttemptAndNeverPlaced() async throws {
        let f = try await RestoreFixture(backup)
        var plan = try await f.plan([("docs/a.txt", false, nil), ("notes.md", false, nil)])
        plan.files[0].sha256 = SHA256Hasher.hex(Data("not alpha".utf8))
        plan.files[1].sha256 = SHA256Hasher.hex(Data("notes".utf8))
        let placement = ScriptedPlacement()
        let outcome = try await f.engine.start(plan, placement: placement)
        XCTAssertEqual(outcome, .partial(pending: ["docs/a.txt"]))
        XCTAssertEqual(placement.labels, ["notes.md"])
        XCTAssertNil(f.local("docs/a.txt"), "a mismatching download is removed")
        let failed = try f.record.files()[0]
        XCTAssertEqual(failed.attempts, 1)
        XCTAssertTrue(failed.lastError?.contains("SHA-256") ?? false)
    }
}
