// RestoreJob: the placement callback parks the engine until the person answers, "place all
// remaining" answers later groups unasked (but never a group that would replace a
// different local file), and cancelling answers "reject" so the engine can stop and keep
// its record, whether the prompt is up yet or not.

@testable import BackupTUI
@testable import BackupEngine
@testable import BackupTree
import XCTest

/// A file of a recorded plan.
func recorded(_ path: String, group: String?, required: Bool = false, status: RestoreFileStatus = .pending,
              attempts: Int = 0, size: Int64 = 100, index: Int = 0) -> RecordedFile {
    RecordedFile(
        index: index, file: RestoreFile(remotePath: path, required: required, group: group, size: size),
        status: status, attempts: attempts, lastError: attempts > 0 ? "rejected at placement" : nil)
}

/// A plan of two groups: papers (required, 3 files) and photos (2 files).
func samplePlan() -> [RecordedFile] {
    [
        recorded("papers/a.txt", group: "papers", required: true), recorded("papers/b.txt", group: "papers", required: true),
        recorded("papers/c.txt", group: "papers", required: true),
        recorded("photos/beach.jpg", group: "photos", size: 2_000_000), recorded("photos/写真.jpg", group: "photos", size: 1_000_000),
    ]
}

func offer(_ plan: [RecordedFile], group: String, conflicts: [String] = [], failed: [String] = []) -> PlacementOffer {
    let files = plan.map(\.file).filter { $0.group == group }
    return PlacementOffer(
        group: RestoreGroup(
            name: group, required: files.contains(where: \.required), files: RestoreFileList(files.filter { !failed.contains($0.remotePath) }),
            failed: RestoreFileList(files.filter { failed.contains($0.remotePath) })),
        conflicts: conflicts.map { PlacementConflict(remotePath: $0, localPath: "/target/" + $0, kind: .differentFile) })
}

/// Waits (bounded) until `condition` holds.
func eventually(_ what: String, timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline {
            XCTFail("timed out waiting for \(what)", file: file, line: line)
            return
        }
        usleep(2_000)
    }
}

final class RestoreJobTests: XCTestCase {
    private func job(placeAll: Bool = false) -> RestoreJob {
        let plan = samplePlan()
        let job = RestoreJob(request: .init(), placeAll: placeAll, loadPlan: { plan })
        job.receive(.phase("restoring"))
        job.receive(.restoreProgress(RestoreProgress(filesDone: 0, filesStaged: 0, filesTotal: 5, groupsDone: 0, groupsTotal: 2), transfer: .sent(0, current: nil)))
        return job
    }

    func testThePlanIsReadOnceWhenTheEngineFirstReports() {
        let job = job()
        XCTAssertEqual(job.snapshot.plan?.groups.map(\.label), ["papers", "photos"])
        XCTAssertEqual(job.snapshot.plan?.groups.map(\.required), [true, false])
        XCTAssertEqual(job.snapshot.plan?.filesTotal, 5)
    }

    func testThePromptWaitsForTheAnswer() async {
        let job = job()
        let asked = Task { await job.decide(offer(samplePlan(), group: "photos")) }
        eventually("the prompt") { job.snapshot.offer != nil }
        XCTAssertEqual(job.snapshot.offer?.group.label, "photos")
        XCTAssertEqual(job.snapshot.plan?.groups[1].stage, .asking)
        job.answer(.rejected)
        let decision = await asked.value
        XCTAssertEqual(decision, .rejected)
        XCTAssertNil(job.snapshot.offer)
        XCTAssertEqual(job.snapshot.plan?.groups[1].stage, .rejected)
    }

    func testCancellingAnswersRejectWhileThePromptIsUp() async {
        let job = job()
        let asked = Task { await job.decide(offer(samplePlan(), group: "photos")) }
        eventually("the prompt") { job.snapshot.offer != nil }
        job.cancel()
        let decision = await asked.value
        XCTAssertEqual(decision, .rejected)
    }

    func testACancelledJobRejectsAtOnceInsteadOfAsking() async {
        let job = job()
        job.cancel()
        let decision = await job.decide(offer(samplePlan(), group: "photos"))
        XCTAssertEqual(decision, .rejected)
        XCTAssertNil(job.snapshot.offer, "no prompt for a job that is stopping")
    }

    func testCancellingTheTaskThatAsksAnswersReject() async {
        let job = job()
        let asked = Task { await job.decide(offer(samplePlan(), group: "photos")) }
        eventually("the prompt") { job.snapshot.offer != nil }
        asked.cancel()
        let decision = await asked.value
        XCTAssertEqual(decision, .rejected)
    }

    func testPlaceAllRemainingPlacesLaterGroupsUnaskedButNotOnesWithConflicts() async {
        let plan = samplePlan()
        let job = job()
        let first = Task { await job.decide(offer(plan, group: "papers")) }
        eventually("the prompt") { job.snapshot.offer != nil }
        job.placeAllRemaining()
        let firstDecision = await first.value
        XCTAssertEqual(firstDecision, .placed)
        let unasked = await job.decide(offer(plan, group: "photos"))
        XCTAssertEqual(unasked, .placed, "no prompt after place all remaining")
        XCTAssertEqual(job.snapshot.plan?.groups.map(\.stage), [.placed, .placed])
        XCTAssertEqual(job.snapshot.plan?.filesPlaced, 5)

        let conflicting = Task { await job.decide(offer(plan, group: "photos", conflicts: ["photos/beach.jpg"])) }
        eventually("the prompt for a group with a conflict") { job.snapshot.offer != nil }
        job.answer(.rejected)
        let decision = await conflicting.value
        XCTAssertEqual(decision, .rejected)
    }

    func testPlaceAllFromTheCommandLineNeverAsks() async {
        let job = job(placeAll: true)
        let decision = await job.decide(offer(samplePlan(), group: "papers"))
        XCTAssertEqual(decision, .placed)
    }

    func testEventsKeepOnlyTheLatestProgress() {
        let job = job()
        let threads = 4
        let perThread = 5_000
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for i in 0..<perThread {
                job.receive(.restoreProgress(
                    RestoreProgress(filesDone: 0, filesStaged: 0, filesTotal: 5, groupsDone: 0, groupsTotal: 2),
                    transfer: .sent(Int64(i), current: "t\(thread)")))
            }
        }
        job.receive(.restoreProgress(RestoreProgress(filesDone: 3, filesStaged: 1, filesTotal: 5, groupsDone: 1, groupsTotal: 2), transfer: .sent(9_999, current: nil)))
        let state = job.snapshot
        XCTAssertEqual(state.transfer.reading.bytes, 9_999)
        XCTAssertEqual(state.progress?.filesDone, 3)
        XCTAssertEqual(state.version, 2 + threads * perThread + 1, "every event counted, none queued")
    }
}
