// RestorePlanView: the plan by group, built from the record and kept current from the
// engine's events and the placement answers.

@testable import BackupTUI
@testable import BackupEngine
import XCTest

final class RestorePlanViewTests: XCTestCase {
    func testGroupsFollowThePlanWithTheirRecordedState() {
        var files = samplePlan()
        files[0].status = .done
        files[3].status = .downloaded
        files[3].attempts = 1
        files[3].lastError = "rejected at placement"
        files.append(recorded("loose.txt", group: nil))
        let plan = RestorePlanView(files: files)
        XCTAssertEqual(plan.groups.map(\.label), ["papers", "photos", "loose.txt"], "a file without a group is its own group")
        XCTAssertEqual(plan.groups.map(\.placed), [1, 0, 0])
        XCTAssertEqual(plan.groups.map(\.staged), [0, 1, 0])
        XCTAssertEqual(plan.groups[1].attempts, 1)
        XCTAssertEqual(plan.groups[1].lastError, "rejected at placement")
        XCTAssertEqual([plan.filesPlaced, plan.filesStaged, plan.filesPending, plan.filesWithFailures], [1, 1, 4, 1])
    }

    func testDownloadsCountTowardsTheGroupInFlight() {
        var plan = RestorePlanView(files: samplePlan())
        let counts = { (staged: Int) in RestoreProgress(filesDone: 0, filesStaged: staged, filesTotal: 5, groupsDone: 0, groupsTotal: 2) }
        plan.progress(counts(0))
        plan.downloading("papers/a.txt")
        plan.progress(counts(1))
        plan.downloading("papers/b.txt")
        plan.progress(counts(2))
        XCTAssertEqual(plan.groups[0].staged, 2)
        XCTAssertEqual(plan.groups[0].stage, .downloading)
        XCTAssertEqual(plan.groups[1].stage, .pending)
    }

    func testAnswersMoveFilesFromStagedToPlaced() {
        let files = samplePlan()
        var plan = RestorePlanView(files: files)
        let papers = offer(files, group: "papers")
        plan.offered(papers.group)
        XCTAssertEqual(plan.groups[0].stage, .asking)
        XCTAssertEqual(plan.groups[0].staged, 3)
        plan.decided(papers.group, .placed)
        XCTAssertEqual(plan.groups[0].placed, 3)
        XCTAssertEqual(plan.groups[0].staged, 0)
        XCTAssertEqual(plan.groups[0].stage, .placed)

        let photos = offer(files, group: "photos", failed: ["photos/写真.jpg"])
        plan.offered(photos.group)
        XCTAssertEqual(plan.groups[1].staged, 1)
        XCTAssertEqual(plan.groups[1].failedFiles, 1)
        plan.decided(photos.group, .rejected)
        XCTAssertEqual(plan.groups[1].stage, .rejected)
        XCTAssertEqual(plan.groups[1].attempts, 1)
        XCTAssertEqual(plan.filesPlaced, 3)
    }
}
