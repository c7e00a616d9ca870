// The sync screen: progress from the job's latest state (bar, bytes, rate, ETA, the file in
// flight), the outcome in words, and the keys that act on an unavailable outcome.

@testable import BackupTUI
@testable import BackupApp
import BackupEngine
import BackupTerminal
import XCTest

final class SyncScreenTests: XCTestCase {
    private var f: TUIFixture!
    private var profile: Profile!

    override func setUpWithError() throws {
        f = try TUIFixture()
        profile = Profile(name: "default", source: "/home/alice/Documents", remote: "/mnt/backup/documents")
    }

    override func tearDown() {
        f.dir.cleanup()
    }

    private func summary(_ result: SyncSummary.Result) -> SyncSummary {
        SyncSummary(profile: "default", result: result, files: 1000, bytes: 4_194_304, hashedFiles: 1000, absent: 0, notes: [], symlinks: 0, folders: 0)
    }

    func testAFirstSyncsScanSaysItsNewFilesAreReadAsTheyAreSent() throws {
        let screen = SyncScreen(context: f.context, profile: profile, request: SyncRequest())
        let job = try XCTUnwrap(f.syncs.last?.job)
        job.receive(.phase("scanning"))
        job.receive(.scanned(files: 1200, bytes: 4_194_304, hashedFiles: 200, hashedWhenSent: 1000))
        job.receive(.phase("syncing"))
        let frame = f.frame([screen], columns: 80)
        XCTAssertTrue(frame.contains("Scanned  1,200 files (4.0 MiB), 200 read, 1,000 read as sent"), frame)
        job.receive(.scanned(files: 1200, bytes: 4_194_304, hashedFiles: 200))
        let later = f.frame([screen], columns: 80)
        XCTAssertTrue(later.contains("Scanned  1,200 files (4.0 MiB), 200 read"), later)
        XCTAssertFalse(later.contains("read as sent"), "nothing to read later, nothing said: \(later)")
    }

    func testProgressFollowsBytesWithTheRateETAElapsedAndEveryFileInFlight() throws {
        let screen = SyncScreen(context: f.context, profile: profile, request: SyncRequest())
        let job = try XCTUnwrap(f.syncs.last?.job)
        job.receive(.phase("scanning"))
        job.receive(.scanned(files: 1000, bytes: 4_194_304, hashedFiles: 1000))
        job.receive(.phase("syncing"))
        job.receive(.syncStage(.uploading(files: 1000, bytes: 4_194_304)))
        job.receive(.syncProgress(done: 0, total: 1001, transfer: TransferReading(expectedBytes: 4_194_304)))
        f.clock.advance(4)
        // A quarter of the bytes but only 2 of 1,000 files: the bar follows the bytes.
        job.receive(.syncProgress(done: 2, total: 1001, transfer: TransferReading(bytes: 1_048_576, expectedBytes: 4_194_304, moving: [
            .init(path: "photos/日本語の写真.jpg", bytes: 524_288, size: 2_097_152), .init(path: "notes.txt", bytes: 0, size: 10),
        ])))
        assertScreen(f.frame([screen]), """
             backup · sync "default"                             ? help

             Source   /home/alice/Documents
             Remote   /mnt/backup/documents

             Uploading: 2 of 1,000 files  |
             ████████████░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░░ 25%
             Sent     1.0 MiB of 4.0 MiB · 256.0 KiB/s · ETA 0:12
             Elapsed  0:04
             Moving   photos/日本語の写真.jpg      512.0 KiB of 2.0 MiB
                      notes.txt                             0 B of 10 B
             Scanned  1,000 files (4.0 MiB), 1,000 read







             h hold  b background  Esc back  ? help  q quit
            """)
    }

    func testAStalledTransferShowsNoRateAfterAFewSecondsAndTheTimeStillMoves() throws {
        let screen = SyncScreen(context: f.context, profile: profile, request: SyncRequest())
        let job = try XCTUnwrap(f.syncs.last?.job)
        job.receive(.phase("syncing"))
        job.receive(.syncStage(.uploading(files: 1, bytes: 50_000_000)))
        job.receive(.syncProgress(done: 0, total: 2, transfer: TransferReading(expectedBytes: 50_000_000)))
        f.clock.advance(1)
        job.receive(.syncProgress(done: 0, total: 2, transfer: TransferReading(bytes: 1_000_000, expectedBytes: 50_000_000, moving: [
            .init(path: "big.iso", bytes: 1_000_000, size: 50_000_000),
        ])))
        let (loop, buffer) = f.loop([screen])
        loop.step(timeoutMilliseconds: 0)
        XCTAssertTrue(buffer.lines[7].contains("976.6 KiB/s · ETA 0:49"), buffer.lines[7])
        XCTAssertEqual(buffer.lines[5], " Uploading: 0 of 1 file  /")
        // Nothing arrives for ten seconds: the rate says so, and the clock and the sign of life move.
        f.clock.advance(10)
        loop.step(timeoutMilliseconds: 0)
        XCTAssertEqual(buffer.lines[7], " Sent     976.6 KiB of 47.7 MiB · 0 B/s")
        XCTAssertEqual(buffer.lines[8], " Elapsed  0:11")
        XCTAssertEqual(buffer.lines[5], " Uploading: 0 of 1 file  \\")
    }

