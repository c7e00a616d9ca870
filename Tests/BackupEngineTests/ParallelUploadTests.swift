// Uploads with several transfers in flight keep the contract: size-compared uploads all land
// before the first hash-compared one starts, hash-compared ones start in snapshot order,
// the marker comes strictly last, and the state matches the remote after any failure.

import BackupEngine
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class ParallelUploadTests: XCTestCase {
    /// Start and end of every put, in the order they happened.
    private final class Timeline: Sendable {
        private let events = Mutex<[(String, Bool)]>([])
        func add(_ path: String, started: Bool) { events.withLock { $0.append((path, started)) } }
        var all: [(path: String, started: Bool)] { events.withLock { $0.map { (path: $0.0, started: $0.1) } } }
    }

    private func entries() -> [SyncEntry] {
        var result: [SyncEntry] = []
        for i in 0..<12 {
            result.append(i % 3 == 0 ? sized("media/m\(i).iso", String(repeating: "m", count: i + 1)) : hashed("docs/d\(i).txt", "doc \(i)"))
        }
        return result
    }

    func testRule07OrderHoldsWithParallelTransfers() async throws {
        let transfers = 4
        let f = try EngineFixture(transfers: transfers)
        let timeline = Timeline()
        f.storage.setHook { call, count in
            guard case .put(let path) = call else { return }
            timeline.add(path, started: true)
            try await Task.sleep(for: .milliseconds(Int.random(in: 1...15)))
        }
        f.storage.setAfterHook { call, _ in
            if case .put(let path) = call { timeline.add(path, started: false) }
        }
        let files = entries()
        let report = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertEqual(report.uploaded.count, files.count + 1)

        let events = timeline.all
        let sizePaths = Set(files.filter { $0.hash == nil }.map(\.path))
        let lastSizeEnd = events.lastIndex { sizePaths.contains($0.path) && !$0.started } ?? -1
        let firstHashStart = events.firstIndex { !sizePaths.contains($0.path) && $0.path != SyncEngine.defaultMarkerPath && $0.started } ?? -1
        XCTAssertLessThan(lastSizeEnd, firstHashStart, "every size-compared upload lands before a hash-compared one starts")
        // Hash-compared uploads are handed out in snapshot order, `transfers` at a time. Two
        // tasks handed out back to back may reach the server in either order (the pool runs
        // them), so the order is checked the way the engine guarantees it: when the k-th file
        // of the phase starts, at least k - (transfers - 1) of the files before it have ended.
        let hashOrder = files.filter { $0.hash != nil }.map(\.path)
        let hashStarts = events.filter { $0.started && !sizePaths.contains($0.path) && $0.path != SyncEngine.defaultMarkerPath }.map(\.path)
        XCTAssertEqual(Set(hashStarts), Set(hashOrder))
        for (k, path) in hashOrder.enumerated() {
            guard let start = events.firstIndex(where: { $0.path == path && $0.started }) else { continue }
            let earlier = Set(hashOrder.prefix(k))
            let ended = events.prefix(start).filter { !$0.started && earlier.contains($0.path) }.count
            XCTAssertGreaterThanOrEqual(ended, k - (transfers - 1), "\(path) started with only \(ended) of the \(k) files before it done: hash-compared uploads go in snapshot order")
        }
        let markerStart = events.firstIndex { $0.path == SyncEngine.defaultMarkerPath && $0.started } ?? -1
        XCTAssertEqual(events.prefix(markerStart).filter { !$0.started }.count, files.count, "the marker starts after every upload ended")
        // More than one upload was in flight at some point.
        var inFlight = 0
        var most = 0
        for event in events {
            inFlight += event.started ? 1 : -1
            most = max(most, inFlight)
        }
        XCTAssertGreaterThan(most, 1)
    }

    func testRule07StateMatchesRemoteAfterAFailureWithParallelTransfers() async throws {
        let files = entries()
        for failing in [2, 5, 9] {
            let f = try EngineFixture(transfers: 4)
            f.storage.setHook { call, _ in
                if case .put = call { try await Task.sleep(for: .milliseconds(Int.random(in: 1...5))) }
            }
            f.storage.fail(.put, nth: failing, with: CloudError(.transport, "injected"))
            guard case .failed = try await f.engine.sync(snapshot(files)) else { return XCTFail("expected failed") }
            try f.reopen(transfers: 4)
            let recorded = try f.state.entries().keys.sorted()
            XCTAssertEqual(recorded, try f.remoteContents().keys.sorted(), "failing at put \(failing)")

            f.storage.clearFaults()
            f.storage.resetCalls()
            let resumed = completed(try await f.engine.sync(snapshot(files)))
            XCTAssertEqual(Set(resumed.uploaded), Set(files.map(\.path)).subtracting(recorded).union([SyncEngine.defaultMarkerPath]))
            XCTAssertEqual(try f.remoteContents().count, files.count)
        }
    }

    func testHoldSetDuringAParallelRunStopsNewUploads() async throws {
        let f = try EngineFixture(transfers: 3)
        let engine = f.engine
        // The first three uploads are all in flight (each waits for the gate) when the third
        // sets the hold: they finish, and no fourth one may start. (Set by the third, not the
        // second: the run may check the hold between starting the second and the third.)
        let gate = Mutex(false)
        f.storage.setHook { call, count in
            guard case .put = call else { return }
            if count == 3 {
                try engine.setHold(.held(reason: "stop"))
                gate.withLock { $0 = true }
            }
            while !gate.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(1)) }
        }
        let outcome = try await f.engine.sync(snapshot(entries()))
        guard case .held("stop", let report) = outcome else { return XCTFail("expected held, got \(outcome)") }
        XCTAssertEqual(report.uploaded.count, 3, "the report names every upload that finished")
        XCTAssertEqual(f.storage.puts.count, 3, "only the uploads already in flight finish")
        XCTAssertEqual(try f.state.entries().keys.sorted(), try f.remoteContents().keys.sorted())
    }
}
