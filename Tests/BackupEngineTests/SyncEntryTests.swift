import BackupEngine
import Foundation
import XCTest

final class SyncEntryTests: XCTestCase {
    private let digest = SHA256Digest(hex: SHA256Hasher.hex(Data("x".utf8)))
    private let metadata = EntryMetadata(mode: 0o4755, mtimeNanoseconds: -5, uid: 7, gid: UInt32.max, user: "ünï", group: "g r")

    func testEveryFieldOfAnEntryReadsBackAsSetWhateverItWasBefore() {
        let sources: [SyncSource] = [.underRoot, .absent, .file("/x/y"), .bytes(Data("b".utf8)), .file(""), .bytes(Data())]
        let kinds: [EntryKind] = [.file, .hardLink(to: "first"), .symlink(target: "t"), .folder]
        let metadatas: [EntryMetadata?] = [nil, metadata, EntryMetadata(mode: 0, mtimeNanoseconds: 0, uid: 0, gid: 0)]
        let mtimes: [Int64?] = [nil, 0, Int64.min, 42]
        for source in sources {
            for kind in kinds {
                for meta in metadatas {
                    for mtime in mtimes {
                        var entry = SyncEntry(
                            path: "p", size: 3, digest: digest, source: source, mtimeNanoseconds: mtime, kind: kind, metadata: meta)
                        XCTAssertEqual(entry.source, source)
                        XCTAssertEqual(entry.kind, kind)
                        XCTAssertEqual(entry.metadata, meta)
                        XCTAssertEqual(entry.metadata?.user, meta?.user)
                        XCTAssertEqual(entry.mtimeNanoseconds, mtime)
                        // Each field set alone leaves the others as they were.
                        for other in sources {
                            entry.source = other
                            XCTAssertEqual(entry.source, other)
                            XCTAssertEqual(entry.kind, kind)
                            XCTAssertEqual(entry.metadata, meta)
                        }
                        entry.source = source
                        for other in kinds {
                            entry.kind = other
                            XCTAssertEqual(entry.kind, other)
                            XCTAssertEqual(entry.source, source)
                            XCTAssertEqual(entry.metadata, meta)
                        }
                        entry.kind = kind
                        for other in metadatas {
                            entry.metadata = other
                            XCTAssertEqual(entry.metadata, other)
                            XCTAssertEqual(entry.source, source)
                            XCTAssertEqual(entry.kind, kind)
                            XCTAssertEqual(entry.mtimeNanoseconds, mtime)
                        }
                        entry.metadata = meta
                        XCTAssertEqual(
                            entry, SyncEntry(path: "p", size: 3, digest: digest, source: source, mtimeNanoseconds: mtime, kind: kind, metadata: meta))
                    }
                }
            }
        }
    }

    func testEntriesThatDifferInOneFieldAreNotEqual() {
        let base = SyncEntry(path: "p", size: 3, digest: digest, source: .underRoot, mtimeNanoseconds: 1, kind: .file, metadata: metadata)
        var changed = [base, base, base, base, base, base, base]
        changed[0].path = "q"
        changed[1].size = 4
        changed[2].digest = nil
        changed[3].source = .absent
        changed[4].mtimeNanoseconds = nil
        changed[5].kind = .hardLink(to: "o")
        changed[6].metadata?.group = "other"
        for entry in changed { XCTAssertNotEqual(entry, base) }
    }

    /// A scan holds one entry per file of the tree: the packed layout is what keeps a
    /// 1,000,000-file sync within its memory budget.
    func testAnEntryStaysPacked() {
        XCTAssertLessThanOrEqual(MemoryLayout<SyncEntry>.stride, 112)
    }
}
