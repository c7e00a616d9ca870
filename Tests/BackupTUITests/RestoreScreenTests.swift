// The restore screen: the plan by group (required first, marked) with a bar each and one
// overall, the placement prompt for each finished group with its keys, and the outcome.

@testable import BackupTUI
@testable import BackupApp
@testable import BackupEngine
@testable import BackupTree
import BackupTerminal
import XCTest

final class RestoreScreenTests: XCTestCase {
    private var f: TUIFixture!
    private let profile = Profile(name: "default", source: "/home/alice/Documents", remote: "/mnt/backup/documents")

    override func setUpWithError() throws {
        f = try TUIFixture()
        f.restorePlan = samplePlan()
    }

    override func tearDown() {
        f.dir.cleanup()
    }

    private func started() throws -> (RestoreScreen, RestoreJob) {
        let screen = RestoreScreen(context: f.context, profile: profile, request: RestoreRequest(target: "/tmp/restored", overwrite: true))
        let job = try XCTUnwrap(f.restores.last?.job)
        job.receive(.phase("listing"))
        job.receive(.phase("restoring"))
        job.receive(.restoreProgress(RestoreProgress(filesDone: 0, filesStaged: 0, filesTotal: 5, groupsDone: 0, groupsTotal: 2), transfer: .sent(0, current: nil)))
        return (screen, job)
    }

    func testThePromptShowsTheGroupItsConflictsAndItsKeys() async throws {
        let (screen, job) = try started()
        job.receive(.restoreProgress(RestoreProgress(filesDone: 3, filesStaged: 0, filesTotal: 5, groupsDone: 1, groupsTotal: 2), transfer: .sent(24, current: nil)))
        let plan = samplePlan()
        let papers = offer(plan, group: "papers")
        let first = Task { await job.decide(papers) }
        eventually("the papers prompt") { job.snapshot.offer != nil }
        job.answer(.placed)
        _ = await first.value
        job.receive(.restoreProgress(RestoreProgress(filesDone: 3, filesStaged: 2, filesTotal: 5, groupsDone: 1, groupsTotal: 2), transfer: .sent(3_000_024, current: "photos/写真.jpg")))
        let asked = Task { await job.decide(offer(plan, group: "photos", conflicts: ["photos/beach.jpg"])) }
        eventually("the photos prompt") { job.snapshot.offer != nil }

        assertScreen(f.frame([screen]), """
             backup · restore "default"                          ? help

             From     /mnt/backup/documents
             Into     /tmp/restored
             Backup   found: 5 files in 2 groups; ! = required

             ! papers   ██████████████ 3/3 placed
               photos   ██████████████ 2 downloaded and checked: place?

             Placed   █████████░░░░░░ 3 of 5, 2 downloaded and checked
             Received 2.9 MiB
             Elapsed  0:00  |
             ┌─ Place group "photos"? ────────────────────────────────┐
             │ 2 files downloaded and checked (2.9 MiB).              │
             │ 1 would replace a different local file:                │
             │   photos/beach.jpg                                     │
             │                                                        │
             │ p place   r reject   a place all remaining   l list    │
             └────────────────────────────────────────────────────────┘
             ? help  q quit
            """)

        let (loop, buffer) = f.loop([screen])
        f.press([.character("l")], loop, buffer)
        XCTAssertTrue(buffer.text.contains("│ ≠ photos/beach.jpg"), buffer.text)
        XCTAssertTrue(buffer.text.contains("│   photos/写真.jpg"), buffer.text)
        f.press([.character("r")], loop, buffer)
        let decision = await asked.value
        XCTAssertEqual(decision, .rejected)
        XCTAssertNil(screen.prompt)
        // Its bar says what its words say: none of it is placed.
        XCTAssertTrue(buffer.text.contains("photos   ░░░░░░░░░░░░░░ 0/2 placed, rejected"), buffer.text)
    }

    func testPlacingOverADifferingFileAsksASecondTimeAndKeepsMineByDefault() async throws {
        let (screen, job) = try started()
        let (loop, buffer) = f.loop([screen])
        let plan = samplePlan()
        for (keys, expected) in [([Key.character("p"), .enter], PlacementDecision.placedKeepingLocal(["photos/beach.jpg"])),
                                 ([.character("p"), .escape, .character("p"), .character("o")], .placed),
                                 ([.character("a"), .character("k")], .placedKeepingLocal(["photos/beach.jpg"]))] {
            let asked = Task { await job.decide(offer(plan, group: "photos", conflicts: ["photos/beach.jpg"])) }
            eventually("the photos prompt") { job.snapshot.offer != nil }
            f.press([keys[0]], loop, buffer)
            XCTAssertTrue(buffer.text.contains("Overwrite your files in \"photos\"?"), buffer.text)
            XCTAssertTrue(buffer.text.contains("/target/photos/beach.jpg"), buffer.text)
            XCTAssertTrue(buffer.text.contains("o overwrite   k keep mine"), buffer.text)
            XCTAssertNotNil(screen.prompt, "answered at the first key")
            f.press(Array(keys.dropFirst()), loop, buffer)
            let decision = await asked.value
            XCTAssertEqual(decision, expected, "\(keys)")
        }
    }

