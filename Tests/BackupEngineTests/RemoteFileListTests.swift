import BackupEngine
import XCTest

final class RemoteFileListTests: XCTestCase {
    private let samples = [
        RemoteFile(path: "b/photo ü \u{1F600}.jpg", size: 12, remoteId: "\"etag-1\""),
        RemoteFile(path: "a", size: 0, remoteId: nil),
        RemoteFile(path: "c/empty id", size: -1, remoteId: ""),
        RemoteFile(path: "d/\u{201B}odd", size: 5, remoteId: "x", foreignSpelling: true),
        RemoteFile(path: "", size: .max, remoteId: nil, foreignSpelling: true),
        RemoteFile(path: String(repeating: "deep/", count: 400) + "end", size: 7, remoteId: String(repeating: "i", count: 300)),
    ]

    /// Every field comes back as it went in, an id absent, empty or long included.
    func testEveryFieldRoundTrips() {
        let list = RemoteFileList(samples)
        XCTAssertEqual(Array(list), samples)
        for (index, file) in samples.enumerated() {
            XCTAssertEqual(list.path(at: index), file.path)
            XCTAssertEqual(list.size(at: index), file.size)
            XCTAssertEqual(list.remoteId(at: index), file.remoteId, "file \(index)")
            XCTAssertEqual(list.hasRemoteId(at: index), file.remoteId != nil)
            XCTAssertTrue(list.remoteId(at: index, is: file.remoteId), "file \(index)")
            XCTAssertFalse(list.remoteId(at: index, is: (file.remoteId ?? "") + "z"))
            XCTAssertEqual(list.foreignSpelling(at: index), file.foreignSpelling)
        }
        XCTAssertFalse(list.remoteId(at: 0, is: nil))
        XCTAssertFalse(list.remoteId(at: 1, is: ""))
    }

    func testSortingIsByTheBytesOfThePathsAndKeepsListedOrderForEqualOnes() {
        let list: RemoteFileList = [
            RemoteFile(path: "a/b", size: 1), RemoteFile(path: "a.b", size: 2), RemoteFile(path: "a/b", size: 3), RemoteFile(path: "A", size: 4),
        ]
        XCTAssertEqual(list.sortedByPath().map(\.size), [4, 2, 1, 3])
        XCTAssertEqual(list.sortedIndicesByPath(), [3, 1, 0, 2])
        XCTAssertLessThan(list.comparePath(at: 1, with: "a/b"), 0)
        XCTAssertEqual(list.comparePaths(0, 2), 0)
    }

    /// A path listed twice keeps its first listing, the listing's order kept; foreign
    /// spellings are never merged.
    func testARepeatedPathKeepsItsFirstListing() {
        let list: RemoteFileList = [
            RemoteFile(path: "x", size: 1, remoteId: "first"), RemoteFile(path: "y", size: 2),
            RemoteFile(path: "x", size: 9, remoteId: "second"), RemoteFile(path: "z", size: 3, foreignSpelling: true),
            RemoteFile(path: "z", size: 4, foreignSpelling: true), RemoteFile(path: "x", size: 8),
        ]
        let (unique, repeated) = list.removingRepeatedPaths()
        XCTAssertEqual(Array(unique), [
            RemoteFile(path: "x", size: 1, remoteId: "first"), RemoteFile(path: "y", size: 2),
            RemoteFile(path: "z", size: 3, foreignSpelling: true), RemoteFile(path: "z", size: 4, foreignSpelling: true),
        ])
        XCTAssertEqual(repeated, ["x", "x"])
        XCTAssertEqual(RemoteFileList(samples.prefix(2)).removingRepeatedPaths().1, [])
    }

    func testListsAppendAndFilterInOrder() {
        var list = RemoteFileList(samples.prefix(2))
        list.append(contentsOf: RemoteFileList(samples.suffix(2)))
        XCTAssertEqual(Array(list), Array(samples.prefix(2)) + Array(samples.suffix(2)))
        XCTAssertEqual(Array(list.removing { $0 % 2 == 1 }), [samples[0], samples[4]])
        XCTAssertNotEqual(list, RemoteFileList(samples))
    }
}
