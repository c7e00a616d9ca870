// The write hold: persisted, blocks every write, stops a running sync before its next
// write (also when set by another process), survives an identity reset, and is never set
// or cleared by the engine itself. Also: sync() calls are serialised.

import BackupEngine
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class WriteHoldTests: XCTestCase {
    func testHoldBlocksSyncAndWritesNothing() async throws {
        let f = try EngineFixture()
        try f.engine.setHold(.held(reason: "disk being replaced"))
        let outcome = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        XCTAssertEqual(outcome, .unavailable(.writeHeld(reason: "disk being replaced")))
        XCTAssertFalse(f.storage.calls.contains { $0.isWrite })
        XCTAssertEqual(try f.remoteContents(includeMarker: true), [:])
    }

    func testHoldIsPersistedWithoutTouchingEntries() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        let before = try f.state.entries()
        try f.engine.setHold(.held(reason: "r"))
        try f.reopen()
        XCTAssertEqual(try f.engine.hold(), .held(reason: "r"))
        XCTAssertEqual(try f.state.entries(), before)
        try f.engine.setHold(.none)
        XCTAssertEqual(try f.engine.hold(), WriteHold.none)
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")])))
    }

    func testHoldSetDuringRunStopsItBeforeItsNextWrite() async throws {
        let f = try EngineFixture()
        let engine = f.engine
        f.storage.setHook { call, count in
            if case .put = call, count == 2 { try engine.setHold(.held(reason: "stop")) }
        }
        let outcome = try await f.engine.sync(snapshot((0..<5).map { hashed("f\($0).txt", "\($0)") }))
        // Not "nothing was written": the run says what it wrote before the hold stopped it.
        guard case .held(let reason, let report) = outcome else { return XCTFail("expected held, got \(outcome)") }
        XCTAssertEqual(reason, "stop")
        XCTAssertEqual(Array(report.uploaded), ["f0.txt", "f1.txt"])
        XCTAssertEqual(report.uploadedBytes, 2)
        XCTAssertEqual(f.storage.puts, ["f0.txt", "f1.txt"], "the put in flight finishes; no other write follows")
        XCTAssertEqual(try f.state.entries().keys.sorted(), ["f0.txt", "f1.txt"])
    }

    func testHoldSetByAnotherProcessStopsARunningSync() async throws {
        let f = try EngineFixture()
        let statePath = f.statePath
        f.storage.setHook { call, count in
            // A second connection to the same file, as `backup hold set` in another terminal.
            if case .put = call, count == 1 { try StateStore(path: statePath).setHold(.held(reason: "other terminal")) }
        }
        let outcome = try await f.engine.sync(snapshot((0..<3).map { hashed("f\($0).txt", "\($0)") }))
        guard case .held("other terminal", let report) = outcome else { return XCTFail("expected held, got \(outcome)") }
        XCTAssertEqual(Array(report.uploaded), ["f0.txt"])
        XCTAssertEqual(f.storage.puts, ["f0.txt"])
    }

    func testHoldStopsARunBeforeItsDeletes() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")])))
        let engine = f.engine
        f.storage.setHook { call, _ in
            if case .put("c.txt") = call { try engine.setHold(.held(reason: "stop")) }
        }
        let outcome = try await f.engine.sync(snapshot([hashed("c.txt", "c")], allowShrink: true))
        guard case .held("stop", let report) = outcome else { return XCTFail("expected held, got \(outcome)") }
        XCTAssertEqual(Array(report.uploaded), ["c.txt"])
        XCTAssertEqual(report.deleted, [])
        XCTAssertEqual(f.storage.deletes, [])
    }

    func testHoldKeptAcrossIdentityReset() async throws {
        let f = try EngineFixture()
        f.storage.setIdentity(.value("A"))
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        // The hold is set between a run and an account switch; the next run resets the
        // identity only if it gets that far, so reset through the store, then check both.
        try f.engine.setHold(.held(reason: "keep me"))
        try f.state.resetIdentity(to: "B")
        XCTAssertEqual(try f.engine.hold(), .held(reason: "keep me"))
        XCTAssertEqual(try f.state.entries(), [:])
        f.storage.setIdentity(.value("C"))
        let outcome = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        XCTAssertEqual(outcome, .unavailable(.writeHeld(reason: "keep me")))
    }

    func testHoldKeptWhenARunResetsTheIdentity() async throws {
        let f = try EngineFixture()
        f.storage.setIdentity(.value("A"))
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        f.storage.setIdentity(.value("B"))
        f.storage.resetCalls()
        let engine = f.engine
        // Set the hold after the identity was read, before the first put: the reset that
        // follows must keep it, so the run stops before writing.
        f.storage.setHook { call, _ in
            if call == .identityKey { try engine.setHold(.held(reason: "mid-run")) }
        }
        let outcome = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        XCTAssertEqual(outcome, .unavailable(.writeHeld(reason: "mid-run")))
        XCTAssertEqual(try f.state.identity(), "B", "the reset happened")
        XCTAssertEqual(try f.engine.hold(), .held(reason: "mid-run"))
        XCTAssertEqual(f.storage.puts, [])
    }

    func testHoldNeverSetOrClearedByTheEngine() async throws {
        let f = try EngineFixture()
        f.storage.fail(.put, nth: 1, with: CloudError(.storageFull, "full"))
        _ = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        XCTAssertEqual(try f.engine.hold(), WriteHold.none, "a failure never sets the hold")
        try f.engine.setHold(.held(reason: "mine"))
        _ = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        _ = await f.engine.probe()
        XCTAssertEqual(try f.engine.hold(), .held(reason: "mine"), "nothing clears it but setHold")
    }

    func testSyncCallsAreSerialised() async throws {
        let f = try EngineFixture()
        f.storage.setHook { call, _ in
            if case .put = call { try await Task.sleep(for: .milliseconds(20)) }
        }
        let engine = f.engine
        async let first = engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")]))
        async let second = engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")]))
        _ = try await (first, second)
        // Each run is list, identity, [puts]; two runs may not interleave.
        let ops = f.storage.calls.map(\.operation)
        let lists = ops.indices.filter { ops[$0] == .list }
        XCTAssertEqual(lists.count, 2)
        let firstRun = ops[lists[0]..<lists[1]]
        XCTAssertEqual(firstRun.filter { $0 == .put }.count, 3, "the first run finished all its puts before the second listed")
        XCTAssertEqual(ops[lists[1]...].filter { $0 == .put }.count, 0, "the second run found nothing to do")
    }
}