    func testPlaceAndPlaceAllRemainingAnswerThePrompt() async throws {
        let (screen, job) = try started()
        let (loop, buffer) = f.loop([screen])
        let plan = samplePlan()
        let first = Task { await job.decide(offer(plan, group: "papers")) }
        eventually("the prompt") { job.snapshot.offer != nil }
        f.press([], loop, buffer)
        XCTAssertTrue(buffer.text.contains("Place group \"papers (required)\"?"), buffer.text)
        XCTAssertTrue(buffer.text.contains("Required: the restore stops here if you reject it."), buffer.text)
        f.press([.character("p")], loop, buffer)
        let placed = await first.value
        XCTAssertEqual(placed, .placed)

        let second = Task { await job.decide(offer(plan, group: "photos")) }
        eventually("the prompt") { job.snapshot.offer != nil }
        f.press([.character("a")], loop, buffer)
        let all = await second.value
        XCTAssertEqual(all, .placed)
        XCTAssertTrue(job.snapshot.placeAll)
    }

    func testAPartialRestoreOffersToResume() throws {
        let (screen, job) = try started()
        var summary = RestoreSummary(result: .restored(.partial(pending: ["photos/beach.jpg", "photos/写真.jpg"])), target: "/tmp/restored")
        summary.placed = 3
        job.finish(.success(summary))
        let (loop, buffer) = f.loop([screen])
        f.press([], loop, buffer)
        XCTAssertEqual(f.context.lastStatus, .incomplete)
        XCTAssertTrue(buffer.text.contains("Incomplete: 3 placed, 2 pending"), buffer.text)
        XCTAssertTrue(buffer.lines.last?.contains("c resume") == true, buffer.text)
        f.press([.character("c")], loop, buffer)
        XCTAssertEqual(f.restores.count, 2)
        XCTAssertEqual(f.restores.last?.job.request.resume, true)
    }

    func testWhatTheProbeFoundIsSaidInWords() throws {
        let screen = RestoreScreen(context: f.context, profile: profile, request: RestoreRequest())
        let job = try XCTUnwrap(f.restores.last?.job)
        job.finish(.success(RestoreSummary(result: .probe(.none), target: "/home/alice/Documents")))
        let text = f.frame([screen])
        XCTAssertTrue(text.contains("Backup   none: the remote holds no files"), text)
        XCTAssertTrue(text.contains("The remote holds no files: there is nothing to"), text)
        XCTAssertEqual(f.context.lastStatus, .unavailable)
    }

    func testAHostileGroupAndFileNameAreDrawnAsVisibleEscapes() async throws {
        let group = "evil\u{1B}[2J"
        let name = "evil/x\u{1B}]52;c;cHduZWQ=\u{07}\n\u{202E}gnp.exe"
        let plan = [recorded(name, group: group)]
        f.restorePlan = plan
        let screen = RestoreScreen(context: f.context, profile: profile, request: RestoreRequest(target: "/tmp/restored"))
        let job = try XCTUnwrap(f.restores.last?.job)
        job.receive(.phase("restoring"))
        job.receive(.restoreProgress(RestoreProgress(filesDone: 0, filesStaged: 1, filesTotal: 1, groupsDone: 0, groupsTotal: 1), transfer: .sent(100, current: name)))
        let asked = Task { await job.decide(offer(plan, group: group)) }
        eventually("the prompt") { job.snapshot.offer != nil }
        let (loop, buffer) = f.loop([screen], columns: 100, rows: 24)
        f.press([.character("l")], loop, buffer)

        XCTAssertTrue(buffer.text.contains("Place group \"evil\\x1b[2J\"?"), buffer.text)
        XCTAssertTrue(buffer.text.contains("evil/x\\x1b]52;c;cHduZWQ=\\x07\\n\\u{202E}gnp.exe"), buffer.text)
        XCTAssertFalse(buffer.text.contains("?[2J"), "not a bare question mark: the escape says what the byte was")
        f.press([.character("r")], loop, buffer)
        _ = await asked.value
    }
}