    func testDeletesFillTheBarByFilesAndTheScanShowsItsRunningCount() throws {
        let screen = SyncScreen(context: f.context, profile: profile, request: SyncRequest())
        let job = try XCTUnwrap(f.syncs.last?.job)
        job.receive(.phase("scanning"))
        job.receive(.scanning(files: 12_345, hashed: 678, hashedBytes: 9_437_184))
        let (loop, buffer) = f.loop([screen])
        loop.step(timeoutMilliseconds: 0)
        XCTAssertEqual(buffer.lines[5], " Scanning: 12,345 files found, 678 read (9.0 MiB)  |")
        job.receive(.phase("syncing"))
        job.receive(.syncStage(.uploading(files: 2, bytes: 100)))
        job.receive(.syncProgress(done: 2, total: 7, transfer: TransferReading(bytes: 100, expectedBytes: 100)))
        job.receive(.syncStage(.deleting(files: 4)))
        job.receive(.syncProgress(done: 3, total: 7, transfer: TransferReading(bytes: 100, expectedBytes: 100)))
        f.clock.advance(0.2)
        loop.step(timeoutMilliseconds: 0)
        XCTAssertEqual(buffer.lines[5], " Deleting from the remote: 1 of 4 files  |")
        XCTAssertTrue(buffer.lines[6].hasSuffix(" 25%"), buffer.lines[6])
    }

    func testCompletedShowsWhatWasDoneInWords() throws {
        let screen = SyncScreen(context: f.context, profile: profile, request: SyncRequest())
        let job = try XCTUnwrap(f.syncs.last?.job)
        var report = SyncReport()
        report.uploaded = PathList((0..<1001).map { "f\($0)" })
        report.markerUploaded = true
        // The marker's bytes are told apart: a 6-byte file must not read "17.2 KiB uploaded".
        report.markerBytes = 17_613
        report.uploadedBytes = 4_194_304 + 17_613
        report.deleted = ["old.txt"]
        report.unchanged = 12
        job.finish(.success(summary(.ran(.completed(report)))))
        let (loop, buffer) = f.loop([screen])
        loop.step(timeoutMilliseconds: 0)
        XCTAssertEqual(f.context.lastStatus, .success)
        XCTAssertEqual(buffer.lines[5], " Completed")
        XCTAssertTrue(buffer.lines[6].hasSuffix("█ 100%"), buffer.lines[6])
        XCTAssertEqual(buffer.lines[9], " Completed: 1,000 files uploaded (4.0 MiB), 1 deleted, 12")
        XCTAssertEqual(buffer.lines[10], " unchanged. The backup's marker was written (17.2 KiB).")
        XCTAssertEqual(buffer.lines[11], "   s  run the sync again")
        XCTAssertEqual(buffer.style(row: 9, column: 1), .good)
    }

    func testShrinkGuardOffersSyncAnywayOnlyAfterAConfirmation() throws {
        let (loop, buffer) = f.loop([SyncScreen(context: f.context, profile: profile, request: SyncRequest())])
        f.syncs[0].job.finish(.success(summary(.ran(.unavailable(.shrinkSuspected(deletes: 8, known: 10))))))
        f.press([], loop, buffer)
        XCTAssertEqual(f.context.lastStatus, .unavailable)
        XCTAssertTrue(buffer.text.contains("Not synced"), buffer.text)
        XCTAssertTrue(buffer.text.contains("would delete 8 of the 10 files"), buffer.text)
        XCTAssertTrue(buffer.text.contains("a  sync anyway (lift the guard)"), buffer.text)

        f.press([.character("a")], loop, buffer)
        XCTAssertTrue(buffer.text.contains("Sync anyway?"), buffer.text)
        XCTAssertTrue(buffer.text.contains("This run deletes 8 of the 10 files"), buffer.text)
        f.press([.character("n")], loop, buffer)
        XCTAssertEqual(f.syncs.count, 1, "no is no")
        XCTAssertFalse(buffer.text.contains("Sync anyway?"))

        f.press([.character("a"), .character("y")], loop, buffer)
        XCTAssertEqual(f.syncs.count, 2)
        XCTAssertEqual(f.syncs[1].job.request.allowShrink, true)
        XCTAssertEqual(f.syncs[1].job.request.consent, false)
    }

