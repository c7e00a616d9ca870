// Issue 11 in the engine: what is kept is asked of the listing, the marker records what the
// remote holds, the shrink guard counts exactly, size-compared files compare their mtime;
// and the mutations the review found surviving (hold before the marker, the marker in the
// empty guard).

import BackupEngine
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class SyncSafetyTests: XCTestCase {
    // MARK: Item 2: keep asked of the listing, not the state

    func testItem02KeepPredicateKeepsListedFilesTheStateNeverKnew() async throws {
        let f = try EngineFixture()
        // Files a state never recorded: another machine's upload, or a state lost to `forget`.
        try f.putRemote("archive/2019.txt", "old year")
        try f.putRemote("stray.txt", "s")
        let keep: @Sendable (String) -> Bool = { $0.hasPrefix("archive/") }
        let run = SyncSnapshot(entries: [hashed("a.txt", "a")], marker: Data("m".utf8), keep: keep)
        guard case .wouldRun(let preview) = try await f.engine.preview(run) else { return XCTFail("expected a preview") }
        XCTAssertEqual(preview.deletes, ["stray.txt"])
        XCTAssertEqual(preview.kept, 1)
        let report = completed(try await f.engine.sync(run))
        XCTAssertEqual(report.deleted, ["stray.txt"], "only what the predicate does not keep")
        XCTAssertEqual(report.kept, 1)
        XCTAssertEqual(try f.remoteContents()["archive/2019.txt"], Data("old year".utf8))
        // The kept file is known with its listed size, and still kept on the next run.
        XCTAssertEqual(try f.state.entries()["archive/2019.txt"]?.size, 8)
        let again = completed(try await f.engine.sync(run))
        XCTAssertEqual(again.deleted, [])
    }

    // MARK: Items 4 and 11: the marker records what the remote holds

    func testItem04MarkerRecordsTheHashTheRemoteHoldsWhenAnUploadIsSkipped() async throws {
        let f = try EngineFixture()
        let old = hashed("a.txt", "version 1")
        _ = completed(try await f.engine.sync(snapshot([old, hashed("b.txt", "b1")])))

        // a.txt changed but vanished before its upload; b.txt changed and uploads.
        var vanished = hashed("a.txt", "version 2")
        vanished.source = .file(f.dir + "/local/gone.txt")
        let seen = Mutex<[StateEntry]>([])
        let run = SyncSnapshot(entries: [vanished, hashed("b.txt", "b2")], makeMarker: { held in
            let all = try held.all()
            seen.withLock { $0 = all }
            return Data("m2".utf8)
        })
        let report = completed(try await f.engine.sync(run))
        XCTAssertEqual(report.sourceFailures.count, 1)
        XCTAssertTrue(report.markerUploaded)
        let held = Dictionary(uniqueKeysWithValues: seen.withLock { $0 }.map { ($0.path, $0) })
        XCTAssertEqual(held.keys.sorted(), ["a.txt", "b.txt"], "the marker itself is not among what it describes")
        XCTAssertEqual(held["a.txt"]?.hash, old.hash, "the remote still holds version 1")
        XCTAssertEqual(held["b.txt"]?.hash, hashed("b.txt", "b2").hash)
        XCTAssertEqual(held["b.txt"]?.size, 2)
    }

    func testItem11MarkerNotWrittenWhenEveryPlannedUploadWasSkipped() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "version 1")])))
        f.storage.resetCalls()
        var vanished = hashed("a.txt", "version 2")
        vanished.source = .file(f.dir + "/local/gone.txt")
        let report = completed(try await f.engine.sync(snapshot([vanished], marker: "would name version 2")))
        XCTAssertEqual(report.sourceFailures.count, 1)
        XCTAssertFalse(report.markerUploaded)
        XCTAssertEqual(f.storage.puts, ["a.txt"], "the attempt only; no upload landed, so the marker on the remote stays as it is")
        XCTAssertEqual(try f.remoteContents(includeMarker: true)[SyncEngine.defaultMarkerPath], Data("marker-v1".utf8))
    }

    func testItem11ShrinkGuardComparesInExactIntegerArithmetic() async throws {
        // In floating point 0.57 × 100 is 56.99999999999999, so 57 of 100 was refused though
        // it is exactly the fraction; 58 is more than it.
        let policy = SyncPolicy(shrinkGuard: ShrinkGuard(maxDeleteFraction: 0.57, minRemoteEntries: 4))
        XCTAssertFalse(ShrinkGuard(maxDeleteFraction: 0.57).exceeded(deletes: 57, known: 100))
        XCTAssertTrue(ShrinkGuard(maxDeleteFraction: 0.57).exceeded(deletes: 58, known: 100))
        XCTAssertFalse(ShrinkGuard(maxDeleteFraction: 0.5).exceeded(deletes: Int.max / 2, known: Int.max - 1), "no overflow")
        let f = try EngineFixture(policy: policy)
        let files = (0..<100).map { hashed("f\($0).txt", "\($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        let refused = try await f.engine.sync(snapshot(Array(files.prefix(42))))
        XCTAssertEqual(refused, .unavailable(.shrinkSuspected(deletes: 58, known: 100)))
        let report = completed(try await f.engine.sync(snapshot(Array(files.prefix(43)))))
        XCTAssertEqual(report.deleted.count, 57, "exactly the fraction is allowed")
    }

    // MARK: Item 12: size-compared files compare size and the mtime recorded at upload

    func testItem12SizeComparedFileUploadsWhenItsModificationTimeChanges() async throws {
        let f = try EngineFixture()
        func image(_ text: String, mtime: Int64) -> SyncEntry {
            var entry = sized("disk.img", text)
            entry.mtimeNanoseconds = mtime
            return entry
        }
        _ = completed(try await f.engine.sync(snapshot([image("AAAA", mtime: 1)])))
        XCTAssertEqual(try f.state.entries()["disk.img"]?.mtimeNanoseconds, 1, "recorded at upload")
        let same = completed(try await f.engine.sync(snapshot([image("AAAA", mtime: 1)])))
        XCTAssertEqual(same.uploaded, [])
        let changed = completed(try await f.engine.sync(snapshot([image("BBBB", mtime: 2)])))
        XCTAssertEqual(changed.uploaded, ["disk.img", SyncEngine.defaultMarkerPath], "same size, changed in place")
        XCTAssertEqual(try f.remoteContents()["disk.img"], Data("BBBB".utf8))

        // Adopted (no mtime recorded): equal size is unchanged, and the mtime is recorded.
        try f.putRemote("other.img", "CCCC")
        var other = sized("other.img", "DDDD")
        other.mtimeNanoseconds = 5
        let adopted = completed(try await f.engine.sync(snapshot([image("BBBB", mtime: 2), other])))
        XCTAssertEqual(adopted.uploaded, [])
        XCTAssertEqual(try f.state.entries()["other.img"]?.mtimeNanoseconds, 5)
        other.mtimeNanoseconds = 6
        let touched = completed(try await f.engine.sync(snapshot([image("BBBB", mtime: 2), other])))
        XCTAssertEqual(touched.uploaded.first, "other.img")
    }

    // MARK: Mutations that survived: the hold before the marker, the marker in the empty guard

    func testHoldSetDuringTheLastUploadStopsTheMarker() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        let engine = f.engine
        f.storage.resetCalls()
        f.storage.setHook { call, count in
            if case .put = call, count == 1 { try engine.setHold(.held(reason: "stop")) }
        }
        let outcome = try await f.engine.sync(snapshot([hashed("a.txt", "A")], marker: "marker-v2"))
        guard case .held("stop", let report) = outcome else { return XCTFail("expected held, got \(outcome)") }
        XCTAssertEqual(Array(report.uploaded), ["a.txt"])
        XCTAssertFalse(report.markerUploaded)
        XCTAssertEqual(f.storage.puts, ["a.txt"], "the hold is read again before the marker")
        XCTAssertEqual(try f.remoteContents(includeMarker: true)[SyncEngine.defaultMarkerPath], Data("marker-v1".utf8))
    }

    func testRule04EmptyGuardDoesNotCountTheMarkerAsAFile() async throws {
        let f = try EngineFixture()
        try f.putRemote(SyncEngine.defaultMarkerPath, "a marker, no files")
        let outcome = try await f.engine.sync(snapshot([]))
        XCTAssertEqual(completed(outcome).uploaded, [], "a remote holding only a marker holds nothing to protect")
    }
}
