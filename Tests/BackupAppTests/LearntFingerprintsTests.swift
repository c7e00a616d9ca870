// The fingerprints a first sync's uploads learn: written a batch at a time, and only for files
// that were, when their upload opened them, as the scan saw them.

@testable import BackupApp
import BackupEngine
import BackupTestSupport
import Foundation
import XCTest

final class LearntFingerprintsTests: XCTestCase {
    func testOnlyFilesUnchangedSinceTheScanAreRecordedABatchAtATime() throws {
        let dir = try TempDir()
        let state = try StateStore(path: dir.path("sync.db"))
        var entries = SyncEntryList()
        for i in 0..<5000 {
            entries.append(SyncEntry(
                path: "f\(i)", size: 10, digest: nil, source: .underRoot,
                metadata: EntryMetadata(mode: 0o644, mtimeNanoseconds: 1000 + Int64(i), uid: 0, gid: 0)))
        }
        let learnt = BackupApp.LearntFingerprints(state: state, entries: entries)
        var hasher = SHA256Hasher()
        hasher.update(Data("0123456789".utf8))
        let digest = hasher.finalize()
        // Five files changed between the scan and their upload: grown, or written (a new mtime).
        let grown: Set = [7, 2007, 4007]
        let written: Set = [1007, 3007]
        for i in 0..<5000 {
            learnt.add(i, Fingerprint(
                size: grown.contains(i) ? 11 : 10, mtimeNanoseconds: 1000 + Int64(i) + (written.contains(i) ? 1 : 0),
                inode: UInt64(i + 1), digest: digest))
        }
        XCTAssertEqual(try state.fingerprints().count, BackupApp.LearntFingerprints.batch, "a full batch is written as it fills")
        try learnt.flush()
        let prints = try state.fingerprints()
        XCTAssertEqual(prints.count, 4995)
        for i in grown.union(written) { XCTAssertNil(prints["f\(i)"], "f\(i) changed after its scan: read again next time") }
        XCTAssertEqual(prints["f4999"], Fingerprint(size: 10, mtimeNanoseconds: 5999, inode: 5000, digest: digest))
        try learnt.flush()
        XCTAssertEqual(try state.fingerprints().count, 4995, "a second flush writes nothing more")
    }
}