    func testTheFirstSyncAsksForConsentAndYesRunsItWithConsent() throws {
        let (loop, buffer) = f.loop([SyncScreen(context: f.context, profile: profile, request: SyncRequest())])
        f.syncs[0].job.finish(.success(summary(.ran(.unavailable(.needsConsent)))))
        f.press([], loop, buffer)
        XCTAssertTrue(buffer.text.contains("this is the first sync to"), buffer.text)
        XCTAssertTrue(buffer.text.contains("y  allow the first write to this remote, and sync"), buffer.text)
        f.press([.character("a")], loop, buffer)
        XCTAssertEqual(f.syncs.count, 1, "a key not offered for this outcome does nothing")
        f.press([.character("y")], loop, buffer)
        XCTAssertEqual(f.syncs.count, 2)
        XCTAssertEqual(f.syncs[1].job.request.consent, true)
    }

    func testEveryUnavailableReasonIsExplainedWithTheKeyThatActsOnIt() throws {
        let reasons: [(UnavailableReason, String?)] = [
            (.noAccount, "s"), (.needsConsent, "y"), (.restorePending, "r"),
            (.shrinkSuspected(deletes: 5, known: 6), "a"), (.writeHeld(reason: "moving disks"), "h"),
        ]
        for (reason, key) in reasons {
            let screen = SyncScreen(context: f.context, profile: profile, request: SyncRequest())
            f.syncs.last?.job.finish(.success(summary(.ran(.unavailable(reason)))))
            let text = f.frame([screen], columns: 100, rows: 30).replacingOccurrences(of: "\n ", with: " ")
            let what = Explanations.of(reason, remote: profile.remote).what
            XCTAssertTrue(text.contains(what), "\(reason): \(text)")
            XCTAssertFalse(text.contains("--"), "no command-line flags in the TUI's words: \(text)")
            if let key { XCTAssertTrue(text.contains("   \(key)  "), "\(reason) offers \(key): \(text)") }
        }
    }

    func testAHeldSyncOpensTheHoldAndClearingItOnlyClearsIt() throws {
        let profile = try f.profile()
        try f.app.setHold(profile, .held(reason: "moving disks"))
        let (loop, buffer) = f.loop([SyncScreen(context: f.context, profile: profile, request: SyncRequest())])
        f.syncs[0].job.finish(.success(summary(.ran(.unavailable(.writeHeld(reason: "moving disks"))))))
        f.press([.character("h")], loop, buffer)
        XCTAssertTrue(loop.top is HoldScreen)
        f.press([.character("c"), .escape], loop, buffer)
        XCTAssertEqual(try f.app.hold(profile), WriteHold.none)
        XCTAssertTrue(loop.top is SyncScreen)
        XCTAssertEqual(f.syncs.count, 1, "clearing the hold started a sync")
        XCTAssertTrue(buffer.text.replacingOccurrences(of: "\n ", with: " ").contains("The hold is cleared now"), buffer.text)
        f.press([.character("s")], loop, buffer)
        XCTAssertEqual(f.syncs.count, 2, "s runs the sync once the hold is cleared")
    }

    func testAHoldThatStoppedARunningSyncSaysWhatItHadWritten() throws {
        let profile = try f.profile()
        try f.app.setHold(profile, .held(reason: "moving disks"))
        let (loop, buffer) = f.loop([SyncScreen(context: f.context, profile: profile, request: SyncRequest())])
        var report = SyncReport()
        report.uploaded = ["a.bin", "b.bin", "c.bin"]
        report.uploadedBytes = 52_428_800
        f.syncs[0].job.finish(.success(summary(.ran(.held(reason: "moving disks", report)))))
        f.press([], loop, buffer)
        let text = buffer.text.replacingOccurrences(of: "\n ", with: " ")
        XCTAssertTrue(text.contains("Stopped by the write hold (moving disks) after 3 files uploaded (50.0 MiB)"), text)
        XCTAssertFalse(text.contains("nothing was written"), text)
        XCTAssertTrue(text.contains("h  open the write hold"), "the hold is one key away: \(text)")
        XCTAssertEqual(f.context.lastStatus, .unavailable)
        f.press([.character("h"), .character("c"), .escape], loop, buffer)
        XCTAssertTrue(buffer.text.replacingOccurrences(of: "\n ", with: " ").contains("The hold is cleared now; s finishes the sync."), buffer.text)
        XCTAssertEqual(f.syncs.count, 1)
    }

    func testAnInterruptedSyncSaysWhatWasKept() throws {
        let screen = SyncScreen(context: f.context, profile: profile, request: SyncRequest())
        f.syncs[0].job.finish(.failure(AppError(.interrupted, "interrupted")))
        let text = f.frame([screen])
        XCTAssertTrue(text.contains(" Stopped\n"), text)
        XCTAssertTrue(text.contains("Stopped: what was uploaded is recorded, and the next run"), text)
        XCTAssertEqual(f.context.lastStatus, .interrupted)
    }
}
