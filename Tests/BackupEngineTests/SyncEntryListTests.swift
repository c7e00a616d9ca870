import BackupEngine
import XCTest

final class SyncEntryListTests: XCTestCase {
    private let digest = SHA256Digest(hex: String(repeating: "cd", count: 32))

    private var samples: [SyncEntry] {
        var linked = SyncEntry(path: "b/second name", size: 3, digest: digest, source: .underRoot)
        linked.kind = .hardLink(to: "a/first")
        return [
            SyncEntry(path: "a/first", size: 3, digest: digest, source: .underRoot,
                      metadata: EntryMetadata(mode: 0o100644, mtimeNanoseconds: -7, uid: 1000, gid: 100, user: "ann", group: "staff")),
            linked,
            SyncEntry(path: "c/sized ü \u{1F600}", size: 12, digest: nil, source: .underRoot, mtimeNanoseconds: 1_700_000_000_123_456_789),
            .absent("d/gone", size: 9, digest: digest),
            SyncEntry(path: "e/bytes", size: 2, digest: nil, source: .bytes(Data("hi".utf8))),
            SyncEntry(path: "", size: 0, digest: nil, source: .file("/tmp/x")),
            SyncEntry(path: String(repeating: "deep/", count: 300) + "end", size: .max, digest: digest, source: .underRoot),
        ]
    }

    /// Every field of every kind of entry comes back as it went in.
    func testEveryFieldRoundTrips() {
        let list = SyncEntryList(samples)
        XCTAssertEqual(list.count, samples.count)
        XCTAssertEqual(Array(list), samples)
        for (index, entry) in samples.enumerated() {
            XCTAssertEqual(list[index], entry, "entry \(index)")
            XCTAssertEqual(list.path(at: index), entry.path)
            XCTAssertEqual(list.size(at: index), entry.size)
            XCTAssertEqual(list.digest(at: index), entry.digest)
            XCTAssertEqual(list.isLocalFile(at: index), entry.isLocalFile, "entry \(index)")
            XCTAssertEqual(list.pathless(at: index).metadata, entry.metadata)
            XCTAssertTrue(list.pathEquals(index, entry.path))
        }
    }

    /// An entry set in place, its path included, changes only that entry.
    func testAnEntrySetInPlaceChangesOnlyItself() {
        var list = SyncEntryList(samples)
        var changed = samples[2]
        changed.path = "c/a longer name than before"
        changed.digest = digest
        changed.source = .absent
        list[2] = changed
        var expected = samples
        expected[2] = changed
        XCTAssertEqual(Array(list), expected)
        list.setHashed(at: 0, digest: SHA256Digest(hex: String(repeating: "01", count: 32))!, size: 99)
        XCTAssertEqual(list[0].size, 99)
        XCTAssertEqual(list[0].hash, String(repeating: "01", count: 32))
        XCTAssertEqual(list[0].metadata, samples[0].metadata)
    }

    /// Removing and sorting say where each entry went, so positions held elsewhere follow.
    func testRemovingAndSortingSayWhereEachEntryWent() {
        var list: SyncEntryList = [.absent("z"), .absent("b"), .absent("y"), .absent("a")]
        let removed = list.remove(at: [2])
        XCTAssertEqual(list.map(\.path), ["z", "b", "a"])
        XCTAssertEqual(removed[0], 0)
        XCTAssertEqual(removed[1], 1)
        XCTAssertEqual(removed[3], 2)
        let sorted = list.sortByPath()
        XCTAssertEqual(list.map(\.path), ["a", "b", "z"])
        XCTAssertEqual(sorted, [2, 1, 0])
        XCTAssertEqual(list.sortedByPath(), [0, 1, 2])
    }

    /// Paths compare by their bytes, as the state and the listing are sorted.
    func testPathsCompareByTheirBytes() {
        let list: SyncEntryList = [.absent("a/b"), .absent("a.b"), .absent("é"), .absent("e\u{301}")]
        XCTAssertGreaterThan(list.comparePaths(0, 1), 0)  // "/" sorts after "."
        XCTAssertNotEqual(list.comparePaths(2, 3), 0)  // two spellings are two files
        XCTAssertLessThan(list.comparePath(at: 1, with: "a/b"), 0)
        XCTAssertEqual(list.sortedByPath(), [1, 0, 3, 2])
    }

    func testEqualityComparesTheEntriesInOrder() {
        XCTAssertEqual(SyncEntryList(samples), SyncEntryList(samples))
        XCTAssertNotEqual(SyncEntryList(samples), SyncEntryList(samples.reversed()))
        XCTAssertNotEqual(SyncEntryList(samples), SyncEntryList(samples.dropLast()))
    }

    /// The fingerprint updates of a scan name their entries by position and read as paths.
    func testFingerprintUpdatesReadTheirPathsFromTheEntries() {
        let print = Fingerprint(size: 3, mtimeNanoseconds: 5, inode: 7, digest: digest!)
        let entries = SyncEntryList(samples)
        let updates = FingerprintUpdates(entries: entries, items: [.init(entry: 2, fingerprint: print), .init(entry: 0, fingerprint: print)])
        XCTAssertEqual(updates.map(\.path), [samples[2].path, samples[0].path])
        XCTAssertEqual(updates, [FingerprintUpdate(path: samples[2].path, fingerprint: print), FingerprintUpdate(path: "a/first", fingerprint: print)])
    }

    func testAPathListHoldsItsPathsInOrder() {
        var list: PathList = ["b", "a"]
        list.append("ü/\u{1F600}")
        list.append(contentsOf: ["", "z"])
        XCTAssertEqual(Array(list), ["b", "a", "ü/\u{1F600}", "", "z"])
        XCTAssertEqual(list, PathList(["b", "a", "ü/\u{1F600}", "", "z"]))
        XCTAssertNotEqual(list, ["b", "a"])
    }
}
