// The planner takes the listing in byte order: each group's files come out sorted, a path
// listed twice is planned once (its first entry), and two names that differ only in Unicode
// normalisation are two files.

import BackupEngine
import BackupTestSupport
import BackupTree
import Foundation
import XCTest

final class RestorePlannerOrderTests: XCTestCase {
    func testTheListingIsPlannedInByteOrderOncePerPathAndNamesDifferingInNormalisationStayTwoFiles() throws {
        let dir = try TempDir("planner-order")
        let composed = "caf\u{E9}.txt"
        let decomposed = "cafe\u{301}.txt"
        XCTAssertEqual(composed, decomposed, "Swift takes them for one String")
        let listing = [
            RemoteFile(path: "z/last", size: 1), RemoteFile(path: decomposed, size: 2), RemoteFile(path: "a", size: 3),
            RemoteFile(path: composed, size: 4), RemoteFile(path: "a", size: 99), RemoteFile(path: SyncEngine.defaultMarkerPath, size: 5),
            RemoteFile(path: "m/é", size: 6),
        ]
        let marker = Marker(groups: [MarkerGroup(name: "zed", required: true, patterns: ["z/"], order: 0)])
        let planned = RestorePlanner.plan(
            marker: marker, source: SourceRef(identityKey: "k", markerRemoteId: nil, markerFingerprint: "f"), files: listing,
            target: RestoreTarget(root: dir.path("t")))
        XCTAssertEqual(planned.refused, [])
        let paths = planned.plan.files.map { Array($0.remotePath.utf8) }
        // The required group first; then the other files in byte order ("cafe\u{301}" sorts
        // before "caf\u{E9}": 0x65 < 0xC3).
        XCTAssertEqual(paths, [Array("z/last".utf8), Array("a".utf8), Array(decomposed.utf8), Array(composed.utf8), Array("m/é".utf8)])
        XCTAssertEqual(planned.plan.files.first { $0.remotePath == "a" }?.size, 3, "the first entry of a path listed twice")
    }
}
