// One test (or more) per numbered rule of the SyncEngine contract, named after the rule,
// on a real FolderStorage and a real SQLite state file.

import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class SyncEngineTests: XCTestCase {
    // MARK: Rule 1: availability gate

    func testRule01AvailabilityGateNoAccountTouchesNothing() async throws {
        let f = try EngineFixture(availability: { .noAccount })
        let outcome = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        XCTAssertEqual(outcome, .unavailable(.noAccount))
        XCTAssertEqual(f.storage.calls, [], "the gate must not touch the remote at all")
        XCTAssertEqual(try f.remoteContents(includeMarker: true), [:])
    }

    func testRule01AvailabilityGateNeedsConsentTouchesNothing() async throws {
        let f = try EngineFixture(availability: { .needsConsent })
        let outcome = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        XCTAssertEqual(outcome, .unavailable(.needsConsent))
        XCTAssertEqual(f.storage.calls, [])
    }

    // MARK: Rule 2: remote truth

    func testRule02RemoteTruthDropsStateEntriesMissingRemotely() async throws {
        let f = try EngineFixture()
        let files = [hashed("a.txt", "a"), hashed("b.txt", "b"), hashed("c.txt", "c")]
        _ = completed(try await f.engine.sync(snapshot(files)))
        try f.removeRemote("b.txt")
        f.storage.resetCalls()

        let report = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertEqual(report.uploaded, ["b.txt", SyncEngine.defaultMarkerPath])
        XCTAssertEqual(try f.remoteContents()["b.txt"], Data("b".utf8))
    }

    func testRule02RemoteTruthAdoptsUnknownFilesSizeTrustedHashUnknown() async throws {
        let f = try EngineFixture()
        // Another machine already put these there; this state has never seen them.
        try f.putRemote("sized.bin", "same")
        try f.putRemote("hashed.txt", "same")
        try f.putRemote("Marker-less/extra.txt", "x")
        let report = completed(try await f.engine.sync(snapshot([
            sized("sized.bin", "SAME"),  // same size, different bytes: size is trusted
            hashed("hashed.txt", "same"),  // same bytes, but the hash is unknown: re-upload
            hashed("Marker-less/extra.txt", "x"),
        ])))
        XCTAssertEqual(report.uploaded, ["hashed.txt", "Marker-less/extra.txt", SyncEngine.defaultMarkerPath])
        XCTAssertEqual(try f.remoteContents()["sized.bin"], Data("same".utf8), "an adopted size-compared file is trusted")
        XCTAssertEqual(try f.state.entries()["hashed.txt"]?.hash, SHA256Hasher.hex(Data("same".utf8)))
    }

    func testRule02RemoteTruthReadoptsAFileChangedRemotely() async throws {
        let f = try EngineFixture()
        let files = [hashed("a.txt", "a")]
        _ = completed(try await f.engine.sync(snapshot(files)))
        try f.putRemote("a.txt", "changed by someone else")
        let report = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertEqual(report.uploaded.first, "a.txt")
        XCTAssertEqual(try f.remoteContents()["a.txt"], Data("a".utf8))
    }

    // MARK: Rule 3: identity

    func testRule03IdentityChangeResetsStateAndReuploads() async throws {
        let f = try EngineFixture()
        f.storage.setIdentity(.value("account-A"))
        let files = [hashed("a.txt", "a"), hashed("b.txt", "b")]
        _ = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertEqual(try f.state.identity(), "account-A")

        f.storage.setIdentity(.value("account-B"))
        f.storage.resetCalls()
        let report = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertTrue(report.identityReset)
        XCTAssertEqual(f.storage.puts, ["a.txt", "b.txt", SyncEngine.defaultMarkerPath], "a switch is a full re-upload")
        XCTAssertEqual(try f.state.identity(), "account-B")
    }

    func testRule03IdentityUnchangedKeepsState() async throws {
        let f = try EngineFixture()
        let files = [hashed("a.txt", "a")]
        _ = completed(try await f.engine.sync(snapshot(files)))
        f.storage.resetCalls()
        let report = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertFalse(report.identityReset)
        XCTAssertEqual(f.storage.puts, [])
    }

    func testRule03IdentityFallsBackToMarkerRemoteIdThenEmpty() async throws {
        let f = try EngineFixture()
        f.storage.setIdentity(.none)
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        let markerId = try await f.folder.list().first { $0.path == SyncEngine.defaultMarkerPath }?.remoteId
        XCTAssertNotNil(markerId)
        XCTAssertEqual(try f.state.identity(), markerId)

        // Another device replaces the marker: without a provider identity, that is a new identity.
        _ = try await f.folder.writeBytes(SyncEngine.defaultMarkerPath, Data("other".utf8))
        // Written later, as another device's would be: within one tick of the kernel's file
        // clock the folder's id (the mtime) would not change.
        let later = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: f.folder.root + "/" + SyncEngine.defaultMarkerPath)[.modificationDate] as? Date) + 1
        try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: f.folder.root + "/" + SyncEngine.defaultMarkerPath)
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        XCTAssertTrue(report.identityReset)
    }

    // MARK: Rule 4: empty guard

    func testRule04EmptyGuardRefusesEmptySnapshotOverExistingRemote() async throws {
        let f = try EngineFixture()
        try f.putRemote("photos/1.jpg", "jpeg")
        let outcome = try await f.engine.sync(snapshot([]))
        XCTAssertEqual(outcome, .unavailable(.restorePending))
        XCTAssertFalse(f.storage.calls.contains { $0.isWrite }, "nothing may be written")
        XCTAssertEqual(try f.remoteContents(includeMarker: true).keys.sorted(), ["photos/1.jpg"])
    }

    func testRule04EmptyGuardHonoursExplicitIsEmptyWithScaffoldFiles() async throws {
        let f = try EngineFixture()
        try f.putRemote("photos/1.jpg", "jpeg")
        let outcome = try await f.engine.sync(snapshot([hashed("scaffold.cfg", "default")], isEmpty: true))
        XCTAssertEqual(outcome, .unavailable(.restorePending))
        XCTAssertEqual(f.storage.puts, [])
    }

    func testRule04EmptyGuardIsCheckedBeforeShrinkGuard() async throws {
        let f = try EngineFixture()
        for i in 0..<6 { try f.putRemote("f\(i).txt", "\(i)") }
        // Both guards apply (6 of 6 would be deleted); the empty guard must win.
        let outcome = try await f.engine.sync(snapshot([]))
        XCTAssertEqual(outcome, .unavailable(.restorePending))
    }

    func testRule04EmptyGuardDisabledLetsTheRunProceed() async throws {
        let f = try EngineFixture(policy: SyncPolicy(shrinkGuard: nil, guardEmptyOverExisting: false))
        try f.putRemote("old.txt", "old")
        let report = completed(try await f.engine.sync(snapshot([])))
        XCTAssertEqual(report.deleted, ["old.txt"])
    }

    func testRule04EmptyGuardDoesNotApplyOnceSynced() async throws {
        let f = try EngineFixture(policy: SyncPolicy(shrinkGuard: nil))
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        let report = completed(try await f.engine.sync(snapshot([])))
        XCTAssertEqual(report.deleted, ["a.txt"])
    }

    func testRule04EmptyGuardDoesNotApplyToAnEmptyRemote() async throws {
        let f = try EngineFixture()
        let report = completed(try await f.engine.sync(snapshot([])))
        XCTAssertEqual(report.uploaded, [SyncEngine.defaultMarkerPath], "only the missing marker is written")
    }

    // MARK: Rule 5: diff

    func testRule05DiffSizeComparedUploadsOnlyWhenUnknownOrSizeDiffers() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([sized("v.bin", "1234"), sized("w.bin", "ab")])))
        f.storage.resetCalls()
        // Same size, new bytes: not uploaded. New size: uploaded.
        let report = completed(try await f.engine.sync(snapshot([sized("v.bin", "abcd"), sized("w.bin", "abc")])))
        XCTAssertEqual(f.storage.puts, ["w.bin", SyncEngine.defaultMarkerPath])
        XCTAssertEqual(report.unchanged, 1)
    }

    func testRule05DiffSizeComparedUploadsWhenRemoteSizeDiffers() async throws {
        let f = try EngineFixture()
        let files = [sized("v.bin", "1234")]
        _ = completed(try await f.engine.sync(snapshot(files)))
        try f.putRemote("v.bin", "123")  // truncated on the remote
        f.storage.resetCalls()
        _ = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertEqual(f.storage.puts, ["v.bin", SyncEngine.defaultMarkerPath])
    }

    func testRule05DiffHashComparedUploadsWhenStoredHashDiffers() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("h.txt", "aaaa"), hashed("k.txt", "k")])))
        f.storage.resetCalls()
        // Same size, different bytes: the hash differs, so it uploads.
        _ = completed(try await f.engine.sync(snapshot([hashed("h.txt", "bbbb"), hashed("k.txt", "k")])))
        XCTAssertEqual(f.storage.puts, ["h.txt", SyncEngine.defaultMarkerPath])
        XCTAssertEqual(try f.remoteContents()["h.txt"], Data("bbbb".utf8))
    }

    func testRule05DiffMarkerUploadsOnlyWhenSomethingUploadedOrItIsMissing() async throws {
        let f = try EngineFixture()
        let files = [hashed("a.txt", "a")]
        _ = completed(try await f.engine.sync(snapshot(files)))
        f.storage.resetCalls()
        let quiet = completed(try await f.engine.sync(snapshot(files, marker: "marker-v2")))
        XCTAssertFalse(quiet.markerUploaded, "nothing uploaded and the marker exists: no marker write")
        XCTAssertEqual(f.storage.puts, [])

        try f.removeRemote(SyncEngine.defaultMarkerPath)
        let again = completed(try await f.engine.sync(snapshot(files, marker: "marker-v2")))
        XCTAssertEqual(again.uploaded, [SyncEngine.defaultMarkerPath], "a missing marker uploads on its own")
        XCTAssertEqual(try f.remoteContents(includeMarker: true)[SyncEngine.defaultMarkerPath], Data("marker-v2".utf8))
    }

    // MARK: Rule 6: deletes

    func testRule06DeletesStateEntriesAbsentFromSnapshot() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b"), hashed("d/c.txt", "c")])))
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")])))
        XCTAssertEqual(report.deleted, ["d/c.txt"])
        XCTAssertEqual(try f.remoteContents().keys.sorted(), ["a.txt", "b.txt"])
        XCTAssertNil(try f.state.entries()["d/c.txt"])
    }

    func testRule06DeletesNeverTheMarkerNorAbsentEntries() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b"), hashed("c.txt", "c")])))
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), .absent("b.txt"), .absent("c.txt")])))
        XCTAssertEqual(report.deleted, [])
        XCTAssertEqual(f.storage.deletes, [])
        XCTAssertEqual(try f.remoteContents(includeMarker: true).keys.sorted(), [SyncEngine.defaultMarkerPath, "a.txt", "b.txt", "c.txt"])
    }

    // MARK: Rule 7: order, state after every put

    func testRule07OrderSizeComparedThenHashComparedInSnapshotOrderThenMarker() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([
            hashed("z.txt", "z"), sized("big.iso", "iso"), hashed("a.txt", "a"), sized("movie.mkv", "mkv"), hashed("m.txt", "m"),
        ])))
        XCTAssertEqual(f.storage.puts, ["big.iso", "movie.mkv", "z.txt", "a.txt", "m.txt", SyncEngine.defaultMarkerPath])
    }

    func testRule07StateSavedAfterEveryPut() async throws {
        let f = try EngineFixture()
        let statePath = f.statePath
        let remoteRoot = f.remoteRoot
        // Before every put, a second connection (as another process would) must see the files
        // already on the remote disk, with their sizes and the hashes of their bytes: all of
        // them but the one about to be replaced, which the state stops claiming before its new
        // bytes start landing (one transfer at a time here).
        f.storage.setHook { call, _ in
            guard case .put(let putting) = call else { return }
            var onDisk: [String: (Int64, String)] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: remoteRoot) where !name.hasPrefix(".backup-") {
                let data = try Data(contentsOf: URL(fileURLWithPath: remoteRoot + "/" + name))
                onDisk[name] = (Int64(data.count), SHA256Hasher.hex(data))
            }
            let recorded = try StateStore(path: statePath).entries()
            XCTAssertEqual(recorded.keys.sorted(), onDisk.keys.filter { $0 != putting }.sorted())
            for (path, entry) in recorded {
                XCTAssertEqual(entry.size, onDisk[path]?.0, path)
                XCTAssertEqual(entry.hash, onDisk[path]?.1, path)
            }
        }
        let files = (0..<6).map { hashed("f\($0).txt", String(repeating: "\($0)", count: $0 + 1)) }
        _ = completed(try await f.engine.sync(snapshot(files)))
        // A second run that changes every file: the state must follow each new upload too.
        _ = completed(try await f.engine.sync(snapshot(files.map { hashed($0.path, "changed " + $0.path) })))
        XCTAssertEqual(try StateStore(path: statePath).entries().count, 6)
    }

    // MARK: Rule 8: deletes after uploads; failed deletes retried

    func testRule08DeletesAfterUploadsAndBeforeMarker() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("old1.txt", "1"), hashed("old2.txt", "2"), hashed("keep.txt", "k")])))
        f.storage.resetCalls()
        _ = completed(try await f.engine.sync(snapshot([hashed("keep.txt", "k"), hashed("new.txt", "n")]), onProgress: { _, _ in }))
        let writes = f.storage.calls.filter(\.isWrite)
        XCTAssertEqual(writes, [.put("new.txt"), .delete("old1.txt"), .delete("old2.txt"), .put(SyncEngine.defaultMarkerPath)])
    }

    func testRule08FailedDeleteIsReportedAndRetriedNextRun() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b"), hashed("c.txt", "c")])))
        f.storage.fail(.delete, nth: 1, with: CloudError(.transport, "injected"))
        let first = completed(try await f.engine.sync(snapshot([hashed("c.txt", "c")])))
        XCTAssertEqual(first.deleteFailures.map(\.path), ["a.txt"])
        XCTAssertEqual(first.deleted, ["b.txt"])
        XCTAssertEqual(try f.remoteContents().keys.sorted(), ["a.txt", "c.txt"])

        let second = completed(try await f.engine.sync(snapshot([hashed("c.txt", "c")])))
        XCTAssertEqual(second.deleted, ["a.txt"], "the failed delete is retried by the next run")
        XCTAssertEqual(try f.remoteContents().keys.sorted(), ["c.txt"])
    }

    // MARK: Rule 9: identity adoption

    func testRule09MarkerIdBecomesIdentityWhenProviderHasNone() async throws {
        let f = try EngineFixture()
        f.storage.setIdentity(.none)
        XCTAssertNil(try f.state.identity())
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        let marker = try await f.folder.list().first { $0.path == SyncEngine.defaultMarkerPath }
        XCTAssertEqual(try f.state.identity(), marker?.remoteId)

        // Its own marker rewrite does not count as an account switch.
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")])))
        XCTAssertFalse(report.identityReset)
        let third = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")])))
        XCTAssertFalse(third.identityReset)
        XCTAssertEqual(third.uploaded, [])
    }

    // MARK: Rule 10: progress

    func testRule10ProgressBeforeFirstStepAndAfterEveryPutAndDelete() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")])))
        let log = ProgressLog()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "A"), hashed("c.txt", "c")]), onProgress: log.callback))
        // Two puts, one delete, the marker.
        XCTAssertEqual(log.all, [[0, 4], [1, 4], [2, 4], [3, 4], [4, 4]])
    }

    func testRule10ProgressFiresOnceForANoOpRun() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        let log = ProgressLog()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")]), onProgress: log.callback))
        XCTAssertEqual(log.all, [[0, 0]])
    }

    // MARK: Rule 11: shrink guard

    private func syncedFixture(files count: Int, policy: SyncPolicy = SyncPolicy()) async throws -> (EngineFixture, [SyncEntry]) {
        let f = try EngineFixture(policy: policy)
        let files = (0..<count).map { hashed("f\($0).txt", "\($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        f.storage.resetCalls()
        return (f, files)
    }

    func testRule11ShrinkGuardRefusesDeletingMoreThanHalf() async throws {
        let (f, files) = try await syncedFixture(files: 10)
        let outcome = try await f.engine.sync(snapshot(Array(files.prefix(4)) + [hashed("new.txt", "n")]))
        XCTAssertEqual(outcome, .unavailable(.shrinkSuspected(deletes: 6, known: 10)))
        XCTAssertFalse(f.storage.calls.contains { $0.isWrite }, "refused before any write, uploads included")
        XCTAssertEqual(try f.remoteContents().count, 10)
    }

    func testRule11ShrinkGuardAllowsExactlyTheFraction() async throws {
        let (f, files) = try await syncedFixture(files: 10)
        let report = completed(try await f.engine.sync(snapshot(Array(files.prefix(5)))))
        XCTAssertEqual(report.deleted.count, 5)
    }

    func testRule11ShrinkGuardLiftedByAllowShrinkForOneRun() async throws {
        let (f, files) = try await syncedFixture(files: 10)
        let report = completed(try await f.engine.sync(snapshot(Array(files.prefix(1)), allowShrink: true)))
        XCTAssertEqual(report.deleted.count, 9)
    }

    func testRule11ShrinkGuardDisabledWithNilPolicy() async throws {
        let (f, files) = try await syncedFixture(files: 10, policy: SyncPolicy(shrinkGuard: nil))
        let report = completed(try await f.engine.sync(snapshot(Array(files.prefix(1)))))
        XCTAssertEqual(report.deleted.count, 9)
    }

    func testRule11ShrinkGuardDoesNotApplyBelowMinRemoteEntries() async throws {
        let (f, _) = try await syncedFixture(files: 3)
        let report = completed(try await f.engine.sync(snapshot([hashed("other.txt", "o")])))
        XCTAssertEqual(report.deleted.count, 3)
    }

    func testRule11ShrinkGuardAppliesAtMinRemoteEntries() async throws {
        let (f, files) = try await syncedFixture(files: 4)
        let outcome = try await f.engine.sync(snapshot(Array(files.prefix(1))))
        XCTAssertEqual(outcome, .unavailable(.shrinkSuspected(deletes: 3, known: 4)))
    }
}

extension SyncEngineTests {
    // MARK: Preview (dry run)

    func testPreviewWritesNothingAndForeseesTheRun() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")])))
        try f.putRemote("stray.txt", "someone else's")  // adopted by the state only on a real run
        let next = snapshot([hashed("a.txt", "A"), hashed("c.txt", "c")], allowShrink: true)
        let stateBefore = try f.state.entries()
        f.storage.resetCalls()

        guard case .wouldRun(let preview) = try await f.engine.preview(next) else { return XCTFail("expected a preview") }
        XCTAssertEqual(preview.uploads.map(\.path), ["a.txt", "c.txt"])
        XCTAssertEqual(preview.deletes, ["b.txt", "stray.txt"])
        XCTAssertTrue(preview.markerUpload)
        XCTAssertFalse(f.storage.calls.contains { $0.isWrite }, "a preview never writes to the remote")
        XCTAssertEqual(try f.state.entries(), stateBefore, "nor to the state")

        let report = completed(try await f.engine.sync(next))
        XCTAssertEqual(Array(report.uploaded), preview.uploads.map(\.path) + [SyncEngine.defaultMarkerPath])
        XCTAssertEqual(report.deleted, preview.deletes)
    }

    func testPreviewReportsTheGuards() async throws {
        let f = try EngineFixture()
        try f.putRemote("photos/1.jpg", "jpeg")
        let empty = try await f.engine.preview(snapshot([]))
        XCTAssertEqual(empty, .unavailable(.restorePending))
        try f.engine.setHold(.held(reason: "r"))
        let held = try await f.engine.preview(snapshot([]))
        XCTAssertEqual(held, .unavailable(.writeHeld(reason: "r")))
    }
}

