// The probe's six outcomes, in the contract's order, and SourceRef.matches().

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class ProbeTests: XCTestCase {
    func testProbeUnavailableNoAccountTouchesNothing() async throws {
        let f = try EngineFixture(availability: { .noAccount })
        try f.putRemote("a.txt", "a")
        let outcome = await f.engine.probe()
        XCTAssertEqual(outcome, .unavailable(.noAccount))
        XCTAssertEqual(f.storage.calls, [])
    }

    func testProbeUnavailableNeedsConsent() async throws {
        let f = try EngineFixture(availability: { .needsConsent })
        let outcome = await f.engine.probe()
        XCTAssertEqual(outcome, .unavailable(.needsConsent))
        XCTAssertEqual(f.storage.calls, [])
    }

    func testProbeFailedWhenListingFails() async throws {
        let f = try EngineFixture()
        f.storage.fail(.list, nth: 1, with: CloudError(.offline, "cannot reach the server"))
        let outcome = await f.engine.probe()
        XCTAssertEqual(outcome, .failed(CloudError(.offline, "cannot reach the server")))
    }

    func testProbeFailedWhenRemoteRootIsMissing() async throws {
        let f = try EngineFixture()
        try FileManager.default.removeItem(atPath: f.remoteRoot)
        guard case .failed(let error) = await f.engine.probe() else { return XCTFail("expected failed") }
        XCTAssertEqual(error.kind, .notAvailable)
        XCTAssertFalse(FileManager.default.fileExists(atPath: f.remoteRoot), "a probe never creates the root")
    }

    func testProbeNoneOnEmptyRemote() async throws {
        let f = try EngineFixture()
        let outcome = await f.engine.probe()
        XCTAssertEqual(outcome, ProbeOutcome.none)
    }

    func testProbeNotReadyWhenFilesButNoMarker() async throws {
        let f = try EngineFixture()
        try f.putRemote("a.txt", "a")
        let outcome = await f.engine.probe()
        XCTAssertEqual(outcome, .notReady)
    }

    func testProbeNotReadyWhenMarkerIsListedButNotReadable() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        f.storage.fail(.read, nth: 1, with: CloudError(.notFound, "gone between list and read"))
        let outcome = await f.engine.probe()
        XCTAssertEqual(outcome, .notReady)
    }

    func testProbeFoundReturnsMarkerSourceAndFiles() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("d/b.txt", "b")], marker: "M1")))
        f.storage.resetCalls()
        guard case .found(let marker, let source, let files) = await f.engine.probe() else {
            return XCTFail("expected found")
        }
        XCTAssertEqual(marker, Data("M1".utf8))
        XCTAssertEqual(source.markerFingerprint, SHA256Hasher.hex(Data("M1".utf8)))
        XCTAssertEqual(source.identityKey, try f.state.identity())
        XCTAssertEqual(files.map(\.path).sorted(), [SyncEngine.defaultMarkerPath, "a.txt", "d/b.txt"])
        XCTAssertFalse(f.storage.calls.contains { $0.isWrite }, "a probe never writes")
    }

    func testProbeSourceRefMatchesUntilTheMarkerChanges() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")], marker: "M1")))
        guard case .found(_, let first, _) = await f.engine.probe(),
            case .found(_, let second, _) = await f.engine.probe()
        else { return XCTFail("expected found") }
        XCTAssertTrue(first.matches(second))

        // Another device rewrites the marker with other bytes: a changed source.
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a2")], marker: "M2")))
        guard case .found(_, let third, _) = await f.engine.probe() else { return XCTFail("expected found") }
        XCTAssertFalse(first.matches(third))
    }

    func testSourceRefMatchesComparesIdentityAndFingerprintOnly() {
        let ref = SourceRef(identityKey: "vol-1", markerRemoteId: "10:1", markerFingerprint: "abc")
        XCTAssertTrue(ref.matches(SourceRef(identityKey: "vol-1", markerRemoteId: "99:2", markerFingerprint: "abc")))
        XCTAssertFalse(ref.matches(SourceRef(identityKey: "vol-2", markerRemoteId: "10:1", markerFingerprint: "abc")))
        XCTAssertFalse(ref.matches(SourceRef(identityKey: "vol-1", markerRemoteId: "10:1", markerFingerprint: "abd")))
    }
}
