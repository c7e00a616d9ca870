// Versions in the sync engine, over a real FolderStorage: what a run replaces or deletes is
// kept in its run's folder before it goes, a file that cannot be kept is neither replaced nor
// deleted, retention prunes exactly the runs older than keep_versions (never under a hold,
// never after a guard refused), and the change guard refuses a run that rewrites most files.

import BackupEngine
import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class VersionsEngineTests: XCTestCase {
    private let start = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15T08:00:00Z

    private func fixture(keep: TimeInterval = 30 * 86_400, policy: SyncPolicy = SyncPolicy()) throws -> (EngineFixture, TestClock) {
        let clock = TestClock(start)
        return (try EngineFixture(policy: policy, versions: VersionPolicy(keep: keep), clock: clock.read), clock)
    }

    private func kept(_ f: EngineFixture, _ run: String, _ path: String) -> String? {
        (try? Data(contentsOf: URL(fileURLWithPath: f.remoteRoot + "/" + VersionStore.path(run: run, path))))
            .map { String(decoding: $0, as: UTF8.self) }
    }

    private func runs(_ f: EngineFixture) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: f.remoteRoot + "/" + VersionStore.folder)) ?? []).sorted()
    }

    func testAReplacedFileIsKeptInItsRunsFolderBeforeTheNewContentLands() async throws {
        let (f, clock) = try fixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "one"), hashed("b.txt", "same")], marker: "m1")))
        XCTAssertEqual(runs(f), [], "a first run replaces nothing and keeps nothing")
        clock.advance(60)
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "two"), hashed("b.txt", "same")], marker: "m2")))
        let run = VersionStore.runName(clock.date)
        XCTAssertEqual(report.versions, KeptVersions(run: run, replaced: 1, deleted: 0, bytes: 3, marker: true))
        XCTAssertEqual(kept(f, run, "a.txt"), "one")
        XCTAssertNil(kept(f, run, "b.txt"), "an unchanged file is not kept")
        XCTAssertEqual(kept(f, run, SyncEngine.defaultMarkerPath), "m1", "the replaced marker is kept with the run")
        XCTAssertEqual(try f.remoteContents()["a.txt"], Data("two".utf8))
        let record = try XCTUnwrap(VersionRecord.decode(try Data(contentsOf: URL(fileURLWithPath: f.remoteRoot + "/" + VersionStore.recordPath(run: run)))))
        XCTAssertEqual(record.replaced, 1)
        XCTAssertEqual(record.deleted, 0)
        XCTAssertEqual(record.committedDate, clock.date)
        XCTAssertNotNil(record.previousDate, "the record says since when the kept marker was the backup's")
        let listed = try await f.storage.list()
        XCTAssertFalse(listed.contains { $0.path.hasPrefix(VersionStore.folder) }, "the listing shows the versions")
    }

    func testADeletedFileIsMovedIntoItsRunsFolder() async throws {
        let (f, clock) = try fixture()
        let files = (0..<6).map { hashed("d/f\($0).txt", "content \($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        clock.advance(3600)
        let report = completed(try await f.engine.sync(snapshot(Array(files.dropFirst()))))
        let run = VersionStore.runName(clock.date)
        XCTAssertEqual(report.deleted, ["d/f0.txt"])
        XCTAssertEqual(report.versions?.deleted, 1)
        XCTAssertEqual(kept(f, run, "d/f0.txt"), "content 0")
        XCTAssertNil(try f.remoteContents()["d/f0.txt"])
    }

    func testAFileWhoseOldVersionCannotBeKeptIsNeitherReplacedNorDeleted() async throws {
        let (f, clock) = try fixture()
        let files = (0..<6).map { hashed("f\($0).txt", "old \($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        clock.advance(60)
        f.storage.failAlways(.keepVersion, with: CloudError(.transport, "the server refused the COPY"))
        var next = files
        next[0] = hashed("f0.txt", "new 0")
        next.removeLast()
        let report = completed(try await f.engine.sync(snapshot(next)))
        XCTAssertEqual(Set(report.keepFailures.map(\.path)), ["f0.txt", "f5.txt"])
        XCTAssertEqual(report.keepFailures.first { $0.path == "f5.txt" }?.deleting, true)
        XCTAssertEqual(report.uploaded.filter { $0 != SyncEngine.defaultMarkerPath }, [])
        XCTAssertEqual(report.deleted, [])
        let remote = try f.remoteContents()
        XCTAssertEqual(remote["f0.txt"], Data("old 0".utf8), "replaced without its old version kept")
        XCTAssertEqual(remote["f5.txt"], Data("old 5".utf8), "deleted without its old version kept")
        // The state still describes the old files, so the next run tries again, and then succeeds.
        XCTAssertEqual(try f.state.entries()["f0.txt"]?.hash, files[0].hash)
        f.storage.clearFaults()
        clock.advance(60)
        let again = completed(try await f.engine.sync(snapshot(next)))
        XCTAssertEqual(again.versions?.replaced, 1)
        XCTAssertEqual(again.versions?.deleted, 1)
        XCTAssertEqual(kept(f, VersionStore.runName(clock.date), "f0.txt"), "old 0")
        XCTAssertEqual(kept(f, VersionStore.runName(clock.date), "f5.txt"), "old 5")
    }

    func testARunThatFailsAfterKeepingSaysWhatItKept() async throws {
        let (f, clock) = try fixture()
        let files = (0..<6).map { hashed("f\($0).txt", "old \($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        clock.advance(60)
        // The first upload lands, the second fails: its old version was already kept.
        f.storage.resetCalls()
        f.storage.fail(.put, nth: 2, with: CloudError(.transport, "the server hung up"))
        var next = files
        next[0] = hashed("f0.txt", "new 0")
        next[1] = hashed("f1.txt", "new 1")
        let outcome = try await f.engine.sync(snapshot(next))
        guard case .failed(_, let report) = outcome else { return XCTFail("expected a failed run, got \(outcome)") }
        let run = VersionStore.runName(clock.date)
        XCTAssertEqual(report.versions, KeptVersions(run: run, replaced: 2, deleted: 0, bytes: 10, marker: false))
        XCTAssertEqual(kept(f, run, "f0.txt"), "old 0")
        XCTAssertEqual(kept(f, run, "f1.txt"), "old 1")
    }

    func testTwoRunsInOneSecondKeepTheirVersionsApart() async throws {
        let (f, _) = try fixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "1")])))
        let second = completed(try await f.engine.sync(snapshot([hashed("a.txt", "2")])))
        let third = completed(try await f.engine.sync(snapshot([hashed("a.txt", "3")])))
        let (one, two) = (try XCTUnwrap(second.versions?.run), try XCTUnwrap(third.versions?.run))
        XCTAssertNotEqual(one, two)
        XCTAssertLessThan(one, two, "the folders' order is the runs' order")
        XCTAssertEqual(kept(f, one, "a.txt"), "1")
        XCTAssertEqual(kept(f, two, "a.txt"), "2")
    }

    func testKeepVersionsPrunesExactlyTheRunsOlderThanIt() async throws {
        let (f, clock) = try fixture(keep: 2 * 86_400)
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "0")])))
        var names: [String] = []
        for day in 1...4 {
            clock.set(start.addingTimeInterval(Double(day) * 86_400))
            let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "\(day)")])))
            names.append(try XCTUnwrap(report.versions?.run))
        }
        // Now day 4: the runs of days 1 (3 days old) went, day 2 (exactly 2 days) stays.
        XCTAssertEqual(runs(f), [names[1], names[1] + ".json", names[2], names[2] + ".json", names[3], names[3] + ".json"])
        // A folder whose name is no run's is never pruned.
        try f.putRemote(VersionStore.folder + "/notes from me/x.txt", "mine")
        clock.set(start.addingTimeInterval(10 * 86_400))
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "4")])))
        XCTAssertEqual(report.pruned, [names[1], names[2], names[3]], "a no-op run prunes too")
        XCTAssertEqual(runs(f), ["notes from me"])
    }

    func testAHoldStopsPruning() async throws {
        let (f, clock) = try fixture(keep: 3600)
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "0")])))
        clock.advance(60)
        let first = completed(try await f.engine.sync(snapshot([hashed("a.txt", "1")])))
        let run = try XCTUnwrap(first.versions?.run)
        clock.advance(7200)
        try f.engine.setHold(.held(reason: "looking into something"))
        _ = try await f.engine.sync(snapshot([hashed("a.txt", "1")]))
        XCTAssertTrue(runs(f).contains(run), "pruned under a hold")
        try f.engine.setHold(.none)
        // A hold set by another process while the run writes (right after its marker landed):
        // the run completes, and prunes nothing.
        let statePath = f.statePath
        f.storage.setAfterHook { call, _ in
            if case .put(SyncEngine.defaultMarkerPath) = call { try StateStore(path: statePath).setHold(.held(reason: "set meanwhile")) }
        }
        let during = completed(try await f.engine.sync(snapshot([hashed("a.txt", "2")])))
        XCTAssertEqual(during.pruned, [], "pruned under a hold set while the run went on")
        XCTAssertTrue(runs(f).contains(run))
        f.storage.setAfterHook(nil)
        try f.engine.setHold(.none)
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "2")])))
        XCTAssertEqual(report.pruned, [run])
    }

    func testARunAGuardRefusedPrunesNothing() async throws {
        let (f, clock) = try fixture(keep: 3600)
        let files = (0..<10).map { hashed("f\($0).txt", "\($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        clock.advance(60)
        var changed = files
        changed[0] = hashed("f0.txt", "new")
        let report = completed(try await f.engine.sync(snapshot(changed)))
        let run = try XCTUnwrap(report.versions?.run)
        clock.advance(7200)
        let refused = try await f.engine.sync(snapshot(Array(changed.prefix(2))))
        XCTAssertEqual(refused, .unavailable(.shrinkSuspected(deletes: 8, known: 10)))
        XCTAssertTrue(runs(f).contains(run), "a refused run pruned")
    }

    func testChangeGuardRefusesARunThatRewritesMostFilesInPlace() async throws {
        let (f, clock) = try fixture()
        let files = (0..<40).map { hashed("docs/f\($0).txt", "a page of text \($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        f.storage.resetCalls()
        // Every file rewritten at its own size: the names, sizes and count do not change.
        let encrypted = files.map { hashed($0.path, "A PAGE OF TEXT " + $0.path.dropFirst(6).dropLast(4)) }
        XCTAssertEqual(encrypted.map(\.size), files.map(\.size))
        clock.advance(60)
        let outcome = try await f.engine.sync(snapshot(encrypted))
        XCTAssertEqual(outcome, .unavailable(.changeSuspected(replaces: 40, known: 40)))
        XCTAssertFalse(f.storage.calls.contains(where: \.isWrite), "the change guard let a write through")
        XCTAssertEqual(runs(f), [])

        var allowed = snapshot(encrypted)
        allowed.allowChange = true
        let report = completed(try await f.engine.sync(allowed))
        XCTAssertEqual(report.versions?.replaced, 40)
        for index in files.indices {
            XCTAssertEqual(kept(f, VersionStore.runName(clock.date), files[index].path), "a page of text \(index)")
        }
    }

    func testChangeGuardAppliesFromTwentyHashComparedFilesAndAtItsShare() async throws {
        // 19 files all rewritten: below the threshold.
        let (small, _) = try fixture()
        let few = (0..<19).map { hashed("f\($0)", "v1 \($0)") }
        _ = completed(try await small.engine.sync(snapshot(few)))
        _ = completed(try await small.engine.sync(snapshot(few.map { hashed($0.path, "v2" + $0.path) })))
        // 20 files, exactly half rewritten: allowed; one more: refused.
        let (f, _) = try fixture()
        let files = (0..<20).map { hashed("f\($0)", "v1 \($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        let half = files.enumerated().map { $0.offset < 10 ? hashed($0.element.path, "v2 \($0.offset)") : $0.element }
        _ = completed(try await f.engine.sync(snapshot(half)))
        let more = half.enumerated().map { $0.offset < 11 ? hashed($0.element.path, "v3 \($0.offset)") : $0.element }
        let refused = try await f.engine.sync(snapshot(more))
        XCTAssertEqual(refused, .unavailable(.changeSuspected(replaces: 11, known: 20)))
        // Size-compared files are not the guard's: it cannot tell a rewrite from a touch.
        let (sizedFixture, _) = try fixture()
        let big = (0..<30).map { sized("s\($0)", "v1 \($0)") }
        _ = completed(try await sizedFixture.engine.sync(snapshot(big)))
        _ = completed(try await sizedFixture.engine.sync(snapshot(big.map { sized($0.path, "v2 " + $0.path.dropFirst()) })))
    }

    func testVersionsOffKeepNothing() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "1")])))
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "2")])))
        XCTAssertNil(report.versions)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.remoteRoot + "/" + VersionStore.folder))
    }
}