extension SyncEngineTests {
    func testRule03IdentityChangeDropsTheOldAccountsEntries() async throws {
        let f = try EngineFixture()
        f.storage.setIdentity(.value("account-A"))
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("b.txt", "b")])))
        // The other account's remote has no b.txt.
        try f.removeRemote("b.txt")
        f.storage.setIdentity(.value("account-B"))
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        XCTAssertTrue(report.identityReset)
        XCTAssertEqual(try f.state.entries().keys.sorted(), ["a.txt"], "nothing of account A's state is kept")
    }

    func testRule03IdentityChangeForgetsTheSyncHistorySoTheEmptyGuardProtectsTheNewAccount() async throws {
        let f = try EngineFixture(policy: SyncPolicy(shrinkGuard: nil))
        f.storage.setIdentity(.value("account-A"))
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        f.storage.setIdentity(.value("account-B"))
        // The first run against account B fails before completing...
        f.storage.resetCalls()
        f.storage.fail(.put, nth: 1, with: CloudError(.offline, "gone"))
        _ = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        // ...so an empty source is still a first sync over account B's files.
        let outcome = try await f.engine.sync(snapshot([]))
        XCTAssertEqual(outcome, .unavailable(.restorePending))
    }
}

extension SyncEngineTests {
    func testNamesThatDifferOnlyInUnicodeNormalisationAreTwoFiles() async throws {
        let f = try EngineFixture()
        let composed = "caf\u{E9}.txt"
        let decomposed = "cafe\u{301}.txt"
        XCTAssertEqual(composed, decomposed, "Swift calls them equal; the file system does not")
        let files = [hashed(composed, "one"), hashed(decomposed, "two")]
        let report = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertEqual(report.uploaded.count, 3)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: f.remoteRoot).filter { $0.hasPrefix("caf") }.count, 2)
        let again = completed(try await f.engine.sync(snapshot(files)))
        XCTAssertEqual(again.uploaded, [], "both are known after the first run")
    }
}
