// A run stopped at any put (a failure, a cancelled task) and resumed by a new engine on the
// same state file uploads only what the first run had not finished.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class InterruptedSyncTests: XCTestCase {
    private let files = (0..<8).map { hashed("dir\($0 % 3)/f\($0).txt", "content \($0)") }

    func testNthPutFailureThenReopenedEngineUploadsOnlyTheRest() async throws {
        for failing in 1...files.count {
            let f = try EngineFixture()
            f.storage.fail(.put, nth: failing, with: CloudError(.storageFull, "injected at put \(failing)"))
            let outcome = try await f.engine.sync(snapshot(files))
            guard case .failed(let error, let report) = outcome else { return XCTFail("expected failed, got \(outcome)") }
            XCTAssertEqual(error.kind, .storageFull)
            XCTAssertEqual(report.uploaded.count, failing - 1)

            // The state on disk matches what the remote holds.
            try f.reopen()
            XCTAssertEqual(try f.state.entries().keys.sorted(), try f.remoteContents().keys.sorted())

            f.storage.clearFaults()
            f.storage.resetCalls()
            let resumed = completed(try await f.engine.sync(snapshot(files)))
            let expected = files.dropFirst(failing - 1).map(\.path) + [SyncEngine.defaultMarkerPath]
            XCTAssertEqual(Array(resumed.uploaded), expected, "failing at put \(failing)")
            XCTAssertEqual(try f.remoteContents().count, files.count)
        }
    }

    func testCancelledRunThenReopenedEngineUploadsOnlyTheRest() async throws {
        let f = try EngineFixture()
        let gate = AsyncStream<Void>.makeStream()
        f.storage.setHook { call, count in
            if case .put = call, count == 3 {
                gate.continuation.yield()
                try await Task.sleep(for: .seconds(30))  // cancelled long before this ends
            }
        }
        let engine = f.engine
        let files = self.files
        let task = Task { try await engine.sync(snapshot(files)) }
        var waiter = gate.stream.makeAsyncIterator()
        _ = await waiter.next()
        task.cancel()
        do {
            let outcome = try await task.value
            XCTFail("expected cancellation, got \(outcome)")
        } catch is CancellationError {
        }
        XCTAssertEqual(try f.remoteContents().count, 2)

        f.storage.setHook(nil)
        try f.reopen()
        XCTAssertEqual(try f.state.entries().keys.sorted(), try f.remoteContents().keys.sorted())
        f.storage.resetCalls()
        let resumed = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertEqual(Array(resumed.uploaded), files.dropFirst(2).map(\.path) + [SyncEngine.defaultMarkerPath])
    }

    func testLocalFileVanishedMidRunIsSkippedNotFatal() async throws {
        let f = try EngineFixture()
        let keep = try f.localFile("keep.txt", "keep")
        let gone = try f.localFile("gone.txt", "gone")
        try FileManager.default.removeItem(atPath: gone)
        let entries = [
            SyncEntry(path: "gone.txt", size: 4, hash: SHA256Hasher.hex(Data("gone".utf8)), source: .file(gone)),
            SyncEntry(path: "keep.txt", size: 4, hash: SHA256Hasher.hex(Data("keep".utf8)), source: .file(keep)),
        ]
        let report = completed(try await f.engine.sync(snapshot(entries)))
        XCTAssertEqual(report.sourceFailures.map(\.path), [gone])
        XCTAssertEqual(report.uploaded, ["keep.txt", SyncEngine.defaultMarkerPath])
        XCTAssertNil(try f.state.entries()["gone.txt"])
    }
}
