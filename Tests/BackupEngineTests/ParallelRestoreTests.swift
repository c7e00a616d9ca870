// Restores with several downloads in flight keep the restore rules: never more than
// `transfers` at once, groups placed one after another in plan order (a group only once all
// of its downloads ended, the next group's downloads only after that), every finished
// download recorded before a required failure is returned, one attempt per failed file, and
// a cancelled run records what finished and leaves no temporary behind.

import BackupEngine
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class ParallelRestoreTests: XCTestCase {
    /// Downloads in flight, and what happened in order: download starts and ends, placements.
    private final class Flight: Sendable {
        enum Event: Equatable {
            case started(String)
            case ended(String)
            case placed(String)
        }

        private let state = Mutex<(events: [Event], inFlight: Int, most: Int, started: Int)>(([], 0, 0, 0))

        /// Counts a download started; returns how many have started so far, this one included.
        @discardableResult
        func start(_ path: String) -> Int {
            state.withLock { state in
                state.events.append(.started(path))
                state.inFlight += 1
                state.most = max(state.most, state.inFlight)
                state.started += 1
                return state.started
            }
        }

        func end(_ path: String) {
            state.withLock { state in
                state.events.append(.ended(path))
                state.inFlight -= 1
            }
        }

        func placed(_ label: String) { state.withLock { $0.events.append(.placed(label)) } }

        var events: [Event] { state.withLock { $0.events } }
        var most: Int { state.withLock { $0.most } }
        var started: Int { state.withLock { $0.started } }
    }

    /// Collects what `onFileFailed` was told.
    private final class FailureLog: Sendable {
        private let paths = Mutex<[String]>([])
        var all: [String] { paths.withLock { $0 } }
        var callback: @Sendable (RestoreFile, RestoreFailure) -> Void { { file, _ in self.paths.withLock { $0.append(file.remotePath) } } }
    }

    /// Waits until `condition` holds, at most `timeout`: a broken engine fails the test
    /// rather than hanging it.
    private static func wait(timeout: Duration = .seconds(2), until condition: @Sendable () -> Bool) async {
        let deadline = ContinuousClock.now + timeout
        while !condition() && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(1)) }
    }

    private func files(_ prefix: String, _ count: Int) -> [(String, String)] {
        (0..<count).map { ("\(prefix)/\($0).txt", "\(prefix) file \($0)") }
    }

    private func completedAt(_ outcome: RestoreOutcome, file: StaticString = #filePath, line: UInt = #line) {
        if case .completed = outcome { return }
        XCTFail("expected completed, got \(outcome)", file: file, line: line)
    }

    /// Ends of downloads (and the failure of a download that threw) are counted by the hooks.
    private func track(_ f: RestoreFixture, _ flight: Flight, before: @escaping @Sendable (String, Int) async throws -> Void) {
        f.storage.setHook { call, _ in
            guard case .download(let path) = call else { return }
            let started = flight.start(path)
            do {
                try await before(path, started)
            } catch {
                flight.end(path)
                throw error
            }
        }
        f.storage.setAfterHook { call, _ in
            if case .download(let path) = call { flight.end(path) }
        }
    }

    // MARK: Transfers

    func testRestoreDownloadsUpToTransfersAtOnce() async throws {
        for required in [true, false] {
            let backup = files("f", 12)
            let f = try await RestoreFixture(backup, transfers: 3)
            let flight = Flight()
            track(f, flight) { _, started in
                // The first three wait until three are in flight: an engine that downloads one
                // at a time is seen as one (after the timeout), not hung.
                if started <= 3 { await Self.wait { flight.started >= 3 } }
                try await Task.sleep(for: .milliseconds(5))
            }
            let plan = try await f.plan(backup.map { ($0.0, required, "all") })
            completedAt(try await f.engine.start(plan))
            XCTAssertEqual(flight.most, 3, "required: \(required): up to transfers downloads at once, never more")
            XCTAssertEqual(f.downloads.sorted(), backup.map(\.0).sorted(), "each file downloaded once")
            for (path, text) in backup { XCTAssertEqual(f.local(path), Data(text.utf8), path) }
            XCTAssertEqual(try f.record.files().map(\.status), Array(repeating: .done, count: backup.count))
            XCTAssertEqual(f.temporaries, [])
        }
    }

    func testRestoreEngineDownloadsOneAtATimeByDefault() async throws {
        let backup = files("f", 6)
        let f = try await RestoreFixture(backup)
        let flight = Flight()
        track(f, flight) { _, _ in try await Task.sleep(for: .milliseconds(2)) }
        completedAt(try await f.engine.start(try await f.plan(backup.map { ($0.0, false, "all") })))
        XCTAssertEqual(flight.most, 1)
        XCTAssertEqual(f.downloads, backup.map(\.0), "in plan order")
    }

    // MARK: Rule 3 in parallel

    func testParallelRestoreRecordsEveryFinishedDownloadBeforeReturningARequiredFailure() async throws {
        let backup = files("r", 8)
        let failures = FailureLog()
        let f = try await RestoreFixture(backup + [("notes.md", "notes")], transfers: 4, onFileFailed: failures.callback)
        let flight = Flight()
        track(f, flight) { path, started in
            if started <= 4 { await Self.wait { flight.started >= 4 } }
            // r/1 fails at once; the other three in flight end well after it.
            if path == "r/1.txt" { throw CloudError(.transport, "injected") }
            try await Task.sleep(for: .milliseconds(100))
        }
        let log = RestoreProgressLog()
        let placement = ScriptedPlacement()
        let plan = try await f.plan(backup.map { ($0.0, true, "docs") } + [("notes.md", false, nil)])
        let outcome = try await f.engine.start(plan, placement: placement, onProgress: log.callback)

        XCTAssertEqual(outcome, .failed(.cloud(CloudError(.transport, "injected"))))
        XCTAssertEqual(f.downloads.sorted(), backup.prefix(4).map(\.0), "no download starts after the failure")
        XCTAssertEqual(flight.events.filter { if case .ended = $0 { true } else { false } }.count, 4, "those in flight ended")
        XCTAssertEqual(placement.offered, [], "a required group with a failed file is not placed")
        // What the in-flight downloads fetched is recorded (a second connection sees it), the
        // failure counts its attempt, and nothing else was touched.
        let recorded = try RestoreRecord(path: f.recordPath).files()
        XCTAssertEqual(recorded.map(\.status), [.downloaded, .pending, .downloaded, .downloaded, .pending, .pending, .pending, .pending, .pending])
        XCTAssertEqual(recorded.map(\.attempts), [0, 1, 0, 0, 0, 0, 0, 0, 0])
        for index in [0, 2, 3] { XCTAssertEqual(f.local(backup[index].0), Data(backup[index].1.utf8)) }
        XCTAssertNil(f.local("notes.md"), "optional files untouched")
        XCTAssertEqual(f.temporaries, [])
        XCTAssertEqual(failures.all, ["r/1.txt"])
        XCTAssertEqual(log.all.last?.filesStaged, 3)

        // The resume downloads only what is not staged.
        f.storage.setHook(nil)
        f.storage.setAfterHook(nil)
        f.storage.resetCalls()
        try f.reopen(transfers: 4)
        completedAt(try await f.engine.resume())
        XCTAssertEqual(f.downloads.sorted(), ["notes.md", "r/1.txt", "r/4.txt", "r/5.txt", "r/6.txt", "r/7.txt"])
    }

    func testParallelRestoreReturnsTheFirstRequiredFailureInPlanOrder() async throws {
        let backup = files("r", 6)
        let failures = FailureLog()
        let f = try await RestoreFixture(backup, transfers: 3, onFileFailed: failures.callback)
        let flight = Flight()
        track(f, flight) { path, started in
            if started <= 3 { await Self.wait { flight.started >= 3 } }
            // r/2 fails first; r/1, earlier in the plan, fails after it; r/0 lands last (had it
            // landed first, its free slot would start r/3 before r/2's failure is seen).
            if path == "r/1.txt" {
                try await Task.sleep(for: .milliseconds(80))
                throw CloudError(.transport, "r/1 failed")
            }
            if path == "r/2.txt" { throw CloudError(.offline, "r/2 failed") }
            try await Task.sleep(for: .milliseconds(160))
        }
        let plan = try await f.plan(backup.map { ($0.0, true, "docs") })
        let outcome = try await f.engine.start(plan)
        XCTAssertEqual(outcome, .failed(.cloud(CloudError(.transport, "r/1 failed"))))
        XCTAssertEqual(try f.record.files().map(\.attempts), [0, 1, 1, 0, 0, 0])
        XCTAssertEqual(try f.record.files().map(\.status), [.downloaded, .pending, .pending, .pending, .pending, .pending])
        XCTAssertEqual(failures.all, ["r/2.txt", "r/1.txt"], "each failed file told once, as it failed")
    }

    // MARK: Rule 2: one group at a time, in plan order

    func testParallelRestorePlacesGroupsInPlanOrder() async throws {
        let docs = files("docs", 5), photos = files("photos", 6), music = files("music", 4)
        let backup = docs + photos + music + [("notes.md", "notes")]
        let f = try await RestoreFixture(backup, transfers: 4)
        let flight = Flight()
        track(f, flight) { _, _ in try await Task.sleep(for: .milliseconds(Int.random(in: 1...10))) }
        let recordPath = f.recordPath
        let placement = ScriptedPlacement(check: { group in
            flight.placed(group.label)
            // Offered only once every file of it is recorded as downloaded.
            let recorded = try RestoreRecord(path: recordPath).files()
            for file in group.files {
                XCTAssertEqual(recorded.first { $0.file.remotePath == file.remotePath }?.status, .downloaded, file.remotePath)
            }
        })
        // Interleaved in the plan: photos (optional) first, docs required, notes.md required.
        var specs: [(String, Bool, String?)] = []
        for index in 0..<6 {
            specs.append((photos[index].0, false, "photos"))
            if index < docs.count { specs.append((docs[index].0, true, "docs")) }
            if index < music.count { specs.append((music[index].0, false, "music")) }
            if index == 2 { specs.append(("notes.md", true, nil)) }
        }
        let log = RestoreProgressLog()
        completedAt(try await f.engine.start(try await f.plan(specs), placement: placement, onProgress: log.callback))

        XCTAssertEqual(placement.labels, ["docs", "notes.md", "photos", "music"], "required groups first, each in plan order")
        XCTAssertEqual(placement.offered[0].files.map(\.remotePath), docs.map(\.0), "a group's files in plan order")
        XCTAssertEqual(placement.offered[2].files.map(\.remotePath), photos.map(\.0))
        // The events fall into one run per group: its downloads, then its placement.
        let members: [String: Set<String>] = [
            "docs": Set(docs.map(\.0)), "notes.md": ["notes.md"], "photos": Set(photos.map(\.0)), "music": Set(music.map(\.0)),
        ]
        var events = flight.events[...]
        for label in placement.labels {
            guard let at = events.firstIndex(of: .placed(label)) else { return XCTFail("\(label) not placed") }
            let before = events[..<at]
            XCTAssertEqual(before.count, members[label].map { $0.count * 2 }, "\(label): its downloads, started and ended, and nothing else")
            for event in before {
                switch event {
                case .started(let path), .ended(let path): XCTAssertTrue(members[label]?.contains(path) ?? false, "\(path) before \(label) was placed")
                case .placed(let other): XCTFail("\(other) placed while \(label) downloaded")
                }
            }
            events = events[(at + 1)...]
        }
        XCTAssertGreaterThan(flight.most, 1, "downloads overlapped")
        // Progress: one report per recorded step, each a change.
        let reports = log.all
        for (previous, next) in zip(reports, reports.dropFirst()) { XCTAssertNotEqual(previous, next, "a report without a change") }
        XCTAssertEqual(reports.count, 1 + backup.count + 4, "the first, one per download, one per placement")
        XCTAssertEqual(reports.map(\.filesStaged).max(), photos.count)
        XCTAssertEqual(reports.last, RestoreProgress(filesDone: backup.count, filesStaged: 0, filesTotal: backup.count, groupsDone: 4, groupsTotal: 4))
    }

    // MARK: Rule 4 in parallel

    func testParallelRestoreCountsOneAttemptPerFailedFile() async throws {
        let backup = files("p", 10)
        let failing: Set<String> = ["p/2.txt", "p/5.txt", "p/7.txt"]
        let failures = FailureLog()
        let f = try await RestoreFixture(backup, transfers: 4, onFileFailed: failures.callback)
        let flight = Flight()
        track(f, flight) { path, _ in
            try await Task.sleep(for: .milliseconds(Int.random(in: 1...10)))
            if failing.contains(path) { throw CloudError(.transport, "flaky") }
        }
        let placement = ScriptedPlacement()
        let plan = try await f.plan(backup.map { ($0.0, false, "photos") })
        for run in 1...2 {
            let outcome = run == 1 ? try await f.engine.start(plan, placement: placement) : try await f.engine.resume(placement: placement)
            XCTAssertEqual(outcome, .partial(pending: failing.sorted()), "run \(run)")
            XCTAssertEqual(try f.record.files().map(\.attempts), backup.map { failing.contains($0.0) ? run : 0 }, "run \(run)")
            XCTAssertEqual(failures.all.sorted(), failing.sorted().flatMap { Array(repeating: $0, count: run) }, "run \(run): told once per failed file")
        }
        // What landed is placed, the rest named as failed, both in plan order.
        XCTAssertEqual(placement.offered.first?.files.map(\.remotePath), backup.map(\.0).filter { !failing.contains($0) })
        XCTAssertEqual(placement.offered.first?.failed.map(\.remotePath), failing.sorted())
        XCTAssertEqual(placement.offered.count, 1, "the second run had nothing new to place")
        XCTAssertEqual(f.temporaries, [])
        XCTAssertGreaterThan(flight.most, 1, "downloads overlapped")
    }

    // MARK: Rule 5 in parallel: cancellation

    func testCancellingAParallelRestoreRecordsWhatFinishedAndDiscardsTheRest() async throws {
        let backup = files("c", 8)
        let f = try await RestoreFixture(backup, transfers: 4)
        let flight = Flight()
        // c/0 and c/2 go on to the end once cancelled (a provider that does not stop midway);
        // c/1 and c/3 stop at once (as an HTTP transfer does).
        track(f, flight) { path, _ in
            if ["c/0.txt", "c/2.txt"].contains(path) {
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(1)) }
            } else {
                try await Task.sleep(for: .seconds(30))
            }
        }
        let log = RestoreProgressLog()
        let plan = try await f.plan(backup.map { ($0.0, false, "all") })
        let engine = f.engine
        let task = Task { try await engine.start(plan, onProgress: log.callback) }
        await Self.wait(timeout: .seconds(10)) { flight.started >= 4 }
        task.cancel()
        do {
            let outcome = try await task.value
            XCTFail("expected cancellation, got \(outcome)")
        } catch is CancellationError {
        }
        XCTAssertEqual(f.downloads.sorted(), backup.prefix(4).map(\.0), "no download starts once cancelled")
        let recorded = try RestoreRecord(path: f.recordPath).files()
        XCTAssertEqual(recorded.map(\.status), [.downloaded, .pending, .downloaded, .pending, .pending, .pending, .pending, .pending])
        XCTAssertEqual(recorded.map(\.attempts), Array(repeating: 0, count: backup.count), "a cancelled download is no failed attempt")
        XCTAssertEqual(f.temporaries, [], "the cancelled downloads' temporaries are removed")
        XCTAssertEqual(log.all.last?.filesStaged, 2)

        f.storage.setHook(nil)
        f.storage.setAfterHook(nil)
        f.storage.resetCalls()
        try f.reopen(transfers: 4)
        completedAt(try await f.engine.resume())
        XCTAssertEqual(f.downloads.sorted(), ["c/1.txt", "c/3.txt", "c/4.txt", "c/5.txt", "c/6.txt", "c/7.txt"])
        for (path, text) in backup { XCTAssertEqual(f.local(path), Data(text.utf8), path) }
    }

    // MARK: Rule 7 in parallel

    func testParallelRestoreChecksStagedCopiesAgainAndFetchesOnlyTheDamagedOnes() async throws {
        let backup = files("s", 8)
        let f = try await RestoreFixture(backup, transfers: 4)
        var plan = try await f.plan(backup.map { ($0.0, false, "all") })
        for index in plan.files.indices {
            plan.files[index].sha256 = SHA256Hasher.hex(Data(backup[index].1.utf8))
            plan.files[index].size = Int64(backup[index].1.utf8.count)
        }
        _ = try await f.engine.start(plan, placement: ScriptedPlacement(["all": .rejected]))
        XCTAssertEqual(try f.record.files().map(\.status), Array(repeating: .downloaded, count: backup.count))
        // Two staged copies change on disk between the runs (same size, other bytes).
        for index in [1, 6] {
            try Data(String(repeating: "x", count: backup[index].1.utf8.count).utf8).write(to: URL(fileURLWithPath: f.target + "/" + backup[index].0))
        }
        f.storage.resetCalls()
        try f.reopen(transfers: 4)
        completedAt(try await f.engine.resume())
        XCTAssertEqual(f.downloads.sorted(), [backup[1].0, backup[6].0])
        for (path, text) in backup { XCTAssertEqual(f.local(path), Data(text.utf8), path) }
    }
}
