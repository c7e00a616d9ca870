// The guards beyond the contract (issue 11): the remote-missing guard (item 8), the writer
// guard (item 14), and a volume id written only by a run that writes (item 10).

import BackupEngine
import BackupStorage
import BackupTestSupport
import Foundation
import XCTest

final class RemoteGuardTests: XCTestCase {
    private var volumeIdExists: (EngineFixture) -> Bool {
        { FileManager.default.fileExists(atPath: $0.remoteRoot + "/" + FolderStorage.volumeIdFileName) }
    }

    /// The remote root's entries, internal files included, as the disk holds them.
    private func rootEntries(_ f: EngineFixture) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: f.remoteRoot).sorted()
    }

    /// Empties the remote root, volume id included: the disk was unmounted and the bare mount
    /// point is left.
    private func unmount(_ f: EngineFixture) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: f.remoteRoot) {
            try FileManager.default.removeItem(atPath: f.remoteRoot + "/" + name)
        }
    }

    // MARK: Item 8: an unmounted disk gets the whole backup

    func testIssue11Item08UnmountedDiskIsRemoteMissingAndNothingIsWritten() async throws {
        let f = try EngineFixture()
        let files = (0..<6).map { hashed("photos/\($0).jpg", "jpeg \($0)") }
        _ = completed(try await f.engine.sync(snapshot(files)))
        let identity = try f.state.identity()
        XCTAssertNotNil(identity)
        try unmount(f)
        f.storage.resetCalls()

        let outcome = try await f.engine.sync(snapshot(files))
        XCTAssertEqual(outcome, .unavailable(.remoteMissing))
        XCTAssertFalse(f.storage.calls.contains { $0.isWrite }, "nothing may be written")
        XCTAssertEqual(try rootEntries(f), [], "not even a volume id is written onto the bare mount point")
        XCTAssertEqual(try f.state.identity(), identity, "the identity is not reset")
        XCTAssertNotNil(try f.state.lastSync(), "the sync history is kept, so the next run is refused too")
        XCTAssertEqual(try f.state.entries().count, 6)

        let preview = try await f.engine.preview(snapshot(files))
        XCTAssertEqual(preview, .unavailable(.remoteMissing))
        let again = try await f.engine.sync(snapshot(files))
        XCTAssertEqual(again, .unavailable(.remoteMissing))
        XCTAssertEqual(try rootEntries(f), [])

        // Lifted for one run on purpose: the whole backup is written again.
        let lifted = completed(try await f.engine.sync(SyncSnapshot(entries: files, marker: Data("m".utf8), allowMissingRemote: true)))
        XCTAssertEqual(lifted.uploaded.count, 7)
        XCTAssertEqual(try f.remoteContents().count, 6)
    }

    func testRemoteMissingGuardDoesNotApplyToANeverSyncedRemoteOrAnAccountSwitch() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))  // never synced before: written
        // A provider that names another identity is an account switch (rule 3), not a vanished remote.
        f.storage.setIdentity(.value("account-B"))
        try unmount(f)
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        XCTAssertTrue(report.identityReset)
        XCTAssertEqual(try f.remoteContents().keys.sorted(), ["a.txt"])
    }

    // MARK: Item 10: probe, dry run, status and refused runs write nothing

    func testIssue11Item10ProbePreviewAndRefusedRunsWriteNoVolumeId() async throws {
        let f = try EngineFixture()
        let probe = await f.engine.probe()
        XCTAssertEqual(probe, .none)
        XCTAssertFalse(volumeIdExists(f), "the probe wrote the volume id")
        _ = try await f.engine.preview(snapshot([hashed("a.txt", "a")]))
        XCTAssertFalse(volumeIdExists(f), "a preview (--dry-run, status) wrote the volume id")

        try f.putRemote("photos/1.jpg", "jpeg")
        let refused = try await f.engine.sync(snapshot([]))
        XCTAssertEqual(refused, .unavailable(.restorePending))
        XCTAssertFalse(volumeIdExists(f), "a run refused by a guard wrote the volume id")
        try f.state.setHold(.held(reason: "r"))
        let held = try await f.engine.sync(snapshot([hashed("a.txt", "a")]))
        XCTAssertEqual(held, .unavailable(.writeHeld(reason: "r")))
        XCTAssertFalse(volumeIdExists(f), "a held run wrote the volume id")
        try f.state.setHold(.none)

        // The first run that writes creates it, and binds the state to it (rule 3).
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("photos/1.jpg", "jpeg")])))
        XCTAssertTrue(volumeIdExists(f))
        let volumeId = try await f.folder.identityKey()
        XCTAssertNotNil(volumeId)
        XCTAssertEqual(try f.state.identity(), volumeId)
        let next = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a"), hashed("photos/1.jpg", "jpeg")])))
        XCTAssertFalse(next.identityReset)
        XCTAssertEqual(next.uploaded, [])
    }

    func testARunThatWritesNothingCreatesNoVolumeId() async throws {
        let f = try EngineFixture()
        // A backup without a volume id (copied there by hand, or by a provider that had none).
        f.storage.setIdentity(.none)
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        XCTAssertFalse(volumeIdExists(f))
        f.storage.setIdentity(.passThrough)
        // Nothing changed, so nothing is written: the identity stays the marker's id (rule 3).
        let report = completed(try await f.engine.sync(snapshot([hashed("a.txt", "a")])))
        XCTAssertEqual(report.uploaded, [])
        XCTAssertFalse(report.identityReset)
        XCTAssertFalse(volumeIdExists(f))
    }

    // MARK: Item 14: two profiles, one remote

    /// A marker naming its writer: "writer:<id>", or any other bytes for one without.
    private func writerSnapshot(
        _ entries: [SyncEntry], writer: String, takeOver: Bool = false, adopted: String? = nil
    ) -> SyncSnapshot {
        SyncSnapshot(
            entries: entries, marker: Data("writer:\(writer)".utf8),
            writer: WriterCheck(id: writer, takeOver: takeOver, adopted: adopted) { bytes in
                let text = String(decoding: bytes, as: UTF8.self)
                return text.hasPrefix("writer:") ? String(text.dropFirst("writer:".count)) : nil
            })
    }

    private func markerText(_ f: EngineFixture) throws -> String? {
        try f.remoteContents(includeMarker: true)[SyncEngine.defaultMarkerPath].map { String(decoding: $0, as: UTF8.self) }
    }

    func testIssue11Item14TwoProfilesOneRemoteRefuseEachOther() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(writerSnapshot([hashed("laptop.txt", "l")], writer: "laptop")))
        let desktop = SyncEngine(storage: f.storage, state: try StateStore(path: f.dir + "/desktop/sync.db"))
        f.storage.resetCalls()

        let outcome = try await desktop.sync(writerSnapshot([hashed("desktop.txt", "d")], writer: "desktop"))
        XCTAssertEqual(outcome, .unavailable(.otherWriter(writer: "laptop")))
        XCTAssertFalse(f.storage.calls.contains { $0.isWrite }, "nothing may be written")
        XCTAssertEqual(try f.remoteContents().keys.sorted(), ["laptop.txt"], "the laptop's file is not deleted")
        let preview = try await desktop.preview(writerSnapshot([hashed("desktop.txt", "d")], writer: "desktop"))
        XCTAssertEqual(preview, .unavailable(.otherWriter(writer: "laptop")))

        // The laptop's own runs are not refused (its marker is known without reading it).
        f.storage.resetCalls()
        _ = completed(try await f.engine.sync(writerSnapshot([hashed("laptop.txt", "l")], writer: "laptop")))
        XCTAssertFalse(f.storage.calls.contains(.read(SyncEngine.defaultMarkerPath)), "its own marker was read back")

        // --take-over on purpose: the desktop becomes the writer, and now the laptop is refused.
        _ = completed(try await desktop.sync(writerSnapshot([hashed("desktop.txt", "d")], writer: "desktop", takeOver: true)))
        XCTAssertEqual(try markerText(f), "writer:desktop")
        XCTAssertEqual(try f.remoteContents().keys.sorted(), ["desktop.txt"])
        let refused = try await f.engine.sync(writerSnapshot([hashed("laptop.txt", "l")], writer: "laptop"))
        XCTAssertEqual(refused, .unavailable(.otherWriter(writer: "desktop")))
    }

    func testWriterGuardTakesOverAMarkerWithoutWriterAndAnAdoptedWriterSilently() async throws {
        let f = try EngineFixture()
        // A backup by a version of backup whose markers had no writer id.
        try f.putRemote("a.txt", "a")
        try f.putRemote(SyncEngine.defaultMarkerPath, "an old marker")
        let report = completed(try await f.engine.sync(writerSnapshot([hashed("a.txt", "a")], writer: "new")))
        XCTAssertTrue(report.markerUploaded, "the marker is rewritten to name its writer")
        XCTAssertEqual(try markerText(f), "writer:new")

        // A restore into the source adopted "new"'s backup: another profile syncs without a flag.
        let other = SyncEngine(storage: f.storage, state: try StateStore(path: f.dir + "/other/sync.db"))
        _ = completed(try await other.sync(writerSnapshot([hashed("a.txt", "a")], writer: "restored", adopted: "new")))
        XCTAssertEqual(try markerText(f), "writer:restored")
    }

    func testWriterGuardComesAfterTheEmptyGuardAndBeforeTheShrinkGuard() async throws {
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(writerSnapshot((0..<6).map { hashed("f\($0).txt", "\($0)") }, writer: "laptop")))
        let newMachine = SyncEngine(storage: f.storage, state: try StateStore(path: f.dir + "/new/sync.db"))
        // An empty source on a new machine is told to restore, not that another writer owns the remote.
        let empty = try await newMachine.sync(writerSnapshot([], writer: "desktop"))
        XCTAssertEqual(empty, .unavailable(.restorePending))
        // A run that would also trip the shrink guard names the other writer.
        let shrinking = try await newMachine.sync(writerSnapshot([hashed("x.txt", "x")], writer: "desktop"))
        XCTAssertEqual(shrinking, .unavailable(.otherWriter(writer: "laptop")))
    }
}
