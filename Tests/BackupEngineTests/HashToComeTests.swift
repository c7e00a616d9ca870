// A file whose hash is to come (a first sync's new file, not read by the scan) is hashed from
// the bytes its upload sends: the state and the marker record that hash, the snapshot is told
// the fingerprint for its cache, and the engine never skips such a file.

import BackupEngine
import BackupTestSupport
import Foundation
import Synchronization
import XCTest

final class HashToComeTests: XCTestCase {
    /// A local file entry whose hash is to come.
    private func toCome(_ f: EngineFixture, _ path: String, _ text: String) throws -> SyncEntry {
        var entry = SyncEntry(path: path, size: Int64(text.utf8.count), digest: nil, source: .file(try f.localFile(path, text)))
        entry.hashToCome = true
        return entry
    }

    private func sha256(_ text: String) -> SHA256Digest {
        var hasher = SHA256Hasher()
        hasher.update(Data(text.utf8))
        return hasher.finalize()
    }

    func testAHashToComeIsTheHashOfTheBytesItsUploadSent() async throws {
        for transfers in [1, 4] {
            let f = try EngineFixture(transfers: transfers)
            let texts = (0..<40).map { "file \($0) " + String(repeating: "x", count: $0 * 97) }
            var entries = try texts.enumerated().map { try toCome(f, "d\($0.offset % 3)/f\($0.offset).txt", $0.element) }
            entries.append(hashed("known.txt", "already hashed"))
            let learnt = Mutex<[Int: Fingerprint]>([:])
            var snap = snapshot(entries)
            snap.hashLearnt = { index, fingerprint in
                learnt.withLock { XCTAssertNil($0.updateValue(fingerprint, forKey: index), "told twice of entry \(index)") }
            }

            let report = completed(try await f.engine.sync(snap))
            XCTAssertEqual(report.fileCount, 41)
            XCTAssertEqual(report.hashedWhileSending, 40, "the known file's hash came from the scan")
            let stored = try f.state.entries()
            let told = learnt.withLock { $0 }
            XCTAssertEqual(told.count, 40)
            for (index, text) in texts.enumerated() {
                let path = entries[index].path
                XCTAssertEqual(stored[path]?.digest, sha256(text), "\(path): the state records the hash of what was sent")
                XCTAssertEqual(told[index]?.digest, sha256(text), "\(path): the snapshot is told the same hash")
                XCTAssertEqual(told[index]?.size, Int64(text.utf8.count))
                XCTAssertEqual(try f.remoteContents()[path], Data(text.utf8))
            }
            XCTAssertEqual(stored["known.txt"]?.digest, sha256("already hashed"))
            XCTAssertNil(told[40], "a known hash is not told again")
        }
    }

    func testAHashToComeIsUploadedEvenWhereTheStateHoldsTheSameHash() async throws {
        // The scan leaves hashes to come only where no recorded hash could match; should one
        // meet a recorded hash anyway, sending the file again is the safe answer, never a skip.
        let f = try EngineFixture()
        _ = completed(try await f.engine.sync(snapshot([hashed("a.txt", "same")])))
        let report = completed(try await f.engine.sync(snapshot([try toCome(f, "a.txt", "same")])))
        XCTAssertEqual(Array(report.uploaded), ["a.txt", SyncEngine.defaultMarkerPath])
        XCTAssertEqual(try f.state.entries()["a.txt"]?.digest, sha256("same"))
    }

    func testAHashToComeWhoseFileVanishedIsASourceFailureAndRecordsNothing() async throws {
        let f = try EngineFixture()
        let gone = try toCome(f, "gone.txt", "soon gone")
        if case .file(let path) = gone.source { try FileManager.default.removeItem(atPath: path) }
        let learnt = Mutex(0)
        var snap = snapshot([gone, try toCome(f, "kept.txt", "kept")])
        snap.hashLearnt = { _, _ in learnt.withLock { $0 += 1 } }
        let report = completed(try await f.engine.sync(snap))
        XCTAssertEqual(report.sourceFailures.map(\.path).count, 1)
        XCTAssertNil(try f.state.entries()["gone.txt"])
        XCTAssertEqual(learnt.withLock { $0 }, 1, "only the file that was sent is told")
    }

    func testHashToComeEntriesAreUploadedWithTheHashComparedNotBeforeSizeComparedOnes() async throws {
        // Rule 7: size-compared files first; a hash to come is a hash-compared file.
        let f = try EngineFixture()
        let report = completed(try await f.engine.sync(snapshot([
            try toCome(f, "a.txt", "to come"), sized("b.txt", "by size"), hashed("c.txt", "hashed"),
        ])))
        XCTAssertEqual(Array(report.uploaded), ["b.txt", "a.txt", "c.txt", SyncEngine.defaultMarkerPath])
    }

    func testAPreviewCountsAHashToComeAsAnUpload() async throws {
        let f = try EngineFixture()
        guard case .wouldRun(let preview) = try await f.engine.preview(snapshot([try toCome(f, "a.txt", "x")])) else {
            return XCTFail("expected a preview")
        }
        XCTAssertEqual(preview.uploads.map(\.path), ["a.txt"])
    }

    func testSettingADigestEndsTheHashToCome() {
        let digest = sha256("a")
        var entry = SyncEntry(path: "a", size: 1, digest: nil, source: .underRoot)
        entry.hashToCome = true
        XCTAssertTrue(entry.hashToCome)
        XCTAssertTrue(entry.isHashCompared)
        XCTAssertNil(entry.digest)
        entry.digest = digest
        XCTAssertFalse(entry.hashToCome)
        var list = SyncEntryList([entry])
        XCTAssertFalse(list.hashToCome(at: 0))
        var toCome = entry
        toCome.hashToCome = true
        XCTAssertNil(toCome.digest, "a hash to come has no digest yet")
        list = SyncEntryList([toCome])
        XCTAssertTrue(list.hashToCome(at: 0))
        XCTAssertTrue(list.isHashCompared(at: 0))
        list.setHashed(at: 0, digest: digest, size: 1)
        XCTAssertFalse(list.hashToCome(at: 0))
        XCTAssertNotEqual(SyncEntryList([toCome]), SyncEntryList([entry]))
    }
}
